"""The result of :func:`pyedmcl.rqa_batch`: its columns, the frame indexed by the series
(or an ``xarray.Dataset`` of maps over a DataArray's non-time dimensions) and the note
naming its constant series."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..constant_series import RQA_WHY, note_text
from ..validation import ConstantSeriesWarning
from .batch_inputs import Columns

#: the columns of a batch row besides the measures
EXTRA = ("n_recurrences", "n_cells", "radius", "N", "n_points")
#: the integer columns of a batch frame (the others are float64)
INTEGER = ("L_max", "V_max", "W_max", "n_recurrences", "n_cells", "N", "n_points")


#: per thread: whether :func:`constant_note` stays silent (a block of a larger batch)
_local = threading.local()


@contextlib.contextmanager
def blocks_quiet() -> Iterator[None]:
    """In this thread, batches note their constant series without warning: a block of a
    larger batch, which warns once for all. (Not ``warnings.catch_warnings``: it swaps
    the process's filters, and blocks run in several threads at once.)"""
    _local.quiet = True
    try:
        yield
    finally:
        _local.quiet = False


def constant_note(cols: Columns) -> str | None:
    """Warn once of the constant series of a batch; the note, or None."""
    labels = [str(cols.names[j]) for j in np.flatnonzero(cols.lo == cols.hi).tolist()]
    if not labels:
        return None
    note = note_text("rqa_batch", labels, RQA_WHY)
    if not getattr(_local, "quiet", False):
        warnings.warn(note, ConstantSeriesWarning, stacklevel=3)
    return note


def dataset(df: Any, cols: Columns, note: str | None) -> Any:
    """The batch frame as an ``xarray.Dataset`` over a DataArray's non-time dims."""
    from ..labels import require_xarray

    xr = require_xarray()
    dims = cols.dims or ()
    shape = cols.shape or ()
    data = {c: (dims, df[c].to_numpy().reshape(shape)) for c in df.columns}
    ds = xr.Dataset(data, coords={d: v for d, v in (cols.coords or {}).items()})
    if note:
        ds.attrs["notes"] = note
    return ds


def result_of(df: Any, layout: dict[str, Any], constant: np.ndarray, *,
              cols: Columns | None = None) -> Any:
    """The batch's frame (or Dataset of maps) from its rows in order (``df``, positions
    as index), the layout of the result (as a store keeps it) and the flags of the
    constant series; ``cols``: the input's own names and coordinates (else those of
    ``layout``: JSON values)."""
    import pandas as pd

    flagged = np.flatnonzero(constant)
    dims = layout.get("dims")
    shape = tuple(layout.get("shape") or ())

    def label(j: int) -> Any:
        if dims is not None:
            return tuple(int(i) for i in np.unravel_index(j, shape))
        names = cols.names if cols is not None else layout.get("names")
        if names is None:
            return j
        return tuple(names[j]) if isinstance(names[j], list) else names[j]

    note = note_text("rqa_batch", [str(label(j)) for j in flagged], RQA_WHY) \
        if flagged.size else None
    if dims is not None:
        coords = cols.coords if cols is not None else layout.get("coords")
        return dataset(df, Columns.layout([], tuple(dims), shape, coords), note)
    df.index = pd.Index([label(j) for j in range(len(df))], name="series")
    if note:
        df.attrs["notes"] = (note,)
    return df
