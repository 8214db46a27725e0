"""End to end: job files run by the real binary with real local function processes, on
the file store and on Garage (a real S3 server), results checked against NumPy."""
import json

import numpy as np
import pytest

from nums import assert_close, job_text, run

rng = np.random.default_rng(42)
A = rng.normal(size=(7, 5))
B = rng.normal(size=(7, 5))
C = rng.normal(size=(5, 4))
v5 = rng.normal(size=5)
v7 = rng.normal(size=7)
T = rng.normal(size=(4, 3, 5))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# (expression, NumPy's answer); inputs in ragged blocks: A, B 7x5 in 3x4; C 5x4 in 4x3;
# v5 in 2; v7 in 3; T 4x3x5 in 3x2x2.
CASES = [
    ("A + B", A + B),
    ("A - 2.5", A - 2.5),
    ("2.5 - A", 2.5 - A),
    ("A * B", A * B),
    ("A / (B + 10)", A / (B + 10)),
    ("3 / (A + 10)", 3 / (A + 10)),
    ("A ** 2", A ** 2),
    ("2 ** A", 2 ** A),
    ("-A", -A),
    ("A > B", A > B),
    ("A <= 0.1", A <= 0.1),
    ("A == A", A == A),
    ("A != B", A != B),
    ("(A > 0) & (B < 0)", (A > 0) & (B < 0)),
    ("(A > 0) | (B < 0)", (A > 0) | (B < 0)),
    ("~(A > 0)", ~(A > 0)),
    ("exp(A)", np.exp(A)),
    ("log(abs(A) + 1)", np.log(np.abs(A) + 1)),
    ("sqrt(abs(A))", np.sqrt(np.abs(A))),
    ("sigmoid(A)", sigmoid(A)),
    ("A @ C", A @ C),
    ("A @ v5", A @ v5),
    ("v7 @ A", v7 @ A),
    ("v5 @ v5", np.array(v5 @ v5)),
    ("A.T", A.T),
    ("A.T @ A", A.T @ A),
    ("transpose(C) @ A.T", C.T @ A.T),
    ("sum(A)", np.array(A.sum())),
    ("sum(A, axis=0)", A.sum(axis=0)),
    ("sum(A, axis=1)", A.sum(axis=1)),
    ("sum(A, axis=-1)", A.sum(axis=-1)),
    ("mean(A, axis=0)", A.mean(axis=0)),
    ("mean(A)", np.array(A.mean())),
    ("sum(T, axis=(0, 2))", T.sum(axis=(0, 2))),
    ("sum(T, axis=1)", T.sum(axis=1)),
    ("sum(A > 0, axis=0)", (A > 0).sum(axis=0)),
    ("A @ v5 > 0.5", A @ v5 > 0.5),
    ("sigmoid(A @ v5) * (1 - sigmoid(A @ v5))", sigmoid(A @ v5) * (1 - sigmoid(A @ v5))),
    ("A // 0.3", A // 0.3),
    ("A % 0.7", A % 0.7),
    ("-2.5 % (B + 3)", -2.5 % (B + 3)),
    ("maximum(A, B)", np.maximum(A, B)),
    ("minimum(A, 0)", np.minimum(A, 0)),
    ("expm1(A) + log1p(abs(B))", np.expm1(A) + np.log1p(np.abs(B))),
    ("sin(A) * cos(B) - tan(A / 4) + tanh(B)", np.sin(A) * np.cos(B) - np.tan(A / 4) + np.tanh(B)),
    ("sign(A) + floor(B) - ceil(A) + square(B)", np.sign(A) + np.floor(B) - np.ceil(A) + np.square(B)),
    ("power(abs(A), B) + subtract(A, multiply(B, 2))", np.power(np.abs(A), B) + np.subtract(A, np.multiply(B, 2))),
    ("floor_divide(A, B + 3) + remainder(A, 2)", np.floor_divide(A, B + 3) + np.remainder(A, 2)),
    # NumPy broadcasting, between operands whose block grids differ
    ("A + v5", A + v5),
    ("A * v7[:, None]", A * v7[:, None]),
    ("v7[:, None] - v5", v7[:, None] - v5),
    ("v5[None, :] / (A + 10)", v5[None, :] / (A + 10)),
    ("(A > 0) & (v5 > 0)", (A > 0) & (v5 > 0)),
    ("T * v5", T * v5),
    ("A.T @ (A * (sigmoid(A @ v5) * (1 - sigmoid(A @ v5)))[:, None])",
     A.T @ (A * (sigmoid(A @ v5) * (1 - sigmoid(A @ v5)))[:, None])),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    for name, arr in {"A": A, "B": B, "C": C, "v5": v5, "v7": v7, "T": T}.items():
        np.save(d / f"{name}.npy", arr)
    return d


def input_arrays(d):
    return {
        "A": {"load": str(d / "A.npy"), "block": [3, 4]},
        "B": {"load": str(d / "B.npy"), "block": [3, 4]},
        "C": {"load": str(d / "C.npy"), "block": [4, 3]},
        "v5": {"load": str(d / "v5.npy"), "block": [2]},
        "v7": {"load": str(d / "v7.npy"), "block": [3]},
        "T": {"load": str(d / "T.npy"), "block": [3, 2, 2]},
    }


def storage_for(kind, garage, tmp_path):
    if kind == "file":
        return {"url": f"file://{tmp_path / 'store'}"}
    return {"url": f"s3://{garage.bucket}/e2e", "endpoint": garage.endpoint}


def run_cases(kind, garage, inputs, tmp_path, cases, scheduler="lshs"):
    """All cases in one job (one output each), so one run covers the table."""
    arrays = input_arrays(inputs)
    outputs = {}
    for i, (expr, _) in enumerate(cases):
        arrays[f"r{i}"] = expr
        outputs[f"r{i}"] = str(tmp_path / f"r{i}.npy")
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, name=f"cases-{kind}", storage=storage_for(kind, garage, tmp_path),
                            compute={"scheduler": scheduler}))
    env = garage.env() if kind == "garage" else None
    run(job, "--stats", str(tmp_path / "stats.json"), env=env)
    for i, (expr, want) in enumerate(cases):
        got = np.load(tmp_path / f"r{i}.npy")
        try:
            assert_close(got, want)
        except AssertionError as e:
            raise AssertionError(f"{expr}: {e}") from None
    return json.loads((tmp_path / "stats.json").read_text())


