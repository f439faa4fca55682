"""Time-delay embedding conventions, and a NumPy reference (tests, small data).

Kernels never materialise the embedding: point ``j`` of a series ``s`` is
``(s[j], s[j+tau], ..., s[j+(E-1)tau])``. In the public API (as in kEDM), the
embedded vector *at time t* is ``(x_t, x_{t-tau}, ..., x_{t-(E-1)tau})``, i.e.
kernel point ``j`` is time ``t = j + (E-1)tau``; the order of coordinates does not
change any distance.
"""

from __future__ import annotations

import numpy as np

from .validation import as_series, check_embedding, check_int


def embed(x, E: int, tau: int = 1) -> np.ndarray:
    """The embedded matrix, one row per time ``t = (E-1)tau ... n-1``: ``[x_t, x_{t-tau}, ...]``."""
    s = as_series(x)
    E, tau = check_int(E, "E", 1, 512), check_int(tau, "tau", 1)
    n_pts = check_embedding(s.size, E, tau)
    span = (E - 1) * tau
    return np.stack([s[span - k * tau: span - k * tau + n_pts] for k in range(E)], axis=1)


def distance_matrix_reference(x, y, E: int, tau: int, metric: str = "euclidean",
                              squared: bool = True) -> np.ndarray:
    """NumPy reference for the pairwise-distance kernel (float64)."""
    a, b = embed(x, E, tau), embed(y, E, tau)
    diff = a[:, None, :] - b[None, :, :]
    if metric == "euclidean":
        d = np.einsum("ijk,ijk->ij", diff, diff)
        return d if squared else np.sqrt(d)
    if metric == "maximum":
        return np.abs(diff).max(axis=2)
    if metric == "manhattan":
        return np.abs(diff).sum(axis=2)
    raise ValueError(metric)
