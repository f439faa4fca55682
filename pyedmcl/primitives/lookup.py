"""Simplex lookup (weighted average of neighbours' targets) and on-device skill.

``lookup_device`` turns a device k-NN table into predictions for a batch of
targets; ``skill_device`` reduces Pearson rho / MAE / RMSE per prediction row on
the device, so only a few numbers per row come back when only skill is wanted.
The kernels are the ``lookup`` family's (:mod:`pyedmcl.kernels.lookup`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend

from .._bands import map_slices
from ..kernels.lookup import LOOKUP, ccm_skill_wg, skill_wg
from .knn import DeviceKnn, hold


def lookup_device(be: Backend, table: DeviceKnn, y_dev, ldy: int, nt: int, tshift: int, *,
                  weight: str = "simplex", real: str = "float", variance: bool = False,
                  k: int | None = None) -> tuple[Any, Any]:
    """Predictions ``(nbatch, nt, nq)`` on the device (and variances if asked).

    Library point ``l`` of the table contributes ``y[j, l + tshift]`` to target ``j``
    (``tshift`` = time offset of kernel point 0 plus Tp). ``k``: the neighbours weighed,
    the table's first ``k`` (default all of its ``table.k``).
    """
    k = table.k if k is None else k
    spec, params = _lookup_params(be, k, table.nq * nt * table.nbatch, weight, real)
    if k != table.k:
        spec = {**spec, "KS": table.k}
    dt = np.float64 if real == "double" else np.float32
    pred = be.empty((table.nbatch, nt, table.nq), dt)
    var = be.empty((table.nbatch, nt, table.nq), dt) if variance else pred
    hold(be, pred, var)
    LOOKUP.launch(be, params, {**spec, "VARIANCE": int(variance)}, table.idx, table.dist,
                  table.nq, table.nbatch, y_dev, ldy, nt, tshift, pred, var)
    return pred, (var if variance else None)


def lookup_host(idx: np.ndarray, dist: np.ndarray, y: np.ndarray, shift: int,
                variance: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The lookup kernel's predictions (and pyEDM's variances) ``(nt, nq)`` on the host in
    float64, from a host table ``idx`` / ``dist`` ``(nq, k)`` (-1 / inf where none) and
    targets ``y`` ``(nt, n)``: library point ``l`` predicts ``y[:, l + shift]``; weights
    ``exp(-d / max(d_min, 1e-6))`` over the admissible slots; no neighbour: NaN."""
    ok = idx >= 0
    d = np.where(ok, np.asarray(dist, np.float64), np.inf)
    dmin = np.maximum(np.where(np.isfinite(d[:, :1]), d[:, :1], 1.0), 1e-6)
    w = np.where(ok, np.exp(-d / dmin), 0.0)
    wsum = w.sum(axis=1)
    yk = y[:, np.where(ok, idx + shift, 0)]  # (nt, nq, k)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (w * yk).sum(axis=2) / wsum
        v = (w * (yk - p[:, :, None]) ** 2).sum(axis=2) / wsum if variance else None
    return p, v


#: queries the checked lookup lists for the host (read with the skill, 8 KiB); beyond
#: it the host reads the flags themselves
FLAG_LIST = 2048
#: bytes of the float64 rows (and variances) that the lookup's resolve_rows writes where
#: the resolved predictions of several targets overflow their list (every target of
#: each resolved row, 8 bytes a value): 64 MiB hold 419 rows of 20,000 targets; beyond,
#: the host redoes them after the wait (their float64 k-NN)
RESOLVE_ROWS_BYTES = 64 << 20


def flagged_queries(flags: np.ndarray) -> np.ndarray:
    """Query positions with a flag for any target (``flags`` ``(nbatch, nt, nq)``)."""
    f = np.asarray(flags)
    return np.flatnonzero(f.reshape(-1, f.shape[-1]).any(axis=0))


def resolved_at(cap: int) -> int:
    """Where RESOLVE's list starts in a checked lookup's report (int32 elements: after the
    two counts and the ``cap`` listed queries, rounded up to even so that its doubles are
    8-byte aligned; lookup/_check.mako's report_parts)."""
    return (3 + cap) & ~1


