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
a large call of decimal data (:func:`on_decimal_grid`) whose sample is mostly flagged runs
in float64 from the start (:func:`pyedmcl.edm.simplex.sampled_flag_fraction`).

Cost. The bound is the lookup's own arithmetic on the values it holds (registers, no
second pass); the lookup also counts its flags and lists their queries on the device,
and the caller reads count and list with the skill (the flags themselves only past
:data:`pyedmcl.primitives.lookup.FLAG_LIST`): where nothing is flagged, nothing more is read or
launched. The k-NN table is one neighbour wider (:attr:`RowCheck.widen`), a NEAR table
(knn.cl.mako: the extra entries hold only near-ties of the knn-th, so early abandoning
keeps the narrower table's limit), on GPUs at the tuning of the table it widens
(:func:`.knn.widened_params`), and the query norms are computed on the host while the
k-NN kernel runs. Flagged rows take one float64 k-NN launch (on GPUs the library in lists,
:func:`redo_table`, merged on the device), one lookup, a patch of the float32
predictions and the skill again on the device, behind one wait (:func:`redo_patched`).

Most flagged rows never get there: on a device with fp64 the table of a 1-D series is
two neighbours wider (:attr:`RowCheck.extra`, near-ties only) and the lookup itself
redoes a flagged prediction whose float64 neighbours must lie among the table's first
``knn`` or ``knn + 1`` (the next one clears them by the distances' bound, an empty entry
the table's margin; lookup/_resolve.mako): their distances
and the prediction computed as the float64 kernels compute them, so the value is the
float64 call's bit for bit, listed for the host (:meth:`RowCheck.resolved`). Only the
others (wide ties of decimal data) are counted and redone as above, reading the float64
series the resolve uploaded. A tie at the knn-th place flags its query for every target
(the span term): with several targets the lookup lists a flagged query once, and each
query it resolved once with its float64 neighbours. Where the resolved predictions
overflow their list, every target of a flagged row is the float64 call's: the lookup's
resolve_rows weighs every target of the resolved rows before the skill (1 source x
20,000 targets: 182 rows, no float64 k-NN and no second skill), the other flagged rows
are redone after the wait, and the rows come from the two lists, not from the flags of
every prediction (20 MB there). On Mackey-Glass
(L = 10^5, E = 7, tau = 2; L = 5 x 10^4, E = 12, tau = 3) all 63 / 21 flagged rows
resolve in the lookup, so no float64 k-NN runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from clkernels import Backend

from .._extremes import has_nan
from ..primitives.ranges import MAX_KNN, Plan

#: largest first-order float32 error bound a prediction may have, as a fraction of its
#: target's standard deviation; beyond it the prediction is recomputed in float64.
#: Ordinary data stay far below (median error 3e-8 of the deviation): the flagged rows
#: are those of near-repeating states, dense one-dimensional libraries and the distance
#: ties of decimal data.
PREDICTION_TOL = 1e-5

#: decimal places up to which data count as decimal (:func:`on_decimal_grid`): recorded
#: data with few places tie often; finer grids rarely
DECIMAL_PLACES = 4


#: window lengths up to which :func:`point_norms` sums a run of points' squares slice by
#: slice (E vectorised additions: faster and free of cancellation); beyond, running sums
SLICE_SUM_MAX_E = 64


def point_norms(sq: np.ndarray, points: np.ndarray, E: int, tau: int) -> np.ndarray:
    """Euclidean norm of each delay vector (lags ``p, p + |tau|, ..., p + (E-1)|tau|``)
    from ``sq``, each time step's squared coordinates (summed over a state space's
    columns). A run of consecutive points with E <= :data:`SLICE_SUM_MAX_E` adds E
    shifted slices; otherwise running sums along each residue class mod ``|tau|``
    (O(n), not O(n E)), whose cancellation error, below 1e-15 of the total, is far
    inside the bound's factor of two."""
    t = abs(tau)
    sq = np.asarray(sq, np.float64)
    p = np.asarray(points)
    if p.size and int(p[-1]) - int(p[0]) == p.size - 1 and E <= SLICE_SUM_MAX_E:
        a, b = int(p[0]), int(p[-1]) + 1
        d = sq[a:b].copy()
        for k in range(1, E):
            d += sq[a + k * t:b + k * t]
        return np.sqrt(d, out=d)  # in place: no second array of the queries' size
    p = p.astype(np.int64)
    if t == 1:
        c = np.empty(sq.size + 1)
        c[0] = 0.0
        np.cumsum(sq, out=c[1:])
        d = c[p + E] - c[p]
    else:
        rows = -(-sq.size // t)
        c = np.zeros((rows + 1, t))
        c[1:].reshape(-1)[:sq.size] = sq
        np.cumsum(c, axis=0, out=c)
        r, i = p % t, p // t
        d = c[i + E, r] - c[i, r]
    return np.sqrt(np.maximum(d, 0.0, out=d), out=d)


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
    _units: Any = field(default=None, repr=False, compare=False)
    #: the enqueued float64 redo's inputs (:mod:`.row_redo`; None: redo after the wait)
    redo: Any = field(default=None, repr=False, compare=False)
    #: the redo the first pass enqueued (:class:`.row_redo.EnqueuedRedo`), if any
    enqueued: Any = field(default=None, repr=False, compare=False)
    #: whether the lookup redoes flagged predictions itself where its table (two
    #: neighbours wider) holds their float64 neighbours (lookup/_resolve.mako): set by
    #: the caller for a 1-D series of host arrays on a device with fp64
    resolve: bool = False
    #: the checked lookups of the pass, with their first query (their redone lists)
    checked: list = field(default_factory=list, repr=False, compare=False)
    #: the float64 series and targets on the device where the lookup's resolve uploaded
    #: them (the redo after the wait reads them too), else None
    float64: Any = field(default=None, repr=False, compare=False)
    #: several targets' std and max - min where the caller measured them already (the
    #: standardisation's std and the validation's extremes of the targets as given, the
    #: centred ones' within rounding), else None: :attr:`_spreads` then takes no pass
    known_spreads: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False,
                                                                 compare=False)
    #: whether every tie at the knn-th place is flagged (decimal data, whose float64 ties
    #: pyEDM's rule decides: :mod:`.simplex_ties`), set by the caller
    ties: bool = False

    @property
    def E(self) -> int:
        """Coordinates per point (lags x columns)."""
        return self.plan.E * (1 if self.xz.ndim == 1 else self.xz.shape[1])

    @property
    def widen(self) -> bool:
        """Whether the k-NN table holds one neighbour more than knn (the next one): where
        the fused kernel keeps it and the library has it."""
        return self.plan.knn < min(MAX_KNN, self.plan.lib_points.size)

    @property
    def extra(self) -> int:
        """Neighbours the k-NN table holds beyond knn: two where the lookup resolves
        (:attr:`resolve`) and the library has them, one where it widens, else none."""
        if self.resolve and self.plan.knn + 2 <= min(MAX_KNN, self.plan.lib_points.size):
            return 2
        return 1 if self.widen else 0

    def resolved(self) -> Any:
        """The predictions the pass's lookups redid (:class:`~pyedmcl.primitives.lookup.Resolved`,
        queries of the whole plan), or None."""
        from ..primitives.lookup import Resolved

        got = [c.fixed.shifted(q0) for q0, c in self.checked if c.fixed is not None]
        return Resolved.joined(got) if got else None

    @cached_property
    def qnorm(self) -> np.ndarray:
        """``(nq,)`` float32: the query points' norms in the kernel's units."""
        z = np.asarray(self.xz, np.float64)
        sq = z * z if z.ndim == 1 else (z * z).sum(axis=1)
        p = self.plan
        return point_norms(sq, p.pred_points, p.E, p.tau).astype(np.float32)

    @cached_property
    def thr(self) -> np.ndarray:
        """``(nt,)``: each target's tolerance in the kernel's units. Targets without NaN
        (every 1-D call) take ``np.std``: numpy's ``nanstd`` of such rows is its ``std``
        of them, the same sum, deviations, sum and root of the same values, after a
        NaN-masked copy that changes none of them (a third of the time here). Several
        targets: :attr:`_spreads`."""
        yz = self.yz
        if yz.shape[0] > 1:
            return PREDICTION_TOL * self._spreads[0]
        return PREDICTION_TOL * (np.nanstd(yz, axis=1) if has_nan(yz) else np.std(yz, axis=1))

    @cached_property
    def span(self) -> np.ndarray:
        """``(nt,)``: each target's max - min (what a neighbour swapped at the k-th place
        can move a prediction by, times its weight)."""
        if self.yz.shape[0] > 1:
            return self._spreads[1]
        return np.nanmax(self.yz, axis=1) - np.nanmin(self.yz, axis=1)

    @cached_property
    def _spreads(self) -> tuple[np.ndarray, np.ndarray]:
        """Several targets' ``nanstd`` and ``nanmax - nanmin`` (``axis=1``), the values of
        :attr:`thr`'s and :attr:`span`'s one-target reductions: by chunks of rows in cache
        and on threads (:func:`pyedmcl._precision.row_spread`), those of NaN-free rows as
        ``std`` and ``max - min`` (the same values), the others as the NaN-aware ones."""
        from .._precision import row_spread

        yz = self.yz
        if self.known_spreads is not None and np.isfinite(self.known_spreads).all():
            return self.known_spreads
        std, lo, hi = row_spread(yz)
        gaps = np.flatnonzero(np.isnan(lo))  # (a row's min is NaN where it holds one)
        if gaps.size:
            part = yz[gaps]
            std[gaps] = np.nanstd(part, axis=1)
            lo[gaps], hi[gaps] = np.nanmin(part, axis=1), np.nanmax(part, axis=1)
        return std, hi - lo

    def device_units(self, be: Backend, resolve: tuple[Any, Any] | None = None) -> Any:
        """The targets' units the checked lookup reads, on ``be``'s device in its
        accumulation precision, one array (one upload per check, at the first query
        block): ``thr``, then ``span``, and with ``resolve`` (each target's shift and
        scale, data units = kernel units * scale + shift) those, ``nt`` values each."""
        if self._units is None:
            acc = np.float64 if be.info.fp64 else np.float32
            parts = [self.thr, self.span]
            if resolve is not None:
                parts += [np.asarray(v, np.float64).reshape(-1) for v in resolve]
            # (a temporary of its own: no private copy)
            self._units = be.to_device_aside(np.concatenate(parts).astype(acc), copy=False)
        return self._units


def exact_in_float32(z: np.ndarray, coords: int) -> bool:
    """Whether every float32 squared distance between points of ``coords`` coordinates
    from ``z`` is exact: values on a binary grid ``2^-m`` (m <= 12; integers are m = 0,
    and centring keeps such values on their grid, :func:`pyedmcl._precision.prepare`)
    whose squared differences, in grid steps, sum below 2^24. Then float32 orders
    neighbours as float64 does, ties included, and only the square root rounds (weights
    within 3e-6). See :func:`exact_squares`."""
    return exact_squares(z, coords, max_exponent=12, bits=24)


def exact_squares(z: np.ndarray, coords: int, *, max_exponent: int, bits: int) -> bool:
    """Whether every squared distance between points of ``coords`` coordinates from
    ``z`` is exact in a float of ``bits`` significand bits: values on a binary grid
    ``2^-m`` (``m <= max_exponent``) whose squared differences, in grid steps, sum below
    ``2^bits``. The grid is found on a prefix (:func:`grid_exponent`), then checked on all
    values; the range test grows with ``m``, so it is taken at that grid alone. Data off
    every such grid (most real data) are told by the prefix alone, before any pass over
    all values."""
    if z.size == 0:
        return False
    head = np.ravel(z)[:1024]
    if not np.isfinite(head).all():  # (not finite: not exact, whatever the rest)
        return False
    # a grid is one for all values: off every grid on a few, off it on all (most data)
    if grid_exponent(head[:_FEW]) > max_exponent:
        return False
    m = grid_exponent(head)
    if m > max_exponent:
        return False
    lo, hi = float(np.min(z)), float(np.max(z))
    if not (np.isfinite(lo) and np.isfinite(hi)):  # (min and max carry a NaN)
        return False
    step = 2.0 ** m
    if coords * ((hi - lo) * step) ** 2 >= 2.0 ** bits:
        return False
    g = z * step
    return bool(np.all(g == np.round(g)))


def grid_exponent(v: np.ndarray) -> int:
    """The least ``m >= 0`` for which every value of ``v`` (finite, non-empty) times
    ``2^m`` is an integer (up to 1075 for the smallest subnormals): from each value's
    lowest set bit, ``v = M 2^(e - 53)`` with ``M`` an integer below 2^53."""
    mant, ex = np.frexp(np.asarray(v, np.float64))
    M = (mant * 2.0 ** 53).astype(np.int64)
    low = (M & -M).astype(np.float64)  # the lowest set bit of |M| (0 where v is 0)
    tz = np.frexp(low)[1] - 1
    need = np.where(M == 0, 0, 53 - ex.astype(np.int64) - tz)
    return max(0, int(need.max()))


def on_decimal_grid(x: np.ndarray, places: int = DECIMAL_PLACES) -> bool:
    """Whether the values of ``x`` (data units, not centred) are decimals of at most
    ``places`` places, judged on a prefix of 1024 values: the data whose distances tie
    in exact arithmetic, where float32 may flag most rows. Only they are worth a sample
    before the float32 pass (:func:`pyedmcl.edm.simplex.sampled_flag_fraction`); a
    wrong answer costs time, never exactness."""
    head = np.asarray(x, np.float64).ravel()[:1024]
    if head.size == 0 or not np.all(np.isfinite(head)):
        return False
    # a number of places that fails on a few values fails on all: most data need no more
    if not _places_held(head[:_FEW], places).any():
        return False
    return bool(_places_held(head, places).any())


#: values of a prefix tested first (:func:`on_decimal_grid`, :func:`exact_in_float32`)
_FEW = 16


def _places_held(v: np.ndarray, places: int) -> np.ndarray:
    """``(places + 1,)`` bool: whether every value of ``v`` is a decimal of ``m`` places,
    each ``m`` at once (row ``m`` holds the values times ``10^m``)."""
    g = v * np.array([10.0 ** m for m in range(places + 1)])[:, None]
    near = np.abs(g - np.round(g)) <= 1e-9 * np.maximum(1.0, np.abs(g))
    return near.all(axis=1)


def row_check(plan: Plan, xz: np.ndarray, yz: np.ndarray, exact: bool,
              spreads: tuple[np.ndarray, np.ndarray] | None = None) -> RowCheck | None:
    """The check for a float32 Simplex of centred ``xz`` ((n,) or (n, columns)) and
    targets ``yz`` ``(nt, n)``; None where the neighbours are not the exact kernel's (an
    approximate back-end) or float32's distances are exact (:func:`exact_in_float32`).
    ``spreads``: the targets' std and max - min where the caller has them
    (:attr:`RowCheck.known_spreads`)."""
    if not exact or not _ENABLED[-1]:
        return None
    check = RowCheck(plan, xz, yz, known_spreads=spreads)
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


def redo_float64(be: Backend, plan: Plan, x: np.ndarray, y: np.ndarray, rows: np.ndarray,
                 neighbors: Any, variance: bool, l_dev: Any = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """float64 predictions ``(nt, rows.size)`` (and variances) of the queries ``rows`` of
    ``plan`` from the original series ``x`` and targets ``y`` ``(nt, n)``: the float64
    call's kernels through ``neighbors`` (its k-NN back-end), or on a device without fp64
    the host's k-d tree (the exact kernel's table) and :func:`.lookup.lookup_host`.
    ``l_dev``: the plan's library points already on the device (no upload)."""
    from ..primitives.lookup import lookup_host

    if not be.info.fp64:
        from ..neighbors import neighbor_backend

        kw = dict(E=plan.E, tau=plan.tau, k=plan.knn, qpts=plan.pred_points[rows],
                  lpts=plan.lib_points, radius=plan.exclusion_radius)
        idx, dist = neighbor_backend("kdtree").search_host(np.asarray(x, np.float64), **kw)
        return lookup_host(idx[0], dist[0], y, plan.offset + plan.Tp, variance)
    for lists in (True, False):
        p, v, tie = _redo_device(be, plan, x, y, rows, neighbors, variance, l_dev, lists)
        reads = [be.to_host_async(p)] + ([be.to_host_async(v)] if variance else [])
        if tie is not None and int(be.to_host(tie)[0]):
            continue  # the lists' order unreadable: the single launch
        got = [r()[0] for r in reads]
        return got[0], (got[1] if variance else None)
    raise AssertionError("unreachable: the single launch sets no tie")


def redo_patched(be: Backend, plan: Plan, x: np.ndarray, y: np.ndarray, rows: np.ndarray,
                 neighbors: Any, variance: bool, l_dev: Any, pred_dev: Any, var_dev: Any,
                 shift: np.ndarray, scale: np.ndarray, skill: Any, lists: bool = True,
                 series: tuple[Any, Any] | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`redo_float64` on a device with fp64, its values also written into the
    float32 device predictions ``pred_dev`` (and variances ``var_dev``) ``(1, nt, nq)``
    in their units (``x = z * scale + shift`` per target) and the skill taken again
    behind them (``skill(pred_dev)`` enqueues it and returns its device rows): one
    k-NN launch, a merge of its lists on the device, one lookup, one patch, one skill
    and one wait for all (where the merge found equal distances, all again from the
    single launch, ``lists`` False). Returns the float64 predictions and variances
    ``(nt, rows.size)`` and the skill ``(nt, 4)``. ``series``: ``x`` and ``y`` in
    float64 on the device already (the lookup's resolve uploaded them), else None."""
    from ..kernels.lookup import LOOKUP
    from ..primitives.knn import hold

    p, v, tie = _redo_device(be, plan, x, y, rows, neighbors, variance, l_dev, lists, series)
    rows_dev = be.to_device(np.ascontiguousarray(rows, np.int32))
    sh = be.to_device(np.asarray(shift, np.float64))
    sc = be.to_device(np.asarray(scale, np.float64))
    hold(be, rows_dev, sh, sc)
    LOOKUP.launch_patch(be, "float", pred_dev, var_dev, plan.pred_points.size, y.shape[0],
                        rows_dev, rows.size, p, v if variance else None, sh, sc)
    out = skill(pred_dev)
    reads = [be.to_host_async(p)] + ([be.to_host_async(v)] if variance else [])
    tie_read = None if tie is None else be.to_host_async(tie)
    sk = be.to_host(out).astype(np.float64)
    if tie_read is not None and int(tie_read()[0]):
        return redo_patched(be, plan, x, y, rows, neighbors, variance, l_dev, pred_dev,
                            var_dev, shift, scale, skill, lists=False, series=series)
    got = [r()[0] for r in reads]
    return got[0], (got[1] if variance else None), sk


def _redo_device(be: Backend, plan: Plan, x: np.ndarray, y: np.ndarray, rows: np.ndarray,
                 neighbors: Any, variance: bool, l_dev: Any, lists: bool = True,
                 series: tuple[Any, Any] | None = None) -> tuple[Any, Any, Any]:
    """The float64 call's k-NN table and lookup of the queries ``rows`` enqueued: device
    predictions (and variances) ``(1, nt, rows.size)`` and the merge's tie flag (int32
    ``(1,)``, None where the table is the single launch's; see :func:`redo_table`).
    ``series``: ``x`` and ``y`` in float64 on the device (no upload), else None."""
    from ..primitives.lookup import lookup_device

    kw = dict(E=plan.E, tau=plan.tau, k=plan.knn, qpts=plan.pred_points[rows],
              lpts=plan.lib_points, radius=plan.exclusion_radius)
    if series is not None:
        xd, yd = series
    else:
        xd = be.to_device(np.ascontiguousarray(x, np.float64))
        same = (y.shape == (1, x.size) and y.dtype == x.dtype  # x predicts itself
                and y[0].ctypes.data == x.ctypes.data and y.strides[-1] == x.strides[0])
        yd = xd if same else be.to_device(np.ascontiguousarray(y, np.float64))
    table, tie = redo_table(be, neighbors, xd, x.size, kw, l_dev, lists)
    p, v = lookup_device(be, table, yd, x.size, y.shape[0], plan.offset + plan.Tp,
                         real="double", variance=variance)
    return p, v, tie


#: library points per list, at least, where the float64 redo splits the library
REDO_CHUNK = 4096
#: lists at most, and queries x lists at most, of that split
REDO_LISTS, REDO_QUERY_LISTS = 64, 8192
#: whether CPUs split it too: there the single launch was faster (2-core EPYC, Intel's
#: runtime, L = 20,000, 5 queries: 0.82 ms, in 4 lists merged 1.24 ms), since a CPU's
#: few cores are busy with few queries already
REDO_LISTS_ON_CPU = False


def redo_table(be: Backend, neighbors: Any, xd: Any, n: int, kw: dict, l_dev: Any,
               lists: bool = True) -> tuple[Any, Any]:
    """The float64 k-NN table of the redo's few queries (``kw``: :func:`knn_device`'s
    arguments, float64 series ``xd``) and a tie flag. Few queries leave a device nearly
    idle while each work-group walks the whole library, so the exact device kernel takes
    the library in up to :data:`REDO_LISTS` contiguous lists at once (one launch, a
    table per list), merged on the device in the kernel's order (the lookup template's
    ``merge_lists``, :func:`merge_tables` on the host): the table of the single launch
    (on GPUs; CPUs see :data:`REDO_LISTS_ON_CPU`), unless the merge finds equal
    distances among a query's first ``k + 1``, where it sets the flag (int32 ``(1,)`` on
    the device, read with the results) and the caller takes the single launch
    (``lists`` False). The single launch also where the back-end is not the device
    kernel; its flag is None."""
    from ..kernels.lookup import LOOKUP
    from ..neighbors.exact import ExactBackend
    from ..primitives.knn import DeviceKnn, hold

    lp = np.asarray(kw["lpts"])
    qp = np.ascontiguousarray(kw["qpts"], np.int32)
    m, k = int(qp.size), int(kw["k"])
    nl = min(REDO_LISTS, lp.size // REDO_CHUNK, REDO_QUERY_LISTS // max(m, 1))
    if (lists and nl >= 2 and type(neighbors) is ExactBackend
            and (be.info.is_gpu or REDO_LISTS_ON_CPU)):
        size = -(-lp.size // nl)
        starts = np.minimum(np.arange(nl) * size, lp.size - size)  # the last overlaps
        split = lp[starts[:, None] + np.arange(size)]
        q_dev = be.to_device(qp)
        t = neighbors.device_table(be, xd, n, real="double", q_dev=q_dev,
                                   **{**kw, "lpts": split})
        oidx, odist = be.empty((1, m, k), np.int32), be.empty((1, m, k), np.float64)
        tie = be.to_device(np.zeros(1, np.int32))
        LOOKUP.launch_merge(be, t.idx, t.dist, nl, m, k, k, q_dev, oidx, odist, tie)
        hold(be, t.idx, t.dist, q_dev, oidx, odist, tie)
        return DeviceKnn(oidx, odist, 1, m, k), tie
    return neighbors.device_table(be, xd, n, real="double", l_dev=l_dev, **kw), None


def merge_tables(idx: np.ndarray, dist: np.ndarray, qpts: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """The host's reference of the device merge (:func:`redo_table`): one table
    ``(nq, k)`` from the tables ``(lists, nq, k)`` of disjoint (or repeated) library lists: each query's candidates in the kernel's order (distance,
    ``|p - l|``, ``l``; -1 / inf where none), a point listed twice taken once. The
    kernel ranks by the squared distance and stores its root, which may round two
    squares to one root: where two of a query's first ``k + 1`` candidates share a
    distance, the order cannot be read here, and None is returned."""
    lists, nq, _ = idx.shape
    ci = idx.transpose(1, 0, 2).reshape(nq, -1).astype(np.int64)
    cd = dist.transpose(1, 0, 2).reshape(nq, -1)
    none = ci < 0
    big = np.iinfo(np.int64).max
    d = np.where(none, np.inf, cd)
    key = np.where(none, big, np.abs(qpts[:, None].astype(np.int64) - ci))
    li = np.where(none, big, ci)
    order = np.lexsort((li, key, d), axis=-1)
    ci, d = np.take_along_axis(li, order, 1), np.take_along_axis(d, order, 1)
    dup = np.zeros_like(none)
    dup[:, 1:] = (ci[:, 1:] == ci[:, :-1]) & (ci[:, 1:] != big)  # a point listed twice
    rank = np.cumsum(~dup, axis=1) - 1
    keep = ~dup & (rank <= k)  # the first k + 1 distinct candidates
    r, c = np.nonzero(keep)
    top_i = np.full((nq, k + 1), -1, np.int64)
    top_d = np.full((nq, k + 1), np.inf)
    top_i[r, rank[r, c]] = np.where(ci[r, c] == big, -1, ci[r, c])
    top_d[r, rank[r, c]] = d[r, c]
    fin = np.isfinite(top_d)
    if np.any((top_d[:, 1:] == top_d[:, :-1]) & fin[:, 1:]):
        return None
    return top_i[:, :k].astype(np.int32), top_d[:, :k].astype(dist.dtype)
