"""CCM's rho reduction (the ``skill`` kernel with ``ccm=True``) against its NumPy model.

CCM's reduction (decision 0114) keeps ``ccm_skill_wg`` streams (query ``q`` in stream
``q mod WG``), every stream shifted by the target's first finite observation, adds the
streams' shifted sums by the pairwise tree (stream ``i`` takes ``i + h``, ``h`` halving)
and finishes once. ``pyedmcl.ccm``, its null and the all-to-all map reduce alike (the
map's agreement with ``pe.ccm`` is test_xmap.py's); here the arithmetic itself is
pinned, bit for bit in float64, on every platform.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pyedmcl  # noqa: F401  (before pyopencl)
from clkernels import get_backend
from pyedmcl.kernels.lookup import ccm_skill_wg
from pyedmcl.primitives.lookup import ccm_shifts, ccm_shifts_device, ccm_shifts_groups, skill_device


def _model(pred: np.ndarray, y: np.ndarray, obs: np.ndarray, wg: int) -> tuple:
    """rho, MAE, RMSE and n of one prediction row, in the kernel's order of operations
    (Python floats are IEEE doubles; the kernels compile without contraction); the shift
    is the target's first finite observation in query order."""
    k = 0.0
    for t in obs:
        if t >= 0 and math.isfinite(float(y[t])):
            k = float(y[t])
            break
    streams = []
    for lid in range(wg):
        s = [0.0] * 10
        s[1] = s[2] = k
        for q in range(lid, pred.size, wg):
            t = int(obs[q])
            if t < 0:
                continue
            p = float(pred[q])
            if not math.isfinite(p):
                continue
            o = float(y[t])
            dp, do, e = p - s[1], o - s[2], p - o
            s[0] += 1
            s[3] += dp
            s[4] += do
            s[5] += dp * dp
            s[6] += do * do
            s[7] += dp * do
            s[8] += -e if e < 0 else e
            s[9] += e * e
        streams.append(s)
    h = wg // 2
    while h > 0:
        for lid in range(h):
            a, b = streams[lid], streams[lid + h]
            a[0] += b[0]
            for i in range(3, 10):
                a[i] += b[i]
        h //= 2
    s = streams[0]
    n = s[0]
    if n == 0:
        return math.nan, math.nan, math.nan, 0.0
    cpp, coo = s[5] - s[3] * s[3] / n, s[6] - s[4] * s[4] / n
    m3, m4 = (cpp if cpp > 0 else 0.0), (coo if coo > 0 else 0.0)
    m5 = s[7] - s[3] * s[4] / n
    den = math.sqrt(m3 * m4)
    return (m5 / den if den > 0 else math.nan), s[8] / n, math.sqrt(s[9] / n), n


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_ccm_reduction_matches_its_model(device, offset):
    """Rows with missing observations, non-finite predictions and a target far from zero
    (offset: the shift keeps the sums small): rho, MAE, RMSE and the pair count equal
    the model's bit for bit."""
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("float64 accumulation only")
    rng = np.random.default_rng(3)
    nq, nt, rows = 203, 3, 6
    y = (np.cumsum(rng.standard_normal((nt, nq + 10)), axis=1) + offset).astype(np.float32)
    y[1, 4] = np.nan  # target 1's first observed time: its shift comes from the next one
    obs = np.arange(nq, dtype=np.int32) + 3
    obs[[0, 7, 50]] = -1
    pred = (y[np.arange(rows) % nt][:, 3:3 + nq]
            + rng.standard_normal((rows, nq)).astype(np.float32)).astype(np.float32)
    pred[2, [5, 9]] = np.nan
    got = skill_device(be, be.to_device(pred), rows, nq, be.to_device(y), nq + 10, nt,
                       be.to_device(obs), ccm=True, shift=ccm_shifts_device(be, y, obs))
    wg = ccm_skill_wg(be.info)
    for r in range(rows):
        want = _model(pred[r], y[r % nt], obs, wg)
        assert [float(v).hex() for v in got[r]] == [float(v).hex() for v in want], r


def _first_finite(y: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """The shift by its definition: each row's first finite value at ``obs`` in order."""
    out = np.zeros(y.shape[0])
    for i, row in enumerate(y):
        for q in obs[obs >= 0]:
            if np.isfinite(row[q]):
                out[i] = row[q]
                break
    return out


def test_ccm_shifts_are_each_targets_first_finite_observation():
    """``ccm_shifts`` reads columns in growing chunks (1, 4, 16 ...) and only for the rows
    still without a finite value: rows whose first finite value lies in a later chunk, rows
    with none (shift 0), skipped times (< 0) and a row selection all match the definition."""
    rng = np.random.default_rng(7)
    y = rng.standard_normal((6, 40))
    y[1, :3] = np.nan  # the first finite value in the second chunk
    y[2, :30] = np.nan  # ... in the fourth
    y[3] = np.nan  # none: 0
    y[4, rng.permutation(40)[:25]] = np.nan
    obs = rng.permutation(40)
    obs[[0, 5]] = -1
    want = _first_finite(y, obs)
    assert np.array_equal(ccm_shifts(y, obs), want)
    assert want[3] == 0 and np.isfinite(want).all()
    rows = np.array([5, 2, 2, 0])
    assert np.array_equal(ccm_shifts(y, obs, rows=rows), want[rows])
    assert np.array_equal(ccm_shifts(y[2], obs), want[2:3])  # one series
    assert ccm_shifts(y, obs, fp64=False).dtype == np.float32
    # every group at once (the all-to-all map's E-groups): as one call per group
    groups = [(obs, rows), (np.arange(40), np.array([1, 3, 4])), (obs[::-1], np.arange(6)),
              (np.full(40, -1), np.array([0, 2])), (obs, np.array([], np.int64))]
    for fp64 in (True, False):
        got = ccm_shifts_groups(y, groups, fp64)
        for g, (o, r) in zip(got, groups, strict=True):
            want = ccm_shifts(y, o, fp64, r)
            assert g.dtype == want.dtype and np.array_equal(g, want)
    assert ccm_shifts_groups(y, []) == []
