"""Read a panel of series (time steps x series) from .npy, .csv, .h5/.hdf5 or .zarr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def read_panel(path: str | Path, *, dataset: str | None = None) -> Any:
    """The (L, N) table in ``path``: columns are series.

    ``.npy``: a 2-D array; ``.csv``: a header row of series names (a leading
    ``time``/``Time``/``index`` column is dropped); ``.h5``/``.hdf5``: ``dataset``
    (default: the only 2-D dataset); ``.zarr``: an array, or ``dataset`` inside a
    group. Returns a DataFrame for CSV (names kept), an ndarray otherwise.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"input {str(p)!r} does not exist")
    suf = p.suffix.lower()
    if suf == ".npy":
        return np.load(p, allow_pickle=False)
    if suf == ".csv":
        import pandas as pd
        df = pd.read_csv(p)
        first = str(df.columns[0]).lower()
        if first in ("time", "index", "date", "t"):
            df = df.drop(columns=df.columns[0])
        return df
    if suf in (".h5", ".hdf5", ".hdf"):
        import h5py
        with h5py.File(p, "r") as f:
            if dataset is None:
                found: list[str] = []
                f.visititems(lambda n, o: found.append(n)
                             if isinstance(o, h5py.Dataset) and o.ndim == 2 else None)
                if len(found) != 1:
                    raise ValueError(f"{str(p)!r} holds 2-D datasets {found}; name one with "
                                     "dataset= (--dataset)")
                dataset = found[0]
            return np.asarray(f[dataset][...])
    if suf == ".zarr":
        import zarr
        node = zarr.open(str(p), mode="r")
        if dataset is not None:
            node = node[dataset]
        if not hasattr(node, "shape"):
            raise ValueError(f"{str(p)!r} is a Zarr group; name the array with dataset= "
                             "(--dataset)")
        return np.asarray(node[...])
    raise ValueError(f"input {str(p)!r}: unknown format {suf!r}; allowed: .npy, .csv, .h5, "
                     ".hdf5, .zarr")
