"""Sample data from documented generative models (deterministic, seeded).

Every generator cites the model it implements, so the demo and the tests have
data with *known* properties (a known causal direction, a known attractor):

- :func:`coupled_logistic` — two-species coupled logistic maps, Sugihara et al.
  (2012), "Detecting causality in complex ecosystems", Science 338:496, Fig. 3:
  ``x' = x (rx - rx x - bxy y)``, ``y' = y (ry - ry y - byx x)``. With the defaults
  ``byx = 0.1 > bxy = 0.02``: x drives y more strongly than y drives x, so
  cross-mapping x from y's shadow manifold (CCM "y xmap x") converges higher.
- :func:`lorenz63` — Lorenz (1963), sigma=10, rho=28, beta=8/3, RK4 integration.
- :func:`logistic_map` — r x (1 - x), chaotic at r=4 (RQA examples).
- :func:`roessler` — Rössler (1976), a=b=0.2, c=5.7, RK4 integration: a smooth
  chaotic flow, the kind of record RQA benchmarks use (N = 946,303 in bench/).
- :func:`noisy_sine` — a sine with Gaussian noise (RQA sanity checks).
- :func:`logistic_network` — N logistic maps coupled along a random directed graph
  (known adjacency), for all-to-all causal maps; :func:`logistic_graph` the same
  dynamics along a given graph.
"""

from __future__ import annotations

import numpy as np


def coupled_logistic(n: int = 1000, *, rx: float = 3.8, ry: float = 3.5, bxy: float = 0.02,
                     byx: float = 0.1, x0: float = 0.4, y0: float = 0.2, burn: int = 200) -> np.ndarray:
    """(n, 2) array of the coupled logistic maps [x, y] (x drives y more strongly)."""
    x, y = x0, y0
    out = np.empty((n + burn, 2))
    for t in range(n + burn):
        out[t] = x, y
        x, y = x * (rx - rx * x - bxy * y), y * (ry - ry * y - byx * x)
    return out[burn:]


def lorenz63(n: int = 2000, *, dt: float = 0.01, sample_every: int = 5, sigma: float = 10.0,
             rho: float = 28.0, beta: float = 8.0 / 3.0, start=(1.0, 1.0, 1.0),
             burn: int = 1000) -> np.ndarray:
    """(n, 3) samples of the Lorenz-63 system, RK4 with step ``dt``, every ``sample_every`` steps."""

    def f(s):
        x, y, z = s
        return np.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    s = np.asarray(start, dtype=float)
    out = np.empty((n, 3))
    total = burn + n * sample_every
    k = 0
    for step in range(total):
        if step >= burn and (step - burn) % sample_every == 0:
            out[k] = s
            k += 1
        k1 = f(s)
        k2 = f(s + 0.5 * dt * k1)
        k3 = f(s + 0.5 * dt * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return out


def roessler(n: int = 2000, *, dt: float = 0.05, sample_every: int = 2, a: float = 0.2,
             b: float = 0.2, c: float = 5.7, start=(1.0, 1.0, 1.0),
             burn: int = 2000) -> np.ndarray:
    """``n`` samples of the Rössler system's x coordinate (``x' = -y - z``,
    ``y' = x + a y``, ``z' = b + z (x - c)``), RK4 with step ``dt``, every
    ``sample_every`` steps after ``burn`` steps. Scalar arithmetic (about 1 us a step):
    a 10^6-point record takes a few seconds."""
    x, y, z = (float(v) for v in start)
    h, h2, h6 = dt, dt / 2.0, dt / 6.0
    out = np.empty(n)
    k = 0
    for step in range(burn + n * sample_every):
        if step >= burn and (step - burn) % sample_every == 0:
            out[k] = x
            k += 1
        ax, ay, az = -y - z, x + a * y, b + z * (x - c)
        x2, y2, z2 = x + h2 * ax, y + h2 * ay, z + h2 * az
        bx, by, bz = -y2 - z2, x2 + a * y2, b + z2 * (x2 - c)
        x3, y3, z3 = x + h2 * bx, y + h2 * by, z + h2 * bz
        cx, cy, cz = -y3 - z3, x3 + a * y3, b + z3 * (x3 - c)
        x4, y4, z4 = x + h * cx, y + h * cy, z + h * cz
        dx, dy, dz = -y4 - z4, x4 + a * y4, b + z4 * (x4 - c)
        x += h6 * (ax + 2 * bx + 2 * cx + dx)
        y += h6 * (ay + 2 * by + 2 * cy + dy)
        z += h6 * (az + 2 * bz + 2 * cz + dz)
    return out


def logistic_map(n: int = 2000, *, r: float = 4.0, x0: float = 0.4, burn: int = 100) -> np.ndarray:
    x = x0
    out = np.empty(n + burn)
    for t in range(n + burn):
        out[t] = x
        x = r * x * (1.0 - x)
    return out[burn:]


def noisy_sine(n: int = 2000, *, period: float = 50.0, noise: float = 0.1, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sin(2 * np.pi * np.arange(n) / period) + noise * rng.standard_normal(n)


def logistic_network(n_series: int = 8, n: int = 800, *, coupling: float = 0.08, p_edge: float = 0.2,
                     r_range=(3.6, 3.9), seed: int = 1, burn: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(n, N) series of logistic maps coupled along a random directed graph, and the adjacency.

    ``A[i, j] = 1`` means series i drives series j: ``x_j' = x_j (r_j - r_j x_j - c * mean_i A[i,j] x_i)``.
    """
    rng = np.random.default_rng(seed)
    A = (rng.random((n_series, n_series)) < p_edge).astype(float)
    np.fill_diagonal(A, 0)
    r = rng.uniform(*r_range, n_series)
    x = rng.uniform(0.2, 0.8, n_series)
    return _logistic_graph_run(A, r, x, n, coupling, burn), A


def logistic_graph(A, n: int = 1000, *, coupling: float = 0.2, r_range=(3.6, 3.9),
                   seed: int = 1, burn: int = 200) -> np.ndarray:
    """(n, N) series of logistic maps coupled along a *given* directed graph ``A``
    (``A[i, j] = 1``: series i drives series j), with :func:`logistic_network`'s dynamics:
    growth rates drawn in ``r_range`` and initial states by ``seed``. For networks of
    known shape (chains, forks, colliders) in causal-discovery checks."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square adjacency matrix, got shape {A.shape}")
    rng = np.random.default_rng(seed)
    N = A.shape[0]
    r = rng.uniform(*r_range, N)
    x = rng.uniform(0.2, 0.8, N)
    return _logistic_graph_run(A, r, x, n, coupling, burn)


def _logistic_graph_run(A: np.ndarray, r: np.ndarray, x: np.ndarray, n: int, coupling: float,
                        burn: int) -> np.ndarray:
    indeg = np.maximum(A.sum(axis=0), 1)
    out = np.empty((n + burn, A.shape[0]))
    for t in range(n + burn):
        out[t] = x
        drive = (A * x[:, None]).sum(axis=0) / indeg
        x = x * (r - r * x - coupling * drive)
        x = np.clip(x, 1e-6, 1 - 1e-6)
    return out[burn:]
