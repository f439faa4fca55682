"""k nearest library rows of an (N, D) state space, pyEDM's tie order, device first.

The fused k-NN kernel embeds a 1-D series; an (N, D) state space laid out row after
row is such a series in which the window of ``E = D, tau = 1`` starting at point
``D*i`` is row ``i``. Library and query points are multiples of ``D``, so the
kernel's exclusion rule ``|p - l| <= r`` with ``r = R*D`` is ``|row_p - row_l| <= R``
and its tie order (distance, then ``|p - l|``, then ``l``) is pyEDM's Simplex order
on data rows. Rows that are never library or query rows (NaN rows left out by the
caller) are filled with 0 in the laid-out series; the kernel never reads them as
a point.

``k`` beyond the kernel's limit (``pyedmcl.edm.ranges.MAX_KNN``) takes the host
path: float64 distances in blocks of query rows, ordered by the same key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
        d = np.sqrt(((emb[p][:, None, :] - L[None, :, :]) ** 2).sum(axis=2))
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
    from ..edm.ranges import MAX_KNN

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
    from ..edm.knn import knn_table

    N, D = emb.shape
    flat = np.where(np.isfinite(emb), emb, 0.0).reshape(-1)
    idx, dist = knn_table(flat, E=D, tau=1, knn=k, lib_points=lib * D, query_points=pred * D,
                          exclusion_radius=radius * D if radius >= 0 else -1, dtype="float64",
                          device=device)
    idx = np.asarray(idx, dtype=np.int64)
    rows = np.where(idx >= 0, idx // D, -1)
    return rows, np.where(idx >= 0, np.asarray(dist, dtype=np.float64), np.inf)
