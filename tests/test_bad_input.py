"""Bad job files: a clear error naming the file, the line and the key (or the arrays and
their shapes), a non-zero exit, nothing run, and every stored array left as it was."""
import subprocess

import numpy as np
import pytest

from nums import BIN, assert_close, job_text, run, snapshot

GOOD = """name = "same"
[arrays]
X = { random = "normal", shape = [7, 5], seed = 1, block = [3, 4] }
Y = "X * 2"
[outputs]
Y = "out/Y.npy"
X = "nums-data/same/X"
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
    "two_outputs_one_path": ("""name = "same"
[arrays]
X = { zeros = [2] }
Y = "X + 1"
[outputs]
X = "out/x.npy"
Y = "out/../out/x.npy"
""", 7, "outputs.Y", ["out/x.npy writes to the same path as outputs.X (line 6)"]),
    "output_inside_output": ("""name = "same"
[arrays]
X = { zeros = [2] }
Y = "X + 1"
[outputs]
X = "out/x.zarr"
Y = "out/x.zarr/y"
""", 7, "outputs.Y", ["writes inside the Zarr folder of outputs.X (line 6)"]),
    "output_suffix_h5": ("""name = "same"
[arrays]
X = { zeros = [2] }
[outputs]
X = "x.h5"
""", 5, "outputs.X", ['"x.h5": nums-cloud does not write .h5 files', ".npy", ".parquet", ".zarr"]),
    "output_suffix_h5_on_s3": ("""name = "same"
[arrays]
X = { zeros = [2] }
[outputs]
X = "s3://bucket/x.h5"
""", 5, "outputs.X", ['"s3://bucket/x.h5": nums-cloud does not write .h5 files']),
    # Names the expression language gives a meaning of its own: an array named True was
    # shadowed by the literal ("True * 2" gave 2).
    "reserved_name_literal": ("""name = "same"
[arrays]
True = { ones = [3] }
Y = "True * 2"
""", 3, "arrays.True", ['"True" cannot name an array: it is a literal']),
    "reserved_name_constant": ("""name = "same"
[arrays]
X = { ones = [3] }
pi = "X * 3"
""", 4, "arrays.pi", ['"pi" cannot name an array', "NumPy constant"]),
    # A function's name may name an array (a call is the function, a bare name the
    # array): used bare with no such array, or an array called, the error says which is which.
    "function_name_bare": ("""name = "same"
[arrays]
X = { ones = [3] }
Y = "X * sum"
""", 4, "arrays.Y", ['unknown array "sum" (sum is a function: call it, sum(...))']),
    "array_called": ("""name = "same"
[arrays]
X = { ones = [3] }
Y = "X(0) * 2"
""", 4, "arrays.Y", ["X is an array of the job, not a function: X[...] indexes it"]),
    "reserved_name_module": ("""name = "same"
[arrays]
linalg = { ones = [3] }
""", 3, "arrays.linalg", ["module name"]),
    # Limits: absurd job files get an error, never a crash or a hang.
    "call_left_open": ("""name = "same"
[arrays]
X = { zeros = [7, 5] }
Y = "sum("
""", 4, "arrays.Y", ["expected ')', found end of expression"]),
    "deep_expression": (f"""name = "same"
[arrays]
X = {{ zeros = [7, 5] }}
Y = "{'(' * 6000}X{')' * 6000}"
""", 4, "arrays.Y", ["nested more than 256 levels"]),
    "long_operator_chain": (f"""name = "same"
[arrays]
X = {{ zeros = [7, 5] }}
Y = "{' + '.join(['X'] * 1000)}"
""", 4, "arrays.Y", ["nested more than 256 levels", "split it into several arrays"]),
    "deep_toml": (f"""name = "same"
[arrays]
X = {{ zeros = [7, 5] }}
Y = {'[' * 10000}1{']' * 10000}
""", 4, None, ["nested more than 32 levels"]),
    "too_many_arrays": ("""name = "same"
[arrays]
""" + "".join(f"a{i} = {{ zeros = [1] }}\n" for i in range(10001)), 2, "arrays", ["10001 arrays", "more than the 10000"]),
    "blocks_per_array": ("""name = "same"
[arrays]
Z = { zeros = [1000000000000, 16], block = [250, 16] }
[outputs]
Z = "z.npy"
""", 3, "arrays.Z.block", ["4000000000 blocks", "more than the 1000000", "blocks of (1000000, 16) would do"]),
    "blocks_per_job": ("""name = "same"
[arrays]
""" + "".join(f"Z{i} = {{ zeros = [900000], block = [1] }}\n" for i in range(18)), 20, "arrays.Z17.block",
        ["16200000 blocks in all", "more than the 16000000"]),
    "too_many_elements": ("""name = "same"
