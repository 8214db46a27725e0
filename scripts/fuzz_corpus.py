"""Writes the seed corpus of the check fuzzer (driver/tests/fuzz/): job files taken from
the example and the end-to-end tests, with file inputs replaced by generated arrays of the
same shapes (or by in.npy / in.csv, which the fuzzer writes next to each case), and the
expressions of the conformance and end-to-end tables, one a line.
Run from the repository root: .venv/bin/python scripts/fuzz_corpus.py"""
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import test_bad_input  # noqa: E402
import test_conformance  # noqa: E402
import test_e2e  # noqa: E402
from nums import job_text  # noqa: E402

OUT = REPO / "driver" / "tests" / "fuzz"
CORPUS = OUT / "corpus"


def inputs_as_arrays(inputs, blocks=0):
    """The tables' inputs as arrays a job makes itself, same shapes, dtypes and blocks."""
    arrays = {}
    for i, (name, (arr, ragged, other)) in enumerate(inputs.items()):
        block = [ragged, other][blocks]
        shape = list(arr.shape)
        if arr.dtype == bool:
            arrays[name] = {"expr": f"{name}_u < 0.5", "block": block}
            arrays[f"{name}_u"] = {"random": "uniform", "shape": shape, "seed": i}
        elif arr.dtype.kind == "i":
            arrays[name] = {"random": "integers", "low": -6, "high": 7, "shape": shape, "seed": i, "block": block}
        elif arr.dtype == "float32":
            arrays[name] = {"expr": f"{name}_n.astype('float32')", "block": block}
            arrays[f"{name}_n"] = {"random": "normal", "shape": shape, "seed": i}
        else:
            arrays[name] = {"random": "normal", "shape": shape, "seed": i, "block": block}
    return arrays


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    CORPUS.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "quickstart.toml", CORPUS / "quickstart.toml")

    cases = test_conformance.CASES
    chunk = 24
    for n, start in enumerate(range(0, len(cases), chunk)):
        arrays = inputs_as_arrays(test_conformance.INPUTS, blocks=n % 2)
        outputs = {}
        for i, expr in enumerate(cases[start:start + chunk]):
            arrays[f"c{i}"] = expr
            outputs[f"c{i}"] = f"out/c{i}.npy"
        compute = {"scheduler": ["lshs", "naive"][n % 2], "memory_mb": 1024}
        (CORPUS / f"conformance{n}.toml").write_text(job_text(arrays, outputs, name="conformance", compute=compute))

    e2e_inputs = {"A": ([7, 5], [3, 2]), "B": ([7, 5], [4, 3]), "C": ([5, 4], [2, 3]),
                  "v5": ([5], [2]), "v7": ([7], [3]), "T": ([4, 3, 5], [3, 2, 2])}
    arrays = {k: {"random": "normal", "shape": s, "seed": i, "block": b} for i, (k, (s, b)) in enumerate(e2e_inputs.items())}
    outputs = {}
    for i, (expr, _) in enumerate(test_e2e.CASES):
        arrays[f"r{i}"] = expr
        outputs[f"r{i}"] = f"r{i}.npy"
    (CORPUS / "e2e_cases.toml").write_text(job_text(arrays, outputs, name="cases-file"))

    small = {
        "blocks": ({"X": {"random": "normal", "shape": [64, 9], "seed": 3, "block": [13, 3]},
                    "G": "X.T @ X", "s": "sum(X, axis=1)"}, {"X": "X.npy", "G": "G.npy", "s": "s.npy"}),
        "zarr_out": ({"X": {"random": "uniform", "shape": [7, 5], "seed": 9, "block": [3, 4]},
                      "M": "X > 0.5", "S": "sum(X, axis=0)"}, {"X": "X.npy", "M": "out/M.zarr", "S": "out/S.zarr"}),
        "masks": ({"X": {"random": "normal", "shape": [10, 3], "seed": 1, "block": [4, 3]},
                   "m": "X[:, 0] > 0", "Y": "X[m]", "Z": "X[X[:, 1] > 0, :2].sum(axis=0)", "n": "~m"},
                  {"Y": "Y.npy", "Z": "Z.npy"}),
        "intermediates": ({"X": {"ones": [6, 6], "block": [4, 4]}, "Y": "(X + 1) * 2"}, {"Y": "Y.npy"}),
        "memory": ({"X": {"random": "normal", "shape": [3000, 3000], "seed": 1, "block": [3000, 3000]},
                    "Y": "X * 2"}, {"Y": "Y.npy"}),
        "loads": ({"N": {"load": "in.npy", "block": [4, 2]}, "D": {"load": "in.csv", "block": [3, 2]},
                   "Y": "N @ D.T + D.sum(axis=0)[None, :2] @ N.T[:2]"}, {"Y": "Y.npy"}),
        "full": ({"Z": {"zeros": [100, 10]}, "O": {"ones": [10], "dtype": "int64"},
                  "F": {"full": [5, 10], "value": 2.5, "dtype": "float32"},
                  "R": {"random": "integers", "low": 0, "high": 10, "shape": [100], "seed": 4},
                  "E": "einsum('ij,j->i', Z, O) + R", "K": {"expr": "concatenate((Z[:5], F), axis=0)", "block": [3, 3]}},
                 {"E": "E.npy", "K": "K.zarr"}),
    }
    for name, (arrays, outputs) in small.items():
        (CORPUS / f"{name}.toml").write_text(job_text(arrays, outputs))
    # The bad inputs (without the S3 one): errors are what the fuzzer starts from there.
    for name, (text, *_rest) in test_bad_input.BAD.items():
        if "s3://" not in text:
            (CORPUS / f"bad_{name}.toml").write_text(text)

    exprs = list(cases) + [e for e, _ in test_e2e.CASES] + list(v[0] for v in test_bad_input.EXPR_ERRORS.values())
    (OUT / "expressions.txt").write_text("\n".join(dict.fromkeys(exprs)) + "\n")
    print(f"{len(list(CORPUS.iterdir()))} corpus files, {len(exprs)} expressions in {OUT}")


if __name__ == "__main__":
    main()
