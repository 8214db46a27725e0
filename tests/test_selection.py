"""Selections of any length: boolean masks and index arrays along any axis, counted per
block first (the driver holds counts, never positions), then gathered by the functions,
equal to NumPy on ragged blocks, in every dtype, past the 16M positions a driver once held."""
import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps


@pytest.fixture
def session(tmp_path):
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=512,
                        progress=False)
    yield s
    s.close()


def same(got, want):
    """Equal bit for bit (-0.0 and NaN payloads kept), dtype and shape too."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


def test_masks_along_any_axis_equal_numpy_on_ragged_blocks(session):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1000, 30))
    a[::7, 3] = -0.0
    x = nps.array(a).block(97, 7)
    for m in [a[:, 0] > 0.3,                          # about a third
              a[:, 0] > 3.0,                          # a few, far apart
              np.zeros(1000, bool),                   # none
              np.ones(1000, bool),                    # all
              np.arange(1000) == 999]:                # the last element only
        same(x[nps.array(m).block(64)].get(), a[m])
        same(x[nps.array(m)][:, 3].get(), a[m][:, 3])
    cols = a[0] > 0
    same(x[:, nps.array(cols)].get(), a[:, cols])
    same(x[10:900:3, nps.array(cols)].get(), a[10:900:3, cols])
    # A mask computed from the array itself, of its first two axes (rows of a 3-D array).
    c = a.reshape(100, 10, 30)
    y = nps.array(c).block(9, 4, 7)
    same(y[y[:, :, 0] > 0].get(), c[c[:, :, 0] > 0])
    same(y[y > 1].get(), c[c > 1])


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float32", "complex128"])
def test_selections_keep_every_dtype_exact(session, dtype):
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((300, 5)) * 100).astype(dtype)
    if dtype == "complex128":
        a = a + 1j * rng.standard_normal((300, 5))
    x = nps.array(a).block(41, 2)
    m = rng.random(300) < 0.4
    same(x[nps.array(m)].get(), a[m])
    idx = rng.integers(-300, 300, 257)
    same(x[nps.array(idx)].get(), a[idx])
    same(nps.take(x, nps.array(idx % 5), axis=1).get(), np.take(a, idx % 5, axis=1))


def test_index_arrays_of_any_shape_equal_numpy(session):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((1000, 30))
    x = nps.array(a).block(97, 7)
    idx = rng.integers(-1000, 1000, 2500)           # repeats, negatives, random order
    same(x[nps.array(idx).block(300)].get(), a[idx])
    grid = rng.integers(0, 30, (6, 7))
    same(x[:, nps.array(grid)].get(), a[:, grid])
    same(x[nps.array(np.sort(idx))].get(), a[np.sort(idx)])
    same(x[nps.array(np.array([], dtype=np.int64))].get(), a[np.array([], dtype=np.int64)])
    same(nps.take(x, nps.array(grid), axis=0).get(), np.take(a, grid, axis=0))
    # A mask and an index array together (NumPy's broadcast of advanced indices).
    m = a[:, 1] > 0.5
    pick = rng.integers(0, 30, int(m.sum()))
    same(x[nps.array(m), nps.array(pick)].get(), a[m, pick])
    # A permutation of rows (the engine's own sort makes it), then back by its argsort.
    p = nps.random.default_rng(2).permutation(1000)
    rows = x[p]
    same(rows[nps.argsort(p)].get(), a)
    with pytest.raises(IndexError, match="index 1000 is out of bounds for axis 0 with size 1000"):
        x[nps.array(np.array([3, 1000, -2]))].get()
    with pytest.raises(IndexError, match="index -31 is out of bounds"):
        x[:, nps.array(np.array([-31, 0]))].get()


def test_a_mask_and_an_index_past_the_16m_the_driver_once_held(session):
    # 17M float32 elements: a mask selects about half, an index array as long picks them
    # in reverse. The driver holds a count per block, not 17M positions.
    n = 17_000_000
    x = nps.random.default_rng(3).random(n, dtype=np.float32)
    sel = x[x > 0.5]
    want = x.get()
    got = sel.get()
    assert got.shape[0] == int((want > 0.5).sum()) and np.array_equal(got, want[want > 0.5])
    back = x[nps.arange(n - 1, -1, -1)]
    assert np.array_equal(back[:5].get(), want[::-1][:5])
    assert np.array_equal(back[-3:].get(), want[2::-1])
