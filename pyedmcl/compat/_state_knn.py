"""k nearest library rows of an (N, D) state space, pyEDM's tie order, device first.

The fused k-NN kernel embeds a 1-D series; an (N, D) state space laid out row after
row is such a series in which the window of ``E = D, tau = 1`` starting at point
``D*i`` is row ``i``. Library and query points are multiples of ``D``, so the
kernel's exclusion rule ``|p - l| <= r`` with ``r = R*D`` is ``|row_p - row_l| <= R``
and its tie order (distance, then ``|p - l|``, then ``l``) is pyEDM's Simplex order
on data rows. Rows that are never library or query rows (NaN rows left out by the
caller) are filled with 0 in the laid-out series; the kernel never reads them as
a point.

``k`` beyond the kernel's limit (``pyedmcl.primitives.ranges.MAX_KNN``) takes the host
path: float64 distances in blocks of query rows, ordered by the same key.

:func:`kdtree_candidates` is pyEDM's candidate list instead: the order in which scipy's
``KDTree`` returns equidistant points (quantised data tie often), which pyEDM's S-map,
CCM, Multiview and the candidate filters keep. The device finds the candidates; only
query rows with a tie among them are asked again of a ``KDTree`` built as pyEDM
builds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# pyEDM's distance arithmetic lives with its tree (compat and pyedmcl.edm share it)
from ..edm.pyedm_kdtree import kdtree_distances, row_distances  # noqa: F401

#: query rows per block on the host path (bounds the (rows, N_lib, D) temporary)
_HOST_BLOCK_BYTES = 64 << 20


def _host(emb: np.ndarray, lib: np.ndarray, pred: np.ndarray, k: int, radius: int
          ) -> tuple[np.ndarray, np.ndarray]:
    L = emb[lib]
    nbr = np.full((pred.size, k), -1, dtype=np.int64)
    dist = np.full((pred.size, k), np.inf)
    step = max(1, _HOST_BLOCK_BYTES // max(1, L.size * 8 * 3))
    for q0 in range(0, pred.size, step):
        p = pred[q0:q0 + step]
        d = kdtree_distances(emb[p][:, None, :] - L[None, :, :])
        prox = np.abs(p[:, None] - lib[None, :])
        if radius >= 0:
            d = np.where(prox <= radius, np.inf, d)
        # per row: order by distance, then |p - l|, then l (lexsort's last key is primary)
        order = np.lexsort((np.broadcast_to(lib, d.shape), prox, d), axis=-1)[:, :k]
        dk = np.take_along_axis(d, order, axis=1)
        ok = np.isfinite(dk)  # inf (excluded) sort last, so finite slots come first
        w = order.shape[1]
        nbr[q0:q0 + p.size, :w] = np.where(ok, lib[order], -1)
        dist[q0:q0 + p.size, :w] = np.where(ok, dk, np.inf)
    return nbr, dist


def state_neighbors(emb: np.ndarray, lib: np.ndarray, pred: np.ndarray, k: int, radius: int,
                    device: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of ``lib`` to each row of ``pred`` in the state space ``emb``.

    ``radius``: library row ``l`` is skipped for query row ``p`` when
    ``|p - l| <= radius`` (-1: none). Returns ``(rows (n_pred, k), distances)`` in
    float64; slots without an admissible neighbour hold row -1 and distance inf.
    """
    from ..primitives.ranges import MAX_KNN

    lib = np.asarray(lib, dtype=np.int64)
    pred = np.asarray(pred, dtype=np.int64)
    emb = np.asarray(emb, dtype=np.float64)
    if pred.size == 0:
        return np.zeros((0, k), np.int64), np.zeros((0, k))
    used = np.union1d(lib, pred)
    if not np.isfinite(emb[used]).all():
        raise ValueError("the state vectors of lib/pred rows hold NaN or inf; use ignoreNan=True")
    if k > MAX_KNN or lib.size < 2:
        return _host(emb, lib, pred, k, radius)
    from ..primitives.knn import knn_table

    N, D = emb.shape
    flat = np.where(np.isfinite(emb), emb, 0.0).reshape(-1)
    idx, dist = knn_table(flat, E=D, tau=1, knn=k, lib_points=lib * D, query_points=pred * D,
                          exclusion_radius=radius * D if radius >= 0 else -1, dtype="float64",
                          device=device)
    idx = np.asarray(idx, dtype=np.int64)
    rows = np.where(idx >= 0, idx // D, -1)
    return rows, np.where(idx >= 0, np.asarray(dist, dtype=np.float64), np.inf)


#: two candidate distances closer than this (relative) count as a tie. Exact ties in
#: pyEDM's float64 arithmetic are what matters; device and host sums may differ in the
#: last bits, so near-ties are flagged too (a flagged row only costs a KDTree query).
TIE_RTOL = 1e-9


def host_distances(emb: np.ndarray, pred: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Distances from each ``pred`` row to its ``rows`` as pyEDM's ``knn_distances``
    hold them (scipy KDTree's value, :func:`kdtree_distances`); row -1 gives inf."""
    out = np.full(rows.shape, np.inf)
    if rows.size == 0:
        return out
    step = max(1, _HOST_BLOCK_BYTES // max(1, rows.shape[1] * emb.shape[1] * 8 * 2))
    for q0 in range(0, pred.size, step):
        r = rows[q0:q0 + step]
        ok = r >= 0
        d = kdtree_distances(emb[pred[q0:q0 + step]][:, None, :] - emb[np.where(ok, r, 0)])
        out[q0:q0 + step] = np.where(ok, d, np.inf)
    return out


def tied_rows(dist: np.ndarray) -> np.ndarray:
    """True for each row of ascending ``dist`` with two (near-)equal finite neighbours."""
    if dist.shape[1] < 2:
        return np.zeros(dist.shape[0], dtype=bool)
    a, b = dist[:, :-1], dist[:, 1:]
    with np.errstate(invalid="ignore"):
        close = np.abs(b - a) <= TIE_RTOL * np.abs(b)
    return (close & np.isfinite(b)).any(axis=1)


def _kdtree_query(emb: np.ndarray, lib: np.ndarray, pred: np.ndarray, k: int,
                  leafsize: int | None) -> tuple[np.ndarray, np.ndarray]:
    from ..edm.pyedm_kdtree import pyedm_query, pyedm_tree

    dist, local = pyedm_query(pyedm_tree(emb[lib], leafsize), emb[pred], k)
    return lib[local], dist


def scipy_available() -> bool:
    """Whether scipy's KDTree (pyEDM's neighbour search) can be imported."""
    try:
        import scipy.spatial  # noqa: F401
    except ImportError:
        return False
    return True


def kdtree_candidates(emb: np.ndarray, lib: np.ndarray, pred: np.ndarray, k: int,
                      leafsize: int | None, device: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """pyEDM's ``KDTree(emb[lib], leafsize).query(emb[pred], k)`` as library rows.

    The ``k`` nearest rows of ``lib`` to each row of ``pred`` (no exclusion), in scipy
    KDTree's order, with pyEDM's float64 distances. The device k-NN finds ``k + 1``
    candidates (one more to see a tie at the boundary of the set); a row whose
    candidates hold two equal distances (:data:`TIE_RTOL`) is where the device's tie
    order (|p - l|, then l) and KDTree's traversal order may differ, so exactly those
    rows are queried again from a KDTree built as pyEDM builds it (``leafsize``:
    20, compact, balanced in pyEDM's Simplex/S-map; None: ``KDTree(data)`` with
    scipy's defaults, as pyEDM's CCM). The tree's leaf size shapes its traversal, so
    it decides the order of ties. Other rows have one nearest set, ordered by distance in both. Without
    scipy the device's order is kept (documented total order, not pyEDM's).
    """
    lib = np.asarray(lib, dtype=np.int64)
    pred = np.asarray(pred, dtype=np.int64)
    emb = np.asarray(emb, dtype=np.float64)
    k = min(k, lib.size)
    if pred.size == 0 or k < 1:
        return np.zeros((pred.size, max(k, 0)), np.int64), np.zeros((pred.size, max(k, 0)))
    rows, _ = state_neighbors(emb, lib, pred, min(k + 1, lib.size), -1, device=device)
    dist = host_distances(emb, pred, rows)
    flagged = tied_rows(dist)
    rows, dist = rows[:, :k].copy(), dist[:, :k].copy()
    if flagged.any() and scipy_available():
        rows[flagged], dist[flagged] = _kdtree_query(emb, lib, pred[flagged], k, leafsize)
    return rows, dist
