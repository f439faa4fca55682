"""Held-out coupled systems of known graph for ``pe.causal_network``'s accuracy.

Three map families that no test uses (the tests simulate ``pyedmcl.data.logistic_graph``,
logistic maps with competitive coupling ``x (r - r x - c drive)``):

* ``logistic_diffusive`` -- logistic maps ``f(x) = r x (1 - x)`` with diffusive
  (Kaneko) coupling, ``x_j' = (1 - c) f_j(x_j) + c mean_{i -> j} f_i(x_i)``,
  ``r_j`` in 3.88..3.98;
* ``henon`` -- Henon maps coupled as in the causality literature (Kugiumtzis 2013,
  Papana et al. 2013): ``x_j' = a_j - ((1 - c) x_j + c mean_{i -> j} x_i)^2 + 0.3 x_j(t-1)``,
  ``a_j`` in 1.33..1.42;
* ``ricker`` -- Ricker population maps with competitive coupling,
  ``x_j' = x_j exp(r_j (1 - x_j) - c' mean_{i -> j} x_i)``, ``r_j`` in 2.94..3.10 and
  ``c' = 3 c`` (a Ricker map's state spans ~0..2.5, so ``3 c`` scales the drive to the
  other families' share of the update).

The parameter ranges avoid the uncoupled maps' periodic windows (logistic 3.83..3.86,
Ricker 3.12..3.22, Henon below 1.31); a draw in which any series is still periodic (the
coupling can lock one: fewer than ``MIN_DISTINCT`` distinct values at 4 decimals among
its 1,000) is re-drawn from the seed's next stream -- cross mapping needs a series that
carries its dynamics (CCM's premise), and a periodic one is not a test of the method.
Each family adds observational noise of ``noise`` times each series' standard deviation
(default 0.01). Graphs (3-5 nodes; a bystander is a node with no edge): chain x0->x1->x2
with a bystander, fork x0->{x1,x2} with a bystander, chain of 4, a chain with a fork and
a bystander (x0->x1->x2, x1->x3, x4 alone), and a collider {x0,x1}->x2 with a bystander.

Seeds: every simulation draws its parameters and initial states from
``SeedSequence([ENTROPY, family, graph, round(1000 c), seed])`` -- a stream no test or
earlier bench used. Development seeds (``DEV_SEEDS``) are the only ones looked at while
changing the method; evaluation seeds (``EVAL_SEEDS``) are run once, for the report.
"""

from __future__ import annotations

import numpy as np

#: fixed entropy of this generator's streams (the tests use default_rng(seed) directly)
ENTROPY = 0x5EED_0C0F
FAMILIES = ("logistic_diffusive", "henon", "ricker")
GRAPHS: dict[str, tuple[int, list[tuple[int, int]]]] = {
    "chain+bystander": (4, [(0, 1), (1, 2)]),
    "fork+bystander": (4, [(0, 1), (0, 2)]),
    "chain4": (4, [(0, 1), (1, 2), (2, 3)]),
    "chain+fork+bystander": (5, [(0, 1), (1, 2), (1, 3)]),
    "collider+bystander": (4, [(0, 2), (1, 2)]),
}
COUPLINGS = (0.1, 0.2, 0.3)
DEV_SEEDS = tuple(range(100, 105))
EVAL_SEEDS = tuple(range(900, 910))
BURN = 500
#: fewer distinct values (4 decimals) than this marks a periodic series
MIN_DISTINCT = 200


def adjacency(N: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """``A[i, j] = 1``: series i drives series j."""
    A = np.zeros((N, N))
    for a, b in edges:
        A[a, b] = 1.0
    return A


def _drive(A: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the drivers' ``v`` per node and whether the node has any driver."""
    indeg = A.sum(axis=0)
    return (A * v[:, None]).sum(axis=0) / np.maximum(indeg, 1), indeg > 0


def simulate(family: str, A: np.ndarray, n: int, c: float, rng: np.random.Generator,
             noise: float = 0.01) -> np.ndarray:
    """``(n, N)`` series of ``family`` coupled along ``A`` with coupling ``c``."""
    N = A.shape[0]
    out = np.empty((n + BURN, N))
    if family == "logistic_diffusive":
        r = rng.uniform(3.88, 3.98, N)
        x = rng.uniform(0.2, 0.8, N)
        for t in range(n + BURN):
            out[t] = x
            f = r * x * (1 - x)
            d, has = _drive(A, f)
            x = np.where(has, (1 - c) * f + c * d, f)
    elif family == "henon":
        a = rng.uniform(1.33, 1.42, N)
        x, xp = rng.uniform(-0.5, 0.5, N), rng.uniform(-0.5, 0.5, N)
        for t in range(n + BURN):
            out[t] = x
            d, has = _drive(A, x)
            u = np.where(has, (1 - c) * x + c * d, x)
            x, xp = a - u * u + 0.3 * xp, x
            if not np.isfinite(x).all() or np.abs(x).max() > 10:
                raise FloatingPointError("Henon orbit escaped")
    elif family == "ricker":
        r = rng.uniform(2.94, 3.10, N)
        x = rng.uniform(0.2, 1.5, N)
        for t in range(n + BURN):
            out[t] = x
            d, _ = _drive(A, x)
            x = x * np.exp(r * (1 - x) - 3 * c * d)
    else:
        raise ValueError(f"family={family!r}; allowed: {', '.join(FAMILIES)}")
    X = out[BURN:]
    if noise:
        X = X + noise * X.std(axis=0) * rng.standard_normal(X.shape)
    return X


def system(family: str, graph: str, c: float, seed: int, n: int = 1000,
           noise: float = 0.01) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """``(X, true_edges)`` of one held-out simulation (re-drawn from the next stream of
    the same seed if a Henon orbit escapes or a series is periodic)."""
    N, edges = GRAPHS[graph]
    A = adjacency(N, edges)
    ss = np.random.SeedSequence([ENTROPY, FAMILIES.index(family), list(GRAPHS).index(graph),
                                 int(round(1000 * c)), seed])
    for child in ss.spawn(32):
        rng = np.random.default_rng(child)
        try:
            X = simulate(family, A, n, c, rng, noise=0.0)
        except FloatingPointError:
            continue
        if min(np.unique(np.round(x, 4)).size for x in X.T) < MIN_DISTINCT:
            continue
        if noise:
            X = X + noise * X.std(axis=0) * rng.standard_normal(X.shape)
        return X, set(edges)
    raise FloatingPointError(f"{family} {graph} c={c} seed={seed}: no bounded chaotic orbit")
