"""Input checks shared by every public function: clear errors naming the parameter."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ._bands import largest_magnitude, rowwise
from ._extremes import extremes, same_values


def as_series(x: Any, name: str = "x", *, allow_nan: bool = False,
              remedy: str | None = None) -> np.ndarray:
    """A 1-D float64 host copy of ``x`` (numpy, list, pandas Series/1-column frame).

    Several series (a 2-D array of more than one column) are refused, naming ``name``,
    the shape and what to pass instead (``remedy``, else one column).

    Device arrays are copied to the host here (one documented copy); functions with a
    device input path validate them on the device instead (:mod:`pyedmcl.interop`).
    """
    if hasattr(x, "to_numpy"):
        if type(x).__module__.split(".")[0] == "xarray":  # 2-D: its dims in time order
            from .labels import as_pandas

            x = as_pandas(x, name)
        check_frame_time(x, name)
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
        raise ValueError(not_one_series(name, arr.shape, remedy))
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size == 0:
        raise ValueError(f"{name} is empty; a series needs at least one value")
    if not arr.flags.c_contiguous:  # a column of a 2-D array, a strided slice: one copy
        arr = same_values(np.ascontiguousarray(arr), arr)  # (later passes read 3-10x faster)
    top = None
    if not allow_nan:  # two reductions (the call's own, where it took them already:
        lo, hi = extremes(arr)  # pyedmcl._extremes); finite, they bound |value| too
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(nonfinite_message(name, int(np.flatnonzero(~np.isfinite(arr))[0])))
        top = max(hi, -lo)
    check_magnitude(arr, name, top)
    return arr


def not_one_series(name: str, shape: tuple[int, ...], remedy: str | None = None) -> str:
    """The error text for an array of several series where one is documented: its shape,
    and what to pass instead (one column; ``remedy`` names the argument that takes a
    multivariate input where the function has one)."""
    fix = remedy or "pass one column (x[:, j]) or call once per series"
    return f"{name} must be 1-D (a single series), got shape {tuple(shape)}; {fix}"


def check_frame_time(x: Any, name: str) -> None:
    """A pandas input's time axis (DatetimeIndex, or a first column named like a time)
    must strictly increase (:func:`pyedmcl.time_order.check_frame_time`)."""
    if type(x).__module__.split(".")[0] != "pandas":
        return
    from .time_order import check_frame_time as check

    check(x, name)


#: largest |value| a series may hold: squared differences of E coordinates stay far inside
#: float64 (two values of 1e150 differ by at most 2e150; its square 4e300)
MAX_MAGNITUDE = 1e150


def check_magnitude(arr: np.ndarray, name: str, top: float | None = None) -> None:
    """Refuse a series whose squared distances would overflow float64 (every distance,
    weight and skill would be inf or NaN): a ValueError naming it and the allowed range.
    ``top``: the largest |value| where the caller has it (a finite series' max and -min)."""
    if arr.size == 0:
        return
    if top is None:
        # no N-long temporaries: an RQA of 10^6 points spent ~2 ms of host time here
        # before its first launch
        top = largest_magnitude(arr)
    if top > MAX_MAGNITUDE:
        with np.errstate(invalid="ignore"):
            i = int(np.flatnonzero(np.abs(arr) > MAX_MAGNITUDE)[0])
        raise ValueError(f"{name} holds values up to {float(np.nanmax(np.abs(arr))):.3g} "
                         f"(first at index {i}); allowed: |value| <= {MAX_MAGNITUDE:.0e}, "
                         "beyond which squared distances overflow: rescale the series "
                         "(e.g. divide it by a power of ten)")


class ConstantSeriesWarning(UserWarning):
    """A series that is constant (also after its NaN rows are left out): every point
    coincides with every other, so a skill or recurrence measure of it means nothing
    (:mod:`pyedmcl.constant_series`)."""


class SelfMapWarning(UserWarning):
    """Two arguments that are one series (``ccm(x, x)``): the cross map is the series
    mapped onto itself, rho near 1 whatever the dynamics. Warned, not refused: it is the
    diagonal of an all-to-all map (:func:`pyedmcl.xmap`). The CLI refuses it."""


def warn_constant(rows: np.ndarray, names: Any, what: str,
                  ptp: np.ndarray | None = None) -> None:
    """One warning naming the constant series among ``rows`` (1-D: one series; 2-D: one
    per row): every point of a constant series coincides, so its neighbours are chosen
    by the tie order alone and a skill computed from them means nothing (pyEDM returns a
    number all the same; so does pyedmcl, with this warning). ``ptp``: each row's
    max - min where the caller has it already (no pass over ``rows``)."""
    from ._precision import _user_level

    r = np.atleast_2d(rows)
    if not r.shape[1]:  # no values: nothing is constant
        return
    if ptp is None:
        ptp = rowwise(lambda b: np.ptp(b, axis=1), r)
    flat = np.flatnonzero(np.asarray(ptp) == 0)
    if flat.size == 0:
        return
    labels = [str(names[i]) if names is not None else str(i) for i in flat[:10]]
    more = f" and {flat.size - 10} more" if flat.size > 10 else ""
    verb = "is" if flat.size == 1 else "are"
    warnings.warn(f"{what}: series {', '.join(labels)}{more} {verb} constant: the points of a "
                  "constant series all coincide, so its neighbours are chosen by tie order "
                  "alone and its skill means nothing", ConstantSeriesWarning,
                  stacklevel=_user_level())


def nonfinite_message(name: str, index: int) -> str:
    """The one error text for a NaN/inf in a series, whether found on the host or a device."""
    return f"{name} contains NaN or inf (first at index {index}); remove or impute them"


def _range_text(lo: int | None, hi: int | None) -> str:
    if lo is None and hi is None:
        return "any integer"
    if hi is None:
        return f">= {lo}"
    if lo is None:
        return f"<= {hi}"
    return f"in [{lo}, {hi}]"


def as_integer(value: Any, name: str, allowed: str = "an integer") -> int:
    """``value`` as an int if it is integral: ints and numpy ints, and floats (Python or
    numpy) with no fractional part (``E=2.0`` is 2). ``True``, ``1.5``, ``"3"``, NaN and
    lists are refused with a TypeError naming ``name`` and what is ``allowed``."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer ({allowed}), got the boolean {value!r}")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and np.isfinite(value) and float(value).is_integer():
        return int(value)
    if isinstance(value, float | np.floating):
        raise NonIntegralError(f"{name} must be an integer ({allowed}), got {value!r}")
    raise TypeError(f"{name} must be an integer ({allowed}), got {value!r}")


class NonIntegralError(TypeError, ValueError):
    """A number with a fractional part (or NaN/inf) where an integer is needed (``E=1.5``):
    a wrong *value* of an accepted type, so both ``except ValueError`` and, as before,
    ``except TypeError`` catch it."""


def int_arg(text: str) -> int:
    """An integer command-line value, as the API takes it: ``3`` and ``3.0`` are 3,
    ``1.5`` or ``x`` are refused (argparse then exits 2 with one line)."""
    import argparse

    try:
        return int(text)
    except ValueError:
        pass
    try:
        return as_integer(float(text), "value")
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def check_int(value: Any, name: str, lo: int | None, hi: int | None = None) -> int:
    """An integer in [lo, hi] (None = unbounded on that side), or a TypeError/ValueError
    naming ``name`` and the allowed range. Integral floats are accepted (see
    :func:`as_integer`)."""
    rng = _range_text(lo, hi)
    value = as_integer(value, name, rng)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name}={value} is out of range; allowed: {rng}")
    return value


def check_int_array(values: Any, name: str, lo: int | None, hi: int | None = None) -> np.ndarray:
    """Each element of ``values`` (a scalar or a sequence) checked by :func:`check_int`;
    an int64 array. Floats must be integral, as for scalars.

    A numeric array is checked whole (an all-to-all map's E holds one value per series:
    element by element would be slow); any element it refuses, or any
    other input, goes through :func:`check_int` element by element, which raises the
    first error in order."""
    fast = _int_array_fast(values, lo, hi)
    if fast is not None:
        return fast
    arr = np.atleast_1d(np.asarray(values, dtype=object))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one integer or a 1-D list of integers, got shape {arr.shape}")
    return np.array([check_int(v, name, lo, hi) for v in arr], dtype=np.int64)


def _int_array_fast(values: Any, lo: int | None, hi: int | None) -> np.ndarray | None:
    """``values`` as int64 when it is a 1-D (or scalar) numpy integer or float array (or
    an array-like with such a dtype: a pandas Series) whose every element
    :func:`check_int` accepts; else None (the caller checks element by element: lists,
    whose bools numpy would turn into numbers, other inputs, and every refusal with its
    message)."""
    if not isinstance(values, np.ndarray):
        if getattr(values, "dtype", None) is None:
            return None
        values = np.asarray(values)
    if values.dtype.kind not in "iuf" or values.ndim > 1:
        return None
    arr = np.atleast_1d(values)
    if arr.dtype.kind == "f":
        # integral and within int64 (2**63 is a float64 exactly; larger ones are refused
        # below by the range, or element by element)
        if not (np.isfinite(arr).all() and (arr == np.floor(arr)).all()
                and (np.abs(arr) < 2.0 ** 63).all()):
            return None
    elif arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2 ** 63:
        return None
    if arr.size and ((lo is not None and arr.min() < lo) or (hi is not None and arr.max() > hi)):
        return None
    return arr.astype(np.int64)


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """None (fresh entropy) or an integer >= 0."""
    return None if seed is None else check_int(seed, name, 0)


def available_host_memory() -> int | None:
    """Bytes of host memory available now (Linux ``MemAvailable``, else free pages), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


#: a request may use at most this share of the host memory available when it starts
HOST_MEMORY_SHARE = 0.5


def check_host_memory(name: str, value: int, bytes_per_unit: float, what: str) -> None:
    """Refuse ``name=value`` up front when it needs more than ``HOST_MEMORY_SHARE`` of the
    available host memory (``bytes_per_unit`` each), instead of growing until the
    machine swaps or the process is killed. The message names the largest value allowed."""
    avail = available_host_memory()
    if avail is None or bytes_per_unit <= 0:
        return
    budget = avail * HOST_MEMORY_SHARE
    need = value * bytes_per_unit
    if need > budget:
        limit = max(0, int(budget // bytes_per_unit))
        raise ValueError(
            f"{name}={value} needs about {_gib(need)} of host memory for {what}, more than "
            f"{HOST_MEMORY_SHARE:.0%} of the {_gib(avail)} available; allowed here: {name} <= {limit}")


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**27 else f"{nbytes / 2**20:.3g} MiB"


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
