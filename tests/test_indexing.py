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


class _At(np.ndarray):
    """NumPy arrays with JAX's `x.at[index].set(v)`: NumPy's `x[index] = v` on a copy."""

    @property
    def at(self):
        base = self

        class Index:
            def __getitem__(self, index):
                class Setter:
                    def set(self, v):
                        out = np.array(base.view(np.ndarray))
                        out[index] = np.asarray(getattr(v, "v", v))
                        return out.view(_At)
                return Setter()
        return Index()


ASSIGNMENTS = [
    "A.at[0].set(1.5)",
    "A.at[1:6:2, ::-2].set(0)",
    "A.at[A > 0].set(0)",
    "A.at[:, 3].set(w)",
    "T.at[T[:, :, 0] > 0].set(v)",
    "T.at[:, M[:3, 0]].set(-1)",
    "A.at[:, [4, 0, 0]].set(B[:, :3])",
    "I.at[2, [1, 3]].set(J[0, :2])",
    "T.at[[0, 2], :, 1].set(C[:2, :3])",
    "T.at[1, :, [0, 2]].set(C[:2, :3])",
    "X.at[..., 1].set(A[:6, :5])",
    "A.at[None, 2:4].set(P[2:4])",
    "F.at[:, 0].set(2.7)",
    "I.at[I < 0].set(2.7)",
    "A.at[argsort(w)[:3]].set(B[0])",
    "M.at[0].set(True)",
    "A.at[[1, 5]].set(B[:2])",
    "sum(A.at[2:4, 1].set(100.0), axis=0)",
    "A.at[1].set(2).at[:, 0].set(I[:, 0])",
]


def test_assignments_match_numpy(tmp_path):
    got = run_table(tmp_path, ASSIGNMENTS, {"url": f"file://{tmp_path / 'store'}"})
    inputs = {k: v[0].view(_At) for k, v in INPUTS.items()}
    failures = []
    for expr in ASSIGNMENTS:
        try:
            assert_matches(expr, got[expr], numpy_answer(expr, inputs).view(np.ndarray))
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    assert not failures, "\n".join(failures)


def test_assignment_shares_the_blocks_it_does_not_touch(tmp_path):
    """A new version reads x's untouched blocks in place: with the naive scheduler (every
    intermediate written), `sum(X.at[5, :3].set(0))` writes one block more than `sum(X)`,
    not a copy of X's ten."""
    import json

    from nums import job_text, run

    def measured(name, expr):
        d = tmp_path / name
        d.mkdir()
        arrays = {"X": {"random": "normal", "shape": [400, 100], "seed": 3, "block": [40, 100]}, "s": expr}
        job = d / "job.toml"
        job.write_text(job_text(arrays, {"s": str(d / "s.npy")}, storage={"url": f"file://{d / 'store'}"},
                                compute={"scheduler": "naive"}))
        run(job, "--stats", str(d / "stats.json"))
        return json.loads((d / "stats.json").read_text()), np.load(d / "s.npy")

    (put, s_put), (plain, s) = measured("put", "sum(X.at[5, :3].set(0.0), axis=0)"), measured("plain", "sum(X, axis=0)")
    block = 40 * 100 * 8
    # One Put task, and the few tiny ones that make v (0.0 as a block of X's dtype).
    assert put["tasks"] - plain["tasks"] < 10, (put["tasks"], plain["tasks"])
    extra = put["s3_bytes_written"] - plain["s3_bytes_written"]
    assert 0 < extra < 1.5 * block, extra
    np.testing.assert_array_equal(s_put[3:], s[3:])
    assert (s_put[:3] != s[:3]).all()


def _in_place(f):
    """NumPy's in-place function as the job files' one: the changed copy returned."""
    def g(a, *args, **kwargs):
        out = np.array(a.view(np.ndarray))
        f(out, *args, **kwargs)
        return out
    return g


IN_PLACE = [
    "put(A, [3, -1, 7, 3], [1.5, 2.5])",
    "put(I, J[0] * 9, [70, 80, 90], mode='wrap')",
    "put(F, [-40, 2, 90], 2.7, mode='clip')",
    "put(T, argsort(w)[:3], C[0, :2])",
    "place(A, A > 0, [1.0, 2.0, 3.0])",
    "place(I, M, [7.9, 8])",
    "putmask(A, A < 0, B)",
    "putmask(I, I < 0, [7, 8, 9])",
    "put_along_axis(A, argsort(A, axis=1)[:, :2], 0.0, axis=1)",
    "put_along_axis(B, argmax(B, axis=0)[None], -B[:1], axis=0)",
    "A.at[A > 0].set(B[A > 0])",
    "sum(put(A, [0, 34], [-1.0, -2.0]), axis=0)",
]


def test_in_place_functions_return_numpys_changed_array(tmp_path):
    """put, place, putmask and put_along_axis in a job return the array NumPy's call
    leaves (job files have no in-place change); `x.at[mask].set(y[mask])` takes one
    value per selected element."""
    got = run_table(tmp_path, IN_PLACE, {"url": f"file://{tmp_path / 'store'}"})
    inputs = {k: v[0].view(_At) for k, v in INPUTS.items()}
    inputs.update({n: _in_place(getattr(np, n)) for n in ("put", "place", "putmask", "put_along_axis")})
    failures = []
    for expr in IN_PLACE:
        try:
            assert_matches(expr, got[expr], np.asarray(numpy_answer(expr, inputs)).view(np.ndarray))
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    assert not failures, "\n".join(failures)
