"""CCM's rho reduction (the ``skill`` kernel at ``ccm_skill_wg``) against its NumPy model.

CCM's reduction keeps ``ccm_skill_wg`` streams (query ``q`` in stream ``q mod WG``), each
shifted by its first pair, finishes every stream and merges them by the pairwise tree
(stream ``i`` takes ``i + h``, ``h`` halving; Chan et al.'s update, common/_stats.mako).
``pyedmcl.ccm``, its null and the all-to-all map reduce alike (the map's agreement with
``pe.ccm`` is test_xmap.py's); here the arithmetic itself is pinned, bit for bit in
float64, on every platform, at the width CCM uses (16 streams, decision 0113).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pyedmcl  # noqa: F401  (before pyopencl)
from clkernels import get_backend
from pyedmcl.edm.lookup import skill_device
from pyedmcl.kernels.lookup import ccm_skill_wg


def _finish(s: list[float]) -> list[float]:
    n = s[0]
    if n == 0:
        return [0.0] * 8
    cpp, coo = s[5] - s[3] * s[3] / n, s[6] - s[4] * s[4] / n
    return [n, s[1] + s[3] / n, s[2] + s[4] / n, cpp if cpp > 0 else 0.0,
            coo if coo > 0 else 0.0, s[7] - s[3] * s[4] / n, s[8], s[9]]


def _merge(a: list[float], b: list[float]) -> list[float]:
    n = a[0] + b[0]
    if b[0] == 0:
        return a
    if a[0] == 0:
        return list(b)
    dp, dq = b[1] - a[1], b[2] - a[2]
    f = a[0] * b[0] / n
    return [n, a[1] + dp * b[0] / n, a[2] + dq * b[0] / n, a[3] + (b[3] + dp * dp * f),
            a[4] + (b[4] + dq * dq * f), a[5] + (b[5] + dp * dq * f), a[6] + b[6],
            a[7] + b[7]]


def _model(pred: np.ndarray, y: np.ndarray, obs: np.ndarray, wg: int) -> list[float]:
    """rho, MAE, RMSE and n of one prediction row, in the kernel's order of operations
    (Python floats are IEEE doubles; the kernels compile without contraction)."""
    red = []
    for lid in range(wg):
        s = [0.0] * 10
        for q in range(lid, pred.size, wg):
            t = int(obs[q])
            p = float(pred[q])
            if t < 0 or not math.isfinite(p):
                continue
            o = float(y[t])
            if s[0] == 0:
                s[1], s[2] = p, o
            dp, do, e = p - s[1], o - s[2], p - o
            s[0] += 1
            s[3] += dp
            s[4] += do
            s[5] += dp * dp
            s[6] += do * do
            s[7] += dp * do
            s[8] += -e if e < 0 else e
            s[9] += e * e
        red.append(_finish(s))
    h = wg // 2
    while h > 0:
        for lid in range(h):
            red[lid] = _merge(red[lid], red[lid + h])
        h //= 2
    m = red[0]
    n = m[0]
    den = math.sqrt(m[3] * m[4])
    return [m[5] / den if den > 0 else math.nan, m[6] / n if n > 0 else math.nan,
            math.sqrt(m[7] / n) if n > 0 else math.nan, n]


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_ccm_reduction_matches_its_model(device, offset):
    """Rows with missing observations, non-finite predictions and targets far from zero
    (offset): rho, MAE, RMSE and the pair count equal the model's bit for bit."""
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("float64 accumulation only")
    rng = np.random.default_rng(3)
    nq, nt, rows = 203, 3, 6
    y = (np.cumsum(rng.standard_normal((nt, nq + 10)), axis=1) + offset).astype(np.float32)
    obs = np.arange(nq, dtype=np.int32) + 3
    obs[[0, 7, 50]] = -1
    pred = (y[np.arange(rows) % nt][:, 3:3 + nq]
            + rng.standard_normal((rows, nq)).astype(np.float32)).astype(np.float32)
    pred[2, [5, 9]] = np.nan
    wg = ccm_skill_wg(be.info)
    got = skill_device(be, be.to_device(pred), rows, nq, be.to_device(y), nq + 10, nt,
                       be.to_device(obs), wg=wg)
    for r in range(rows):
        want = _model(pred[r], y[r % nt], obs, wg)
        assert [float(v).hex() for v in got[r]] == [float(v).hex() for v in want], r
