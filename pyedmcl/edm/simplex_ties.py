"""Simplex's neighbours decided as pyEDM decides equally far points, on the rows where
the two may part.

Why. ``pe.simplex`` ranks library points by (squared distance, ``|p - l|``, ``l``) in its
kernels' arithmetic. pyEDM's Simplex (``Neighbors._TieBreakSelect``) ranks them by
(distance, ``|p - l|``, ``l``) in its own: the roots of scipy KDTree's sums for the
candidates it asks the tree for, the roots of NumPy's left-to-right sums for a row it
scans in full (where the knn-th candidate reaches the farthest one returned). On decimal
data (values of few places: what instruments record) library points lie at equal
distances often, and the two arithmetics round equal distances differently: the order
of the sums, FMA, roots compared rather than squares (two squares one ulp apart can
share a root). Where such a tie straddles the knn-th place the neighbour sets differ
(Lorenz x rounded to one decimal, E 3: leave-one-out, 6 of 2,000 predictions off by up
to 0.11).

Which rows. Both arithmetics hold a distance within ``(E + 3) u`` of the exact one
(``u = 2^-53``, E coordinates), so a row's sets can differ only where its knn-th and
(knn + 1)-th float64 distances lie within :func:`tie_width` of each other (:func:`tied`).
Only decimal data hold such ties (:func:`applies`; values on a binary grid give both
arithmetics the same exact sums, continuous data no equal distances). The float64 pass
(its table one neighbour wider) lists those rows on the device, the lookup program's
``ties`` kernel; float32 flags every tie at its knn-th place and redoes those rows in
float64, which take the same test on their float64 table (decision 0168).

What, for those rows:

1. every admissible library point within ``kth (1 + 2 w)`` of the query (``kth`` its
   knn-th float64 distance, ``w`` the tie width): the device's range lists
   (``knn/range.cl.mako``), so that every other point lies farther than ``kth (1 + w)``
   in pyEDM's arithmetic too;
2. pyEDM's distances of those candidates and of the library points the exclusion radius
   removes (pyEDM's tree returns them too, and its straddle test reads the farthest
   returned), in both of pyEDM's arithmetics, and pyEDM's selection: its ``k_query``,
   straddle and deficiency tests and the full scan's order, where the candidates settle
   it (all but cut lists and rare boundary cases);
3. pyEDM's weights and prediction.

The float64 pass runs 1-3 on the device behind its lookup, before the skill, with no
host round trip (``lookup/pyedm_decide.cl.mako`` weighs the rows it settles and writes
them into the predictions);
:func:`decide` and :func:`weigh` are the same steps on the host, for the rows the device
leaves open, and :func:`scan_rows` decides over the whole library those the candidates
do not settle. Every other row keeps the kernels' values (pyEDM's neighbours; distances
within ulps).

Cost (bench/bench_simplex_ties.py; bench/results): data of two decimals +13-20% on 2 CPU
cores at L 20,000 (float64); one decimal, most rows tied, 1.6-2.5x the call; on an H200
0.5-0.9 ms a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..primitives.ranges import MAX_KNN, Plan
from .pyedm_kdtree import exclusion_active, kdtree_distances, row_distances

#: library points a tied query's list holds at first (its tie and every nearer point: on
#: decimal data up to ~20 in most rows of a 20,000-point library); the rows whose list
#: was cut are asked again with room for the longest, up to GROUP_MAX points, beyond
#: which they are scanned on the host
GROUP_CAP = 128
GROUP_MAX = 4096
#: tied queries of a query block decided on the device (behind the lookup, before the
#: skill: no host round trip); the rest, and those the device leaves open, on the host
DEVICE_SLOTS = 1 << 16
#: largest exclusion radius the device's rule takes (the excluded points join each
#: query's candidates: 2 R + 1 of them); wider radii leave every tied row to the host
DEVICE_RADIUS = 16

#: whether :func:`applies` may answer yes (tests turn it off to see the kernels' order)
ENABLED = True

#: entries of one block's (rows x library x coordinates) differences in the host scan
_SCAN_ELEMENTS = 1 << 22
#: tied rows decided at once (in blocks of like list lengths)
_DECIDE_ROWS = 1024


def applies(x: np.ndarray | None, plan: Plan, neighbors: Any) -> bool:
    """Whether a call's rows may need pyEDM's rule: the exact device k-NN on a host
    series of decimal data (:func:`~pyedmcl.edm.row_check.on_decimal_grid`: equal real
    distances, rounded otherwise by the two arithmetics) whose squared distances are not
    exact in float64 (values on a binary grid, integers among them, give both the same
    sums, so both decide by the same key). Other data have no equal distances to part
    on: two real distances that differ lie far beyond 1e-15 of each other."""
    from ..neighbors.exact import ExactBackend
    from .row_check import on_decimal_grid

    if not ENABLED or x is None or type(neighbors) is not ExactBackend:
        return False
    return on_decimal_grid(x) and not exact_sums(x, plan.E)


def decides_ties(x: np.ndarray, E: int, knn: int) -> bool:
    """Whether ``pe.simplex`` (float64, the exact k-NN) gives pyEDM's neighbours wherever
    they tie on the finite series ``x`` at ``E`` coordinates and ``knn`` neighbours:
    exact sums (one key in both arithmetics), or decimal data that :func:`applies` to
    (the table one wider than ``knn`` must fit the fused kernel)."""
    from .row_check import on_decimal_grid

    x = np.asarray(x, np.float64)
    if not np.isfinite(x).all():
        return False
    if exact_sums(x, E):
        return True
    return ENABLED and knn + 1 <= MAX_KNN and on_decimal_grid(x)


def exact_sums(x: np.ndarray, coords: int) -> bool:
    """Whether every squared distance between points of ``coords`` coordinates from
    ``x`` is exact in float64 (:func:`~pyedmcl.edm.row_check.exact_squares`: values on a
    binary grid ``2^-m``, m <= 26, whose squared differences sum below 2^53)."""
    from .row_check import exact_squares

    return exact_squares(np.asarray(x, np.float64), coords, max_exponent=26, bits=53)


def tie_width(coords: int) -> float:
    """The relative gap within which two float64 distances of points of ``coords``
    coordinates may be ordered otherwise by pyEDM: each arithmetic holds a distance
    within ``(coords + 3) u`` of the exact one, so twice both, with a factor 2 to
    spare."""
    return 4.0 * (coords + 4) * 2.0 ** -53


def tied(dist: np.ndarray, idx: np.ndarray, knn: int, coords: int) -> np.ndarray:
    """``(nq,)`` bool: rows of a float64 k-NN table (``knn + 1`` columns at least,
    ascending; -1 / inf where empty) whose knn-th and (knn + 1)-th distances lie within
    :func:`tie_width` of each other. The same test, in the same double arithmetic, as the
    lookup program's ``ties`` kernel."""
    if idx.shape[1] <= knn:
        return np.zeros(idx.shape[0], bool)
    a, b = dist[:, knn - 1], dist[:, knn]
    with np.errstate(invalid="ignore"):
        return (idx[:, knn] >= 0) & (b - a <= tie_width(coords) * b)


