"""Drop-in replacement for pyEDM's functional API: ``import pyedmcl.compat.pyedm as EDM``.

Same function names, keyword arguments, defaults and DataFrames as pyEDM 2.5
(``Simplex``, ``SMap``, ``CCM``, ``EmbedDimension``, ``PredictInterval``,
``PredictNonlinear``, ``PredictExclusionRadius``, ``Embed``, ``ComputeError``),
*including pyEDM's sign of tau* (``tau=-1``: lags into the past). The
computation runs on pyedmcl's OpenCL kernels; pick a device with the extra
keyword ``device=`` or ``PYEDMCL_DEVICE``.

Every pyEDM 2.5 argument is taken: multivariate ``columns``, ``embedded``, NaN rows,
``validLib``, ``generateSteps``, ``returnObject``, S-map ``solver=``, ``Multiview``,
``sampleData`` and ``noTime``. Univariate calls without those run pyedmcl's fused
device pipeline where no two delay vectors lie at (nearly) equal distances from a
third (:func:`_ties_decide`), plain ``embedded=True`` S-map calls too
(:func:`_embedded_smap`), and S-map on any data (its ties, which of equally far points
fall inside pyEDM's neighbour query and which farthest point is left out, are decided by
a tree built as pyEDM's: :mod:`pyedmcl.edm.pyedm_kdtree`); the rest runs pyEDM's row
bookkeeping (:mod:`._pyedm_run`, :mod:`._pyedm_ccm`) with the neighbour search on the
device, where equal distances are decided as pyEDM decides them: query rows whose
candidates tie are asked again of a scipy KDTree built as pyEDM builds it. scipy is optional: without it the device's
order (distance, ``|p - l|``, ``l``) decides those ties. The module-level
``dtype`` ("float64" by default, as pyEDM) sets the computation precision. Plot
arguments are accepted and ignored; ``numProcess``/``mpMethod``/``kdWorkers``/
``parallel`` have no meaning here. Two results differ on purpose, both with a negative
``Tp`` at the data's start, where pyEDM 2.5.7 shifts its predictions against their
times (first prediction before the first row) or, with no lag before the first row
(``E=1`` or ``tau > 0``), reads the series' last value as a library row's target (a
wrapped index); here each prediction stays at its time and such rows are left out of
the library. ``Multiview(excludeTarget=True)`` leaves the target's lags out of the views,
as pyEDM documents it (pyEDM 2.5.7 never leaves one out), and S-map's fused path returns
NaN ``singularValues`` (docs/from_pyedm.md).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
from typing import Any

import numpy as np
import pandas as pd

from ._sample_data import SampleData

#: computation dtype of every call: float64 by default, as pyEDM, whose users compare
#: printed decimals; set ``pyedmcl.compat.pyedm.dtype = "float32"`` for speed on GPUs
#: without fast float64 (results then agree with pyEDM to float32 precision).
dtype = "float64"

#: pyEDM's example data sets by pyEDM's names (read from an installed pyEDM)
sampleData = SampleData()

__all__ = ["sampleData", "dtype", "CrossMap_Matrix", "EmbedDim_Columns", "MakeBlock", "SurrogateData", "PlotObsPred", "PlotCoeff",
           "CCM", "ComputeError", "Embed", "EmbedDimension", "Multiview", "PredictExclusionRadius",
           "PredictInterval", "PredictNonlinear", "SMap", "Simplex"]


def _names(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return v.split()
    return [str(c) for c in v]


def _column(df: pd.DataFrame, columns: Any, what: str) -> str:
    if not isinstance(df, pd.DataFrame):
        raise ValueError("dataFrame must be a pandas DataFrame")
    cols = _names(columns)
    if not cols:
        raise ValueError(f"{what} required: name a column of dataFrame")
    if len(cols) > 1:
        raise NotImplementedError(f"{what}={cols}: multivariate embeddings are not supported by "
                                  "pyedmcl.compat.pyedm yet; use one column")
    if cols[0] not in df.columns:
        raise ValueError(f"{what} {cols[0]!r} not found in dataFrame columns {list(df.columns)}")
    return cols[0]


#: our keyword -> pyEDM's, so an error names the argument the caller wrote
_PYEDM_NAMES = {"max_E": "maxE", "max_Tp": "maxTp", "exclusion_radius": "exclusionRadius",
                "lib_sizes": "libSizes"}
_NAMES_RE = re.compile(r"\b(" + "|".join(_PYEDM_NAMES) + r")\b")


#: set while a wrapped function runs: the calls it makes of others are not checked again
_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("pyedm_in_call", default=False)


def _time_order(sig: inspect.Signature, name: str, args: tuple, kwargs: dict) -> None:
    """pyEDM's first column is time unless ``noTime``: warn where it does not strictly
    increase (pyEDM accepts it, so this layer does too; pyedmcl's own API and CLI
    refuse it: :mod:`pyedmcl.time_order`)."""
    try:
        bound = sig.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return  # the call itself raises the argument error
    if bound.get("noTime", False):
        return
    from ..time_order import warn_time_order

    warn_time_order(bound.get("dataFrame", bound.get("data")), name)


def _pyedm_names(fn):
    """Errors of a wrapped pyEDM function name pyEDM's arguments (``maxE=64``, not
    ``max_E``); a time column out of order is warned of once per outer call."""
    sig = inspect.signature(fn)
    timed = "noTime" in sig.parameters

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        outer = not _IN_CALL.get()
        if outer and timed:
            _time_order(sig, fn.__name__, args, kwargs)
        token = _IN_CALL.set(True)
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            msg = _NAMES_RE.sub(lambda m: _PYEDM_NAMES[m.group(1)], str(exc))
            if msg == str(exc):
                raise
            try:
                new = type(exc)(msg)
            except Exception:  # noqa: BLE001 - an exception type with another signature
                raise exc from None
            raise new from exc
        finally:
            _IN_CALL.reset(token)
    return wrapper


def _neg_tau(tau: Any) -> int:
    """pyEDM's tau (< 0: past lags) in our convention, validated first (``tau="3"`` names tau)."""
    from ..primitives.ranges import check_tau

    return -check_tau(tau)