@pytest.mark.parametrize("kind,scheduler", [("file", "lshs"), ("file", "naive"), ("garage", "lshs"), ("garage", "naive")])
def test_ops_match_numpy_on_ragged_blocks(kind, scheduler, request, inputs, tmp_path):
    garage = request.getfixturevalue("garage") if kind == "garage" else None
    stats = run_cases(kind, garage, inputs, tmp_path, CASES, scheduler)
    for key in ["wall_seconds", "invocations", "tasks", "s3_bytes_read", "s3_bytes_written", "s3_requests",
                "peak_memory_bytes", "memory_limit_bytes", "gb_seconds", "cost_usd", "retries", "backups"]:
        assert key in stats, key
    if scheduler == "naive":
        assert stats["invocations"] == stats["tasks"] > len(CASES)
    else:
        # LSHS batches tasks: fewer invocations, and blocks kept in memory are not re-read.
        assert 0 < stats["invocations"] < stats["tasks"] / 4
    assert stats["s3_bytes_read"] > 0 and stats["s3_bytes_written"] > 0
    assert 0 < stats["peak_memory_bytes"] <= stats["memory_limit_bytes"] == 512 << 20


def test_block_shape_does_not_change_results(tmp_path):
    """Random arrays are a function of (seed, element index): any block shape, same values."""
    results = []
    for block in ([5, 7], [64, 64], [13, 3]):
        d = tmp_path / f"b{block[0]}x{block[1]}"
        d.mkdir()
        arrays = {
            "X": {"random": "normal", "shape": [64, 9], "seed": 3, "block": block[:1] + [min(block[1], 9)]},
            "G": "X.T @ X",
            "s": "sum(X, axis=1)",
        }
        (d / "job.toml").write_text(job_text(arrays, {"X": "X.npy", "G": "G.npy", "s": "s.npy"}))
        run(d / "job.toml")
        results.append([np.load(d / f) for f in ("X.npy", "G.npy", "s.npy")])
    X = results[0][0]
    for Xb, G, s in results:
        np.testing.assert_array_equal(Xb, X)
        assert_close(G, X.T @ X)
        assert_close(s, X.sum(axis=1))


def test_random_distributions(tmp_path):
    arrays = {
        "N": {"random": "normal", "shape": [200000], "seed": 1},
        "U": {"random": "uniform", "shape": [200000], "seed": 1},
        "N2": {"random": "normal", "shape": [200000], "seed": 2},
    }
    (tmp_path / "job.toml").write_text(job_text(arrays, {k: f"{k}.npy" for k in arrays}))
    run(tmp_path / "job.toml")
    n, u, n2 = (np.load(tmp_path / f"{k}.npy") for k in ("N", "U", "N2"))
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(n, n2)[0, 1]) < 0.01