def pyedm_columns(E: int, tau: int) -> np.ndarray:
    """Offsets from a kernel point to its coordinates in pyEDM's column order (the
    prediction time's value first, then its lags)."""
    t = abs(tau)
    j = np.arange(E) * t
    return j[::-1].copy() if tau > 0 else j


def simplex_k_query(lib_t: np.ndarray, pred_t: np.ndarray, knn: int, R: int,
                    overlap: bool) -> int:
    """How many points pyEDM's Simplex asks its tree for (``tieBreak``): S-map's count
    (``min(5 knn, |lib|)`` with an active exclusion radius, ``knn + 1`` on an overlap
    of the library and prediction times, else ``knn``), at least ``knn + 1`` where the
    library has more than ``knn``."""
    n_lib = lib_t.size
    kq = knn
    if exclusion_active(lib_t, pred_t, R, overlap):
        kq = min(knn * 5, n_lib)
    elif overlap:
        kq = knn + 1
    if n_lib > knn:
        kq = min(max(kq, knn + 1), n_lib)
    return kq


@dataclass(frozen=True)
class Rule:
    """What pyEDM's selection needs of a call: the series, the library's kernel points
    (ascending), knn, the exclusion radius as the kernels apply it (``|p - l| <= R``
    excluded), pyEDM's ``k_query`` and the coordinates' offsets."""

    x: np.ndarray
    lib: np.ndarray
    knn: int
    R: int
    kq: int
    cols: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray | None, plan: Plan) -> Rule:
        """The rule of ``plan`` over the series ``x`` (None: its counts alone, for the
        device's rule)."""
        lib = np.asarray(plan.lib_points, np.int64)
        kq = simplex_k_query(plan.lib_times, plan.pred_times, plan.knn, plan.exclusion_radius,
                             plan.leave_one_out)
        xs = np.empty(0) if x is None else np.asarray(x, np.float64)
        return cls(xs, lib, plan.knn, plan.exclusion_radius, kq, pyedm_columns(plan.E, plan.tau))

    @property
    def complete(self) -> bool:
        """pyEDM's ``canComplete``: its tree returns fewer points than the library holds,
        so a knn-th candidate at the farthest one returned sends the row to a full scan."""
        return self.kq < self.lib.size

    def states(self, points: np.ndarray) -> np.ndarray:
        """``points``' coordinates in pyEDM's column order (``(..., E)``)."""
        return self.x[np.asarray(points)[..., None] + self.cols]


