"""Inputs of :func:`pyedmcl.rqa.batch.rqa_batch`: many series as columns, and their labels.

Orientation: time runs down the rows, one series per column (as ``xmap``): a NumPy array
``(T, N)``, a pandas DataFrame (one column per series), or an ``xarray.DataArray`` with a
``time`` dimension, every other dimension kept (``(time, lat, lon)``: one series per
pixel, the results mapped back onto ``(lat, lon)``). Series of different lengths are NaN
padded at the end; a NaN before a series' last value is refused (RQA has no gaps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._bands import map_bands, map_slices
from ..labels import is_dataarray
from ..validation import MAX_MAGNITUDE, as_series

#: how a batch runs (see :func:`pyedmcl.rqa_batch`)
METHODS = ("batched", "series", "packed")


@dataclass
class Columns:
    """The series of a batch, their names (the index of the result frame) and, for a
    DataArray, what rebuilds its non-time dimensions. ``panel``: series ``j`` in row ``j``
    (float64, C-contiguous), its first ``lengths[j]`` values (trailing NaN removed; NaN
    after them); ``lo``/``hi``: each series' smallest and largest value. Every series is
    finite and within :data:`pyedmcl.validation.MAX_MAGNITUDE` (as ``as_series`` checks
    one)."""

    panel: np.ndarray
    lengths: np.ndarray
    names: list[Any]
    lo: np.ndarray
    hi: np.ndarray
    dims: tuple[str, ...] | None = None  # a DataArray's non-time dims, in order
    shape: tuple[int, ...] | None = None
    coords: dict[str, Any] | None = None

    @property
    def series(self) -> list[np.ndarray]:
        """Each series as a 1-D view of its row (``lengths[j]`` values)."""
        return [self.panel[j, :t] for j, t in enumerate(self.lengths.tolist())]

    @classmethod
    def layout(cls, names: list[Any] | None = None, dims: tuple[str, ...] | None = None,
               shape: tuple[int, ...] | None = None,
               coords: dict[str, Any] | None = None) -> Columns:
        """Columns without values: the names and a DataArray's layout only (a lazy input,
        or a result rebuilt from a store)."""
        none = np.zeros(0)
        return cls(np.zeros((0, 0)), np.zeros(0, np.int64), list(names or []), none, none,
                   dims, shape, coords)


def as_columns(X: Any, name: str = "X", allow_irregular: bool = False) -> Columns:
    """:class:`Columns` of ``X`` (see the module docstring); errors name ``name``. A time
    axis (a DataArray's ``time`` coordinate, a pandas time index or first column of
    datetimes) is checked as every labelled function checks it (:mod:`pyedmcl.labels`):
    strictly increasing, equally spaced unless ``allow_irregular``."""
    if is_dataarray(X):
        return _dataarray_columns(X, name, allow_irregular)
    if type(X).__name__ == "Dataset" and type(X).__module__.split(".")[0] == "xarray":
        raise TypeError(f"{name} is an xarray Dataset; give one of its variables, a "
                        f"DataArray with a 'time' dimension ({name}['name'])")
    if type(X).__module__.split(".")[0] == "pandas":
        import pandas as pd

        from ..labels import unwrap

        X, _ = unwrap(X, name, allow_irregular)
        if isinstance(X, pd.Series):
            X = X.to_frame()
        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"{name} must be an array, a DataFrame or a DataArray, got "
                            f"{type(X).__name__}")
        vals = _numbers(X.to_numpy(), name)
        return _columns(vals, name, list(X.columns))
    try:
        vals = np.asarray(X)
    except Exception as exc:
        raise TypeError(f"{name} must be array-like of numbers, got {type(X).__name__}") \
            from exc
    if vals.ndim == 1:
        vals = vals[:, None]
    if vals.ndim != 2:
        raise ValueError(f"{name} has shape {vals.shape}; allowed: (T,) or (T, N) with time "
                         "down the rows, one series per column (an xarray DataArray with a "
                         "'time' dimension keeps any other dimensions)")
    vals = _numbers(vals, name)
    return _columns(vals, name, list(range(vals.shape[1])))


def is_lazy(X: Any) -> bool:
    """Whether ``X`` is a dask array, or a DataArray backed by one (read in blocks)."""
    if is_dataarray(X):
        return getattr(X, "chunks", None) is not None
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "compute") \
        and hasattr(X, "ndim")


def _numbers(vals: np.ndarray, name: str) -> np.ndarray:
    if vals.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {vals.dtype}")
    if vals.shape[1] == 0:
        raise ValueError(f"{name} has no series (0 columns); give at least one")
    return vals.astype(np.float64, copy=False)


def dataarray_layout(da: Any, name: str, allow_irregular: bool = False) -> Columns:
    """The layout of a DataArray's series without reading its values (``series`` left
    empty; a dask-backed array stays lazy): its non-time dims, their shape and coordinates,
    and the DataArray itself with ``time`` first (``names[0]``). A DataArray without a
    ``time`` dimension, or of values that are not real numbers, is refused naming
    ``name``; a time axis is checked as labelled functions check it."""
    dims = tuple(str(d) for d in da.dims)
    if "time" not in dims:
        raise ValueError(f"{name} is a DataArray with dims {dims} and no 'time' dimension; "
                         "rqa_batch reads series along 'time': rename the time axis "
                         f"(da.rename({{{dims[0] if dims else 'dim'!r}: 'time'}}))")
    if np.dtype(da.dtype).kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {da.dtype}")
    other = tuple(d for d in dims if d != "time")
    da = da.transpose("time", *other)
    if "time" in da.coords:  # its time axis checked as labelled functions check it
        from ..labels import unwrap

        unwrap(da.isel({d: 0 for d in other}), name, allow_irregular)
    shape = tuple(int(da.sizes[d]) for d in other)
    if int(np.prod(shape)) == 0:
        raise ValueError(f"{name} has no series (a non-time dimension of size 0); give at "
                         "least one")
    coords = {d: da[d].values for d in other if d in da.coords}
    return Columns.layout([da], other, shape, coords)


def _dataarray_columns(da: Any, name: str, allow_irregular: bool) -> Columns:
    lay = dataarray_layout(da, name, allow_irregular)
    da, shape = lay.names[0], lay.shape or ()
    vals = np.asarray(da.values).reshape(da.sizes["time"], -1)
    vals = _numbers(vals, name)
    names = [tuple(int(i) for i in idx) for idx in np.ndindex(*shape)] if lay.dims else [0]
    out = _columns(vals, name, names)
    out.dims, out.shape, out.coords = lay.dims, lay.shape, lay.coords
    return out


def _columns(vals: np.ndarray, name: str, names: list[Any]) -> Columns:
    """:class:`Columns` of the ``(T, N)`` float64 ``vals``: its transpose (a copy by bands of
    columns on a few threads, or none where ``vals`` is Fortran-ordered), each row's length
    and extremes; every check of :func:`_strip` and of ``as_series``, by row reductions."""
    panel = _transposed(vals)
    lo, hi = _row_extremes(panel)
    T = panel.shape[1]
    lengths = np.full(panel.shape[0], T, np.int64)
    with np.errstate(invalid="ignore"):
        fine = np.isfinite(lo) & np.isfinite(hi) & (np.maximum(hi, -lo) <= MAX_MAGNITUDE)
    for j in np.flatnonzero(~fine).tolist():  # NaN padding, or a bad value (refused)
        col = _strip_one(panel[j], name, names[j])
        lengths[j] = col.size
        lo[j], hi[j] = col.min(), col.max()
    return Columns(panel, lengths, names, lo, hi)


def _transposed(vals: np.ndarray) -> np.ndarray:
    """``vals.T`` as a C-contiguous array (series in rows): the transpose itself where
    ``vals`` is Fortran-ordered, else a copy, by bands of columns on threads."""
    out = vals.T
    if out.flags.c_contiguous:
        return out
    res = np.empty(out.shape, np.float64)
    map_slices(lambda sl: res.__setitem__(sl, out[sl]), res)
    return res


def _row_extremes(panel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's smallest and largest value (NaN where the row holds a NaN), by bands."""
    parts = map_bands(lambda b: (np.minimum.reduce(b, axis=1), np.maximum.reduce(b, axis=1)),
                      panel)
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _strip_one(col: np.ndarray, name: str, label: Any) -> np.ndarray:
    """``col`` without its trailing NaN; a NaN before its last value, a column of NaN only,
    or an inf, refused naming the column."""
    bad = np.isnan(col)
    good = np.flatnonzero(~bad)
    if not good.size:
        raise ValueError(f"{name} column {label!r} holds only NaN; give finite values")
    end = int(good[-1]) + 1
    if bad[:end].any():
        raise ValueError(f"{name} column {label!r} has a NaN at row "
                         f"{int(np.flatnonzero(bad[:end])[0])} before its last value; "
                         "only trailing NaN padding (series of different lengths) is "
                         "allowed")
    return as_series(col[:end], f"{name} column {label!r}")


