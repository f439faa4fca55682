"""scipy's KDTree as pyEDM builds and queries it, and the S-map neighbours it decides
where library points are equally far.

pyEDM finds neighbours with ``scipy.spatial.KDTree`` and keeps the order in which the
tree returns equally far points: its traversal decides, not a rule on times or indices.
On quantised data (values with few decimals, what instruments record) distances tie
exactly and often, and S-map's answer hangs on two of the tree's choices:

* which of several equally far library points the default ``knn = |lib| - 1`` leaves out
  (:class:`FarthestDrop`; up to ~4e-4 relative on a random walk on a 0.1 grid at E 5);
* with a smaller ``knn``, which of equally far points fall inside pyEDM's ``k_query`` and
  in what order the first ``knn`` admissible ones are taken (:func:`tree_order`; up to
  ~4e-2 on the same walk).

No rule on indices reproduces the tree's choice, so the rows where such a tie occurs are
asked of a tree built exactly as pyEDM builds it (same states, same order, leaf size 20,
compact, balanced) and queried as pyEDM queries it (its ``k_query``: ``knn`` on disjoint
lib and pred, more where an exclusion radius or an overlap asks for it; then the first
``knn`` admissible points). Rows without a tie have one answer, by distance, in both.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: pyEDM's Simplex and S-map trees: ``KDTree(states, leafsize=20, compact_nodes=True,
#: balanced_tree=True)``. The leaf size shapes the traversal, so it decides tie order.
PYEDM_LEAFSIZE = 20

#: two points "tie" when their squared distances lie within this (relative) of each other.
#: Exact ties in pyEDM's float64 arithmetic are what matter; the slack covers sums added
#: in another order than scipy's (a flagged row costs one tree query, which decides as
#: pyEDM in any case).
TIE_RTOL = 1e-9

#: entries of one block's (states x library x coordinates) differences (16 MB)
_BLOCK_ELEMENTS = 1 << 21


def pyedm_tree(states: np.ndarray, leafsize: int | None = PYEDM_LEAFSIZE) -> Any:
    """``scipy.spatial.KDTree`` over ``states`` as pyEDM builds it (``leafsize`` None:
    scipy's defaults, pyEDM's CCM)."""
    from scipy.spatial import KDTree

    if leafsize is None:
        return KDTree(states)
    return KDTree(states, leafsize=leafsize, compact_nodes=True, balanced_tree=True)


def pyedm_query(tree: Any, points: np.ndarray, k: int | list[int], workers: int = 1
                ) -> tuple[np.ndarray, np.ndarray]:
    """``tree.query(points, k)`` as pyEDM calls it: (distances, tree indices), both
    ``(len(points), k)`` (scipy squeezes k = 1). ``k`` a list: only those places of the
    same query's answer (1-based; scipy walks the tree for ``max(k)`` either way).
    ``workers`` splits the points over threads (each point's answer is its own: the same
    on any number)."""
    dist, idx = tree.query(points, k=k, eps=0, p=2, workers=workers)
    if k == 1:
        dist, idx = dist[:, None], idx[:, None]
    return dist, idx


def row_distances(diff: np.ndarray) -> np.ndarray:
    """Euclidean norms over the last axis of ``diff``, its squares added left to right:
    pyEDM's full scans (``_FullScanRow``), which sum a column-major array (pandas'
    ``to_numpy()`` of a frame's one block) that NumPy adds column by column. NumPy's
    sum over a contiguous last axis of 8 or more adds pairwise, and one ulp decides a
    tie on quantised data."""
    acc = diff[..., 0] ** 2
    for c in range(1, diff.shape[-1]):
        acc = acc + diff[..., c] ** 2
    return np.sqrt(acc)


def kdtree_distances(diff: np.ndarray) -> np.ndarray:
    """Euclidean norms over the last axis of ``diff`` as scipy's ``KDTree`` computes the
    distances it returns (pyEDM's ``knn_distances``): four running sums over coordinates
    ``4m + 0..3``, added as ``((s0 + s1) + s2) + s3``, then the remaining coordinates one
    by one. Below 8 coordinates that is :func:`row_distances`' order."""
    n = diff.shape[-1]
    full = n - n % 4
    acc = [np.zeros(diff.shape[:-1]) for _ in range(4)]
    for c in range(full):
        acc[c % 4] = acc[c % 4] + diff[..., c] ** 2
    s = ((acc[0] + acc[1]) + acc[2]) + acc[3]
    for c in range(full, n):
        s = s + diff[..., c] ** 2
    return np.sqrt(s)


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


def tree_order(states: np.ndarray, points: np.ndarray, cand: np.ndarray, kq: int
               ) -> np.ndarray:
    """The ``kq`` library positions pyEDM's tree returns for each of ``points``, from the
    device's or the host's candidates ``cand`` (ascending distance, ``kq`` or ``kq + 1``
    columns: one more shows a tie across the cut). A row whose candidates hold two
    (nearly) equal distances is asked of a tree built and queried as pyEDM's (its order
    among them, and which of them fall inside the cut, are the tree's); other rows have
    one order, by distance, in both. ``states``: the library's states as given. Without
    scipy or with non-finite states, ``cand`` is kept."""
    out = np.array(cand[:, :kq], dtype=np.int64)
    if cand.shape[0] == 0 or cand.shape[1] < 2 or not np.isfinite(states).all():
        return out
    try:
        import scipy.spatial  # noqa: F401
    except ImportError:
        return out
    pts = np.asarray(points, dtype=np.float64)
    step = max(1, _BLOCK_ELEMENTS // max(1, cand.shape[1] * states.shape[1]))
    flag = np.zeros(cand.shape[0], bool)
    for b0 in range(0, cand.shape[0], step):
        c = cand[b0:b0 + step]
        d2 = np.sort(((states[c] - pts[b0:b0 + step, None, :]) ** 2).sum(axis=2), axis=1)
        gap = d2[:, 1:] - d2[:, :-1]
        flag[b0:b0 + step] = (gap <= TIE_RTOL * np.abs(d2[:, 1:])).any(axis=1)
    if flag.any():
        _, idx = pyedm_query(pyedm_tree(states), pts[flag], kq, workers=-1)
        out[flag] = idx
    return out


def farthest_ties(d2: np.ndarray, use: np.ndarray) -> np.ndarray:
    """For each row of squared distances ``d2`` over the admissible points ``use``:
    whether a second admissible point lies within :data:`TIE_RTOL` of the
    farthest one."""
    dd = np.where(use, d2, -np.inf)
    top = dd.max(axis=1)
    with np.errstate(invalid="ignore"):
        near = use & (top[:, None] - dd <= TIE_RTOL * np.abs(top)[:, None])
    return near.sum(axis=1) >= 2


def leave_out_farthest(use: np.ndarray, d2: np.ndarray, tps: np.ndarray, points: np.ndarray,
                       rule: FarthestDrop | None) -> None:
    """Clear one point in each row of ``use`` (admissible library points, one too many:
    pyEDM's ``knn = |lib| - 1``), in place: the farthest by the squared distances ``d2``.
    Of several (nearly) equally far, the one pyEDM's tree leaves out (``rule``, for
    prediction times ``tps`` with states ``points``); without a rule, the last of them."""
    tied = farthest_ties(d2, use) if rule is not None else np.zeros(use.shape[0], bool)
    if tied.any():
        use[np.flatnonzero(tied), rule.dropped(tps[tied], points[tied])] = False
    for i in np.flatnonzero(~tied):
        cand = np.flatnonzero(use[i])
        dc = d2[i, cand]
        use[i, cand[dc.size - 1 - int(np.argmax(dc[::-1]))]] = False


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
        self._lib_t, self._pred_t = np.asarray(lib_t), np.asarray(pred_t)
        self._sorted_lib = np.sort(self._lib_t)
        self._knn, self._R = knn, R
        self._kq = 0  # pyEDM's k_query and the tree, on first use (most calls never ask)
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
        states are ``points``: the admissible point not among pyEDM's first ``knn``.

        Such a row admits every library point (one too many), so pyEDM's mask removes
        nothing and the answer depends on the state alone: equal states are asked once.
        Where pyEDM asks the tree for all points (an exclusion radius or an overlap), the
        one left out is the last the tree returns; where it asks for ``|lib| - 1``, the one
        of the ``m`` (nearly) equally far points the tree does not return, found among the
        last ``m`` it returns (only those columns come back: the query's memory stays
        rows x m, not rows x |lib|)."""
        tps = np.asarray(tps)
        near = np.searchsorted(self._sorted_lib, tps - self._R, side="left")
        within = near < self._sorted_lib.size
        if np.any(self._sorted_lib[np.minimum(near, self._sorted_lib.size - 1)][within]
                  <= tps[within] + self._R):
            raise ValueError("FarthestDrop.dropped: a row with excluded library points")
        pts = np.asarray(points, dtype=np.float64)
        uniq, inv = np.unique(pts, axis=0, return_inverse=True)
        with self._lock:
            if self._tree is None:
                self._kq = smap_k_query(self._lib_t, self._pred_t, self._knn, self._R)
                self._tree = pyedm_tree(self._states)
        n_lib = self._lib_t.size
        if self._kq == n_lib:
            _, idx = pyedm_query(self._tree, uniq, [n_lib], workers=-1)
            return idx[:, 0][inv.ravel()]
        # each state's (nearly) equally far points, found in blocks of bounded memory and
        # kept as (state, library position) pairs: few a state
        rows, cols = [], []
        step = max(1, _BLOCK_ELEMENTS // max(1, n_lib * self._states.shape[1]))
        for b0 in range(0, uniq.shape[0], step):
            u = uniq[b0:b0 + step]
            d2 = ((self._states[None, :, :] - u[:, None, :]) ** 2).sum(axis=2)
            top = d2.max(axis=1)
            r, c = np.nonzero(top[:, None] - d2 <= TIE_RTOL * np.abs(top)[:, None])
            rows.append(r + b0)
            cols.append(c)
        return self._not_returned(uniq, np.concatenate(rows), np.concatenate(cols))[
            inv.ravel()]

    def _not_returned(self, u: np.ndarray, rows: np.ndarray, cols: np.ndarray
                      ) -> np.ndarray:
        """For states ``u`` and their (nearly) equally far points (pairs ``rows``,
        ``cols``: state, library position): the one a ``k = |lib| - 1`` query leaves out.
        The ``m`` farthest points are the tree's last ``m - 1`` returned and the one left
        out; one column more is asked for as a margin (a state whose answer is not one
        point there is asked again in full). One query for all states: the tree's walks
        spread over every core."""
        n_lib, kq = self._lib_t.size, self._kq
        m = np.bincount(rows, minlength=u.shape[0])
        w = min(kq, int(m.max()))
        _, idx = pyedm_query(self._tree, u, list(range(kq - w + 1, kq + 1)), workers=-1)
        back = (idx[rows] == cols[:, None]).any(axis=1)   # the tied points it returned
        left = np.bincount(rows[~back], minlength=u.shape[0])
        out = np.full(u.shape[0], -1, dtype=np.int64)
        out[rows[~back]] = cols[~back]
        for i in np.flatnonzero(left != 1):  # not among the last w: in full
            _, full = pyedm_query(self._tree, u[i:i + 1], kq)
            kept = np.zeros(n_lib, bool)
            kept[full[0]] = True
            rest = np.flatnonzero(~kept)
            if rest.size != 1:
                raise RuntimeError(f"pyEDM's tree left out {rest.size} points, not 1")
            out[i] = rest[0]
        return out
