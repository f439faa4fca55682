"""Read a panel of series (time steps x series) for all-to-all maps.

A thin view of :func:`pyedmcl.io.read_table` (one reader for every command):
.npy, .csv (header row of series names; a leading time/index/date/t column is the
time axis), .h5/.hdf5 and .zarr (``dataset=``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io import read_table


def read_panel(path: str | Path, *, dataset: str | None = None) -> Any:
    """The (L, N) table in ``path`` as a DataFrame whose columns are the series."""
    return read_table(path, dataset=dataset).frame()