@dataclass
class CheckedLookup:
    """:func:`lookup_checked`'s device arrays: predictions ``(nbatch, nt, nq)`` (and
    variances, else None), the flags (uint8, same shape), and the ``report`` (int32, read
    back in one copy): the count of flagged queries and of predictions redone in the
    lookup (``report[0:2]``), the list of the first ``cap`` flagged queries
    (``report[2:2 + cap]``, :data:`FLAG_LIST` or as many as there are predictions; in no
    order, a query once whatever the targets flagged) and, with ``resolve``, from
    :func:`resolved_at` on the predictions redone in the lookup, 4 doubles a slot
    (query, target, float64 prediction and variance in data units). ``seen`` (several
    targets, else None): int32, the count and list of the first ``cap`` queries resolved
    in the lookup (``seen[0]``, ``seen[1:1 + cap]``), then each query's marks. ``rows``
    (several targets with RESOLVE, else None): the float64 predictions and variances
    (None without) ``(rows_cap, nt)`` of every target of the listed resolved queries,
    and ``rows_cap``, written where the resolved predictions overflow their list."""

    pred: Any
    var: Any
    flag: Any
    report: Any
    cap: int
    resolve: bool = False
    seen: Any = None
    rows: tuple[Any, Any, int] | None = None

    def rows_reader(self, be: Backend) -> Callable[[], np.ndarray]:
        """Enqueue the report's read (behind the queued work, no wait); the function
        returned waits for it and returns the flagged queries, ascending (the flags are
        read only where the list is full). With RESOLVE it also sets :attr:`fixed`
        (:class:`Resolved`: the predictions redone in the lookup)."""
        report = be.to_host_async(self.report)

        def rows() -> np.ndarray:
            got = report()
            c = int(got[0])
            if self.resolve:
                r = int(got[1])
                if r > self.cap:  # more than listed: every such row redone whole
                    return self._whole_rows(be, got[2:2 + c] if c <= self.cap else None)
                at = resolved_at(self.cap)
                self.fixed = Resolved(got[at:at + 8 * r].view(np.float64).reshape(r, 4).copy())
            if c > self.cap:
                return flagged_queries(be.to_host(self.flag) == 1)
            return np.unique(got[2:2 + c]).astype(np.int64)
        return rows

    def _whole_rows(self, be: Backend, listed: np.ndarray | None) -> np.ndarray:
        """Where the resolved predictions overflow their list, every target of each
        flagged row is the float64 call's: :attr:`fixed` takes the resolved rows that the
        lookup's resolve_rows wrote (several targets, as many as it holds; a read of
        theirs), and the rows returned (ascending) are those left to redo after the
        wait: the others flagged (the list ``listed``, None where it was full: from the
        flags), or every row flagged, resolved or not (:attr:`fixed` None): the union of
        the two lists where both hold them all, else from the flags."""
        self.fixed = None
        if self.seen is not None:
            got = be.to_host_async(self.seen, count=1 + self.cap)()
            n = int(got[0])
            if self.rows is not None and n <= self.rows[2]:
                p64, v64, _ = self.rows
                nt = p64.shape[1]
                p = be.to_host_async(p64, count=n * nt)().reshape(n, nt)
                v = None if v64 is None else be.to_host_async(v64, count=n * nt)().reshape(n, nt)
                self.fixed = Resolved(np.empty((0, 4)), got[1:1 + n].astype(np.int64), p, v)
                if listed is None:
                    return flagged_queries(be.to_host(self.flag) == 1)
                return np.unique(listed).astype(np.int64)
            if listed is not None and n <= self.cap:
                return np.union1d(listed, got[1:1 + n]).astype(np.int64)
        return flagged_queries(be.to_host(self.flag))

    fixed: Resolved | None = None


@dataclass
class Resolved:
    """Predictions the checked lookup redid in float64 (RESOLVE), ``(m, 4)``: query,
    target, prediction and variance (NaN without variances) in data units, the values
    of the float64 call; and whole rows: the queries ``rows`` whose every target it redid
    (none: None), their predictions and variances (None without) ``(rows, nt)``."""

    table: np.ndarray
    rows: np.ndarray | None = None
    row_pred: np.ndarray | None = None
    row_var: np.ndarray | None = None

    def shifted(self, q0: int) -> Resolved:
        """The same entries with queries counted from ``q0`` (a block of queries)."""
        t = self.table.copy()
        t[:, 0] += q0
        return Resolved(t, None if self.rows is None else self.rows + q0, self.row_pred,
                        self.row_var)

    @staticmethod
    def joined(parts: list[Resolved]) -> Resolved:
        """The entries and rows of ``parts`` (query blocks) in one."""
        rows = [r for r in parts if r.rows is not None]
        cat = (lambda a: np.concatenate(a)) if rows else (lambda a: None)  # noqa: E731
        var = rows and rows[0].row_var is not None
        return Resolved(np.concatenate([r.table for r in parts]), cat([r.rows for r in rows]),
                        cat([r.row_pred for r in rows]),
                        cat([r.row_var for r in rows]) if var else None)

    def apply(self, pred: np.ndarray, var: np.ndarray | None) -> None:
        """Write the entries into ``pred`` (and ``var``) ``(nt, nq)``, data units."""
        if self.table.size:
            q, j = self.table[:, 0].astype(np.int64), self.table[:, 1].astype(np.int64)
            pred[j, q] = self.table[:, 2]
            if var is not None:
                var[j, q] = self.table[:, 3]
        if self.rows is not None and self.rows.size:  # a large panel by bands of rows
            def band(sl: slice) -> None:
                pred[sl, self.rows] = self.row_pred[:, sl].T
                if var is not None and self.row_var is not None:
                    var[sl, self.rows] = self.row_var[:, sl].T
            map_slices(band, pred)