def _range(v: Any) -> Any:
    """pyEDM's lib/pred: '' or [] means unset; our API then uses the whole series."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if not isinstance(v, str) and hasattr(v, "__len__") and len(v) == 0:
        return None
    return v


def _no_pred_rows(dataFrame, E: Any, tau: Any, Tp: Any, lib: Any, pred: Any) -> bool:
    """Whether ``pred`` holds no row with a full embedding for ``E`` (pyEDM's ``tau``):
    pyEDM then answers an empty table (a scan: NaN skill), which its bookkeeping here
    reproduces; the fused path refuses such a call. Other invalid input: False (the
    fused path raises its own error)."""
    from ..primitives.ranges import NoPredictionRows, resolve
    try:
        resolve(len(dataFrame), E=int(E), tau=_neg_tau(tau), Tp=int(Tp), lib=_range(lib),
                pred=_range(pred), max_knn=10 ** 9)
    except NoPredictionRows:
        return True
    except (ValueError, TypeError):
        return False
    return False


def _required(name: str, lib: Any, pred: Any) -> None:
    """pyEDM's Validate: Simplex and S-map need ``lib`` and ``pred`` (its messages; the
    fused path would otherwise take the whole series, and tied data, which go pyEDM's
    bookkeeping, would not)."""
    if _range(lib) is None:
        raise ValueError(f"Validate() {name}: lib required.")
    if _range(pred) is None:
        raise ValueError(f"Validate() {name}: pred required.")


def _check_library(name: str, lib: Any, E: Any, tau: Any, Tp: Any) -> None:
    """pyEDM's library checks (``CreateIndices``) on the fast path, with its messages: an
    embedding span ``|tau| (E - 1)`` plus ``Tp`` longer than the library rows left is
    refused there, though enough neighbours may remain (the core would run it)."""
    from ._pyedm_run import library_rows
    if lib is None or not all(isinstance(v, int | np.integer) and not isinstance(v, bool)
                              for v in (E, tau, Tp)) or E < 1 or tau == 0:
        return  # unset (the whole series), or parameters the core names itself
    try:
        vals = [int(v) for v in (lib.split() if isinstance(lib, str) else lib)]
    except (TypeError, ValueError):
        return  # the core names a malformed lib
    if len(vals) % 2:
        return
    library_rows(name, list(zip(vals[0::2], vals[1::2], strict=True)), int(E), int(tau),
                 int(Tp), False)


def _series(df: pd.DataFrame, name: str) -> np.ndarray:
    return df[name].to_numpy(dtype=np.float64)


def _time(df: pd.DataFrame, noTime: bool) -> np.ndarray:
    if noTime:
        return np.arange(1, len(df) + 1)
    return df.iloc[:, 0].to_numpy()


def _extend_time(time: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Times of output rows; rows outside the data are extrapolated by the first step."""
    n = time.size
    inside = (rows >= 0) & (rows < n)
    if inside.all():
        return time[rows]
    try:
        step = time[1] - time[0]
        out = np.empty(rows.size, dtype=np.result_type(time.dtype, float)
                       if np.issubdtype(time.dtype, np.integer) else time.dtype)
        out[inside] = time[rows[inside]]
        hi, lo = rows >= n, rows < 0
        out[hi] = time[n - 1] + step * (rows[hi] - (n - 1))
        out[lo] = time[0] + step * rows[lo]
        return out
    except TypeError:
        out = np.full(rows.size, None, dtype=object)
        out[inside] = time[rows[inside]]
        return out


def _projection(res, plan_segments, n: int, y: np.ndarray, time: np.ndarray, Tp: int,
                variance: np.ndarray | None) -> pd.DataFrame:
    """pyEDM's Projection table: per pred segment, rows from the first prediction row
    to the last + Tp; Observations at each row's time (the Tp rows past the segment's
    end all or none, as pyEDM), Predictions placed Tp rows on."""
    pred_rows = np.asarray(res.pred_times if getattr(res, "pred_times", None) is not None
                           else np.asarray(res.times) - Tp)
    lookup = {int(p): i for i, p in enumerate(pred_rows)}
    rows_all, obs_all, pr_all, var_all = [], [], [], []
    for seg in plan_segments:
        if seg.size == 0:
            continue
        rows = np.arange(seg[0] + min(Tp, 0), seg[-1] + max(Tp, 0) + 1)
        obs = np.full(rows.size, np.nan)
        ok = (rows >= 0) & (rows < n)
        # pyEDM's FormatProjection: the Tp rows past a segment's end are observed only if
        # all of them are in the data, else none of them
        if Tp > 0 and seg[-1] + Tp >= n:
            ok &= rows <= seg[-1]
        obs[ok] = y[rows[ok]]
        pr = np.full(rows.size, np.nan)
        va = np.full(rows.size, np.nan)
        segset = set(int(s) for s in seg)
        for j, r in enumerate(rows):
            p = int(r) - Tp
            if p in segset and p in lookup:
                pr[j] = res.predicted[lookup[p]]
                if variance is not None:
                    va[j] = variance[lookup[p]]
        rows_all.append(rows)
        obs_all.append(obs)
        pr_all.append(pr)
        var_all.append(va)
    rows = np.concatenate(rows_all)
    return pd.DataFrame({"Time": _extend_time(time, rows), "Observations": np.concatenate(obs_all),
                         "Predictions": np.concatenate(pr_all),
                         "Pred_Variance": np.concatenate(var_all)})


def _segments(n: int, E: int, tau: int, Tp: int, knn: Any, R: int, lib: Any, pred: Any,
              max_knn: int | None = None):
    from ..primitives.ranges import MAX_KNN, resolve
    return resolve(n, E=E, tau=tau, Tp=Tp, knn=knn if knn else None, exclusion_radius=R,
                   lib=lib, pred=pred, max_knn=max_knn or MAX_KNN).pred_segments


def _has_nan(df: pd.DataFrame, names: list[str]) -> bool:
    return bool(df[names].isna().to_numpy().any())


def _general(dataFrame, columns, target, embedded, validLib, generateSteps, returnObject,
             solver=None, ignoreNan=True) -> bool:
    """True where pyEDM's full object model is needed (see :mod:`._pyedm_run`): several
    columns or targets, ``embedded``, ``validLib``, ``generateSteps``, ``returnObject``,
    a ``solver``, ``ignoreNan=False`` (pyEDM then refuses the partial lags of the first
    rows), NaN in the data, or a Time column that is not numbers."""
    if (embedded or generateSteps or returnObject or solver is not None or not ignoreNan
            or (validLib is not None and len(validLib))):
        return True
    if not isinstance(dataFrame, pd.DataFrame):
        return False  # the core path raises pyEDM's error
    cols, tgts = _names(columns), _names(target)
    if len(cols) != 1 or len(tgts) != 1 or not set(cols + tgts) <= set(dataFrame.columns):
        return len(cols) > 1 or len(tgts) > 1
    return _has_nan(dataFrame, cols + tgts) or dataFrame.iloc[:, 0].dtype.kind not in "iuf"


def _ties_decide(E: Any, tau: Any, *series: np.ndarray, simplex: bool = False) -> bool:
    """True where a fast-path call must go the general path to decide neighbour ties as
    pyEDM: some delay vector of one of ``series`` has two (near-)equal distances to two
    others (:func:`._tie_check.has_distance_ties`, relative 1e-12 in pyEDM's float64
    arithmetic). CCM: the fused kernel's order (distance, ``|p - l|``, ``l``) and scipy
    KDTree's may pick different neighbour sets (S-map's fused path decides its ties as
    pyEDM and needs no routing). Simplex: pyEDM's tie-break is
    that order, but on the square roots of sums added in another order than the fused
    kernel's, so squared distances one ulp apart tie there and not in the kernel (0.5
    and 0.49999999999999994 have one square root); the fast path decides such rows by
    pyEDM's rule on decimal data (:func:`_simplex_decides_ties`), so its callers ask
    here only for other tied data. That needs equal true distances, so
    ``simplex`` checks only series with repeated values or on a decimal grid (quantised
    records), not every short one (the O(N^2) check took 150 ms at N = 2,000 on 2 cores,
    25 times the whole Simplex call). ``E``: one value or several (a scan). Only in
    float64 (the float32 setting trades pyEDM's digits for speed) and with scipy
    (without it the general path decides ties in the fast path's order too)."""
    from ._state_knn import scipy_available
    from ._tie_check import ALWAYS_CHECK, univariate_ties
    if dtype != "float64" or not scipy_available():
        return False
    Es = E if isinstance(E, range | list | tuple) else (E,)
    always = 0 if simplex else ALWAYS_CHECK
    return any(univariate_ties(s, e, tau, always) for e in Es for s in series)


def _simplex_decides_ties(x: np.ndarray, E: Any, knn: Any) -> bool:
    """Whether the fast path's Simplex decides the series' neighbour ties as pyEDM
    (:func:`pyedmcl.edm.simplex_ties.decides_ties`: decimal data, whose tied rows it
    decides by pyEDM's rule, or exact sums), so that tied data need not go the general
    path; False for values it does not take (they get the fast path's own errors)."""
    from ..edm.simplex_ties import decides_ties
    try:
        E, knn = int(E), int(knn) if knn else int(E) + 1
    except (TypeError, ValueError):
        return False
    return dtype == "float64" and E >= 1 and decides_ties(x, E, knn)


