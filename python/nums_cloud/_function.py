"""The local backend's function process: ``python -m nums_cloud._function`` serves the
function loop (the one ``nums-cloud function`` and AWS Lambda's ``bootstrap`` run) until
the session that started it stops it. Imports nothing but the extension module."""

import signal

from nums_cloud._native import serve_function

if __name__ == "__main__":
    # As the nums-cloud binary's processes: Ctrl-C in the terminal ends them at once (the
    # session that started them stops its compute and starts new ones).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    serve_function()