def test_zarr_python_reads_what_nums_cloud_wrote(tmp_path):
    zarr = pytest.importorskip("zarr")
    arrays = {
        "X": {"random": "uniform", "shape": [7, 5], "seed": 9, "block": [3, 4]},
        "M": "X > 0.5",
        "S": "sum(X, axis=0)",
    }
    (tmp_path / "job.toml").write_text(job_text(arrays, {"X": "nums-data/t/X", "M": "out/M.zarr", "S": "out/S.zarr"}))
    run(tmp_path / "job.toml")
    # An array kept in the store is a Zarr array too.
    X = zarr.open_array(str(tmp_path / "nums-data" / "t" / "X"), mode="r")[:]
    assert X.shape == (7, 5) and 0 <= X.min() and X.max() < 1
    m = zarr.open_array(str(tmp_path / "out" / "M.zarr"), mode="r")
    assert m.shape == (7, 5) and m.chunks == (3, 4) and m.dtype == bool
    np.testing.assert_array_equal(m[:], X > 0.5)
    s = zarr.open_array(str(tmp_path / "out" / "S.zarr"), mode="r")
    assert_close(s[:], X.sum(axis=0))


def test_nums_cloud_loads_a_zarr_array_written_by_zarr_python(tmp_path):
    zarr = pytest.importorskip("zarr")
    data = np.arange(35, dtype="float64").reshape(7, 5)
    z = zarr.create_array(str(tmp_path / "in.zarr"), shape=(7, 5), chunks=(2, 2), dtype="float64")
    z[:] = data
    arrays = {"Z": {"load": "in.zarr", "block": [3, 4]}, "Y": "Z * 2"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"Y": "Y.npy"}))
    run(tmp_path / "job.toml")
    assert_close(np.load(tmp_path / "Y.npy"), data * 2)


def test_intermediates_removed_outputs_kept(tmp_path):
    arrays = {"X": {"ones": [6, 6], "block": [4, 4]}, "Y": "(X + 1) * 2", "Z": "Y + 1"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"Y": "Y.npy", "Z": "nums-data/t/Z"}))
    store = tmp_path / "nums-data" / "t"
    # A .npy output is the file only; an output whose path is the store's keeps it there.
    run(tmp_path / "job.toml")
    assert_close(np.load(tmp_path / "Y.npy"), np.full((6, 6), 4.0))
    assert not (store / "Y").exists() and (store / "Z" / "zarr.json").exists()
    assert sorted(p.name for p in store.iterdir()) == ["Z"]
    # --keep keeps the run's intermediates under _runs/<run>/tmp/, named after the array
    # that made them; those written whole (every one, with naive) get metadata, to open them.
    (tmp_path / "job.toml").write_text(job_text(arrays, {"Y": "Y.npy", "Z": "nums-data/t/Z"},
                                                compute={"scheduler": "naive"}))
    run(tmp_path / "job.toml", "--keep")
    assert (store / "Y" / "zarr.json").exists() and not (store / "X").exists()
    [x] = (store / "_runs").rglob("tmp/X-n*/zarr.json")
    meta = json.loads(x.read_text())
    assert meta["attributes"]["nums_cloud"]["intermediate_of"] == "X", meta
    zarr = pytest.importorskip("zarr")
    np.testing.assert_array_equal(zarr.open_array(str(x.parent), mode="r")[:], np.ones((6, 6)))
    p = run(tmp_path / "job.toml")
    assert "removed the state of 1 earlier" in p.stderr, p.stderr
    assert not any((store / "_runs").rglob("*"))
    assert not (store / "_lease.json").exists()
    assert_close(np.load(tmp_path / "Y.npy"), np.full((6, 6), 4.0))


def test_plan_that_cannot_fit_memory_is_refused_before_running(tmp_path):
    """A block whose batch cannot fit memory_mb is refused up front, naming the block and
    the memory that would fit; nothing is written."""
    arrays = {"X": {"random": "normal", "shape": [3000, 3000], "seed": 1, "block": [3000, 3000]}, "Y": "X * 2"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"Y": "Y.npy"}, compute={"memory_mb": 128, "workers": 1}))
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode != 0
    assert "block [0, 0] of array X (block shape [3000, 3000])" in p.stderr, p.stderr
    assert "over memory_mb = 128" in p.stderr and "give memory_mb = " in p.stderr, p.stderr
    assert not (tmp_path / "nums-data").exists() or not any((tmp_path / "nums-data").rglob("c/*"))


