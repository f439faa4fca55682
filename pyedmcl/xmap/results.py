"""The result of an all-to-all cross map (in memory or backed by its Zarr store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass
class XmapResult:
    """``rho`` (N, N) float32 (a NumPy array, or the Zarr array when written to ``out``),
    ``E`` (N,) the embedding dimension used for each target, ``names`` of the series.
    With surrogates (``xmap(..., surrogates=n)``): ``p_value``, ``null_mean`` and
    ``null_q95`` (N, N) beside rho (:func:`pyedmcl.causal_network` turns them into edges).
    """

    rho: Any
    E: np.ndarray
    names: list[str] | None = None
    edim_rho: np.ndarray | None = None
    path: str | None = None
    blocks_per_device: dict[str, int] = field(default_factory=dict)
    #: surrogates per target series (None: no surrogate test)
    surrogates: int | None = None
    p_value: Any = None
    null_mean: Any = None
    null_q95: Any = None
    #: the input's labels (:class:`pyedmcl.labels.Labels`: series names and the
    #: dimension they lie along, e.g. a DataArray's ``station``); None: unlabelled
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "series"

    def _names(self) -> list[str]:
        n = int(np.shape(self.rho)[0])
        return list(self.names) if self.names is not None else [str(i) for i in range(n)]

    def as_dataframe(self, what: str = "rho"):
        """``rho`` (or ``p_value``, ``null_mean``, ``null_q95``, ``edim_rho`` per series)
        as a pandas DataFrame labelled by the series names: row ``library``, column
        ``target`` (``df.loc[a, b]``: series ``a``'s library cross-maps ``b``)."""
        import pandas as pd

        names = self._names()
        if what in ("E", "edim_rho"):
            return pd.DataFrame({"E": np.asarray(self.E),
                                 **({} if self.edim_rho is None
                                    else {"edim_rho": np.asarray(self.edim_rho)})},
                                index=pd.Index(names, name="series"))
        if what not in ("rho", "p_value", "null_mean", "null_q95"):
            raise ValueError(f"what={what!r} is not a matrix of this result; allowed: rho, "
                             "p_value, null_mean, null_q95, E")
        arr = getattr(self, what)
        if arr is None:
            raise ValueError(f"{what} is None: run xmap(..., surrogates=n) for the null")
        return pd.DataFrame(np.asarray(arr[...]), index=pd.Index(names, name="library"),
                            columns=pd.Index(names, name="target"))

    def as_xarray(self):
        """An ``xarray.Dataset``: ``rho`` (and the surrogate test's matrices) over
        (``library``, ``target``), ``E`` and ``edim_rho`` over ``target``, each labelled
        by the series names. Needs xarray (``pyedmcl[xarray]``)."""
        from ..labels import require_xarray

        xr = require_xarray()
        names = self._names()
        data: dict[str, Any] = {"rho": (("library", "target"), np.asarray(self.rho[...])),
                                "E": (("target",), np.asarray(self.E))}
        if self.edim_rho is not None:
            data["edim_rho"] = (("target",), np.asarray(self.edim_rho))
        for k in ("p_value", "null_mean", "null_q95"):
            if getattr(self, k) is not None:
                data[k] = (("library", "target"), np.asarray(getattr(self, k)[...]))
        dim = self.labels.series_dim if self.labels is not None else None
        attrs = {"convention": "rho[library, target]: library series cross-maps target series"}
        if dim:
            attrs["series_dim"] = dim
        return xr.Dataset(data, coords={"library": names, "target": names}, attrs=attrs)

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self.rho[...])
        return a if dtype is None else a.astype(dtype)
