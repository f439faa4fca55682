"""Full-library cross-map predictions of many targets and lags from one neighbour order.

A :class:`LibraryMap` embeds one library series, computes every query's full row of
library distances once on the device (the k-NN kernel's ``dist_full``, as
:class:`pyedmcl.edm.ccm.SortedRows`) and keeps, on the host, each row's nearest few in
the kernel's tie order (a partial sort: a lookup never reads past k plus the rows a lag
or the exclusion radius rules out). A cross map at lag
``shift`` (library time t predicts target time ``t + shift``) takes each query's first
k admissible rows of that order -- not itself (nor within the exclusion radius), and
with the target inside the data -- and weights them by pyEDM's CCM rule. Neighbours are
found once; every target and lag is a gather, so the network's lag scans and partial
cross maps (with all surrogates of a driver in one NumPy call) cost little per pair.

At the full library (``lib_sizes`` >= the rows, ``random=False``) the skill is
``pe.ccm(..., Tp=shift)``'s and pyEDM's ``CCM(Tp=shift)``'s (tests/test_causal_lags.py).
"""

from __future__ import annotations

import numpy as np

from .._bands import map_slices
from ..edm.ccm import MAX_SORTED_ENTRIES
from ..kernels.knn import KNN
from ..neighbors.base import tie_key
from ..primitives.knn import hold
from ..primitives.ranges import ccm_valid_times, point_offset

#: rows of each query's order kept beyond k and the exclusion window (lags whose
#: out-of-range rows need more re-sort wider)
WIDTH_MARGIN = 16


