"""Reading series from files for the CLI and batch jobs: .csv, .npy, .h5, .zarr, stdin.

Every reader returns a :class:`Table`: a float64 matrix with one column per
series, and the column names. Errors name the file, the column and what is
allowed (empty file, unknown column, non-numeric column, wrong shape).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .time_order import (
    CLI_REMEDY,
    TIME_NAMES,  # noqa: F401  (read_table's rule, documented here)
    _holds_dates,
    _time_name,
    check_time_order,
)

FORMATS = (".csv", ".txt", ".npy", ".h5", ".hdf5", ".zarr")
@dataclass
class Table:
    """Series as columns: ``data[:, j]`` is series ``names[j]``; ``time`` if the file had one."""

    data: np.ndarray
    names: list[str]
    source: str
    time: np.ndarray | None = None
    #: CSV columns left out because they are not numeric (named in errors if selected)
    text_columns: tuple[str, ...] = ()

    #: the name of the time column in the file (None without one)
    time_name: str | None = None
    #: CSV header names that appear more than once (pandas reads them as x, x.1, ...):
    #: naming one is ambiguous, so it is an error
    repeated: tuple[str, ...] = ()

    def times_at(self, rows: np.ndarray) -> np.ndarray:
        """The time of each 0-based data row; rows past either end are extrapolated by the
        series' first step (numbers and dates), else left empty. Without a time column,
        the rows themselves."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.time is None:
            return rows
        return extend_time(self.time, rows)

    def frame(self):
        """The table as a pandas DataFrame (series names as columns)."""
        import pandas as pd

        return pd.DataFrame(self.data, columns=self.names)

    def column(self, name: str | int) -> np.ndarray:
        return self.data[:, self.index(name)]

    def index(self, name: str | int) -> int:
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit() and name not in self.names):
            i = int(name)
            if not 0 <= i < len(self.names):
                raise ValueError(f"column index {i} is out of range for {self.source}: "
                                 f"it has {len(self.names)} columns (0..{len(self.names) - 1})")
            return i
        if name in self.repeated:
            raise ValueError(f"column {name!r} appears more than once in the header of "
                             f"{self.source}; rename the columns so that each name is one "
                             f"series")
        if name in self.text_columns:
            raise ValueError(f"column {name!r} in {self.source} is not numeric; "
                             f"numeric columns: {', '.join(self.names[:30])}")
        if name not in self.names:
            raise ValueError(f"column {name!r} not found in {self.source}; "
                             f"available: {', '.join(self.names[:30])}"
                             + (" ..." if len(self.names) > 30 else ""))
        return self.names.index(name)

    def select(self, columns: list[str] | None) -> Table:
        if not columns:
            return self
        idx = [self.index(c) for c in columns]
        return Table(self.data[:, idx], [self.names[i] for i in idx], self.source, self.time,
                     self.text_columns, self.time_name, self.repeated)


def _split_dataset(path: str) -> tuple[str, str | None]:
    """``file.h5:group/ds`` -> (``file.h5``, ``group/ds``)."""
    for ext in (".h5", ".hdf5", ".zarr"):
        if ext + ":" in path:
            head, _, ds = path.partition(ext + ":")
            return head + ext, ds
    return path, None


def _pandas_index(df) -> bool:
    """True for a first column without a name (pandas reads it as ``Unnamed: 0``) holding
    strictly increasing integers: the row index ``DataFrame.to_csv()`` writes, not a
    series; or holding ``0..n-1`` in no monotonic order: the index of a frame shuffled
    before it was written, refused afterwards (:mod:`pyedmcl.time_order`). A decreasing
    unnamed column stays a series."""
    name, col = str(df.columns[0]), df.iloc[:, 0]
    if not (name == "" or re.fullmatch(r"Unnamed: 0", name)) or col.dtype.kind not in "iu":
        return False
    v = col.to_numpy()
    if v.size == 0:
        return False
    d = np.diff(v)
    if np.all(d > 0):
        return True
    shuffled = v.size > 2 and np.array_equal(np.sort(v), np.arange(v.size))
    return bool(shuffled and not np.all(d < 0))


def _time_position(df, source: str, time_column: str | int | bool | None) -> int | None:
    """Which column is the time axis: the named one, none, or the guess on the first."""
    if time_column is False:
        return None
    if time_column is None or time_column is True:
        if df.shape[1] > 1 and (_time_name(df.columns[0]) or _holds_dates(df.iloc[:, 0])
                                or _pandas_index(df)):
            return 0
        if time_column is True:
            raise ValueError(f"{source}: no time column found (its first column "
                             f"{str(df.columns[0])!r} is neither named like a time nor holds "
                             "dates); name it with --time-column NAME")
        return None
    names = [str(c) for c in df.columns]
    if str(time_column) in names:
        return names.index(str(time_column))
    raise ValueError(f"time column {time_column!r} not found in {source}; "
                     f"columns: {', '.join(names[:30])}")


