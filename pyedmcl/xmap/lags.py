"""The all-to-all cross map at several lags (time-delayed CCM of every pair).

``pe.xmap(X, Tp=[...])`` (a list or range of lags, negative allowed) maps the panel at
each lag, as ``pe.ccm(x, y, Tp=[...])`` does for one pair (Ye et al. 2015, Sci Rep
5:14750: a driver's imprint on the affected series' manifold is best read at a lag
<= 0; a peak at a positive lag marks synchrony, the reverse artefact).

The embedding dimension of each target is found once (its Simplex scan does not depend
on the cross-map lag) and every lag's matrix is the one ``pe.xmap(X, Tp=lag)`` gives on
the same device in the same dtype: each lag's library is its own valid rows (a library
row needs its target ``t + lag`` inside the data, as pyEDM's ``CCM(Tp=lag)``), so the
k-NN tables of a library series are those of its lag. The device programs are built
once and cached across the lags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..primitives.ranges import check_lags


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


def xmap_lags(xmap: Any, X: Any, Tp: Any, n: int, E: Any, **options: Any) -> XmapLagResult:
    """``xmap(X, Tp=lag, E=..., **options)`` at every lag of ``Tp`` (checked against the
    series length ``n``), the targets' E found by the first lag's map and given to the
    others. In memory only: ``out``, ``scheduler`` and ``surrogates`` are refused."""
    lags = check_lags(Tp, n, "Tp")
    for key, off in (("out", None), ("scheduler", None), ("surrogates", 0)):
        if options.get(key, off) not in (off,):
            raise ValueError(f"Tp as a list of lags is computed in memory without "
                             f"surrogates; {key}= is not supported with it (give one Tp)")
    # the lag nearest 0 first: it leaves the most rows, so an E the data cannot embed
    # at the farther lags is refused there, naming their Tp
    order = np.argsort(np.abs(lags), kind="stable")
    first = xmap(X, Tp=int(lags[order[0]]), E=E, **options)
    N = int(np.shape(first.rho)[0])
    rho = np.empty((lags.size, N, N), np.float32)
    rho[order[0]] = np.asarray(first.rho)
    for a in order[1:]:
        rho[a] = np.asarray(xmap(X, Tp=int(lags[a]), E=np.asarray(first.E), **options).rho)
    return XmapLagResult(lags=lags, rho=rho, E=np.asarray(first.E), names=first.names,
                         edim_rho=first.edim_rho, labels=first.labels)
