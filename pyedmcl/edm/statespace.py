"""State spaces of several columns, missing data and library masks (pyEDM's semantics).

A *state space* is a matrix of ``m`` columns over ``L`` rows (time). The state at row
``t`` is, for ``E`` lags, ``c1(t), c2(t), ..., cm(t), c1(t-tau), ..., cm(t-(E-1)tau)``
(the order of pyEDM 2.5.7's ``Embed``, lag-major: it sets the order of S-map
coefficients), or with ``embedded=True`` the row itself (the columns are the state
vector). The kernels read the matrix row-major and embed it implicitly (the knn
family's ``NC`` columns, :mod:`pyedmcl.kernels.knn`); nothing is materialised.

Missing data follow pyEDM 2.5.7 (``EDM.RemoveNan``, ``Simplex.Project``,
``AuxFunc.ComputeError``): a row whose state vector holds a NaN is no library vector
and its prediction is NaN; a Simplex prediction whose neighbours include a library row
with a NaN target (at ``l + Tp``) is NaN; skill is computed over the pairs where both
prediction and observation are finite. NaN never reaches a kernel: the host fills the
gaps with the column mean (values only the excluded rows read). ``inf`` is rejected.
``valid_lib`` (pyEDM's ``validLib``) is a boolean mask over rows: only rows where it
is True may be library vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._extremes import has_nan
from ..validation import check_frame_time, nonfinite_message


@dataclass(frozen=True)
class StateSpace:
    """Validated host data of one call: columns ``(L, m)`` (NaN allowed) and targets."""

    data: np.ndarray  #: (L, m) float64, the state space's columns, row-major
    names: tuple[str, ...]  #: the columns' names (DataFrame names, else indices)
    targets: np.ndarray  #: (nt, L) float64 target series (NaN allowed)
    single: bool  #: one target given as one series (results are 1-D)
    embedded: bool  #: the columns are the state vector (no lags)

    @property
    def n(self) -> int:
        return self.data.shape[0]

    @property
    def nc(self) -> int:
        return self.data.shape[1]

    def lags(self, E: int) -> int:
        """Lags per column: ``E``, or 1 when embedded."""
        return 1 if self.embedded else E

    def default_knn(self, E: int) -> int:
        """pyEDM's default knn: E + 1, with E the number of columns when embedded."""
        return (self.nc if self.embedded else E) + 1


def is_multivariate(x: Any, columns: Any = None, embedded: bool = False,
                    valid_lib: Any = None, target: Any = None) -> bool:
    """Whether a call needs the state-space path (several columns, a column choice,
    ``embedded``, a library mask, a target named by column, or missing values in a host
    series or target)."""
    if columns is not None or embedded or valid_lib is not None:
        return True
    if isinstance(target, str) or (isinstance(target, int | np.integer)
                                   and not isinstance(target, bool)):
        return True  # a column of x by name or position
    if isinstance(target, list | tuple) and target and all(isinstance(t, str) for t in target):
        return True
    if target is not None and not _is_device(target):
        try:
            if _has_nan(np.asarray(target.to_numpy() if hasattr(target, "to_numpy") else target)):
                return True
        except Exception:
            pass
    if hasattr(x, "columns") and hasattr(x, "to_numpy"):
        return len(x.columns) > 1 or _has_nan(x.to_numpy())
    if _is_device(x):
        return False
    try:
        arr = np.asarray(x)
    except Exception:
        return False
    if arr.ndim == 2 and min(arr.shape) > 1:
        return True
    return _has_nan(arr)


def requested_knn(knn: Any, E: Any) -> int | None:
    """The neighbours a call asks for: ``knn``, or its default E + 1; None where neither
    is a plain integer yet (validated later)."""
    def plain_int(v: Any) -> bool:
        return isinstance(v, int | np.integer) and not isinstance(v, bool)

    if plain_int(knn) and int(knn) > 0:
        return int(knn)
    return int(E) + 1 if plain_int(E) else None


def beyond_fused_knn(knn: Any, E: Any) -> bool:
    """Whether ``knn`` (or its default E + 1) exceeds the fused k-NN kernel's MAX_KNN."""
    from ..primitives.ranges import MAX_KNN

    k = requested_knn(knn, E)
    return k is not None and k > MAX_KNN


def _is_device(x: Any) -> bool:
    return hasattr(x, "get") and hasattr(x, "shape") and not isinstance(x, np.ndarray) \
        and not hasattr(x, "to_numpy")


def _has_nan(arr: np.ndarray) -> bool:
    return has_nan(arr)  # (from the call's extremes: pyedmcl._extremes)


