"""NumS's README examples at their own sizes, with only the imports changed (issue 25).

The examples are read from a copy of nums-project/nums (not part of this repository):

    git clone https://github.com/nums-project/nums /tmp/nums
    pip install ./python
    python benches/nums_examples.py /tmp/nums/README.md [--scale 1] [--workers 2] [--memory-mb 2048]

Every ```python block of the README runs in a process of its own, in order, in one
scratch folder (the I/O example writes `x.nps` there), after these changes and no other:
`import nums.numpy as nps` -> `import nums_cloud.numpy as nps`, `import nums` -> `import
nums_cloud as nums`, `from nums.models.glms import` -> `from nums_cloud.models import`.
The basic logistic-regression blocks (imports, data, training, evaluation) run as one
program, as the README means them. Blocks that need data the README does not give
(HIGGS.csv, "path/to/csv") or configure other systems (`nums.core.settings`: Ray, Dask,
MPI) are listed as skipped, with the reason. `--scale` divides every `10**k` size of the
README by that factor (1: the README's own sizes). Prints each block's wall time (the
process's whole run: import, session start, computes, `get`), its output, and whether it
raised.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORTS = [
    (r"^import nums\.numpy as nps$", "import nums_cloud.numpy as nps"),
    (r"^import nums$", "import nums_cloud as nums"),
    (r"^from nums\.models\.glms import ", "from nums_cloud.models import "),
]
SKIP = [
    ("HIGGS.csv", "needs the HIGGS dataset (2.6 GB download)"),
    ("path/to/csv", "a placeholder path"),
    ("nums.core import settings", "configures NumS's own backends (Ray, Dask, MPI)"),
]


def blocks(readme):
    return re.findall(r"```python\n(.*?)```", readme, flags=re.S)


def changed(code, scale):
    lines = []
    for line in code.splitlines():
        for pat, repl in IMPORTS:
            line = re.sub(pat, repl, line)
        lines.append(line)
    code = "\n".join(lines) + "\n"
    if scale != 1:
        code = re.sub(r"10\*\*(\d+)", lambda m: f"(10**{m.group(1)} // {scale})", code)
        code = code.replace("size = (10**8 // ", "size = 2 * (10**8 // 2 // ")
    return code


def programs(readme, scale):
    """(title, code or None, why skipped) in README order; the logistic-regression
    walk-through's blocks joined into one program."""
    out, lr = [], []
    for code in blocks(readme):
        why = next((w for k, w in SKIP if k in code), None)
        if why:
            out.append((code.strip().splitlines()[-1][:60], None, why))
            continue
        if "LogisticRegression" in code or "X_train" in code or "model." in code:
            lr.append(code)
            continue
        title = "basics" if "permutation" in code else "I/O" if "nums.write" in code else "example"
        out.append((title, changed(code, scale), None))
    if lr:
        out.append(("logistic regression", changed("\n".join(lr), scale), None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("readme", type=Path)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-mb", type=int, default=2048)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nums-examples-"))
    env = dict(os.environ, NUMS_CLOUD_STORAGE=f"file://{work}/store",
               NUMS_CLOUD_WORKERS=str(a.workers), NUMS_CLOUD_MEMORY_MB=str(a.memory_mb),
               NUMS_CLOUD_PROGRESS="0")
    rows = []
    for title, code, why in programs(a.readme.read_text(), a.scale):
        if code is None:
            rows.append((title, "skipped", why))
            continue
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", code], cwd=work, env=env,
                           capture_output=True, text=True)
        s = time.perf_counter() - t
        ok = p.returncode == 0
        print(f"--- {title}: {'ok' if ok else 'FAILED'} in {s:.1f} s\n{p.stdout.strip()}", flush=True)
        if not ok:
            print(p.stderr[-3000:], flush=True)
        rows.append((title, f"{s:.1f} s" if ok else "failed", p.stdout.strip().replace("\n", "; ")[:100]))
    print(f"\n| example (README sizes / {a.scale}) | result | output |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