def per_series(value: Any, n: int, name: str, check: Any = None) -> list[Any]:
    """``value`` for each of ``n`` series: one value for all, or a sequence of ``n``;
    ``check(v, name)`` validates each value (an error names its position:
    ``radius[3]``)."""
    if isinstance(value, dict | set):
        raise TypeError(f"{name} must be one number or a sequence of one number per series, "
                        f"got {type(value).__name__}")
    try:
        ndim = np.ndim(value)
    except ValueError:  # a ragged nesting
        ndim = -1
    if value is None or ndim == 0:
        if check is not None and value is not None:
            check(value, name)
        return [value] * n
    vals = list(np.asarray(value, dtype=object).reshape(-1)) if ndim == 1 else None
    if vals is None:
        raise ValueError(f"{name} must be one number or one per series (1-D), got "
                         + (f"shape {np.shape(value)}" if ndim > 1 else "a ragged nesting"))
    if len(vals) != n:
        raise ValueError(f"{name} has {len(vals)} values for {n} series; give one value, or "
                         "one per series (column)")
    for j, v in enumerate(vals):
        if v is None:
            raise ValueError(f"{name}[{j}] is None; give a number for every series")
        if check is not None:
            check(v, f"{name}[{j}]")
    return vals


def check_threshold_choice(radius: Any, recurrence_rate: Any) -> None:
    """Exactly one of the two ways to set the threshold."""
    if (radius is None) == (recurrence_rate is None):
        raise ValueError("give exactly one of radius= (fixed radius) or recurrence_rate= "
                         "(fixed recurrence rate; one radius found per series)")


