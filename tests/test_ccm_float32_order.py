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
