"""Row-wise host work by bands of rows on threads (pyedmcl._bands): the same values bit
for bit as one call on the whole panel, where the bands run (forced here on small
panels) and where they do not."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl import _bands


@pytest.fixture
def banded(monkeypatch):
    monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1)
    monkeypatch.setattr(_bands.os, "cpu_count", lambda: 4)


def _panel() -> np.ndarray:
    rng = np.random.default_rng(2)
    X = rng.standard_normal((157, 211)).cumsum(axis=1) * 1e3
    X[3] = 7.0
    X[40, 5] = np.nan
    X[41] = np.nan           # a row of NaNs: a band's nanmax of it is NaN
    X[90, 7] = np.inf
    return X


def test_row_bands_cover_every_row_once(banded):
    X = _panel()
    bands, threads = _bands.row_bands(X)
    assert threads == 4 and len(bands) > threads
    assert np.array_equal(np.concatenate([np.arange(X.shape[0])[b] for b in bands]),
                          np.arange(X.shape[0]))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf, in threads
@pytest.mark.parametrize("fn", [lambda r: np.isfinite(r).all(axis=1),
                                lambda r: np.ptp(r, axis=1),
                                lambda r: r.sum(axis=1), lambda r: r.std(axis=1)])
def test_rowwise_equals_one_call(banded, fn):
    X = _panel()
    np.testing.assert_array_equal(_bands.rowwise(fn, X), fn(X))


def test_cast_rows_equals_astype(banded):
    X = _panel()
    got = _bands.cast_rows(X, np.float32)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, X.astype(np.float32))
    same = np.ascontiguousarray(X)
    assert _bands.cast_rows(same, np.float64) is same   # nothing to cast: no copy


def test_largest_magnitude_ignores_nan_bands(banded, monkeypatch):
    X = np.nan_to_num(_panel(), posinf=0.0)
    X[41] = np.nan
    X[120, 3] = -5e7     # the largest magnitude, negative, in a late band
    assert _bands.largest_magnitude(X) == 5e7
    monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1 << 40)   # one call
    assert _bands.largest_magnitude(X) == 5e7
    assert np.isnan(_bands.largest_magnitude(np.full((40, 5), np.nan)))
    assert _bands.largest_magnitude(np.array([3.0, np.nan, -4.0])) == 4.0   # 1-D


def test_merge_check_by_bands_equals_one_pass(banded):
    """The float32 merge check of a panel by bands of slabs on threads gives every row's
    fraction as the whole panel's one pass does (quantized rows, near repeats far from
    zero, a constant row)."""
    from pyedmcl import _precision
    rng = np.random.default_rng(5)
    X = np.round(rng.standard_normal((157, 211)), 3)
    X[::5] += 1.0e5  # values 0.001 apart: float32 merges some (its step there ~0.008)
    X[7] = 3.0
    assert len(_bands.row_bands(X, _precision.CHECK_THREADS)[0]) > 1
    got = _precision.merged_fraction(X)
    one = np.concatenate([_precision._merged_slab(X[i:i + 1]) for i in range(X.shape[0])])
    np.testing.assert_array_equal(got, one)
    assert got[::5].min() > 0 and got[7] == 0


@pytest.mark.parametrize("split", [False, True])
def test_merge_check_bound_is_exact_beyond_its_limit(monkeypatch, split):
    """The map's merge check (``merged_beyond``) sorts the float32 cast and bounds the
    merged fraction by the cast's equal values; every row whose fraction exceeds the limit
    gets it exactly, every other row a value within the limit, by bands or in one call,
    with the caller's cast or its own: random walks (a few float32 ties), quantized rows,
    near repeats far from zero, NaNs, infinities, a constant row and an empty panel."""
    from pyedmcl import _precision
    if split:
        monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1)
        monkeypatch.setattr(_bands.os, "cpu_count", lambda: 4)
    rng = np.random.default_rng(11)
    X = rng.standard_normal((157, 400)).cumsum(axis=1)
    X[10:30] = np.round(X[10:30], 1)  # quantized: many equal values in both dtypes
    X[40:50] = 1.0e5 + np.round(rng.standard_normal((10, 400)), 3)  # float32 merges them
    X[60:62] = 1.0e4 + 1.5 * rng.standard_normal((2, 400))  # merges some: a few %
    X[70, ::7] = np.nan
    X[71, :3] = [np.inf, -np.inf, np.inf]
    X[80] = 3.0
    exact = _precision.merged_fraction(X)
    for limit in (0.0, 0.01, 0.05, 0.5):
        for cast in (None, X.astype(np.float32)):
            got = _precision.merged_beyond(X, limit, cast)
            over = exact > limit
            np.testing.assert_array_equal(got[over], exact[over])
            assert (got[~over] <= limit).all() and (got[~over] >= exact[~over]).all()
    assert (exact[40:50] > 0.2).all() and 0 < exact[60:62].max() < 0.2, exact[60:62]
    assert _precision.merged_beyond(X[:, :0], 0.05).tolist() == [0.0] * 157


def test_map_pieces_in_order_and_nested_inline():
    """Results in the items' order; a call from one of the pool's own threads runs in
    that thread (a full pool never waits on itself)."""
    import threading

    from pyedmcl._bands import map_pieces

    def outer(i):
        inner = map_pieces(lambda j: (j, threading.current_thread().name), list(range(3)))
        assert all(name == threading.current_thread().name for _, name in inner)
        return i * 10 + sum(j for j, _ in inner)

    assert map_pieces(outer, list(range(40))) == [i * 10 + 3 for i in range(40)]
