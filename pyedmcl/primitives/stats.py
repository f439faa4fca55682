"""Small statistics of the significance tests, in NumPy (SciPy is only the tests' oracle).

* :func:`surrogate_p` -- the surrogate test's p-value ``(1 + #{null >= rho}) / (n + 1)``
  (Davison & Hinkley 1997: the observed value counts as one draw of the null, so p is
  never 0 and is exact for exchangeable surrogates);
* :func:`kendall_tau` -- Kendall's tau-b with the normal-approximation p-value and its
  tie corrections (the variance SciPy's ``kendalltau(method="asymptotic")`` uses);
* :func:`convergence_fit` -- ``rho(L) = rho_inf (1 - exp(-gamma L))`` by least squares
  (a grid over gamma, rho_inf in closed form for each);
* :func:`bh_adjust` -- Benjamini--Hochberg (1995) adjusted p-values (q-values).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def surrogate_p(rho: Any, null: np.ndarray) -> np.ndarray:
    """One-sided p-values of ``rho`` (any shape S) against ``null`` (shape S + (n,)):
    ``(1 + #{null >= rho}) / (n_finite + 1)`` over the finite null values; NaN where
    ``rho`` is NaN or no null value is finite."""
    rho = np.asarray(rho, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    fin = np.isfinite(null)
    n = fin.sum(axis=-1)
    ge = (fin & (null >= rho[..., None])).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (1.0 + ge) / (n + 1.0)
    return np.where(np.isfinite(rho) & (n > 0), p, np.nan)


def nan_quantile(a: np.ndarray, q: float) -> np.ndarray:
    """``numpy.nanquantile(a, q, axis=-1)`` (linear interpolation), vectorised: one sort
    instead of NumPy's per-row loop (an xmap block has rows x N nulls)."""
    a = np.asarray(a, dtype=np.float64)
    s = np.sort(a, axis=-1)  # NaN last
    cnt = np.isfinite(a).sum(axis=-1)
    pos = q * np.maximum(cnt - 1, 0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(cnt - 1, 0))
    frac = pos - lo
    vlo = np.take_along_axis(s, lo[..., None], axis=-1)[..., 0]
    vhi = np.take_along_axis(s, hi[..., None], axis=-1)[..., 0]
    out = vlo + (vhi - vlo) * frac
    return np.where(cnt > 0, out, np.nan)


def null_summary(null: np.ndarray, q: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The null's mean and its ``q`` quantile over the last axis, NaN values ignored
    (NaN where every value is NaN)."""
    null = np.asarray(null, dtype=np.float64)
    fin = np.isfinite(null)
    cnt = fin.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(fin, null, 0.0).sum(axis=-1) / cnt
    return np.where(cnt > 0, mean, np.nan), nan_quantile(null, q)


class _quiet:
    """Silence NumPy's all-NaN slice warnings (an all-NaN null gives NaN, by design)."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


def _tie_sums(a: np.ndarray) -> tuple[float, float, float]:
    _, t = np.unique(a, return_counts=True)
    t = t[t > 1].astype(np.float64)
    return (float((t * (t - 1) / 2).sum()), float((t * (t - 1) * (t - 2)).sum()),
            float((t * (t - 1) * (2 * t + 5)).sum()))


def kendall_tau(x: Any, y: Any, *, alternative: str = "two-sided") -> tuple[float, float]:
    """Kendall's tau-b of ``(x, y)`` and its p-value from the normal approximation with
    tie corrections. ``alternative``: "two-sided", "greater" (tau > 0: y increases with
    x) or "less". NaN pairs are dropped; fewer than 2 pairs, or a constant series, give
    NaN. O(n^2) memory-light pair loop: for the few hundred points of a CCM curve."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative={alternative!r} is invalid; allowed: 'two-sided', "
                         "'greater', 'less'")
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.size != y.size:
        raise ValueError(f"x and y must be equally long, got {x.size} and {y.size}")
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = x.size
    if n < 2:
        return math.nan, math.nan
    s = 0.0  # concordant minus discordant pairs
    for i in range(n - 1):
        s += float((np.sign(x[i + 1:] - x[i]) * np.sign(y[i + 1:] - y[i])).sum())
    n0 = n * (n - 1) / 2
    xt, x0, x1 = _tie_sums(x)
    yt, y0, y1 = _tie_sums(y)
    den = math.sqrt((n0 - xt) * (n0 - yt))
    if den == 0:
        return math.nan, math.nan
    tau = s / den
    m = n * (n - 1.0)
    var = (m * (2.0 * n + 5.0) - x1 - y1) / 18.0 + 2.0 * xt * yt / m
    if n > 2:
        var += x0 * y0 / (9.0 * m * (n - 2.0))
    if var <= 0:
        return tau, math.nan
    z = s / math.sqrt(var)
    if alternative == "two-sided":
        p = math.erfc(abs(z) / math.sqrt(2.0))
    elif alternative == "greater":
        p = 0.5 * math.erfc(z / math.sqrt(2.0))
    else:
        p = 0.5 * math.erfc(-z / math.sqrt(2.0))
    return float(tau), float(min(1.0, p))


def convergence_fit(L: Any, rho: Any, n_grid: int = 400) -> tuple[float, float, float]:
    """Least-squares fit of ``rho(L) = rho_inf (1 - exp(-gamma L))``: ``(rho_inf, gamma,
    rmse)``. gamma is searched on a log grid of ``n_grid`` values spanning 0.01 / max(L)
    to 100 / min(L) (rho_inf is linear: closed form for each gamma, kept within [-1, 1],
    the range of a correlation -- a skill still rising linearly at the largest library
    would otherwise be fitted by a tiny gamma and a rho_inf far above 1); NaN with fewer
    than two finite points."""
    L = np.asarray(L, dtype=np.float64).reshape(-1)
    r = np.asarray(rho, dtype=np.float64).reshape(-1)
    ok = np.isfinite(L) & np.isfinite(r) & (L > 0)
    L, r = L[ok], r[ok]
    if L.size < 2:
        return math.nan, math.nan, math.nan
    g = np.geomspace(0.01 / L.max(), 100.0 / L.min(), n_grid)
    f = 1.0 - np.exp(-g[:, None] * L[None, :])  # (grid, points)
    a = np.clip((f @ r) / (f * f).sum(axis=1), -1.0, 1.0)  # convex in a: the clip is exact
    sse = ((a[:, None] * f - r[None, :]) ** 2).sum(axis=1)
    b = int(np.argmin(sse))
    return float(a[b]), float(g[b]), float(math.sqrt(sse[b] / L.size))


def bh_adjust(p: Any) -> np.ndarray:
    """Benjamini--Hochberg adjusted p-values (same shape; NaN stays NaN and is not
    counted among the tests): ``q_(i) = min_{j >= i} p_(j) m / j``, capped at 1. Rejecting
    ``q <= alpha`` controls the false discovery rate at ``alpha`` for independent or
    positively dependent tests."""
    p = np.asarray(p, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    flat = p.reshape(-1)
    ok = np.flatnonzero(np.isfinite(flat))
    m = ok.size
    if m == 0:
        return q
    order = ok[np.argsort(flat[ok], kind="stable")]
    ranked = flat[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    qf = q.reshape(-1)
    qf[order] = np.minimum(ranked, 1.0)
    return qf.reshape(p.shape)