def lookup_checked(be: Backend, table: DeviceKnn, k: int, y_dev, ldy: int, nt: int,
                   tshift: int, qnorm_dev, units_dev, E: int, *,
                   variance: bool = False, resolve: ResolveInputs | None = None,
                   ties: bool = False) -> CheckedLookup:
    """:func:`lookup_device` for float32 Simplex from the first ``k`` neighbours of
    ``table`` (``table.k`` is ``k`` or ``k + 1``: the extra one tells where float32 may
    pick another ``k``-th), with float32's error bound per prediction (the template's
    CHECK): flags 1 where the bound exceeds ``thr_dev[j]`` (see
    :mod:`pyedmcl._precision`), counted and listed on the device (:class:`CheckedLookup`:
    the host reads count and list with its results, the flags only past the list).
    ``qnorm_dev``: each query point's norm (float32); ``units_dev``: the targets' units
    in one array (ACC; one upload: :meth:`pyedmcl.edm.row_check.RowCheck.device_units`),
    each target's tolerance, then each one's span (max - min), and with ``resolve`` each
    one's shift and scale (double: ``x = z * scale + shift``), ``nt`` values each;
    ``E``: the coordinates per point. ``resolve`` (a table of ``k + 2``, fp64): flagged
    predictions whose float64 neighbours the table holds are redone in the lookup
    (lookup/_resolve.mako) and listed in the :attr:`CheckedLookup.report`, not flagged;
    with several targets the queries are listed once each with their float64 neighbours,
    and resolve_rows follows the lookup (:func:`_resolve_rows`: every target of those
    rows where the predictions overflow their list). ``ties`` (decimal data,
    :mod:`pyedmcl.edm.simplex_ties`): every tie at the ``k``-th place within float32's
    rounding is flagged too, for the float64 call to decide. The counts are zeroed by a launch
    behind the k-NN kernel (no upload: some runtimes hold the host at an upload until the
    kernels queued before it end).
    """
    spec, params = _lookup_params(be, k, table.nq * nt * table.nbatch, "simplex", "float")
    spec = {**spec, "KS": table.k, "CHECK": 1, "VARIANCE": int(variance)}
    pred = be.empty((table.nbatch, nt, table.nq), np.float32)
    var = be.empty((table.nbatch, nt, table.nq), np.float32) if variance else pred
    flag = be.empty((table.nbatch, nt, table.nq), np.uint8)
    cap = min(FLAG_LIST, table.nbatch * nt * table.nq)  # or all
    with be.zero_batch():  # behind the k-NN kernel, no wait (counts and unused slots)
        report = be.zeros(2 + cap if resolve is None else resolved_at(cap) + 8 * cap, np.int32)
        # several targets: each query's marks (listed once) and the resolved queries
        seen = be.zeros(1 + cap + table.nq, np.int32) if nt > 1 else None
    hold(be, pred, var, flag, report, seen, qnorm_dev, units_dev)
    check: tuple = (qnorm_dev, units_dev, E + 4, flag, report, cap,
                    report if seen is None else seen, int(ties))  # (unread for one target)
    recs = None
    if resolve is not None:
        spec = {**spec, "RESOLVE": 1, "E": resolve.E, "TAU": resolve.tau, "FMA": resolve.fma}
        # several targets: each resolved query's float64 neighbours (its rows' weights)
        recs = be.empty((cap, 2 * k + 1), np.float64) if seen is not None else None
        hold(be, recs)
        check += (resolve.x64, resolve.y64, resolve.qpts, resolve.y64 if recs is None else recs)
    LOOKUP.launch(be, params, spec, table.idx, table.dist, table.nq, table.nbatch, y_dev, ldy,
                  nt, tshift, pred, var, check=check)
    rows = None
    if recs is not None and table.nbatch == 1:  # every target of the resolved rows, where
        rows = _resolve_rows(be, params, spec, report, cap, seen, recs, table.nq, nt,  # their
                             resolve.y64, ldy, tshift, units_dev, pred, var, variance)  # list
    return CheckedLookup(pred, var if variance else None, flag, report, cap,  # overflows
                         resolve is not None, seen, rows)


