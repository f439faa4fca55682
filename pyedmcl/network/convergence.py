"""Convergence of a cross map: does the skill rise with the library size?

Convergence is what tells cross-map causation from correlation (Sugihara et al. 2012,
Science 338:496): a driver's imprint on a manifold is resolved better the denser the
library, so the skill of a true link rises with the library size, while a skill carried
by synchrony or a shared driver (series that are nearly functions of each other) is
already reached by a small library. The test is the one the rEDM documentation and
Chang et al. 2020 (Global Change Biology 26:6413) apply: Fisher's z test of
``rho(full library) - rho(small library)``, the small library's skill the mean over
random libraries of ``size`` rows, its z variance ``1 / (size - 3)``.

:func:`subsample_skill` draws the small libraries from a :class:`~.crossmap.LibraryMap`:
every library row predicts from its k nearest rows among a random sample of ``size``
admissible rows (itself and its exclusion radius left out), weighted by pyEDM's CCM
rule, in float64.

:func:`kendall_convergence` is the alternative rule (``causal_network(...,
convergence="kendall")``): the mean skill at a ladder of library sizes (:func:`ladder`)
and the full library's, and Kendall's tau between library size and skill with its
one-sided p-value (``scipy.stats.kendalltau``, ``alternative="greater"``); the edge
converges where tau > 0 and p <= alpha. It asks for a monotone rise over the whole
range, not only between its ends.
"""

from __future__ import annotations

import math

import numpy as np

from .crossmap import LibraryMap, rho_rows

#: random libraries averaged for the small library's skill
SAMPLES = 32
#: distance entries computed at once (samples x rows x library rows)
CHUNK = 1 << 22


def default_size(rows: int, k: int) -> int:
    """The small library: a twentieth of the library rows, at least k + 4 rows."""
    return max(k + 4, int(math.ceil(rows / 20)))


def _vectors(lm: LibraryMap) -> np.ndarray:
    """``(U, E)`` delay vectors of the library's rows (float64)."""
    x = lm._x.astype(np.float64)
    return np.stack([x[lm.times - j * lm.tau] for j in range(lm.E)], axis=1)


def subsample_skill(lm: LibraryMap, Y: np.ndarray, shift: int, size: int,
                    samples: int, rng: np.random.Generator) -> np.ndarray:
    """``(samples, nt)`` skill of ``samples`` random libraries of ``size`` rows
    cross-mapping each target row of ``Y`` ``(nt, n_target)`` at lag ``shift``."""
    Y2 = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    nt, n = Y2.shape
    t = lm.times + shift
    rows = np.flatnonzero((t >= 0) & (t < n))  # queries and library rows alike
    if rows.size < size:
        raise ValueError(f"size={size} exceeds the {rows.size} rows this lag leaves")
    V = _vectors(lm)[rows]
    pts = lm.times[rows]
    tr = t[rows]
    obs = Y2[:, tr]  # (nt, U)
    k = min(lm.k, size - 1)
    libs = np.stack([rng.choice(rows.size, size, replace=False) for _ in range(samples)])
    out = np.empty((samples, nt))
    step = max(1, CHUNK // (rows.size * size))
    for c in range(0, samples, step):  # a few samples' (U, size) distance blocks at once
        lib = libs[c:c + step]  # (s, L)
        d2 = np.zeros((len(lib), rows.size, size))  # (s, U, L), one coordinate at a time
        for j in range(V.shape[1]):
            d2 += (V[None, :, None, j] - V[lib, j][:, None, :]) ** 2
        d2[np.abs(pts[None, :, None] - pts[lib][:, None, :]) <= lm.radius] = np.inf
        near = np.argpartition(d2, k - 1, axis=2)[..., :k]
        dk = np.take_along_axis(d2, near, axis=2)
        o = np.argsort(dk, axis=2)
        near = np.take_along_axis(near, o, axis=2)
        dk = np.sqrt(np.take_along_axis(dk, o, axis=2))
        d0 = dk[..., :1]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            w = np.where(d0 > 0, np.exp(-dk / np.where(d0 > 0, d0, 1.0)), (dk == 0) * 1.0)
            w = w / w.sum(axis=2, keepdims=True)
        src = tr[np.take_along_axis(lib[:, None, :], near, 2)]  # (s, U, k) target times
        pred = np.einsum("tsuk,suk->stu", Y2[:, src], w)  # (s, nt, U)
        out[c:c + step] = rho_rows(pred.reshape(-1, pred.shape[2]),
                                   np.tile(obs, (len(lib), 1))).reshape(len(lib), nt)
    return out


def convergence_p(rho_full: np.ndarray, rho_small: np.ndarray, size: int,
                  full: int) -> np.ndarray:
    """One-sided p-values of Fisher's z test that ``rho_full`` (a library of ``full``
    rows) exceeds ``rho_small`` (of ``size`` rows); 1 where the full skill is not
    positive or either is NaN."""
    a = np.arctanh(np.clip(np.asarray(rho_full, dtype=np.float64), -0.9999, 0.9999))
    b = np.arctanh(np.clip(np.asarray(rho_small, dtype=np.float64), -0.9999, 0.9999))
    z = (a - b) / math.sqrt(1.0 / (size - 3) + 1.0 / (full - 3))
    p = 0.5 * np.vectorize(math.erfc)(z / math.sqrt(2.0))
    bad = ~np.isfinite(z) | ~(np.asarray(rho_full, dtype=np.float64) > 0)
    return np.where(bad, 1.0, p)


#: library sizes of the Kendall rule's ladder (the full library is one more point)
LADDER = 5


def ladder(size: int, rows: int) -> np.ndarray:
    """``LADDER`` library sizes, geometric from ``size`` to half the ``rows`` (distinct,
    increasing; fewer where the range is narrow)."""
    top = max(size, rows // 2)
    return np.unique(np.geomspace(size, top, LADDER).round().astype(np.int64))


def kendall_convergence(lm: LibraryMap, Y: np.ndarray, shift: int, sizes: np.ndarray,
                        samples: int, rng: np.random.Generator, rho_full: np.ndarray,
                        rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Kendall's tau between library size and mean skill (``sizes``, then the full
    library's ``rows`` with ``rho_full``) per target row of ``Y``, and its one-sided
    p-value (a rise); NaN tau and p = 1 where a skill is NaN."""
    from scipy.stats import kendalltau

    Y2 = np.atleast_2d(Y)
    curve = np.empty((Y2.shape[0], sizes.size + 1))
    for c, size in enumerate(sizes):
        with np.errstate(invalid="ignore"):
            curve[:, c] = np.nanmean(subsample_skill(lm, Y2, shift, int(size), samples, rng),
                                     axis=0)
    curve[:, -1] = rho_full
    x = np.append(sizes, rows)
    tau, p = np.full(curve.shape[0], np.nan), np.ones(curve.shape[0])
    for e, row in enumerate(curve):
        if np.isfinite(row).all():
            r = kendalltau(x, row, alternative="greater")
            tau[e], p[e] = float(r.statistic), float(r.pvalue)
    return tau, p
