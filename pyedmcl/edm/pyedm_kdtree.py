"""scipy's KDTree as pyEDM builds and queries it, and the library point pyEDM's S-map
leaves out where several are equally far.

pyEDM finds neighbours with ``scipy.spatial.KDTree`` and keeps the order in which the
tree returns equally far points: its traversal decides, not a rule on times or indices.
On quantised data (values with few decimals, what instruments record) distances tie
exactly and often. S-map's default ``knn = |lib| - 1`` then leaves out one of several
equally far library points, and which one moves the answer (up to ~4e-4 relative on a
random walk on a 0.1 grid at E 5). No rule on indices reproduces the tree's choice, so
the rows where the farthest point ties are asked of a tree built exactly as pyEDM builds
it (same states, same order, leaf size 20, compact, balanced) and queried as pyEDM
queries it (its ``k_query``: ``knn`` on disjoint lib and pred, all points where an
exclusion radius or an overlap asks for more; then the first ``knn`` admissible points).
Rows without such a tie leave out their unique farthest point, as the tree does.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: pyEDM's Simplex and S-map trees: ``KDTree(states, leafsize=20, compact_nodes=True,
#: balanced_tree=True)``. The leaf size shapes the traversal, so it decides tie order.
PYEDM_LEAFSIZE = 20

#: the farthest point "ties" when another lies within this (relative, on squared
#: distances) of it. Exact ties in pyEDM's float64 arithmetic are what matter; the slack
#: covers sums added in another order than scipy's (a flagged row costs one tree query,
#: which decides as pyEDM in any case).
FARTHEST_TIE_RTOL = 1e-9


def pyedm_tree(states: np.ndarray, leafsize: int | None = PYEDM_LEAFSIZE) -> Any:
    """``scipy.spatial.KDTree`` over ``states`` as pyEDM builds it (``leafsize`` None:
    scipy's defaults, pyEDM's CCM)."""
    from scipy.spatial import KDTree

    if leafsize is None:
        return KDTree(states)
    return KDTree(states, leafsize=leafsize, compact_nodes=True, balanced_tree=True)


def pyedm_query(tree: Any, points: np.ndarray, k: int, workers: int = 1
                ) -> tuple[np.ndarray, np.ndarray]:
    """``tree.query(points, k)`` as pyEDM calls it: (distances, tree indices), both
    ``(len(points), k)`` (scipy squeezes k = 1). ``workers`` splits the points over
    threads (each point's answer is its own: the same on any number)."""
    dist, idx = tree.query(points, k=k, eps=0, p=2, workers=workers)
    if k == 1:
        dist, idx = dist[:, None], idx[:, None]
    return dist, idx


def exclusion_active(lib_t: np.ndarray, pred_t: np.ndarray, R: int, overlap: bool) -> bool:
    """pyEDM's test for whether the exclusion radius can remove anything (Neighbors.py):
    a radius that spans the gap between disjoint lib and pred, or any radius on
    overlapping ones."""
    if R <= 0:
        return False
    if overlap:
        return True
    gap = 0
    if pred_t[0] > lib_t[-1]:
        gap = pred_t[0] - lib_t[-1]
    elif lib_t[0] > pred_t[-1]:
        gap = lib_t[0] - pred_t[-1]
    return R >= gap


def smap_k_query(lib_t: np.ndarray, pred_t: np.ndarray, knn: int, R: int) -> int:
    """How many points pyEDM's S-map asks the tree for: ``min(5 knn, |lib|)`` where the
    exclusion radius is active, ``knn + 1`` where lib and pred overlap, else ``knn``."""
    overlap = bool(np.intersect1d(lib_t, pred_t).size)
    n_lib = lib_t.size
    if exclusion_active(lib_t, pred_t, R, overlap):
        return min(knn * 5, n_lib)
    return min(knn + 1, n_lib) if overlap else knn


def farthest_ties(d2: np.ndarray, use: np.ndarray) -> np.ndarray:
    """For each row of squared distances ``d2`` over the admissible points ``use``:
    whether a second admissible point lies within :data:`FARTHEST_TIE_RTOL` of the
    farthest one."""
    dd = np.where(use, d2, -np.inf)
    top = dd.max(axis=1)
    with np.errstate(invalid="ignore"):
        near = use & (top[:, None] - dd <= FARTHEST_TIE_RTOL * np.abs(top)[:, None])
    return near.sum(axis=1) >= 2


class FarthestDrop:
    """Which library point pyEDM's S-map leaves out of a row with one point too many
    (``knn = |lib| - 1`` and nothing excluded), where several are (nearly) equally far.

    ``states``: the library's states in pyEDM's column order, as given (not centred or
    rotated: the tree's splits and its arithmetic are pyEDM's); ``lib_t``/``pred_t``:
    the call's library and prediction times; ``knn`` and ``R`` (exclusion radius) as
    the call resolved them. The tree is built on first use, once, under a lock (rows are
    decided on several threads).
    """

    def __init__(self, states: np.ndarray, lib_t: np.ndarray, pred_t: np.ndarray, knn: int,
                 R: int) -> None:
        self._states = np.ascontiguousarray(states, dtype=np.float64)
        self._lib_t = np.asarray(lib_t)
        self._kq = smap_k_query(self._lib_t, np.asarray(pred_t), knn, R)
        self._overlap = bool(np.intersect1d(lib_t, pred_t).size)
        self._exrad = exclusion_active(self._lib_t, np.asarray(pred_t), R, self._overlap)
        self._knn, self._R = knn, R
        self._tree: Any = None
        self._lock = threading.Lock()

    def usable(self) -> bool:
        """Whether the tree can decide (finite states and scipy present); otherwise the
        last of the equally far points is left out."""
        if not np.isfinite(self._states).all():
            return False
        try:
            import scipy.spatial  # noqa: F401
        except ImportError:
            return False
        return True

    def dropped(self, tps: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Library positions (into ``lib_t``) left out for prediction times ``tps`` whose
        states are ``points``: the admissible point not among pyEDM's first ``knn``."""
        with self._lock:
            if self._tree is None:
                self._tree = pyedm_tree(self._states)
        # every core: a query for |lib| - 1 points walks the whole tree (~0.5 ms a row at
        # |lib| 4,000)
        _, idx = pyedm_query(self._tree, np.asarray(points, dtype=np.float64), self._kq,
                             workers=-1)
        tps = np.asarray(tps)
        nb = self._lib_t[idx]
        if self._exrad:
            bad = np.abs(tps[:, None] - nb) <= self._R
        elif self._overlap:
            bad = tps[:, None] == nb
        else:
            bad = np.zeros(idx.shape, bool)
        good = ~bad
        chosen = good & (np.cumsum(good, axis=1) <= self._knn)
        out = np.empty(tps.size, dtype=np.int64)
        for i in range(tps.size):
            kept = np.zeros(self._lib_t.size, bool)
            kept[idx[i, chosen[i]]] = True
            adm = np.abs(self._lib_t - tps[i]) > self._R
            left = np.flatnonzero(adm & ~kept)
            if left.size != 1:  # cannot happen for a row with exactly one point too many
                raise RuntimeError(f"pyEDM's tree left out {left.size} points, not 1")
            out[i] = left[0]
        return out
