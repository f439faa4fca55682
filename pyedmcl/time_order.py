"""The time axis of a table must run forward: strictly increasing, no time twice.

Rows out of order (a shuffled file, years written newest first) or a time given twice
make every delay vector mix unrelated moments: Simplex, S-map and CCM still return
numbers (rho near 0, or "forecasts" backwards in time), so the order is checked where a
table's time axis is known and a violation is refused, naming the column, the first
offending data row (1-based, as a spreadsheet counts data rows below the header) and
both values. pyEDM accepts any order; :mod:`pyedmcl.compat.pyedm` warns
(:class:`TimeOrderWarning`) instead of refusing, so scripts written for pyEDM still run.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

#: a first CSV column with one of these names (any case; a unit in brackets ignored, as in
#: "Time (s)") is the time axis, not a series; so is a first column holding dates, and an
#: unnamed one of increasing integers (the row index pandas' ``to_csv()`` writes). The
#: pyEDM compatibility layer keeps pyEDM's own rule instead (first column unless noTime).
TIME_NAMES = ("time", "times", "t", "index", "date", "dates", "datetime", "timestamp",
              "year", "years", "month", "day", "doy", "step")


def _time_name(name: Any) -> bool:
    """True for a column name that says "time": ``year``, ``Date``, ``Time (s)``, ``t``."""
    base = re.sub(r"[\(\[].*$", "", str(name)).strip().lower().replace(" ", "_")
    return base in TIME_NAMES


def _holds_dates(col) -> bool:
    """True for a column of datetimes, or of text that parses as dates in every row."""
    import pandas as pd

    if col.dtype.kind == "M":
        return True
    if col.dtype.kind != "O":
        return False
    sample = col.dropna().astype(str)
    if sample.empty or not sample.str.contains(r"\d").all():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pd.to_datetime(sample, errors="raise", format="mixed")
        except (ValueError, TypeError, OverflowError):
            return False
    return True


class TimeOrderWarning(UserWarning):
    """A time column that is not strictly increasing, where pyEDM's semantics accept it
    (the pyEDM compatibility layer): the results then follow the rows' order."""


def _comparable(values: Any) -> np.ndarray | None:
    """``values`` as numbers or datetimes that compare in time order; None where they
    cannot (text that is not dates, mixed objects): such a column is not judged."""
    import pandas as pd

    arr = np.asarray(values)
    if arr.dtype.kind in "iu":  # exact: epoch nanoseconds differ by less than a float's ulp
        return arr
    if arr.dtype.kind in "bf":
        return arr.astype(np.float64)
    if arr.dtype.kind == "M":
        return arr.astype("datetime64[ns]")
    if arr.dtype.kind in "OUS":
        s = pd.Series(arr)
        if not s.dropna().astype(str).str.contains(r"\d").all():
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for fmt in (None, "mixed"):  # one inferred format (fast), else row by row
                try:
                    return pd.to_datetime(s, format=fmt).to_numpy()
                except (ValueError, TypeError, OverflowError):
                    pass
            return None
    return None


def time_order_problem(values: Any, column: str) -> str | None:
    """What is wrong with the order of time column ``column`` (its data rows in file
    order), or None where it strictly increases (missing times are skipped; a column
    whose values are neither numbers nor dates is not judged)."""
    raw = np.asarray(values)
    t = _comparable(raw)
    if t is None or t.size < 2:
        return None
    missing = (np.isnat(t) if t.dtype.kind == "M" else np.isnan(t) if t.dtype.kind == "f"
               else np.zeros(t.shape, bool))
    rows = np.flatnonzero(~missing)
    if rows.size < 2:
        return None
    v = t[rows]
    bad = np.flatnonzero(~(v[1:] > v[:-1]))
    if bad.size == 0:
        return None
    i, j = int(rows[bad[0]]), int(rows[bad[0] + 1])
    a, b = raw[i], raw[j]
    if v[bad[0] + 1] == v[bad[0]]:
        return (f"time column {column!r} repeats the time {_text(b)} (data rows {i + 1} and "
                f"{j + 1}, 1-based): each row must be a distinct moment")
    return (f"time column {column!r} is not increasing: data row {j + 1} ({_text(b)}) "
            f"comes after row {i + 1} ({_text(a)}) (1-based data rows)")