def _from_frame(df, source: str, time_column: str | int | bool | None = None) -> Table:
    if df.shape[0] == 0 or df.shape[1] == 0:
        raise ValueError(f"{source} is empty: no rows or no columns")
    time, time_name = None, None
    j = _time_position(df, source, time_column)
    if j is not None:
        if df.shape[1] == 1:
            raise ValueError(f"{source}: the time column {str(df.columns[j])!r} is its only "
                             "column; no series left (use --no-time)")
        time, time_name = df.iloc[:, j].to_numpy(), str(df.columns[j])
        check_time_order(time, time_name, CLI_REMEDY, source)
        df = df.drop(columns=df.columns[j])
    bad = [c for c in df.columns if df[c].dtype.kind not in "biuf"]
    if len(bad) == df.shape[1]:
        raise ValueError(f"{source}: no numeric column; column(s) {', '.join(map(str, bad[:10]))} "
                         "are not numeric")
    # text columns (labels, comments) are set aside, not fatal: an error names them only
    # when one is selected as a series
    df = df.drop(columns=bad)
    return Table(df.to_numpy(dtype=np.float64), [str(c) for c in df.columns], source, time,
                 tuple(str(c) for c in bad), time_name)


def extend_time(time: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``time[rows]``, rows outside ``0..n-1`` extrapolated by the first step (numbers,
    dates written as in the file) or empty (text that is not a date)."""
    n = time.size
    rows = np.asarray(rows, dtype=np.int64)
    inside = (rows >= 0) & (rows < n)
    if inside.all():
        return time[rows]
    out = np.full(rows.size, None, dtype=object)
    out[inside] = time[rows[inside]]
    if n < 2:
        return out
    if time.dtype.kind in "iuf":
        step = time[1] - time[0]
        outside = ~inside
        out[outside] = time[0] + step * rows[outside]
        return out.astype(np.result_type(time.dtype, type(step)))
    import pandas as pd

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stamps = pd.to_datetime(pd.Series(time[:2]).astype(str), format="mixed")
    except (ValueError, TypeError, OverflowError):
        return out
    step = stamps.iloc[1] - stamps.iloc[0]
    fmt = "%Y-%m-%d" if all(s == s.normalize() for s in stamps) else "%Y-%m-%d %H:%M:%S"
    for i in np.flatnonzero(~inside):
        out[i] = (stamps.iloc[0] + step * int(rows[i])).strftime(fmt)
    return out


def read_csv(src, source: str, time_column: str | int | bool | None = None) -> Table:
    import pandas as pd

    try:
        df = pd.read_csv(src)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{source} is empty") from exc
    except pd.errors.ParserError as exc:
        raise ValueError(f"{source} is not valid CSV: {exc}") from exc
    table = _from_frame(df, source, time_column)
    table.repeated = _repeated_names(src)
    return table


def _repeated_names(src) -> tuple[str, ...]:
    """Names that appear more than once in the CSV header line of ``src`` (a path or a
    StringIO), as pandas keeps the first of them."""
    import csv

    try:
        if isinstance(src, io.StringIO):
            line = src.getvalue().split("\n", 1)[0]
        else:
            with open(src, newline="", encoding="utf-8-sig", errors="replace") as f:
                line = f.readline()
        names = next(csv.reader([line]))
    except (OSError, StopIteration, csv.Error):
        return ()
    return tuple(sorted({n for n in names if n and names.count(n) > 1}))


def _matrix(arr: np.ndarray, source: str) -> Table:
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{source}: dtype {arr.dtype} is not numeric")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{source}: expected a 1-D series or a 2-D (time x series) array, "
                         f"got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{source} is empty (shape {arr.shape})")
    return Table(arr.astype(np.float64), [str(i) for i in range(arr.shape[1])], source)


#: (stdin object, its text): stdin can be read once, but a command may name ``-`` twice
#: (library and target, or both series of a cross analysis)
_STDIN: list = [None, ""]


def _stdin_text() -> str:
    if _STDIN[0] is not sys.stdin:
        _STDIN[:] = [sys.stdin, sys.stdin.read()]
    return _STDIN[1]


@contextlib.contextmanager
def _reading(p: str, ext: str):
    """Any failure to parse a broken input file (truncated, binary, wrong format: h5py's
    OSError, zarr's JSON and metadata errors, undecodable bytes) becomes a ValueError
    naming the file, so the CLI exits 2 with one line instead of 1 ("runtime failure")."""
    try:
        yield
    except ImportError:
        raise
    except (ValueError, OSError, EOFError, KeyError, TypeError, IndexError, AttributeError,
            RuntimeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError) and p in msg:
            raise
        raise ValueError(f"{p} is not a readable {ext} file: {msg}") from exc
    except Exception as exc:  # noqa: BLE001 - a reader library's own error class
        if type(exc).__module__.split(".")[0] not in ("zarr", "h5py", "numcodecs", "json"):
            raise
        raise ValueError(f"{p} is not a readable {ext} file: {type(exc).__name__}: {exc}") from exc


def read_table(path: str | Path, columns: list[str] | None = None, *,
               dataset: str | None = None,
               time_column: str | int | bool | None = None) -> Table:
    """Read series from ``path`` (``-`` = CSV on stdin), optionally selecting columns.

    CSV: a header line; a first column named like a time (:data:`TIME_NAMES`, any case:
    ``year``, ``Date``, ``Time (s)``, ...), holding dates, or unnamed with increasing
    integers (pandas' row index) is the time axis
    (``Table.time``), not a series. ``time_column``: ``None`` guesses so, ``False``
    reads every column as a series, a name makes that column the time axis.
    ``.h5``/``.zarr`` take a dataset as ``dataset=`` or after a colon
    (``data.h5:/x``); 2-D arrays are time x series (no time axis).
    """
    p = str(path)
    if p == "-":
        text = _stdin_text()
        if not text.strip():
            raise ValueError("stdin is empty: expected CSV with a header line")
        return read_csv(io.StringIO(text), "stdin", time_column).select(columns)
    p, ds = _split_dataset(p)
    dataset = dataset or ds
    fp = Path(p)
    if not fp.exists():
        raise FileNotFoundError(f"input file {p!r} does not exist")
    ext = fp.suffix.lower()
    if ext not in (".csv", ".txt") and time_column not in (None, False):
        raise ValueError(f"time_column applies to CSV input; {p} has no named columns "
                         "(its rows are the time axis)")
    with _reading(p, ext):
        if ext in (".csv", ".txt"):
            if fp.stat().st_size == 0:
                raise ValueError(f"{p} is empty")
            return read_csv(fp, p, time_column).select(columns)
        if ext == ".npy":
            try:
                arr = np.load(fp, allow_pickle=False)
            except (ValueError, EOFError, OSError) as exc:  # EOFError: an empty/truncated file
                raise ValueError(f"{p} is not a valid .npy file: {exc}") from exc
            return _matrix(arr, p).select(columns)
        if ext in (".h5", ".hdf5"):
            try:
                import h5py
            except ImportError as exc:
                raise ImportError("reading .h5 needs h5py: pip install 'pyedmcl[io]'") from exc
            with h5py.File(fp, "r") as f:
                if dataset is None:
                    names: list[str] = []
                    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
                    if len(names) != 1:
                        raise ValueError(f"{p}: name the dataset as {p}:NAME; it holds {names}")
                    dataset = names[0]
                if dataset not in f:
                    raise ValueError(f"{p}: dataset {dataset!r} not found; it holds {list(f)}")
                return _matrix(f[dataset][()], f"{p}:{dataset}").select(columns)
        if ext == ".zarr":
            try:
                import zarr
            except ImportError as exc:
                raise ImportError("reading .zarr needs zarr: pip install 'pyedmcl[io]'") from exc
            node = zarr.open(str(fp), mode="r")
            if dataset:
                node = node[dataset]
            if not hasattr(node, "shape"):
                raise ValueError(f"{p}: is a group; name the array as {p}:NAME")
            return _matrix(node[...], p).select(columns)
    raise ValueError(f"input {p!r} has unsupported extension {ext!r}; allowed: {', '.join(FORMATS)} or -")


def read_series(path: str | Path, column: str | int | None = None, *,
                dataset: str | None = None,
                time_column: str | int | bool | None = None) -> tuple[np.ndarray, str]:
    """One series and its name: ``column`` by name or 0-based index; default the first series."""
    t = read_table(path, dataset=dataset, time_column=time_column)
    j = 0 if column is None else t.index(column)
    return t.data[:, j].copy(), t.names[j]
