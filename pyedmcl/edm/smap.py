"""S-map (sequential locally weighted global linear maps) with pyEDM's semantics.

For every prediction point p, S-map fits the linear model
``y[t + Tp] ~ C0 + sum_k C_k x[t - k tau]`` over the library by weighted least
squares, with weights ``w_j = exp(-theta d_j / mean(d))`` (d: Euclidean distance
between embedded vectors, mean over the neighbours used — pyEDM's definition;
pyEDM puts w into the rows of the design matrix, so the squared residuals are
weighted by w^2) and predicts with the fitted model at p. Defaults follow pyEDM:
all library points are neighbours (``knn = |lib| - 1``, so with disjoint lib
and pred the single farthest point is left out, exactly as pyEDM does; of several equally
far, the one pyEDM's KDTree leaves out: :mod:`pyedmcl.edm.pyedm_kdtree`), the point
itself (and its ``exclusion_radius`` neighbourhood in time) is left out when lib
and pred overlap.

Precision. The whole batch of (E+1)x(E+1) problems is built and solved on the
device (``smap/smap.cl.mako``). The series is stored in the requested
``dtype`` (float32 by default, after subtracting its mean), distances are taken
in that type, and everything downstream — weights, the weighted normal
equations, their Cholesky solve — is accumulated in float64 wherever the device
has fp64 (every CPU runtime, NVIDIA/AMD GPUs); devices without fp64 accumulate
in double-float (float32 (hi, lo) pairs: fma TwoProduct + TwoSum, Dot2-style, and
a double-float Cholesky), which measured as accurate as the fp64 path on the
test cases, where plain float32 normal equations were off by up to 8e-3 in
predictions and 9e-2 in coefficients on smooth flows. Normal equations square the
condition number, so we (1) centre the regressors on the prediction point, which
makes the prediction the intercept itself and removes the dominant
ill-conditioning, (2) Jacobi-scale the system before Cholesky, and (3) send any
row whose scaled pivot falls below 1e-11 (float64; 1e-10 double-float; 1e-5 float), or
whose scaled system has trace(G^-1) (between 1 and N times its inverse smallest
eigenvalue) above the inverse of the same bound (1e-8 for float64 series), to the host,
where it is solved with pyEDM's answer (SVD ``numpy.linalg.lstsq``, minimum-norm on rank
deficiency; most such rows in the library's orthonormal basis, which gives that answer
to rounding in blocks: :mod:`pyedmcl.edm.smap_host`, :mod:`pyedmcl.edm.smap_basis`). Where the lags are nearly
collinear (oversampled smooth series), the states are first rotated to the library's
principal axes (:mod:`pyedmcl.edm.smap_rotation`: distances and least squares unchanged),
where the Jacobi scaling takes the collinearity out and the rows stay on the device. The pivots
alone missed nearly rank-deficient fits (future lags of a one-dimensional map: smallest
pivot 1e-8 at a condition of 6e15), whose device answer was 0.1 off pyEDM's. Where a
local fit is that close to singular, pyEDM's own answer hangs on its SVD's cut-off
(rcond) and the last bits of its weights: rows solved on the host agree with it to
~1e-4 there, not to rounding. Rows with no more neighbours than coefficients
(``knn <= E + 1``: square or underdetermined systems, whose answer is pyEDM's SVD one)
go to the host whatever their pivots. The measured agreement of each path is stated
in ``tests/test_edm_smap.py``; with ``knn`` just above ``E + 1`` the local systems are
ill-conditioned and device rows agree with pyEDM's SVD to about 1e-5 (pyEDM's Lorenz5D
columns, random settings), to ~1e-8 with pyEDM's default knn (the whole library).

Layout on the device: CPUs run one work-item per 8 prediction points, one per
SIMD lane (explicit OpenCL vectors, library values broadcast); GPUs one
work-group per prediction point, with the library streamed through local memory
in tiles and the Gram matrix entries spread over the work-items. Several thetas
(``predict_nonlinear``) run in the same launch (the second grid dimension).

``ridge`` (>= 0) adds ``ridge * ||C_1..C_E||^2`` (the intercept is not penalised)
to the weighted least-squares objective; it regularises ill-conditioned local
fits. pyEDM has no such option; ``ridge=0`` reproduces pyEDM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import get_backend, run_blocked

from .._extremes import extremes
from .._precision import prepare
from ..constant_series import checks_constant
from ..display import Displayable
from ..kernels.smap import SMAP, acc_dtype, accumulation, gemm_scratch_bytes
from ..primitives.knn import knn_device
from ..primitives.ranges import MAX_KNN, resolve
from ..validation import as_series, check_dtype, check_int
from .pyedm_kdtree import exclusion_active, smap_k_query, tree_order
from .results import SimplexResult
from .smap_host import embed_at, solve_host_rows
from .smap_rotation import principal_axes
from .statespace import (
    StateSpace,
    bad_points,
    check_valid_lib,
    filled,
    is_multivariate,
    state_space,
)

#: largest E the S-map kernel is specialised for (its (E+2)(E+3)/2 accumulators are unrolled)
MAX_E = 50

#: pyEDM's PredictNonlinear default thetas.
DEFAULT_THETAS = (0.01, 0.1, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)


# --------------------------------------------------------------------------- results


def _skill(pred: np.ndarray, obs: np.ndarray, obs_finite: np.ndarray | None = None
           ) -> tuple[float, float, float]:
    """Pearson rho, MAE, RMSE over the pairs where both are finite (``obs_finite``:
    ``np.isfinite(obs)``, where the caller has it)."""
    ok = np.isfinite(pred) & (np.isfinite(obs) if obs_finite is None else obs_finite)
    n_ok = int(np.count_nonzero(ok))
    if n_ok < 2:
        return float("nan"), float("nan"), float("nan")
    # every pair finite (the usual case): the arrays themselves, not copies of them
    p, o = (pred, obs) if n_ok == ok.size else (pred[ok], obs[ok])
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = float(np.corrcoef(p, o)[0, 1])
    d = p - o  # (one difference for both: the same values)
    rmse = float(np.sqrt(np.mean(d ** 2)))
    return rho, float(np.mean(np.abs(d, out=d))), rmse


@dataclass
class SMapResult(SimplexResult):
    """S-map predictions: :class:`SimplexResult` plus the local linear models.

    ``coefficients`` is ``(n_pred, E+1)``: ``C0`` then one slope per embedding
    coordinate ``x_t, x_{t-tau}, ...`` (pyEDM's column order); ``variance`` is
    pyEDM's ``Pred_Variance``; ``n_fallback`` counts rows solved on the host
    (ill-conditioned local fits, see the module docstring).
    """

    coefficients: np.ndarray | None = None
    theta: float = 0.0
    n_fallback: int = 0
    #: a state space's column names (coefficients: every column at lag 0, then lag 1, ...)
    columns: tuple[str, ...] | None = None

    def coefficient_names(self, target: str = "x", column: str = "x") -> list[str]:
        """pyEDM's coefficient column names (``∂x/∂x(t-0)``, ...) in our tau sign; a
        state space names each of its columns' lags (``∂x/∂y(t-0)``, ...)."""
        sign = lambda k: "-" if self.tau > 0 or k == 0 else "+"  # noqa: E731  (pyEDM: t-0 first)
        cols = self.columns or (column,)
        lags = (self.coefficients.shape[1] - 1) // len(cols) if self.columns else self.E
        return ["C0"] + [f"∂{target}/∂{c}(t{sign(k)}{k * abs(self.tau)})"
                         for k in range(lags) for c in cols]

    def as_dataframe(self, coefficients: bool = False):
        """time, observed, predicted, variance (+ the coefficient columns)."""
        df = super().as_dataframe()
        if coefficients:
            for i, name in enumerate(self.coefficient_names()):
                df[name] = self.coefficients[:, i]
        return df

    def as_xarray(self):
        """:meth:`SimplexResult.as_xarray` plus, for one target, the local linear models
        as ``coefficients`` over (``time``, ``coefficient``), named as pyEDM names them."""
        ds = super().as_xarray()
        c = self.coefficients
        if c is not None and np.ndim(self.predicted) == 1 and np.ndim(c) == 2:
            tname = next(iter(ds["predicted"].dims))
            ds["coefficients"] = ((tname, "coefficient"), np.asarray(c))
            ds = ds.assign_coords(coefficient=self.coefficient_names())
        return ds


# --------------------------------------------------------------------------- checks


def _check_float(value: Any, name: str, lo: float = 0.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {value!r}") from exc
    if not np.isfinite(v) or v < lo:
        raise ValueError(f"{name}={value!r} is out of range; allowed: finite and >= {lo}")
    return v


def _check_thetas(thetas: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(thetas, dtype=float)) if thetas is not None else None
    if arr is None or arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"thetas={thetas!r}: need a non-empty 1-D list of theta values >= 0")
    for t in arr:
        _check_float(t, "theta")
    return arr


# --------------------------------------------------------------------------- neighbour tables


def _knn_table(x: np.ndarray, lib_t: np.ndarray, pred_t: np.ndarray, E: int, tau: int, knn: int,
               R: int, be=None) -> np.ndarray:
    """pyEDM's S-map neighbour selection for a user ``knn`` below |lib| - 1.

    pyEDM queries the k_query nearest library points (k_query = min(5 knn, |lib|)
    when an exclusion radius applies, knn + 1 when lib and pred overlap, else knn),
    drops the excluded ones and keeps the first knn left; rows left short are
    padded (-1 here). Returns an ``(n_pred, knn)`` table of library positions.
    The k_query nearest (and one more) come from the fused device k-NN kernel when they
    fit it (<= 64), else from a blocked NumPy search; rows whose candidates tie take the
    order of pyEDM's KDTree (:func:`pyedmcl.edm.pyedm_kdtree.tree_order`).
    """
    overlap = bool(np.intersect1d(lib_t, pred_t).size)
    exrad = exclusion_active(lib_t, pred_t, R, overlap)
    n_lib = lib_t.size
    kq = smap_k_query(lib_t, pred_t, knn, R)
    kc = min(kq + 1, n_lib)  # one candidate more: a tie across pyEDM's cut shows
    cand = None
    if be is not None and kc <= MAX_KNN and np.unique(lib_t).size == n_lib:
        cand = _device_candidates(x, lib_t, pred_t, E, tau, kc, be)
    if cand is None:
        cand = _host_candidates(x, lib_t, pred_t, E, tau, kc)
    # tied candidates in the order of pyEDM's tree, which decides which of equally far
    # points fall inside its k_query and which come first (quantised data tie often)
    cand = tree_order(embed_at(x, lib_t, E, tau), embed_at(x, pred_t, E, tau), cand, kq)
    p = pred_t[:, None]
    if exrad:
        bad = np.abs(p - lib_t[cand]) <= R
    elif overlap:
        bad = p == lib_t[cand]
    else:
        bad = np.zeros(cand.shape, bool)
    # the first knn admissible candidates of each row, in distance order (pyEDM's cumsum rule)
    good = ~bad
    rank = np.cumsum(good, axis=1) - 1
    out = np.full((pred_t.size, knn), -1, dtype=np.int32)
    r, c = np.nonzero(good & (rank < knn))
    out[r, rank[r, c]] = cand[r, c]
    return out


def _device_candidates(x, lib_t, pred_t, E, tau, kq, be) -> np.ndarray:
    """The kq nearest library positions per prediction row, by the device k-NN kernel."""
    off = (E - 1) * tau if tau > 0 else 0
    real = "double" if be.info.fp64 else "float"
    xd = be.to_device(x.astype(np.float64 if real == "double" else np.float32))
    order = np.argsort(lib_t)
    lpts = (lib_t[order] - off).astype(np.int32)
    qpts = (pred_t - off).astype(np.int32)

    def rows(q0: int, q1: int) -> np.ndarray:  # query blocks when the table does not fit
        t = knn_device(be, xd, x.shape[0], E=E, tau=abs(tau), k=kq, qpts=qpts[q0:q1],
                       lpts=lpts, radius=-1, real=real, **_nc(x))
        return be.to_host(t.idx)[0]

    idx = np.concatenate(run_blocked(be, rows, qpts.size, what=f"S-map k-NN table (k={kq})",
                                     parameter="knn or the number of prediction rows",
                                     nbytes=lambda q: q * kq * 8))
    if np.any(idx < 0):
        return None
    pos = np.empty(x.shape[0], dtype=np.int64)
    pos[lib_t - off] = np.arange(lib_t.size)
    return pos[idx]


def _host_candidates(x, lib_t, pred_t, E, tau, kq) -> np.ndarray:
    """The kq nearest library positions per prediction row (blocked NumPy, float64)."""
    XL = embed_at(x, lib_t, E, tau)
    XP = embed_at(x, pred_t, E, tau)
    n_lib = lib_t.size
    block = max(1, min(512, (1 << 23) // max(1, n_lib * E)))
    out = np.empty((pred_t.size, kq), dtype=np.int64)
    for b0 in range(0, pred_t.size, block):
        d2 = ((XP[b0:b0 + block, None, :] - XL[None, :, :]) ** 2).sum(-1)
        c = (np.argpartition(d2, kq - 1, axis=1)[:, :kq] if kq < n_lib
             else np.broadcast_to(np.arange(n_lib), d2.shape).copy())
        o = np.argsort(np.take_along_axis(d2, c, 1), axis=1, kind="stable")
        out[b0:b0 + block] = np.take_along_axis(c, o, 1)
    return out


# --------------------------------------------------------------------------- core


def smap_core(x: np.ndarray, y: np.ndarray, lib_t: np.ndarray, pred_t: np.ndarray, *, E: int,
              tau: int, Tp: int, thetas: np.ndarray, knn: int | None, exclusion_radius: int,
              ridge: float, dtype: Any, device: Any, backend: str | None,
              params: dict | None = None, accumulate: str | None = None,
              timing: dict | None = None,
              observed_ok: np.ndarray | None = None, rotate: bool = True,
              host_rows: list | None = None) -> list[SMapResult]:
    """S-map for resolved (validated) inputs: one :class:`SMapResult` per theta.

    ``lib_t``/``pred_t`` are time indices into ``x`` with a full embedding
    (``0 <= t - k tau < n`` for every k < E); library times also need ``t + Tp``
    inside ``y``.
    ``accumulate``: "double" (default where the device has fp64), "df"
    (double-float: float32 pairs with error-free transformations, the default
    without fp64) or "float" (plain float32, fastest, least accurate). ``timing``, if a
    dict, receives ``kernel_s`` (device time of the launch) and ``params``.
    ``rotate``: run nearly collinear states in their principal axes
    (:mod:`pyedmcl.edm.smap_rotation`). ``host_rows``: a list that receives the (theta,
    row) mask of the rows for the host, left NaN for the caller to solve (a rotated call's
    rows are solved in the data's coordinates).
    """
    if rotate:  # nearly collinear lags: the states in their principal axes (smap_rotation)
        axes = principal_axes(x, lib_t, pred_t, E=E, tau=tau, knn=knn, R=int(exclusion_radius))
        if axes is not None:
            pending: list = []
            res = axes.unrotate(smap_core(
                axes.Y, y, lib_t, pred_t, E=1, tau=1, Tp=Tp, thetas=thetas, knn=knn,
                exclusion_radius=exclusion_radius, ridge=ridge, dtype=dtype, device=device,
                backend=backend, params=params, accumulate=accumulate, timing=timing,
                observed_ok=observed_ok, rotate=False, host_rows=pending))
            _rows_on_the_host(res, pending[0], x, y, lib_t, pred_t, E=E, tau=tau, Tp=Tp,
                              thetas=thetas, knn=knn, R=int(exclusion_radius), ridge=ridge)
            return res
    be = get_backend(device, backend)
    # float32's merge check runs beside the device's work (started with the launch, its
    # verdict asked below)
    k = _kernel_inputs(x, y, ridge, dtype, accumulate, be.info, deferred="gated")
    R = int(exclusion_radius)
    # neighbour tables and the host fallback rows (minimum-norm SVD, which is not
    # affine-invariant) use the data as given, as pyEDM does
    mode, knn_eff, nbr = _neighbours(x, lib_t, pred_t, E, tau, knn, R, be)
    nc = 1 if x.ndim == 1 else x.shape[1]
    spec = SMAP.spec_for(E * nc, tau, k.dtype, k.acc, mode, nc)
    checked = params is None
    if checked:
        params = SMAP.checked_params(be, spec, lib_t.size)
    host: dict[str, Any] = {}  # the host's share, computed while the kernel runs

    def beside() -> None:
        host["ylib"] = ylib = y[lib_t + Tp]  # the targets as given (fallback rows)
        host["nan_targets"] = bool(np.isnan(ylib).any())
        # no more neighbours than coefficients: a square or underdetermined system, whose
        # answer pyEDM takes from the SVD (the minimum-norm one where it is not unique);
        # the device's normal equations can pass their pivot test there and give another
        host["few"] = (_few_neighbours(nbr, knn_eff, spec["E"] + 1, pred_t.size)
                       if ridge == 0 else None)
        host["observed"] = _observed(y, pred_t, Tp, observed_ok)
        if not (k.fx.is_identity and k.fy.is_identity):  # the slopes' array, mapped now
            host["slopes"] = _mapped((thetas.size, pred_t.size, spec["E"]))

    out = _solve_on_device(be, spec, params, k, lib_t, pred_t, Tp, thetas, R, knn_eff, nbr,
                           timing is not None, beside)
    if checked:
        out, params = _again_if_failed(be, spec, params, out, lambda p: _solve_on_device(
            be, spec, p, k, lib_t, pred_t, Tp, thetas, R, knn_eff, nbr, timing is not None))
    pred, coef, var, status, kernel_s = out
    if not k.float32_holds():  # warned: the call as it runs in float64
        return smap_core(x, y, lib_t, pred_t, E=E, tau=tau, Tp=Tp, thetas=thetas, knn=knn,
                         exclusion_radius=exclusion_radius, ridge=ridge, dtype=np.float64,
                         device=be, backend=None, params=params, accumulate="double",
                         timing=timing, observed_ok=observed_ok, rotate=rotate,
                         host_rows=host_rows)
    if timing is not None:
        timing["kernel_s"] = kernel_s
        timing["params"] = dict(params)
    pred, coef, var = _to_data_units(pred, coef, var, k, E, host.get("slopes"))
    if host["nan_targets"]:  # NaN targets: pyEDM's rule, on the host
        status[status == 0] = 1
    few = host["few"]
    if few is not None and few.any():
        status[:, few] = np.where(status[:, few] == 0, 1, status[:, few])
    if host_rows is not None:  # the caller solves them
        host_rows.append(status == 1)
    else:
        solve_host_rows(pred, coef, var, status, x, host["ylib"], lib_t, pred_t, E=E, tau=tau,
                        thetas=thetas, nbr=nbr, R=R, knn=knn_eff, ridge=ridge)
    return _results(pred, coef, var, status, host["observed"], pred_t, E=E, tau=tau, Tp=Tp,
                    knn=knn_eff, thetas=thetas)


def _rows_on_the_host(res: list[SMapResult], rows: np.ndarray, x, y, lib_t, pred_t, *, E, tau,
                      Tp, thetas, knn, R, ridge) -> None:
    """The (theta, row) mask ``rows`` of ``res`` (one result per theta) solved on the host
    from the data as given, in place, and the skills taken again."""
    if not rows.any():
        return
    pred = np.stack([r.predicted for r in res])
    coef = np.stack([r.coefficients for r in res])
    var = np.stack([r.variance for r in res])
    n_lib = lib_t.size
    solve_host_rows(pred, coef, var, rows.astype(np.int32), x, y[lib_t + Tp], lib_t, pred_t,
                    E=E, tau=tau, thetas=thetas, nbr=None, R=R,
                    knn=n_lib - 1 if knn is None else min(int(knn), n_lib), ridge=ridge)
    for i, r in enumerate(res):
        r.predicted, r.coefficients, r.variance = pred[i], coef[i], var[i]
        r.rho, r.mae, r.rmse = _skill(r.predicted, r.observed)


#: a launch whose rows fail the device's tests beyond this fraction (of those it solved or
#: sent to the host) runs again with :meth:`SMapKernel.alternative`: parameters that pass
#: their probe may still fail at a larger library (decision 0155)
AGAIN_FRACTION = 0.5


def _again_if_failed(be: Any, spec: dict[str, Any], params: Any, out: tuple,
                     solve: Callable[[Any], tuple]) -> tuple[tuple, Any]:
    """``out`` (:func:`_solve_on_device`'s) and its parameters, or, where more than
    :data:`AGAIN_FRACTION` of its rows failed the device's tests, the launch again with the
    alternative parameters where they fail at most a quarter as many (the first then
    marked failed). On data whose local fits are truly ill-conditioned both fail alike:
    one launch more, beside the host's SVD of every such row."""
    status = out[3]
    tested = int(np.count_nonzero((status == 0) | (status == 1)))
    failed = int(np.count_nonzero(status == 1))
    alt = SMAP.alternative(be, spec, params) if failed > AGAIN_FRACTION * tested else None
    if alt is None:
        return out, params
    again = solve(alt)
    if 4 * np.count_nonzero(again[3] == 1) <= failed:  # (ill-conditioned data: both fail)
        SMAP.mark_failed(be, spec, params)
        return again, alt
    return out, params


@dataclass
class _KernelInputs:
    """What the kernel fits: x and y in its storage type's coordinates (float32: centred
    and scaled in float64, :mod:`pyedmcl._precision`), the maps back to data units, the
    storage dtype, the accumulation (ACC) and the ridge in those coordinates."""

    x: np.ndarray
    y: np.ndarray
    fx: Any
    fy: Any
    dtype: np.dtype
    acc: str
    ridge: float
    #: the verdict of a deferred float32 merge check (:meth:`.Prepared.float32_holds`:
    #: False after warning that the call runs in float64); True where none was deferred
    float32_holds: Callable[[], bool] = lambda: True
    #: starts a gated merge check (:meth:`.Prepared.start_check`; idempotent)
    start_check: Callable[[], None] = lambda: None


def _kernel_inputs(x, y, ridge, dtype, accumulate, info, deferred: bool | str = False
                   ) -> _KernelInputs:
    """``deferred``: a 1-D series' float32 merge check runs in the background (the caller
    asks :attr:`_KernelInputs.float32_holds` before it returns anything); "gated": from
    :attr:`_KernelInputs.start_check` on (the caller starts it beside the device's work)."""
    dt = check_dtype(np.float32 if dtype is None else dtype, info)
    accumulate = accumulation(info, accumulate)
    y = filled(y, 0)  # NaN targets: rows the host solves (pyEDM's rule); never on the device
    if x.ndim == 2:  # a state space: columns centred, not scaled (distances across columns)
        return _state_inputs(x, y, ridge, dt, accumulate, info)
    # float32's reach after standardising from each series' extremes (the call's own,
    # :mod:`pyedmcl._extremes`; finite series: validated)
    if y is x:  # x predicts itself: standardised (and its merges checked) once
        prep = prepare([x], dt, info.fp64, names=["x"], what="S-map", deferred=deferred,
                       extremes=[extremes(x)[::-1]])
        prep.series, prep.affine = prep.series * 2, prep.affine * 2
    else:
        prep = prepare([x, y], dt, info.fp64, names=["x", "target"], what="S-map",
                       deferred=deferred, extremes=[extremes(x)[::-1], extremes(y)[::-1]])
    if prep.dtype != dt:  # a switch to float64 needs float64 accumulation
        dt, accumulate = prep.dtype, "double"
    (xs, ys), (fx, fy) = prep.series, prep.affine
    # ridge ||C||^2 in data units = sy^2 (ridge / sx^2) ||C'||^2
    ridge = ridge / float(fx.scale[0]) ** 2
    if acc_dtype(accumulate) == np.float32 and dt == np.float64:
        raise ValueError("dtype=float64 needs float64 accumulation; use dtype=float32")
    return _KernelInputs(xs, ys, fx, fy, dt, accumulate, ridge, prep.float32_holds,
                         prep.start_check)


def _state_inputs(x, y, ridge, dt, accumulate, info) -> _KernelInputs:
    """:func:`_kernel_inputs` of an ``(L, m)`` state space: each column centred in
    float64 (distances are shift-invariant per column), the target standardised."""
    px = prepare([x.T], dt, info.fp64, names=["x"], scale=False, what="S-map")
    py = prepare([y], px.dtype, info.fp64, names=["target"], what="S-map")
    if py.dtype != px.dtype:
        px = prepare([x.T], py.dtype, info.fp64, names=["x"], scale=False, what="S-map")
    dt = py.dtype
    if dt == np.float64:
        accumulate = "double"
    if acc_dtype(accumulate) == np.float32 and dt == np.float64:
        raise ValueError("dtype=float64 needs float64 accumulation; use dtype=float32")
    fy = py.affine[0]
    return _KernelInputs(np.ascontiguousarray(px.series[0].T), py.series[0], px.affine[0], fy,
                         dt, accumulate, ridge)


def _nc(x: np.ndarray) -> dict:
    """knn_device's column count of ``x`` (a series: nothing to pass)."""
    return {} if x.ndim == 1 else {"nc": x.shape[1]}


def _neighbours(x, lib_t, pred_t, E, tau, knn, R, be) -> tuple[str, int, np.ndarray | None]:
    """The kernel's MODE, pyEDM's knn after its defaulting, and the neighbour table.

    "all": every library point outside the exclusion radius (minus the farthest when
    knn = |lib| - 1 asks for it); "table": pyEDM's neighbour table, whose semantics
    differ from "all minus the farthest" only for knn below |lib| - 1.
    """
    n_lib = lib_t.size
    knn_eff = n_lib - 1 if knn is None else min(int(knn), n_lib)
    if knn is not None and knn_eff < n_lib - 1:
        return "table", knn_eff, _knn_table(x, lib_t, pred_t, E, tau, knn_eff, R, be)
    return "all", knn_eff, None


def _few_neighbours(nbr: np.ndarray | None, knn_eff: int, unknowns: int, n_pred: int
                    ) -> np.ndarray:
    """Rows whose local regression has no more neighbours than ``unknowns`` coefficients
    (from the neighbour table where there is one, else the knn every row has)."""
    if nbr is not None:
        return (nbr >= 0).sum(axis=1) <= unknowns
    return np.full(n_pred, knn_eff <= unknowns)


def _solve_on_device(be, spec, params, k: _KernelInputs, lib_t, pred_t, Tp, thetas, R, knn_eff,
                     nbr, timed: bool, beside: Callable[[], None] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Every (theta, prediction row) problem on the device, in blocks of rows that fit
    its memory: predictions, coefficients, variances (in the kernel's coordinates),
    status codes (1: for the host fallback) and, if ``timed``, the summed kernel time.
    ``beside``: host work run once the first block's launch and reads are enqueued (the
    device computes meanwhile), as are the state vectors that map the intercepts back."""
    E = spec["E"]
    acc = acc_dtype(spec["ACC"])
    n_pred, n_theta = pred_t.size, thetas.size
    ylib = k.y[lib_t + Tp]
    ymean = float(ylib.mean())
    xmean = float(k.x.mean()) if k.x.ndim == 1 else k.x.mean(axis=0)
    common = {
        "x": be.to_device((k.x - xmean).astype(k.dtype), copy=False),
        "ylib": be.to_device((ylib - ymean).astype(k.dtype), copy=False),
        "n_lib": lib_t.size, "thetas": be.to_device(thetas.astype(acc)), "excl_r": R,
        "knn": knn_eff, "K": 0 if nbr is None else nbr.shape[1], "ridge": k.ridge,
    }
    pred32 = pred_t.astype(np.int32)
    pred_all = None
    if lib_t.size <= n_pred and np.array_equal(lib_t, pred_t[:lib_t.size]):
        # the library rows are the first prediction rows (leave-one-out): one upload
        # holds both lists (the kernel reads lib_t[0 .. n_lib - 1])
        pred_all = common["lib_t"] = be.to_device(pred32, copy=False)
    else:
        common["lib_t"] = be.to_device(lib_t.astype(np.int32), copy=False)
    XP: list[np.ndarray] = []

    def rows(p0: int, p1: int):
        # prediction rows p0:p1 (outputs are per row and theta: rows are independent)
        m = p1 - p0
        whole = pred_all is not None and m == n_pred
        args = {
            **common,
            "pred_t": pred_all if whole else be.to_device(pred32[p0:p1]),
            # (no table: "all" mode never reads it, any int buffer stands in)
            "nbr": be.to_device(nbr[p0:p1].ravel()) if nbr is not None else common["lib_t"],
            **SMAP.outputs(be, spec, m, n_theta),
        }
        ev = SMAP.launch(be, params, spec, args, m, n_theta)
        wait = SMAP.enqueue_reads(be, spec, args, m, n_theta)
        if not XP:  # the host's share, beside the first block's kernel
            be.flush()
            k.start_check()  # float32's merge check (gated: not beside the work before)
            # back from coordinates centred on the prediction point (below)
            XP.append(embed_at(k.x, pred_t, E // spec["NC"], spec["TAU"]))
            if beside is not None:
                beside()
        secs = sum(be.event_seconds(e) for e in ev) if timed else 0.0
        out = (*wait(), secs)
        if params["VARIANT"] == "gemm":
            out = _redo_centred(be, spec, params, common, pred32[p0:p1], n_theta, out, timed)
        return out

    blocks = run_blocked(be, rows, n_pred, parameter="the number of prediction rows (pred) or thetas",
                         what=f"S-map outputs ({n_theta} thetas x {n_pred} rows x E+1={E + 1})",
                         nbytes=lambda m: n_theta * m * ((E + 1) * np.dtype(acc).itemsize + (
                             gemm_scratch_bytes(E) if params["VARIANT"] == "gemm" else 0)))
    pred, coef, var, status = (blocks[0][:4] if len(blocks) == 1 else
                               (np.concatenate([b[i] for b in blocks], axis=1) for i in range(4)))
    # back from coordinates centred on the prediction point (and the target mean), in
    # place: (C0 + ymean) - sum_k C_k XP_k as before, no temporaries of the outputs' size
    pred += ymean
    shifts = np.einsum("tpk,pk->tp", coef[:, :, 1:], XP[0])
    c0 = coef[:, :, 0]
    c0 += ymean
    c0 -= shifts
    return pred, coef, var, status, sum(b[4] for b in blocks)


#: the gemm variant's status of a row whose test its shift's rounding failed (a centred
#: solve may pass): solved again by the group variant (:func:`_redo_centred`)
REDO_CENTRED = 4


def _redo_centred(be, spec, params, common, pred_rows, n_theta, out, timed) -> tuple:
    """The gemm variant's rows of status :data:`REDO_CENTRED` solved again on the device by
    the group variant (sums centred on each prediction point: no shift to round), every
    theta of those rows launched, the flagged (theta, row) entries taken."""
    pred, coef, var, status, secs = out
    redo = np.flatnonzero((status == REDO_CENTRED).any(axis=0))
    if redo.size == 0:
        return out
    group = SMAP.fit({**params, "VARIANT": "group", "RB": "auto"}, be.info, spec["E"])
    args = {**common, "pred_t": be.to_device(np.ascontiguousarray(pred_rows[redo])),
            "nbr": common["lib_t"], **SMAP.outputs(be, spec, redo.size, n_theta)}
    ev = SMAP.launch(be, group, spec, args, redo.size, n_theta)
    again = SMAP.read_outputs(be, spec, args, redo.size, n_theta)
    take = status[:, redo] == REDO_CENTRED
    for whole, part in zip((pred, coef, var, status), again, strict=True):
        sub = whole[:, redo]
        sub[take] = part[take]
        whole[:, redo] = sub
    return pred, coef, var, status, secs + (sum(be.event_seconds(e) for e in ev) if timed else 0.0)


def _mapped(shape: tuple[int, ...]) -> np.ndarray:
    """A float64 array of ``shape`` with its memory mapped (written once): made while the
    kernel runs, the products written into it after cost no page faults."""
    a = np.empty(shape)
    a.fill(0.0)
    return a


def _to_data_units(pred, coef, var, k: _KernelInputs, lags: int = 1,
                   out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fits on x' = (x - mx)/sx, y' = (y - my)/sy mapped back to x and y (a state space:
    one shift per column, ``lags`` coefficients each, no scale). ``out``: a C-contiguous
    array of the slopes' shape for them (the layout their product takes anyway)."""
    if k.fx.is_identity and k.fy.is_identity:
        return pred, coef, var
    sx, mx = float(k.fx.scale[0]), float(k.fx.shift[0])
    if k.x.ndim == 2:
        sy, my = float(k.fy.scale[0]), float(k.fy.shift[0])
        slopes = np.multiply(coef[:, :, 1:], sy, out=out)
        mxv = np.tile(k.fx.shift, lags)
        c0 = (my + sy * coef[:, :, :1]) - (slopes * mxv).sum(axis=2, keepdims=True)
        coef[:, :, 1:] = slopes  # (into the call's own array, as below)
        coef[:, :, :1] = c0
        return _scaled(pred, var, sy, my), coef, var
    sy, my = float(k.fy.scale[0]), float(k.fy.shift[0])
    # y' = C0' + sum_k C'_k x'_k gives y = my + sy C0' + sum_k (sy/sx) C'_k (x_k - mx),
    # i.e. C_k = (sy/sx) C'_k and C0 = my + sy C0' - mx sum_k C_k; predictions sy p' + my;
    # variances sy^2 v'. Written back into ``coef`` (the call's own): no new array of its
    # size (the slopes are still summed as a contiguous array of their own)
    slopes = np.multiply(coef[:, :, 1:], sy / sx, out=out)
    c0 = (my + sy * coef[:, :, :1]) - mx * slopes.sum(axis=2, keepdims=True)
    coef[:, :, 1:] = slopes
    coef[:, :, :1] = c0
    return _scaled(pred, var, sy, my), coef, var


def _scaled(pred: np.ndarray, var: np.ndarray, sy: float, my: float) -> np.ndarray:
    """``pred * sy + my`` and ``var * sy ** 2`` in place (the arrays are the call's own):
    the same operations, no new arrays. Returns ``pred``."""
    pred *= sy
    pred += my
    var *= sy ** 2
    return pred


def _observed(y, pred_t, Tp, observed_ok) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The target times, the observed values (NaN where none: ``observed_ok``, the plan's
    rule, :func:`pyedmcl.primitives.ranges.observed`; None: every target time inside the
    data) and where those are finite."""
    times = pred_t + Tp
    obs = np.full(pred_t.size, np.nan)
    inside = observed_ok if observed_ok is not None else (times >= 0) & (times < y.size)
    obs[inside] = y[times[inside]]
    return times, obs, np.isfinite(obs)


def _results(pred, coef, var, status, observed, pred_t, *, E, tau, Tp, knn, thetas
             ) -> list[SMapResult]:
    """One :class:`SMapResult` per theta, with the observed values and skills
    (``observed``: :func:`_observed`'s)."""
    times, obs, finite = observed
    out = []
    for i in range(thetas.size):
        rho, mae, rmse = _skill(pred[i], obs, finite)
        out.append(SMapResult(predicted=pred[i], observed=obs, times=times, rho=rho, mae=mae,
                              rmse=rmse, E=E, tau=tau, Tp=Tp, knn=knn, variance=var[i],
                              pred_times=pred_t, coefficients=coef[i], theta=float(thetas[i]),
                              n_fallback=int(np.sum(status[i] == 1))))
    return out


# --------------------------------------------------------------------------- public API


def _prepare(x, target, E, tau, Tp, knn, exclusion_radius, lib, pred, ridge):
    xs = as_series(x, "x")
    ys = xs if target is None else as_series(target, "target")
    if ys.size != xs.size:
        raise ValueError(f"target has {ys.size} values but x has {xs.size}; they must align")
    E = check_int(E, "E", 1, MAX_E)
    ridge = _check_float(ridge, "ridge")
    plan = resolve(xs.size, E=E, tau=tau, Tp=Tp, knn=1, exclusion_radius=exclusion_radius,
                   lib=lib, pred=pred, max_knn=None)
    if plan.lib_times.size < 2:
        raise ValueError(f"lib={lib!r} gives {plan.lib_times.size} library vectors for E={E}, "
                         f"tau={tau}, Tp={Tp}; allowed: at least 2 (widen lib)")
    if knn is not None and not (isinstance(knn, int | np.integer) and int(knn) == 0):
        knn = check_int(knn, "knn", 1, int(plan.lib_times.size))
    else:
        knn = None  # pyEDM's S-map default: every library point
    return (xs, ys, plan.E, plan.tau, plan.Tp, plan.exclusion_radius, ridge, plan.lib_times,
            plan.pred_times, knn, plan.observed_mask)


@checks_constant("smap", ("x", "target"))
def smap(x, target=None, *, E: int | None = None, tau: int = 1, Tp: int = 1, theta: float,
         knn: int | None = None, exclusion_radius: int = 0, lib=None, pred=None,
         ridge: float = 0.0, dtype: Any = "float32", device: Any = None,
         backend: str | None = None, return_device: bool = False, columns: Any = None,
         embedded: bool = False, valid_lib: Any = None) -> SMapResult:
    """S-map forecast of ``target`` (default ``x``) ``Tp`` steps ahead from x's embedding.

    ``E`` embedding dimension, ``tau`` > 0 lag into the past (coordinates
    ``x_t, x_{t-tau}, ...``), ``theta`` >= 0 localisation, ``knn`` neighbours
    (default: all library points, pyEDM's S-map default), ``exclusion_radius``
    rows around each prediction row left out of its library, ``lib`` / ``pred``
    pyEDM-style 1-based inclusive ``start stop`` pairs (default: the whole series,
    i.e. leave-one-out; see :mod:`pyedmcl.primitives.ranges`),
    ``ridge`` >= 0 Tikhonov penalty on the slopes, ``dtype`` float32 (default) or
    float64 storage of the series. Returns an :class:`SMapResult`.

    Device arrays in are copied to the host once (the ill-conditioned rows are solved
    there); ``return_device=True`` gives ``predicted`` as a device array in the storage
    dtype (see :mod:`pyedmcl.interop`).

    State spaces, missing data and ``valid_lib`` as in :func:`pyedmcl.simplex`: ``x``
    2-D or a DataFrame, ``columns``, ``target`` a column or a series, ``E`` lags of each
    column or ``embedded=True``; ``coefficients`` then hold ``C0`` and one slope per
    state-vector component in pyEDM's Embed order (every column at lag 0, then at
    lag 1, ...): the Jacobian row of the target. A NaN target at a library row leaves that row out of the fit
    but not of the neighbours' mean distance (pyEDM's rule; such calls are solved on
    the host, row by row).
    """
    from ..interop import backend_for, output, to_backend

    if is_multivariate(x, columns, embedded, valid_lib, target):
        if return_device:
            raise ValueError("return_device=True takes a finite 1-D series; state spaces "
                             "(2-D x, columns, embedded, valid_lib, NaN) return host arrays")
        ss = state_space(x, target, columns=columns, embedded=embedded)
        return smap_states(ss, E=E, tau=tau, Tp=Tp, theta=_check_float(theta, "theta"), knn=knn,
                           exclusion_radius=exclusion_radius, lib=lib, pred=pred, ridge=ridge,
                           valid_lib=valid_lib, dtype=dtype, device=device, backend=backend)[0]
    if E is None:
        raise ValueError(f"E is required (the embedding dimension, 1 <= E <= {MAX_E})")
    be = backend_for((x, target), device, backend)
    xs, ys, E, tau, Tp, R, ridge, lib_t, pred_t, knn, seen = _prepare(
        x, target, E, tau, Tp, knn, exclusion_radius, lib, pred, ridge)
    th = np.array([_check_float(theta, "theta")])
    res = smap_core(xs, ys, lib_t, pred_t, E=E, tau=tau, Tp=Tp, thetas=th, knn=knn,
                    exclusion_radius=R, ridge=ridge, dtype=dtype, device=be, backend=None,
                    observed_ok=seen)[0]
    if return_device:
        dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
        res.predicted = output(be, to_backend(be, res.predicted, dt), True)
    return res


@dataclass
class PredictNonlinearResult(Displayable):
    """S-map skill per theta (pyEDM's PredictNonlinear), plus every per-theta result."""

    thetas: np.ndarray
    rho: np.ndarray
    mae: np.ndarray
    rmse: np.ndarray
    results: list[SMapResult]
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)

    def as_dataframe(self):
        import pandas as pd

        return pd.DataFrame({"theta": self.thetas, "rho": self.rho, "mae": self.mae,
                             "rmse": self.rmse})


@checks_constant("predict_nonlinear", ("x", "target"))
def predict_nonlinear(x, target=None, *, E: int | None = None, tau: int = 1, Tp: int = 1,
                      thetas=None, knn: int | None = None, exclusion_radius: int = 0, lib=None,
                      pred=None, ridge: float = 0.0, dtype: Any = "float32", device: Any = None,
                      backend: str | None = None, columns: Any = None, embedded: bool = False,
                      valid_lib: Any = None) -> PredictNonlinearResult:
    """S-map skill over many theta values in one device launch (default: pyEDM's thetas).

    State spaces, missing data and ``valid_lib`` as in :func:`smap`."""
    if is_multivariate(x, columns, embedded, valid_lib, target):
        ss = state_space(x, target, columns=columns, embedded=embedded)
        th = _check_thetas(DEFAULT_THETAS if thetas is None else thetas)
        res = smap_states(ss, E=E, tau=tau, Tp=Tp, theta=th, knn=knn,
                          exclusion_radius=exclusion_radius, lib=lib, pred=pred, ridge=ridge,
                          valid_lib=valid_lib, dtype=dtype, device=device, backend=backend)
        return PredictNonlinearResult(th, np.array([r.rho for r in res]),
                                      np.array([r.mae for r in res]),
                                      np.array([r.rmse for r in res]), res)
    if E is None:
        raise ValueError(f"E is required (the embedding dimension, 1 <= E <= {MAX_E})")
    xs, ys, E, tau, Tp, R, ridge, lib_t, pred_t, knn, seen = _prepare(
        x, target, E, tau, Tp, knn, exclusion_radius, lib, pred, ridge)
    th = _check_thetas(DEFAULT_THETAS if thetas is None else thetas)
    res = smap_core(xs, ys, lib_t, pred_t, E=E, tau=tau, Tp=Tp, thetas=th, knn=knn,
                    exclusion_radius=R, ridge=ridge, dtype=dtype, device=device, backend=backend,
                    observed_ok=seen)
    return PredictNonlinearResult(th, np.array([r.rho for r in res]), np.array([r.mae for r in res]),
                                  np.array([r.rmse for r in res]), res)


def smap_states(ss: StateSpace, *, E: Any, tau: int, Tp: int, theta: Any, knn: Any,
                exclusion_radius: int, lib: Any, pred: Any, ridge: float, valid_lib: Any,
                dtype: Any, device: Any, backend: str | None) -> list[SMapResult]:
    """S-map of one target from the state space ``ss`` (see :func:`smap`), one result per
    theta of ``theta`` (a number or a list: one launch for all)."""
    if ss.targets.shape[0] != 1:
        raise ValueError("S-map takes one target; pass a single column name or series")
    if ss.embedded:  # pyEDM: E is the column count
        E = ss.nc
    elif E is None:
        raise ValueError("E is required (the number of lags of each column) unless embedded=True")
    E = check_int(E, "E", 1, MAX_E)
    lags = ss.lags(E)
    if lags * ss.nc > MAX_E:
        raise ValueError(f"E={E} lags of {ss.nc} columns give {lags * ss.nc} state components; "
                         f"allowed: at most {MAX_E}")
    ridge = _check_float(ridge, "ridge")
    th = _check_thetas(theta)
    plan = resolve(ss.n, E=lags, tau=tau, Tp=Tp, knn=1, exclusion_radius=exclusion_radius,
                   lib=lib, pred=pred, max_knn=None)
    bad = bad_points(ss.data, lags, plan.tau)
    keep = ~bad[plan.lib_points]
    vl = check_valid_lib(valid_lib, ss.n)
    if vl is not None:
        keep &= vl[plan.lib_times]
    lib_t = plan.lib_times[keep]
    qmask = ~bad[plan.pred_points]
    pred_t = plan.pred_times[qmask]
    if lib_t.size < 2:
        raise ValueError(f"{lib_t.size} library rows remain after removing NaN state vectors "
                         "and rows valid_lib excludes; allowed: at least 2")
    if knn is not None and not (isinstance(knn, int | np.integer) and int(knn) == 0):
        knn = check_int(knn, "knn", 1, int(lib_t.size))
    else:
        knn = None
    nq, D = plan.pred_times.size, lags * ss.nc
    y = ss.targets[0]
    X = filled(ss.data, 0) if ss.nc > 1 else filled(ss.data, 0)[:, 0]
    rs = (smap_core(X, y, lib_t, pred_t, E=lags, tau=plan.tau, Tp=plan.Tp, thetas=th, knn=knn,
                    exclusion_radius=plan.exclusion_radius, ridge=ridge, dtype=dtype,
                    device=device, backend=backend) if pred_t.size else [None] * th.size)
    times = plan.pred_times + plan.Tp
    obs = np.full(nq, np.nan)
    inside = plan.observed_mask
    obs[inside] = y[times[inside]]
    out = []
    for theta_i, r in zip(th, rs, strict=True):
        pred_all, var_all = np.full(nq, np.nan), np.full(nq, np.nan)
        coef_all = np.full((nq, D + 1), np.nan)
        n_fb, knn_eff = 0, (lib_t.size - 1 if knn is None else knn)
        if r is not None:
            pred_all[qmask], var_all[qmask] = r.predicted, r.variance
            coef_all[qmask] = r.coefficients
            n_fb, knn_eff = r.n_fallback, r.knn
        rho, mae, rmse = _skill(pred_all, obs)
        out.append(SMapResult(predicted=pred_all, observed=obs, times=times, rho=rho, mae=mae,
                              rmse=rmse, E=E, tau=plan.tau, Tp=plan.Tp, knn=knn_eff,
                              variance=var_all, pred_times=plan.pred_times,
                              coefficients=coef_all, theta=float(theta_i), n_fallback=n_fb,
                              columns=ss.names))
    return out
