"""Whether a univariate compat call could meet a distance tie that pyEDM decides otherwise.

compat's fast path (univariate, finite, plain calls: pyedmcl's fused pipeline) orders
equidistant neighbours by pyedmcl's total order (distance, ``|p - l|``, ``l``); pyEDM's
S-map and CCM keep scipy KDTree's traversal order instead, and on quantised data
(values with few decimals) equal distances are common, so the neighbour *set* can
differ where a tie straddles the k-th place. Only a tie can make the two differ: a
query row whose distances to the other rows are pairwise distinct has one ordering in
both. :func:`has_distance_ties` tells, over every complete state vector of the series
(a superset of any library/prediction split and of every random CCM library), whether
some row holds two equal distances to two other rows; a call with such a tie goes
compat's general path, which reproduces pyEDM's order (see
:func:`._state_knn.kdtree_candidates`). The check is O(N^2) host work in blocks of
rows and stops at the first tie, so tied data pays little for it; a long series of
distinct values off a decimal grid skips it (:func:`may_tie`).
"""

from __future__ import annotations

import numpy as np

#: two squared distances closer than this (relative) count as tied. Exact ties are what
#: matter; the slack covers last-bit differences between numpy's sums (pyEDM's distances)
#: and KDTree's internal squared distances. Small enough that continuous data almost
#: never trips it (N rows of N distances: about N**3 * 1e-12 / 2 chance pairs).
TIE_RTOL = 1e-12

#: entries of the (rows, N) distance block held at once (small: tied data stop early)
_BLOCK_ENTRIES = 1 << 18


def delay_states(x: np.ndarray, E: int, tau: int) -> np.ndarray:
    """The complete ``E``-dimensional delay vectors of ``x`` with pyEDM's ``tau``
    (``tau < 0``: lags into the past), one per row, float64."""
    x = np.asarray(x, dtype=np.float64)
    span = abs(tau) * (E - 1)
    n = x.size - span
    if n <= 0:
        return np.zeros((0, E))
    cols = [x[span - i * abs(tau):span - i * abs(tau) + n] for i in range(E)]
    return np.column_stack(cols)


def has_distance_ties(states: np.ndarray, rtol: float = TIE_RTOL) -> bool:
    """True where some row of ``states`` has two (near-)equal distances to two other rows
    (squared Euclidean, pyEDM's float64 arithmetic ``sum((a - b)**2)``)."""
    s = np.asarray(states, dtype=np.float64)
    n = s.shape[0]
    if n < 3:
        return False
    step = max(1, _BLOCK_ENTRIES // n)
    for q0 in range(0, n, step):
        q = s[q0:q0 + step]
        d2 = np.zeros((q.shape[0], n))
        for j in range(s.shape[1]):  # one (rows, N) temporary, not (rows, N, D)
            d2 += (q[:, j, None] - s[None, :, j]) ** 2
        own = np.arange(q0, q0 + q.shape[0])
        d2[np.arange(q.shape[0]), own] = -1.0  # self: sorts first, never ties (distances >= 0)
        d2.sort(axis=1)
        a, b = d2[:, 1:-1], d2[:, 2:]
        if (b - a <= rtol * b).any():
            return True
    return False


#: series up to this length are always checked (the O(N^2) check costs milliseconds)
ALWAYS_CHECK = 2000
#: decimals of the grids that make a longer series "quantised"
GRID_DECIMALS = 6


def may_tie(x: np.ndarray, always: int = ALWAYS_CHECK) -> bool:
    """Whether equal distances are plausible in ``x``: series of up to ``always`` values
    (checked anyway), a repeated value, or values on a decimal grid of at most
    :data:`GRID_DECIMALS` decimals (quantised records: where ties happen). A longer
    series of distinct values off such a grid skips the O(N^2) check: equal float64
    distances there need an exact coincidence of sums."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size <= always or np.unique(x).size < x.size:
        return True
    scale = np.maximum(1.0, np.abs(x))
    for d in range(GRID_DECIMALS + 1):
        y = x * 10.0 ** d
        if np.all(np.abs(y - np.round(y)) <= 1e-9 * scale * 10.0 ** d):
            return True
    return False


def univariate_ties(x: np.ndarray, E: int, tau: int, always: int = ALWAYS_CHECK) -> bool:
    """:func:`has_distance_ties` over the delay vectors of ``x`` where :func:`may_tie`
    (``always`` as there); False where ``E``/``tau`` are not valid (the fast path then
    raises its own error)."""
    try:
        E, tau = int(E), int(tau)
    except (TypeError, ValueError):
        return False
    if E < 1 or tau == 0 or not may_tie(x, always):
        return False
    return has_distance_ties(delay_states(x, E, tau))
