"""The progress of computes as Python users see it: in a script or a terminal, lines (or a
bar) on standard error; in a notebook, an HTML display updated in place. Both move with
block tasks (the local function processes report as they run), name the stage and end
at the plan's totals. Asserted on what was shown, never on its timing."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nums_cloud
import nums_cloud.numpy as nps
from nums_cloud import _progress

# 8 row blocks of 2,000 x 100 float64 over 2 workers (random values made in the default
# blocks, then re-blocked: the task count is the session's, never assumed here).
PERSIST = """
import nums_cloud, nums_cloud.numpy as nps
nums_cloud.init(storage={storage!r}, workers=2, memory_mb=512, in_process_mb=0, {progress})
x = nps.random.default_rng(7).standard_normal((16000, 100)).block(2000, 100)
nums_cloud.persist(x)
print(nums_cloud.session().counts()["tasks"])
"""


def python_env(**extra):
    root = str(Path(nums_cloud.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    env.pop("NUMS_CLOUD_PROGRESS", None)
    env.update(extra)
    return env


def persist_in_a_script(tmp_path, progress, **env):
    code = PERSIST.format(storage=f"file://{tmp_path / 'store'}", progress=progress)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=python_env(**env))
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1]), p.stderr


def lines_of(stderr):
    return re.findall(r"^progress: (.+?): (\d+)/(\d+) tasks, (.+?) moved, ETA (\S+)", stderr, re.M)


def test_a_script_shows_progress_on_standard_error(tmp_path):
    """`init(progress=True)` in a script whose standard error is a pipe: lines naming the
    stage, in tasks of the plan's total, ending at N/N with the bytes moved; none with
    `progress=False` (the default on a pipe); `NUMS_CLOUD_PROGRESS=1` turns it on."""
    tasks, err = persist_in_a_script(tmp_path, "progress=True")
    lines = lines_of(err)
    assert lines and all(l[0] == "main" for l in lines), err
    stage, done, total, moved, eta = lines[-1]
    assert int(done) == int(total) == tasks >= 8, (lines, tasks)
    assert moved.endswith("MB"), lines[-1]
    _, err = persist_in_a_script(tmp_path, "progress=False")
    assert "progress:" not in err, err
    _, err = persist_in_a_script(tmp_path, "")
    assert "progress:" not in err, err
    _, err = persist_in_a_script(tmp_path, "", NUMS_CLOUD_PROGRESS="1")
    assert lines_of(err), err


class Recorder:
    """Stands in for the notebook's display: keeps what it was given, and on which thread."""
    seen = []
    threads = set()

    def __call__(self, update):
        import threading

        Recorder.threads.add(threading.get_ident())
        Recorder.seen.append(dict(update))


def test_a_notebook_gets_each_update_as_a_dict_on_the_calling_thread(tmp_path, monkeypatch):
    """In a notebook `init` hands the engine a display of its own: it is called on the
    thread that computes (the latest update, every few tens of milliseconds), with dicts
    that name the stage, never go back and end, once, at the plan's totals."""
    import threading

    monkeypatch.setattr(_progress, "in_notebook", lambda: True)
    monkeypatch.setattr(_progress, "NotebookProgress", Recorder)
    Recorder.seen, Recorder.threads = [], set()
    nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=512,
                    in_process_mb=0)
    try:
        x = nps.random.default_rng(7).standard_normal((16000, 100)).block(2000, 100)
        nums_cloud.persist(x)
        counts = nums_cloud.session().counts()
    finally:
        nums_cloud.session().close()
    threads, seen = Recorder.threads, Recorder.seen
    assert threads == {threading.get_ident()}, threads
    assert seen and seen[-1]["finished"], seen[-3:]
    last = seen[-1]
    assert last["tasks_done"] == last["tasks_total"] == counts["tasks"] >= 8, (last, counts)
    assert last["invocations_done"] == counts["invocations"], (last, counts)
    assert any(u["stage"] == "main" for u in seen), seen
    assert last["line"].startswith(f"main: {counts['tasks']}/{counts['tasks']} tasks, "), last
    done = [u["tasks_done"] for u in seen]
    assert done == sorted(done), done
    assert any(u["eta_seconds"] for u in seen), seen


def test_the_notebook_display_is_html_of_the_engines_line():
    """The HTML a notebook shows: a <progress> bar at tasks done of the total, the
    engine's line escaped, the note under it, and whether it is done."""
    u = {"stage": "fit: Newton", "tasks_done": 3, "tasks_total": 8, "bytes_moved": 10,
         "eta_seconds": 4.0, "elapsed_seconds": 1.0, "note": "w: pass 2 of 5 assumed <x>",
         "finished": False, "invocations_done": 0,
         "line": "fit: Newton: 3/8 tasks, 10 B moved, ETA 4s"}
    page = _progress.render_html(u)
    assert '<progress value="3" max="8"' in page
    assert "<code>fit: Newton: 3/8 tasks, 10 B moved, ETA 4s</code>" in page
    assert "w: pass 2 of 5 assumed &lt;x&gt;" in page
    assert 'data-state="running"' in page
    assert 'data-state="done"' in _progress.render_html({**u, "finished": True, "note": ""})
    # No total yet: a bar that is not divided by zero.
    assert 'max="1"' in _progress.render_html({**u, "tasks_done": 0, "tasks_total": 0})


def test_a_plain_python_is_no_notebook():
    assert not _progress.in_notebook()


def test_the_notebook_display_updates_one_output_in_place():
    """With IPython installed: the first update displays, the next ones update the same
    display id, and a finished compute lets the next compute start a display of its own."""
    display = pytest.importorskip("IPython.display")
    shown, updated = [], []

    class Handle:
        def update(self, page):
            updated.append(page.data)

    def fake_display(page, display_id=False):
        shown.append(page.data)
        return Handle()

    orig = display.display
    display.display = fake_display
    try:
        p = _progress.NotebookProgress()
        base = {"stage": "main", "tasks_done": 1, "tasks_total": 8, "note": "", "finished": False,
                "line": "main: 1/8 tasks"}
        p(base)
        p({**base, "tasks_done": 8, "finished": True, "line": "main: 8/8 tasks"})
        p(base)
    finally:
        display.display = orig
    assert len(shown) == 2 and len(updated) == 1, (shown, updated)
    assert "8/8" in updated[0]