def _finite_or_nan(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` as float64; NaN allowed (missing data), inf rejected naming the index."""
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    bad = np.isinf(a)
    if bad.any():
        raise ValueError(nonfinite_message(name, int(np.flatnonzero(bad.reshape(-1))[0])))
    return a


def _table(x: Any) -> tuple[np.ndarray, tuple[str, ...], bool]:
    """``x`` as an (L, m) array, its column names, and whether names are real labels."""
    if hasattr(x, "to_numpy"):
        check_frame_time(x, "x")
    if hasattr(x, "columns") and hasattr(x, "to_numpy"):
        return np.asarray(x.to_numpy()), tuple(str(c) for c in x.columns), True
    if hasattr(x, "to_numpy"):  # a pandas Series
        x = x.to_numpy()
    arr = np.asarray(x)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"x must be 1-D (a series) or 2-D (rows, columns), got shape {arr.shape}")
    return arr, tuple(str(i) for i in range(arr.shape[1])), False


def _pick(spec: Any, names: tuple[str, ...], labelled: bool, what: str) -> list[int]:
    """Column positions named by ``spec``: names (a whitespace-separated string or a
    list) for a DataFrame, integer positions for any table."""
    if isinstance(spec, str):
        items: list[Any] = spec.split()
    elif isinstance(spec, int | np.integer):
        items = [spec]
    else:
        items = list(spec)
    if not items:
        raise ValueError(f"{what} is empty; name at least one column of x")
    out = []
    for it in items:
        if isinstance(it, int | np.integer) and not isinstance(it, bool):
            if not 0 <= int(it) < len(names):
                raise ValueError(f"{what} index {it} is out of range; allowed: 0..{len(names) - 1}")
            out.append(int(it))
        elif isinstance(it, str) and labelled and it in names:
            out.append(names.index(it))
        else:
            allowed = f"one of {list(names)}" if labelled else f"integers 0..{len(names) - 1}"
            raise ValueError(f"{what} {it!r} is not a column of x; allowed: {allowed}")
    return out


def state_space(x: Any, target: Any = None, *, columns: Any = None,
                embedded: bool = False) -> StateSpace:
    """Validate ``x`` (1-D series, 2-D ``(L, m)`` array or DataFrame), ``columns`` (names
    or indices; default all) and ``target`` (a column name/index of ``x``, several, or
    1-D/2-D arrays of length L; default the first chosen column)."""
    arr, names, labelled = _table(x)
    if arr.shape[0] == 0:
        raise ValueError("x is empty; a series needs at least one value")
    cols = list(range(arr.shape[1])) if columns is None else _pick(columns, names, labelled, "columns")
    data = np.ascontiguousarray(_finite_or_nan(arr[:, cols], "x"))
    n = data.shape[0]
    if target is None:
        return StateSpace(data, tuple(names[c] for c in cols), data[:, 0][None, :].copy(), True,
                          bool(embedded))
    is_name = isinstance(target, str) or (isinstance(target, int | np.integer)
                                          and not isinstance(target, bool))
    is_names = (isinstance(target, list | tuple) and len(target) > 0
                and all(isinstance(t, str | int | np.integer) for t in target))
    if is_name or is_names:
        tc = _pick(target, names, labelled, "target")
        y = _finite_or_nan(arr[:, tc].T, "target")
        return StateSpace(data, tuple(names[c] for c in cols), np.ascontiguousarray(y),
                          is_name, bool(embedded))
    if hasattr(target, "to_numpy"):
        target = target.to_numpy()
    t = np.asarray(target)
    if t.ndim == 2 and 1 in t.shape:
        t = t.reshape(-1)
    if t.ndim == 2 and t.shape[0] == n and t.shape[1] != n:
        t = t.T
    if t.ndim not in (1, 2) or t.shape[-1] != n:
        raise ValueError(f"target must be a column of x, or 1-D of length {n} or 2-D "
                         f"(n_targets, {n}), got shape {t.shape}")
    y = _finite_or_nan(np.atleast_2d(t), "target")
    return StateSpace(data, tuple(names[c] for c in cols), np.ascontiguousarray(y), t.ndim == 1,
                      bool(embedded))


def check_valid_lib(valid_lib: Any, n: int) -> np.ndarray | None:
    """pyEDM's ``validLib``: a boolean mask of length ``n`` (rows allowed as library
    vectors), or None for no mask."""
    if valid_lib is None:
        return None
    m = np.asarray(valid_lib)
    if m.size == 0:
        return None
    if m.dtype != bool:
        raise ValueError(f"valid_lib must be a boolean array of length {n} (rows allowed in "
                         f"the library), got dtype {m.dtype}")
    if m.shape != (n,):
        raise ValueError(f"valid_lib must be a boolean array of length {n} (one value per "
                         f"row of x), got shape {m.shape}")
    return m


def bad_points(data: np.ndarray, lags: int, tau: int) -> np.ndarray:
    """Per kernel point (window start ``j``, rows ``j, j+|tau|, ...``): its state vector
    holds a NaN. Length ``L - (lags-1)|tau|``."""
    row_bad = np.isnan(data).any(axis=1)
    span = (lags - 1) * abs(tau)
    npts = data.shape[0] - span
    out = np.zeros(npts, dtype=bool)
    for j in range(lags):
        out |= row_bad[j * abs(tau): j * abs(tau) + npts]
    return out


def filled(a: np.ndarray, axis: int) -> np.ndarray:
    """``a`` with NaN replaced by the mean of its finite values along ``axis`` (0 if
    none): kernel inputs at rows that no admitted vector reads."""
    if not has_nan(a):  # (from the call's extremes where it took them)
        return a
    with np.errstate(invalid="ignore"):
        fin = np.where(np.isnan(a), 0.0, a)
        cnt = np.maximum((~np.isnan(a)).sum(axis=axis, keepdims=True), 1)
        mean = fin.sum(axis=axis, keepdims=True) / cnt
    return np.where(np.isnan(a), mean, a)


def skill(obs: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pearson rho, MAE, RMSE per row over the pairs where both are finite (pyEDM's
    ``ComputeError`` rule; NaN where fewer than 2 pairs or a constant side)."""
    obs, pred = np.atleast_2d(obs), np.atleast_2d(pred)
    rho, mae, rmse = (np.full(obs.shape[0], np.nan) for _ in range(3))
    for i in range(obs.shape[0]):
        ok = np.isfinite(obs[i]) & np.isfinite(pred[i])
        o, p = obs[i][ok], pred[i][ok]
        if o.size == 0:
            continue
        err = o - p
        mae[i] = np.mean(np.abs(err))
        rmse[i] = np.sqrt(np.mean(err * err))
        if o.size >= 2 and o.std() > 0 and p.std() > 0:
            rho[i] = np.corrcoef(o, p)[0, 1]
    return rho, mae, rmse
