"""float32 CCM decides its neighbours as the float64 call does.

Decimal data (values on a 0.1 grid) tie everywhere: float32's roundings of the
standardised values broke those ties the other way and moved sample rho by up to
1e-2. The sorted rows now take the float64 call's distances and order
(:class:`pyedmcl.edm.ccm.SortedRows`, ``exact``), a host index searches the float64
series (``HostBackend.device_table(reference=)``), so float32 samples differ from
float64 ones only by float32's lookup and rho arithmetic (tolerance 1e-5; float32's
own order was 1e-3 to 1e-2 off on these data).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.edm.ccm import row_order

#: float32 lookups and rho against float64 ones, the same neighbours
TOL = 1e-5


def _quantized(n: int = 400, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """A noisy driven pair (the driver a logistic map) rounded to a 0.1 grid."""
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = rng.uniform(0.2, 0.8)
    for i in range(1, n):
        x[i] = 3.87 * x[i - 1] * (1 - x[i - 1])
    y = 0.6 * np.roll(x, 2) + 0.4 * rng.standard_normal(n) * 0.3
    return np.round(x * 30) / 10, np.round(y * 30) / 10


def _both(**kw):
    return [pe.ccm(dtype=dt, sample=8, seed=5, **kw) for dt in ("float32", "float64")]


@pytest.mark.parametrize("method", ["exact", "kdtree", "per-sample"])
def test_quantized_ccm_float32_equals_float64(method, monkeypatch):
    """Sorted rows, a host index, and the per-sample k-NN launches of long series."""
    if method == "per-sample":
        from pyedmcl.edm import ccm as ccm_mod
        monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 0)
        method = "exact"
    x, y = _quantized()
    a, b = _both(x=x, y=y, E=3, lib_sizes=[30, 120, 380], knn_method=method)
    for s in ("rho_xy_samples", "rho_yx_samples"):
        np.testing.assert_allclose(getattr(a, s), getattr(b, s), rtol=0, atol=TOL)


def test_quantized_ccm_lags_and_states():
    x, y = _quantized(seed=12)
    a, b = _both(x=x, y=y, E=2, tau=2, Tp=[-2, 0, 1], lib_sizes=[40, 300])
    np.testing.assert_allclose(a.rho_xy_samples, b.rho_xy_samples, rtol=0, atol=TOL)
    np.testing.assert_allclose(a.rho_yx_samples, b.rho_yx_samples, rtol=0, atol=TOL)
    X = np.column_stack([x, np.roll(y, 1)])  # a two-column state space (centred only)
    a, b = _both(x=X, y=y, E=2, lib_sizes=[40, 300])
    np.testing.assert_allclose(a.rho_xy_samples, b.rho_xy_samples, rtol=0, atol=TOL)
    np.testing.assert_allclose(a.rho_yx_samples, b.rho_yx_samples, rtol=0, atol=TOL)


def test_row_order_is_the_two_key_sort():
    rng = np.random.default_rng(3)
    M = 60
    p = np.arange(M)
    diff = p[None, :] - p[:, None]
    tie = 2 * np.abs(diff) + (diff > 0)
    a = rng.random((M, M))
    a[::3] = np.round(a[::3] * 4) / 4  # rows with many equal distances
    a[5, 7] = a[5, 9] = np.nan
    for arr in (a, a.astype(np.float32)):
        want = np.lexsort((tie, arr), axis=-1)
        np.testing.assert_array_equal(row_order(arr, tie), want)


def _table_distances_ref(x: np.ndarray, qpts: np.ndarray, idx: np.ndarray, E: int, tau: int,
                         nc: int, metric: str, fma: bool) -> np.ndarray:
    """NumPy: the k-NN kernel's finished float32 distance from query ``qpts[r % nq]`` to
    each point of table row r (coordinates newest first, lag c // nc of column c % nc,
    one rounding per operation or a fused multiply-add; -1: +inf)."""
    from pyedmcl.fma_emulation import fma as fused
    nq = qpts.size
    q = np.asarray(qpts, np.int64)[np.arange(idx.shape[0]) % nq][:, None]
    lp = np.maximum(idx, 0).astype(np.int64)
    acc = np.zeros(idx.shape, np.float32)
    for c in reversed(range(E * nc)):
        o = (c // nc) * tau * nc + c % nc
        d = x[lp * nc + o] - x[q * nc + o]
        if metric == "euclidean":
            acc = fused(d, d, acc) if fma else acc + d * d
        elif metric == "manhattan":
            acc = acc + np.abs(d)
        else:
            acc = np.maximum(acc, np.abs(d))
    fin = np.sqrt(acc) if metric == "euclidean" else acc
    return np.where(idx >= 0, fin, np.float32(np.inf))


@pytest.mark.parametrize("nc, metric, fma", [(1, "euclidean", 0), (1, "euclidean", 1),
                                             (2, "euclidean", 1), (1, "manhattan", 0),
                                             (2, "maximum", 0)])
def test_table_distances_are_the_kernels(device, nc, metric, fma):
    """The distances of a table whose points another search chose (the float64 order of
    a float32 per-sample CCM), computed on the device in the k-NN kernel's arithmetic:
    equal bit for bit to the NumPy reference of that arithmetic (FMA or not, a state
    space of two columns, empty slots), on every platform."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    be = get_backend(device)
    rng = np.random.default_rng(3)
    n, E, tau, k, nb = 300, 3, 2, 4, 3
    x = rng.standard_normal(n * nc).astype(np.float32)
    span = n - (E - 1) * tau
    qpts = rng.choice(span, 50, replace=False).astype(np.int32)
    idx = rng.integers(0, span, (nb * qpts.size, k)).astype(np.int32)
    idx[::7, -1] = -1  # empty slots
    spec = {"E": E * nc, "TAU": tau, "K": 1, "METRIC": metric, "REAL": "float", "FMA": fma}
    if nc != 1:
        spec["NC"] = nc
    out = be.empty((idx.size,), np.float32)
    KNN.launch_table_distances(be, spec, be.to_device(x), be.to_device(qpts), qpts.size,
                               be.to_device(idx.reshape(-1)), idx.shape[0], k, out)
    got = be.to_host(out).reshape(idx.shape)
    ref = _table_distances_ref(x, qpts, idx, E, tau, nc, metric, bool(fma))
    np.testing.assert_array_equal(got, ref)


