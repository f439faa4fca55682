"""float32 Simplex predictions that float32 cannot hold, found per row and redone in float64.

Why. Centring keeps float32 distances within ``2u (2 |q| + (E + 4) d)`` of the exact ones
(``u`` = 2^-24, ``|q|`` the query point's norm). Simplex weighs neighbours by
``exp(-d_i / d_min)``: where neighbours are much closer than the data's magnitude (dense
libraries at E = 1, states that nearly repeat), that error moves the weights, and a
prediction can be off by a few percent of the target's spread (Lorenz x, L = 10^4, E = 1:
up to 3.7e-2 of its standard deviation) while rho barely moves (1e-7). float32 also
breaks some exact float64 ties at the k-th place the other way.

What. The lookup kernel bounds each prediction's float32 error to first order (its CHECK
variant, from a k-NN table one neighbour wider, see the template's header) and flags the
predictions whose bound exceeds :data:`PREDICTION_TOL` times the target's standard
deviation. Those queries are recomputed in float64 from the original data, on the device
(the float64 call's kernels: the same values as ``dtype="float64"``) or, on a device
without fp64, on the host (the k-d tree's exact table and pyEDM's weights); the skill
kernel then runs again on the patched predictions (rounded to float32 like the rest).
Tables from sorted rows (knn >= 64) take the same bound on the host (:func:`host_flags`).
Exact float32 data (values on a binary grid, :func:`exact_in_float32`) are not checked;
a large call whose sample is mostly flagged runs in float64 from the start
(:func:`pyedmcl.edm.simplex.sampled_flag_fraction`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from clkernels import Backend

from ..primitives.ranges import MAX_KNN, Plan

#: largest first-order float32 error bound a prediction may have, as a fraction of its
#: target's standard deviation; beyond it the prediction is recomputed in float64.
#: Ordinary data stay far below (median error 3e-8 of the deviation): the flagged rows
#: are those of near-repeating states, dense one-dimensional libraries and the distance
#: ties of decimal data.
PREDICTION_TOL = 1e-5


def point_norms(sq: np.ndarray, points: np.ndarray, E: int, tau: int) -> np.ndarray:
    """Euclidean norm of each delay vector (lags ``p, p + |tau|, ..., p + (E-1)|tau|``)
    from ``sq``, each time step's squared coordinates (summed over a state space's
    columns), by running sums along each residue class mod ``|tau|`` (O(n), not O(n E));
    their cancellation error, below 1e-15 of the total, is far inside the bound's factor
    of two."""
    t = abs(tau)
    sq = np.asarray(sq, np.float64)
    p = np.asarray(points, np.int64)
    if t == 1:
        c = np.empty(sq.size + 1)
        c[0] = 0.0
        np.cumsum(sq, out=c[1:])
        if p.size and p[-1] - p[0] == p.size - 1:  # a run of points: slices, no gather
            d = c[p[0] + E:p[-1] + E + 1] - c[p[0]:p[-1] + 1]
        else:
            d = c[p + E] - c[p]
    else:
        rows = -(-sq.size // t)
        c = np.zeros((rows + 1, t))
        c[1:].reshape(-1)[:sq.size] = sq
        np.cumsum(c, axis=0, out=c)
        r, i = p % t, p // t
        d = c[i + E, r] - c[i, r]
    return np.sqrt(np.maximum(d, 0.0))


_ENABLED = [True]


@contextmanager
def unchecked() -> Iterator[None]:
    """Within this block float32 Simplex takes every prediction from float32 (no bound,
    no float64 redo): what the scans compute (:mod:`.scans`, :mod:`.scan_fused`), and the
    reference the tests compare them with."""
    _ENABLED.append(False)
    try:
        yield
    finally:
        _ENABLED.pop()


def enabled() -> bool:
    """Whether float32 Simplex checks its rows here (not inside :func:`unchecked`)."""
    return _ENABLED[-1]


@dataclass
class RowCheck:
    """What the checked lookup needs besides the table, computed when first asked (the
    caller asks once the k-NN kernel is queued: the host work then overlaps it)."""

    plan: Plan
    xz: np.ndarray  # the kernel's library data, centred: (n,) or (n, columns)
    yz: np.ndarray  # its targets (nt, n), for their spread
    _targets: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def E(self) -> int:
        """Coordinates per point (lags x columns)."""
        return self.plan.E * (1 if self.xz.ndim == 1 else self.xz.shape[1])

    @property
    def widen(self) -> bool:
        """Whether the k-NN table holds one neighbour more than knn (the next one): where
        the fused kernel keeps it and the library has it."""
        return self.plan.knn < min(MAX_KNN, self.plan.lib_points.size)

    @cached_property
    def qnorm(self) -> np.ndarray:
        """``(nq,)`` float32: the query points' norms in the kernel's units."""
        z = np.asarray(self.xz, np.float64)
        sq = z * z if z.ndim == 1 else (z * z).sum(axis=1)
        p = self.plan
        return point_norms(sq, p.pred_points, p.E, p.tau).astype(np.float32)

    @cached_property
    def thr(self) -> np.ndarray:
        """``(nt,)``: each target's tolerance in the kernel's units."""
        return PREDICTION_TOL * np.nanstd(self.yz, axis=1)

    @cached_property
    def span(self) -> np.ndarray:
        """``(nt,)``: each target's max - min (what a neighbour swapped at the k-th place
        can move a prediction by, times its weight)."""
        return np.nanmax(self.yz, axis=1) - np.nanmin(self.yz, axis=1)

    def device_targets(self, be: Backend) -> tuple[Any, Any]:
        """``thr`` and ``span`` on ``be``'s device in its accumulation precision (uploaded
        once per check, at the first query block)."""
        if self._targets is None:
            acc = np.float64 if be.info.fp64 else np.float32
            self._targets = (be.to_device(self.thr.astype(acc)),
                             be.to_device(self.span.astype(acc)))
        return self._targets


def exact_in_float32(z: np.ndarray, coords: int) -> bool:
    """Whether every float32 squared distance between points of ``coords`` coordinates
    from ``z`` is exact: values on a binary grid ``2^-m`` (m <= 12; integers are m = 0,
    and centring keeps such values on their grid, :func:`pyedmcl._precision.prepare`)
    whose squared differences, in grid steps, sum below 2^24. Then float32 orders
    neighbours as float64 does, ties included, and only the square root rounds (weights
    within 3e-6)."""
    if z.size == 0 or not np.all(np.isfinite(z)):
        return False
    lo, hi = float(np.min(z)), float(np.max(z))
    head = np.ravel(z)[:1024]  # the grid is found on a prefix, then checked on all
    for m in range(13):
        step = 2.0 ** m
        if coords * ((hi - lo) * step) ** 2 >= 2.0 ** 24:
            return False
        g = head * step
        if np.all(g == np.round(g)):
            g = z * step
            return bool(np.all(g == np.round(g)))
    return False


def row_check(plan: Plan, xz: np.ndarray, yz: np.ndarray, exact: bool) -> RowCheck | None:
    """The check for a float32 Simplex of centred ``xz`` ((n,) or (n, columns)) and
    targets ``yz`` ``(nt, n)``; None where the neighbours are not the exact kernel's (an
    approximate back-end) or float32's distances are exact (:func:`exact_in_float32`)."""
    if not exact or not _ENABLED[-1]:
        return None
    check = RowCheck(plan, xz, yz)
    return None if exact_in_float32(xz, check.E) else check