def test_s3_zarr_output_loads_back(garage, tmp_path):
    """A job writes a Zarr array to an s3:// URL; a second job loads it from there."""
    url = f"s3://{garage.bucket}/e2e-io"
    arrays = {"X": {"random": "uniform", "shape": [7, 5], "seed": 4, "block": [3, 4]}, "Y": "X.T @ X"}
    (tmp_path / "one.toml").write_text(job_text(
        arrays, {"X": "X.npy", "Y": f"s3://{garage.bucket}/exported/Y.zarr"}, name="one",
        storage={"url": url, "endpoint": garage.endpoint}))
    run(tmp_path / "one.toml", env=garage.env())
    X = np.load(tmp_path / "X.npy")
    arrays = {"Y": {"load": f"s3://{garage.bucket}/exported/Y.zarr", "block": [2, 2]}, "Z": "Y * 2"}
    (tmp_path / "two.toml").write_text(job_text(
        arrays, {"Z": "Z.npy"}, name="two", storage={"url": url, "endpoint": garage.endpoint}))
    run(tmp_path / "two.toml", env=garage.env())
    assert_close(np.load(tmp_path / "Z.npy"), 2 * (X.T @ X))


@pytest.mark.parametrize("scheduler", ["lshs", "naive"])
def test_measured_memory_within_projection(scheduler, tmp_path):
    """Jobs whose batches fill memory_mb: every invocation's measured peak stays at or
    below its projection and the limit; the result still equals NumPy's."""
    arrays = {
        "X": {"random": "normal", "shape": [64000, 200], "seed": 5, "block": [16000, 200]},
        "b": {"random": "uniform", "shape": [200], "seed": 6},
        "mu": "sigmoid(X @ b)",
        "g": "X.T @ (mu - 0.5)",
        "H": "X.T @ X",
    }
    (tmp_path / "job.toml").write_text(job_text(
        arrays, {"X": "X.npy", "g": "g.npy", "H": "H.npy"}, compute={"memory_mb": 192, "workers": 2, "scheduler": scheduler}))
    run(tmp_path / "job.toml", "--stats", str(tmp_path / "s.json"))
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["invocations_over_projection"] == 0, s
    assert s["peak_memory_bytes"] <= s["projected_peak_memory_bytes"] <= s["memory_limit_bytes"], s
    assert s["projected_peak_memory_bytes"] > 0.5 * s["memory_limit_bytes"], s
    X = np.load(tmp_path / "X.npy")
    assert_close(np.load(tmp_path / "H.npy"), X.T @ X)


def test_plan_shows_lshs_and_naive_and_draws_svg(tmp_path):
    import subprocess
    import xml.etree.ElementTree as ET
    from nums import BIN, REPO
    svg = tmp_path / "plan.svg"
    p = subprocess.run([BIN, "plan", str(REPO / "examples" / "quickstart.toml"), "--svg", str(svg)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    header = next(line for line in p.stdout.splitlines() if "lshs" in line and "naive" in line)
    assert header.split() == ["lshs", "naive"]
    rows = {line[:28].strip(): line[28:].split() for line in p.stdout.splitlines() if line[:28].strip()}
    lshs_inv, naive_inv = map(int, rows["invocations"])
    assert lshs_inv < naive_inv
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and len(list(root.iter())) > 10  # drawn in groups
    # plan runs nothing and writes nothing.
    assert not (tmp_path / "nums-data").exists()


@pytest.mark.parametrize("kind", ["file", "garage"])
def test_stored_array_is_read_in_place(kind, request, tmp_path):
    """A job's output, kept in the store, is loaded by another job without a copy: the
    functions read it where it is and nothing is written under it."""
    from nums import snapshot
    garage = request.getfixturevalue("garage") if kind == "garage" else None
    storage = storage_for(kind, garage, tmp_path)
    env = garage.env() if garage else None
    where = f"s3://{garage.bucket}/e2e/data/X" if garage else "store/data/X"
    arrays = {"X": {"random": "normal", "shape": [7, 5], "seed": 8, "block": [3, 4]}}
    (tmp_path / "data.toml").write_text(job_text(arrays, {"X": where}, name="data", storage=storage))
    run(tmp_path / "data.toml", env=env)
    before = snapshot(tmp_path / "store") if kind == "file" else None
    arrays = {"X": {"load": where}, "Xb": {"load": where, "block": [2, 5]}, "Y": "X * 2 + Xb"}
    (tmp_path / "use.toml").write_text(job_text(arrays, {"Y": "Y.npy", "X": "X.npy"}, name="use", storage=storage))
    p = run(tmp_path / "use.toml", "--stats", str(tmp_path / "s.json"), env=env)
    X = np.load(tmp_path / "X.npy")
    assert_close(np.load(tmp_path / "Y.npy"), 3 * X)
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["driver_bytes_written"] < 4096, s  # metadata only: X was not imported
    if kind == "file":
        after = snapshot(tmp_path / "store")
        assert {k: v for k, v in after.items() if k.startswith("data/")} == before, p.stdout
        assert not any(k.startswith("use/X/") for k in after)
