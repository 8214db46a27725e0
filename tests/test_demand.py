"""Compute only what is asked: a peek at a large lazy array makes the elements it shows,
printing shows NumPy's summary from the edges, and an array's values are computed once
for every element, iteration and conversion that follows."""
import numpy as np
import pytest

import nums_cloud.numpy as nps


def tasks(s):
    return s.counts()["tasks"]


def test_a_peek_at_a_large_lazy_array_makes_only_what_it_shows(session):
    # 20M x 16 float64 (2.5 GB) is never made: each peek is a few tasks of a few elements.
    x = nps.random.default_rng(7).standard_normal((20_000_000, 16))
    t = tasks(session)
    corner = (x * 2 + 1)[:2, :2].get()
    assert corner.shape == (2, 2) and tasks(session) - t <= 3
    # The same elements as the whole array's (random values do not depend on blocks).
    assert np.array_equal(corner, x[:2, :2].get() * 2 + 1)
    tail = x[-3:, 5]
    assert np.array_equal(tail.get(), x[19_999_997:, 5:6].get()[:, 0])
    # print shows NumPy's summary, from the four corners.
    t = tasks(session)
    text = str(x)
    # (six rows of edges, each with `...` between its columns, and `...` between them)
    assert tasks(session) - t <= 4 and text.count("...") == 7 and len(text) < 1000
    assert not x.computed and "lazy" in repr(x)


def test_slices_of_expressions_equal_numpy_on_ragged_blocks(session):
    a = np.random.default_rng(3).standard_normal((1000, 30))
    x = nps.array(a).block(97, 7) * 3 - 1
    y = nps.random.default_rng(4).random((1000, 30)).block(101, 11)
    whole_y = y.get()
    for key in [np.s_[:2, :2], np.s_[5:900:7, ::-4], np.s_[-1], np.s_[::-1, 3],
                np.s_[None, 10:20, 29], np.s_[..., -5:]]:
        np.testing.assert_array_equal((x + y * 2)[key].get(), (a * 3 - 1 + whole_y * 2)[key])
        # (exp within a few ulps: the engine's is not NumPy's)
        t_key = key[::-1] if isinstance(key, tuple) else key
        np.testing.assert_allclose(nps.exp(x).T[t_key].get(), np.exp(a * 3 - 1).T[t_key],
                                   rtol=1e-14)
    # A slice of a slice, of a random array not yet made: the whole's elements.
    r = nps.random.default_rng(9).standard_normal((500, 8))
    part = r[100:400:3][::-2, 1:7:2].get()
    np.testing.assert_array_equal(part, r.get()[100:400:3][::-2, 1:7:2])


def test_values_are_computed_once_per_array(session):
    y = nps.random.default_rng(1).standard_normal((5_000, 4)) + 1
    t = tasks(session)
    column = y[:1000, 0]
    values = [float(v) for v in column]
    spent = tasks(session) - t
    assert spent <= 3 and len(values) == 1000
    # Every later access reads the kept values: no task.
    assert list(map(float, column)) == values and column.tolist() == values
    assert [float(column[i]) for i in range(0, 1000, 50)] == values[::50]
    np.testing.assert_array_equal(np.asarray(column), values)
    np.testing.assert_array_equal(column.to_numpy(), values)
    assert tasks(session) - t == spent
    # An element of a small lazy array in a loop: the array is computed once.
    z = y[:50] * 2
    t = tasks(session)
    got = [float(z[i, 1]) for i in range(50)]
    assert tasks(session) - t <= 4
    np.testing.assert_array_equal(got, (y.get()[:50] * 2)[:, 1])
    # Values handed out are the caller's: changing them changes nothing kept.
    mine = column.get()
    mine[:] = 0
    assert column.tolist() == values


def test_repr_is_numpys_summary_and_html_says_what_it_is(session):
    a = np.arange(40_000, dtype=np.float32).reshape(200, 200) / 7
    x = nps.array(a).block(64, 64) + 0
    assert "lazy" in repr(x) and not x.computed
    assert str(x) == str(a)
    x.get()
    assert repr(x) == repr(a).replace("array", "BlockArray")
    small = nps.arange(12).reshape(3, 4)
    assert str(small) == str(np.arange(12).reshape(3, 4))
    with np.printoptions(edgeitems=1, threshold=10):
        assert str(x) == str(a)
    html = x._repr_html_()
    assert "(200, 200)" in html and "(64, 64)" in html and "16 blocks" in html and "<svg" in html
    # NumPy's functions given it get NumPy's answer.
    assert np.median(x[:, 3]) == np.median(a[:, 3])
    np.testing.assert_array_equal(np.histogram(x, bins=5)[0], np.histogram(a, bins=5)[0])


def test_what_a_selection_reads_again_is_made_once_and_let_go(tmp_path):
    # unique's values and counts both select from one sorted array with one mask of where
    # values change: made once, with the counts the selection needs first, kept while an
    # array may read them, and let go once no array can. (5,000 distinct values: past the
    # hash count's table, so unique sorts.) No memory tier: every block made goes to the
    # store, where this test sees it.
    import nums_cloud

    session = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2,
                              memory_mb=512, memory_tier_mb=0, progress=False)
    a = np.random.default_rng(5).integers(0, 5_000, 200_000).astype(np.float64)
    a[::997] = np.nan
    x = nps.array(a).block(30_011)
    store = tmp_path / "store"

    def stored():  # the arrays computes made (`n<node>` in `c<N>/out/`; inputs are `in/<k>`)
        return {p.parent.parent.name for p in store.rglob("c/*")
                if p.parent.parent.parent.name == "out"}

    before = stored()
    u, c = nps.unique(x, return_counts=True)
    kept = stored() - before  # the sorted array and the mask (and the counts)
    got_u = u.get()
    session.collect()
    assert kept & stored(), (kept, stored())  # c may still read the mask
    got_c = c.get()
    session.collect()
    assert not kept & stored(), (kept, stored())  # nothing can: gone
    want_u, want_c = np.unique(a, return_counts=True)
    np.testing.assert_array_equal(got_u, want_u)
    np.testing.assert_array_equal(got_c, want_c)
    del u, c
    session.collect()
    assert stored() <= before, stored()
    session.close()


def test_slices_on_block_boundaries_read_the_blocks_in_place_and_leave_them_as_they_were(session):
    # Rows 200:600 of X are X's blocks 2..5 (read where they are, no copy task); what is
    # made from them, an assignment into them included, equals NumPy's and leaves X alone.
    a = np.random.default_rng(5).standard_normal((1000, 3))
    a[::7, 1] = np.nan
    x = nps.array(a).block(100, 3)
    x.persist()
    y, want = x[200:600], a[200:600].copy()
    t = tasks(session)
    np.testing.assert_array_equal(y.min(axis=0).get(), want.min(axis=0))
    assert tasks(session) - t <= 4  # rows 250:600 (blocks cut across) take 11
    np.testing.assert_array_equal(nps.sort(y, axis=0).get(), np.sort(want, axis=0))
    np.testing.assert_array_equal(nps.nanmedian(y, axis=0).get(), np.nanmedian(want, axis=0))
    np.testing.assert_array_equal(y[y[:, 0] > 0].get(), want[want[:, 0] > 0])
    np.testing.assert_array_equal(y.block(200, 3).get(), want)
    y[50:60, 2] = -7.0
    want[50:60, 2] = -7.0
    np.testing.assert_array_equal(y.get(), want)
    np.testing.assert_array_equal(x.get(), a)
