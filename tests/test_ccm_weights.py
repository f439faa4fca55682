"""CCM's prediction from normalised weights (decision 0096) against its NumPy formula.

``lookup`` with WEIGHT "ccm" divides each neighbour weight by the query's weight sum
once (float64 accumulation), rounds it to the data type, and sums those weights times
the targets in the data type, slot 0 first. The map's skill (``xmap_lookup``) reads the
same weights from ``pack``, so its rho equals ``pyedmcl.ccm``'s (test_xmap.py); here
the formula itself is pinned, bit for bit, on every platform.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl  # noqa: F401  (before pyopencl)
from clkernels import get_backend
from pyedmcl.kernels.lookup import LOOKUP


def _normalised(idx, dist, y, tshift, dt):
    """NumPy: pyEDM CCM's weights (zero nearest distance: 1 for zero distances, 0 for
    the rest) over their sequential sum, rounded to ``dt``; the ``dt`` sum of weight
    times target in slot order. Also the previous formula (float64 sum over the weight
    sum, rounded once), to show that the data tell the two apart."""
    d = dist.astype(np.float64)
    d0 = d[:, :1]
    w = np.where(d0 > 0, np.exp(-d / np.where(d0 > 0, d0, 1.0)), (d == 0).astype(np.float64))
    den = w[:, 0].copy()
    for k in range(1, w.shape[1]):
        den = den + w[:, k]
    wn = (w / den[:, None]).astype(dt)
    yk = y[idx + tshift]
    p = np.zeros(idx.shape[0], dt)
    num = np.zeros(idx.shape[0])
    for k in range(w.shape[1]):
        p = (p + wn[:, k] * yk[:, k]).astype(dt)
        num = num + w[:, k] * yk[:, k].astype(np.float64)
    return p, (num / den).astype(dt)


@pytest.mark.parametrize("real", ["float", "double"])
def test_ccm_lookup_sums_normalised_weights(device, real):
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("the formula's weights are float64 sums (no fp64 on this device)")
    dt = np.float64 if real == "double" else np.float32
    rng = np.random.default_rng(3)
    nq, K, tshift = 600, 5, 2
    idx = rng.integers(0, nq, (nq, K)).astype(np.int32)
    dist = np.sort(rng.random((nq, K)) * 3, axis=-1).astype(dt)
    dist[:40, 0] = 0   # a zero nearest distance: CCM's 1 / 0 weights
    dist[:20, 1] = 0
    y = (rng.standard_normal(nq + tshift) * 7 + 3).astype(dt)
    pred = be.empty((1, 1, nq), dt)
    LOOKUP.launch(be, {"WG": 64}, {"K": K, "REAL": real, "WEIGHT": "ccm"},
                  be.to_device(idx[None]), be.to_device(dist[None]), nq, 1,
                  be.to_device(y), nq + tshift, 1, tshift, pred, pred)
    got = be.to_host(pred).reshape(nq)
    want, before = _normalised(idx, dist, y, tshift, dt)
    if real == "float":
        np.testing.assert_array_equal(got, want)
        assert np.count_nonzero(got != before) > 0   # the test can tell the formulas apart
    else:   # the device's double exp may differ from NumPy's by an ulp
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-14 * np.abs(y).max())
