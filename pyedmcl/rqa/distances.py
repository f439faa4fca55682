"""Distances on the host as the RQA line kernels compute them (the references the
fixed-rate radius search, FAN's column thresholds and the exact redo's tests compare
with): delay vectors, every pair of two point sets in a working precision, and sampled
pairs in float64."""

from __future__ import annotations

import numpy as np

#: cells per host block of the column search
BLOCK_CELLS = 1 << 22


def points(s: np.ndarray, E: int, tau: int) -> np.ndarray:
    """The ``(n, E)`` delay vectors of ``s`` (window ``i``: ``s[i], s[i + tau], ...``)."""
    n = s.size - (E - 1) * tau
    return np.stack([s[m * tau: m * tau + n] for m in range(E)], axis=1)


def kernel_distances(a: np.ndarray, b: np.ndarray, metric: str, fma: bool = False) -> np.ndarray:
    """``(rows of a) x (rows of b)`` distances exactly as the line kernels compute them in
    ``a.dtype`` (Euclidean: squared, summed coordinate by coordinate; ``fma``: the squares
    after the first added by a fused multiply-add, as the kernels' ``FMA=1``)."""
    acc = None
    for m in range(a.shape[1]):
        d = a[:, None, m] - b[None, :, m]
        if metric == "euclidean" and fma and acc is not None:
            from ..fma_emulation import fma as fused

            acc = fused(d, d, acc)
        elif metric == "euclidean":
            t = d * d
            acc = t if acc is None else acc + t
        else:
            t = np.abs(d)
            acc = t if acc is None else (np.maximum(acc, t) if metric == "maximum" else acc + t)
    return acc


def sampled_dist(rows: np.ndarray, cols: np.ndarray, i: np.ndarray, j: np.ndarray, E: int,
                  tau: int, metric: str) -> np.ndarray:
    """Distances (Euclidean: squared) of the pairs (row point ``i``, column point ``j``), as
    the kernels compare them: coordinates in order, in float64. One coordinate at a time
    from the series (no N x E point arrays or pair-by-coordinate temporaries, which cost
    memory traffic), the same sums in the same order."""
    acc = None
    for m in range(E):
        d = np.take(rows[m * tau:], i)
        d -= np.take(cols[m * tau:], j)
        if metric == "euclidean":
            d *= d
        else:
            np.abs(d, out=d)
        if acc is None:
            acc = d
        elif metric == "maximum":
            np.maximum(acc, d, out=acc)
        else:
            acc += d
    return acc
