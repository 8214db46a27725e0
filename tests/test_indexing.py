"""Indexing with data and assignment (issue 26, item 7), against NumPy on the conformance
table's ragged inputs: masks of several axes, several advanced indices broadcast together,
integer arrays as indices, and `x.at[index].set(v)` (NumPy's `x[index] = v` on a copy)."""
import numpy as np

from test_conformance import INPUTS, assert_matches, numpy_answer, run_table

READS = [
    "A[A > 0]",
    "T[T > 0.5]",
    "I[I % 2 == 0]",
    "T[T[:, :, 0] > 0]",
    "X[X[:, :, 1] < 0.3]",
    "A[[0, 2, 6], [1, 1, 4]]",
    "A[[0, 2, 6], [3]]",
    "T[[0, 3], :, [1, 4]]",
    "T[:, [0, 2], [1, 4]]",
    "T[1, :, [0, 2]]",
    "X[:, [1, 0], 2]",
    "X[2:5, [1, 0, 4], ::2]",
    "A[argsort(A[:, 0])]",
    "w[argsort(w)]",
    "A[argmax(A, axis=0), [0, 1, 2, 3, 4]]",
    "A[I % 7, J]",
    "T[I[:4, :3] % 4]",
    "A[:, J[0] - 1]",
]


def test_reads_match_numpy(tmp_path):
    got = run_table(tmp_path, READS, {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in READS:
        try:
            assert_matches(expr, got[expr], numpy_answer(expr))
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    assert not failures, "\n".join(failures)