def decide(rule: Rule, p: np.ndarray, cand: np.ndarray, lo: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pyEDM's knn neighbours of query points ``p`` from candidate library points
    ``cand`` ``(m, P)`` (kernel points in any order, -1 where none; admissible ones, the
    excluded ones are added here) where every other library point lies farther than
    ``lo`` (pyEDM's distance; inf: ``cand`` holds every admissible point). Returns
    ``(neighbours (m, knn), distances, decided (m,))``: kernel points, pyEDM's distances
    (inf and the row's nearest where fewer exist), and whether the candidates settled the
    row (others: :func:`scan_rows`)."""
    m, k1 = cand.shape
    knn = rule.knn
    p = np.asarray(p, np.int64)
    lo = np.asarray(lo, np.float64)
    # the library points the radius excludes: pyEDM's tree returns them too
    lo_i = np.searchsorted(rule.lib, p - rule.R, side="left")
    hi_i = np.searchsorted(rule.lib, p + rule.R, side="right")
    nex = hi_i - lo_i
    ex_w = int(nex.max()) if m else 0
    ex = np.full((m, ex_w), -1, np.int64)
    if ex_w:
        j = np.arange(ex_w)
        have = j[None, :] < nex[:, None]
        ex[have] = rule.lib[np.minimum(lo_i[:, None] + j, rule.lib.size - 1)][have]
    pool = np.concatenate([np.asarray(cand, np.int64), ex], axis=1)
    valid = pool >= 0
    adm = valid.copy()
    adm[:, k1:] = False
    safe = np.where(valid, pool, rule.lib[0])
    diff = rule.states(safe) - rule.states(p)[:, None, :]
    rk = np.where(valid, kdtree_distances(diff), np.inf)
    rr = np.where(valid, row_distances(diff), np.inf)
    prox = np.abs(p[:, None] - safe)
    width = pool.shape[1]

    def first(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kk = np.where(adm, key, np.inf)
        order = np.lexsort((safe, prox, kk), axis=-1)[:, :knn]
        return order, np.take_along_axis(kk, order, 1)

    o_kd, d_kd = first(rk)
    knnth = d_kd[:, -1] if knn <= width else np.full(m, np.inf)
    complete = ~np.isfinite(lo)
    if rule.complete:
        # the farthest point the tree returns: the kq-th of all, excluded ones too
        nv = valid.sum(axis=1)
        kth = (np.sort(rk, axis=1)[:, rule.kq - 1] if rule.kq <= width
               else np.full(m, np.inf))
        known = (rule.kq <= nv) & (kth <= lo)
        # (not known: every point beyond the candidates lies farther than lo, so the
        # farthest returned does too)
        decided = (knnth <= lo) & np.where(known, knnth < kth, True)
        scan = known & ~(knnth < kth)
    else:  # the tree returns every point: deficient rows alone are scanned
        scan = (adm.sum(axis=1) < knn) & complete
        decided = ~scan & (knnth <= lo)
    o_rr, d_rr = first(rr)
    scan_ok = scan & ((d_rr[:, -1] <= lo) | complete)
    order = np.where(scan_ok[:, None], o_rr, o_kd)
    dist = np.where(scan_ok[:, None], d_rr, d_kd)
    nbr = np.take_along_axis(safe, order, 1)
    nbr = np.where(np.isfinite(dist), nbr, nbr[:, :1])  # pyEDM's padding: the nearest
    return nbr, dist, decided | scan_ok


def scan_rows(rule: Rule, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pyEDM's knn neighbours of query points ``p`` from the whole library, on the host
    (:func:`decide` without candidates): kernel points and pyEDM's distances
    ``(m, knn)``."""
    m, knn = p.size, rule.knn
    nbr = np.zeros((m, knn), np.int64)
    dist = np.full((m, knn), np.inf)
    n_lib = rule.lib.size
    step = max(1, _SCAN_ELEMENTS // max(1, n_lib * rule.cols.size))
    lib_states = rule.states(rule.lib)
    for b0 in range(0, m, step):
        pb = np.asarray(p[b0:b0 + step], np.int64)
        diff = lib_states[None, :, :] - rule.states(pb)[:, None, :]
        prox = np.abs(pb[:, None] - rule.lib[None, :])
        adm = prox > rule.R
        rk = kdtree_distances(diff)
        max_ret = (np.partition(rk, rule.kq - 1, axis=1)[:, rule.kq - 1] if rule.complete
                   else None)
        rr = None
        for i in range(pb.size):
            d = np.where(adm[i], rk[i], np.inf)
            sel, ds = _first(d, prox[i], rule.lib, knn)
            scan = (not ds[-1] < max_ret[i]) if rule.complete else not np.isfinite(ds[-1])
            if scan:  # pyEDM's full scan: NumPy's sums
                if rr is None:
                    rr = row_distances(diff)
                sel, ds = _first(np.where(adm[i], rr[i], np.inf), prox[i], rule.lib, knn)
            got = rule.lib[sel]
            nbr[b0 + i] = np.where(np.isfinite(ds), got, got[0])
            dist[b0 + i] = ds
    return nbr, dist


def _first(d: np.ndarray, prox: np.ndarray, lib: np.ndarray, k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` positions of one row by (``d``, ``prox``, ``lib``) and their
    ``d``: the points up to the k-th smallest ``d`` (ties included), then their order."""
    kk = min(k, d.size)
    cut = np.partition(d, kk - 1)[kk - 1]
    near = np.flatnonzero(d <= cut) if np.isfinite(cut) else np.arange(d.size)
    order = near[np.lexsort((lib[near], prox[near], d[near]))][:k]
    return order, d[order]


def weigh(nbr: np.ndarray, dist: np.ndarray, y: np.ndarray, shift: int, variance: bool
          ) -> tuple[np.ndarray, np.ndarray | None]:
    """pyEDM's Simplex projection (``Simplex.Project``) of neighbours ``nbr`` (kernel
    points) at distances ``dist`` ``(m, knn)`` for the targets ``y`` ``(nt, n)`` (library
    point ``l`` predicts ``y[:, l + shift]``): predictions ``(nt, m)`` and variances."""
    finite = np.isfinite(dist)
    mind = np.where(finite, dist, np.inf).min(axis=1)
    mind = np.fmax(np.where(np.isfinite(mind), mind, 1.0), 1e-6)
    with np.errstate(invalid="ignore"):
        w = np.where(finite, np.exp(-np.divide(dist, mind[:, None])), 0.0)
    wsum = np.sum(w, axis=1)
    safe = np.where(wsum > 0, wsum, 1.0)
    vals = np.where(finite[None], y[:, np.clip(nbr + shift, 0, y.shape[1] - 1)], 0.0)
    pred = np.sum(w * vals, axis=2) / safe
    var = np.sum(w * (vals - pred[:, :, None]) ** 2, axis=2) / safe if variance else None
    empty = wsum <= 0
    if empty.any():
        pred[:, empty] = np.nan
        if var is not None:
            var[:, empty] = np.nan
    return pred, var


def pyedm_rows(rule: Rule, plan: Plan, rows: np.ndarray, kth: np.ndarray, groups: Any,
               y: np.ndarray, variance: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Predictions ``(nt, m)`` (and variances) of the tied queries ``rows`` (indices into
    ``plan``'s queries) as pyEDM makes them. ``kth``: their knn-th float64 distances
    (pyedmcl's); ``groups(rows, lim, cap)``: the admissible library points within
    each query's squared limit, ``(points (m, cap), counts)`` (a count above ``cap``:
    cut, asked again with the longest count up to :data:`GROUP_MAX`; None: every row
    scanned on the host).
    Every point within ``kth (1 + 2 w)`` is listed (w = :func:`tie_width`), so every other
    one lies farther than ``kth (1 + w)`` in pyEDM's arithmetic too (than 0 where the tie
    is at 0: equal states, whose differences are exact): the candidates hold the tie and
    all nearer points; a cut list, or one that does not settle the row, goes to
    the host's scan."""
    rows = np.asarray(rows, np.int64)
    w = tie_width(rule.cols.size)
    kth = np.asarray(kth, np.float64)
    p = np.asarray(plan.pred_points, np.int64)[rows]
    if groups is None:  # (no device lists: every row scanned)
        nbr, d = scan_rows(rule, p)
        return weigh(nbr, d, y, plan.offset + plan.Tp, variance)
    lim = (kth * (1.0 + 2.0 * w)) ** 2
    pts, cnt = groups(rows, lim, GROUP_CAP)
    cut = np.flatnonzero(cnt > pts.shape[1])
    again = cut[cnt[cut] <= GROUP_MAX]  # again, with room for the longest of them
    if again.size:
        more, _ = groups(rows[again], lim[again], int(cnt[again].max()))
        pts = np.pad(pts, ((0, 0), (0, more.shape[1] - pts.shape[1])), constant_values=-1)
        pts[again] = more
        cut = cut[cnt[cut] > GROUP_MAX]
    ok = np.ones(rows.size, bool)
    ok[cut] = False
    nbr = np.zeros((rows.size, rule.knn), np.int64)
    d = np.full((rows.size, rule.knn), np.inf)
    # rows by their lists' lengths, in blocks as wide as their longest (a few long lists
    # do not widen every row's candidates)
    by_len = np.argsort(np.where(ok, np.minimum(cnt, pts.shape[1]), 0), kind="stable")
    for b0 in range(0, rows.size, _DECIDE_ROWS):
        sel = by_len[b0:b0 + _DECIDE_ROWS]
        width = max(1, int(np.where(ok[sel], np.minimum(cnt[sel], pts.shape[1]), 0).max()))
        cand = np.where(ok[sel, None], pts[sel, :width], -1)
        nbr[sel], d[sel], dec = decide(rule, p[sel], cand, kth[sel] * (1.0 + w))
        ok[sel] &= dec
    if not ok.all():
        rest = np.flatnonzero(~ok)
        nbr[rest], d[rest] = scan_rows(rule, p[rest])
    return weigh(nbr, d, y, plan.offset + plan.Tp, variance)
