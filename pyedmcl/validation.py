"""Input checks shared by every public function: clear errors naming the parameter."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_series(x: Any, name: str = "x", *, allow_nan: bool = False) -> np.ndarray:
    """A 1-D float64 host copy of ``x`` (numpy, list, pandas Series/1-column frame).

    Device arrays are copied to the host here (one documented copy); functions with a
    device input path validate them on the device instead (:mod:`pyedmcl.interop`).
    """
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    elif hasattr(x, "get") and hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
        x = x.get()  # a device array (pyopencl.array.Array / UsmArray)
    try:
        arr = np.asarray(x)
    except Exception as exc:
        raise TypeError(f"{name} must be array-like of numbers, got {type(x).__name__}") from exc
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (a single series), got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size == 0:
        raise ValueError(f"{name} is empty; a series needs at least one value")
    if not allow_nan and not np.all(np.isfinite(arr)):
        raise ValueError(nonfinite_message(name, int(np.flatnonzero(~np.isfinite(arr))[0])))
    return arr


def nonfinite_message(name: str, index: int) -> str:
    """The one error text for a NaN/inf in a series, whether found on the host or a device."""
    return f"{name} contains NaN or inf (first at index {index}); remove or impute them"


def check_int(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    """An integer in [lo, hi] (hi None = unbounded), or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}={value} is out of range; allowed: {rng}")
    return value


def check_embedding(n: int, E: int, tau: int, name: str = "x", extra: int = 0) -> int:
    """Number of embedded points; error if the series is too short for E and tau."""
    E = check_int(E, "E", 1, 512)
    tau = check_int(tau, "tau", 1)
    need = (E - 1) * tau + 1 + extra
    if n < need:
        raise ValueError(
            f"{name} has {n} values, too short for E={E}, tau={tau}"
            + (f" (plus {extra} more for Tp/knn)" if extra else "")
            + f": needs at least (E-1)*tau+1{'+' + str(extra) if extra else ''} = {need}"
        )
    return n - (E - 1) * tau


METRICS = ("euclidean", "maximum", "manhattan")


def check_metric(metric: str) -> str:
    m = str(metric).lower()
    aliases = {"l2": "euclidean", "chebyshev": "maximum", "supremum": "maximum", "linf": "maximum",
               "l1": "manhattan", "taxicab": "manhattan", "cityblock": "manhattan"}
    m = aliases.get(m, m)
    if m not in METRICS:
        raise ValueError(f"metric={metric!r} is not supported; allowed: {', '.join(METRICS)}")
    return m


def check_dtype(dtype: Any, info: Any = None) -> np.dtype:
    """``dtype`` as float32/float64 (a string, numpy type or dtype), or a ValueError naming
    ``dtype``; float64 also needs fp64 on ``info``'s device when given. None is the
    default, float32."""
    if dtype is None:
        dtype = np.float32
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype={dtype!r} is not supported; allowed: float32, float64")
    if dt == np.float64 and info is not None and not info.fp64:
        raise ValueError(f"dtype=float64 needs fp64, which device {info.name} lacks; use float32")
    return dt
