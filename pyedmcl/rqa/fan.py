"""FAN: a fixed amount of nearest neighbours per column (an asymmetric recurrence matrix).

Column ``j`` of the matrix holds the ``k`` points nearest to point ``j``, the point
itself included (its distance 0 sorts first), as the CRP toolbox's ``fan`` and
pyunicorn's ``local_recurrence_rate`` (whose row ``i`` is our column ``i``:
``threshold_i = sorted(distance[i, :])[int(lrr * (N - 1))]``, recurrent
``distance < threshold_i``, so ``k = int(lrr * (N - 1))``). Recurrence is ``d < t_j``
with ``t_j`` the ``(k + 1)``-th smallest distance of column ``j`` (0-based index ``k``):
exactly ``k`` cells per column unless the ``k``-th and ``(k + 1)``-th distances tie (then
the tied ones are left out, as pyunicorn does). The line kernels compare with ``t_j``
per column (template value ``PERCOL``), under the same ``threshold_rule`` as a fixed
radius (:mod:`pyedmcl.rqa.threshold`, vectorised here).

The per-column order statistics are found on the host in the working precision with
the kernels' arithmetic (coordinate differences, squares summed in order, no fma):
``O(N^2 E)`` work and ``O(N * 2^22 / N)`` memory per block, so practical to N of a few
10^4 on a CPU host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend

from ..kernels.rqa_lines import LineSpec
from ..validation import check_int
from .dnr import detect_lines
from .result import RQAResult, band_cells, make_result

#: cells per host block of the column search
BLOCK_CELLS = 1 << 22


def _points(s: np.ndarray, E: int, tau: int) -> np.ndarray:
    n = s.size - (E - 1) * tau
    return np.stack([s[m * tau: m * tau + n] for m in range(E)], axis=1)


def kernel_distances(a: np.ndarray, b: np.ndarray, metric: str, fma: bool = False) -> np.ndarray:
    """``(rows of a) x (rows of b)`` distances exactly as the line kernels compute them in
    ``a.dtype`` (Euclidean: squared, summed coordinate by coordinate; ``fma``: the squares
    after the first added by a fused multiply-add, as the kernels' ``FMA=1``)."""
    acc = None
    for m in range(a.shape[1]):
        d = a[:, None, m] - b[None, :, m]
        if metric == "euclidean" and fma and acc is not None:
            from ..fma_emulation import fma as fused

            acc = fused(d, d, acc)
        elif metric == "euclidean":
            t = d * d
            acc = t if acc is None else acc + t
        else:
            t = np.abs(d)
            acc = t if acc is None else (np.maximum(acc, t) if metric == "maximum" else acc + t)
    return acc


def column_order_statistics(s: np.ndarray, E: int, tau: int, k: int, metric: str,
                            dtype: np.dtype) -> np.ndarray:
    """Per column ``j``: the ``k``-th (0-based) smallest kernel distance to point ``j``."""
    pts = _points(np.asarray(s, dtype=dtype), E, tau)
    n = pts.shape[0]
    step = max(1, BLOCK_CELLS // n)
    out = np.empty(n, dtype=dtype)
    for c0 in range(0, n, step):
        d = kernel_distances(pts, pts[c0: c0 + step], metric)
        out[c0: c0 + step] = np.partition(d, k, axis=0)[k]
    return out


def kernel_thresholds(v: np.ndarray, metric: str, rule: str) -> np.ndarray:
    """Per column, the value the kernels compare with (``d < t``), given the order
    statistic ``v`` (squared for Euclidean) in the working dtype: ``"squared"`` ``v``
    itself; ``"distance"`` the smallest value whose float64 sqrt is ``>= fl64(sqrt(v))``
    (so ``d < t`` iff ``fl64(sqrt(d)) < fl64(sqrt(v))``, pyunicorn's comparison)."""
    if metric != "euclidean" or rule == "squared":
        return v.copy()
    dt = v.dtype.type
    r = np.sqrt(v.astype(np.float64))
    t = v.copy()
    down = np.nextafter(t, dt(0))
    for _ in range(64):  # a few steps at most: sqrt halves the spacing
        move = (t > 0) & (np.sqrt(down.astype(np.float64)) >= r)
        if not move.any():
            break
        t = np.where(move, down, t)
        down = np.nextafter(t, dt(0))
    return t


def max_distance(s: np.ndarray, E: int, tau: int, metric: str) -> float:
    """The largest distance between two embedded points (float64; Euclidean: the sqrt of
    the largest squared sum), in row blocks: ``O(N^2 E)`` host work."""
    pts = _points(np.asarray(s, dtype=np.float64), E, tau)
    n = pts.shape[0]
    step = max(1, BLOCK_CELLS // n)
    best = 0.0
    for r0 in range(0, n, step):
        best = max(best, float(kernel_distances(pts[r0: r0 + step], pts, metric).max()))
    return float(np.sqrt(best)) if metric == "euclidean" else best


def fan_rqa(s: np.ndarray, k: Any, E: int, tau: int, n: int, metric: str, dt: np.dtype,
             rule: str, w: int, theiler_scope: str, white_border: bool, bes: list[Backend],
             edge: int | None, order: str, params: Any, l_min: int, v_min: int,
             w_min: int) -> RQAResult:
    """FAN (:mod:`pyedmcl.rqa.fan`): column j holds the k points nearest to point j."""
    if n < 2:
        raise ValueError("neighbourhood='fan' needs at least 2 embedded points")
    k = check_int(k, "knn", 1, n - 1)
    v = column_order_statistics(s, E, tau, k, metric, dt)
    tcol = kernel_thresholds(v, metric, rule)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(theiler_scope == "matrix" and w > 0),
                    white_border=bool(white_border), percol=True)
    if w == 0:
        ranges = [(-(n - 1), n)]
    else:
        ranges = [r for r in ((-(n - 1), -w + 1), (w, n)) if r[1] > r[0]]
    xs = s.astype(dt)
    h = detect_lines(bes, xs, xs, 0.0, spec=spec, n_rows=n, n_cols=n, diag_ranges=ranges, w=w,
                     edge=edge, order=order, params=params, tcol=tcol)
    n_cells = n * n - (band_cells(n, w) if spec.theiler_matrix else 0)
    radii = np.sqrt(v.astype(np.float64)) if metric == "euclidean" else v.astype(np.float64)
    return make_result(h, h.diagonal.copy(), n_cells, radii, l_min, v_min, w_min, dict(
        kind="rqa", neighbourhood="fan", knn=k, E=E, tau=tau, metric=metric, theiler=w,
        theiler_scope=theiler_scope, l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt),
        white_border=white_border, n_points=n, devices=h.per_device, launches=h.launches,
        threshold_rule=rule))