def _text(v: Any) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    return str(v)


#: what a user can do about an out-of-order time column, per entry point
CLI_REMEDY = ("sort the rows by time, or say which column is the time with --time-column "
              "NAME (--no-time: every column is a series; time_column= in pyedmcl.io)")
API_REMEDY = ("sort the rows by time (DataFrame.sort_values / sort_index), or pass the "
              "series as arrays in time order")
COMPAT_REMEDY = ("sort the rows by time, or pass noTime=True if the first column is not "
                 "a time")


def check_time_order(values: Any, column: str, remedy: str, source: str | None = None) -> None:
    """Refuse a time column that is not strictly increasing: a ValueError naming the
    column, the first offending row, both values and ``remedy``."""
    msg = time_order_problem(values, column)
    if msg is not None:
        where = f"{source}: " if source else ""
        raise ValueError(f"{where}{msg}; {remedy}")


def check_frame_time(x: Any, name: str) -> None:
    """A pandas object's own time axis must run forward: a DatetimeIndex/PeriodIndex
    (or a TimedeltaIndex), and a DataFrame's first column named like a time
    (:data:`TIME_NAMES`) or holding dates. An integer index of distinct
    values in no monotonic order (rows sorted by value or sampled) is refused too.
    Anything else (arrays, a RangeIndex) carries no time and is not judged."""
    import pandas as pd

    if not isinstance(x, pd.Series | pd.DataFrame) or len(x) < 2:
        return
    idx = x.index
    if isinstance(idx, pd.DatetimeIndex | pd.PeriodIndex | pd.TimedeltaIndex):
        values = idx.to_timestamp() if isinstance(idx, pd.PeriodIndex) else idx
        if isinstance(idx, pd.TimedeltaIndex):
            values = idx.asi8
        check_time_order(np.asarray(values), str(idx.name or "index"), API_REMEDY,
                         f"{name} (its index)")
    elif _shuffled_integers(idx):
        msg = time_order_problem(idx.to_numpy(), str(idx.name or "index"))
        raise ValueError(f"{name} (its index): {msg}: its rows look shuffled (distinct "
                         "integers in no monotonic order, as after sort_values or sample); "
                         "sort_index() restores the order, reset_index(drop=True) keeps "
                         "this one")
    if isinstance(x, pd.DataFrame) and x.shape[1] > 1:
        first = x.columns[0]
        if _time_name(first) or _holds_dates(x.iloc[:, 0]):
            check_time_order(x.iloc[:, 0].to_numpy(), str(first), API_REMEDY, name)


def _shuffled_integers(idx: Any) -> bool:
    """An integer index (not a RangeIndex) of distinct values in no monotonic order: the
    row labels of a frame reordered by value or at random. A decreasing one (a series
    reversed on purpose) or one with repeats is not judged."""
    import pandas as pd

    if isinstance(idx, pd.RangeIndex) or idx.dtype.kind not in "iu" or len(idx) < 3:
        return False
    if idx.is_monotonic_increasing or idx.is_monotonic_decreasing:
        return False
    return bool(idx.is_unique)


def warn_time_order(df: Any, what: str) -> None:
    """pyEDM's rule (the first column is time unless noTime): warn where it is not
    strictly increasing; pyEDM accepts it, and so does the compatibility layer."""
    import pandas as pd

    from ._precision import _user_level

    if not isinstance(df, pd.DataFrame) or df.shape[1] < 1 or len(df) < 2:
        return
    msg = time_order_problem(df.iloc[:, 0].to_numpy(), str(df.columns[0]))
    if msg is not None:
        warnings.warn(f"{what}: {msg}; the results follow the rows' order, so predictions "
                      f"mix unrelated moments; {COMPAT_REMEDY}", TimeOrderWarning,
                      stacklevel=_user_level())
