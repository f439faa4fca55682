"""Time-delayed cross mapping: CCM skill at many prediction lags from one neighbour order.

Ye et al. (2015, Sci Rep 5:14750) scan the cross-map lag ``l``: x's shadow manifold at
time t predicts y at t + l (pyEDM's CCM with ``Tp = l``). A driver y of x acts on x
*later*, so x's manifold holds y's past best: the skill of a true ``y -> x`` peaks at a
non-positive lag, while a peak at a positive lag marks strong forcing that synchronises
the two series (the reverse artefact).

The neighbours of a state do not depend on the lag. Each direction sorts every query's
full row of library distances once (:class:`pyedmcl.edm.ccm.SortedRows`) over all
embeddable rows; a lag only changes which rows may serve (a library row needs its target
``t + l`` inside the data; a query without one is left out of rho) and where the lookup
reads the target (``tshift = offset + l``). Each lag's sampled libraries are drawn over
its own valid rows exactly as pyEDM's ``CCM(Tp=l)`` draws them, so every lag's skill is
pyEDM's at that ``Tp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..edm.ccm import MAX_SORTED_ENTRIES, MAX_TABLE_ENTRIES, SortedRows, _direction, _rho
from ..edm.knn import hold
from ..edm.lookup import ccm_shifts_device, skill_device, skill_out
from ..edm.ranges import ccm_valid_times, point_offset
from ..validation import check_int


def check_lags(lags: Any, n: int, name: str = "lags") -> np.ndarray:
    """``lags`` (a list, range or 1-D array of integers, negative allowed) as a sorted,
    de-duplicated int64 array; each lag within ``-(n - 1) .. n - 1`` for a series of
    ``n`` values, else a ValueError naming ``name``."""
    if isinstance(lags, str | bytes):
        raise TypeError(f"{name}={lags!r} must be a list of integers, e.g. range(-5, 6)")
    vals = np.atleast_1d(np.asarray(list(lags) if isinstance(lags, range) else lags,
                                    dtype=object)).reshape(-1)
    if vals.size == 0:
        raise ValueError(f"{name} is empty; give lags, e.g. range(-5, 6)")
    out = np.array([check_int(v.item() if isinstance(v, np.generic) else v, name,
                              -(n - 1), n - 1) for v in vals], dtype=np.int64)
    return np.unique(out)


def direction_lags(be, real: str, x: np.ndarray, y: np.ndarray, *, E: int, tau: int,
                   lags: np.ndarray, k: int, radius: int, sizes: np.ndarray, sample: int,
                   entropy: int, random: bool, replacement: bool,
                   neighbors: Any = None) -> np.ndarray:
    """rho samples ``(len(lags), len(sizes), sample)`` of x's embedding cross-mapping y
    at every lag (pyEDM's ``CCM(Tp=lag)`` each). One sorted neighbour order per
    direction; without it (other k-NN back-ends, or more rows than the sorted rows
    hold) each lag runs :func:`pyedmcl.edm.ccm._direction` on its own."""
    n = x.shape[0]
    kw = dict(E=E, tau=tau, k=k, radius=radius, sizes=sizes, sample=sample, entropy=entropy,
              random=random, replacement=replacement)
    union = ccm_valid_times(n, E, tau, 0)  # every embeddable row (the target's own time)
    U = union.size
    if U * U > MAX_SORTED_ENTRIES or not getattr(neighbors, "exact", True):
        return np.stack([_direction(be, real, x, y, Tp=int(lag), neighbors=neighbors, **kw)
                         for lag in lags])
    dt = np.float64 if real == "double" else np.float32
    off = point_offset(E, tau)
    pts = (union - off).astype(np.int32)
    x_dev, yk = be.to_device(x.astype(dt)), y.astype(dt)
    y_dev, q_dev = be.to_device(yk), be.to_device(pts)
    hold(be, x_dev, y_dev, q_dev)
    rows = SortedRows(be, x_dev, n, E=E, tau=tau, pts=pts, q_dev=q_dev, real=real)
    out = np.full((lags.size, sizes.size, sample), np.nan)
    for a, lag in enumerate(lags):
        lag = int(lag)
        ok = (union + lag >= 0) & (union + lag < n)
        pos = np.flatnonzero(ok)  # this lag's valid rows, as pyEDM's CCM(Tp=lag) has them
        M = pos.size
        obs = np.where(ok, union + lag, -1).astype(np.int32)
        obs_dev = be.to_device(obs)
        shift = ccm_shifts_device(be, yk, obs)
        hold(be, obs_dev)
        for i, L0 in enumerate(sizes):
            L = int(min(L0, M))
            kk = min(k, L - 1)
            if kk < 1:
                continue
            rng = np.random.default_rng(np.random.SeedSequence(entropy))
            if random:
                libs = np.stack([np.sort(rng.choice(M, size=L, replace=replacement))
                                 for _ in range(sample)])
            else:
                libs = np.arange(L)[None, :]
            cnt = rows.counts(pos[libs], kk)
            ns = cnt.shape[0]
            sk_dev = skill_out(be, ns)
            per = max(1, MAX_TABLE_ENTRIES // U)
            for c0 in range(0, ns, per):
                c1 = min(ns, c0 + per)
                pred = rows.predict(cnt[c0:c1], kk, q_dev, radius, y_dev, off + lag)
                skill_device(be, pred, c1 - c0, U, y_dev, n, 1, obs_dev, real=real,
                             out=sk_dev, row0=c0, ccm=True, shift=shift)
            out[a, i, :ns] = _rho(be.to_host(sk_dev).astype(np.float64))
    return out


@dataclass
class CCMLagResult:
    """CCM skill per cross-map lag and library size, both directions.

    ``rho_xy[a, s]``: x's embedding cross-maps y at lag ``lags[a]`` (pyEDM's column
    ``x:y`` of ``CCM(Tp=lags[a])``) and library size ``lib_sizes[s]``; evidence that y
    drives x where it peaks at a lag <= 0 (Ye et al. 2015). ``*_samples``:
    ``(n_lags, n_lib_sizes, sample)``.
    """

    lags: np.ndarray
    lib_sizes: np.ndarray
    rho_xy: np.ndarray
    rho_yx: np.ndarray
    rho_xy_samples: np.ndarray | None = None
    rho_yx_samples: np.ndarray | None = None
    neighbors: Any = field(default=None, repr=False)

    @staticmethod
    def _best(lags: np.ndarray, rho: np.ndarray) -> int | None:
        col = rho[:, -1]
        return None if np.isnan(col).all() else int(lags[int(np.nanargmax(col))])

    @property
    def best_lag_xy(self) -> int | None:
        """The lag of x:y's highest skill at the largest library size (first on ties)."""
        return self._best(self.lags, self.rho_xy)

    @property
    def best_lag_yx(self) -> int | None:
        """The lag of y:x's highest skill at the largest library size (first on ties)."""
        return self._best(self.lags, self.rho_yx)

    def as_dataframe(self, x_name: str = "x", y_name: str = "y"):
        """One row per (lag, library size): ``Tp``, ``LibSize`` and both directions' rho."""
        import pandas as pd
        a, s = np.meshgrid(np.arange(self.lags.size), np.arange(self.lib_sizes.size),
                           indexing="ij")
        return pd.DataFrame({"Tp": self.lags[a.ravel()], "LibSize": self.lib_sizes[s.ravel()],
                             f"{x_name}:{y_name}": self.rho_xy.ravel(),
                             f"{y_name}:{x_name}": self.rho_yx.ravel()})
