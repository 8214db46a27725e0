"""NumPy's in-place changes through the Python package (issue 43, day two): `x[key] = v`,
`np.put`, `np.place`, `np.putmask`, `np.put_along_axis` change a nums-cloud array as they
change a NumPy array (the array becomes the engine's new version); copies, and arrays made
from it before, keep their values."""
import copy

import numpy as np
import pytest

import nums_cloud.numpy as nps


def pair(a, block):
    return a.copy(), nps.array(a).block(block)


def test_setitem_matches_numpy_for_every_kind_of_key(session):
    rng = np.random.default_rng(5)
    want, x = pair(rng.normal(size=(9, 7)), (4, 3))
    steps = [
        (3, 1.5),
        ((slice(1, 8, 3), slice(None, None, -2)), 0.0),
        ((Ellipsis, 2), np.arange(9.0)),
        ([0, 4, 4], rng.normal(size=7)),
        ((np.array([8, 1]), slice(2, 5)), [[1.0, 2.0, 3.0]]),
        (want > 1.0, -1.0),
        ((slice(None), want[0] < 0), 7.0),
    ]
    for key, v in steps:
        k = tuple(nps.asarray(i) if isinstance(i, np.ndarray) and i.dtype == bool else i
                  for i in key) if isinstance(key, tuple) else (
            nps.asarray(key) if isinstance(key, np.ndarray) else key)
        want[key] = v
        x[k] = v
        np.testing.assert_array_equal(x.get(), want, err_msg=repr(key))
    # One value per selected element (NumPy's x[m] = y[m]), the mask lazy.
    wi, xi = pair(rng.integers(-9, 9, size=(6, 5)), (4, 2))
    yi = xi * 10
    m = xi < 0
    xi[m] = yi[m]
    wi[wi < 0] = wi[wi < 0] * 10
    np.testing.assert_array_equal(xi.get(), wi)
    # Cast as NumPy casts: a float array into ints truncates; a Python float too.
    xi[0] = np.array([1.9, -1.9, 2.5, 0.1, 7.7])
    wi[0] = np.array([1.9, -1.9, 2.5, 0.1, 7.7])
    xi[1, 1] = 3.99
    wi[1, 1] = 3.99
    np.testing.assert_array_equal(xi.get(), wi)
    assert xi.dtype == wi.dtype


def test_copies_and_earlier_arrays_keep_their_values(session):
    a = np.arange(12.0).reshape(3, 4)
    x = nps.array(a)
    kept = [x.copy(), nps.array(x), copy.copy(x), copy.deepcopy(x), x[1:], x * 1, x.T]
    element = x[1, 2]  # a small lazy array's element: computed from x's values on demand
    same = x
    x[1] = -5.0
    a2 = a.copy()
    a2[1] = -5.0
    np.testing.assert_array_equal(same.get(), a2)  # the same object: NumPy's too
    for k, want in zip(kept, [a, a, a, a, a[1:], a, a.T]):
        np.testing.assert_array_equal(k.get(), want)
    assert float(element) == 6.0
    assert float(x[1, 2]) == -5.0


def test_numpys_in_place_functions_change_the_array(session):
    for f, args in [
        (np.put, ([1, -1, 3, 1], [100, 200])),
        (np.place, (np.arange(10) % 3 == 0, [7, 8])),
        (np.putmask, (np.arange(10) > 5, [-1, -2, -3])),
    ]:
        want = np.arange(10)
        x = nps.arange(10).block(4)
        mask_or_ind = args[0]
        got_args = (nps.asarray(mask_or_ind) if isinstance(mask_or_ind, np.ndarray)
                    else mask_or_ind, args[1])
        assert f(x, *got_args) is None
        f(want, *args)
        np.testing.assert_array_equal(x.get(), want, err_msg=f.__name__)
    want = np.arange(12.0).reshape(3, 4)
    x = nps.array(want).block((2, 3))
    ind = np.argsort(-want, axis=1)[:, :1]
    np.put_along_axis(x, nps.asarray(ind), 99.0, axis=1)
    np.put_along_axis(want, ind, 99.0, axis=1)
    np.testing.assert_array_equal(x.get(), want)
    # nps's own name, on a NumPy array: NumPy's array changed.
    n = np.zeros(5)
    nps.put(n, [0, 2], [1.0, 2.0])
    np.testing.assert_array_equal(n, [1.0, 0.0, 2.0, 0.0, 0.0])
    v = nps.arange(5)
    nps.put(v, [7, -8], [1, 2], mode="wrap")
    w = np.arange(5)
    np.put(w, [7, -8], [1, 2], mode="wrap")
    np.testing.assert_array_equal(v.get(), w)


def test_a_refused_assignment_changes_nothing(session):
    a = np.arange(6.0)
    x = nps.array(a)
    with pytest.raises(ValueError, match="cannot assign 2 input values to the 3 output values"):
        x[x > 2] = nps.array([1.0, 2.0])
    with pytest.raises(IndexError, match="out of bounds"):
        np.put(x, [6], 1.0)
    with pytest.raises(ValueError, match="mask and data must be the same size"):
        np.place(x, nps.ones(5, dtype=bool), [1.0])
    with pytest.raises(OverflowError):
        nps.arange(3, dtype=np.int8)[0] = 300
    np.testing.assert_array_equal(x.get(), a)
    x.at[0].set(9.0)  # a new array; x unchanged
    np.testing.assert_array_equal(x.get(), a)
    np.testing.assert_array_equal(x.at[x > 3].set(0.0).get(), np.where(a > 3, 0.0, a))


def test_a_loop_of_assignments(session):
    x = nps.zeros(6, dtype=np.int64)
    for i in range(6):
        x[i] = i * i
    np.testing.assert_array_equal(x.get(), np.arange(6) ** 2)


def test_sort_and_shuffle_in_place(session):
    rng = np.random.default_rng(2)
    a = rng.normal(size=(5, 40))
    x = nps.array(a).block((2, 16))
    x.sort(axis=1)
    a.sort(axis=1)
    np.testing.assert_array_equal(x.get(), a)
    r = nps.arange(30).reshape(10, 3)
    nps.random.default_rng(4).shuffle(r)
    got = r.get()
    assert sorted(got[:, 0].tolist()) == list(range(0, 30, 3))
    np.testing.assert_array_equal(got[:, 1:] - got[:, :1], [[1, 2]] * 10)


def test_asarray_with_copy_is_not_changed_with_the_original(session):
    x = nps.arange(4.0)
    c = nps.asarray(x, copy=True)
    same = nps.asarray(x)
    x[0] = 9.0
    np.testing.assert_array_equal(c.get(), [0.0, 1.0, 2.0, 3.0])
    assert same is x
