"""The Python package's namespace (nums_cloud.numpy) against NumPy: the conformance table's
expressions evaluated by Python over nums-cloud arrays and by NumPy from the same text;
operators (reflected ones and NumPy arrays on the left), indexing, attributes, methods,
conversions, values back without a copy, random arrays, linear algebra, the same
expressions in this process and on function processes, and NumS's README examples with
only the import changed."""
import inspect
import types

import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps
from test_conformance import CASES, INPUTS, assert_matches, numpy_answer


@pytest.fixture
def session(tmp_path):
    """A session on a store of its own: small computes in this process (the default)."""
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=512,
                        progress=False)
    yield s
    s.close()


def namespace(blocks=None):
    """The conformance table's names over nums-cloud: its inputs as arrays of the current
    session (in the session's default blocks, or the table's ragged ones with
    ``blocks="ragged"``), its functions from nums_cloud.numpy (``np.`` too)."""
    ns = {name: getattr(nps, name) for name in dir(nps) if not name.startswith("_")}
    np_shim = types.SimpleNamespace(**ns)
    np_shim.linalg = nps.linalg
    ns["np"] = np_shim
    for name, (arr, ragged, other) in INPUTS.items():
        ns[name] = nps.array(arr).block(ragged) if blocks == "ragged" else nps.array(arr)
    return ns


def lazy(expr, ns):
    v = eval(expr, ns)  # noqa: S307 - the conformance table's own texts
    if isinstance(v, tuple):  # a named tuple's field is asked for in the texts
        v = v[0]
    return v


def test_conformance_table_through_python(session):
    """Every expression of the conformance table, as Python evaluates it over nums-cloud
    arrays (operators, methods, NumPy's names), equals NumPy's on the same text. All are
    computed in one plan (then one by one, if that fails, to name the cases)."""
    ns = namespace()
    failures, values = [], {}
    for expr in CASES:
        try:
            values[expr] = lazy(expr, ns)
        except Exception as e:
            failures.append(f"{expr}: {type(e).__name__}: {str(e)[:300]}")
    arrays = {k: v for k, v in values.items() if isinstance(v, nps.BlockArray)}
    try:
        computed = dict(zip(arrays, nps.get(*arrays.values())))
    except Exception:
        computed = {}
        for k, v in arrays.items():
            try:
                computed[k] = v.get()
            except Exception as e:
                failures.append(f"{k}: {type(e).__name__}: {str(e)[:300]}")
    for expr, v in values.items():
        if expr in arrays and expr not in computed:
            continue
        got = np.asarray(computed.get(expr, v))
        try:
            assert_matches(expr, got, numpy_answer(expr))
        except AssertionError as e:
            failures.append(f"{expr}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)


def test_same_expressions_in_process_and_on_function_processes(tmp_path):
    """The same expressions computed in this process and by local function processes
    (``python -m nums_cloud._function``, no nums-cloud binary) give the same bits; the
    counts say where each ran."""
    cases = [c for i, c in enumerate(CASES) if i % 6 == 0]
    results = {}
    for where, mb in (("here", 16), ("processes", 0)):
        s = nums_cloud.init(storage=f"file://{tmp_path / where}", workers=2, memory_mb=512,
                            progress=False, in_process_mb=mb)
        ns = namespace("ragged")
        arrays = [lazy(c, ns) for c in cases]
        arrs = [a for a in arrays if isinstance(a, nps.BlockArray)]
        assert nums_cloud.explain(arrs[0]).place == ("in-process" if mb else "local")
        values = nps.get(*arrs)
        results[where] = values
        c = s.counts()
        if mb:
            assert c["in_process"] == c["invocations"] > 0, c
        else:
            assert c["in_process"] == 0 and c["invocations"] > 0, c
        s.close()
    for a, b in zip(results["here"], results["processes"]):
        np.testing.assert_array_equal(a, b)


def test_operators_reflected_and_numpy_arrays_on_the_left(session):
    a = np.arange(1.0, 7.0).reshape(2, 3)
    x = nps.array(a)
    for f in (lambda u: 2 + u, lambda u: 2 - u, lambda u: 3 * u, lambda u: 1 / u,
              lambda u: 7 // u, lambda u: 7 % u, lambda u: 2 ** u, lambda u: u @ u.T,
              lambda u: a.T @ u, lambda u: a + u, lambda u: a * u, lambda u: -u, lambda u: +u,
              lambda u: abs(-u), lambda u: (u > 2) & (u < 5), lambda u: (u > 2) | (u < 1),
              lambda u: ~(u > 3), lambda u: (u > 2) ^ True, lambda u: 4 > u, lambda u: u == 2,
              lambda u: u != 2, lambda u: np.exp(u), lambda u: np.add(a, u),
              lambda u: np.maximum(u, 3), lambda u: np.float64(2.5) * u):
        want = f(a)
        got = f(x)
        assert isinstance(got, nps.BlockArray), f
        np.testing.assert_allclose(got.get(), want, rtol=1e-12)
        assert got.dtype == want.dtype
    # NumPy's functions dispatch to the engine's (lazily) or compute and fall back.
    assert isinstance(np.sum(x, axis=0), nps.BlockArray)
    np.testing.assert_array_equal(np.sum(x, axis=0).get(), a.sum(axis=0))
    np.testing.assert_array_equal(np.concatenate([x, x]).get(), np.concatenate([a, a]))
    np.testing.assert_array_equal(np.cumsum(x), np.cumsum(a))  # NumPy's own, on the values


def test_indexing_and_slicing(session):
    a = np.arange(60.0).reshape(3, 4, 5)
    x = nps.array(a).block(2, 3, 2)
    for key in (0, -1, (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 0), (slice(1, None), slice(None, None, -2)),
                (slice(None), slice(1, 3), slice(None, None, 2)), [2, 0], (slice(None), [3, 1]),
                np.array([1, 0]), np.int64(1)):
        np.testing.assert_array_equal(x[key].get(), a[key], err_msg=str(key))
    m = a[:, 0, 0] > 10
    np.testing.assert_array_equal(x[x[:, 0, 0] > 10].get(), a[m])
    np.testing.assert_array_equal(x[m].get(), a[m])
    np.testing.assert_array_equal(x[[True, False, True]].get(), a[[True, False, True]])
    x[0] = 1  # in place, as NumPy's (tests/test_python_assign.py)
    a[0] = 1
    np.testing.assert_array_equal(x.get(), a)
    with pytest.raises(IndexError):  # NumPy's class
        x[5].check() if hasattr(x[5], "check") else None


def test_attributes_methods_and_conversions(session):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    x = nps.array(a)
    assert (x.shape, x.ndim, x.size, x.dtype, x.itemsize, x.nbytes) == ((3, 4), 2, 12, np.dtype("int64"), 8, 96)
    assert x.dtype == nps.int64 == np.int64
    assert x.T.shape == (4, 3) and x.mT.shape == (4, 3)
    np.testing.assert_array_equal(x.astype(nps.float32).get(), a.astype(np.float32))
    np.testing.assert_array_equal(x.reshape(2, 6).get(), a.reshape(2, 6))
    np.testing.assert_array_equal(x.reshape((6, -1)).get(), a.reshape(6, -1))
    np.testing.assert_array_equal(x.transpose().get(), a.T)
    np.testing.assert_array_equal(x.ravel().get(), a.ravel())
    for m in ("sum", "prod", "min", "max", "mean", "std", "var", "argmin", "argmax", "all", "any"):
        for axis in (None, 0, 1):
            got, want = getattr(x, m)(axis=axis).get(), getattr(a, m)(axis=axis)
            np.testing.assert_allclose(got, want, err_msg=f"{m}(axis={axis})")
            assert np.asarray(got).dtype == np.asarray(want).dtype, m
    np.testing.assert_array_equal(x.sum(axis=0, keepdims=True).get(), a.sum(axis=0, keepdims=True))
    np.testing.assert_allclose(x.std(axis=1, ddof=1).get(), a.std(axis=1, ddof=1))
    assert float(x.sum()) == 66.0 and int(x.max()) == 11 and bool(x.any()) is True
    assert x.sum().item() == 66 and x.tolist() == a.tolist() and len(x) == 3
    assert [r.get().tolist() for r in x] == a.tolist()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError, match="length-1"):
        float(x)
    # A computed array's repr is NumPy's, values shown; a lazy one's says what it is
    # without computing it.
    assert repr(x) == repr(a).replace("array", "BlockArray")
    y = x * 2
    assert repr(y).startswith("BlockArray(shape=(3, 4), dtype=int64") and "lazy" in repr(y)
    assert not y.computed
    assert str(y) == str(a * 2)
    y.get()
    assert repr(y) == repr(a * 2).replace("array", "BlockArray") and y.computed