def host_flags(idx: np.ndarray, dist: np.ndarray, y: np.ndarray, shift: int,
               qnorm: np.ndarray, coords: int, thr: np.ndarray, span: np.ndarray,
               k: int) -> np.ndarray:
    """The lookup template's CHECK 1 on the host, for tables from sorted rows: ``idx`` /
    ``dist`` ``(nq, k or k + 1)`` (float32 distances; -1 / inf where none), targets ``y``
    ``(nt, n)`` in the kernel's units (library point ``l`` predicts ``y[:, l + shift]``).
    Returns ``(nq,)`` bool: the bound exceeds ``thr[j]`` for some target ``j``."""
    u2 = 2.0 ** -23
    d_all = np.asarray(dist, np.float64)
    ok = idx[:, :k] >= 0
    d = np.where(ok, d_all[:, :k], 0.0)
    f = np.maximum(d[:, :1], 1e-6)
    w = np.where(ok, np.exp(-d / f), 0.0)
    den = w.sum(axis=1)
    qn2 = 2.0 * np.asarray(qnorm, np.float64)[:, None]
    g = np.where(d[:, :1] >= np.float32(1e-6), u2 * (qn2 + (coords + 4) * d[:, :1]) / f, 0.0)
    move = u2 * (qn2 + (coords + 4) * d) + d * g
    near = np.zeros_like(ok)
    if idx.shape[1] > k:  # neighbours within rounding of the next one
        has = idx[:, k:k + 1] >= 0
        db = np.where(has, d_all[:, k:k + 1], 0.0)
        near = ok & has & (db - d <= u2 * (2 * qn2 + (coords + 4) * (d + db)))
    yk = np.where(ok[None], y[:, np.clip(idx[:, :k] + shift, 0, y.shape[1] - 1)], 0.0)
    out = np.zeros(idx.shape[0], bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(y.shape[0]):
            mu = (w * yk[j]).sum(axis=1) / den
            bnd = (w * np.abs(yk[j] - mu[:, None]) * move).sum(axis=1) / (den * f[:, 0])
            bnd += (np.where(near, w, 0.0).sum(axis=1) / den) * span[j]
            out |= (den > 0) & ~(bnd <= thr[j])
    return out


def flagged_queries(flags: np.ndarray) -> np.ndarray:
    """Query positions with a flag for any target (``flags`` ``(nbatch, nt, nq)``)."""
    f = np.asarray(flags)
    return np.flatnonzero(f.reshape(-1, f.shape[-1]).any(axis=0))


def redo_float64(be: Backend, plan: Plan, x: np.ndarray, y: np.ndarray, rows: np.ndarray,
                 neighbors: Any, variance: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """float64 predictions ``(nt, rows.size)`` (and variances) of the queries ``rows`` of
    ``plan`` from the original series ``x`` and targets ``y`` ``(nt, n)``: the float64
    call's kernels through ``neighbors`` (its k-NN back-end), or on a device without fp64
    the host's k-d tree (the exact kernel's table) and :func:`.lookup.lookup_host`."""
    from ..primitives.lookup import lookup_device, lookup_host

    qpts = plan.pred_points[rows]
    shift = plan.offset + plan.Tp
    kw = dict(E=plan.E, tau=plan.tau, k=plan.knn, qpts=qpts, lpts=plan.lib_points,
              radius=plan.exclusion_radius)
    if not be.info.fp64:
        from ..neighbors import neighbor_backend

        idx, dist = neighbor_backend("kdtree").search_host(np.asarray(x, np.float64), **kw)
        return lookup_host(idx[0], dist[0], y, shift, variance)
    xd = be.to_device(np.ascontiguousarray(x, np.float64))
    same = (y.shape == (1, x.size) and y.dtype == x.dtype  # x predicts itself
            and y[0].ctypes.data == x.ctypes.data and y.strides[-1] == x.strides[0])
    yd = xd if same else be.to_device(np.ascontiguousarray(y, np.float64))
    table = neighbors.device_table(be, xd, x.size, real="double", **kw)
    p, v = lookup_device(be, table, yd, x.size, y.shape[0], shift, real="double",
                         variance=variance)
    return be.to_host(p)[0], (be.to_host(v)[0] if variance else None)
