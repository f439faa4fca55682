"""The E scan beyond the fused range on buckets' kernels (pyedmcl.edm.scan_buckets).

Oracle: the per-E pipelines (one k-NN + lookup + skill specialised per E), which the
buckets must give bit for bit: the bucket's state-space kernel adds the same terms in the
same order plus exact zeros, its first k entries are the per-E table, and the lookup
skips the emptied slots. Exact equality, float32 and float64, on a real-valued series
and on an integer one (many tied distances: the total order decides), on the CPU runtime
(which E take which kernels is host logic; the state-space k-NN and the lookup run on
every platform in their own tests). The trim kernel against NumPy on every platform.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST_BUILD_CPU

from clkernels import get_backend
from pyedmcl.data import logistic_map
from pyedmcl.edm import scan_buckets
from pyedmcl.edm.scans import _scan
from pyedmcl.kernels.knn import KNN
from pyedmcl.primitives.ranges import resolve


def _series(integer: bool) -> np.ndarray:
    x = logistic_map(220, r=3.9, x0=0.4, burn=0)
    return np.floor(x * 6) if integer else x


@pytest.mark.parametrize("integer", [False, True], ids=["real", "ties"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [dict(), dict(tau=2, Tp=2, exclusion_radius=3)],
                         ids=["loo", "tau2"])
def test_buckets_equal_the_per_E_pipelines(integer, dtype, kw):
    """E 1 and 3 (a bucket of 8 coordinates, 9 neighbours), 33, 34 (one bucket, tables
    widened to 41 and cut) and 41 (the next bucket, 49)."""
    x = _series(integer)
    Es = [1, 3, 33, 34, 41]

    def make_plan(n, E):
        return resolve(n, E=E, **kw)

    # two host paths over the same kernels (the columns and trim kernels run on every
    # platform below, the k-NN and lookups in test_edm_simplex): on the CPU runtime that
    # compiles the E = 41 programs fastest
    per_E = _scan(x, None, "E", Es, make_plan, dtype, FAST_BUILD_CPU, None)
    buckets = _scan(x, None, "E", Es, make_plan, dtype, FAST_BUILD_CPU, None, bucketed=True)
    assert np.isfinite(per_E.rho).all()
    np.testing.assert_array_equal(buckets.rho, per_E.rho)
    np.testing.assert_array_equal(buckets.mae, per_E.mae)
    np.testing.assert_array_equal(buckets.rmse, per_E.rmse)


def test_bucket_shapes():
    assert scan_buckets.bucket(33, 34) == (40, 41)
    assert scan_buckets.bucket(40, 41) == (40, 41)
    assert scan_buckets.bucket(41, 42) == (48, 49)
    assert scan_buckets.bucket(63, 64) == (64, 64)  # the kernels' most neighbours
    assert scan_buckets.bucket(50, 5) == (56, 5)  # a fixed knn stays
    assert scan_buckets.bucket(1, 2) == (8, 9)
    with pytest.raises(ValueError, match="E >= 1"):
        scan_buckets.bucket(0, 1)
    xe = scan_buckets.coordinates(np.arange(10.0), 3, 5, 2)
    np.testing.assert_array_equal(xe[0], [0, 2, 4, 0, 0])
    np.testing.assert_array_equal(xe[5], [5, 7, 9, 0, 0])
    assert not xe[6:].any()  # windows that do not fit


@pytest.mark.parametrize("E, EB, tau", [(3, 8, 1), (5, 8, 2), (8, 8, 3), (1, 8, 1)])
def test_columns_kernel(device, E, EB, tau):
    """knn_columns against its NumPy reference (scan_buckets.coordinates), exactly."""
    be = get_backend(device)
    x = logistic_map(53, r=3.9, x0=0.3, burn=0).astype(np.float32)
    out = be.empty((x.size, EB), np.float32)
    KNN.launch_columns(be, "float", be.to_device(x), x.size, E, tau, EB, out)
    np.testing.assert_array_equal(be.to_host(out), scan_buckets.coordinates(x, E, EB, tau))


def test_trim_kernel(device):
    be = get_backend(device)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 100, (7, 9)).astype(np.int32)
    dist = rng.random((7, 9)).astype(np.float32)
    i_dev, d_dev = be.to_device(idx), be.to_device(dist)
    KNN.launch_trim(be, "float", i_dev, d_dev, 7, 9, 4)
    want_i, want_d = idx.copy(), dist.copy()
    want_i[:, 4:], want_d[:, 4:] = -1, np.inf
    np.testing.assert_array_equal(be.to_host(i_dev), want_i)
    np.testing.assert_array_equal(be.to_host(d_dev), want_d)


@pytest.mark.parametrize("max_E", [24, 34])
def test_float64_scan_beyond_20_takes_buckets_from_E_1(max_E):
    """Decimal data (the scans' float64 path) at max_E 24 and 34 on a CPU: every E on
    buckets' kernels (decision 0154: the fused scan's float64 build is the slow part
    there), skills those of the per-E pipelines, a handful of programs."""
    import pyedmcl as pe

    x = np.round(logistic_map(260, r=3.9, x0=0.4, burn=0), 2)
    be = get_backend(FAST_BUILD_CPU)  # host logic (which path each E takes), as above
    n0 = be.build_count
    res = pe.embed_dimension(x, max_E=max_E, device=FAST_BUILD_CPU)
    assert be.build_count - n0 <= 12  # at most 5 buckets' k-NN and lookups, trim, skill
    Es = [1, 3, max_E]
    per_E = _scan(x, None, "E", Es, lambda n, E: resolve(n, E=E), "float64", FAST_BUILD_CPU,
                  None)
    np.testing.assert_array_equal(res.rho[np.array(Es) - 1], per_E.rho)
