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

The per-column order statistics are the float64 path's whatever the working dtype: the
float64 kernels' arithmetic (coordinate differences, squares summed in order, no fma) on
the series as given. float64 computes them on the host in float64; float32 computes the
float32 distances of the centred series and redoes in float64 only each column's cells
near its float32 order statistic (:func:`column_order_statistics_f32`,
:func:`pyedmcl.rqa.select.column_kth`: the same values bit for bit, for ~1.2x the
float32-only host time, where all of it in float64 takes ~1.6x). float32 FAN then compares with their
float32 rounding (:func:`working_thresholds`: the same decision on float32 values) and
redoes the cells near them in double against the float64 ones
(:mod:`pyedmcl.rqa.exact`), so its matrix is float64's. ``O(N^2 E)`` work and
``O(N * 2^22 / N)`` memory per block, so practical to N of a few 10^4 on a CPU host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend

from ..kernels.rqa_lines import LineSpec
from ..validation import check_int
from .distances import BLOCK_CELLS, kernel_distances, sampled_dist
from .distances import points as _points
from .dnr import detect_lines
from .exact import make_exact
from .exact import wanted as exact_wanted
from .job import RqaJob
from .result import RQAResult, band_cells, make_result


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


def column_order_statistics_f32(raw: np.ndarray, E: int, tau: int, k: int,
                                metric: str) -> np.ndarray:
    """:func:`column_order_statistics` in float64 of the series as given, found from the
    float32 distances of the centred series: per column, the cells near its float32 order
    statistic are redone in float64 (:func:`pyedmcl.rqa.select.column_kth`), the rest
    of the float64 work skipped (bit for bit the float64 values)."""
    from .select import centred_f32, column_kth

    raw = np.asarray(raw, np.float64)
    z, _, eta = centred_f32(raw, None)
    p32, p64 = _points(z, E, tau), _points(raw, E, tau)
    n = p32.shape[0]
    step = max(1, BLOCK_CELLS // n)
    out = np.empty(n, dtype=np.float64)
    for c0 in range(0, n, step):
        c1 = min(n, c0 + step)
        out[c0:c1] = column_kth(
            kernel_distances(p32, p32[c0:c1], metric), k, eta, metric, E,
            lambda i, j, c0=c0: sampled_dist(raw, raw, i, c0 + j, E, tau, metric),
            lambda cols, c0=c0: kernel_distances(p64, p64[c0 + cols], metric))
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


def working_thresholds(v: np.ndarray, metric: str, dtype: Any, rule: str) -> np.ndarray:
    """Per column, the threshold in ``dtype`` for the float64 order statistic ``v``
    (squared for Euclidean), as :func:`pyedmcl.rqa.radius.working_threshold` per value:
    ``"distance"`` (Euclidean) the smallest ``dtype`` value whose float64 sqrt is ``>=
    fl64(sqrt(v))``; otherwise the smallest ``dtype`` value ``>= v`` (``d < t`` iff ``d <
    v``). float64: :func:`kernel_thresholds` of ``v`` itself."""
    dt = np.dtype(dtype)
    v = np.asarray(v, np.float64)
    if dt == np.float64:
        return kernel_thresholds(v, metric, rule)
    up, down = dt.type(np.inf), dt.type(0)
    if metric != "euclidean" or rule == "squared":
        t = v.astype(dt)
        return np.where(t.astype(np.float64) < v, np.nextafter(t, up), t)
    r = np.sqrt(v)
    t = v.astype(dt)
    for _ in range(64):  # a few steps at most
        move = np.sqrt(t.astype(np.float64)) < r
        if not move.any():
            break
        t = np.where(move, np.nextafter(t, up), t)
    for _ in range(64):
        dn = np.nextafter(t, down)
        move = (t > 0) & (np.sqrt(dn.astype(np.float64)) >= r)
        if not move.any():
            break
        t = np.where(move, dn, t)
    return t


def fan_thresholds(raw: np.ndarray, E: int, tau: int, k: int, metric: str, dt: np.dtype,
                   rule: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(v64, tcol, tcol64)``: per column the float64 path's order statistic (from the
    raw series, float64 arithmetic, whatever ``dt``), the threshold the kernels of ``dt``
    compare with, and the float64 path's threshold (what float32 kernels redo near
    cells against). In float64 ``tcol`` is ``tcol64``."""
    if dt == np.float64:
        v64 = column_order_statistics(raw, E, tau, k, metric, np.dtype(np.float64))
    else:
        v64 = column_order_statistics_f32(raw, E, tau, k, metric)
    t64 = kernel_thresholds(v64, metric, rule)
    return v64, (t64 if dt == np.float64 else working_thresholds(v64, metric, dt, rule)), t64


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


def fan_rqa(s: np.ndarray, job: RqaJob, dt: np.dtype, rule: str, bes: list[Backend],
            raw: np.ndarray | None = None) -> RQAResult:
    """FAN (:mod:`pyedmcl.rqa.fan`): column j holds the ``job.knn`` points nearest to
    point j. ``s``: the kernels' series (float32: centred); ``raw``: the series the
    float64 path reads (None: ``s``), whose per-column thresholds every dtype takes; a
    float32 run redoes the cells near each column's threshold in double against them
    (:mod:`pyedmcl.rqa.exact`)."""
    E, tau, n, metric, w = job.E, job.tau, job.n, job.metric, int(job.theiler)
    theiler_scope, white_border = job.theiler_scope, job.white_border
    l_min, v_min, w_min = job.l_min, job.v_min, job.w_min
    if n < 2:
        raise ValueError("neighbourhood='fan' needs at least 2 embedded points")
    k = check_int(job.knn, "knn", 1, n - 1)
    src = s if raw is None else raw
    v, tcol, tcol64 = fan_thresholds(src, E, tau, k, metric, dt, rule)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(theiler_scope == "matrix" and w > 0),
                    white_border=bool(white_border), percol=True, exact=exact_wanted(dt))
    if w == 0:
        ranges = [(-(n - 1), n)]
    else:
        ranges = [r for r in ((-(n - 1), -w + 1), (w, n)) if r[1] > r[0]]
    xs = s.astype(dt)
    ex = None
    if spec.exact:  # the near cells of each column redone against the float64 path's
        ex = make_exact(src, src, xs, xs, 0.0, 0.0, metric, E, tcol=(tcol64, tcol))
    h = detect_lines(bes, xs, xs, 0.0, spec=spec, n_rows=n, n_cols=n, diag_ranges=ranges, w=w,
                     edge=job.edge, order=job.order, params=job.params, tcol=tcol, exact=ex)
    n_cells = n * n - (band_cells(n, w) if spec.theiler_matrix else 0)
    radii = np.sqrt(v) if metric == "euclidean" else v.copy()
    return make_result(h, h.diagonal.copy(), n_cells, radii, l_min, v_min, w_min, dict(
        kind="rqa", neighbourhood="fan", knn=k, E=E, tau=tau, metric=metric, theiler=w,
        theiler_scope=theiler_scope, l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt),
        white_border=white_border, n_points=n, devices=h.per_device, launches=h.launches,
        threshold_rule=rule))