[arrays]
v = { zeros = [1125899906842624], block = [1125899906842624] }
Y = "outer(v, v)"
""", 4, "arrays.Y", ["more than 2^50 elements"]),
}


@pytest.fixture
def populated(tmp_path):
    (tmp_path / "job.toml").write_text(GOOD)
    run(tmp_path / "job.toml")
    before = snapshot(tmp_path / "nums-data")
    assert any(k.startswith("same/X/c/") for k in before)
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


@pytest.mark.parametrize("case", ["two_outputs_one_path", "output_suffix_h5"])
def test_output_errors_are_found_by_check(case, tmp_path):
    """Outputs are checked by `check` (and `plan`), before anything runs or is written."""
    text, line, key, words = BAD[case]
    (tmp_path / "job.toml").write_text(text)
    for cmd in ["check", "plan"]:
        p = subprocess.run([BIN, cmd, str(tmp_path / "job.toml")], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, p.stdout
        assert f"job.toml:{line}: {key}:" in p.stderr and all(w in p.stderr for w in words), p.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "nums-data").exists()


def test_a_chain_of_arrays_thousands_long_checks(tmp_path):
    """Arrays may refer to each other in chains of any length (no recursion per link)."""
    lines = ["[arrays]", "a0 = { ones = [3] }"] + [f'a{i} = "a{i - 1} + 1"' for i in range(1, 3000)]
    (tmp_path / "job.toml").write_text("\n".join(lines) + '\n[outputs]\na2999 = "o.npy"\n')
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ok (3000 arrays, 1 output)" in p.stdout, p.stdout


def test_expression_error_points_into_the_expression(tmp_path):
    (tmp_path / "job.toml").write_text('[arrays]\nX = { zeros = [3] }\nY = "X + * 2"\n')
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode != 0
    assert "job.toml:3: arrays.Y:" in p.stderr and "X + * 2" in p.stderr and "column 5" in p.stderr, p.stderr


# Expression errors found before anything runs: (expression, column of the caret, words).
EXPR_ERRORS = {
    "broadcast": ("A + A.T", 3, ["shapes (7, 5) and (5, 7)", "do not broadcast"]),
    "bad_axis": ("sum(A, axis=2)", 13, ["axis 2 is out of bounds", "dimension 2"]),
    "bad_axis_tuple": ("mean(A, axis=(0, 0))", 14, ["repeated axis"]),
    "bool_subtract": ("(A > 0) - M", 9, ["- of two bool operands", "NumPy raises TypeError"]),
    "float_and": ("A & M", 3, ["& is defined for bools and integers", "float64"]),
    "invert_float": ("~A", 1, ["~ and bitwise_invert need a bool or integer array"]),
    "einsum_operands": ("einsum('ij,jk->ik', A)", 1, ["name 2 operands, but 1 are given"]),
    "einsum_sizes": ("einsum('ij,ij->i', A, A.T)", 1, ["letter 'i' has sizes 7 and 5"]),
    "einsum_repeated_output": ("einsum('ij->ii', A)", 1, ["output letter 'i' is repeated"]),
    "unknown_function": ("frobnicate(A)", 1, ["unknown function frobnicate() (README lists the functions; "
                                              "docs/unsupported.md"]),
    "unknown_method_near": ("A.summ()", 3, ["unknown function summ(); did you mean sum()? (README"]),
    "unsupported_function": ("vectorize(A)", 1, ["vectorize() is not supported; instead: no Python functions run in a job"]),
    "unknown_keyword": ("sum(A, axes=0)", 8, ["unexpected keyword argument \"axes\"", "did you mean \"axis\"?"]),
    "einsum_keyword": ("einsum('ij->ji', A, subscripts='ij')", 21, ["its arguments are positional"]),
    "matmul_inner": ("A @ A", 3, ["inner sizes 5 and 7 differ"]),
    "index_bounds": ("A[7]", 3, ["index 7 is out of bounds for axis 0 with size 7"]),
    "slice_step": ("A[::0]", 3, ["slice step cannot be zero"]),
    "reshape_size": ("reshape(A, (6, 6))", 1, ["cannot reshape an array of size 35"]),
    "concat_shapes": ("concatenate((A, A.T))", 1, ["cannot concatenate shapes (7, 5) and (5, 7)"]),
    "bad_dtype": ("astype(A, 'float16')", 11, ["has no dtype float16: its dtypes are bool, int8,"]),
    # These used to panic (an empty list indexed, usize underflow, overflow, too few letters).
    "concat_axis_empty_list": ("concatenate((A, A), axis=[])", 26, ["axis must be an integer"]),
    "stack_axis_empty_list": ("stack((A, A), axis=[])", 20, ["axis must be an integer"]),
    "stack_shapes": ("stack((A, A[0]), axis=2)", 1, ["same shape; got (7, 5) and (5,)"]),
    "transpose_axes_items": ("transpose(A, ([], 0))", 14, ["axis must be an integer"]),
    "matmul_rank": ("expand_dims(A, (0, 1, 2, 3, 4, 5, 6, 7, 8)) @ A.T", 45, ["more than 8 dimensions"]),
    "dot_letters": ("dot(expand_dims(A, (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)), "
                    "expand_dims(A.T, (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)))", 1,
                    ["dot(): 30 dimensions in all; at most 26"]),
    "dot_not_aligned": ("dot(expand_dims(A, 0), A)", 1, ["dot(): shapes (1, 7, 5) and (7, 5) not aligned"]),
    "zeros_too_large": ("zeros((2**40, 2**40))", 7, ["more than 2^50 elements"]),
    "arange_too_large": ("arange(1e300)", 1, ["arange() of 1e300 elements: more than 2^50"]),
    "reshape_overflow": ("reshape(A, (2**40, 2**40, -1))", 1, ["cannot reshape an array of size 35"]),
    "outer_too_large": ("outer(zeros(2**33), zeros(2**33))", 1, ["(8589934592, 8589934592) has more than 2^50"]),
    "broadcast_too_large": ("zeros((2**33, 1)) + zeros(2**33)", 19, ["the result of +", "more than 2^50"]),
    "full_inf_int": ("full(3, np.inf, dtype='int64')", 1, ["cannot convert the float inf to an integer"]),
    "tensordot_duplicate_axes": ("tensordot(A, A, axes=([0, 0], [0, 1]))", 22, ["duplicate axes"]),
    "tensordot_float_axes": ("tensordot(A, A.T, axes=1.5)", 24, ["axes=1.5 is not an integer"]),
    # NumPy raises for these; nums-cloud answered.
    "float_axis": ("mean(A, axis=0.0)", 14, ["axis 0.0 is not an integer"]),
    "arange_bools": ("arange(3, dtype='bool')", 1, ["bools only for ranges of at most 2 values"]),
    "bool_index": ("A[:, True]", 6, ["a bool index (True) adds an axis in NumPy"]),
    "bool_list_length": ("A[[True, False]]", 3, ["a bool index list of 2 values for axis 0 of size 7"]),
    "int_past_uint64": ("A * 0 - 18446744073709551616", 9, ["18446744073709551616 is outside uint64's range"]),
    "int_past_int64": ("M - 9223372036854775808", 3, ["Python integer 9223372036854775808 out of bounds for int64"]),
}


@pytest.mark.parametrize("case", sorted(EXPR_ERRORS))
def test_expression_errors_name_the_expression_and_position(case, tmp_path):
    expr, col, words = EXPR_ERRORS[case]
    (tmp_path / "job.toml").write_text(
        f'[arrays]\nA = {{ zeros = [7, 5] }}\nM = {{ zeros = [7, 5], dtype = "bool" }}\nY = "{expr}"\n'
        '[outputs]\nY = "y.npy"\n')
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stdout
    err = p.stderr
    assert "job.toml:4: arrays.Y:" in err and expr in err, err
    assert f"(at column {col})" in err, err
    caret = err.splitlines()[-1]
    assert caret.index("^") - 4 == col - 1, err
    for w in words:
        assert w in err, err
    assert "panicked" not in err
    assert not (tmp_path / "nums-data").exists()


# Expressions that used to panic (or, for concatenate(axis=None), gave another shape) and
# that NumPy answers: nums-cloud gives NumPy's answer.
USED_TO_PANIC = ["dot(T, v)", "dot(s, A)", "dot(A, s)", "hstack((s, s))", "vstack((s, s))",
                 "concatenate((v, A, s), axis=None)"]


def test_expressions_that_used_to_panic_give_numpys_answer(tmp_path):
    rng = np.random.default_rng(3)
    inputs = {"A": rng.normal(size=(7, 5)), "T": rng.normal(size=(4, 3, 5)), "v": rng.normal(size=5)}
    arrays = {}
    for name, a in inputs.items():
        np.save(tmp_path / f"{name}.npy", a)
        arrays[name] = {"load": str(tmp_path / f"{name}.npy"), "block": [3] * a.ndim}
    arrays["s"] = "sum(A)"
    outputs = {}
    for i, expr in enumerate(USED_TO_PANIC):
        arrays[f"c{i}"] = expr
        outputs[f"c{i}"] = str(tmp_path / f"c{i}.npy")
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    ns = {**inputs, "s": inputs["A"].sum(), "dot": np.dot, "hstack": np.hstack, "vstack": np.vstack,
          "concatenate": np.concatenate}
    for i, expr in enumerate(USED_TO_PANIC):
        want = np.asarray(eval(expr, ns))  # noqa: S307 - our own table
        assert_close(np.load(tmp_path / f"c{i}.npy"), want, rtol=1e-12)
