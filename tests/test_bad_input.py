"""Bad job files: a clear error naming the file, the line and the key (or the arrays and
their shapes), a non-zero exit, nothing run, and every stored array left as it was."""
import numpy as np
import pytest

from nums import run, snapshot

GOOD = """name = "same"
[arrays]
X = { random = "normal", shape = [7, 5], seed = 1, block = [3, 4] }
Y = "X * 2"
[outputs]
Y = "out/Y.npy"
"""

BAD = {
    "toml_syntax": ("""name = "same"
[arrays
X = { random = "normal", shape = [7, 5] }
""", 2, None, []),
    "unknown_key_compute": ("""name = "same"
[compute]
workers = 2
wrokers = 3
[arrays]
X = { zeros = [2] }
""", 4, None, ["wrokers"]),
    "unknown_key_array": ("""name = "same"
[arrays]
X = { random = "normal", shape = [7, 5], sed = 3 }
""", 3, "arrays.X.sed", []),
    "unknown_array": ("""name = "same"
[arrays]
X = { zeros = [7, 5] }
Y = "X + Z"
""", 4, "arrays.Y", ['unknown array "Z"']),
    "cycle": ("""name = "same"
[arrays]
X = "Y + 1"
Y = "X * 2"
""", 3, "arrays.X", ["cyclic definition: X -> Y -> X"]),
    "shape_mismatch": ("""name = "same"
[arrays]
X = { zeros = [7, 5] }
W = { ones = [5, 7] }
Y = "X + W"
""", 5, "arrays.Y", ["(7, 5) and (5, 7)"]),
    "matmul_mismatch": ("""name = "same"
[arrays]
X = { zeros = [7, 5] }
Y = "X @ X"
""", 4, "arrays.Y", ["inner sizes 5 and 7"]),
    "missing_input": ("""name = "same"
[arrays]
X = { load = "no/such/file.npy" }
""", 3, "arrays.X.load", ["no/such/file.npy"]),
    "unreachable_store": ("""name = "same"
[storage]
url = "s3://bucket/p"
endpoint = "http://127.0.0.1:9"
[arrays]
X = { zeros = [2] }
""", 3, "storage.url", ["unreachable"]),
    "bad_output": ("""name = "same"
[arrays]
X = { zeros = [2] }
[outputs]
Q = "q.npy"
""", 5, "outputs.Q", ["no array named Q"]),
}


@pytest.fixture
def populated(tmp_path):
    (tmp_path / "job.toml").write_text(GOOD)
    run(tmp_path / "job.toml")
    before = snapshot(tmp_path / "nums-data")
    assert any(k.startswith("same/Y/c/") for k in before)
    return tmp_path, before


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_job_is_refused_and_nothing_changes(case, populated):
    tmp_path, before = populated
    text, line, key, words = BAD[case]
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    y_before = np.load(tmp_path / "out" / "Y.npy")
    p = run(bad, check=False, env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true"})
    assert p.returncode != 0
    err = p.stderr
    assert f"{bad}:{line}:" in err, err
    if key:
        assert key in err, err
    for w in words:
        assert w in err, err
    assert "panicked" not in err, err
    assert snapshot(tmp_path / "nums-data") == before
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "Y.npy"), y_before)


def test_expression_error_points_into_the_expression(tmp_path):
    (tmp_path / "job.toml").write_text('[arrays]\nX = { zeros = [3] }\nY = "X + * 2"\n')
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode != 0
    assert "job.toml:3: arrays.Y:" in p.stderr and "X + * 2" in p.stderr and "column 5" in p.stderr, p.stderr
