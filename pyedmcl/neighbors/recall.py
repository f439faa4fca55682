"""Recall of a k-NN table against the exact one, and the skill numbers the bench reports.

Recall (the kEDM paper's definition): the fraction of the true k nearest
neighbours that an approximate table contains, averaged over queries. Measured
on demand with :func:`measure_recall` (a sample of queries against the exact
kernel), so its cost is bounded even for long series.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._deprecation import renamed_keywords


def recall(approx_idx: np.ndarray, exact_idx: np.ndarray) -> float:
    """Mean over queries of ``|found ∩ true| / |true|`` (``-1`` entries are "none")."""
    a = np.asarray(approx_idx)
    e = np.asarray(exact_idx)
    a = a.reshape(-1, a.shape[-1])
    e = e.reshape(-1, e.shape[-1])
    if a.shape[0] != e.shape[0]:
        raise ValueError(f"tables have {a.shape[0]} and {e.shape[0]} queries; they must match")
    if e.shape[0] == 0:
        return 1.0
    per = np.empty(e.shape[0])
    step = max(1, (1 << 22) // (a.shape[1] * e.shape[1]))
    for s in range(0, e.shape[0], step):
        ee, aa = e[s:s + step], a[s:s + step]
        valid = ee >= 0
        hit = (ee[:, :, None] == aa[:, None, :]).any(axis=2) & valid
        tot = valid.sum(axis=1)
        per[s:s + step] = np.where(tot > 0, hit.sum(axis=1) / np.maximum(tot, 1), 1.0)
    return float(per.mean())


@renamed_keywords(k="knn", knn_backend="knn_method")
def measure_recall(x: Any, *, E: int, tau: int = 1, knn: int | None = None,
                   knn_method: str = "hnsw", knn_options: dict[str, Any] | None = None,
                   exclusion_radius: int = 0, sample: int = 2000, seed: int = 0,
                   dtype: Any = "float32", device: Any = None, backend: str | None = None
                   ) -> float:
    """Recall of ``knn_method`` against the exact kernel on ``sample`` random queries of ``x``
    (both searches in ``dtype``, float32 or float64)."""
    from ..primitives.knn import check_points
    from ..validation import check_int, check_seed
    from . import knn_search

    s, E, tau, _, _ = check_points(x, E, tau, None, None)  # tau: |tau|, as the k-NN uses
    npts = s.size - (E - 1) * tau
    sample = check_int(sample, "sample", 1)
    rng = np.random.default_rng(check_seed(seed))
    q = np.sort(rng.choice(npts, size=min(sample, npts), replace=False))
    kw = dict(E=E, tau=tau, knn=knn, query_points=q, exclusion_radius=exclusion_radius,
              dtype=dtype, device=device, backend=backend)
    a = knn_search(s, knn_method=knn_method, knn_options=knn_options, **kw)
    e = knn_search(s, knn_method="exact", **kw)
    return recall(a.indices, e.indices)


def simplex_host(idx: np.ndarray, dist: np.ndarray, y: np.ndarray, shift: int) -> np.ndarray:
    """pyEDM Simplex predictions from a host table: weights ``exp(-d / max(d_min, 1e-6))``.

    Library point ``l`` contributes ``y[l + shift]``; rows without neighbours give NaN.
    """
    ok = idx >= 0
    d = np.where(ok, dist, np.inf).astype(np.float64)
    dmin = np.maximum(d[:, :1], 1e-6)
    w = np.where(ok, np.exp(-d / dmin), 0.0)
    vals = np.where(ok, y[np.clip(idx + shift, 0, y.size - 1)], 0.0)
    sw = w.sum(axis=1)
    return np.where(sw > 0, (w * vals).sum(axis=1) / np.where(sw > 0, sw, 1), np.nan)


def mape(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Mean absolute percentage error over pairs where both are finite and observed != 0."""
    p, o = np.asarray(predicted, float), np.asarray(observed, float)
    ok = np.isfinite(p) & np.isfinite(o) & (o != 0)
    return float(np.mean(np.abs((p[ok] - o[ok]) / o[ok])))
