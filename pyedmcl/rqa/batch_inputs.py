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

from ..labels import is_dataarray

#: how a batch runs (see :func:`pyedmcl.rqa_batch`)
METHODS = ("series", "packed")


@dataclass
class Columns:
    """The series of a batch (1-D float64, trailing NaN removed), their names (the index
    of the result frame) and, for a DataArray, what rebuilds its non-time dimensions."""

    series: list[np.ndarray]
    names: list[Any]
    dims: tuple[str, ...] | None = None  # a DataArray's non-time dims, in order
    shape: tuple[int, ...] | None = None
    coords: dict[str, Any] | None = None


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
        return Columns(_strip(vals, name, list(X.columns)), list(X.columns))
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
    names = list(range(vals.shape[1]))
    return Columns(_strip(vals, name, names), names)


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
    return Columns([], [da], other, shape, coords)


def _dataarray_columns(da: Any, name: str, allow_irregular: bool) -> Columns:
    lay = dataarray_layout(da, name, allow_irregular)
    da, shape = lay.names[0], lay.shape or ()
    vals = np.asarray(da.values).reshape(da.sizes["time"], -1)
    vals = _numbers(vals, name)
    names = [tuple(int(i) for i in idx) for idx in np.ndindex(*shape)] if lay.dims else [0]
    return Columns(_strip(vals, name, names), names, lay.dims, lay.shape, lay.coords)


def _strip(vals: np.ndarray, name: str, names: list[Any]) -> list[np.ndarray]:
    """Each column without its trailing NaN; a NaN before a column's last value, or a
    column of NaN only, is refused naming the column."""
    out = []
    nan = np.isnan(vals)
    for j, label in enumerate(names):
        col = vals[:, j]
        bad = nan[:, j]
        if not bad.any():
            out.append(np.ascontiguousarray(col))
            continue
        good = np.flatnonzero(~bad)
        if not good.size:
            raise ValueError(f"{name} column {label!r} holds only NaN; give finite values")
        end = int(good[-1]) + 1
        if bad[:end].any():
            raise ValueError(f"{name} column {label!r} has a NaN at row "
                             f"{int(np.flatnonzero(bad[:end])[0])} before its last value; "
                             "only trailing NaN padding (series of different lengths) is "
                             "allowed")
        out.append(np.ascontiguousarray(col[:end]))
    return out


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
