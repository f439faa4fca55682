"""``ivf`` and ``hnsw``: approximate k-NN by faiss (CPU) on the explicitly embedded vectors.

* ``ivf`` (IndexIVFFlat): k-means splits the library into ``nlist`` cells; a
  query scans the ``nprobe`` nearest cells. Defaults: ``nlist = clamp(sqrt(nl),
  1, nl // 39)`` (faiss wants >= 39 training points per cell) and ``nprobe``
  chosen so Simplex MAPE stays within 1% of exact (see ``bench/bench_knn_backends.py``).
* ``hnsw`` (IndexHNSWFlat): a navigable small-world graph of ``M`` links per
  node built with ``ef_construction``; a query explores ``ef_search``
  candidates (raised to at least the number of neighbours asked for).

Distances returned are Euclidean (faiss computes squared L2 in float32).
Exclusion radius / leave-one-out: extra neighbours are asked for and filtered
(:mod:`.base`), so an approximate result never contains an excluded point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import ANN_EXTRA, HostBackend


def _faiss(name: str):
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(f"knn_method={name!r} needs faiss, which is not installed: "
                          f"{ANN_EXTRA}") from exc
    return faiss


def _threads(faiss: Any, n: int | None) -> None:
    if n:
        faiss.omp_set_num_threads(int(n))


def default_nlist(nl: int) -> int:
    return int(max(1, min(round(4 * math.sqrt(nl)), nl // 39)))


class _FaissBackend(HostBackend):
    """What the faiss back-ends share: the faiss import and a search returning
    (int64 indices, Euclidean float64 distances)."""

    exact = False

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.faiss = _faiss(self.name)

    @staticmethod
    def _search(index: Any, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        d, i = index.search(np.ascontiguousarray(q, np.float32), c)
        return i.astype(np.int64), np.sqrt(np.maximum(d, 0), dtype=np.float64)


class IVFBackend(_FaissBackend):
    """faiss IndexIVFFlat; options ``nlist`` (None: sqrt rule), ``nprobe`` (None: 8 or more), ``threads``."""

    name = "ivf"

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {"nlist": None, "nprobe": None, "threads": None}

    def nprobe_for(self, nlist: int) -> int:
        p = self.options["nprobe"]
        if p is None:
            p = 8
        return int(min(max(1, p), nlist))

    def build(self, lib: np.ndarray, metric: str, train: np.ndarray | None = None) -> Any:
        faiss = self.faiss
        _threads(faiss, self.options["threads"])
        nl, E = lib.shape
        tr = lib if train is None else train
        nlist = self.options["nlist"] or default_nlist(min(nl, tr.shape[0]))
        nlist = int(max(1, min(nlist, tr.shape[0])))
        if self._cache is not None and self._cache[0] is tr and self._cache[1] == nlist:
            quant, index = self._cache[2], self._cache[3]
            index.reset()
        else:
            quant = faiss.IndexFlatL2(E)
            index = faiss.IndexIVFFlat(quant, E, nlist)
            index.cp.min_points_per_centroid = 1  # tiny libraries: no warning spam
            index.train(tr)
            if train is not None:  # keep the trained index for the next sampled library
                self._cache = (tr, nlist, quant, index)
        index.add(lib)
        index.nprobe = self.nprobe_for(nlist)
        return index

    _cache: tuple | None = None

    def query(self, index: Any, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        return self._search(index, q, c)


class HNSWBackend(_FaissBackend):
    """faiss IndexHNSWFlat; options ``M`` (16), ``ef_construction`` (40), ``ef_search`` (64), ``threads``."""

    name = "hnsw"

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {"M": 16, "ef_construction": 40, "ef_search": 64, "threads": None}

    def build(self, lib: np.ndarray, metric: str, train: np.ndarray | None = None) -> Any:
        faiss = self.faiss
        _threads(faiss, self.options["threads"])
        index = faiss.IndexHNSWFlat(lib.shape[1], int(self.options["M"]))
        index.hnsw.efConstruction = int(self.options["ef_construction"])
        index.add(lib)
        return index

    def query(self, index: Any, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        index.hnsw.efSearch = int(max(self.options["ef_search"], c))
        return self._search(index, q, c)
