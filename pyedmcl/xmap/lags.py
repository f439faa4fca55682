"""The all-to-all cross map at several lags (time-delayed CCM of every pair).

``pe.xmap(X, Tp=[...])`` (a list or range of lags, negative allowed) maps the panel at
each lag, as ``pe.ccm(x, y, Tp=[...])`` does for one pair (Ye et al. 2015, Sci Rep
5:14750: a driver's imprint on the affected series' manifold is best read at a lag
<= 0; a peak at a positive lag marks synchrony, the reverse artefact).

One pass for every lag: the host pass over the panel and the embedding dimension of each
target are those of the map at the lag nearest 0 (the E scan does not depend on the
cross-map lag), and the neighbours of a library state do not depend on the lag either,
so each library series and E-group takes one k-NN search over the union of the lags'
rows; each lag then reads its own table off it and runs only the pack and the fused
skill (:mod:`pyedmcl.xmap.lag_engine`). Every lag's matrix is the one
``pe.xmap(X, Tp=lag)`` gives on the same device in the same dtype, bit for bit: each
lag's library is its own valid rows (a library row needs its target ``t + lag`` inside
the data, as pyEDM's ``CCM(Tp=lag)``), and the first k neighbours of a wider table that
lie in those rows are, in the knn kernel's total order and with its distances, the k of
the lag's own search. Every ``knn_method`` runs the per-E k-NN kernel here ("scan", the
fused multi-E scan, gives the same tables; its checks still apply). A map whose float32
check fails reruns every lag in float64, as the single-lag map does. In memory only:
``out``, ``scheduler`` and ``surrogates`` are refused, as is ``method="smap"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass
class XmapLagResult:
    """Cross-map skill of every pair at every lag.

    ``rho[a, i, j]`` (float32, ``(n_lags, N, N)``): series ``i``'s library cross-maps
    series ``j`` at lag ``lags[a]`` (``pe.xmap(X, Tp=lags[a]).rho[i, j]``); evidence that
    ``j`` drives ``i`` where it peaks at a lag <= 0. ``E`` (N,) the embedding dimension of
    each target (the same at every lag), ``names`` of the series.
    """

    lags: np.ndarray
    rho: np.ndarray
    E: np.ndarray
    names: list[str] | None = None
    edim_rho: np.ndarray | None = None
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "series"

    def _names(self) -> list[str]:
        n = int(self.rho.shape[1])
        return list(self.names) if self.names is not None else [str(i) for i in range(n)]

    @property
    def best_lag(self) -> np.ndarray:
        """``(N, N)`` float64: the lag of each pair's highest skill (first on ties; NaN
        where the pair has no finite skill at any lag)."""
        r = np.where(np.isnan(self.rho), -np.inf, self.rho)
        best = self.lags[np.argmax(r, axis=0)].astype(np.float64)
        best[np.isnan(self.rho).all(axis=0)] = np.nan
        return best

    @property
    def best_rho(self) -> np.ndarray:
        """``(N, N)``: each pair's highest skill over the lags (NaN where none is finite)."""
        r = np.where(np.isnan(self.rho), -np.inf, self.rho).max(axis=0)
        return np.where(np.isneginf(r), np.nan, r).astype(self.rho.dtype)

    def at(self, lag: int) -> np.ndarray:
        """The ``(N, N)`` matrix at ``lag`` (one of :attr:`lags`)."""
        hit = np.flatnonzero(self.lags == int(lag))
        if hit.size == 0:
            raise ValueError(f"lag={lag} is not among this result's lags "
                             f"{[int(v) for v in self.lags]}")
        return self.rho[int(hit[0])]

    def as_dataframe(self):
        """One row per (lag, library, target): ``Tp``, ``library``, ``target``, ``rho``
        (``df.pivot`` by ``Tp`` gives the matrices)."""
        import pandas as pd

        names = np.asarray(self._names(), dtype=object)
        a, i, j = np.meshgrid(np.arange(self.lags.size), np.arange(names.size),
                              np.arange(names.size), indexing="ij")
        return pd.DataFrame({"Tp": self.lags[a.ravel()], "library": names[i.ravel()],
                             "target": names[j.ravel()], "rho": self.rho.ravel()})

    def as_xarray(self):
        """An ``xarray.Dataset``: ``rho`` over (``Tp``, ``library``, ``target``),
        ``best_lag`` and ``best_rho`` over (``library``, ``target``), ``E`` (and
        ``edim_rho``) over ``target``. Needs xarray (``pyedmcl[xarray]``)."""
        from ..labels import require_xarray

        xr = require_xarray()
        names = self._names()
        pair = ("library", "target")
        data: dict[str, Any] = {"rho": (("Tp", *pair), self.rho),
                                "best_lag": (pair, self.best_lag),
                                "best_rho": (pair, self.best_rho),
                                "E": (("target",), np.asarray(self.E))}
        if self.edim_rho is not None:
            data["edim_rho"] = (("target",), np.asarray(self.edim_rho))
        attrs = {"convention": "rho[Tp, library, target]: library series cross-maps "
                               "target series at lag Tp"}
        dim = self.labels.series_dim if self.labels is not None else None
        if dim:
            attrs["series_dim"] = dim
        return xr.Dataset(data, coords={"Tp": self.lags, "library": names, "target": names},
                          attrs=attrs)


def nearest_zero_first(lags: np.ndarray) -> np.ndarray:
    """``lags`` by distance from 0 (ties in their order): the first leaves the most rows,
    so an E that does not fit is refused at the nearest lag that cannot embed it."""
    return lags[np.argsort(np.abs(lags), kind="stable")]


def refuse_lag_options(*, method: str, out: Any, scheduler: Any, surrogates: Any) -> None:
    """Refuse what a lag scan does not take (it is computed in memory, Simplex only)."""
    if method != "simplex":
        raise ValueError(f"Tp as a list of lags takes method='simplex' only (got "
                         f"method={method!r}); run one S-map map per lag")
    for key, value, off in (("out", out, None), ("scheduler", scheduler, None),
                            ("surrogates", surrogates, 0)):
        if value is not off and value != off:
            raise ValueError(f"Tp as a list of lags is computed in memory without "
                             f"surrogates; {key}= is not supported with it (give one Tp)")