def _resolve_rows(be: Backend, params: dict, spec: dict, report, cap: int, seen, recs, nq: int,
                  nt: int, y64, ldy: int, tshift: int, units, pred, var, variance: bool
                  ) -> tuple[Any, Any, int] | None:
    """The lookup's resolve_rows launched behind it (:meth:`~pyedmcl.kernels.lookup.
    LookupKernel.launch_rows`) into float64 rows of :data:`RESOLVE_ROWS_BYTES` at most:
    ``(p64, v64 or None, rows_cap)``, or None where not one row fits."""
    rows_cap = min(cap, nq, RESOLVE_ROWS_BYTES // (8 * nt * (2 if variance else 1)))
    if rows_cap < 1:
        return None
    p64 = be.empty((rows_cap, nt), np.float64)
    v64 = be.empty((rows_cap, nt), np.float64) if variance else p64
    hold(be, p64, v64)
    LOOKUP.launch_rows(be, params, spec, report, cap, seen, recs, rows_cap, nq, nt, y64, ldy,
                       tshift, units, pred, var, p64, v64)
    return p64, (v64 if variance else None), rows_cap


@dataclass
class ResolveInputs:
    """What the checked lookup's RESOLVE reads (device arrays): the float64 call's series
    ``x64`` and targets ``y64`` (the lookup's ``ldy`` and ``tshift``), the query points
    ``qpts`` of the table's rows, the point shape ``E`` / ``tau`` and the float64 k-NN's
    FMA choice (the targets' units come with the check's, :func:`lookup_checked`)."""

    x64: Any
    y64: Any
    qpts: Any
    E: int
    tau: int
    fma: bool


def _lookup_params(be: Backend, k: int, size: int, weight: str, real: str) -> tuple[dict, dict]:
    spec = {"K": k, "REAL": real, "WEIGHT": weight}
    return spec, LOOKUP.params_for(be, spec, size)


def lookup_requests(be: Backend, k: int, size: int, *, weight: str = "simplex",
                    real: str = "float", variance: bool = False, skill_k: int | None = None,
                    ccm: bool = False) -> list[tuple]:
    """The kernels of :func:`lookup_device` (a table of ``k`` neighbours, ``size`` =
    queries x targets x batches) and, with ``skill_k``, of :func:`skill_device` (its
    ``k`` and ``ccm``), as ``(template, params, name)`` for
    :meth:`clkernels.Backend.prebuild`."""
    spec, params = _lookup_params(be, k, size, weight, real)
    reqs = [LOOKUP.request(be, {**spec, "VARIANCE": int(variance)}, params["WG"], "lookup")]
    if skill_k is not None:
        reqs.append(LOOKUP.request(be, {"K": skill_k, "REAL": real, "FS": int(ccm)},
                                   ccm_skill_wg(be.info) if ccm else skill_wg(be.info),
                                   "skill"))
    return reqs


def skill_out(be: Backend, nrows: int):
    """A device array for ``nrows`` skill rows (rho, MAE, RMSE, count) in ACC precision."""
    out = be.empty((nrows, 4), np.float64 if be.info.fp64 else np.float32)
    hold(be, out)
    return out


def ccm_shifts(y: np.ndarray, obs: np.ndarray, fp64: bool = True,
               rows: np.ndarray | None = None) -> np.ndarray:
    """CCM's shift of each target row of ``y`` (``(nt, n)`` or ``(n,)``, the values the
    kernels read; ``rows``: only these rows of ``y``, in this order): its first finite value
    at the observation times ``obs`` (``obs[q] < 0``: none) in query order, 0 where there is
    none, in the accumulation type (float64, float32 without ``fp64``). Every stream of a
    target's rho reduction is shifted by it (``ccm=True`` in :func:`skill_device`; the
    all-to-all map alike), so the streams' sums add exactly; a value of the target keeps
    the sums small whatever its offset.

    Reads only the columns it needs (one per row without NaN), never a copy of ``y``: the
    all-to-all map asks this of every target of a matrix of 10^7 values and more."""
    y2 = np.atleast_2d(np.asarray(y))
    idx = np.arange(y2.shape[0]) if rows is None else np.asarray(rows)
    t = np.asarray(obs)
    t = t[t >= 0]
    out = np.zeros(idx.size)
    todo = np.arange(idx.size)
    pos, step = 0, 1
    while todo.size and pos < t.size:  # columns in growing chunks, rows still without one
        v = y2[np.ix_(idx[todo], t[pos:pos + step])]
        ok = np.isfinite(v)
        first = ok.argmax(axis=1)
        pick = np.arange(todo.size)
        has = ok[pick, first]
        out[todo[has]] = v[pick, first][has]
        todo = todo[~has]
        pos, step = pos + step, min(4 * step, 4096)
    return out.astype(np.float64 if fp64 else np.float32)


def ccm_shifts_groups(y: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray]],
                      fp64: bool = True) -> list[np.ndarray]:
    """``[ccm_shifts(y, obs, fp64, rows) for obs, rows in groups]`` in one pass: each
    row's value at its group's first observation time, one gather for every group; only
    rows whose value there is not finite look further (:func:`ccm_shifts`). An all-to-all
    map asks this of each of its E-groups (one pass instead of a call each at its
    start)."""
    y2 = np.atleast_2d(np.asarray(y))
    dt = np.float64 if fp64 else np.float32
    rows, cols, sizes = [], [], []
    for obs, idx in groups:
        t = np.asarray(obs)
        t = t[t >= 0]
        idx = np.asarray(idx)
        rows.append(idx)
        cols.append(np.full(idx.size, t[0] if t.size else -1, np.int64))
        sizes.append(idx.size)
    if not rows:
        return []
    r, c = np.concatenate(rows), np.concatenate(cols)
    v = np.zeros(r.size)
    has = c >= 0
    v[has] = y2[r[has], c[has]]
    ok = np.isfinite(v) | ~has  # (no observation: 0, as ccm_shifts)
    out = np.split(v, np.cumsum(sizes)[:-1])
    if not ok.all():  # rows whose first observed value is NaN: the full search
        for g, ((obs, idx), part) in enumerate(zip(groups, np.split(ok, np.cumsum(sizes)[:-1]),
                                                   strict=True)):
            if not part.all():
                bad = np.flatnonzero(~part)
                out[g][bad] = ccm_shifts(y2, obs, True, np.asarray(idx)[bad])
    return [o.astype(dt) for o in out]


