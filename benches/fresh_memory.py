"""What touching memory costs on this machine: pages the guest has not used lately against
pages it just freed, for anonymous memory (a new buffer) and for the page cache (a new
file). On a VM whose kernel reports free pages to its host (Firecracker with
`page_reporting`, as this project's machines and AWS Lambda are), a page handed back
faults on the host when it is touched again: that, not the copy, is what a fresh buffer or
a freshly written file costs. Prints MB/s for each case, best of `--repeat`.

    .cache/peers-venv/bin/python benches/fresh_memory.py     # after scripts/bench_peers.sh
"""
import argparse
import os
import tempfile
import time

import numpy as np


def touch_new(mb):
    """A new buffer of `mb` MB, written once: MB/s."""
    t = time.perf_counter()
    a = np.ones(mb << 17)  # float64: mb MiB / 8 bytes
    s = time.perf_counter() - t
    del a
    return mb / s


def write_new_file(path, mb, block):
    """A new file of `mb` MB written in `block`-sized writes: MB/s."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    t = time.perf_counter()
    for i in range(0, mb << 20, len(block)):
        os.pwrite(fd, block, i)
    s = time.perf_counter() - t
    os.close(fd)
    return mb / s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    mb = args.mb
    block = os.urandom(32 << 20)
    rows = {"new buffer, pages not used lately": [], "new buffer, pages just freed": [],
            "new file, pages not used lately": [], "new file, pages just freed": []}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        for r in range(args.repeat):
            # Let the host take back what earlier rounds freed (reporting runs every ~2 s).
            time.sleep(5)
            rows["new buffer, pages not used lately"].append(touch_new(mb))
            rows["new buffer, pages just freed"].append(touch_new(mb))
            time.sleep(5)
            f = os.path.join(d, f"f{r}")
            rows["new file, pages not used lately"].append(write_new_file(f, mb, block))
            os.unlink(f)
            rows["new file, pages just freed"].append(write_new_file(f, mb, block))
            os.unlink(f)
    print(f"\nTouching {mb} MB (best of {args.repeat}):\n")
    print("| case | MB/s |")
    print("|---|---|")
    for k, v in rows.items():
        print(f"| {k} | {max(v):,.0f} |")
    cmdline = open("/proc/cmdline").read()
    reporting = [w for w in cmdline.split() if w.startswith("page_reporting")]
    print(f"\nkernel: {' '.join(reporting) or 'no page_reporting option on the command line'}")


if __name__ == "__main__":
    main()
