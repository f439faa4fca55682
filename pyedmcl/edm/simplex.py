"""Simplex projection (Sugihara & May 1990) with pyEDM's semantics on OpenCL.

Pipeline of small named steps around the k-NN table: resolve rows
(:mod:`.ranges`) -> fused k-NN kernel (:mod:`.knn`) -> lookup (weights, batched
targets) -> skill reduced on the device (:mod:`.lookup`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, run_blocked
from clkernels.arrays import affine_rows, gather
from clkernels.memory import is_oom
from clkernels.recording import Recorder

from .._bands import map_slices
from .._deprecation import renamed_keywords
from .._extremes import extremes, row_extremes
from .._precision import Affine, Prepared, prepare
from ..constant_series import checks_constant
from ..interop import backend_for, device_series, is_device_array, output, to_backend
from ..neighbors import resolve_backend
from ..primitives.knn import hold, knn_device, widened_params
from ..primitives.lookup import lookup_checked, lookup_device, skill_device, skill_out
from ..primitives.ranges import MAX_KNN, Plan, resolve
from ..validation import MAX_MAGNITUDE, as_series, check_dtype
from . import row_redo, simplex_ties
from .results import SimplexResult
from .row_check import RowCheck, enabled, on_decimal_grid, redo_float64, redo_patched, row_check
from .simplex_states import simplex_states
from .statespace import beyond_fused_knn, is_multivariate, requested_knn, state_space


def as_targets(target: Any, n: int) -> tuple[np.ndarray, bool]:
    """``(n_targets, n)`` float64 array of target series and whether input was 1-D."""
    if hasattr(target, "to_numpy"):
        target = target.to_numpy()
    arr = np.asarray(target)
    if arr.ndim == 2 and arr.shape[1] != n and arr.shape[0] == n:
        arr = arr.T
    if arr.ndim == 1:
        s = as_series(arr, "target")
        if s.size != n:
            raise ValueError(f"target has {s.size} values but x has {n}; they must be equally long")
        return s[None, :], True
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ValueError(f"target must be 1-D of length {n} or 2-D (n_targets, {n}), got {arr.shape}")
    return as_target_rows(arr), False


def as_target_rows(arr: np.ndarray) -> np.ndarray:
    """The rows of the 2-D ``arr`` as a C-contiguous float64 array (``arr`` itself where
    it is one: as :func:`~pyedmcl.validation.as_series` takes a 1-D target, the call
    reads it and changes nothing), each row checked as ``as_series`` checks ``target[i]``
    (real numbers, finite, within the magnitude limit), with its errors, by row-wise
    reductions (:func:`~pyedmcl._extremes.row_extremes`, which the constant-series check
    took already): a map of 20,000 targets spent 0.4 s of host time validating them one
    row at a time."""
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"target must hold real numbers, got dtype {arr.dtype}")
    if arr.shape[0] == 0:
        raise ValueError(f"target holds no series (shape {arr.shape}); pass at least one "
                         "row of targets, or none to predict x itself")
    out = np.asarray(arr, dtype=np.float64, order="C")
    lo, hi = row_extremes(out)
    bad = ~(np.isfinite(lo) & np.isfinite(hi)) | (np.maximum(hi, -lo) > MAX_MAGNITUDE)
    for i in np.flatnonzero(bad)[:1]:  # the first offending row: as_series' own error
        as_series(out[i], f"target[{i}]")
    return out


@dataclass
class DeviceData:
    """A library series and its targets uploaded once (reused across E, Tp, radius)."""

    be: Backend
    real: str
    n: int
    x_dev: Any
    y_dev: Any
    y_host: np.ndarray | None  # (nt, n) float64; None when the targets came as device arrays
    n_targets: int | None = None  # set when y_host is None

    @classmethod
    def upload(cls, be: Backend, x: np.ndarray, y: np.ndarray, dt: np.dtype,
               casts: tuple[np.ndarray, np.ndarray] | None = None) -> DeviceData:
        """``x`` and ``y`` on ``be``'s device in ``dt`` (``casts``: the two already cast
        to ``dt``, else cast here)."""
        real = "double" if dt == np.float64 else "float"
        xc, yc = casts if casts is not None else (None, None)
        # (a temporary, or the call's cast, unchanged: no second copy)
        xd = be.to_device(x.astype(dt) if xc is None else xc, copy=False)
        same = y.shape[0] == 1 and (_same_memory(y[0], x) or np.array_equal(y[0], x))
        yd = xd if same else be.to_device(
            np.ascontiguousarray(y, dtype=dt) if yc is None else yc)
        hold(be, xd, yd)
        return cls(be, real, x.size, xd, yd, y)

    @property
    def nt(self) -> int:
        return self.n_targets if self.y_host is None else self.y_host.shape[0]


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` are the same values in the same memory (a cheap identity test)."""
    return (a.shape == b.shape and a.dtype == b.dtype and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def plan_arrays(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int32 point lists a plan's launches read: query points, library points, obs rows."""
    return plan.pred_points, plan.lib_points, plan.observed_rows  # cached on the plan


#: device copies of recent plans' point lists, per backend: a plan is immutable and
#: cached (:func:`.ranges.resolve`), so a repeated call uploads only its series, not its
#: three point lists. Bounded in bytes.
PLAN_UPLOAD_BYTES = 64 << 20
_plan_uploads: OrderedDict[tuple[int, int], tuple[Plan, Backend, tuple]] = OrderedDict()
_uploads_lock = threading.Lock()


def plan_device(be: Backend, plan: Plan) -> tuple[Any, Any, Any]:
    """``plan_arrays(plan)`` on ``be``'s device (query points, library points, obs rows)."""
    key = (id(plan), id(be))
    with _uploads_lock:
        hit = _plan_uploads.get(key)
        if hit is not None:  # the entry holds plan and be, so their ids are not reused
            _plan_uploads.move_to_end(key)
            return hit[2]
    arrays = tuple(be.to_device(a) for a in plan_arrays(plan))
    hold(be, *arrays)
    with _uploads_lock:
        _plan_uploads[key] = (plan, be, arrays)
        total = sum(_upload_bytes(p) for p, _, _ in _plan_uploads.values())
        while total > PLAN_UPLOAD_BYTES and len(_plan_uploads) > 1:
            total -= _upload_bytes(_plan_uploads.popitem(last=False)[1][0])
    return arrays


def _upload_bytes(plan: Plan) -> int:
    return sum(a.nbytes for a in plan_arrays(plan))


def enqueue_plan(data: DeviceData, plan: Plan, q_dev, l_dev, obs_dev, out, row0: int) -> None:
    """Enqueue k-NN + lookup + skill for ``plan`` with its point lists already on the
    device; skill rows land in ``out[row0:row0 + nt]``. No upload, no host sync."""
    be = data.be
    table = knn_device(be, data.x_dev, data.n, E=plan.E, tau=plan.tau, k=plan.knn,
                       qpts=plan.pred_points, lpts=plan.lib_points, radius=plan.exclusion_radius,
                       real=data.real, q_dev=q_dev, l_dev=l_dev)
    pred_dev, _ = lookup_device(be, table, data.y_dev, data.n, data.nt, plan.offset + plan.Tp,
                                real=data.real)
    skill_device(be, pred_dev, data.nt, plan.pred_times.size, data.y_dev, data.n, data.nt,
                 obs_dev, real=data.real, out=out, row0=row0)


#: whether float32 Simplex redoes flagged predictions in its lookup where the table holds
#: their float64 neighbours (:attr:`.row_check.RowCheck.resolve`)
RESOLVE_IN_LOOKUP = True


def _resolve_inputs(be, plan: Plan, check: RowCheck) -> Callable | None:
    """For a checked lookup that resolves (:attr:`.row_check.RowCheck.resolve`), the
    function of a query block ``(q0, q1, q_dev)`` giving its
    :class:`~pyedmcl.primitives.lookup.ResolveInputs` (the float64 series, targets and
    units uploaded once, beside the k-NN kernel); None without the redo's inputs."""
    from .._fma import job_fma
    from ..primitives.lookup import ResolveInputs

    redo = check.redo
    if redo is None:
        return None
    up: list = []  # uploaded at the first block's lookup, while its k-NN kernel runs

    def inputs(q0: int, q1: int, q_dev) -> ResolveInputs | None:
        if not up:
            x, y = redo.x, redo.y
            try:
                x64 = be.to_device_aside(np.ascontiguousarray(x, np.float64), copy=False)
                same = (y.shape == (1, x.size) and y.dtype == x.dtype  # x predicts itself
                        and y[0].ctypes.data == x.ctypes.data and y.strides[-1] == x.strides[0])
                y64 = x64 if same else be.to_device_aside(np.ascontiguousarray(y, np.float64),
                                                          copy=False)
            except Exception as exc:  # the float64 copies do not fit: flagged rows as before
                if not is_oom(exc):
                    raise
                up.append(None)
                return None
            hold(be, x64, y64)
            up.extend((x64, y64, bool(job_fma([be.info]))))
            check.float64 = (x64, y64)  # (the redo after the wait reads them too)
        if up[0] is None:
            return None
        x64, y64, fma = up
        if q_dev is None:  # a block of queries: its points
            q_dev = be.to_device_aside(np.ascontiguousarray(plan.pred_points[q0:q1], np.int32))
            hold(be, q_dev)
        return ResolveInputs(x64, y64, q_dev, plan.E, abs(plan.tau), fma)
    return inputs


def run_plan(data: DeviceData, plan: Plan, *, predictions: bool = True, variance: bool = False,
             weight: str = "simplex", neighbors=None, keep_device: bool = False,
             while_busy: Callable[[], None] | None = None, check: RowCheck | None = None,
             device_out: list | None = None, launched: Callable[[], None] | None = None,
             tie_rows: list | None = None):
    """k-NN + lookup + skill for one resolved plan. Returns (pred, var, skill (nt, 4),
    rows).

    ``pred``/``var`` are host arrays ``(nt, nq)`` when ``predictions`` (else None);
    with ``keep_device`` they are the device arrays ``(1, nt, nq)`` (no read back).
    ``while_busy`` runs on the host once every kernel and the large reads are
    enqueued, before the first wait for the device (host work that then overlaps the
    kernels). ``check`` (float32 Simplex): the lookup also bounds each prediction's
    float32 error, and ``rows`` are the queries of those beyond the tolerance
    (:mod:`.row_check`; their count and list come back with the skill); else None. Where
    the float64 redo is enqueued behind the checked lookup (:mod:`.row_redo`), the host
    work of both is done while the k-NN kernel runs and their launches are enqueued in
    one burst (:class:`clkernels.recording.Recorder`). ``device_out``: a list that
    receives the device arrays ``(pred, var)`` ``(1, nt, nq)`` (for a patch after the
    redo). ``launched``: runs once the first k-NN kernel is flushed to the device (host
    work to start beside it, e.g. a background check). ``tie_rows`` (float64, no
    ``check``): a list that receives the tied queries (:func:`.simplex_ties.tied`) the
    device's rule left to the host (:func:`_tie_list`): the table one neighbour wider,
    the lookup program's ``ties`` kernel and pyEDM's rule behind the lookup
    (:func:`_enqueue_ties`), the lists read after the skill only where rows are left.
    """
    be = data.be
    qpts = plan.pred_points
    search = knn_device if neighbors is None else neighbors.device_table
    k = plan.knn + (0 if check is None else check.extra)
    ties = (tie_rows is not None and check is None
            and plan.knn + 1 <= min(MAX_KNN, plan.lib_points.size))
    if ties:
        k = plan.knn + 1
    tie_parts: list = []  # (q0, rows, kth, count, rsel) of each query block
    resolver = _resolve_inputs(be, plan, check) if check is not None and check.extra == 2 else None

    def predict(q0: int, q1: int):
        # k-NN table (O(queries * k)) + lookup for queries q0:q1; each query is
        # independent, so blocks give the same predictions as one launch
        q_dev, l_dev, _ = plan_device(be, plan) if q1 - q0 == qpts.size else (None, None, None)
        kw = dict(E=plan.E, tau=plan.tau, k=k, qpts=qpts[q0:q1], lpts=plan.lib_points)
        # a table widened by the check: the tuning of the table it widens
        params = widened_params(be, **kw, base_k=plan.knn, real=data.real) if k > plan.knn else None
        # the extra neighbours only as near-ties of the knn-th (the NEAR contract): the
        # widened table then costs about what the plain one does
        table = search(be, data.x_dev, data.n, **kw, radius=plan.exclusion_radius,
                       real=data.real, params=params, q_dev=q_dev, l_dev=l_dev,
                       near=k - plan.knn)
        be.flush()  # the k-NN kernel starts while the host prepares the rest
        if launched is not None:
            launched()
        tshift = plan.offset + plan.Tp
        if check is None:
            p, v = lookup_device(be, table, data.y_dev, data.n, data.nt, tshift,
                                 weight=weight, real=data.real, variance=variance,
                                 k=plan.knn)
            f = None
            if ties:
                tie_parts.append((q0, *_enqueue_ties(be, data, plan, table, q_dev, q0, q1,
                                                     p, v)))
        else:  # the check's host work runs while the k-NN kernel does
            # the targets' units (with the resolve's shift and scale): one upload
            units = check.device_units(be, None if resolver is None
                                       else (check.redo.shift, check.redo.scale))
            qnorm = be.to_device_aside(check.qnorm[q0:q1], copy=False)  # (never changed)
            res = None if resolver is None else resolver(q0, q1, q_dev)
            # the lookup redoes most flagged rows itself; else (no fp64, state spaces) the
            # float64 redo goes behind it: every launch prepared now, enqueued in one burst
            redo = res is None and row_redo.applies(be, check.redo, q1 - q0 == qpts.size)
            rec = Recorder(be) if redo else be
            f = lookup_checked(rec, table, plan.knn, data.y_dev, data.n, data.nt, tshift,
                               qnorm, units, check.E, variance=variance, resolve=res,
                               ties=check.ties)
            check.checked.append((q0, f))
            p, v = f.pred, f.var
            if redo:
                check.enqueued = row_redo.enqueue_redo(rec, plan, check.redo, f, q_dev, l_dev)
                rec.replay()
        if q1 - q0 == qpts.size:
            return p, v, f
        got = (be.to_host(p), (be.to_host(v) if variance else None))
        return (*got, None if f is None else q0 + f.rows_reader(be)())

    item = 8 if data.real == "double" else 4
    blocks = run_blocked(be, predict, qpts.size, parameter="the number of prediction rows (pred)",
                         what=f"Simplex k-NN table ({qpts.size} queries x k={k})",
                         nbytes=lambda q: q * k * (4 + item))
    if len(blocks) == 1:
        pred_dev, var_dev, checked = blocks[0]  # count and list read after the skill
        flag_read = None
    else:
        (pred_dev, var_dev, flag_read), checked = _joined(be, blocks, variance, check), None
    obs_dev = plan_device(be, plan)[2]
    out = skill_out(be, data.nt)
    skill_device(be, pred_dev, data.nt, plan.pred_times.size, data.y_dev, data.n, data.nt,
                 obs_dev, real=data.real, out=out)
    # every read queued before the first wait: one host-device round trip
    reads = [] if keep_device or not predictions else (
        [be.to_host_async(pred_dev)] + ([be.to_host_async(var_dev)] if variance else []))
    if while_busy is not None:
        while_busy()
    # the small reads last, behind the skill and the host's own work: a runtime may
    # hold the host at a read into pageable memory until the queue reaches it
    if checked is not None:
        flag_read = checked.rows_reader(be)
    if check is not None and check.enqueued is not None:
        check.enqueued.reads(be)
    sk = be.to_host(out).astype(np.float64)
    rows = None if flag_read is None else flag_read()
    if tie_parts:
        tie_rows.append(_tie_list(be, tie_parts))
    if device_out is not None:
        device_out.extend((pred_dev, var_dev))
    if keep_device:
        return pred_dev, var_dev, sk, rows
    got = [r()[0] for r in reads]
    pred = got[0] if predictions else None
    var = got[1] if (variance and predictions) else None
    return pred, var, sk, rows


def _joined(be: Backend, blocks: list, variance: bool, check: RowCheck | None) -> tuple:
    """Query blocks' host predictions (and variances) back on the device as one array
    each for the skill, and the reader of their flagged rows (None without a check)."""
    pred_dev = be.to_device(np.concatenate([b[0] for b in blocks], axis=-1))
    var_dev = be.to_device(np.concatenate([b[1] for b in blocks], axis=-1)) if variance else None
    hold(be, pred_dev, var_dev)
    if check is None:
        return pred_dev, var_dev, None
    rows = np.concatenate([b[2] for b in blocks])
    return pred_dev, var_dev, lambda: rows


def _enqueue_ties(be: Backend, data: DeviceData, plan: Plan, table, q_dev, q0: int, q1: int,
                  pred, var) -> tuple:
    """Behind a float64 lookup of the queries ``q0:q1`` from a table one neighbour wider
    than ``plan.knn``: the lookup program's ``ties`` kernel (the tied queries' list, their
    knn-th distances and count), then, where the radius allows it, pyEDM's rule on the
    device for the first :data:`.simplex_ties.DEVICE_SLOTS` of them (:func:`_enqueue_rule`),
    its predictions written into ``pred`` / ``var`` before the skill. Returns the device
    arrays the host reads after the wait: ``(rows, kth, count, rsel or None)``."""
    from ..kernels.lookup import LOOKUP

    rows = be.empty(table.nq, np.int32)
    kth = be.empty(table.nq, np.float64)
    with be.zero_batch():
        count = be.zeros(2, np.int32)  # the tied queries, the device's open ones
    hold(be, rows, kth, count)
    LOOKUP.launch_ties(be, table.idx, table.dist, table.nq, table.k, plan.knn,
                       simplex_ties.tie_width(plan.E), rows, kth, count)
    if plan.exclusion_radius > simplex_ties.DEVICE_RADIUS:
        return rows, kth, count, None
    if q_dev is None:  # a block of queries: its points
        q_dev = be.to_device(np.ascontiguousarray(plan.pred_points[q0:q1], np.int32))
        hold(be, q_dev)
    slots = min(q1 - q0, simplex_ties.DEVICE_SLOTS)
    rsel = _enqueue_rule(be, plan, data.x_dev, data.y_dev, data.nt, q_dev, rows, kth, count,
                         slots, pred, var, q1 - q0)
    return rows, kth, count, rsel


def _enqueue_rule(be: Backend, plan: Plan, x64, y64, nt: int, q_dev, rows, kth, count,
                  slots: int, out_p, out_v, ostride: int, scatter: bool = True):
    """pyEDM's rule on the device for the first ``min(count[0], slots)`` queries of a
    device list (``rows``, knn-th float64 distances ``kth``; points ``q_dev[rows]``), no
    host round trip: their range lists (``knn/range.cl.mako``), then pyEDM's neighbours
    and weights (``lookup/pyedm_decide.cl.mako``) over the float64 targets ``y64`` (``nt``
    rows of the series' length): each decided query's predictions (and variances, where
    ``out_v``) written at ``out[j * ostride + query]`` (``scatter``: a pass's float64
    predictions) or ``out[j * ostride + slot]``. Returns ``rsel`` (slots: the query each
    decided, -1 where open, for the host's rule, or unused)."""
    from ..kernels.knn import KNN
    from ..kernels.lookup import LOOKUP

    st = simplex_ties
    cap, w = st.GROUP_CAP, st.tie_width(plan.E)
    l_dev = plan_device(be, plan)[1]
    nl = plan.lib_points.size
    groups = be.empty((slots, cap), np.int32)
    gcount = be.empty(slots, np.int32)
    rsel = be.empty(slots, np.int32)
    hold(be, groups, gcount, rsel)
    KNN.launch_range_list(be, plan.E, plan.tau, x64, l_dev, nl, q_dev, rows, kth, count,
                          slots, w, plan.exclusion_radius, cap, groups, gcount)
    rule = st.Rule.of(None, plan)
    LOOKUP.launch_decide(be, plan.E, plan.tau, plan.knn, cap, plan.exclusion_radius, x64,
                         l_dev, nl, q_dev, rows, kth, count, groups, gcount, slots, rule.kq,
                         rule.complete, w, y64, plan.n, nt, plan.offset + plan.Tp, out_p,
                         out_v, ostride, scatter, rsel)
    return rsel


def _patch(be: Backend, real: str, pred, var, nq: int, nt: int, rows_dev, m: int, p64, v64,
           shift: np.ndarray | None = None, scale: np.ndarray | None = None) -> None:
    """The lookup program's ``patch``: the float64 predictions ``p64`` (and variances)
    ``(nt, m)`` of the queries ``rows_dev`` (-1: skipped) into ``pred`` / ``var``
    ``(1, nt, nq)`` of type ``real``, in their units (``x = z * scale + shift``; None: data
    units)."""
    from ..kernels.lookup import LOOKUP

    acc = np.float64 if be.info.fp64 else np.float32
    sh = be.to_device(np.zeros(nt, acc) if shift is None else np.asarray(shift, acc).reshape(-1))
    sc = be.to_device(np.ones(nt, acc) if scale is None else np.asarray(scale, acc).reshape(-1))
    hold(be, sh, sc, rows_dev, p64, v64)
    LOOKUP.launch_patch(be, real, pred, var, nq, nt, rows_dev, m, p64, v64, sh, sc)


def _tie_list(be: Backend, parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tied queries of :func:`_enqueue_ties`' blocks ``(q0, rows, kth, count, rsel)``
    that the device left to the host, ascending, their knn-th distances, and whether the
    device's rule tried each (and left it open) or had no slot for it: the counts read,
    the lists only where some are set."""
    got, dist, tried = [], [], []
    for q0, rows, kth, count, rsel in parts:
        c, n_open = (int(v) for v in be.to_host(count))
        if not c or (rsel is not None and c <= rsel.shape[0] and not n_open):
            continue  # none, or all decided on the device
        r, d = be.to_host_async(rows, count=c)(), be.to_host_async(kth, count=c)()
        done, seen = np.zeros(c, bool), np.zeros(c, bool)
        if rsel is not None:
            m = min(c, int(rsel.shape[0]))
            done[:m] = be.to_host_async(rsel, count=m)() >= 0
            seen[:m] = True
        got.append(q0 + r[~done].astype(np.int64))
        dist.append(d[~done])
        tried.append(seen[~done])
    if not got:
        return np.empty(0, np.int64), np.empty(0), np.empty(0, bool)
    r, d, t = np.concatenate(got), np.concatenate(dist), np.concatenate(tried)
    order = np.argsort(r)
    return r[order], d[order], t[order]


def observed(plan: Plan, y: np.ndarray) -> np.ndarray:
    """The targets ``y`` ``(nt, n)`` at the plan's observation rows ``(nt, nq)``, NaN where
    the target lies outside the series: one gather (2-D boolean masks are slow), a large
    panel by bands of rows on threads."""
    rows = plan.observed_rows  # -1 where the target lies outside the series
    out = np.empty((y.shape[0], rows.size), y.dtype)
    outside = np.flatnonzero(rows < 0)

    def band(sl: slice) -> None:
        np.take(y[sl], rows, axis=1, mode="clip", out=out[sl])
        out[sl, outside] = np.nan

    map_slices(band, out)
    return out


@renamed_keywords(knn_backend="knn_method")
@checks_constant("simplex", ("x", "target"))
def simplex(x, target=None, *, E: int | None = None, tau: int = 1, Tp: int = 1,
            knn: int | None = None, exclusion_radius: int = 0, lib=None, pred=None,
            dtype: Any = "float32", device: Any = None, backend: str | None = None,
            variance: bool = False, knn_method: str = "exact", knn_options: dict | None = None,
            return_device: bool = False, columns: Any = None, embedded: bool = False,
            valid_lib: Any = None) -> SimplexResult:
    """Simplex projection of ``target`` (default ``x``) from the embedding of ``x``.

    pyEDM semantics: ``lib``/``pred`` 1-based inclusive ``start stop`` pairs
    (default: the whole series, i.e. leave-one-out), prediction from row ``t`` is
    for ``t + Tp``, ``knn`` defaults to ``E + 1``, neighbours within
    ``exclusion_radius`` rows of the prediction row are excluded, weights
    ``exp(-d / max(d_min, 1e-6))``. Here ``tau > 0`` lags into the past (kEDM's
    sign; pyEDM's ``tau=-1`` is ``tau=1``). ``target`` may be 2-D
    ``(n_targets, n)``: one k-NN table serves all targets.

    ``x``/``target`` may be device arrays (kept on the device, validated there) and
    ``return_device=True`` returns ``predicted``/``observed``/``variance`` as device
    arrays in the computation dtype (see :mod:`pyedmcl.interop`).

    ``dtype``: "float32" (default) or "float64". In float32 each host series is
    centred in float64 first and the results mapped back (offset-invariant; not scaled,
    so the distance floor above is in data units as in float64 and pyEDM; see
    :mod:`pyedmcl._precision`, which may switch a call to float64 with a
    :class:`~pyedmcl._precision.PrecisionWarning`); device arrays are used as given.
    Each float32 prediction's rounding error is bounded on the device, and those whose
    bound exceeds 1e-5 of the target's standard deviation (near-repeating states, dense
    libraries at small E, ties of decimal data) are recomputed in float64 and the skill
    taken again (:mod:`pyedmcl.edm.row_check`).

    Ties (decimal data): where the knn-th and the next neighbour lie at equal distances,
    pyEDM picks by its own float64 arithmetic (roots of its sums, then |p - l|, then l);
    those rows are listed and decided by pyEDM's rule on the device, so the predictions
    are pyEDM's there too (:mod:`pyedmcl.edm.simplex_ties`).

    State spaces (pyEDM's multivariate embedding): ``x`` 2-D ``(L, m)`` or a DataFrame,
    ``columns`` picks its columns (names or indices; default all), ``target`` a column
    name/index of ``x`` or a series (default the first column); the state is ``E`` lags
    of each column (pyEDM's ``Embed`` order) or, with ``embedded=True``, the columns
    themselves (``E`` is then the column count, as in pyEDM, and ``knn`` defaults to
    ``E + 1``).
    Missing data: rows whose state vector holds a NaN are no library vectors and predict
    NaN, and a neighbour with a NaN target makes a prediction NaN (pyEDM 2.5.7); skill
    uses the finite pairs. ``valid_lib``: a boolean mask of rows allowed in the library
    (pyEDM's ``validLib``). These paths take host arrays and the exact k-NN
    (:mod:`pyedmcl.edm.statespace`). ``knn`` may be up to the library size: above 64
    (the fused kernel's limit) full distance rows are sorted instead (slower).

    ``knn_method``: how the neighbours are found, "exact" (default: the OpenCL kernel) or
    another name of :data:`pyedmcl.neighbors.CHOICES` (k-d tree, approximate HNSW/IVF,
    "auto"); ``knn_options``: that method's options.
    """
    if (is_multivariate(x, columns, embedded, valid_lib, target) or beyond_fused_knn(knn, E)
            or _check_needs_sorted_rows(x, target, knn, E, dtype, return_device, knn_method)):
        if return_device or knn_method != "exact":
            raise ValueError("return_device=True and knn_method other than 'exact' take a "
                             "finite 1-D series; state spaces (2-D x, columns, embedded, "
                             "valid_lib, NaN) run on host arrays with the exact k-NN")
        ss = state_space(x, target, columns=columns, embedded=embedded)
        return simplex_states(ss, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                              lib=lib, pred=pred, valid_lib=valid_lib, dtype=dtype, device=device,
                              backend=backend, variance=variance)
    if E is None:
        raise ValueError("E is required (the embedding dimension, 1 <= E <= 512)")
    # float32's merge check runs beside the k-NN kernel (its verdict asked below)
    ser = SimplexSeries.prepared(x, target, dtype, device, backend)
    plan = resolve(ser.n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                   lib=lib, pred=pred)
    data = ser.upload()
    nb = resolve_backend(knn_method, ser.be, L=plan.lib_points.size, E=plan.E,
                         nq=plan.pred_points.size, k=plan.knn, options=knn_options)
    # float32 from host series: predictions float32 cannot hold are redone in float64
    check = (row_check(plan, ser.xz, ser.yz, nb.exact, ser.target_spreads)
             if ser.dt == np.float32 and ser.xs is not None and ser.y is not None else None)
    if (check is not None and not return_device and ser.be.info.fp64
            and plan.pred_times.size >= SAMPLE_FROM and on_decimal_grid(ser.xs)
            and sampled_flag_fraction(data, plan, check, nb) > MOSTLY_FLAGGED):
        # most rows would be redone (ties of decimal data): float64 from the start; other
        # data take no sample (a k-NN pass and a wait): the count comes with the skill
        ser.float32_holds()  # (warned where float32 cannot hold the data: float64 too)
        return simplex(x, target, E=E, tau=tau, Tp=Tp, knn=knn,
                       exclusion_radius=exclusion_radius, lib=lib, pred=pred, dtype="float64",
                       device=device, backend=backend, variance=variance,
                       knn_method=knn_method, knn_options=knn_options)
    on_device = return_device or ser.y is None
    ties = not on_device and simplex_ties.applies(ser.xs, plan, nb)
    got = _predict(ser, data, plan, nb, check, variance, on_device, ties)
    if not ser.float32_holds():  # warned: the call as it runs in float64
        return simplex(x, target, E=E, tau=tau, Tp=Tp, knn=knn,
                       exclusion_radius=exclusion_radius, lib=lib, pred=pred, dtype="float64",
                       device=device, backend=backend, variance=variance,
                       knn_method=knn_method, knn_options=knn_options,
                       return_device=return_device)
    return _result(ser, data, plan, nb, got, variance, on_device, return_device)


@dataclass(frozen=True)
class SimplexSeries:
    """A 1-D Simplex call's library series and targets, validated and prepared for the
    computation's dtype (:func:`pyedmcl._precision.prepare`): host series as given and
    as the kernels take them, device arrays as given."""

    be: Backend
    dt: Any  # the computation's dtype (float64 where float32 cannot hold the data)
    n: int
    nt: int
    single: bool  # one target (results 1-D)
    xs: np.ndarray | None  # x as given (None: a device array)
    y: np.ndarray | None  # the targets (nt, n) as given (None: on the device)
    xz: np.ndarray | None  # the kernels' x (host)
    yz: np.ndarray | None  # the kernels' targets (host)
    fy: Affine  # the targets' kernel units -> data units
    xd: Any  # x on the device (None: host)
    yd: Any  # the targets on the device (None: host, or x's own)
    target_is_x: bool  # no target given: x predicts itself
    #: float32's merge check, gated (:meth:`start_check`, :meth:`float32_holds`)
    prep: Prepared | None = None
    #: ``xz`` and ``yz`` cast to float32 as they were centred (a panel of targets), else None
    casts: tuple[np.ndarray, np.ndarray] | None = None
    #: a panel of targets' std and max - min as the preparation measured them (the row
    #: check's tolerances without a pass of their own over the panel), else None
    target_spreads: tuple[np.ndarray, np.ndarray] | None = None

    def start_check(self) -> None:
        """Start float32's merge check in the background (idempotent): once the k-NN
        kernel is queued, so that it runs beside the device's work, not before it."""
        if self.prep is not None:
            self.prep.start_check()

    def float32_holds(self) -> bool:
        """The merge check's verdict (:meth:`pyedmcl._precision.Prepared.float32_holds`):
        False after warning that the call runs in float64 (the caller runs it again
        so); raises where the device lacks fp64."""
        return self.prep is None or self.prep.float32_holds()

    @classmethod
    def prepared(cls, x: Any, target: Any, dtype: Any, device: Any,
                 backend: str | None) -> SimplexSeries:
        """``x`` and ``target`` validated (host or device arrays, equally long) and, in
        float32, the host series centred (x: distances; targets: predictions, mapped
        back); values beyond float32's range switch the call to float64 here, values
        that merge in float32 after the float32 pass (the merge check is gated:
        :meth:`start_check`, :meth:`float32_holds`)."""
        be = backend_for((x, target), device, backend)
        dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
        xd = device_series(x, be, "x", dt)
        xs = as_series(x, "x") if xd is None else None
        n = xs.size if xd is None else int(xd.shape[0])
        yd = (None if target is None
              else device_series(target, be, "target", dt, ndim=(1, 2), length=n))
        if yd is not None:
            y, single, nt = None, len(yd.shape) == 1, (1 if len(yd.shape) == 1 else int(yd.shape[0]))
        elif target is None and xs is None:
            y, single, nt = None, True, 1
        elif target is None:  # x predicts itself: validated once
            y, single, nt = xs[None, :], True, 1
        else:
            y, single = as_targets(target, n)
            nt = y.shape[0]
        host, names = [], []
        for nm, a in (("x", xs), ("target", None if target is None else y)):
            if a is not None:
                host.append(a)
                names.append(nm)
        # x alone: float32's reach after centring from its extremes (validated above);
        # with a panel of targets, theirs from their rows' (as_target_rows took them),
        # and the panel cast to float32 as it is centred (no pass of its own)
        panel = names == ["x", "target"] and not single
        ext = ([extremes(xs)[::-1]] if names == ["x"] else
               [extremes(xs)[::-1], row_extremes(y)[::-1]] if panel else None)
        # the merge check covers x: the targets decide nothing (they are only averaged;
        # their float32 rounding is the row check's to bound), and 20,000 of them took
        # most of a call's host time
        prep = prepare(host, dt, be.info.fp64, names=names, scale=False, what="simplex",
                       deferred="gated", extremes=ext, cast=panel,
                       merge_checked=[nm == "x" for nm in names])
        if prep.dtype != dt:  # float32 cannot hold the data: float64 (device inputs again)
            dt = prep.dtype
            xd = None if xd is None else device_series(x, be, "x", dt)
            yd = (None if yd is None
                  else device_series(target, be, "target", dt, ndim=(1, 2), length=n))
        fx = fy = Affine.identity(nt)
        xz, yz = xs, y
        if xs is not None:
            xz, fx = prep.series[0], prep.affine[0]
        if target is None and y is not None:
            yz, fy = xz[None, :], fx
        elif y is not None:
            yz, fy = prep.series[-1], prep.affine[-1]
        casts = None if prep.cast is None or prep.dtype != np.float32 else tuple(prep.cast)
        spreads = None
        if panel and fy.spread is not None and ext is not None:
            hi, lo = ext[1]  # (row_extremes' (min, max), reversed above)
            spreads = (fy.spread, hi - lo)
        return cls(be=be, dt=dt, n=n, nt=nt, single=single, xs=xs, y=y, xz=xz, yz=yz, fy=fy,
                   xd=xd, yd=yd, target_is_x=target is None, prep=prep, casts=casts,
                   target_spreads=spreads)

    def upload(self) -> DeviceData:
        """The series on the device (a device input is used as it is)."""
        be, dt = self.be, self.dt
        if self.xd is None and self.yd is None:
            return DeviceData.upload(be, self.xz, self.yz, dt, self.casts)
        # at least one input already on the device: upload only the host one
        x_dev = to_backend(be, self.xz, dt) if self.xd is None else self.xd
        y_dev = (self.yd if self.yd is not None
                 else (x_dev if self.target_is_x else to_backend(be, self.yz, dt)))
        hold(be, x_dev, y_dev)
        return DeviceData(be, "double" if dt == np.float64 else "float", self.n, x_dev, y_dev,
                          self.yz, n_targets=self.nt)


def _predict(ser: SimplexSeries, data: DeviceData, plan: Plan, nb, check: RowCheck | None,
             variance: bool, on_device: bool, ties: bool = False) -> tuple:
    """The predictions ``(p, v, skill, rows, fixed, observed)``: :func:`run_plan`'s pass
    (device arrays where ``on_device``, else host ones with the observed values taken
    while the k-NN kernel runs), the queries ``rows`` the row check flagged and their
    float64 redo ``fixed`` (data units; the skill is that of the patched predictions).
    ``ties`` (host series, :func:`.simplex_ties.applies`): the rows whose knn-th place
    pyEDM may decide otherwise take its rule (:func:`_decide_ties`), the tied rows of the
    float64 pass or, in float32, those among the redone ones."""
    obs_host: list[np.ndarray] = []

    def host_observed() -> None:  # overlaps the k-NN kernel
        if not on_device:
            obs_host.append(observed(plan, ser.y))

    if check is not None:
        check.ties = ties
    if check is not None and not on_device:  # enqueued behind the first pass where it applies
        check.redo = row_redo.RedoInputs(ser.xs, ser.y, ser.fy.shift, ser.fy.scale, variance, nb)
        # most flagged rows resolve in the lookup (their float64 neighbours in its table)
        check.resolve = bool(ser.be.info.fp64 and check.xz.ndim == 1 and RESOLVE_IN_LOOKUP)
    dev: list = []
    tie_rows: list | None = [] if ties and check is None else None
    p, v, sk, rows = run_plan(data, plan, variance=variance, neighbors=nb,
                              keep_device=on_device, while_busy=host_observed, check=check,
                              device_out=dev, launched=ser.start_check, tie_rows=tie_rows)
    rows = np.empty(0, np.int64) if rows is None else rows
    resolved = None if check is None else check.resolved()
    fixed = None
    if rows.size and check is not None and check.enqueued is not None:
        fixed = check.enqueued.fixed(rows)  # redone on the device before the first wait
    if rows.size and fixed is None and ties and not on_device and data.be.info.fp64:
        sk, fixed = _redo_with_rule(data, plan, ser, rows, variance, dev, check)
        rows_left = np.empty(0, np.int64)  # (their ties decided with them)
    else:
        rows_left = rows
    if rows.size and fixed is None:
        p, v, sk, fixed = _redo_flagged(data, plan, ser.xs, ser.y, rows, nb, variance,
                                        on_device, (p, v), dev, ser.fy,
                                        None if check is None else check.float64)
    cand = (tie_rows[0] if tie_rows else (rows_left, None, None)) if ties else None
    if cand is not None and cand[0].size:
        v, sk, fixed = _decide_ties(data, plan, ser, nb, cand, variance, p, v, sk, rows,
                                    fixed, dev, check)
    return p, v, sk, rows, fixed, (obs_host[0] if obs_host else None), resolved


def _result(ser: SimplexSeries, data: DeviceData, plan: Plan, nb, got: tuple, variance: bool,
            on_device: bool, return_device: bool) -> SimplexResult:
    """The :class:`SimplexResult` of :func:`_predict`'s arrays, in data units: device
    arrays mapped back and gathered on the device (returned there, or read back), host
    ones patched with the float64 redo."""
    be, nt, fy = ser.be, ser.nt, ser.fy
    p, v, sk, rows, fixed, obs_host, resolved = got
    pick = (lambda a: a[0]) if ser.single else (lambda a: a)
    if on_device:
        nq = plan.pred_points.size
        shape = (nq,) if ser.single else (nt, nq)
        obs_idx = plan_device(be, plan)[2]
        obs_dev = gather(be, data.y_dev, ser.n, nt, obs_idx, nq, np.nan)
        hold(be, obs_idx, obs_dev)
        if not fy.is_identity:  # back to data units on the device
            affine_rows(be, p, nt, nq, fy.scale, fy.shift)
            affine_rows(be, obs_dev, nt, nq, fy.scale, fy.shift)
            if variance:
                affine_rows(be, v, nt, nq, fy.scale ** 2, np.zeros(nt))
        predicted, obs = output(be, p, return_device, shape), output(be, obs_dev, return_device, shape)
        var = None if not variance else output(be, v, return_device, shape)
        if not return_device:
            predicted, obs = predicted.astype(np.float64), obs.astype(np.float64)
            var = None if var is None else var.astype(np.float64)
    else:
        fix_p, fix_v = (None, None) if fixed is None else fixed  # float64 redo, data units
        full_p = fy.back_from(p)
        full_v = None if v is None else fy.back_spread_in_place(v.astype(np.float64), 2)
        if resolved is not None:  # redone in the lookup: the float64 values
            resolved.apply(full_p, full_v)
        predicted = pick(_patched(full_p, rows, fix_p))
        obs = pick(obs_host)
        var = None if v is None else pick(_patched(full_v, rows, fix_v))
    return SimplexResult(predicted=predicted, observed=obs,
                         times=plan.target_times, rho=pick(sk[:, 0]),
                         mae=pick(fy.back_spread(sk[:, 1])), rmse=pick(fy.back_spread(sk[:, 2])),
                         E=plan.E, tau=plan.tau,
                         Tp=plan.Tp, knn=plan.knn, variance=var, pred_times=plan.pred_times,
                         neighbors=nb.info)


#: the fraction of flagged rows (estimated on a sample, for decimal data only:
#: :func:`.row_check.on_decimal_grid`) beyond which float32 Simplex runs in float64 from
#: the start: redoing that many rows costs more than the float32 pass saves (decision
#: 0089)
MOSTLY_FLAGGED = 0.5
#: queries below which the flagged fraction is not estimated first (the pass is cheap)
SAMPLE_FROM = 1 << 15
#: queries in that sample
SAMPLE_QUERIES = 1024


def sampled_flag_fraction(data: DeviceData, plan: Plan, check: RowCheck, neighbors) -> float:
    """The fraction of ``plan``'s queries the row check flags, from an evenly spaced
    sample of :data:`SAMPLE_QUERIES` (0 below :data:`SAMPLE_FROM` queries)."""
    nq = plan.pred_times.size
    if nq < SAMPLE_FROM:
        return 0.0
    times = plan.pred_times[::nq // SAMPLE_QUERIES]
    sub = dataclasses.replace(plan, pred_times=times, pred_segments=[times])
    rows = run_plan(data, sub, predictions=False, neighbors=neighbors,
                    check=RowCheck(sub, check.xz, check.yz))[3]
    return rows.size / times.size


def _check_needs_sorted_rows(x: Any, target: Any, knn: Any, E: Any, dtype: Any,
                             return_device: bool, knn_backend: str) -> bool:
    """Whether a float32 call of host series at the fused kernel's MAX_KNN neighbours takes
    the sorted rows (:mod:`.simplex_states`): the row check reads one neighbour more."""
    if return_device or knn_backend != "exact" or not enabled():
        return False
    if any(is_device_array(a) for a in (x, target)):
        return False
    try:
        if np.dtype(np.float32 if dtype is None else dtype) != np.float32:
            return False
    except TypeError:
        return False  # validated (and refused) later
    return requested_knn(knn, E) == MAX_KNN


def _redo_flagged(data: DeviceData, plan: Plan, x: np.ndarray, y: np.ndarray,
                  rows: np.ndarray, nb, variance: bool, on_device: bool, got: tuple,
                  dev: list, fy: Affine, series: tuple | None = None) -> tuple:
    """The float64 redo of the flagged queries ``rows`` (:mod:`.row_check`) after
    :func:`run_plan`'s pass (its results ``got``: predictions and variances, host or
    device arrays; ``dev``: its device arrays): ``(pred, var, skill, (p64, v64))``, the
    skill of the patched predictions. With fp64 the redo, its patch and the skill run
    on the device behind one wait; without, the host's redo, patch and a skill launch.
    ``series``: ``x`` and ``y`` in float64 on the device already (the lookup's resolve
    uploaded them: not again), else None."""
    be = data.be
    p, v = got
    if be.info.fp64:
        *fixed, sk = redo_patched(be, plan, x, y, rows, nb, variance, plan_device(be, plan)[1],
                                  dev[0], dev[1], fy.shift, fy.scale,
                                  lambda pd: _skill_enqueue(data, plan, pd), series=series)
        return (*(dev if on_device else (p, v)), sk, fixed)
    fixed = redo_float64(be, plan, x, y, rows, nb, variance)
    if on_device:  # patch the device arrays (centred units, as the rest)
        p, v = _patched_device(be, p, v, rows, fixed, fy)
        return p, v, _skill_again(data, plan, p), fixed
    ph = p.copy()  # the skill again on the device, of the patched predictions in float32
    ph[:, rows] = fy.forward(fixed[0].copy())
    return p, v, _skill_again(data, plan, be.to_device(ph[None])), fixed


def _decide_ties(data: DeviceData, plan: Plan, ser: SimplexSeries, nb, cand: tuple,
                 variance: bool, p: np.ndarray, v: np.ndarray | None, sk: np.ndarray,
                 rows: np.ndarray, fixed: tuple | None, dev: list, check: RowCheck | None
                 ) -> tuple:
    """pyEDM's rule (:mod:`.simplex_ties`) on the queries whose knn-th place it may decide
    otherwise that the pass left: ``cand`` is ``(queries, knn-th distances, tried)`` of
    the float64 pass's tied rows past the device's slots or open there (``tried``), or
    ``(queries, None, None)`` of float32's redone ``rows``, of which those their float64
    table shows tied.
    Their predictions (:func:`_rule_values`) are written over the pass's (float64: into
    the host arrays ``p`` / ``v``; float32: into the redone rows' float64 values
    ``fixed``), patched into the device predictions ``dev``, and the skill taken again.
    Returns ``(v, skill, fixed)``."""
    be = data.be
    t_rows, kth, tried = cand
    x64, y64 = _float64_series(be, ser, data, check)
    if kth is None:  # float32's redone rows: those tied in the float64 call's table
        idx, dist = _float64_table(be, plan, ser.xs, x64, t_rows, plan.knn + 1)
        tie = simplex_ties.tied(dist, idx, plan.knn, plan.E)
        t_rows, kth = t_rows[tie], dist[tie, plan.knn - 1]
    if t_rows.size == 0:
        return v, sk, fixed
    tp, tv = _rule_values(be, plan, ser, x64, y64, t_rows, kth, variance, tried)
    if check is None:  # float64: the host arrays are in data units
        p[:, t_rows] = tp
        if v is not None:
            v[:, t_rows] = tv
        shift = scale = None
    else:  # float32: the tied rows among the redone ones
        fp, fv = (np.array(a) if a is not None else None for a in fixed)
        order = np.argsort(rows, kind="stable")
        pos = order[np.searchsorted(rows[order], t_rows)]
        fp[:, pos] = tp
        if fv is not None:
            fv[:, pos] = tv
        fixed = (fp, fv)
        shift, scale = ser.fy.shift, ser.fy.scale
    acc = np.float64 if be.info.fp64 else np.float32
    p64 = be.to_device(np.ascontiguousarray(tp, acc))
    v64 = be.to_device(np.ascontiguousarray(tv, acc)) if variance else None
    _patch(be, data.real, dev[0], dev[1] if variance else None, plan.pred_points.size, ser.nt,
           be.to_device(np.ascontiguousarray(t_rows, np.int32)), t_rows.size, p64, v64,
           shift, scale)
    return v, _skill_again(data, plan, dev[0]), fixed


def _redo_with_rule(data: DeviceData, plan: Plan, ser: SimplexSeries, rows: np.ndarray,
                    variance: bool, dev: list, check: RowCheck | None) -> tuple:
    """float32's flagged queries ``rows`` redone in float64 on decimal data, their ties
    decided by pyEDM's rule, from one float64 k-NN table of the rows one neighbour wider
    (the float64 call's): the float64 lookup's values for the rows it shows untied (the
    float64 call's lookup over the same first knn), the rule's (:func:`_rule_values`) for
    the tied ones; patched into the device predictions ``dev`` in their units, the skill
    taken again. Returns ``(skill, (p64, v64))`` (data units, ``(nt, rows.size)``). One
    k-NN of the rows where :func:`_redo_flagged` and then :func:`_decide_ties` took two."""
    be, nt, k = data.be, ser.nt, plan.knn
    x64, y64 = _float64_series(be, ser, data, check)
    kw = dict(E=plan.E, tau=plan.tau, k=k + 1, qpts=plan.pred_points[rows],
              lpts=plan.lib_points, radius=plan.exclusion_radius)
    table = knn_device(be, x64, plan.n, real="double", l_dev=plan_device(be, plan)[1], **kw)
    p64, v64 = lookup_device(be, table, y64, plan.n, nt, plan.offset + plan.Tp, real="double",
                             variance=variance, k=k)
    idx, dist = np.asarray(be.to_host(table.idx)[0]), np.asarray(be.to_host(table.dist)[0])
    fp = np.array(be.to_host(p64)[0], np.float64)
    fv = np.array(be.to_host(v64)[0], np.float64) if variance else None
    tie = np.flatnonzero(simplex_ties.tied(dist, idx, k, plan.E))
    if tie.size:
        tp, tv = _rule_values(be, plan, ser, x64, y64, rows[tie], dist[tie, k - 1], variance)
        fp[:, tie] = tp
        if variance:
            fv[:, tie] = tv
    _patch(be, data.real, dev[0], dev[1] if variance else None, plan.pred_points.size, nt,
           be.to_device(np.ascontiguousarray(rows, np.int32)), rows.size,
           be.to_device(fp), be.to_device(fv) if variance else None,
           ser.fy.shift, ser.fy.scale)  # (a device with fp64: the values in float64)
    return _skill_again(data, plan, dev[0]), (fp, fv)


def _rule_values(be: Backend, plan: Plan, ser: SimplexSeries, x64, y64, rows: np.ndarray,
                 kth: np.ndarray, variance: bool, tried: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """pyEDM's predictions ``(nt, m)`` (and variances) of the tied queries ``rows`` with
    knn-th float64 distances ``kth``: the device's rule (:func:`_enqueue_rule`, the same
    kernels as the float64 pass's, so the same values) where it has fp64 and takes the
    radius, the host's (:func:`.simplex_ties.pyedm_rows`) for the rows it leaves open
    (``tried``: those the pass's device rule left open already)."""
    st = simplex_ties
    nt = ser.nt
    tp = np.full((nt, rows.size), np.nan)
    tv = np.full((nt, rows.size), np.nan) if variance else None
    open_ = np.ones(rows.size, bool)
    todo = np.arange(rows.size) if tried is None else np.flatnonzero(~tried)
    if x64 is not None and plan.exclusion_radius <= st.DEVICE_RADIUS and todo.size:
        sub = _rule_values_device(be, plan, x64, y64, nt, rows[todo], kth[todo], variance)
        done = np.flatnonzero(sub[0])
        tp[:, todo[done]] = sub[1][:, done]
        if variance:
            tv[:, todo[done]] = sub[2][:, done]
        open_[todo[done]] = False
    if open_.any():
        i = np.flatnonzero(open_)
        groups = None if x64 is None else _range_groups(be, plan, x64)
        hp, hv = st.pyedm_rows(st.Rule.of(ser.xs, plan), plan, rows[i], kth[i], groups,
                               ser.y, variance)
        tp[:, i] = hp
        if variance:
            tv[:, i] = hv
    return tp, tv


def _rule_values_device(be: Backend, plan: Plan, x64, y64, nt: int, rows: np.ndarray,
                        kth: np.ndarray, variance: bool) -> tuple:
    """:func:`_enqueue_rule` on the host's list of tied queries, in parts of
    :data:`.simplex_ties.DEVICE_SLOTS`: ``(decided (m,), predictions (nt, m), variances)``."""
    st = simplex_ties
    done = np.zeros(rows.size, bool)
    tp = np.full((nt, rows.size), np.nan)
    tv = np.full((nt, rows.size), np.nan) if variance else None
    for s0 in range(0, rows.size, st.DEVICE_SLOTS):
        part = slice(s0, s0 + st.DEVICE_SLOTS)
        m = rows[part].size
        r_dev = be.to_device(np.ascontiguousarray(rows[part], np.int32))
        k_dev = be.to_device(np.ascontiguousarray(kth[part], np.float64))
        c_dev = be.to_device(np.array([m, 0], np.int32))
        hold(be, r_dev, k_dev, c_dev)
        p64 = be.empty((nt, m), np.float64)
        v64 = be.empty((nt, m), np.float64) if variance else None
        hold(be, p64, v64)
        rsel = _enqueue_rule(be, plan, x64, y64, nt, plan_device(be, plan)[0], r_dev, k_dev,
                             c_dev, m, p64, v64, m, scatter=False)
        ok = np.flatnonzero(be.to_host(rsel) >= 0)
        tp[:, s0 + ok] = be.to_host(p64)[:, ok]
        if variance:
            tv[:, s0 + ok] = be.to_host(v64)[:, ok]
        done[s0 + ok] = True
    return done, tp, tv


def _float64_series(be: Backend, ser: SimplexSeries, data: DeviceData,
                    check: RowCheck | None) -> tuple[Any, Any]:
    """The series and the targets in float64 on the device: the float64 call's own, those
    the row check's resolve uploaded, or new copies; ``(None, None)`` without fp64."""
    if not be.info.fp64:
        return None, None
    if data.real == "double":
        return data.x_dev, data.y_dev
    if check is not None and check.float64 is not None:
        return check.float64
    xd = be.to_device(np.ascontiguousarray(ser.xs, np.float64))
    yd = xd if ser.target_is_x else be.to_device(np.ascontiguousarray(ser.y, np.float64))
    hold(be, xd, yd)
    return xd, yd


def _float64_table(be: Backend, plan: Plan, x: np.ndarray, x64, rows: np.ndarray, k: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The float64 k-NN table (host arrays: kernel points, distances) of ``plan``'s
    queries ``rows`` with ``k`` neighbours, as the float64 call's kernel finds it: on
    the device from ``x64``, or without fp64 from the host's exact k-d tree."""
    kw = dict(E=plan.E, tau=plan.tau, k=k, qpts=plan.pred_points[rows],
              lpts=plan.lib_points, radius=plan.exclusion_radius)
    if x64 is None:
        from ..neighbors import neighbor_backend

        idx, dist = neighbor_backend("kdtree").search_host(np.asarray(x, np.float64), **kw)
        return np.asarray(idx[0]), np.asarray(dist[0], np.float64)
    t = knn_device(be, x64, x.size, real="double", l_dev=plan_device(be, plan)[1], **kw)
    return np.asarray(be.to_host(t.idx)[0]), np.asarray(be.to_host(t.dist)[0], np.float64)


def _range_groups(be: Backend, plan: Plan, x64) -> Callable:
    """``groups(rows, lim, cap)`` for :func:`.simplex_ties.pyedm_rows`: the device's lists of
    the library points within each query's squared limit (``knn/range.cl.mako``)."""
    from ..primitives.knn import range_lists

    def groups(rows: np.ndarray, lim: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
        return range_lists(be, x64, E=plan.E, tau=plan.tau, qpts=plan.pred_points[rows],
                           l_dev=plan_device(be, plan)[1], nl=plan.lib_points.size, lim=lim,
                           radius=plan.exclusion_radius, cap=cap)
    return groups


def _skill_again(data: DeviceData, plan: Plan, pred_dev) -> np.ndarray:
    """The skill rows ``(nt, 4)`` of device predictions ``(1, nt, nq)`` (centred units):
    :func:`run_plan`'s skill launch, for predictions patched after it."""
    return data.be.to_host(_skill_enqueue(data, plan, pred_dev)).astype(np.float64)


def _skill_enqueue(data: DeviceData, plan: Plan, pred_dev) -> Any:
    """:func:`_skill_again`'s launch alone: its device rows ``(nt, 4)``, not waited for."""
    be = data.be
    out = skill_out(be, data.nt)
    hold(be, pred_dev)
    skill_device(be, pred_dev, data.nt, plan.pred_times.size, data.y_dev, data.n, data.nt,
                 plan_device(be, plan)[2], real=data.real, out=out)
    return out


def _patched(a: np.ndarray, rows: np.ndarray, values: np.ndarray | None) -> np.ndarray:
    """``a`` ``(nt, nq)`` with its columns ``rows`` replaced by ``values`` (if any), a
    large panel by bands of rows on threads."""
    if values is not None and rows.size:
        def band(sl: slice) -> None:
            a[sl, rows] = values[sl]
        map_slices(band, values)
    return a


def _patched_device(be: Backend, p, v, rows: np.ndarray, fixed: tuple, fy: Affine):
    """Device predictions (and variances) ``(1, nt, nq)`` with the queries ``rows``
    replaced by the float64 ones ``fixed`` (data units), in the arrays' centred units."""
    ph = be.to_host(p)
    ph[0][:, rows] = fy.forward(fixed[0].copy())
    p = be.to_device(ph)
    if v is not None:
        vh = be.to_host(v)
        vh[0][:, rows] = fixed[1] / (fy.scale[:, None] ** 2 if not fy.is_identity else 1.0)
        v = be.to_device(vh)
    hold(be, p, v)
    return p, v