def test_per_sample_float32_table_has_the_float32_kernels_distances(monkeypatch):
    """The per-sample path of a float32 CCM (no sorted rows) takes the float64 call's
    neighbours with the float32 kernel's distances, made on the device: the samples are
    those of the same neighbours' host-made distances (the reference arithmetic) bit for
    bit."""
    from pyedmcl.edm import ccm as ccm_mod
    from pyedmcl.kernels.knn import with_fma
    from pyedmcl.neighbors.base import float32_distances
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 0)
    x, y = _quantized(seed=13)
    kw = dict(x=x, y=y, E=3, lib_sizes=[30, 200], sample=6, seed=2, dtype="float32")
    got = pe.ccm(**kw)
    launch = ccm_mod.KNN.launch_table_distances

    def host(be, spec, x_dev, q_dev, nq, idx_dev, rows, k, fin_dev):
        launch(be, spec, x_dev, q_dev, nq, idx_dev, rows, k, fin_dev)  # (the kernel built)
        idx = be.to_host(idx_dev).reshape(rows, k)
        fma = bool(with_fma(be, spec)["FMA"])  # the k-NN kernels' choice on this device
        d = float32_distances(be.to_host(x_dev), idx[None], be.to_host(q_dev)[np.arange(rows) % nq],
                              spec["E"], spec["TAU"], spec["METRIC"], fma)
        be.write_async(fin_dev, np.ascontiguousarray(d.reshape(-1), np.float32))
        be.finish()

    monkeypatch.setattr(ccm_mod.KNN, "launch_table_distances", host)
    ref = pe.ccm(**kw)
    np.testing.assert_array_equal(got.rho_xy_samples, ref.rho_xy_samples)
    np.testing.assert_array_equal(got.rho_yx_samples, ref.rho_yx_samples)


@pytest.mark.parametrize("dtype, tied", [(np.float32, False), (np.float64, False),
                                         (np.float64, True)])
def test_sorted_rows_by_bands_are_the_whole_sort(dtype, tied):
    """The sorted rows made by bands of rows on threads (a panel large enough to be
    split: 2,100 x 2,100) equal one :func:`row_order` of the whole panel and the finished
    distances gathered in its order, ties (quantized distances) included."""
    from pyedmcl._bands import row_bands
    from pyedmcl.edm.ccm import ordered_rows
    M = 2100
    rng = np.random.default_rng(4)
    a = np.round(rng.random((M, M)) * 50).astype(dtype)  # many equal distances a row
    f = np.sqrt(a)
    pts = np.arange(M, dtype=np.int32) * 2 + 3
    assert len(row_bands(a)[0]) > 1 or (os.cpu_count() or 1) < 2  # (split where threads are)
    order, fs = ordered_rows(a, f, pts, tied)
    diff = pts[None, :].astype(np.int64) - pts[:, None]
    ref = row_order(a, 2 * np.abs(diff) + (diff > 0), tied)
    np.testing.assert_array_equal(order, ref)
    np.testing.assert_array_equal(fs, np.take_along_axis(f, ref, axis=1))