def ccm_shifts_device(be: Backend, y: np.ndarray, obs: np.ndarray,
                      rows: np.ndarray | None = None):
    """:func:`ccm_shifts` of ``y`` (``rows``: as there) on the device ``be`` in its
    accumulation type, held there: uploaded once for every skill launch of a job."""
    dev = be.to_device(ccm_shifts(y, obs, be.info.fp64, rows))
    hold(be, dev)
    return dev


def skill_device(be: Backend, pred_dev, nrows: int, nq: int, y_dev, ldy: int, nt: int,
                 obs_dev, *, k: int = 1, real: str = "float", out=None, row0: int = 0,
                 ccm: bool = False, shift: np.ndarray | None = None):
    """``(nrows, 4)`` host array: rho, MAE, RMSE, pair count per prediction row.

    Row ``r`` is compared with target ``r % nt`` at data rows ``obs[q]`` (< 0: none).
    With ``out`` (from :func:`skill_out`) the rows are written to ``out[row0:row0 +
    nrows]`` on the device and nothing is read back (no host sync): callers that
    enqueue several pipelines read ``out`` once at the end. ``ccm``: CCM's reduction
    (:func:`pyedmcl.kernels.lookup.ccm_skill_wg` streams of one shift, as the all-to-all
    map's, so the two agree bit for bit), else Simplex's
    (:func:`pyedmcl.kernels.lookup.skill_wg` streams); ``shift``: with ``ccm``, the
    targets' shifts on the device (:func:`ccm_shifts_device`, ``nt`` values).
    """
    if ccm and (shift is None or shift.size != nt):
        raise ValueError("skill_device(ccm=True) needs the targets' shifts "
                         "(ccm_shifts_device)")
    dst = skill_out(be, nrows) if out is None else out
    hold(be, obs_dev)
    LOOKUP.launch_skill(be, ccm_skill_wg(be.info) if ccm else skill_wg(be.info),
                        {"K": k, "REAL": real, "FS": int(ccm)},
                        pred_dev, nrows, nq, y_dev, ldy, nt, obs_dev, row0, dst,
                        shift=shift if ccm else None)
    if out is not None:
        return None
    return be.to_host(dst).astype(np.float64)