def test_arrays_from_numpy_lists_and_scalars_and_values_back_without_a_copy(session):
    assert nps.array([1, 2, 3]).dtype == np.int64
    assert nps.array([1.0, 2]).dtype == np.float64
    assert nps.array([True, False]).dtype == np.bool_
    assert nps.array(3.5).shape == () and float(nps.array(3.5)) == 3.5
    assert nps.array(np.ones(3, dtype=np.float16)).dtype == np.float32
    assert nps.asarray([[1, 2]], dtype=nps.float32).dtype == np.float32
    with pytest.raises(TypeError, match="no dtype <U1"):
        nps.array(np.array(["a"]))
    # Every dtype of the engine in and out as it is, its extremes exact.
    for d in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32, np.uint64, np.float32, np.float64, np.complex64, np.complex128):
        if np.dtype(d).kind in "iu":
            v = np.array([np.iinfo(d).min, 0, 7, np.iinfo(d).max], dtype=d)
        elif np.dtype(d).kind == "c":
            v = np.array([1 + 2j, -0.5j, np.inf, complex(np.nan, 1)], dtype=d)
        else:
            v = np.array([0, 1, 0, 1], dtype=d)
        x = nps.array(v)
        assert x.dtype == np.dtype(d) and getattr(nps, np.dtype(d).name) is d
        got = (x[::-1][::-1]).get()
        assert got.dtype == np.dtype(d)
        np.testing.assert_array_equal(got, v)
    # Python numbers past int64 and complex ones as NumPy takes them.
    big = nps.array(np.array([1, 2], dtype=np.uint64)) + 2**63
    np.testing.assert_array_equal(big.get(), np.array([1, 2], dtype=np.uint64) + 2**63)
    z = nps.array(np.array([1.0, 2.0], dtype=np.float32)) * 2j
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.get(), np.array([1.0, 2.0], dtype=np.float32) * 2j)
    assert complex(nps.sum(nps.array([1 + 1j, 2]))) == 3 + 1j
    x = nps.array(np.arange(6.0)) * 2
    v = x.compute()
    # The engine's buffer handed over: NumPy does not own the data, and no copy was made.
    assert not v.flags.owndata and v.base is not None
    # The array keeps its (small) values: np.asarray reads them, computes nothing, and
    # hands out the same read-only values each time; compute() gives a copy to change.
    once = nums_cloud.session().counts()
    w = np.asarray(x)
    assert np.asarray(x) is w and not w.flags.writeable
    np.testing.assert_array_equal(w, np.arange(6.0) * 2)
    mine = x.compute()
    mine[0] = 7
    assert float(x[0]) == 0.0 and x.tolist()[0] == 0.0 and nums_cloud.session().counts() == once
    assert isinstance(nps.sum(x).get(), np.float64)  # a 0-d array's get() is a NumPy scalar


def test_creation_functions_match_numpy(session):
    for expr in ("zeros((2, 3))", "ones(4, dtype=int64)", "full((2, 2), 7.5)", "eye(3, k=1)",
                 "identity(3)", "arange(10)", "arange(1, 2, 0.25)", "linspace(0, 1, 5)",
                 "zeros_like(arange(3))", "empty((2,))", "ones_like(eye(2), dtype=bool)"):
        got = eval(expr, {**vars(nps)})  # noqa: S307
        want = eval(expr.replace("empty", "zeros"), {**vars(np)})  # noqa: S307
        np.testing.assert_array_equal(got.get(), want, err_msg=expr)
        assert got.dtype == want.dtype, expr
    # NumS's spellings: nps.int, shape= as a keyword.
    assert nps.zeros(shape=(3,), dtype=nps.int).dtype == np.int64


def test_random_arrays_are_deterministic_and_in_range(session):
    nps.random.seed(3)
    a = nps.random.rand(1000, 3).get()
    nps.random.seed(3)
    b = nps.random.rand(1000, 3).get()
    np.testing.assert_array_equal(a, b)
    assert a.shape == (1000, 3) and 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    r = nps.random.randn(5000).get()
    assert abs(r.mean()) < 0.1 and abs(r.std() - 1) < 0.1
    i = nps.random.randint(3, 9, size=(500,)).get()
    assert i.dtype == np.int64 and i.min() == 3 and i.max() == 8
    g1, g2 = nps.random.default_rng(42), nps.random.default_rng(42)
    np.testing.assert_array_equal(g1.normal(2.0, 3.0, (10,)).get(), g2.normal(2.0, 3.0, (10,)).get())
    u = g1.uniform(-1, 1, size=2000).get()
    assert -1 <= u.min() and u.max() < 1
    assert sorted(nps.random.permutation(50).get().tolist()) == list(range(50))
    x = nps.arange(10.0)
    assert sorted(nps.random.permutation(x).get().tolist()) == list(np.arange(10.0))
    assert nps.random.random_sample((2, 2)).shape == (2, 2)


