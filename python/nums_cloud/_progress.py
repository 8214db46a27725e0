"""The progress of computes in a notebook: an HTML display updated in place (IPython's
``display`` with a display id; no widget library needed). In a terminal or a script the
engine itself writes the progress to standard error (a bar on a terminal, else a line
now and then); both say the same: the stage that runs, block tasks done of the plan's
total, store bytes moved and the projected time left."""

import html
import sys

__all__ = ["in_notebook", "render_html", "NotebookProgress"]


def in_notebook():
    """Whether this process is a notebook's kernel (Jupyter, VS Code, Colab): IPython
    is loaded and its shell has a kernel. IPython is never imported here for the question."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def render_html(update):
    """One progress update (the engine's dict: ``stage``, ``tasks_done``, ``tasks_total``,
    ``bytes_moved``, ``eta_seconds``, ``note``, ``finished``, ``line``) as HTML: a bar (a
    ``<progress>`` element) and the engine's own line of text, the note under it."""
    done, total = update["tasks_done"], update["tasks_total"]
    line = html.escape(update["line"])
    note = update.get("note") or ""
    note_html = f'<div style="opacity:0.7">{html.escape(note)}</div>' if note else ""
    state = "done" if update.get("finished") else "running"
    return (
        f'<div class="nums-cloud-progress" data-state="{state}">'
        f'<progress value="{done}" max="{max(total, 1)}" style="width:24em"></progress> '
        f"<code>{line}</code>{note_html}</div>"
    )


class NotebookProgress:
    """The callable ``init`` hands the engine in a notebook: each compute's updates
    redraw one display in the cell that runs it; the next compute starts another."""

    def __init__(self):
        self._handle = None

    def __call__(self, update):
        from IPython.display import HTML, display

        page = HTML(render_html(update))
        if self._handle is None:
            self._handle = display(page, display_id=True)
        else:
            self._handle.update(page)
        if update.get("finished"):
            self._handle = None