class WindowName:
    """A window of a batch's series, as its errors name it."""

    def __init__(self, label: Any, first: int, last: int):
        self.label, self.first, self.last = label, first, last

    def __repr__(self) -> str:
        return f"{self.label!r}, window ({self.first}, {self.last}) of the embedded points"


def window_columns(cols: Columns, E: int, tau: int, window: Any, step: Any,
                   minima: dict[str, Any]) -> tuple[Columns, list[tuple[int, int, int]]]:
    """Every window of every series of ``cols`` as a series of its own (``window`` embedded
    points, every ``step``; :func:`pyedmcl.rqa.windowed.windowed_rqa`'s windows, checked
    as it checks them per series, errors naming the series) and, per window, its series
    and first and last embedded point."""
    from ..validation import check_embedding, check_int
    from .windowed import window_bounds

    span = (E - 1) * tau
    parts, owners = [], []
    for j, label in enumerate(cols.names):
        try:
            n = check_embedding(int(cols.lengths[j]), E, tau, "x")
            w = check_int(window, "window", 2, n)
            st = w if step is None else check_int(step, "step", 1)
            for name, v in minima.items():
                if v is not None:
                    try:
                        check_int(v, name, 1, w)
                    except ValueError as exc:
                        raise ValueError(f"{exc} (no line is longer than a window of {w} "
                                         "embedded points)") from None
        except ValueError as exc:
            raise ValueError(f"X column {label!r}: {exc}") from None
        bounds = window_bounds(n, w, st)
        views = np.lib.stride_tricks.sliding_window_view(cols.panel[j, :cols.lengths[j]],
                                                         w + span)
        parts.append(views[[a for a, _ in bounds]])
        owners += [(j, a, b) for a, b in bounds]
    panel = np.ascontiguousarray(np.concatenate(parts)) if parts else \
        np.zeros((0, 0))
    lo, hi = _row_extremes(panel)
    names = [WindowName(cols.names[j], a, b) for j, a, b in owners]
    return Columns(panel, np.full(panel.shape[0], panel.shape[1], np.int64), names, lo,
                   hi), owners
