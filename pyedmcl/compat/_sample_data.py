"""``pyedmcl.compat.pyedm.sampleData``: pyEDM's example data sets, read lazily.

With pyEDM installed, its own CSVs are read from the installed package (found with
``importlib.util.find_spec``; pyEDM itself is not imported), under pyEDM's names
(``'circle'``, ``'block_3sp'``, ``'Lorenz5D'``, ...), so examples and tests see the
very same frames. pyEDM's data are under the UCSD non-commercial licence and are
not redistributed here; without pyEDM a few generated sets stand in, each from a
named model (:mod:`pyedmcl.data`), and any other name raises a KeyError naming
``pip install pyEDM``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

#: pyEDM's file -> name table (pyEDM 2.5 ``LoadData.dataFileNames``)
PYEDM_FILES = {
    "TentMap": "TentMap.csv", "TentMapNoise": "TentMapNoise.csv", "circle": "circle.csv",
    "circleNoise": "circle_noise.csv", "circle_noTime": "circle_noTime.csv",
    "columnNameSpace": "columnNameSpace.csv", "block_3sp": "block_3sp.csv",
    "sardine_anchovy_sst": "sardine_anchovy_sst.csv", "Lorenz5D": "LorenzData1000.csv",
    "SumFlow_1980-2005": "S12CD-S333-SumFlow_1980-2005.csv",
}


def pyedm_data_dir() -> Path | None:
    """The ``data`` folder of an installed pyEDM, or None."""
    try:
        spec = importlib.util.find_spec("pyEDM")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return folder if folder.is_dir() else None


def _circle() -> pd.DataFrame:
    """sin/cos of 200 steps of 0.0632 rad (the shape of pyEDM's 'circle')."""
    t = np.arange(200) * 0.0632
    return pd.DataFrame({"Time": np.arange(1, 201), "x": np.round(np.sin(t), 4),
                         "y": np.round(np.cos(t), 4)})


def _logistic() -> pd.DataFrame:
    """Sugihara et al. (2012) coupled logistic maps (:func:`pyedmcl.data.coupled_logistic`)."""
    from ..data import coupled_logistic

    xy = coupled_logistic(500)
    return pd.DataFrame({"Time": np.arange(1, 501), "x": xy[:, 0], "y": xy[:, 1]})


def _lorenz() -> pd.DataFrame:
    """Lorenz (1963) samples (:func:`pyedmcl.data.lorenz63`)."""
    from ..data import lorenz63

    xyz = lorenz63(1000)
    return pd.DataFrame({"Time": np.arange(1, 1001), "x": xyz[:, 0], "y": xyz[:, 1],
                         "z": xyz[:, 2]})


#: stand-ins without pyEDM: name -> generator (documented models, deterministic)
GENERATED = {"circle": _circle, "coupled_logistic": _logistic, "lorenz63": _lorenz}


class SampleData(Mapping):
    """Read-only mapping name -> DataFrame; each set is read once, on first use."""

    def __init__(self) -> None:
        self._cache: dict[str, pd.DataFrame] = {}
        self._dir = pyedm_data_dir()

    def _names(self) -> list[str]:
        return list(PYEDM_FILES) if self._dir is not None else list(GENERATED)

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            if self._dir is not None and name in PYEDM_FILES:
                self._cache[name] = pd.read_csv(self._dir / PYEDM_FILES[name])
            elif self._dir is None and name in GENERATED:
                self._cache[name] = GENERATED[name]()
            else:
                hint = ("" if self._dir is not None else
                        "; pyEDM's data sets need pyEDM installed (pip install pyEDM)")
                raise KeyError(f"sampleData has no set {name!r}; available: {self._names()}{hint}")
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"sampleData({self._names()})"
