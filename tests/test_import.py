"""Imports run by the functions: `.npy` and CSV inputs read block by block (ranged reads,
CSV rows parsed in the functions), round-tripped through `.npy` outputs exactly, with the
driver's peak memory measured from /proc while it imports and exports inputs far larger
than its bound; CSV edge cases and errors; and `s3://` inputs on Garage."""
import datetime
import hashlib
import hmac
import json
import os
import re
import subprocess
import tempfile
import urllib.error
import urllib.request

from pathlib import Path

import numpy as np
import pytest

import nums
from nums import BIN, job_text, run

# The driver's peak RSS bound for the large round trips (its inputs are ~400 MB).
DRIVER_BOUND_MB = 150


def run_measured(job_path):
    """Runs the job, measuring the driver's peak RSS; returns ((returncode, stdout, stderr),
    peak MB)."""
    p, _, peak = nums.run_measured([BIN, "run", str(job_path)])
    return (p.returncode, p.stdout, p.stderr), peak


def test_large_npy_round_trip_bounds_driver_memory(tmp_path):
    rows, cols = 1_638_400, 32  # 400 MiB of float64
    src = tmp_path / "big.npy"
    a = np.lib.format.open_memmap(src, mode="w+", dtype=np.float64, shape=(rows, cols))
    step = 1 << 17
    for r in range(0, rows, step):
        n = min(step, rows - r)
        a[r:r + n] = (np.arange(r * cols, (r + n) * cols, dtype=np.float64) * 0.5).reshape(n, cols)
    a.flush()
    del a
    job = tmp_path / "job.toml"
    job.write_text(job_text({"X": {"load": str(src)}}, {"X": str(tmp_path / "out.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    (rc, out, err), peak = run_measured(job)
    assert rc == 0, err
    assert os.path.getsize(src) > 2.5 * DRIVER_BOUND_MB * 2**20
    assert peak < DRIVER_BOUND_MB, f"driver peak RSS {peak:.0f} MB"
    got = np.load(tmp_path / "out.npy", mmap_mode="r")
    want = np.load(src, mmap_mode="r")
    assert got.shape == want.shape and got.dtype == want.dtype
    for r in range(0, rows, step):
        assert np.array_equal(got[r:r + step], want[r:r + step]), r
    print(f"npy {os.path.getsize(src) / 2**20:.0f} MiB: driver peak RSS {peak:.0f} MB")


def test_large_csv_round_trip_bounds_driver_memory(tmp_path):
    # One chunk of rows repeated: fast to write, and the expected array is its tiling.
    rng = np.random.default_rng(3)
    chunk = np.round(rng.normal(size=(4096, 8)), 6)
    text = "".join(",".join(repr(float(x)) for x in row) + "\n" for row in chunk).encode()
    reps = (400 << 20) // len(text) + 1
    src = tmp_path / "big.csv"
    with open(src, "wb") as f:
        for _ in range(reps):
            f.write(text)
    job = tmp_path / "job.toml"
    # Out as CSV too: the driver streams it block-row by block-row.
    job.write_text(job_text({"D": {"load": str(src)}}, {"D": str(tmp_path / "out.csv")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    logs = Path(tempfile.gettempdir())
    before = set(logs.glob("nums-cloud-*-count-*"))
    (rc, out, err), peak = run_measured(job)
    assert rc == 0, err
    # Its rows were counted by the functions, whose logs went with the successful count.
    assert set(logs.glob("nums-cloud-*-count-*")) == before
    assert os.path.getsize(src) > 2.5 * DRIVER_BOUND_MB * 2**20
    assert os.path.getsize(tmp_path / "out.csv") > 2.5 * DRIVER_BOUND_MB * 2**20
    assert peak < DRIVER_BOUND_MB, f"driver peak RSS {peak:.0f} MB"
    import pyarrow.csv as pacsv
    table = pacsv.read_csv(tmp_path / "out.csv", read_options=pacsv.ReadOptions(autogenerate_column_names=True))
    got = np.column_stack([c.to_numpy() for c in table.columns])
    assert got.shape == (reps * 4096, 8)
    for k in range(0, reps, 64):
        part = got[k * 4096:(k + 64) * 4096].reshape(-1, 4096, 8)
        assert np.array_equal(part, np.broadcast_to(chunk, part.shape)), k
    print(f"csv {os.path.getsize(src) / 2**20:.0f} MiB: driver peak RSS {peak:.0f} MB")


def csv_job(tmp_path, path, block=None, name="c"):
    arr = {"load": str(path)}
    if block:
        arr["block"] = block
    job = tmp_path / f"{name}.toml"
    job.write_text(job_text({"D": arr}, {"D": str(tmp_path / f"{name}.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}, name=name))
    return job


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
@pytest.mark.parametrize("trailing", [True, False])
def test_csv_edge_cases_round_trip(tmp_path, ending, trailing):
    data = np.random.default_rng(5).normal(size=(3000, 5))
    lines = ["# a comment line", ""]
    for i, row in enumerate(data):
        line = ",".join(repr(float(x)) for x in row)
        if i % 7 == 0:
            line = " " + line.replace(",", " , ") + " # trailing comment"
        lines.append(line)
        if i % 500 == 0:
            lines += ["", "   # indented comment"]
    text = ending.join(lines) + (ending if trailing else "")
    path = tmp_path / "d.csv"
    path.write_bytes(text.encode())
    # Ragged blocks crossing the row index's marks, and blocks splitting the columns.
    for k, block in enumerate([None, [700, 5], [1001, 2]]):
        run(csv_job(tmp_path, path, block, name=f"c{k}"))
        got = np.load(tmp_path / f"c{k}.npy")
        assert got.dtype == np.float64 and np.array_equal(got, data), block


def test_csv_one_column_is_1d(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text("1.5\n-2\n3e3")
    run(csv_job(tmp_path, path))
    got = np.load(tmp_path / "c.npy")
    assert got.shape == (3,) and list(got) == [1.5, -2.0, 3000.0]


@pytest.mark.parametrize("text,where", [
    ("1,2\n3,4\n# c\n\n5,x\n", "bad.csv:5: column 2: \"x\" is not a number"),
    ("1,2\r\n\"3\",4\r\n", "bad.csv:2: column 1: \"\\\"3\\\"\" is not a number"),
    ("1,2\n3,4,5\n", "bad.csv:2: 3 columns, but the first row has 2"),
])
def test_csv_malformed_field_names_file_line_column(tmp_path, text, where):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    p = run(csv_job(tmp_path, path), check=False)
    assert p.returncode != 0, p.stdout
    assert where in p.stderr and "array D: " in p.stderr, p.stderr
    assert "panicked" not in p.stderr


@pytest.mark.parametrize("text,where", [
    # Fewer names than columns: check said shape (2,) and run failed at the first row.
    ("# prices\na\n1,2\n3,4\n", "bad.csv:3: 2 columns, but the header (line 2) names 1: a"),
    ("a,b,c\n\n1,2\n3,4\n", "bad.csv:3: 2 columns, but the header (line 1) names 3: a, b, c"),
])
def test_csv_header_and_first_row_disagree_before_the_run(tmp_path, text, where):
    """A header line with fewer (or more) names than the data rows have columns: check
    and plan give the error, naming the file, the line and both counts."""
    path = tmp_path / "bad.csv"
    path.write_text(text)
    job = csv_job(tmp_path, path)
    job.write_text(job.read_text().replace('{ load = ', '{ header = true, load = '))
    for cmd in ("check", "plan"):
        p = subprocess.run([BIN, cmd, str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, p.stdout
        assert where in p.stderr and "arrays.D" in p.stderr, p.stderr
        assert "panicked" not in p.stderr


def test_npy_dtypes_fortran_and_ragged_blocks(tmp_path):
    rng = np.random.default_rng(9)
    cases = {
        "F": (np.asfortranarray(rng.normal(size=(37, 11))), [10, 4]),
        "T": (np.asfortranarray(rng.normal(size=(5, 6, 7))), [2, 4, 3]),
        "I": (rng.integers(-100, 100, size=(23, 9)).astype(np.int16), [5, 9]),
        "U": (rng.integers(0, 255, size=(19,)).astype(np.uint8), [4]),
        "B": (rng.random(size=(13, 3)) < 0.5, [4, 2]),
        "S": (rng.normal(size=(21, 6)).astype(np.float32), [8, 5]),
    }
    arrays, outputs = {}, {}
    for name, (a, block) in cases.items():
        np.save(tmp_path / f"{name}.npy", a)
        arrays[name] = {"load": str(tmp_path / f"{name}.npy"), "block": block}
        outputs[name] = str(tmp_path / f"out_{name}.npy")
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    for name, (a, _) in cases.items():
        got = np.load(outputs[name])
        assert got.dtype == a.dtype and np.array_equal(got, a), name


EVERY_DTYPE = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
               "float64", "complex64", "complex128"]


def every_dtype_inputs(rng):
    """One 2-D array of each dtype, with each integer type's extremes."""
    out = {}
    for d in EVERY_DTYPE:
        if d == "bool":
            a = rng.random(size=(7, 5)) < 0.5
        elif d.startswith(("int", "uint")):
            info = np.iinfo(d)
            a = rng.integers(info.min, info.max, size=(7, 5), dtype=d, endpoint=True)
            a[0, 0], a[-1, -1] = info.min, info.max
        elif d.startswith("float"):
            a = rng.normal(size=(7, 5)).astype(d)
            a[0, :3] = [np.nan, np.inf, -0.0]
        else:
            a = (rng.normal(size=(7, 5)) + 1j * rng.normal(size=(7, 5))).astype(d)
            a[0, :2] = [complex(np.nan, 1), complex(-0.0, np.inf)]
        out[d] = a
    return out


def test_every_dtype_in_and_out(tmp_path):
    """Each of the thirteen dtypes: a .npy input (ragged blocks) kept in its dtype, and
    written to .npy, .csv (as np.loadtxt reads it with that dtype; bools as 0 and 1,
    complex in Python's syntax) and Zarr v3 (as zarr-python reads it); a CSV input parsed
    as `dtype` (uint64 past int64, complex in Python's syntax), read back the same."""
    import zarr
    want = every_dtype_inputs(np.random.default_rng(26))
    arrays, outputs = {}, {}
    for d, a in want.items():
        name = "A" + d
        np.save(tmp_path / f"{d}.npy", a)
        arrays[name] = {"load": str(tmp_path / f"{d}.npy"), "block": [3, 2]}
        outputs[name] = str(tmp_path / f"out_{d}.npy")
        arrays["Z" + d], outputs["Z" + d] = name, str(tmp_path / f"{d}.zarr")
        arrays["C" + d], outputs["C" + d] = name, str(tmp_path / f"{d}.csv")
        if not d.startswith("complex"):
            arrays["P" + d], outputs["P" + d] = name, str(tmp_path / f"{d}.parquet")
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    for d, a in want.items():
        got = np.load(tmp_path / f"out_{d}.npy")
        assert got.dtype == a.dtype and got.tobytes() == a.tobytes(), d
        z = zarr.open_array(str(tmp_path / f"{d}.zarr"), mode="r")
        assert z.dtype == a.dtype and z.shape == a.shape, d
        np.testing.assert_array_equal(z[:], a, err_msg=d)
        c = np.loadtxt(tmp_path / f"{d}.csv", delimiter=",", dtype=np.int8 if d == "bool" else d)
        np.testing.assert_array_equal(c, a.astype(c.dtype), err_msg=d)
        if not d.startswith("complex"):
            import pyarrow.parquet as pq
            t = pq.read_table(tmp_path / f"{d}.parquet")
            cols = [c.to_numpy() for c in t.columns]
            assert all(c.dtype == a.dtype for c in cols), (d, t.schema)
            np.testing.assert_array_equal(np.column_stack(cols), a, err_msg=d)
    # Parquet has no complex type: refused when checked, naming the output.
    job.write_text(job_text({"Z": {"load": str(tmp_path / "complex64.npy")}}, {"Z": str(tmp_path / "z.parquet")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "outputs.Z" in p.stderr and "Parquet has no complex type" in p.stderr, p.stderr
    # CSV inputs of a given dtype, read back through nums-cloud's own CSV writer.
    for d in ("uint64", "int8", "complex64", "complex128", "uint16"):
        arrays = {"X": {"load": str(tmp_path / f"{d}.csv"), "dtype": d, "block": [4, 3]}}
        job.write_text(job_text(arrays, {"X": str(tmp_path / "x.npy")}, storage={"url": f"file://{tmp_path / 'store'}"}))
        run(job)
        got = np.load(tmp_path / "x.npy")
        assert got.dtype == np.dtype(d), d
        np.testing.assert_array_equal(got, want[d], err_msg=d)


def test_truncated_npy_refused_before_running(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.arange(100.0))
    path.write_bytes(path.read_bytes()[:-8])
    job = tmp_path / "job.toml"
    job.write_text(job_text({"X": {"load": str(path)}}, {"X": str(tmp_path / "o.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = run(job, check=False)
    assert p.returncode != 0 and "t.npy" in p.stderr and "truncated" in p.stderr, p.stderr


def s3_put(garage, key, body):
    """A signed (SigV4) PUT of one object to Garage, with the standard library only."""
    s3_request(garage, "PUT", key, body)


def s3_get(garage, key):
    """The bytes of one object in Garage (a signed GET), or None where there is none."""
    try:
        return s3_request(garage, "GET", key)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def s3_request(garage, method, key, body=b""):
    host = garage.endpoint.split("://", 1)[1]
    now = datetime.datetime.now(datetime.timezone.utc)
    amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    path = f"/{garage.bucket}/{key}"
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amz}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, payload])
    scope = f"{day}/{garage.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + garage.secret_key).encode()
    for part in (day, garage.region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    req = urllib.request.Request(garage.endpoint + path, data=body if method == "PUT" else None,
                                 method=method, headers={
        "x-amz-content-sha256": payload, "x-amz-date": amz,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={garage.access_key}/{scope}, SignedHeaders={signed}, Signature={sig}",
    })
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
        return r.read()


def test_npy_outputs_to_s3_written_by_the_functions(garage, tmp_path):
    """s3:// .npy outputs: a 37 MiB one written by the functions as five parts of one
    multipart upload (memory_mb 128: parts of 8 MiB, the array re-blocked to whole rows),
    a small one and a 0-d one by the driver with one PUT; each byte for byte what np.save
    writes. A job whose run fails leaves no file."""
    import io
    b = garage.bucket
    arrays = {"X": {"random": "normal", "shape": [600_000, 8], "block": [70_000, 5], "seed": 5},
              "i": "arange(7) * 3", "s": "sum(X[:10, 0])", "Xl": "X"}
    outputs = {"X": f"s3://{b}/exports/x.npy", "i": f"s3://{b}/exports/i.npy",
               "s": f"s3://{b}/exports/s.npy", "Xl": str(tmp_path / "X.npy")}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"s3://{b}/exp", "endpoint": garage.endpoint},
                            compute={"memory_mb": 128}))
    run(job, "--stats", str(tmp_path / "stats.json"), env=garage.env())
    x = np.load(tmp_path / "X.npy")
    for key, want in [("x.npy", x), ("i.npy", np.arange(7) * 3), ("s.npy", np.sum(x[:10, 0]))]:
        body = s3_get(garage, f"exports/{key}")
        f = io.BytesIO()
        np.save(f, want)
        assert body == f.getvalue(), key
    # The export was a stage of function tasks: one per part.
    import json
    timeline = json.loads((tmp_path / "stats.json").read_text())["timeline"]
    export = [i for i in timeline if i["stage"].startswith("export-X-")]
    assert export and sum(i["tasks"] for i in export) >= 5, timeline
    # A failing run (a singular solve after the export's outputs) writes no new file.
    arrays["bad"] = "np.linalg.inv(zeros((4, 4)))"
    outputs = {"X": f"s3://{b}/exports/never.npy", "bad": str(tmp_path / "bad.npy")}
    job.write_text(job_text(arrays, outputs, storage={"url": f"s3://{b}/exp", "endpoint": garage.endpoint},
                            compute={"memory_mb": 128}))
    p = run(job, env=garage.env(), check=False)
    assert p.returncode == 1 and "Singular matrix" in p.stderr, p.stderr
    assert s3_get(garage, "exports/never.npy") is None


def test_npy_and_csv_from_garage(garage, tmp_path):
    rng = np.random.default_rng(13)
    a = rng.normal(size=(3001, 7))
    np.save(tmp_path / "a.npy", a)
    s3_put(garage, "inputs/a.npy", (tmp_path / "a.npy").read_bytes())
    c = np.round(rng.normal(size=(2500, 3)), 4)
    text = "# header comment\r\n" + "".join(",".join(repr(float(x)) for x in row) + "\r\n" for row in c)
    s3_put(garage, "inputs/c.csv", text.encode())
    arrays = {"A": {"load": f"s3://{garage.bucket}/inputs/a.npy", "block": [1000, 4]},
              "C": {"load": f"s3://{garage.bucket}/inputs/c.csv", "block": [900, 3]}}
    outputs = {"A": str(tmp_path / "A.npy"), "C": str(tmp_path / "C.npy")}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"s3://{garage.bucket}/imports", "endpoint": garage.endpoint}))
    run(job, env=garage.env())
    assert np.array_equal(np.load(outputs["A"]), a)
    assert np.array_equal(np.load(outputs["C"]), c)


def test_csv_of_many_pieces_on_garage_is_indexed_in_parallel(garage, tmp_path):
    """A 13 MB CSV on S3 (a header, comments, blank lines and CRLF scattered through it) is
    indexed in 4 MiB pieces, counted by the functions past the first: the import equals
    the data written, and a bad field past the first pieces is reported at its line in the
    whole file."""
    rng = np.random.default_rng(21)
    a = np.round(rng.normal(size=(500_000, 3)), 5)
    lines = ["x;y;z"]
    for i, row in enumerate(a):
        if i % 50_000 == 7:
            lines += ["# a comment", ""]
        lines.append(";".join(repr(float(v)) for v in row))
    body = "\r\n".join(lines) + "\r\n"
    assert len(body) > 3 * (4 << 20)
    s3_put(garage, "inputs/many.csv", body.encode())
    arrays = {"A": {"load": f"s3://{garage.bucket}/inputs/many.csv", "header": True, "delimiter": ";",
                    "block": [150_000, 2]}}
    job = tmp_path / "job.toml"
    storage = {"url": f"s3://{garage.bucket}/many", "endpoint": garage.endpoint}
    job.write_text(job_text(arrays, {"A": str(tmp_path / "A.npy")}, storage=storage))
    plan = subprocess.run([BIN, "plan", str(job)], capture_output=True, text=True,
                          env={**os.environ, **garage.env()})
    assert (f"before this plan: the functions count the rows of s3://{garage.bucket}/inputs/many.csv: "
            "3 pieces of 4 MiB in 1 task,") in plan.stdout, plan.stdout + plan.stderr
    p = run(job, "-v", "--stats", str(tmp_path / "s.json"), env=garage.env())
    assert "many.csv: rows counted by the functions (4 pieces)" in p.stderr, p.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert [i["stage"] for i in stats["timeline"]].count("csv-count") == 1, stats["timeline"]
    assert len(stats["timeline"]) == stats["invocations"], stats
    assert np.array_equal(np.load(tmp_path / "A.npy"), a)
    # A bad field in row 400,000: its line counts the header, the comments and blanks.
    k = 1 + 400_000 + 2 * 8  # header, rows before it, 8 comment-and-blank pairs
    lines[k] = lines[k].replace(";", ";oops", 1)
    s3_put(garage, "inputs/many.csv", ("\r\n".join(lines) + "\r\n").encode())
    p = run(job, env=garage.env(), check=False)
    assert p.returncode != 0
    assert f"many.csv:{k + 1}: column 2" in p.stderr, p.stderr


def test_local_inputs_uploaded_for_lambda_with_a_bucket(garage, tmp_path):
    """The lambda backend (the local Lambda-compatible endpoint, functions as processes)
    with a bucket store: the run uploads local `.npy` and CSV inputs to the bucket in parts,
    and the functions import them from there."""
    from test_deploy import Endpoint, lambda_env

    rng = np.random.default_rng(17)
    a = rng.normal(size=(1500, 6))
    np.save(tmp_path / "a.npy", a)
    c = np.round(rng.normal(size=(1200, 2)), 3)
    (tmp_path / "c.csv").write_text("".join(f"{float(x)!r},{float(y)!r}\n" for x, y in c))
    with Endpoint([BIN, "function"], function="nums-up", env=garage.env()) as ep:
        job = tmp_path / "job.toml"
        job.write_text(job_text(
            {"A": {"load": str(tmp_path / "a.npy"), "block": [400, 6]},
             "C": {"load": str(tmp_path / "c.csv"), "block": [500, 2]}},
            {"A": str(tmp_path / "A.npy"), "C": str(tmp_path / "C.npy")}, name="up",
            storage={"url": f"s3://{garage.bucket}/lambda", "endpoint": garage.endpoint},
            compute={"backend": "lambda", "function": ep.function, "workers": 2, "memory_mb": 1024}))
        env = {**lambda_env(ep.url), **garage.env()}
        env["AWS_ENDPOINT_URL_LAMBDA"] = ep.url
        run(job, env=env)
    assert np.array_equal(np.load(tmp_path / "A.npy"), a)
    assert np.array_equal(np.load(tmp_path / "C.npy"), c)


def test_csv_text_counts_in_the_memory_projection(tmp_path):
    """A CSV block's text is held while it is parsed: the plan counts it. 7M one-column rows
    of 21 bytes: the float64 block alone (3 x 56 MB + base) fits memory_mb = 256, with its
    147 MB of text it does not, and the plan is refused before anything runs."""
    line = b"0.123456789012345678\n"
    rows = 7_000_000
    path = tmp_path / "tall.csv"
    with open(path, "wb") as f:
        for _ in range(rows // 100_000):
            f.write(line * 100_000)
    job = tmp_path / "job.toml"
    job.write_text(job_text({"D": {"load": str(path), "block": [rows]}}, {"D": str(tmp_path / "o.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}, compute={"memory_mb": 256}))
    p = run(job, check=False)
    assert p.returncode != 0 and "array D" in p.stderr and "over memory_mb = 256" in p.stderr, p.stderr
    need = int(p.stderr.split(" needs ")[1].split(" MiB")[0])
    assert need >= 40 + 3 * 53 + 140, p.stderr


def load_csv(tmp_path, arr, name="X"):
    job = tmp_path / "job.toml"
    job.write_text(job_text({name: arr}, {name: str(tmp_path / "o.npy")}))
    return run(job, check=False)


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_csv_header_names_delimiter_and_usecols(tmp_path, ending):
    rng = np.random.default_rng(4)
    a = np.round(rng.normal(size=(1300, 5)), 6)
    names = ["id", "price", "qty", "tax", "w"]
    text = "# exported\n" + ";".join(names) + ending + "".join(
        ";".join(repr(float(x)) for x in row) + ending for row in a)
    (tmp_path / "h.csv").write_text(text, newline="")
    p = load_csv(tmp_path, {"load": str(tmp_path / "h.csv"), "header": True, "delimiter": ";",
                           "usecols": ["qty", "price", "w"], "block": [400, 2]})
    assert p.returncode == 0, p.stderr
    want = np.loadtxt(tmp_path / "h.csv", delimiter=";", skiprows=2, usecols=(2, 1, 4))
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), want)
    # A TSV without header, negative indices (NumPy's), one column is 1-D.
    np.savetxt(tmp_path / "t.tsv.csv", a, delimiter="\t", fmt="%.6f")
    p = load_csv(tmp_path, {"load": str(tmp_path / "t.tsv.csv"), "delimiter": "\t", "usecols": [-1, 0],
                           "block": [300, 1]})
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"),
                                  np.loadtxt(tmp_path / "t.tsv.csv", delimiter="\t", usecols=(-1, 0)))
    p = load_csv(tmp_path, {"load": str(tmp_path / "t.tsv.csv"), "delimiter": "\t", "usecols": [3]})
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "o.npy")
    assert got.shape == (1300,)
    np.testing.assert_array_equal(got, np.loadtxt(tmp_path / "t.tsv.csv", delimiter="\t", usecols=3))


def test_csv_int64_is_exact_past_2_53(tmp_path):
    v = np.array([[2**53 + 1, -(2**62) - 7], [9007199254740993, 2**63 - 1], [1, 2]], dtype=np.int64)
    (tmp_path / "i.csv").write_text("a,b\n" + "".join(f"{x},{y}\n" for x, y in v))
    p = load_csv(tmp_path, {"load": str(tmp_path / "i.csv"), "header": True, "dtype": "int64", "block": [2, 1]})
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "o.npy")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, v)
    (tmp_path / "f.csv").write_text("1,2.5\n")
    p = load_csv(tmp_path, {"load": str(tmp_path / "f.csv"), "dtype": "int64"})
    assert p.returncode == 1 and 'f.csv:1: column 2: "2.5" is not an integer' in p.stderr, p.stderr


@pytest.mark.parametrize("arr,key,words", [
    ({"usecols": ["a"]}, "usecols", ["only with header = true"]),
    ({"header": True, "usecols": ["b", "nope"]}, "usecols", ['no column "nope"', '"a", "b", "c"']),
    ({"usecols": [3]}, "usecols", ["column 3 is out of range", "has 3 columns"]),
    ({"usecols": [-4]}, "usecols", ["column -4 is out of range"]),
    ({"delimiter": "ab"}, "delimiter", ["one ASCII character"]),
    ({"header": "yes"}, "header", ["true or false"]),
    ({"usecols": []}, "usecols", ["names no column"]),
])
def test_csv_option_errors_name_line_and_key(tmp_path, arr, key, words):
    (tmp_path / "c.csv").write_text("a,b,c\n1,2,3\n")
    p = load_csv(tmp_path, {"load": str(tmp_path / "c.csv"), **arr})
    assert p.returncode != 0
    assert "job.toml:" in p.stderr and f"arrays.X.{key}" in p.stderr, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr
    assert not (tmp_path / "o.npy").exists()


def test_csv_options_on_another_input_are_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(3))
    p = load_csv(tmp_path, {"load": str(tmp_path / "a.npy"), "header": True})
    assert p.returncode != 0 and "arrays.X.header" in p.stderr and "does not apply here" in p.stderr, p.stderr


def test_foreign_zarr_import_runs_in_the_functions_and_bounds_driver_memory(tmp_path):
    """A Zarr array written by zarr-python (other codecs and chunks) is read in place and
    re-blocked by the functions' tasks: the driver never holds it, and every value
    arrives."""
    zarr = pytest.importorskip("zarr")
    rows, cols = 700_000, 32  # 171 MiB of float64, more than the driver's bound
    z = zarr.create_array(str(tmp_path / "f.zarr"), shape=(rows, cols), chunks=(65_536, 16),
                          dtype="float64", fill_value=-1.0)
    step = 100_000
    for r in range(0, rows - step, step):  # the last rows' chunks are never written
        z[r:r + step] = (np.arange(r * cols, (r + step) * cols, dtype=np.float64) * 0.25).reshape(step, cols)
    job = tmp_path / "job.toml"
    job.write_text(job_text({"F": {"load": str(tmp_path / "f.zarr"), "block": [100_000, 32]},
                             "s": "sum(F, axis=0)"},
                            {"s": str(tmp_path / "s.npy"), "F": str(tmp_path / "F.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    (rc, out, err), peak = run_measured(job)
    assert rc == 0, err
    assert rows * cols * 8 > DRIVER_BOUND_MB * 2**20
    assert peak < DRIVER_BOUND_MB, f"driver peak RSS {peak:.0f} MB"
    want = z[:]
    got = np.load(tmp_path / "F.npy", mmap_mode="r")
    assert np.array_equal(got, want) and (want[-1] == -1.0).all()
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"), want.sum(axis=0), rtol=1e-12)


def test_csv_outputs_of_every_dtype_and_refused_past_2d(tmp_path):
    """`.csv` outputs: 2-D float64 (full precision), 1-D int64 past 2^53, float32 and bool,
    each as np.loadtxt reads it; a 3-D array to .csv is refused at check, by key."""
    arrays = {"F": {"random": "normal", "shape": [50, 3], "block": [7, 2], "seed": 4},
              "I": "arange(9007199254740993, 9007199254741013)",
              "S": "F.astype('float32')",
              "B": "F[:, 0] > 0",
              "T": "zeros((2, 2, 2))"}
    outs = {k: str(tmp_path / f"{k}.csv") for k in "FISB"}
    outs["Fn"] = str(tmp_path / "F.npy")
    arrays["Fn"] = "F"
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outs, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    f = np.load(tmp_path / "F.npy")
    assert np.array_equal(np.loadtxt(tmp_path / "F.csv", delimiter=","), f)
    assert np.array_equal(np.loadtxt(tmp_path / "I.csv", dtype=np.int64),
                          np.arange(9007199254740993, 9007199254741013))
    assert np.array_equal(np.loadtxt(tmp_path / "S.csv", delimiter=",", dtype=np.float32), f.astype(np.float32))
    assert np.array_equal(np.loadtxt(tmp_path / "B.csv", dtype=np.int64), (f[:, 0] > 0).astype(np.int64))
    outs["T"] = str(tmp_path / "T.csv")
    job.write_text(job_text(arrays, outs, storage={"url": f"file://{tmp_path / 'store'}"}))
    p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "outputs.T" in p.stderr and "a .csv file holds a 1-D or 2-D array" in p.stderr, p.stderr


def test_empty_arrays_from_and_to_garage(garage, tmp_path):
    """An empty .npy input on S3, computed in an S3 store, written as an s3:// .npy output
    (byte for byte np.save's) and as a local one."""
    import io
    f = io.BytesIO()
    np.save(f, np.zeros((0, 3)))
    s3_put(garage, "inputs/empty.npy", f.getvalue())
    b = garage.bucket
    arrays = {"E": {"load": f"s3://{b}/inputs/empty.npy"}, "y": "E * 2 + 1", "s": "prod(E, axis=0)"}
    outputs = {"y": f"s3://{b}/exports/empty.npy", "s": str(tmp_path / "s.npy")}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"s3://{b}/empty", "endpoint": garage.endpoint}))
    run(job, env=garage.env())
    want = io.BytesIO()
    np.save(want, np.zeros((0, 3)) * 2 + 1)
    assert s3_get(garage, "exports/empty.npy") == want.getvalue()
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.ones(3))


def test_a_csv_that_a_fit_and_the_main_stage_read_is_parsed_once(tmp_path):
    """One CSV holding the label and the features (HIGGS's layout), its X and y sliced
    from it for a fit that the main stage also reads: the file is imported (read and
    parsed) once, in the stage that makes X; making y and the main stage read the
    import, which the run commits as its import of the file (a later run reuses it).
    An input that is y itself stays for the main stage after the fit. The coefficients
    are scikit-learn's."""
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(28)
    x = rng.normal(size=(3000, 4))
    y = (1 / (1 + np.exp(-(x @ [0.5, -1.0, 0.25, 2.0] + 0.3))) > rng.uniform(size=3000)).astype(float)
    np.savetxt(tmp_path / "in.csv", np.column_stack([y, x]), delimiter=",")
    size = (tmp_path / "in.csv").stat().st_size
    fit = "logistic_regression(X, y, solver='newton', tol=1e-10)"
    (tmp_path / "job.toml").write_text(job_text(
        {"D": {"load": "in.csv"}, "X": "D[:, 1:]", "y": "D[:, 0]", "w": fit, "s": "sum(D, axis=0)"},
        {"w": "w.npy", "s": "s.npy"}, name="once"))
    want = LogisticRegression(C=1.0, tol=1e-10, max_iter=1000).fit(x, y)
    for k in range(2):
        p = subprocess.run([BIN, "-v", "run", tmp_path / "job.toml", "--stats", tmp_path / "s.json"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        np.testing.assert_allclose(np.load(tmp_path / "w.npy"), [*want.coef_[0], *want.intercept_], rtol=1e-5)
        np.testing.assert_allclose(np.load(tmp_path / "s.npy"), np.column_stack([y, x]).sum(axis=0))
        read = {}
        for r in json.loads((tmp_path / "s.json").read_text())["timeline"]:
            stage = re.sub(r"^fit\d+-", "fit-", r["stage"])
            read[stage] = read.get(stage, 0) + r["bytes_read"]
        if k == 0:
            # The text is read by the stage that makes X, and by no other.
            assert read["fit-X"] >= size and read["fit-y"] < size / 2 and read.get("main", 0) < size / 2, read
        else:
            assert re.search(r"in\.csv: unchanged since it was imported to once/D", p.stderr), p.stderr
            assert read.get("fit-X", 0) < size / 2, read
    # y loaded by itself: the fit's y is the import, kept for the main stage.
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "y.csv", y)
    (tmp_path / "y.toml").write_text(job_text(
        {"X": {"load": "x.npy"}, "y": {"load": "y.csv"}, "w": fit, "n": "sum(y)"},
        {"w": "w2.npy", "n": "n.npy"}, name="own"))
    run(tmp_path / "y.toml")
    np.testing.assert_allclose(np.load(tmp_path / "w2.npy"), [*want.coef_[0], *want.intercept_], rtol=1e-5)
    assert float(np.load(tmp_path / "n.npy")) == y.sum()
