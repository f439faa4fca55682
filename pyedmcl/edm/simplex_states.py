"""Simplex over a state space of several columns, with missing data and a library mask.

The path :func:`pyedmcl.simplex` takes for 2-D input, ``columns=``, ``embedded=True``,
``valid_lib=`` or NaN in the data (:func:`.statespace.is_multivariate`); a plain finite
series keeps the 1-D path. The same k-NN and lookup kernels run (the knn family reads
the row-major matrix with ``NC`` columns); here: which rows are library vectors and
queries (NaN, ``valid_lib``), pyEDM's NaN rules on the results, and host skill.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from clkernels import run_blocked

from .._precision import prepare
from ..interop import backend_for
from ..neighbors import resolve_backend
from ..primitives.knn import hold, knn_device, knn_rows_sorted, widened_params
from ..primitives.lookup import lookup_checked, lookup_device, lookup_host
from ..primitives.ranges import MAX_KNN, Plan, resolve
from ..validation import check_dtype, check_int
from .results import SimplexResult
from .row_check import RowCheck, host_flags, row_check
from .statespace import StateSpace, bad_points, check_valid_lib, filled, skill


def admitted(ss: StateSpace, plan: Plan, lags: int, valid_lib: np.ndarray | None
             ) -> tuple[Plan, np.ndarray]:
    """``plan`` restricted to library rows whose state vector is complete and that
    ``valid_lib`` allows, and to queries whose state vector is complete; and the mask of
    ``plan``'s prediction rows that remain (the others predict NaN)."""
    bad = bad_points(ss.data, lags, plan.tau)
    lp = plan.lib_points
    keep = ~bad[lp]
    if valid_lib is not None:
        keep &= valid_lib[plan.lib_times]
    qmask = ~bad[plan.pred_points]
    lib_times = plan.lib_times[keep]
    if lib_times.size == 0:
        raise ValueError("no library rows left: every library row has a NaN in its state "
                         "vector or is excluded by valid_lib")
    loo = bool(np.isin(lib_times, plan.pred_times[qmask]).any())
    if lib_times.size - loo < plan.knn:
        raise ValueError(f"knn={plan.knn} is out of range for this library: {lib_times.size} "
                         f"library rows remain after removing NaN state vectors and rows "
                         f"valid_lib excludes; allowed: knn <= {lib_times.size - loo}")
    pred_times = plan.pred_times[qmask]
    sub = dataclasses.replace(plan, lib_times=lib_times, pred_times=pred_times,
                              pred_segments=[pred_times])
    return sub, qmask