class LibraryMap:
    """One library series' neighbour order, for cross maps of any target at any lag.

    ``x``: the library series (1-D, finite); ``times``: its embeddable rows (the rows
    every prediction is made at). ``real``: the kernels' type ("float" or "double").
    """

    def __init__(self, be, x: np.ndarray, *, E: int, tau: int = 1, k: int | None = None,
                 radius: int = 0, real: str = "float"):
        n = x.size
        self._be = be
        self.E, self.tau, self.n = E, tau, n
        self.k = E + 1 if k is None else k
        self.radius = radius
        self.times = ccm_valid_times(n, E, tau, 0)
        U = self.times.size
        if U * U > MAX_SORTED_ENTRIES:
            raise ValueError(f"a series of {n} values has {U} rows; the network's lag scans "
                             f"hold {U} x {U} sorted rows, allowed up to "
                             f"{int(MAX_SORTED_ENTRIES ** 0.5)} rows")
        if U < self.k + 2:
            raise ValueError(f"a series of {n} values leaves {U} rows for E={E}, tau={tau}; "
                             f"needs at least knn + 2 = {self.k + 2}")
        self._x = np.ascontiguousarray(x, dtype=np.float64 if real == "double" else np.float32)
        self.real = real
        self._pts = (self.times - point_offset(E, tau)).astype(np.int32)
        self._sort(min(U, self.k + 2 * radius + 1 + WIDTH_MARGIN))

    def _sort(self, width: int) -> None:
        """Each query's first ``width`` library rows in the k-NN kernel's order
        (distance, then |row difference|, then the earlier row) and their distances."""
        be, pts, U = self._be, self._pts, self._pts.size
        x_dev, q_dev = be.to_device(self._x), be.to_device(pts)
        dt = self._x.dtype
        acc, fin = be.empty((U, U), dt), be.empty((U, U), dt)
        spec = {"E": self.E, "TAU": abs(self.tau), "K": 1, "METRIC": "euclidean",
                "REAL": self.real}
        KNN.launch_sorted(be, spec, min(64, be.info.max_work_group_size), x_dev, q_dev, U,
                          q_dev, U, acc, fin)
        a, f = be.to_host(acc), be.to_host(fin)
        hold(be, x_dev, q_dev, acc, fin)
        p = pts.astype(np.int64)
        self._order = np.empty((U, width), np.int64)
        self._dist = np.empty((U, width), np.float64)

        def band(sl: slice) -> None:  # (each row ordered alone: bands on threads)
            tie = tie_key(p[sl, None], p[None, :])
            if dt == np.float32:  # non-negative floats order like their bit patterns
                key = (a[sl].view(np.int32).astype(np.int64) << 32) | tie
                rows = key.shape[0]
                part = np.argpartition(key, width - 1, axis=1)[:, :width] if width < U else \
                    np.broadcast_to(np.arange(U), (rows, U))
                order = np.take_along_axis(part, np.argsort(np.take_along_axis(key, part, 1),
                                                             1), 1)
            else:
                order = np.lexsort((tie, a[sl]), axis=-1)[:, :width]
            self._order[sl] = order
            self._dist[sl] = np.take_along_axis(f[sl], order, axis=1)

        map_slices(band, a)
        self._width = width

    def table(self, shift: int, n_target: int) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, weights)`` ``(U, k)``: each query's k library rows (indices into
        :attr:`times`) and normalised CCM weights for targets ``n_target`` long at lag
        ``shift``; a query with fewer than k admissible rows has NaN weights."""
        U, k, r = self.times.size, self.k, self.radius
        ok = (self.times + shift >= 0) & (self.times + shift < n_target)
        # the first k admissible rows lie within k + (excluded rows) columns of the order
        W = min(U, k + 2 * r + 1 + int(np.count_nonzero(~ok)))
        if W > self._width:  # a wider lag than the kept rows cover: keep more
            self._sort(min(U, 2 * W))
        order, dist = self._order[:, :W], self._dist[:, :W]
        allowed = ok[order] & (np.abs(self._pts[order] - self._pts[:, None]) > r)
        first = np.argsort(~allowed, axis=1, kind="stable")[:, :k]
        got = np.take_along_axis(allowed, first, axis=1)
        idx = np.take_along_axis(order, first, axis=1)
        d = np.take_along_axis(dist, first, axis=1)
        d0 = d[:, :1]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            w = np.where(d0 > 0, np.exp(-d / np.where(d0 > 0, d0, 1.0)), (d == 0) * 1.0)
            w = w / w.sum(axis=1, keepdims=True)
        w[~got.all(axis=1)] = np.nan  # fewer than k admissible: NaN (pyEDM's CCM)
        return idx, w

    def predict(self, Y: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """``(pred, obs)`` ``(nt, U)`` for targets ``Y`` ``(nt, n_target)`` (or 1-D):
        the prediction of ``Y[:, t + shift]`` from the library's state at each time t of
        :attr:`times`, and that observed value (NaN where ``t + shift`` is outside)."""
        Y2 = np.atleast_2d(np.asarray(Y, dtype=np.float64))
        nt = Y2.shape[1]
        idx, w = self.table(shift, nt)
        pred = np.einsum("tuk,uk->tu", Y2[:, self.times[idx] + shift], w)
        t = self.times + shift
        inside = (t >= 0) & (t < nt)
        obs = np.full((Y2.shape[0], self.times.size), np.nan)
        obs[:, inside] = Y2[:, t[inside]]
        return pred, obs


def rho_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson rho of each row pair of ``a`` and ``b`` ``(m, U)`` over the columns where
    both are finite (NaN with fewer than 3 such columns; 0 where a row is constant)."""
    ok = np.isfinite(a) & np.isfinite(b)
    cnt = ok.sum(axis=1)
    a0, b0 = np.where(ok, a, 0.0), np.where(ok, b, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ma, mb = a0.sum(1) / cnt, b0.sum(1) / cnt
        da, db = np.where(ok, a0 - ma[:, None], 0.0), np.where(ok, b0 - mb[:, None], 0.0)
        sab, saa, sbb = (da * db).sum(1), (da * da).sum(1), (db * db).sum(1)
        r = sab / np.sqrt(saa * sbb)
    r = np.where((saa == 0) | (sbb == 0), 0.0, r)
    return np.where(cnt >= 3, r, np.nan)


def lag_scan(lm: LibraryMap, Y: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """``(len(lags), nt)`` rho of the library cross-mapping each target row of ``Y`` at
    each lag (full library)."""
    out = np.empty((len(lags), np.atleast_2d(Y).shape[0]))
    for a, lag in enumerate(lags):
        pred, obs = lm.predict(Y, int(lag))
        out[a] = rho_rows(pred, obs)
    return out