def test_linalg_matches_numpy(session):
    rng = np.random.default_rng(5)
    a = rng.normal(size=(40, 5))
    s = rng.normal(size=(5, 5)) + 5 * np.eye(5)
    b = rng.normal(size=40)
    x, sx = nps.array(a).block(9, 5), nps.array(s)
    q, r = nps.linalg.qr(x)
    np.testing.assert_allclose((q @ r).get(), a, atol=1e-12)
    np.testing.assert_allclose(np.abs(r.get()), np.abs(np.linalg.qr(a).R), atol=1e-12)
    u, sv, vh = nps.linalg.svd(x)
    np.testing.assert_allclose(sv.get(), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(nps.linalg.lstsq(x, b)[0].get(), np.linalg.lstsq(a, b)[0], rtol=1e-10)
    np.testing.assert_allclose(nps.linalg.solve(sx, b[:5]).get(), np.linalg.solve(s, b[:5]), rtol=1e-10)
    np.testing.assert_allclose(nps.linalg.inv(sx).get(), np.linalg.inv(s), rtol=1e-10)
    np.testing.assert_allclose(float(nps.linalg.det(sx)), np.linalg.det(s), rtol=1e-10)
    np.testing.assert_allclose(float(nps.linalg.norm(x)), np.linalg.norm(a), rtol=1e-12)
    spd = s @ s.T
    np.testing.assert_allclose(nps.linalg.cholesky(nps.array(spd)).get(), np.linalg.cholesky(spd), rtol=1e-10)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        nps.linalg.inv(nps.zeros((3, 3))).get()
    with pytest.raises(nums_cloud.LinAlgError, match="positive definite"):
        nps.linalg.cholesky(-nps.eye(3)).get()


def test_nums_readme_examples_run_with_only_the_import_changed(session, tmp_path):
    """NumS's README examples (sizes scaled down), with ``import nums`` and
    ``import nums.numpy as nps`` changed to nums_cloud's."""
    import nums_cloud as nums
    from nums_cloud.models import LogisticRegression

    # Basics.
    x = nps.random.rand(10**5)
    assert float((x.T @ x).get()) > 0
    x = nps.random.rand(10**2, 10**2)
    y = nps.random.rand(10**2)
    assert (x @ y).shape == (100,) and (x.T @ x).shape == (100, 100)
    x = nps.random.permutation(10**4)
    idx = nps.where(x == 10**4 // 2)
    if x[idx] == 10**4 // 2:
        pass
    else:
        raise Exception("This is impossible.")
    # I/O.
    # (NumS's "x.nps", in this test's folder: relative paths are the session's working
    # directory's.)
    x1 = nps.random.rand(10**4)
    print(nums.write(str(tmp_path / "x.nps"), x1).get())
    x2 = nums.read(str(tmp_path / "x.nps"))
    assert nps.allclose(x1, x2)
    np.testing.assert_array_equal(x2.get(), x1.get())
    # Logistic regression on a bimodal Gaussian.
    size = 10**4
    X_train = nps.concatenate([nps.random.randn(size // 2, 2),
                               nps.random.randn(size // 2, 2) + 2.0], axis=0)
    y_train = nps.concatenate([nps.zeros(shape=(size // 2,), dtype=nps.int),
                               nps.ones(shape=(size // 2,), dtype=nps.int)], axis=0)
    model = LogisticRegression(solver="newton-cg", penalty="l2", C=10)
    model.fit(X_train, y_train)
    X_test = nps.concatenate([nps.random.randn(10**3, 2),
                              nps.random.randn(10**3, 2) + 2.0], axis=0)
    y_test = nps.concatenate([nps.zeros(shape=(10**3,), dtype=nps.int),
                              nps.ones(shape=(10**3,), dtype=nps.int)], axis=0)
    train = (nps.sum(y_train == model.predict(X_train)) / X_train.shape[0]).get()
    test = (nps.sum(y_test == model.predict(X_test)) / X_test.shape[0]).get()
    assert train > 0.85 and test > 0.85, (train, test)


def test_every_public_name_has_a_docstring():
    from nums_cloud import models

    missing = []
    for mod in (nums_cloud, nps, nps.linalg, nps.fft, nps.random, models):
        for name in getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]:
            obj = getattr(mod, name)
            if isinstance(obj, (int, float, str, tuple, dict, type(None))) or isinstance(obj, np.dtype):
                continue
            if isinstance(obj, types.ModuleType) or (isinstance(obj, type) and obj.__module__.startswith("numpy")):
                continue
            if not inspect.getdoc(obj):
                missing.append(f"{mod.__name__}.{name}")
    for name, member in inspect.getmembers(nps.BlockArray):
        if not name.startswith("_") and not inspect.getdoc(member):
            missing.append(f"BlockArray.{name}")
    assert not missing, missing
    # NumPy's wording where the semantics are NumPy's.
    assert nps.exp.__doc__.startswith("Calculate the exponential of all elements")
    assert "nums-cloud" in nps.exp.__doc__


def test_building_an_expression_sends_nothing_and_small_work_runs_here(session):
    """Building an expression is bookkeeping: 2,000 operations send no invocation and run no
    task. A small compute runs in this process: one task (x read in place), no function
    process. How fast both are (microseconds per operation, milliseconds per compute) is
    timing, measured by benches/python_latency.py (BENCHMARKS.md), not asserted here."""
    x = nps.arange(1000.0)
    x.get()
    before = session.counts()
    y = x
    for _ in range(2000):
        y = y + 1.0
    assert session.counts() == before, "building computed something"
    assert nums_cloud.explain(x * 2).place == "in-process"
    for k in range(15):
        np.testing.assert_array_equal((x * float(k)).get(), np.arange(1000.0) * k)
    after = session.counts()
    assert after["tasks"] - before["tasks"] == 15, (before, after)
    assert after["in_process"] - before["in_process"] == after["invocations"] - before["invocations"] > 0


def test_a_compute_costs_what_it_computes_not_the_sessions_graph(tmp_path):
    """A small compute reads only the nodes it needs: 20,000 other operations in the session
    (each a node of its graph) change nothing in what it sends and reads: the same tasks and
    invocations per compute, the same bytes in its plan, as a fresh session's. (That its
    time stays as it was is timing: benches/python_latency.py measures it.)"""
    fresh = nums_cloud.init(storage=f"file://{tmp_path / 'fresh'}", progress=False)
    x_fresh = nps.arange(1000.0)
    x_fresh.get()
    grown = nums_cloud.init(storage=f"file://{tmp_path / 'grown'}", progress=False)
    x_grown = nps.arange(1000.0)
    x_grown.get()
    y = nps.arange(10.0)
    for _ in range(20_000):
        y = y + 1.0  # 20,000 nodes of the grown session the computes below do not need
    sent = {"fresh": [], "grown": []}
    for k in range(5):
        for name, s, x in (("fresh", fresh, x_fresh), ("grown", grown, x_grown)):
            z = x * float(k)
            plan = str(nums_cloud.explain(z))  # the bytes it reads and makes, its invocations
            before = s.counts()
            np.testing.assert_array_equal(z.get(), np.arange(1000.0) * k)
            after = s.counts()
            sent[name].append((plan, *(after[c] - before[c] for c in ("invocations", "tasks"))))
    fresh.close()
    grown.close()
    assert sent["grown"] == sent["fresh"], sent


def namespace_stub():
    """The type stub of nums_cloud.numpy (its names are made at import from the engine's
    function table, which type checkers cannot see): every public name with its
    parameters."""
    import nums_cloud.numpy._api as api

    lines = [
        '"""Type stub of nums_cloud.numpy (generated: tests/test_python_numpy.py',
        'test_the_namespace_stub_lists_every_name prints it when the namespace changes)."""',
        "",
        "from typing import Any",
        "",
        "import numpy as np",
        "",
        "from . import fft as fft, lib as lib, linalg as linalg, random as random",
        "from ._array import BlockArray as BlockArray",
        "",
        "__array_api_version__: str",
        "EAGER: list[str]",
        "ndarray = BlockArray",
    ]
    table = {name: (params, star) for _, name, aliases, params, star, _ in nums_cloud._native.functions()
             for name in (name, *aliases)}
    for name in sorted(n for n in dir(nps) if not n.startswith("_") or n == "__array_namespace_info__"):
        obj = getattr(nps, name)
        if name in ("BlockArray", "ndarray", "fft", "lib", "linalg", "random", "EAGER", "__array_api_version__"):
            continue
        if isinstance(obj, type) and issubclass(obj, np.generic):
            lines.append(f"{name} = np.{obj.__name__}")
        elif isinstance(obj, float):
            lines.append(f"{name}: float")
        elif obj is None:
            lines.append(f"{name}: None")
        elif obj is np.dtype:
            lines.append(f"{name} = np.dtype")
        elif callable(obj):
            fn = getattr(obj, "__wrapped__", obj)
            sig = inspect.signature(fn)
            params = list(sig.parameters.values())
            kinds = [q.kind for q in params]
            if kinds == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD] and name in table:
                ps, star = table[name]
                parts, optional = [], False
                for i, p in enumerate(ps):
                    if star and i == len(ps) - 1:
                        parts.append(f"*{p}: Any")
                        continue
                    optional = optional or (i > 0 and p in OPTIONAL)
                    parts.append(f"{p}: Any" + (" = ..." if optional else ""))
                text = ", ".join(parts)
            else:
                text = str(sig.replace(parameters=[
                    p.replace(annotation=Any, default=... if p.default is not p.empty else p.empty)
                    for p in params], return_annotation=inspect.Signature.empty))[1:-1]
                text = text.replace("typing.Any", "Any").replace("Ellipsis", "...")
            ret = "BlockArray" if name in table and name not in ("qr", "svd", "lstsq", "slogdet") else "Any"
            lines.append(f"def {name}({text}) -> {ret}: ...")
    api  # noqa: B018
    return "\n".join(lines) + "\n"


from typing import Any  # noqa: E402

# The table's parameters that NumPy gives a default (and every one after them).
OPTIONAL = {"dtype", "axis", "out", "keepdims", "ddof", "M", "k", "num", "endpoint", "retstep",
            "stop", "step", "offset", "axis1", "axis2", "axes", "mode", "rcond",
            "full_matrices", "compute_uv", "hermitian", "ord", "a_min", "a_max", "deg", "n",
            "prepend", "append", "include_initial", "kind", "order", "stable", "descending",
            "side", "sorter", "return_index", "return_inverse", "return_counts",
            "equal_nan", "sorted", "assume_unique", "invert", "overwrite_input", "method",
            "weights", "returned", "y", "rowvar", "bias", "fweights", "aweights", "bins",
            "range", "density", "minlength"}


def test_the_namespace_stub_lists_every_name():
    """python/nums_cloud/numpy/__init__.pyi says what the namespace holds (its functions
    are made from the engine's table at import): it must list every public name."""
    import pathlib

    stub = pathlib.Path(nps.__file__).with_suffix(".pyi")
    want = namespace_stub()
    have = stub.read_text() if stub.exists() else ""
    assert have == want, f"{stub} differs from the namespace; write this:\n{want}"


def test_sorts_and_selections_whose_shapes_depend_on_values(tmp_path):
    """A sample sort past one invocation (its sample and partition counts computed
    first, as a job's stages compute them), unique and bincount (their lengths from the
    values) build from Python as any expression does, and equal NumPy's."""
    # (No memory tier: its input from memory would keep the sort in this process.)
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=128,
                        progress=False, memory_tier_mb=0)
    try:
        v = np.random.default_rng(1).standard_normal(1_500_000)
        x = nps.array(v)
        y = nps.sort(x)
        assert "function processes" in str(nums_cloud.explain(y))
        np.testing.assert_array_equal(y.get(), np.sort(v))
        r = np.round(v[:10_000] * 10)
        u, counts = nps.unique(nps.array(r), return_counts=True)
        want_u, want_counts = np.unique(r, return_counts=True)
        np.testing.assert_array_equal(u.get(), want_u)
        np.testing.assert_array_equal(counts.get(), want_counts)
        j = np.array([3, 0, 3, 7, 1], dtype=np.int64)
        np.testing.assert_array_equal(nps.bincount(nps.array(j)).get(), np.bincount(j))
        uv = nps.unique_values(nps.array(r)).get()
        np.testing.assert_array_equal(uv, np.unique_values(r))
    finally:
        s.close()


def test_array_api_namespace_against_numpy_2s(session):
    """The Array API standard's names in nums_cloud.numpy against NumPy 2's namespace,
    which holds the same names: dtype functions, the standard's spellings, and the
    engine's sorting, set and cumulative functions with the standard's keywords."""
    assert nps.__array_api_version__ == "2023.12"
    info = nps.__array_namespace_info__()
    kinds = {"bool": ["bool"], "signed integer": ["int8", "int16", "int32", "int64"],
             "unsigned integer": ["uint8", "uint16", "uint32", "uint64"],
             "real floating": ["float32", "float64"],
             "complex floating": ["complex64", "complex128"]}
    for kind, names in kinds.items():
        assert sorted(info.dtypes(kind=kind)) == sorted(names), kind
        for n in names:
            assert nps.isdtype(getattr(nps, n), kind)
    assert info.default_dtypes()["complex floating"] == np.complex128
    dtypes = [getattr(nps, n) for names in kinds.values() for n in names]
    for a in dtypes:
        for b in dtypes:
            assert nps.can_cast(a, b) == np.can_cast(a, b), (a, b)
            assert nps.result_type(a, b) == np.result_type(a, b), (a, b)
    x8 = nps.asarray(np.array([1, 2], dtype=np.int8))
    assert nps.result_type(x8, 1) == np.int8 and nps.result_type(x8, 1.0) == np.float64
    # NumPy scalars keep their dtype, Python numbers alone take their kind's default.
    for args in [(np.int32(1), np.int8), (x8, np.float32(1)), (1, 2.0), (True,), (1j, np.uint8)]:
        want = np.result_type(*(np.int8 if a is x8 else a for a in args))
        assert nps.result_type(*args) == want, args
    assert [str(d) for d in info.dtypes().values()] == list(nums_cloud._native.dtypes())
    for d in (nps.float32, nps.float64, nps.complex64, nps.complex128):
        fi = nps.finfo(d)
        want = np.finfo(d)
        # Python numbers, as the standard says (NumPy's are NumPy scalars).
        for field in ("eps", "max", "min", "smallest_normal"):
            v = getattr(fi, field)
            assert type(v) is float and v == float(getattr(want, field)), (d, field)
        assert fi.bits == want.bits and fi.dtype == want.dtype
        assert nps.finfo(nps.asarray(np.ones(1, dtype=d))).bits == want.bits
    for d in (nps.int8, nps.uint8, nps.int64, nps.uint64):
        ii = nps.iinfo(d)
        assert (ii.min, ii.max, ii.bits) == (np.iinfo(d).min, np.iinfo(d).max, np.iinfo(d).bits)

    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 5))
    ints = rng.integers(0, 6, size=12)
    x, xi = nps.asarray(a), nps.asarray(ints)
    cases = [
        ("concat", lambda m, v: m.concat([v, v], axis=1)),
        ("permute_dims", lambda m, v: m.permute_dims(v, (1, 0))),
        ("pow", lambda m, v: m.pow(m.abs(v), 1.5)),
        ("matrix_transpose", lambda m, v: m.matrix_transpose(v)),
        ("astype", lambda m, v: m.astype(v, m.float32)),
        ("vecdot", lambda m, v: m.vecdot(v, v)),
        ("flip", lambda m, v: m.flip(v, axis=0)),
        ("roll", lambda m, v: m.roll(v, 2, axis=1)),
        ("tril", lambda m, v: m.tril(v, k=-1)),
        ("sort descending", lambda m, v: m.sort(v, axis=1, descending=True) if m is nps
         else np.flip(np.sort(v, axis=1), axis=1)),
        ("argsort", lambda m, v: m.argsort(v, axis=0, stable=True)),
        ("cumulative_sum", lambda m, v: m.cumulative_sum(v, axis=1, include_initial=True)),
        ("std correction", lambda m, v: m.std(v, axis=0, correction=1)),
    ]
    for name, f in cases:
        np.testing.assert_allclose(np.asarray(f(nps, x)), f(np, a), rtol=1e-6, err_msg=name)
    # The standard leaves the order of unique values open (NumPy 2.4's are not sorted):
    # compared as what they say about the input.
    want_v, want_c = np.unique(ints, return_counts=True)
    np.testing.assert_array_equal(np.sort(nps.unique_values(xi).get()), want_v)
    v, c = (np.asarray(t) for t in nps.unique_counts(xi))
    assert dict(zip(v.tolist(), c.tolist())) == dict(zip(want_v.tolist(), want_c.tolist()))
    v, inv = (np.asarray(t) for t in nps.unique_inverse(xi))
    np.testing.assert_array_equal(v[inv], ints)
    v, idx, inv, c = (np.asarray(t) for t in nps.unique_all(xi))
    np.testing.assert_array_equal(v[inv], ints)
    np.testing.assert_array_equal(ints[idx], v)
    assert dict(zip(v.tolist(), c.tolist())) == dict(zip(want_v.tolist(), want_c.tolist()))
    s = np.sort(ints)
    np.testing.assert_array_equal(
        nps.searchsorted(nps.asarray(s), xi, side="right").get(),
        np.searchsorted(s, ints, side="right"))
    # A reduction's dtype= is its accumulator's (NumPy's wrap-around in narrow ints too).
    u = np.array([[1, 2, 3, 250], [7, 255, 9, 1]], dtype=np.uint64)
    for f, d in [("sum", np.uint8), ("sum", np.int8), ("prod", np.uint8), ("sum", np.float32)]:
        got = getattr(nps, f)(nps.asarray(u), axis=1, dtype=d)
        want = getattr(np, f)(u, axis=1, dtype=d)
        assert got.dtype == want.dtype, (f, d)
        np.testing.assert_array_equal(got.get(), want, err_msg=f"{f} {d}")
    u8 = np.array([[200, 3], [17, 255]], dtype=np.uint8)
    got = nps.vecdot(nps.asarray(u8), nps.asarray(u8))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got.get(), np.vecdot(u8, u8))
    with pytest.raises(ValueError, match="along axis"):
        nps.vecdot(x, nps.ones((4, 3)))
    b = np.array([True, False])
    for reps in (np.array([3], dtype=np.int8), np.array([2, 1]), 2):
        r = nps.repeat(nps.asarray(b), nps.asarray(reps) if not isinstance(reps, int) else reps)
        np.testing.assert_array_equal(r.get(), np.repeat(b, reps))
    e = nps.repeat(nps.zeros((0,), dtype=bool), 1)
    assert e.shape == (0,) and e.dtype == np.bool_
    np.testing.assert_array_equal(nps.take(x, [], axis=1).get(), np.take(a, [], axis=1))
    perm = np.argsort(ints)
    np.testing.assert_array_equal(
        nps.searchsorted(xi, nps.asarray(np.array([0, 3, 9])), sorter=nps.argsort(xi)).get(),
        np.searchsorted(ints, [0, 3, 9], sorter=perm))
    z = np.array([1 + 2j, -3j], dtype=np.complex64)
    np.testing.assert_array_equal(nps.real(nps.asarray(z)).get(), np.real(z))
    np.testing.assert_array_equal(nps.conj(nps.asarray(z)).get(), np.conj(z))


def test_table_functions_have_numpys_signatures():
    """The functions made from the engine's table show NumPy's parameter kinds and
    defaults for the table's parameters (``inspect.signature``): the standard's
    positional-only ``x, /`` of the elementwise functions, keyword-only ``stable``,
    ``*xi`` of ``meshgrid``; the standard's own spellings take positional-only arguments."""
    P = inspect.Parameter
    checked = 0
    for family, name, _aliases, params, star, _arrays in nums_cloud._native.functions():
        if family in ("models", "linalg", "fft") or star:
            continue
        f = getattr(nps, name)
        if getattr(f, "__module__", "") != "nums_cloud.numpy":
            continue  # a stand-in of the namespace's own (the standard's signature)
        try:
            theirs = inspect.signature(getattr(np, name)).parameters
        except (AttributeError, TypeError, ValueError):
            continue
        ours = inspect.signature(f).parameters
        assert list(ours) in (list(params), [*params, "device"]), name
        for p in params:
            if p in theirs:
                assert ours[p].kind == theirs[p].kind, (name, p)
                assert ours[p].default is theirs[p].default or ours[p].default == theirs[p].default, (name, p)
        checked += 1
    assert checked > 100
    assert str(inspect.signature(nps.exp)) == "(x, /)"
    assert str(inspect.signature(nps.add)) == "(x1, x2, /)"
    assert inspect.signature(nps.meshgrid).parameters["xi"].kind == P.VAR_POSITIONAL
    assert inspect.signature(nps.argsort).parameters["stable"].kind == P.KEYWORD_ONLY
    assert inspect.signature(nps.einsum).parameters["operands"].kind == P.VAR_POSITIONAL
    for name in ("acos", "atan2", "bitwise_left_shift", "bitwise_right_shift"):
        kinds = {q.kind for q in inspect.signature(getattr(nps, name)).parameters.values()}
        assert kinds == {P.POSITIONAL_ONLY}, name
    # The standard's device= (NumPy's keyword) on the creation functions, as NumPy's.
    for name in ("zeros", "ones_like", "full", "arange", "linspace"):
        q = inspect.signature(getattr(nps, name)).parameters["device"]
        assert q.kind == P.KEYWORD_ONLY and q.default is None, name
    assert nps.zeros(2, device="cpu").shape == (2,)


def test_array_api_edges_as_numpy_2(session):
    """A 0-d boolean index (a new axis of length 1 or 0), expand_dims' out-of-range
    axis (NumPy's AxisError: an IndexError and a ValueError) and cholesky(upper=True)."""
    for v in (np.float64(2.5), np.arange(6.0).reshape(2, 3)):
        x = nps.asarray(v)
        for k in (True, False, np.bool_(True), nps.asarray(np.bool_(False))):
            want = v[k if not isinstance(k, nps.ndarray) else np.asarray(k)]
            got = x[k]
            assert got.shape == want.shape, (v.shape, k)
            np.testing.assert_array_equal(got.get(), want)
    v = np.arange(6.0).reshape(2, 3)
    for mshape in ((0, 3), (2, 0), (0,)):
        m = np.zeros(mshape, dtype=bool)
        got = nps.asarray(v)[nps.asarray(m)]
        assert got.shape == v[m].shape, mshape
    for mshape in ((3,), (2, 2), (2, 3, 1)):
        with pytest.raises(IndexError):
            nps.asarray(v)[nps.asarray(np.ones(mshape, dtype=bool))]
    with pytest.raises(IndexError):
        nps.expand_dims(nps.ones((1, 5)), 3)
    with pytest.raises(ValueError):
        nps.expand_dims(nps.ones((1, 5)), -4)
    assert nps.expand_dims(nps.ones((1, 5)), -3).shape == (1, 1, 5)
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    np.testing.assert_allclose(nps.linalg.cholesky(nps.asarray(a), upper=True).get(),
                               np.linalg.cholesky(a, upper=True))
    np.testing.assert_allclose(nps.linalg.cholesky(nps.asarray(a)).get(), np.linalg.cholesky(a))


def test_array_api_elementwise_names_are_the_engines(session):
    """The standard's spellings of NumPy's functions (``acos``, ``atan2``, the shifts) and
    ``signbit``, ``trunc``, ``round`` are the engine's functions, lazy, with NumPy 2's
    values: a NaN's sign bit too (``signbit(-nan)``), ints shifted in their own width."""
    x = np.array([-0.75, -0.0, 0.0, 0.5, np.nan, -np.nan, 0.25])
    a = nps.asarray(x)
    # Exact where NumPy's are; the transcendental ones within an ulp (NumPy's own loops
    # differ by one from the C library's).
    for ours, theirs, rtol in [("acos", np.acos, 4e-16), ("asin", np.asin, 4e-16),
                               ("atan", np.atan, 4e-16), ("asinh", np.asinh, 4e-16),
                               ("atanh", np.atanh, 4e-16), ("signbit", np.signbit, 0),
                               ("trunc", np.trunc, 0), ("round", np.round, 0)]:
        got = getattr(nps, ours)(a)
        assert ours not in nps.EAGER and not got.computed, ours
        np.testing.assert_allclose(got.get(), theirs(x), rtol=rtol, atol=0, err_msg=ours)
    np.testing.assert_allclose(nps.acosh(nps.asarray(x + 2)).get(), np.acosh(x + 2), rtol=4e-16)
    np.testing.assert_allclose(nps.atan2(a, nps.asarray(x[::-1].copy())).get(),
                               np.atan2(x, x[::-1]), rtol=4e-16)
    # -0.0 and -nan: their sign bits.
    np.testing.assert_array_equal(nps.signbit(a).get(), np.signbit(x))
    np.testing.assert_array_equal(nps.positive(a).get(), np.positive(x))
    i8 = np.array([-128, -3, 1, 64, 127], dtype=np.int8)
    s = np.array([1, 2, 3, 1, 7], dtype=np.int8)
    for ours, theirs in [("bitwise_left_shift", np.bitwise_left_shift),
                         ("bitwise_right_shift", np.bitwise_right_shift)]:
        got = getattr(nps, ours)(nps.asarray(i8), nps.asarray(s))
        assert got.dtype == np.int8, ours
        np.testing.assert_array_equal(got.get(), theirs(i8, s), err_msg=ours)
    z = np.array([2.5 - 1.5j, 0.5 + 3.5j])
    np.testing.assert_array_equal(nps.round(nps.asarray(z)).get(), np.round(z))
    # Complex arguments of the inverse trigonometric and hyperbolic functions, sinh and
    # cosh: the engine's (lazy), with NumPy's values at large magnitudes and infinities
    # (C99's special values, from the C library as NumPy's).
    inf, nan = np.inf, np.nan
    z = np.array([3e19 - 1.1e19j, -3e38 + 2e38j, complex(inf, 0.0), complex(0.0, inf),
                  complex(inf, 1.0), complex(inf, inf), complex(nan, 0.0), 0.5 - 2j, 1e-300 + 1e-300j])
    with np.errstate(all="ignore"):
        for name in ("acos", "arccos", "asin", "arcsin", "atan", "arctan", "acosh", "arccosh",
                     "asinh", "arcsinh", "atanh", "arctanh", "sinh", "cosh"):
            got = getattr(nps, name)(nps.asarray(z))
            assert not got.computed, name
            np.testing.assert_allclose(got.get(), getattr(np, name)(z), rtol=1e-15, err_msg=name)
    assert not [e for e in nps.EAGER if "complex" in e]


def test_linalg_extension_against_numpy(session):
    """nums_cloud.numpy.linalg's ``diagonal``, ``cross``, ``matrix_power``,
    ``matrix_rank``, ``pinv`` (lazy, from the engine's operations) and ``eigh``,
    ``eigvalsh`` (NumPy's, on the values: ``nps.EAGER``) against NumPy 2's."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 5))
    stack = rng.standard_normal((3, 4, 4))
    la = nps.linalg
    for off in (-2, 0, 1, 9):
        np.testing.assert_array_equal(la.diagonal(nps.asarray(a), offset=off).get(),
                                      np.linalg.diagonal(a, offset=off))
    np.testing.assert_array_equal(la.diagonal(nps.asarray(stack)).get(), np.linalg.diagonal(stack))
    u, v = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    np.testing.assert_allclose(la.cross(nps.asarray(u), nps.asarray(v)).get(), np.linalg.cross(u, v))
    np.testing.assert_allclose(la.cross(nps.asarray(u.T), nps.asarray(v[:1].T), axis=0).get(),
                               np.cross(u.T, v[:1].T, axis=0))
    ui = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int32)
    got = la.cross(nps.asarray(ui), nps.asarray(ui[::-1].copy()))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.get(), np.linalg.cross(ui, ui[::-1]))
    with pytest.raises(ValueError, match="3 elements"):
        la.cross(nps.asarray(a), nps.asarray(a))
    for n in (0, 1, 2, 5, -1, -3):
        np.testing.assert_allclose(la.matrix_power(nps.asarray(a), n).get(),
                                   np.linalg.matrix_power(a, n), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(la.matrix_power(nps.asarray(stack), 3).get(),
                               np.linalg.matrix_power(stack, 3))
    ai = np.arange(9, dtype=np.int64).reshape(3, 3) - 4
    for n in (0, 4):
        got = la.matrix_power(nps.asarray(ai), n)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.get(), np.linalg.matrix_power(ai, n))
    low = rng.standard_normal((7, 2)) @ rng.standard_normal((2, 4))  # rank 2
    for m in (low, low.T, a):
        assert int(la.matrix_rank(nps.asarray(m))) == np.linalg.matrix_rank(m)
        np.testing.assert_allclose(la.pinv(nps.asarray(m)).get(), np.linalg.pinv(m), atol=1e-10)
    assert int(la.matrix_rank(nps.asarray(a), rtol=0.5)) == np.linalg.matrix_rank(a, rtol=0.5)
    np.testing.assert_allclose(la.pinv(nps.asarray(a), rtol=0.5).get(),
                               np.linalg.pinv(a, rtol=0.5), atol=1e-10)
    sym = a + a.T
    w, q = la.eigh(nps.asarray(sym))
    want = np.linalg.eigh(sym)
    np.testing.assert_allclose(w.get(), want.eigenvalues)
    np.testing.assert_allclose(np.abs(q.get()), np.abs(want.eigenvectors), atol=1e-10)
    np.testing.assert_allclose(la.eigvalsh(nps.asarray(sym)).get(), np.linalg.eigvalsh(sym))
    assert {"linalg.eigh", "linalg.eigvalsh"} <= set(nps.EAGER)


def test_linalg_of_stacks_of_matrices(session):
    """NumPy's linalg takes stacks of matrices: inv, det, slogdet, svdvals, cholesky, qr,
    svd (and matrix_power, matrix_rank, pinv through them) factor each matrix of a stack
    (an empty stack too) and equal NumPy 2's."""
    rng = np.random.default_rng(11)
    st = rng.standard_normal((2, 3, 4, 4))
    spd = st @ np.swapaxes(st, -1, -2) + 4 * np.eye(4)
    la, x = nps.linalg, nps.asarray(st)
    for name in ("inv", "det", "svdvals"):
        np.testing.assert_allclose(getattr(la, name)(x).get(), getattr(np.linalg, name)(st),
                                   rtol=1e-10, atol=1e-12, err_msg=name)
    sign, logdet = la.slogdet(x)
    want = np.linalg.slogdet(st)
    np.testing.assert_allclose(sign.get(), want.sign)
    np.testing.assert_allclose(logdet.get(), want.logabsdet)
    np.testing.assert_allclose(la.cholesky(nps.asarray(spd)).get(), np.linalg.cholesky(spd))
    q, r = la.qr(x)
    assert q.shape == st.shape and r.shape == st.shape
    np.testing.assert_allclose((q @ r).get(), st, atol=1e-12)
    u, s, vh = la.svd(x)
    np.testing.assert_allclose(s.get(), np.linalg.svd(st, compute_uv=False))
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, st, atol=1e-12)
    np.testing.assert_allclose(la.matrix_power(x, -2).get(), np.linalg.matrix_power(st, -2),
                               rtol=1e-9)
    np.testing.assert_array_equal(la.matrix_rank(x).get(), np.linalg.matrix_rank(st))
    np.testing.assert_allclose(la.pinv(nps.asarray(st[..., :3])).get(),
                               np.linalg.pinv(st[..., :3]), atol=1e-12)
    for sa, sb in [((2, 3, 3), (3,)), ((1, 2, 1, 2, 2), (2,)), ((4, 1, 3, 3), (5, 3, 2)),
                   ((2, 3, 3), (3, 2)), ((0, 3, 3), (3,))]:
        m, rhs = rng.standard_normal(sa) + 3 * np.eye(sa[-1]), rng.standard_normal(sb)
        got = la.solve(nps.asarray(m), nps.asarray(rhs))
        want = np.linalg.solve(m, rhs)
        assert got.shape == want.shape, (sa, sb)
        np.testing.assert_allclose(got.get(), want, err_msg=str((sa, sb)))
    empty = la.svdvals(nps.zeros((0, 4, 5, 4)))
    assert empty.shape == (0, 4, 4) and empty.get().shape == (0, 4, 4)


def test_matmul_broadcasts_stacks_as_numpy(session):
    """``@``, ``matmul`` (the namespace's and linalg's) and NumPy's ``@`` with a NumPy
    array on the left broadcast the stacks' batch axes as NumPy 2 does (a matrix against
    a stack, batch axes of length 1 and 0)."""
    rng = np.random.default_rng(5)
    for sa, sb in [((2, 3), (4, 3, 5)), ((4, 1, 2, 3), (5, 3, 2)), ((2, 1), (1, 0, 1, 1, 1)),
                   ((1, 1, 1, 1, 1), (1, 1, 0, 1, 1)), ((2, 3, 4), (2, 4, 5))]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        want = a @ b
        for got in (nps.asarray(a) @ nps.asarray(b), nps.matmul(a, nps.asarray(b)),
                    a @ nps.asarray(b), nps.linalg.matmul(nps.asarray(a), b)):
            assert got.shape == want.shape, (sa, sb)
            np.testing.assert_allclose(got.get(), want, err_msg=str((sa, sb)))
    with pytest.raises(ValueError):
        nps.ones((2, 3, 4)) @ nps.ones((3, 4, 5))


# Issue 40: the engine decides every rule and Python forwards. The table's names that a
# hand-written stand-in still replaces, each with what keeps it; a step that moves a rule
# into the engine deletes its names here (the test fails while a listed name is already
# the engine's, so the list only shrinks).
STAND_INS = set()
# nums_cloud.numpy.linalg: stacks of matrices, solve's broadcasting, qr/svd's keywords.
LINALG_STAND_INS = {"cholesky", "det", "inv", "lstsq", "qr", "slogdet", "svd", "svdvals"}


def test_the_namespace_is_the_engines_table():
    """Every name of the engine's table in nums_cloud.numpy (and its linalg) is the
    function generated from the table, which forwards to the engine, except the stand-ins
    listed above; a listed name that is the engine's again must leave the list."""
    replaced = {n for n, f in nps._GENERATED.items() if getattr(nps, n) is not f}
    assert replaced == STAND_INS, (
        f"stand-ins not listed: {sorted(replaced - STAND_INS)}; "
        f"listed but the engine's: {sorted(STAND_INS - replaced)}")
    replaced = {n for n, f in nps._LINALG.items() if getattr(nps.linalg, n, None) is not f}
    assert replaced == LINALG_STAND_INS, (
        f"stand-ins not listed: {sorted(replaced - LINALG_STAND_INS)}; "
        f"listed but the engine's: {sorted(LINALG_STAND_INS - replaced)}")


# NumPy's promotion, casting and broadcasting rules used by the Python package to decide
# an engine result, file by file: the engine's (layout/src/meta.rs) must decide them.
# Steps of issue 40 shrink this to nothing.
NUMPY_RULES_LEFT = set()


def test_the_package_decides_no_promotion_or_broadcasting_of_its_own():
    """grep of python/nums_cloud for NumPy's rule functions (np.result_type, np.can_cast,
    np.broadcast_shapes, np.promote_types): only the uses listed above are left."""
    import pathlib
    import re

    root = pathlib.Path(nums_cloud.__file__).parent
    rule = re.compile(r"\b(?:np|_np|numpy)\.(result_type|can_cast|broadcast_shapes|promote_types)\b")
    found = {(p.relative_to(root).as_posix(), m.group(1))
             for p in root.rglob("*.py") for m in rule.finditer(p.read_text())}
    assert found == NUMPY_RULES_LEFT, (
        f"not listed: {sorted(found - NUMPY_RULES_LEFT)}; "
        f"listed but gone: {sorted(NUMPY_RULES_LEFT - found)}")


def test_lists_are_arrays_where_numpy_takes_array_likes(session):
    """The engine's table says which parameters are NumPy's array_like ones
    (``_native.functions()``): a list or tuple given for one is an array of its values, as
    NumPy reads it; shapes and axes stay tuples. Values, shapes and dtypes are NumPy's."""
    table = {name: arrays for _, name, _a, _p, _s, arrays in nums_cloud._native.functions()}
    assert table["exp"] == ["x"] and table["where"] == ["condition", "x", "y"]
    assert table["zeros"] == [] and table["concatenate"] == []
    for expr in ("flip([1, 2, 3])", "exp([1, 2])", "add([1, 2], 3)", "exp((0.5, 1.5))",
                 "where([True, False], [1, 2], 0)", "sum([[1, 2], [3, 4]], axis=0)",
                 "sum([[1, 2], [3, 4]], axis=(0, 1))", "maximum((1.5, -2), [0, 0])",
                 "einsum('i,i->', [1.0, 2.0], [3.0, 4.0])", "isin([1, 5, 2], [2, 5])",
                 "cumsum([1, 2, 3])", "sort([3, 1, 2])", "reshape([1, 2, 3, 4], (2, 2))",
                 "flip(m=[[1, 2], [3, 4]], axis=1)", "dot([1.0, 2.0], [[1.0], [2.0]])",
                 "mean([1, 2, 4])", "exp([])"):
        want = eval(expr, vars(np))
        got = eval(expr, vars(nps))
        got = got.get() if hasattr(got, "get") else got
        assert np.shape(got) == np.shape(want), expr
        assert np.asarray(got).dtype == np.asarray(want).dtype, expr
        np.testing.assert_allclose(got, want, err_msg=expr)


def test_the_standards_spellings_are_the_engines(session):
    """eye's n_cols (positional), reshape's order, clip's min/max and expand_dims' default
    axis are the engine's (no stand-ins): NumPy's values, the Array API's default."""
    a = np.arange(24.0)
    x = nps.asarray(a)
    for args, kw in [((3,), {}), ((3, 4), {"k": 1}), ((3, None), {}), ((2, 5, -1), {}),
                     ((3,), {"M": 2, "dtype": nps.int32})]:
        got, want = nps.eye(*args, **kw), np.eye(*args, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.get(), want)
    for order in "CFA":
        np.testing.assert_array_equal(nps.reshape(x, (4, 6), order=order).get(),
                                      np.reshape(a, (4, 6), order=order))
        np.testing.assert_array_equal(x.reshape(4, 6).reshape((3, 2, 4), order=order).get(),
                                      a.reshape(4, 6).reshape((3, 2, 4), order=order))
    np.testing.assert_array_equal(nps.reshape(x, (2, 3, 4), "F").get(),
                                  np.reshape(a, (2, 3, 4), "F"))
    np.testing.assert_array_equal(x.reshape(2, 12).get(), a.reshape(2, 12))
    with pytest.raises(ValueError, match="order"):
        nps.reshape(x, (4, 6), order="X")
    for kw in ({"min": 2, "max": 5}, {"max": 5}, {"min": 20.5}):
        np.testing.assert_array_equal(nps.clip(x, **kw).get(), np.clip(a, **kw))
    np.testing.assert_array_equal(nps.clip([1, 5, 9], 2, [4, 4, 4]).get(),
                                  np.clip([1, 5, 9], 2, [4, 4, 4]))
    with pytest.raises(ValueError):
        nps.clip(x, 1, 2, min=1)
    assert nps.expand_dims(x).shape == (1, 24)
    assert nps.expand_dims(x, axis=1).shape == (24, 1)


def test_broadcasts_are_the_engines(session):
    """broadcast_to and broadcast_arrays are the engine's: lazy nodes of their own (not
    an addition of zeros), a tuple as NumPy 2 gives, NumPy's values and errors."""
    v = np.arange(5.0)
    x = nps.asarray(v)
    b = nps.broadcast_to(x, (3, 5))
    assert b._a.label.startswith("broadcast_to(") and not b.computed, b._a.label
    np.testing.assert_array_equal(b.get(), np.broadcast_to(v, (3, 5)))
    m = nps.asarray(np.array([[True], [False]]))
    got = nps.broadcast_arrays(m, x)
    want = np.broadcast_arrays(np.array([[True], [False]]), v)
    assert type(got) is tuple and len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.get(), w)
    with pytest.raises(ValueError):
        nps.broadcast_to(x, (5, 3))


def test_a_dtype_nums_cloud_lacks_is_a_type_error_from_the_engine(session):
    """A dtype name the engine does not have raises TypeError (NumPy's class for a dtype
    it does not know) whether Python or the engine reads it."""
    x = nps.ones((2, 3))
    for f in (lambda: nps.sum(x, dtype="float16"), lambda: nps.astype(x, "float16"),
              lambda: x.astype(np.float16), lambda: nps.zeros(3, dtype="U3")):
        with pytest.raises(TypeError, match="float16|U3"):
            f()


def test_csv_missing_values_are_nan_as_pandas_reads_them(session, tmp_path):
    # An empty field and pandas' default missing markers read as NaN in a float column,
    # as pandas.read_csv and np.genfromtxt make them; the rest to the bit.
    text = "a,b,c\n1.5,,3\n,NA,-0.25\n4,5,null\n7,N/A,8e-3\n"
    f = tmp_path / "blanks.csv"
    f.write_text(text)
    got = nps.read_csv(str(f), has_header=True).get()
    want = np.genfromtxt(f, delimiter=",", skip_header=1,
                         missing_values=["", "NA", "null", "N/A"])
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).sum() == 5