def simplex_states(ss: StateSpace, *, E: Any, tau: int, Tp: int, knn: Any,
                   exclusion_radius: int, lib: Any, pred: Any, valid_lib: Any, dtype: Any,
                   device: Any, backend: str | None, variance: bool) -> SimplexResult:
    """Simplex of ``ss.targets`` from the state space ``ss`` (see the module docstring)."""
    be = backend_for((), device, backend)
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    if ss.embedded:  # pyEDM: E is the column count
        E = ss.nc
    elif E is None:
        raise ValueError("E is required (the number of lags of each column) unless embedded=True")
    E = check_int(E, "E", 1, 512)
    lags = ss.lags(E)
    if knn is None or (isinstance(knn, int | np.integer) and not isinstance(knn, bool) and knn == 0):
        knn = ss.default_knn(E)
    plan = resolve(ss.n, E=lags, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                   lib=lib, pred=pred, max_knn=None)
    vl = check_valid_lib(valid_lib, ss.n)
    sub, qmask = admitted(ss, plan, lags, vl)
    # float32: each column centred in float64 (distances are shift-invariant per
    # column, not scale-invariant across columns: no scaling), targets likewise
    prep = prepare([filled(ss.data, 0).T, filled(ss.targets, 1)], dt, be.info.fp64,
                   names=["x", "target"], scale=False, what="simplex")
    dt = prep.dtype
    xz = np.ascontiguousarray(prep.series[0].T, dtype=dt)
    yz = np.ascontiguousarray(prep.series[1], dtype=dt)
    fy = prep.affine[1]
    nt = ss.targets.shape[0]
    x_dev, y_dev = be.to_device(xz), be.to_device(yz)
    hold(be, x_dev, y_dev)
    nq = plan.pred_times.size
    pred_all = np.full((nt, nq), np.nan)
    var_all = np.full((nt, nq), np.nan) if variance else None
    if sub.pred_times.size:
        # pyEDM: a neighbour whose target (row l + Tp) is NaN makes the prediction NaN
        nan_targets = bool(np.isnan(ss.targets[:, sub.lib_times + sub.Tp]).any())
        # float32 predictions float32 cannot hold are redone in float64 (.row_check;
        # on the device: fp64 needed)
        check = (row_check(sub, prep.series[0].T, prep.series[1], True)
                 if dt == np.float32 and be.info.fp64 else None)
        # the fused kernel keeps MAX_KNN neighbours; the check reads one more
        sorted_rows = sub.knn > MAX_KNN or (check is not None and not check.widen)
        if sorted_rows:  # more neighbours than the fused kernel keeps: slower path
            p, v, idx, redo = _predict_sorted(be, prep.real, x_dev, prep.series[1], ss.n,
                                              ss.nc, sub, variance, check)
        else:
            p, v, idx, redo = _predict(be, prep.real, x_dev, y_dev, ss.n, nt, ss.nc, sub,
                                       variance, nan_targets, check)
        p = fy.back_in_place(p.astype(np.float64))
        if variance:
            v = fy.back_spread_in_place(v.astype(np.float64), 2)
        if redo is not None and redo.size:  # the float64 call's values, and neighbours
            p[:, redo], v64, idx64 = _redo(be, ss, sub, redo, variance, sorted_rows)
            if variance:
                v[:, redo] = v64
            if idx is not None:
                idx[redo] = idx64
        tshift = sub.offset + sub.Tp
        if nan_targets:
            rows = np.where(idx >= 0, idx + tshift, 0)
            for j in range(nt):
                nan_hit = (np.isnan(ss.targets[j][rows]) & (idx >= 0)).any(axis=1)
                p[j, nan_hit] = np.nan
                if variance:
                    v[j, nan_hit] = np.nan
        pred_all[:, qmask] = p
        if variance:
            var_all[:, qmask] = v
    rows = plan.observed_rows  # -1 where the target lies outside the data
    obs = np.take(ss.targets, rows, axis=1, mode="clip")
    obs[:, rows < 0] = np.nan
    rho, mae, rmse = skill(obs, pred_all)
    nb = resolve_backend("exact", be, L=sub.lib_points.size, E=lags * ss.nc, nq=nq, k=sub.knn)
    pick = (lambda a: a[0]) if ss.single else (lambda a: a)
    return SimplexResult(predicted=pick(pred_all), observed=pick(obs), times=plan.target_times,
                         rho=pick(rho), mae=pick(mae), rmse=pick(rmse), E=E, tau=plan.tau,
                         Tp=plan.Tp, knn=plan.knn,
                         variance=None if var_all is None else pick(var_all),
                         pred_times=plan.pred_times, neighbors=nb.info)