def _run(name: str, dataFrame, returnObject: bool, **kw):
    from ._pyedm_run import PyEDMRun, generate
    run = PyEDMRun(name, dataFrame, **kw)
    if kw.get("generateSteps"):
        generate(run)
    else:
        run.tieBreak = name == "Simplex"  # pyEDM's deterministic Simplex tie order
        run.run()
    if returnObject:
        return run
    if name == "Simplex":
        return run.Projection
    return {"predictions": run.Projection, "coefficients": run.Coefficients,
            "singularValues": run.SingularValues}


@_pyedm_names
def Simplex(dataFrame=None, columns="", target="", lib="", pred="", E=0, Tp=1, knn=0, tau=-1,
            exclusionRadius=0, embedded=False, validLib=(), noTime=False, kdWorkers=-1,
            generateSteps=0, generateConcat=False, verbose=False, showPlot=False, ignoreNan=True,
            returnObject=False, device=None) -> pd.DataFrame:
    """pyEDM.Simplex: DataFrame Time, Observations, Predictions, Pred_Variance.

    ``returnObject=True`` returns the run object with pyEDM's attributes
    (``Projection``, ``knn_neighbors``, ``knn_distances``, ``lib_i``, ``pred_i``, ...).
    """
    from ..edm.simplex import simplex
    from ..primitives.ranges import MAX_KNN
    if (_general(dataFrame, columns, target, embedded, validLib, generateSteps, returnObject,
                 ignoreNan=ignoreNan)
            or (isinstance(knn, int | np.integer) and knn > MAX_KNN)):  # beyond the fused kernel
        return _run("Simplex", dataFrame, returnObject, columns=columns, target=target, lib=lib,
                    pred=pred, E=E, Tp=Tp, knn=knn, tau=tau, exclusionRadius=exclusionRadius,
                    embedded=embedded, validLib=validLib, noTime=noTime,
                    generateSteps=generateSteps, generateConcat=generateConcat,
                    ignoreNan=ignoreNan, device=device)
    col = _column(dataFrame, columns, "columns")
    tgt = _column(dataFrame, target, "target")
    _required("Simplex", lib, pred)
    x, y = _series(dataFrame, col), _series(dataFrame, tgt)
    if ((not _simplex_decides_ties(x, E, knn) and _ties_decide(E, tau, x, simplex=True))
            or _no_pred_rows(dataFrame, E, tau, Tp, lib, pred)):
        return _run("Simplex", dataFrame, False, columns=columns, target=target, lib=lib,
                    pred=pred, E=E, Tp=Tp, knn=knn, tau=tau, exclusionRadius=exclusionRadius,
                    embedded=False, validLib=validLib, noTime=noTime, generateSteps=0,
                    generateConcat=generateConcat, ignoreNan=ignoreNan, device=device)
    lib, pred = _range(lib), _range(pred)
    _check_library("Simplex", lib, E, tau, Tp)
    res = simplex(x, y, E=E, tau=_neg_tau(tau), Tp=Tp, knn=knn or None, exclusion_radius=exclusionRadius,
                  lib=lib, pred=pred, device=device, variance=True, dtype=dtype)
    segs = _segments(x.size, E, _neg_tau(tau), Tp, knn, exclusionRadius, lib, pred)
    return _projection(res, segs, x.size, y, _time(dataFrame, noTime), Tp, res.variance)


@_pyedm_names
def SMap(dataFrame=None, columns="", target="", lib="", pred="", E=0, Tp=1, knn=0, tau=-1,
         theta=None, exclusionRadius=0, solver=None, embedded=False, validLib=(), noTime=False,
         kdWorkers=-1, generateSteps=0, generateConcat=False, ignoreNan=True, showPlot=False,
         verbose=False, returnObject=False, device=None) -> dict:
    """pyEDM.SMap: dict of 'predictions', 'coefficients', 'singularValues'.

    ``solver``: None (pyedmcl's device solver where the case allows it, else numpy's
    lstsq as pyEDM) or a scikit-learn linear model instance (``Ridge()``,
    ``LassoCV()``, ... as pyEDM accepts; needs ``pip install pyedmcl[sklearn]``).
    ``returnObject=True`` returns the run object with pyEDM's attributes.
    """
    from ..edm.smap import smap
    if solver is not None:
        _check_solver(solver)
    if theta is None:
        raise ValueError("theta required for S-map (e.g. theta=2)")
    if embedded and not (generateSteps or returnObject or solver is not None or not ignoreNan
                         or (validLib is not None and len(validLib))):
        out = _embedded_smap(dataFrame, columns, target, lib, pred, Tp, knn, theta,
                             exclusionRadius, noTime, device)
        if out is not None:
            return out
    if _general(dataFrame, columns, target, embedded, validLib, generateSteps, returnObject,
                solver, ignoreNan):
        return _run("SMap", dataFrame, returnObject, columns=columns, target=target, lib=lib,
                    pred=pred, E=E, Tp=Tp, knn=knn, tau=tau, theta=theta,
                    exclusionRadius=exclusionRadius, solver=solver, embedded=embedded,
                    validLib=validLib, noTime=noTime, generateSteps=generateSteps,
                    generateConcat=generateConcat, ignoreNan=ignoreNan, device=device)
    col = _column(dataFrame, columns, "columns")
    tgt = _column(dataFrame, target, "target")
    _required("SMap", lib, pred)
    x, y = _series(dataFrame, col), _series(dataFrame, tgt)
    # no tie routing: the fused S-map decides ties as pyEDM (pyedmcl.edm.pyedm_kdtree)
    if _no_pred_rows(dataFrame, E, tau, Tp, lib, pred):
        return _run("SMap", dataFrame, False, columns=columns, target=target, lib=lib,
                    pred=pred, E=E, Tp=Tp, knn=knn, tau=tau, theta=theta,
                    exclusionRadius=exclusionRadius, solver=None, embedded=False,
                    validLib=validLib, noTime=noTime, generateSteps=0,
                    generateConcat=generateConcat, ignoreNan=ignoreNan, device=device)
    lib, pred = _range(lib), _range(pred)
    _check_library("SMap", lib, E, tau, Tp)
    res = smap(x, y, E=E, tau=_neg_tau(tau), Tp=Tp, theta=float(theta), knn=knn or None,
               exclusion_radius=exclusionRadius, lib=lib, pred=pred, device=device, dtype=dtype)
    segs = _segments(x.size, E, _neg_tau(tau), Tp, 1, exclusionRadius, lib, pred, max_knn=10 ** 9)
    lag = "t-" if tau < 0 else "t+"
    cnames = ["C0"] + [f"∂{tgt}/∂{col}({lag}{i * abs(tau)})" for i in range(E)]
    return _smap_frames(res, segs, x.size, y, _time(dataFrame, noTime), Tp, cnames)


def _smap_frames(res, segs, n: int, y: np.ndarray, time: np.ndarray, Tp: int,
                 cnames: list[str]) -> dict:
    """pyEDM's SMap dict from a fused result: the projection, the coefficients (named
    ``cnames``) on the prediction's output rows, NaN singular values."""
    proj = _projection(res, segs, n, y, time, Tp, getattr(res, "variance", None))
    coef = getattr(res, "coefficients", None)
    names = [f"C{i}" for i in range(len(cnames))]
    cdf = pd.DataFrame({"Time": proj["Time"]})
    if coef is not None:
        pred_rows = (np.asarray(res.pred_times) if getattr(res, "pred_times", None) is not None
                     else np.asarray(res.times) - Tp)
        where = {int(p): i for i, p in enumerate(pred_rows)}
        full = np.full((len(proj), len(cnames)), np.nan)
        # coefficients sit on the same output row as the prediction (Tp rows on), from a
        # prediction row of the output row's own segment (adjacent segments repeat a
        # time: the later one's first row is padding, as in pyEDM)
        j = 0
        for seg in segs:
            if not seg.size:
                continue
            rows = _output_rows([seg], Tp)
            for r in rows:
                i = where.get(int(r) - Tp)
                if i is not None and seg[0] <= int(r) - Tp <= seg[-1]:
                    full[j] = coef[i]
                j += 1
        for c, name in enumerate(cnames):
            cdf[name] = full[:, c]
    sv = pd.DataFrame({"Time": proj["Time"], **{n: np.nan for n in names}})
    return {"predictions": proj, "coefficients": cdf, "singularValues": sv}


