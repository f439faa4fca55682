"""``kdtree``: exact k-NN by scipy's cKDTree on the explicitly embedded vectors.

A k-d tree prunes well in low dimension (the kEDM paper's fastest CPU back-end
for E = 1) and degrades towards brute force as E grows. It is exact: with
``eps=0`` (default) it returns the true k nearest neighbours, and the
exclusion filter asks for exactly enough extra candidates (see :mod:`.base`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ANN_EXTRA, HostBackend

_P = {"euclidean": 2.0, "maximum": np.inf, "manhattan": 1.0}


def _ckdtree():
    try:
        from scipy.spatial import cKDTree
    except ImportError as exc:
        raise ImportError(f"knn_method='kdtree' needs scipy, which is not installed: {ANN_EXTRA}"
                          ) from exc
    return cKDTree


class KDTreeBackend(HostBackend):
    """scipy.spatial.cKDTree; options: ``leafsize`` (16), ``eps`` (0 = exact), ``workers`` (-1)."""

    name = "kdtree"
    exact = True
    metrics = ("euclidean", "maximum", "manhattan")

    def __init__(self, **options: Any):
        super().__init__(**options)
        _ckdtree()
        if self.options["eps"] > 0:  # approximate mode: recall no longer guaranteed
            self.info.expected_recall = float("nan")

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {"leafsize": 16, "eps": 0.0, "workers": -1}

    def vector_dtype(self, real: str) -> Any:
        return np.float64 if real == "double" else np.float32

    def build(self, lib: np.ndarray, metric: str, train: np.ndarray | None = None) -> Any:
        tree = _ckdtree()(lib, leafsize=int(self.options["leafsize"]), compact_nodes=False,
                          balanced_tree=False)
        return tree, _P[metric], lib.shape[0]

    def query(self, index: Any, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        tree, p, nl = index
        d, i = tree.query(q, k=c, p=p, eps=float(self.options["eps"]),
                          workers=int(self.options["workers"]))
        d = np.asarray(d, np.float64).reshape(q.shape[0], c)
        i = np.asarray(i, np.int64).reshape(q.shape[0], c)
        i[i >= nl] = -1
        return i, d
