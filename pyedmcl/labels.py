"""Labelled data in and out: xarray DataArrays and time-indexed pandas objects.

Inputs. The public EDM and RQA functions take, besides arrays, an ``xarray.DataArray``
with a ``time`` dimension (1-D: one series; 2-D ``(time, series)`` in either order: one
series per coordinate of the other dimension, named by it) and a pandas Series/DataFrame
indexed by time (a DatetimeIndex, PeriodIndex or TimedeltaIndex, a numeric index named
like a time, or a first column of datetimes). :func:`unwrap` turns each into the pandas
object every function already reads (a Series, or a DataFrame with one column per series)
and keeps its labels aside (:class:`Labels`); the numbers are not touched, so a
labelled call returns the unlabelled call's values bit for bit.

Checks. The time axis must strictly increase (:mod:`pyedmcl.time_order`) and be equally
spaced: delay embedding and ``Tp`` count rows, so rows at uneven times mix lags of
different lengths. A calendar frequency pandas recognises (monthly, yearly: steps of
28-31 days) counts as equal steps. An irregular axis is refused, naming the argument, the
first irregular step and the remedy (resample, or ``allow_irregular=True`` to treat the
rows as equally spaced).

Outputs. :func:`labelled` wraps a public function: its results carry the labels
(``result.labels``): predictions are indexed by time (``as_dataframe()``,
``as_xarray()``), CCM columns and all-to-all matrices by series names. ``xarray`` is an
optional dependency (``pip install "pyedmcl[xarray]"``), imported only to build an
``as_xarray()`` result.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .time_order import _holds_dates, _time_name, check_frame_time, check_time_order

__all__ = ["Labels", "is_dataarray", "labelled", "require_xarray", "unwrap"]

#: the arguments of the public functions that take data (everything else is an option)
DATA_ARGS = ("x", "y", "target", "X")
#: relative tolerance of a "regular" step: floating-point times (0.1, 0.2, ...) differ
#: from their step by rounding only
STEP_RTOL = 1e-6
XARRAY_HINT = 'pip install "pyedmcl[xarray]"'
IRREGULAR_REMEDY = ("resample it to equal steps (DataArray.resample(time=...).mean() or "
                    "DataFrame.resample(...).mean(), then fill the gaps), or pass "
                    "allow_irregular=True to proceed treating the rows as equally spaced")


def require_xarray() -> Any:
    """The ``xarray`` module, or an ImportError naming the extra that installs it."""
    try:
        import xarray
    except ImportError as exc:
        raise ImportError(f"labelled xarray output needs xarray: {XARRAY_HINT}") from exc
    return xarray


def is_dataarray(x: Any) -> bool:
    """True for an ``xarray.DataArray`` (recognised without importing xarray)."""
    return type(x).__name__ == "DataArray" and type(x).__module__.split(".")[0] == "xarray"


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "pandas" and hasattr(x, "index")


@dataclass(frozen=True)
class Labels:
    """The labels of one input: its time axis (a pandas Index; None: rows only), the
    name of that axis, the series names (a 2-D input's columns; a 1-D input's own name,
    if any) and the name of the dimension along which the series lie."""

    time: Any = None
    time_name: str = "time"
    names: tuple[str, ...] | None = None
    series_dim: str | None = None

    def at(self, rows: Any) -> Any:
        """The time of each 0-based row (a pandas Index); rows before the first or past
        the last are extrapolated by the axis' frequency (a calendar one where pandas
        infers it), else by its first/last step. Without a time axis: the rows."""
        import pandas as pd

        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if self.time is None:
            return pd.Index(rows, name=self.time_name)
        t, n = self.time, len(self.time)
        inside = (rows >= 0) & (rows < n)
        if inside.all():
            return t[rows].rename(self.time_name)
        step_lo, step_hi = _steps(t)
        out = [t[r] if 0 <= r < n
               else (t[n - 1] + int(r - n + 1) * step_hi if r >= n else t[0] + int(r) * step_lo)
               for r in rows.tolist()]
        return pd.Index(out, name=self.time_name)


def _freq(t: Any) -> Any:
    """The calendar frequency pandas infers for datetime labels ``t`` (an offset), or None
    (fewer than 3 labels, or no frequency)."""
    import warnings

    import pandas as pd

    if not isinstance(t, pd.DatetimeIndex) or len(t) < 3:
        return None
    with warnings.catch_warnings():  # its return type changes (str -> offset) in pandas 4
        warnings.simplefilter("ignore")
        freq = pd.infer_freq(t)
    return None if freq is None else pd.tseries.frequencies.to_offset(freq)


def _steps(t: Any) -> tuple[Any, Any]:
    """The step before the first and after the last label: the inferred calendar
    frequency of a datetime axis, else its first and last differences (1 if one label)."""
    import pandas as pd

    if len(t) < 2:
        return 1, 1
    off = _freq(t)
    if off is not None:
        return off, off
    if isinstance(t, pd.PeriodIndex):
        return 1, 1
    return t[1] - t[0], t[-1] - t[-2]


def _dataarray_to_pandas(da: Any, name: str) -> tuple[Any, Labels]:
    """A DataArray with a ``time`` dimension as a pandas Series (1-D) or a DataFrame of
    one column per coordinate of its other dimension (2-D), and its labels."""
    import pandas as pd

    dims = tuple(str(d) for d in da.dims)
    if "time" not in dims:
        raise ValueError(f"{name} is a DataArray with dims {dims} and no 'time' dimension; "
                         "pyedmcl reads series along 'time': rename the time axis "
                         f"(da.rename({{{dims[0] if dims else 'dim'!r}: 'time'}})) or pass "
                         "plain arrays")
    if da.ndim > 2:
        raise ValueError(f"{name} is a DataArray with dims {dims}: allowed are ('time',) "
                         "(one series) or ('time', <series>) (one series per coordinate); "
                         "select or stack the other dimensions first "
                         "(da.stack(series=[...]))")
    da = da.transpose("time", ...)
    time = None
    if "time" in da.coords:  # its own index: a DatetimeIndex, or a CFTimeIndex (cftime dates)
        time = da.indexes["time"] if "time" in da.indexes else pd.Index(da["time"].values)
        time = time.rename("time")
    values = np.asarray(da.values)
    if da.ndim == 1:
        label = None if da.name is None else str(da.name)
        obj = pd.Series(values, index=time, name=da.name)
        return obj, Labels(time, "time", None if label is None else (label,), None)
    dim = dims[0] if dims[1] == "time" else dims[1]
    cols = (np.asarray(da[dim].values) if dim in da.coords else np.arange(values.shape[1]))
    names = tuple(str(c) for c in cols)
    return pd.DataFrame(values, index=time, columns=list(names)), Labels(time, "time", names, dim)


def _pandas_labels(x: Any, name: str) -> tuple[Any, Labels | None]:
    """A pandas input, its first column of datetimes made its index; its labels when its
    index is a time axis (datetimes, periods, timedeltas, or numbers named like a time)."""
    import pandas as pd

    if (isinstance(x, pd.DataFrame) and x.shape[1] > 1 and x.iloc[:, 0].dtype.kind == "M"
            and isinstance(x.index, pd.RangeIndex)):
        x = x.set_index(x.columns[0])
    idx = x.index
    timeish = isinstance(idx, pd.DatetimeIndex | pd.PeriodIndex | pd.TimedeltaIndex) or (
        idx.dtype.kind in "iuf" and not isinstance(idx, pd.RangeIndex)
        and idx.name is not None and _time_name(idx.name))
    names = (tuple(str(c) for c in x.columns) if isinstance(x, pd.DataFrame)
             else None if x.name is None else (str(x.name),))
    if not timeish:
        if isinstance(x, pd.DataFrame) and x.shape[1] > 1 and (
                _time_name(x.columns[0]) or _holds_dates(x.iloc[:, 0])):
            return x, None  # a time column read as today (order checked by as_series)
        return x, Labels(None, "time", names, None) if names else None
    tname = str(idx.name) if idx.name is not None else "time"
    return x, Labels(idx, tname, names, None)


def irregular_step(t: Any) -> tuple[int, str, str] | None:
    """The first step of time axis ``t`` (a pandas Index) that breaks its regularity, as
    ``(i, step, typical)`` (step ``i`` runs from ``t[i]`` to ``t[i + 1]``; both steps as
    text); None where the steps are equal within :data:`STEP_RTOL` of the typical
    (median) step or follow a calendar frequency pandas recognises (``MS``, ``YE``, ...,
    judged from the first three labels, so a missing month is found where it is)."""
    import pandas as pd

    if t is None or len(t) < 3:
        return None
    if isinstance(t, pd.DatetimeIndex):
        if _freq(t) is not None:
            return None
        freq = _freq(t[:3])
        if freq is not None:
            want = pd.date_range(t[0], periods=len(t), freq=freq)
            j = int(np.flatnonzero(np.asarray(want != t))[0])
            return (j - 1, str(t[j] - t[j - 1]),
                    f"one {freq.freqstr} period (pandas' frequency code)")
    if t.dtype.kind == "O":
        return _irregular_objects(t)
    if isinstance(t, pd.DatetimeIndex | pd.TimedeltaIndex):
        unit = "datetime64[ns]" if isinstance(t, pd.DatetimeIndex) else "timedelta64[ns]"
        v = np.asarray(t.values).astype(unit).astype(np.int64)
    elif isinstance(t, pd.PeriodIndex):
        v = np.asarray(t.asi8, dtype=np.int64)
    else:
        v = np.asarray(t, dtype=np.float64)
    d = np.diff(v)
    med = np.median(d)
    bad = np.flatnonzero(np.abs(d - med) > STEP_RTOL * abs(med))
    if bad.size == 0:
        return None
    i = int(bad[0])
    if isinstance(t, pd.DatetimeIndex | pd.TimedeltaIndex):
        return i, str(pd.Timedelta(int(d[i]), "ns")), str(pd.Timedelta(int(med), "ns"))
    if isinstance(t, pd.PeriodIndex):
        return i, f"{int(d[i])} periods", f"{int(med)} period(s) of {t.freqstr}"
    return i, f"{d[i].item():g}", f"{float(med):g}"


def _irregular_objects(t: Any) -> tuple[int, str, str] | None:
    """:func:`irregular_step` of a time axis of objects: cftime dates (climate model
    calendars, xarray's ``CFTimeIndex``: a frequency xarray infers is regular) or other
    objects whose differences are timedeltas or numbers; an axis of anything else is not
    judged (None), as :mod:`pyedmcl.time_order` does not judge it."""
    try:
        import xarray as xr

        if xr.infer_freq(t) is not None:
            return None
    except (ImportError, TypeError, ValueError):
        pass
    try:
        d = [b - a for a, b in zip(t[:-1], t[1:], strict=True)]
        sec = np.array([x.total_seconds() if hasattr(x, "total_seconds") else float(x)
                        for x in d])
    except (TypeError, ValueError):
        return None
    med = float(np.median(sec))
    bad = np.flatnonzero(np.abs(sec - med) > STEP_RTOL * abs(med))
    if bad.size == 0:
        return None
    i = int(bad[0])
    return i, str(d[i]), f"{med:g} s" if hasattr(d[i], "total_seconds") else f"{med:g}"


def check_spacing(labels: Labels | None, name: str) -> None:
    """Refuse a time axis whose steps are not all equal: a ValueError naming ``name``,
    the first irregular step and the remedy."""
    if labels is None or labels.time is None:
        return
    found = irregular_step(labels.time)
    if found is None:
        return
    i, step, typical = found
    t = labels.time
    raise ValueError(f"{name}: time axis {labels.time_name!r} is irregularly spaced: step "
                     f"{i + 1} from {t[i]} to {t[i + 1]} is {step}, most steps are "
                     f"{typical}; EDM and RQA count rows as equal time steps: "
                     f"{IRREGULAR_REMEDY}")


def unwrap(x: Any, name: str, allow_irregular: bool = False) -> tuple[Any, Labels | None]:
    """``x`` as the object the functions read (a DataArray becomes its pandas twin; other
    inputs are returned as they are) and its labels (None: unlabelled). The time axis is
    checked: strictly increasing, and equally spaced unless ``allow_irregular``."""
    if is_dataarray(x):
        obj, lab = _dataarray_to_pandas(x, name)
        if lab.time is not None:
            check_time_order(np.asarray(lab.time), "time",
                             "sort it by time (da.sortby('time')), or drop repeated times",
                             f"{name} (its time coordinate)")
    elif _is_pandas(x):
        obj, lab = _pandas_labels(x, name)
        check_frame_time(obj, name)
    else:
        return x, None
    if not allow_irregular:
        check_spacing(lab, name)
    return obj, lab


def as_pandas(x: Any, name: str) -> Any:
    """A DataArray reaching a low-level entry point directly: its pandas twin, checked as
    :func:`unwrap` checks it (allow_irregular is an option of the public functions)."""
    return unwrap(x, name)[0]


def _first_time(found: dict[str, Labels]) -> Labels | None:
    for arg in ("x", "X", "target", "y"):
        lab = found.get(arg)
        if lab is not None and lab.time is not None:
            return lab
    return None


def _window_times(df: Any, lab: Labels, E: Any, tau: Any) -> Any:
    """A windowed RQA's frame (index: each window's first and last embedded point) with
    the time of the first and last raw sample each window covers (``time_start``,
    ``time_end``): embedded point ``k`` spans samples ``k .. k + (E - 1) tau``."""
    span = (int(E) - 1) * int(tau)
    start = np.asarray(df.index.get_level_values("start"), dtype=np.int64)
    end = np.asarray(df.index.get_level_values("end"), dtype=np.int64) + span
    out = df.copy()
    out.insert(0, "time_end", np.asarray(lab.at(end)))
    out.insert(0, "time_start", np.asarray(lab.at(start)))
    out.attrs.update(df.attrs)
    return out


def attach(result: Any, found: dict[str, Labels], args: dict[str, Any] | None = None) -> Any:
    """Give ``result`` the labels of the inputs (``result.labels``) where its class reads
    them: predictions their time axis (and a 2-D target's names), CCM the two series'
    names, an all-to-all map the series' names and their dimension; a windowed RQA's
    frame gains each window's first and last time (``args``: the call's arguments)."""
    if not found:
        return result
    if (type(result).__name__ == "DataFrame" and list(result.index.names) == ["start", "end"]
            and _first_time(found) is not None):
        args = args or {}
        return _window_times(result, _first_time(found), args.get("E", 1), args.get("tau", 1))
    if isinstance(result, list | tuple):  # one result per theta, per target, ...
        for r in result:
            attach(r, found)
        return result
    if isinstance(getattr(result, "results", None), list):  # a scan keeping each run
        attach(result.results, found)
    if not hasattr(result, "labels"):
        return result
    kind = getattr(result, "LABELS", None)
    if kind == "time":
        lab = _first_time(found)
        tgt = found.get("target")
        names = tgt.names if tgt is not None and tgt.names and len(tgt.names) > 1 else None
        if lab is not None or names is not None:
            base = lab or Labels()
            result.labels = Labels(base.time, base.time_name, names, base.series_dim)
    elif kind == "pair":
        xs, ys = found.get("x"), found.get("y")
        nx = xs.names[0] if xs is not None and xs.names and len(xs.names) == 1 else None
        ny = ys.names[0] if ys is not None and ys.names and len(ys.names) == 1 else None
        if nx is not None or ny is not None:
            result.labels = Labels(None, "time", (nx or "x", ny or "y"), None)
    elif kind == "series":
        lab = found.get("X")
        if lab is not None:
            result.labels = lab
            if getattr(result, "names", None) is None and lab.names:
                result.names = list(lab.names)
    return result


def labelled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` taking labelled data (:func:`unwrap` on each data argument) with a
    keyword-only ``allow_irregular: bool = False``, its result given the labels
    (:func:`attach`)."""
    sig = inspect.signature(fn)
    if "allow_irregular" in sig.parameters:
        return fn
    data = [p for p in sig.parameters if p in DATA_ARGS]

    @functools.wraps(fn)
    def wrapper(*args: Any, allow_irregular: bool = False, **kwargs: Any) -> Any:
        if not isinstance(allow_irregular, bool | np.bool_):
            raise TypeError(f"allow_irregular must be True or False, got {allow_irregular!r}")
        if not any(is_dataarray(v) or _is_pandas(v)
                   for v in (*args, *kwargs.values())):  # nothing labelled: as it is
            return fn(*args, **kwargs)
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError:  # an unknown keyword: the function's own error names it
            return fn(*args, **kwargs)
        found: dict[str, Labels] = {}
        for arg in data:
            if arg in bound.arguments:
                obj, lab = unwrap(bound.arguments[arg], arg, bool(allow_irregular))
                bound.arguments[arg] = obj
                if lab is not None:
                    found[arg] = lab
        return attach(fn(*bound.args, **bound.kwargs), found, bound.arguments)

    params = list(sig.parameters.values())
    extra = inspect.Parameter("allow_irregular", inspect.Parameter.KEYWORD_ONLY,
                              default=False, annotation="bool")
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        params.insert(len(params) - 1, extra)
    else:
        params.append(extra)
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = (fn.__doc__ or "") + """

    Labelled data: an ``xarray.DataArray`` with a ``time`` dimension (2-D: one series per
    coordinate of the other dimension) or a pandas object indexed by time; its time axis
    must strictly increase and be equally spaced (``allow_irregular=True``: treat an
    irregular one's rows as equally spaced). The result carries the labels
    (``result.labels``, ``as_dataframe()``/``as_xarray()``; docs/labelled_data.md).
"""
    return wrapper