def _embedded_smap(dataFrame, columns, target, lib, pred, Tp, knn, theta, exclusionRadius,
                   noTime, device) -> dict | None:
    """A plain ``embedded=True`` S-map (the columns are the state vector; no NaN, no
    validLib, pyEDM's lstsq) on pyedmcl's fused solver, which decides its ties as pyEDM's
    tree; None where the call needs pyEDM's bookkeeping (the caller runs it)."""
    from ..edm.smap import smap
    if not isinstance(dataFrame, pd.DataFrame) or dtype != "float64":
        return None
    cols, tgts = _names(columns), _names(target)
    if (not cols or len(tgts) != 1 or not set(cols + tgts) <= set(dataFrame.columns)
            or _has_nan(dataFrame, cols + tgts) or dataFrame.iloc[:, 0].dtype.kind not in "iuf"
            or not all(isinstance(v, int | np.integer) and not isinstance(v, bool)
                       for v in (Tp, knn, exclusionRadius)) or Tp < 0):
        return None  # (a negative Tp: pyEDM's shifted rows, its bookkeeping's to reproduce)
    lib, pred = _range(lib), _range(pred)
    if lib is None or pred is None or _no_pred_rows(dataFrame, 1, -1, Tp, lib, pred):
        return None
    tgt = tgts[0]
    y = _series(dataFrame, tgt)
    res = smap(dataFrame[cols], target=y, columns=cols, embedded=True, Tp=int(Tp),
               theta=float(theta), knn=int(knn) or None, exclusion_radius=int(exclusionRadius),
               lib=lib, pred=pred, device=device, dtype=dtype)
    segs = _segments(len(dataFrame), 1, 1, int(Tp), 1, int(exclusionRadius), lib, pred,
                     max_knn=10 ** 9)
    cnames = ["C0"] + [f"∂{tgt}/∂{c}" for c in cols]
    return _smap_frames(res, segs, len(dataFrame), y, _time(dataFrame, noTime), int(Tp), cnames)


#: scikit-learn estimators pyEDM 2.5 accepts as ``solver`` (plus numpy's lstsq)
SUPPORTED_SOLVERS = ("function", "lstsq", "LinearRegression", "SGDRegressor", "Ridge", "RidgeCV",
                     "Lasso", "LassoCV", "Lars", "LarsCV", "LassoLars", "LassoLarsCV",
                     "LassoLarsIC", "ElasticNet", "ElasticNetCV", "OrthogonalMatchingPursuit",
                     "OrthogonalMatchingPursuitCV")


def _check_solver(solver: Any) -> None:
    kind = type(solver).__name__
    if kind not in SUPPORTED_SOLVERS and getattr(solver, "__name__", "") != "lstsq":
        raise ValueError(f"solver={solver!r} is not supported; allowed: numpy.linalg.lstsq or a "
                         f"scikit-learn estimator instance of {list(SUPPORTED_SOLVERS[2:])}")
    if kind not in ("function", "_ArrayFunctionDispatcher") and not hasattr(solver, "fit"):
        raise ValueError(f"solver={solver!r} has no fit(); pass an estimator instance, e.g. Ridge()")


def _output_rows(segs, Tp: int) -> np.ndarray:
    return np.concatenate([np.arange(s[0] + min(Tp, 0), s[-1] + max(Tp, 0) + 1)
                           for s in segs if s.size])


@_pyedm_names
def CCM(dataFrame=None, columns="", target="", libSizes="", sample=30, E=0, Tp=0, knn=0, tau=-1,
        exclusionRadius=0, seed=None, embedded=False, validLib=(), includeData=False,
        noTime=False, mpMethod=None, parallel=True, sharedMB=0.01, verbose=False,
        showPlot=False, returnObject=False, legacy=False, device=None) -> pd.DataFrame:
    """pyEDM.CCM: DataFrame LibSize, 'col:tgt', 'tgt:col' (and *_var with includeData)."""
    if returnObject:  # pyEDM's CCM object: its frame is ``libMeans``
        frame = CCM(dataFrame, columns, target, libSizes, sample, E, Tp, knn, tau,
                    exclusionRadius, seed, embedded, validLib, includeData, noTime,
                    device=device)
        return PyEDMObject(name="CCM", Data=dataFrame, columns=_names(columns),
                               target=_names(target), E=len(_names(columns)) if embedded else E,
                               Tp=Tp, tau=tau, sample=sample, seed=seed,
                               libSizes=list(frame["LibSize"]), libMeans=frame)
    from ..edm.ccm import ccm
    if _ccm_general(dataFrame, columns, target, embedded, validLib):
        return _ccm_pyedm(dataFrame, _names(columns), _names(target), libSizes, sample, E, Tp,
                          knn, tau, exclusionRadius, seed, embedded, validLib, includeData, device)
    col = _column(dataFrame, columns, "columns")
    tgt = _column(dataFrame, target, "target")
    if sample == 0:
        raise ValueError("sample=0 is out of range; allowed: sample >= 1")
    same = np.array_equal(_series(dataFrame, col), _series(dataFrame, tgt), equal_nan=True)
    # a column cross-mapping itself: pyedmcl.ccm refuses it (trivial), pyEDM runs it
    if same or _ties_decide(E, tau, _series(dataFrame, col), _series(dataFrame, tgt)):
        return _ccm_pyedm(dataFrame, [col], [tgt], libSizes, sample, E, Tp, knn, tau,
                          exclusionRadius, seed, False, validLib, includeData, device)
    r = ccm(_series(dataFrame, col), _series(dataFrame, tgt), E=E, tau=_neg_tau(tau), Tp=Tp,
            lib_sizes=libSizes, sample=sample, seed=seed, knn=knn or None,
            exclusion_radius=exclusionRadius, device=device, dtype=dtype)
    out = pd.DataFrame({"LibSize": r.lib_sizes, f"{col}:{tgt}": r.rho_xy, f"{tgt}:{col}": r.rho_yx})
    if includeData:
        out[f"{col}:{tgt}_var"] = np.nanvar(r.rho_xy_samples, axis=1)
        out[f"{tgt}:{col}_var"] = np.nanvar(r.rho_yx_samples, axis=1)
    return out


def _ccm_general(df, columns, target, embedded, validLib) -> bool:
    if embedded or (validLib is not None and len(validLib)):
        return True
    cols, tgts = _names(columns), _names(target)
    if len(cols) > 1 or len(tgts) > 1:
        return True
    if isinstance(df, pd.DataFrame) and set(cols + tgts) <= set(df.columns):
        return _has_nan(df, cols + tgts)
    return False