def _predict(be, real: str, x_dev, y_dev, n: int, nt: int, nc: int, plan: Plan,
             variance: bool, with_idx: bool, check: RowCheck | None = None
             ) -> tuple[np.ndarray, np.ndarray | None, Any, np.ndarray | None]:
    """k-NN table + lookup for ``plan``'s queries, in query blocks that fit the device:
    predictions and variances ``(nt, nq)``, with ``with_idx`` the table's kernel points
    ``(nq, k)`` (else None), and with ``check`` the queries whose float32 bound exceeds
    the tolerance (:mod:`.row_check`; else None)."""
    qpts = plan.pred_points
    item = 8 if real == "double" else 4
    k = plan.knn + (1 if check is not None and check.widen else 0)
    tshift = plan.offset + plan.Tp

    def block(q0: int, q1: int):
        kw = dict(E=plan.E, tau=plan.tau, k=k, qpts=qpts[q0:q1], lpts=plan.lib_points, nc=nc)
        # a table widened by the check: the tuning of the table it widens
        params = widened_params(be, **kw, base_k=plan.knn, real=real) if k > plan.knn else None
        t = knn_device(be, x_dev, n, **kw, radius=plan.exclusion_radius, real=real,
                       params=params, near=k - plan.knn)
        be.flush()  # the k-NN kernel starts while the host prepares the rest
        f = None
        if check is None:
            pd_, vd = lookup_device(be, t, y_dev, n, nt, tshift, real=real, variance=variance)
        else:  # the check's host work runs while the k-NN kernel does
            c = lookup_checked(be, t, plan.knn, y_dev, n, nt, tshift,
                               be.to_device(check.qnorm[q0:q1]), check.device_units(be),
                               check.E, variance=variance)
            pd_, vd, f = c.pred, c.var, c.rows_reader(be)  # read with the predictions
        got = (be.to_host(pd_)[0], be.to_host(vd)[0] if variance else None,
               be.to_host(t.idx)[0][:, :plan.knn] if with_idx else None)
        return (*got, None if f is None else q0 + f())

    blocks = run_blocked(be, block, qpts.size, parameter="the number of prediction rows (pred)",
                         what=f"Simplex k-NN table ({qpts.size} queries x k={k})",
                         nbytes=lambda q: q * k * (4 + item))
    p = np.concatenate([b[0] for b in blocks], axis=-1)
    v = np.concatenate([b[1] for b in blocks], axis=-1) if variance else None
    redo = None if check is None else np.concatenate([b[3] for b in blocks])
    return p, v, (np.concatenate([b[2] for b in blocks]) if with_idx else None), redo


def _redo(be, ss: StateSpace, plan: Plan, rows: np.ndarray, variance: bool,
          sorted_rows: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """The float64 call's predictions, variances and k-NN table rows (kernel points) of
    the queries ``rows`` of ``plan``, from the data as given."""
    x64 = np.ascontiguousarray(filled(ss.data, 0), dtype=np.float64)
    y64 = np.ascontiguousarray(filled(ss.targets, 1), dtype=np.float64)
    times = plan.pred_times[rows]
    part = dataclasses.replace(plan, pred_times=times, pred_segments=[times])
    x_dev = be.to_device(x64)
    hold(be, x_dev)
    if sorted_rows:
        p, v, idx, _ = _predict_sorted(be, "double", x_dev, y64, ss.n, ss.nc, part, variance)
    else:
        y_dev = be.to_device(y64)
        hold(be, y_dev)
        p, v, idx, _ = _predict(be, "double", x_dev, y_dev, ss.n, y64.shape[0], ss.nc, part,
                                variance, True)
    return p, v, idx


def _predict_sorted(be, real: str, x_dev, y: np.ndarray, n: int, nc: int, plan: Plan,
                    variance: bool, check: RowCheck | None = None
                    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """:func:`_predict` for any knn: the table from full sorted distance rows
    (:func:`.knn.knn_rows_sorted`) and the Simplex lookup on the host in float64 (the
    lookup kernel's weights exp(-d / max(d_min, 1e-6)) over the admissible slots); with
    ``check``, the float32 bound of each prediction taken on the host from one neighbour
    more (:func:`.row_check.host_flags`) and the queries beyond the tolerance."""
    k = plan.knn + (1 if check is not None else 0)
    idx, dist = knn_rows_sorted(be, x_dev, n, E=plan.E, tau=plan.tau, k=k,
                                qpts=plan.pred_points, lpts=plan.lib_points,
                                radius=plan.exclusion_radius, real=real, nc=nc)
    redo = None
    if check is not None:
        redo = np.flatnonzero(host_flags(idx, dist, y, plan.offset + plan.Tp, check.qnorm,
                                         check.E, check.thr, check.span, plan.knn))
        idx, dist = idx[:, :plan.knn], dist[:, :plan.knn]
    p, v = lookup_host(idx, dist, y, plan.offset + plan.Tp, variance)
    return p, v, idx, redo