def _ccm_pyedm(df, cols, tgts, libSizes, sample, E, Tp, knn, tau, R, seed, embedded, validLib,
               includeData, device) -> pd.DataFrame:
    """pyEDM's CCM for multivariate / embedded / NaN / validLib input (:mod:`._pyedm_ccm`)."""
    from ._pyedm_ccm import ccm_general
    if not isinstance(df, pd.DataFrame):
        raise ValueError("dataFrame must be a pandas DataFrame")
    if not cols or not tgts:
        raise ValueError("columns and target required")
    for c in cols + tgts:
        if c not in df.columns:
            raise ValueError(f"column {c!r} not found in dataFrame columns {list(df.columns)}")
    if not embedded and (tau == 0 or E < 1):
        raise ValueError(f"E={E}, tau={tau} out of range; allowed: E >= 1, tau != 0")
    if sample == 0:
        raise ValueError("sample=0 is out of range; allowed: sample >= 1")
    Eeff = len(cols) if embedded else E
    sizes = [int(v) for v in (libSizes.split() if isinstance(libSizes, str) else libSizes)]
    if not sizes:
        raise ValueError("libSizes required")
    if len(sizes) == 3 and sizes[2] < sizes[1]:
        start, stop, inc = sizes
        if inc < 1 or start > stop or start < max(Eeff, 3):
            raise ValueError(f"libSizes={sizes} out of range; allowed: 'start stop increment' "
                             f"with increment >= 1 and {max(Eeff, 3)} <= start <= stop")
        sizes = list(range(start, stop + 1, inc))
    n = df.shape[0]
    if sizes[-1] > n or sizes[0] < Eeff + 2:
        raise ValueError(f"libSizes={sizes} out of range; allowed: {Eeff + 2} <= libSize <= {n}")
    return ccm_general(df, cols, tgts, sizes, sample, E, Tp, knn, tau, R, seed, embedded, validLib,
                       includeData, device)


def _scan_general(name: str, dataFrame, values, vary: str, showName: str, **kw) -> pd.DataFrame:
    """A pyEDM scan one call a value: one Simplex (S-map for theta) per value, rho from
    :func:`ComputeError` (pyEDM's ``PoolFunc``). Each Simplex takes its own path: the
    fused one where it gives pyEDM's numbers (decimal data's ties decided by pyEDM's rule,
    :func:`_simplex_decides_ties`), pyEDM's bookkeeping elsewhere."""
    rho = []
    for v in values:
        run_kw = {**kw, vary: v}
        if name == "SMap":
            df = SMap(dataFrame, returnObject=True, **run_kw).Projection
        else:
            df = Simplex(dataFrame, **run_kw)
        rho.append(ComputeError(df["Observations"], df["Predictions"])["rho"])
    return pd.DataFrame({showName: list(values), "rho": rho})


@_pyedm_names
def EmbedDimension(dataFrame=None, columns="", target="", maxE=10, lib="", pred="", Tp=1, tau=-1,
                   exclusionRadius=0, embedded=False, validLib=(), noTime=False, ignoreNan=True,
                   verbose=False, numProcess=4, mpMethod=None, chunksize=1, kdWorkers=-1,
                   showPlot=True, device=None) -> pd.DataFrame:
    """pyEDM.EmbedDimension: DataFrame E, rho.

    E up to the fused kernel's limit (knn = E + 1 <= 64) in one device pipeline; larger
    E (``maxE`` up to the library size) one Simplex each through the general path.
    """
    from ..edm.scans import embed_dimension
    maxE = _int_arg(maxE, "maxE")
    if _general(dataFrame, columns, target, embedded, validLib, 0, False,
                ignoreNan=ignoreNan) or _ties_decide(
            range(1, maxE + 1), tau, _series(dataFrame, _column(dataFrame, columns, "columns")),
            simplex=True) or _no_pred_rows(dataFrame, maxE, tau, Tp, lib, pred):
        return _scan_general("Simplex", dataFrame, range(1, maxE + 1), "E", "E", columns=columns,
                             target=target, lib=lib, pred=pred, Tp=Tp, tau=tau,
                             exclusionRadius=exclusionRadius, embedded=embedded,
                             validLib=validLib, noTime=noTime, ignoreNan=ignoreNan, device=device)
    col, tgt = _column(dataFrame, columns, "columns"), _column(dataFrame, target, "target")
    x = _series(dataFrame, col)
    s = embed_dimension(x, _series(dataFrame, tgt), max_E=maxE,
                        tau=_neg_tau(tau), Tp=Tp, exclusion_radius=exclusionRadius, lib=_range(lib),
                        pred=_range(pred), device=device, dtype=dtype)
    Es, rho = list(s.values), list(s.rho)
    pairs = [_pairs(x, int(e), _neg_tau(tau), Tp, exclusionRadius, _range(lib), _range(pred))
             for e in Es]
    return pd.DataFrame({"E": Es, "rho": _rounded(rho, pairs=pairs)})


def _rounded(rho: Any, digits: int = 6, pairs: Any = None) -> list[float]:
    """Skills as pyEDM's scans report them: each rho from ``ComputeError``, rounded to
    ``digits`` decimals by Python's round (NaN kept), NaN where its ``pairs`` (finite
    observation and prediction pairs, if given) are fewer than 5, as ``ComputeError``."""
    pairs = [5] * len(rho) if pairs is None else list(pairs)
    return [round(float(r), digits) if np.isfinite(r) and k >= 5 else float("nan")
            for r, k in zip(rho, pairs, strict=True)]


def _pairs(x: np.ndarray, E: int, tau: int, Tp: int, R: int, lib: Any, pred: Any) -> int:
    """Predictions of a fast-path call (finite data) with an observation (the plan's
    ``observed_mask``): the pairs pyEDM's ``ComputeError`` counts. ``tau`` in pyedmcl's
    sign."""
    from ..primitives.ranges import resolve
    return int(resolve(x.size, E=E, tau=tau, Tp=Tp, exclusion_radius=R, lib=lib, pred=pred,
                       max_knn=10 ** 9).observed_mask.sum())


def _int_arg(v: Any, name: str) -> int:
    if isinstance(v, bool) or not float(v).is_integer() or v < 1:
        raise ValueError(f"{name}={v!r} is out of range; allowed: an integer >= 1")
    return int(v)


@_pyedm_names
def PredictInterval(dataFrame=None, columns="", target="", lib="", pred="", maxTp=10, E=1,
                    tau=-1, exclusionRadius=0, embedded=False, validLib=(), noTime=False,
                    ignoreNan=True, verbose=False, numProcess=4, mpMethod=None, chunksize=1,
                    kdWorkers=-1, showPlot=True, device=None) -> pd.DataFrame:
    """pyEDM.PredictInterval: DataFrame Tp, rho."""
    from ..edm.scans import predict_interval
    if _general(dataFrame, columns, target, embedded, validLib, 0, False,
                ignoreNan=ignoreNan) or _ties_decide(
            E, tau, _series(dataFrame, _column(dataFrame, columns, "columns")), simplex=True
    ) or _no_pred_rows(dataFrame, E, tau, 1, lib, pred):
        return _scan_general("Simplex", dataFrame, range(1, _int_arg(maxTp, "maxTp") + 1), "Tp",
                             "Tp", columns=columns, target=target, lib=lib, pred=pred, E=E,
                             tau=tau, exclusionRadius=exclusionRadius, embedded=embedded,
                             validLib=validLib, noTime=noTime, ignoreNan=ignoreNan, device=device)
    col, tgt = _column(dataFrame, columns, "columns"), _column(dataFrame, target, "target")
    x = _series(dataFrame, col)
    s = predict_interval(x, _series(dataFrame, tgt), E=E, max_Tp=maxTp,
                         tau=_neg_tau(tau), exclusion_radius=exclusionRadius, lib=_range(lib),
                         pred=_range(pred), device=device, dtype=dtype)
    pairs = [_pairs(x, E, _neg_tau(tau), int(tp), exclusionRadius, _range(lib), _range(pred))
             for tp in s.values]
    return pd.DataFrame({"Tp": s.values, "rho": _rounded(s.rho, pairs=pairs)})


@_pyedm_names
def PredictExclusionRadius(dataFrame=None, columns="", target="", lib="", pred="", Tp=1, E=1,
                           tau=-1, exclusionRadius=None, embedded=False, validLib=(),
                           noTime=False, ignoreNan=True, verbose=False, numProcess=4,
                           mpMethod=None, chunksize=1, kdWorkers=-1, showPlot=True,
                           device=None) -> pd.DataFrame:
    """pyEDM.PredictExclusionRadius: DataFrame 'Exclusion radius', rho."""
    from ..edm.scans import DEFAULT_RADII, predict_exclusion_radius
    radii = DEFAULT_RADII if exclusionRadius is None else exclusionRadius
    if isinstance(radii, str):
        radii = [int(v) for v in radii.split()]
    if _general(dataFrame, columns, target, embedded, validLib, 0, False,
                ignoreNan=ignoreNan) or _ties_decide(
            E, tau, _series(dataFrame, _column(dataFrame, columns, "columns")), simplex=True
    ) or _no_pred_rows(dataFrame, E, tau, Tp, lib, pred):
        return _scan_general("Simplex", dataFrame, list(radii), "exclusionRadius",
                             "Exclusion radius", columns=columns, target=target, lib=lib,
                             pred=pred, E=E, Tp=Tp, tau=tau, embedded=embedded,
                             validLib=validLib, noTime=noTime, ignoreNan=ignoreNan, device=device)
    col, tgt = _column(dataFrame, columns, "columns"), _column(dataFrame, target, "target")
    x = _series(dataFrame, col)
    s = predict_exclusion_radius(x, _series(dataFrame, tgt), E=E, Tp=Tp,
                                 tau=_neg_tau(tau), radii=radii, lib=_range(lib), pred=_range(pred),
                                 device=device, dtype=dtype)
    pairs = [_pairs(x, E, _neg_tau(tau), Tp, 0, _range(lib), _range(pred))] * len(s.values)
    return pd.DataFrame({"Exclusion radius": list(s.values),
                         "rho": _rounded(s.rho, pairs=pairs)})


@_pyedm_names
def PredictNonlinear(dataFrame=None, columns="", target="", theta=None, lib="", pred="", E=1,
                     Tp=1, knn=0, tau=-1, exclusionRadius=0, solver=None, embedded=False,
                     validLib=(), noTime=False, ignoreNan=True, verbose=False, numProcess=4,
                     mpMethod=None, chunksize=1, kdWorkers=-1, showPlot=True,
                     device=None) -> pd.DataFrame:
    """pyEDM.PredictNonlinear: DataFrame theta, rho (S-map over theta)."""
    from ..edm.smap import DEFAULT_THETAS, predict_nonlinear
    if isinstance(theta, str):
        theta = [float(t) for t in theta.split()]
    general = _general(dataFrame, columns, target, embedded, validLib, 0, False, solver, ignoreNan)
    if not general:
        col, tgt = _column(dataFrame, columns, "columns"), _column(dataFrame, target, "target")
        general = _no_pred_rows(dataFrame, E, tau, Tp, lib, pred)  # ties: as SMap
    if general:
        return _scan_general("SMap", dataFrame, list(DEFAULT_THETAS if theta is None else
                                                     np.atleast_1d(theta)), "theta", "theta",
                             columns=columns, target=target, lib=lib, pred=pred, E=E, Tp=Tp,
                             knn=knn, tau=tau, exclusionRadius=exclusionRadius, solver=solver,
                             embedded=embedded, validLib=validLib, noTime=noTime,
                             ignoreNan=ignoreNan, device=device)
    x = _series(dataFrame, col)
    r = predict_nonlinear(x, _series(dataFrame, tgt), E=E, tau=_neg_tau(tau), Tp=Tp,
                          thetas=theta, knn=knn or None, exclusion_radius=exclusionRadius,
                          lib=_range(lib), pred=_range(pred), device=device, dtype=dtype)
    pairs = [_pairs(x, E, _neg_tau(tau), Tp, exclusionRadius, _range(lib), _range(pred))]
    return pd.DataFrame({"theta": list(r.thetas),
                         "rho": _rounded(r.rho, pairs=pairs * len(r.thetas))})


class PyEDMObject:
    """A pyEDM object returned for ``returnObject=True``: Multiview's (``Projection``,
    ``View``, ``combos``, ``topRankCombos``, ``topRankProjections``, ``topRankStats``,
    ``D``, ...) or CCM's (``libMeans``, ``libSizes``, ``E``, ...)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


@_pyedm_names
def Multiview(dataFrame=None, columns="", target="", lib="", pred="", D=0, E=1, Tp=1, knn=0,
              tau=-1, multiview=0, exclusionRadius=0, trainLib=True, excludeTarget=False,
              ignoreNan=True, verbose=False, numProcess=4, mpMethod=None, chunksize=1,
              kdWorkers=-1, showPlot=False, returnObject=False, device=None) -> dict:
    """pyEDM.Multiview (Ye & Sugihara 2016): every ``D``-subset of the ``E`` lags of the
    columns ranked by in-sample Simplex rho; the top ``multiview`` views averaged.

    Returns ``{'Predictions': Time/Observations/Predictions, 'View': Columns, rho, MAE,
    CAE, RMSE}`` (or the object with ``returnObject``). Each view's neighbours are
    searched on the device; ``knn`` is D + 1 as in pyEDM (the argument is unused there too).
    """
    from itertools import combinations
    from math import floor, sqrt
    from warnings import warn

    from ._pyedm_run import PyEDMRun, embed_frame
    cols = _names(columns)
    if not cols:
        raise ValueError("Multiview: columns required")
    tgts = _names(target)
    if not tgts:
        raise ValueError("Multiview: target required")
    if not isinstance(dataFrame, pd.DataFrame):
        raise ValueError("Multiview: dataFrame must be a pandas DataFrame")
    for c in cols + tgts:
        if c not in dataFrame.columns:
            raise ValueError(f"Multiview: column {c!r} not found in dataFrame")
    tgt = tgts[0] + "(t-0)"
    lib, pred = (list(lib) if _iterable(lib) else [int(v) for v in str(lib).split()],
                 list(pred) if _iterable(pred) else [int(v) for v in str(pred).split()])
    if not trainLib and (not lib or not pred):
        raise ValueError("Multiview: trainLib=False requires lib and pred")
    if trainLib and not lib and not pred:
        n = dataFrame.shape[0]
        lib, pred = [1, floor(n / 2)], [floor(n / 2) + 1, n]
    if D == 0:
        D = len(cols)
    if D > len(cols) * E:
        warn(f"Validate() Multiview: D = {D} exceeds number of columns in the embedding: "
             f"{len(cols) * E}. D set to {len(cols) * E}", stacklevel=2)
        D = len(cols) * E
    # excludeTarget: the views leave the target's lags out (pyEDM 2.5.7 compares the
    # columns with the target's embedded name, so it never leaves one out); the target
    # stays in the embedding as what each view predicts
    emb = embed_frame(dataFrame, E, tau, cols)
    pool = [c for c in emb.columns
            if not (excludeTarget and c.rsplit("(", 1)[0] in tgts)]
    if not pool:
        raise ValueError(f"Multiview: excludeTarget=True leaves no columns to combine "
                         f"(columns={columns!r}, target={target!r}); add columns other "
                         "than the target or set excludeTarget=False")
    if D > len(pool):
        warn(f"Multiview: D = {D} exceeds the {len(pool)} embedding columns left without "
             f"the target's lags. D set to {len(pool)}", stacklevel=2)
        D = len(pool)
    combos = list(combinations(pool, D))
    if multiview < 1:
        multiview = floor(sqrt(len(combos)))
    if multiview > len(combos):
        warn(f"Validate() Multiview: multiview ensembles {multiview} exceeds the number of "
             f"available combinations: {len(combos)}. Set to {len(combos)}.", stacklevel=2)
        multiview = len(combos)

    def view(combo, pred_rows):
        run = PyEDMRun("Simplex", emb, columns=list(combo), target=tgt, lib=lib, pred=pred_rows,
                       E=D, Tp=Tp, tau=tau, exclusionRadius=exclusionRadius, embedded=True,
                       noTime=True, ignoreNan=ignoreNan, device=device)
        run.tieBreak = True
        return run.run().Projection

    rank_pred = lib if trainLib else pred
    rho = np.array([ComputeError(p["Observations"], p["Predictions"])["rho"]
                    for p in (view(c, rank_pred) for c in combos)], dtype=float)
    top = [combos[i] for i in np.argsort(rho)[::-1][:multiview]]
    proj = {c: view(c, pred) for c in top}
    first = next(iter(proj.values()))
    # (pyEDM 2.5.7 fails on a single view here: pandas' "No axis named 1")
    mean = pd.concat([p["Predictions"] for p in proj.values()], axis=1).mean(axis=1)
    out = pd.DataFrame({"Time": first["Time"], "Observations": first["Observations"],
                        "Predictions": mean})
    stats = {c: ComputeError(p["Observations"], p["Predictions"]) for c, p in proj.items()}
    view_df = pd.concat([pd.DataFrame({"Columns": list(proj)}), pd.DataFrame(list(stats.values()))],
                        axis=1)
    if returnObject:
        return PyEDMObject(name="Multiview", Data=dataFrame, Embedding=emb, columns=cols,
                               target=[tgt], lib=lib, pred=pred, D=D, E=E, Tp=Tp, tau=tau,
                               knn=D + 1, multiview=multiview, combos=combos, topRankCombos=top,
                               topRankProjections=proj, topRankStats=stats, Projection=out,
                               View=view_df)
    return {"Predictions": out, "View": view_df}


def _iterable(v: Any) -> bool:
    return not isinstance(v, str) and hasattr(v, "__iter__")


@_pyedm_names
def Embed(dataFrame=None, E=0, tau=-1, columns="", includeTime=False, pathIn="./",
          dataFile=None) -> pd.DataFrame:
    """pyEDM.Embed: time-delay embedding of columns with pyEDM's names (NaN where partial)."""
    if dataFile is not None:
        dataFrame = pd.read_csv(pathIn + dataFile)
    if E < 1:
        raise ValueError(f"E={E} is out of range; allowed: E >= 1")
    if tau == 0:
        raise ValueError("tau=0 is out of range; allowed: any non-zero integer")
    cols = _names(columns)
    if not cols:
        raise ValueError("columns required")
    out = {}
    for c in cols:
        if c not in dataFrame.columns:
            raise ValueError(f"column {c!r} not in dataFrame")
        for i in range(E):
            shift = -i * tau
            name = f"{c}(t-{i * abs(tau)})" if tau < 0 else f"{c}(t+{i * abs(tau)})"
            out[name] = dataFrame[c].shift(shift)
    df = pd.DataFrame(out)
    if includeTime:
        df = dataFrame.iloc[:, [0]].join(df)
    return df


@_pyedm_names
def CrossMap_Matrix(data, E=0, Tp=1, tau=-1, exclusionRadius=0, lib=None, pred=None,
                    threshold=None, cores=5, mpMethod=None, chunksize=1, returnValue="matrix",
                    outputFile=None, noTime=False, verbose=False, plot=False, title=None,
                    figsize=(5, 5), dpi=150, device=None):
    """pyEDM.CrossMap_Matrix: Simplex cross-map rho of every column pair, ``(N, N)``.

    Row ``j`` maps from column ``j``'s embedding to every column (pyEDM's order; the
    pair's E is the *target's* entry of ``E``, as pyEDM zips them), diagonal NaN,
    values below ``threshold`` NaN. One k-NN table per row and E serves all its
    targets on the device (pyEDM runs N*N Simplex calls). rho as pyEDM's
    ComputeError (6 digits). ``returnValue``: 'matrix' or 'dataframe'.
    """
    if "dataframe" not in returnValue and "matrix" not in returnValue:
        raise ValueError(f"returnValue={returnValue!r} is not one of 'matrix', 'dataframe'")
    if outputFile and not (outputFile.endswith(".csv") or outputFile.endswith(".feather")):
        raise ValueError(f"outputFile={outputFile!r} must end in .csv or .feather")
    if not isinstance(data, pd.DataFrame):
        raise ValueError("data must be a pandas DataFrame")
    n = data.shape[0]
    lib = lib or [1, n]
    pred = pred or [1, n]
    cols = data.columns.to_list() if noTime else data.columns[1:].to_list()
    N = len(cols)
    Es = [E] * N if isinstance(E, int | np.integer) else list(E)
    if len(Es) == 1:
        Es = Es * N
    if len(Es) != N:
        raise ValueError(f"E must be one value or one per data column ({N}), got {len(Es)}")
    mat = np.full((N, N), np.nan)
    if _has_nan(data, cols):  # pyEDM's NaN rules: one general-path Simplex per pair
        for j, c in enumerate(cols):
            for i, t in enumerate(cols):
                df = Simplex(data, columns=c, target=t, lib=lib, pred=pred, E=Es[i], Tp=Tp,
                             tau=tau, exclusionRadius=exclusionRadius, noTime=noTime,
                             returnObject=True, device=device).Projection
                mat[j, i] = ComputeError(df["Observations"], df["Predictions"])["rho"]
    else:
        from ..edm.simplex import simplex
        Y = data[cols].to_numpy(dtype=np.float64).T
        for j in range(N):
            for e in sorted(set(Es)):
                idx = [i for i in range(N) if Es[i] == e]
                r = simplex(Y[j], Y[idx], E=e, tau=_neg_tau(tau), Tp=Tp,
                            exclusion_radius=exclusionRadius, lib=_range(lib), pred=_range(pred),
                            dtype=dtype, device=device)
                mat[j, idx] = np.round(np.atleast_1d(r.rho), 6)
    np.fill_diagonal(mat, np.nan)
    if threshold is not None:
        mat[mat < threshold] = np.nan
    frame = pd.DataFrame(mat, index=cols, columns=cols)
    if outputFile:
        from .._outputs import write_bytes_atomic, write_text_atomic
        if outputFile.endswith(".csv"):
            write_text_atomic(outputFile, frame.to_csv(index_label="variable"), what="cross-map matrix")
        else:
            import io
            buf = io.BytesIO()
            frame.to_feather(buf)
            write_bytes_atomic(outputFile, buf.getvalue(), what="cross-map matrix")
    return mat if "matrix" in returnValue else frame


@_pyedm_names
def EmbedDim_Columns(data, target=None, maxE=15, minE=1, lib=None, pred=None, Tp=1, tau=-1,
                     exclusionRadius=0, firstMax=False, validLib=(), noTime=False,
                     ignoreNan=True, nWorkers=None, mpMethod=None, chunksize=1, outputFile=None,
                     verbose=False, logPct=5, plot=False, device=None) -> pd.DataFrame:
    """pyEDM.EmbedDim_Columns: the best E of every column (each predicting itself or
    ``target``) from an E scan ``minE..maxE``: the global maximum of rho (ties: the
    smaller E) or with ``firstMax`` the first local maximum. DataFrame ``column``,
    ``target``, ``E`` (uint16; 0 where no rho), ``rho`` (float32, 4 digits)."""
    if not isinstance(data, pd.DataFrame):
        raise ValueError("data must be a pandas DataFrame")
    minE = max(1, int(minE))
    if maxE < minE:
        raise ValueError(f"maxE={maxE} is out of range; allowed: maxE >= minE ({minE})")
    cols = data.columns.to_list()
    feats = cols if noTime else cols[1:]
    if not feats:
        raise ValueError("data has no feature columns after the time column (noTime=False)")
    if target is not None and target not in cols:
        raise ValueError(f"target {target!r} is not a column of data")
    n = len(data)
    lib, pred = lib or [1, n], pred or [1, n]
    rows = []
    for f in feats:
        tgt = f if target is None else target
        try:
            scan = EmbedDimension(data, columns=f, target=tgt, maxE=maxE, lib=lib, pred=pred, Tp=Tp,
                                  tau=tau, exclusionRadius=exclusionRadius, validLib=validLib,
                                  noTime=noTime, ignoreNan=ignoreNan, device=device)
        except (ValueError, RuntimeError):  # pyEDM: a failing column gives E 0, rho NaN
            rows.append((f, tgt, np.uint16(0), np.nan))
            continue
        er = [(int(e), round(float(r), 6)) for e, r in zip(scan["E"], scan["rho"], strict=True)
              if e >= minE and np.isfinite(r)]
        if not er:
            rows.append((f, tgt, np.uint16(0), np.nan))
            continue
        if firstMax:
            best = er[-1]
            for (e0, r0), (_, r1) in zip(er, er[1:], strict=False):
                if r1 < r0:
                    best = (e0, r0)
                    break
        else:
            best = max(er, key=lambda t: (t[1], -t[0]))
        rows.append((f, tgt, np.uint16(max(best[0], minE)), np.float32(round(best[1], 4))))
    out = pd.DataFrame(rows, columns=["column", "target", "E", "rho"])
    if outputFile:
        from .._outputs import write_text_atomic
        write_text_atomic(outputFile, out.to_csv(index=False), what="embedding dimensions")
    return out


def MakeBlock(dataFrame, E=0, tau=-1, columnNames=(), deletePartial=False):
    """pyEDM.MakeBlock: removed in pyEDM 2 (raises, as pyEDM does); use :func:`Embed`."""
    raise RuntimeError("MakeBlock() deprecated. Use Embed().")


def SurrogateData(dataFrame=None, column=None, method="ebisuzaki", numSurrogates=10,
                  alpha=None, smooth=0.8, outputFile=None, seed=None) -> pd.DataFrame:
    """pyEDM.SurrogateData: ``numSurrogates`` surrogate series of ``column``.

    ``random_shuffle`` (a permutation), ``ebisuzaki`` (Ebisuzaki 1997: random Fourier
    phases, the power spectrum kept, rescaled to the data's standard deviation) or
    ``seasonal`` (a smoothing spline plus resampled residuals plus Gaussian noise of
    standard deviation ``alpha``, default range / 5; needs scipy). Columns
    ``column_1 ...`` after the time column, rounded to 8 decimals as pyEDM. For an even
    length pyEDM redraws the last Fourier term (the partner of frequency 1, where the
    Nyquist term was meant); compat draws the same way. ``seed``
    (an extra keyword) makes the draws reproducible; pyEDM's are not.
    """
    if dataFrame is None:
        raise ValueError("SurrogateData(): dataFrame required")
    if column is None or column not in dataFrame.columns:
        raise ValueError(f"SurrogateData(): column {column!r} not found in dataFrame")
    n_sur = _int_arg(numSurrogates, "numSurrogates")
    rng = np.random.default_rng(seed)
    y = dataFrame[column].to_numpy(dtype=np.float64)
    n = y.size
    cols = {}
    kind = str(method).lower()
    if kind == "random_shuffle":
        for s in range(n_sur):
            cols[s] = rng.permutation(y)
    elif kind == "ebisuzaki":
        n2 = n // 2
        sigma = np.std(y)
        amp = np.abs(np.fft.fft(y))
        amp[0] = 0.0
        for s in range(n_sur):
            th = 2 * np.pi * rng.uniform(0, 1, n2 - 1)
            angles = np.concatenate([[0.0], th, [0.0], -th[::-1]])[:n]
            z = amp * np.exp(1j * angles)
            if n % 2 == 0:
                z[-1] = complex(np.sqrt(2) * amp[-1] * np.cos(2 * np.pi * rng.uniform(0, 1)))
            real = (np.fft.ifft(z) / n).real
            cols[s] = sigma * real / np.std(real)
    elif kind == "seasonal":
        from scipy.interpolate import UnivariateSpline
        x = np.arange(n)
        spline = UnivariateSpline(x, y)
        spline.set_smoothing_factor(smooth)
        trend = spline(x)
        resid = y - trend
        a = np.ptp(y) / 5 if alpha is None else alpha
        for s in range(n_sur):
            cols[s] = trend + rng.permutation(resid) + rng.normal(0.0, a, n)
    else:
        raise ValueError(f"method={method!r} is not one of 'random_shuffle', 'ebisuzaki', "
                         "'seasonal'")
    df = pd.DataFrame(dataFrame.iloc[:, 0])
    for s in range(n_sur):
        df[f"{column}_{s + 1}"] = cols[s]
    df = df.round(8)
    if outputFile:
        from .._outputs import write_text_atomic
        write_text_atomic(outputFile, df.to_csv(index=False), what="surrogate data")
    return df


def PlotObsPred(df, dataName="", E=0, Tp=0, block=True):
    """pyEDM.PlotObsPred: observations and predictions over time (needs matplotlib)."""
    import matplotlib.pyplot as plt
    stats = ComputeError(df["Observations"], df["Predictions"])
    title = (f"{dataName}\nE={E} Tp={Tp}  ρ={round(stats['rho'], 3)} "
             f"RMSE={round(stats['RMSE'], 3)}")
    df.plot(df.columns[0], ["Observations", "Predictions"], title=title, linewidth=3)
    plt.show(block=block)


def PlotCoeff(df, dataName="", E=0, Tp=0, block=True):
    """pyEDM.PlotCoeff: S-map coefficients over time, one panel each (needs matplotlib)."""
    import matplotlib.pyplot as plt
    t = df.columns[0]
    df.plot(t, [c for c in df.columns if t not in c], title=f"{dataName}\nE={E} Tp={Tp}  "
            "S-Map Coefficients", linewidth=3, subplots=True)
    plt.show(block=block)


def ComputeError(obs, pred, digits: int = 6) -> dict:
    """pyEDM.ComputeError: rho, MAE, CAE, RMSE over pairs where both are finite.

    pyEDM labels ``max(obs - pred)`` as MAE; this keeps pyEDM's values for
    drop-in use (pyedmcl's own results carry the mean absolute error).
    """
    obs = np.asarray(obs, dtype=float)
    pred = np.asarray(pred, dtype=float)
    ok = np.isfinite(obs) & np.isfinite(pred)
    obs, pred = obs[ok], pred[ok]
    if obs.size < 5:
        return {"rho": np.nan, "MAE": np.nan, "RMSE": np.nan}
    err = obs - pred
    return {"rho": round(float(np.corrcoef(obs, pred)[0, 1]), digits),
            "MAE": round(float(np.max(err)), digits),
            "CAE": round(float(np.abs(err).sum()), digits),
            "RMSE": round(float(np.sqrt(np.mean(err ** 2))), digits)}


#: pyEDM 2.5 public names compat does not provide, with where to go instead
_NOT_PROVIDED = {
    "CCM_Matrix": "pyEDM's CCM_Matrix app (all-pairs CCM with convergence fits) is not in "
                  "pyedmcl.compat.pyedm; pyedmcl.xmap computes all-to-all cross-map skill on "
                  "the device, or call pyEDM.CCM_Matrix",
    "Examples": "pyEDM.Examples() prints pyEDM's own demo calls; run them with "
                "pyedmcl.compat.pyedm imported as EDM",
}


def __getattr__(name: str):
    if name in _NOT_PROVIDED:
        raise AttributeError(_NOT_PROVIDED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
