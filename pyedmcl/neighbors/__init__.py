"""k-NN methods (exact OpenCL kernel, k-d tree, faiss IVF / HNSW) and ``auto``.

The public option is ``knn_method=`` (a name of :data:`CHOICES`); each method is a
neighbour back-end class here, :class:`~.base.NeighborBackend` (the name kept in code and
in the tuning family ``knn_backend``; docs/design.md, "Vocabulary"). One interface serves
Simplex, CCM and the all-to-all maps. Integration point for the EDM functions::

    nb = resolve_backend(knn_method, be, L=n_lib, E=E, nq=n_query, k=knn,
                         options=knn_options)
    table = nb.device_table(be, x_dev, n, E=..., tau=..., k=..., qpts=..., lpts=...,
                            radius=..., real=...)   # same signature as primitives.knn.knn_device
    nb.info  # NeighborInfo: back-end used, expected recall, where auto's choice came from
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._deprecation import renamed_keywords
from .base import BACKENDS, CHOICES, NeighborBackend, NeighborInfo

__all__ = ["BACKENDS", "CHOICES", "NeighborBackend", "NeighborInfo", "KnnSearchResult",
           "neighbor_backend", "resolve_backend", "knn_device", "knn_search"]


def _classes() -> dict[str, type[NeighborBackend]]:
    from .exact import ExactBackend
    from .faiss_backends import HNSWBackend, IVFBackend
    from .kdtree import KDTreeBackend

    return {c.name: c for c in (ExactBackend, KDTreeBackend, IVFBackend, HNSWBackend)}


def check_backend_name(name: Any) -> str:
    if not isinstance(name, str) or name.lower() not in CHOICES:
        raise ValueError(f"knn_method={name!r} is not supported; allowed: {', '.join(CHOICES)}")
    return name.lower()


def neighbor_backend(name: str, **options: Any) -> NeighborBackend:
    """A concrete back-end by name with hyperparameters (``auto`` is resolved by :func:`resolve_backend`)."""
    name = check_backend_name(name)
    if name == "auto":
        raise ValueError("knn_method='auto' needs the problem size: use resolve_backend()")
    return _classes()[name](**options)


def resolve_backend(knn_backend: str | NeighborBackend, be: Any, *, L: int, E: int,
                    nq: int | None = None, k: int | None = None,
                    options: dict[str, Any] | None = None, shape: str = "simplex",
                    libraries: int = 1) -> NeighborBackend:
    """The back-end to use for a library of ``L`` points in dimension ``E`` on ``be``'s device.

    ``knn_backend`` is a name from :data:`CHOICES` or a ready back-end instance.
    ``auto`` consults the tuning database (:mod:`.auto`) for the workload ``shape``
    (``"simplex"``, or ``"ccm"`` with ``libraries`` sampled libraries). ``options`` are the
    back-end's hyperparameters (for ``auto``: keyed by back-end name, e.g.
    ``{"hnsw": {"ef_search": 128}}``, or flat for whichever is chosen).
    """
    if isinstance(knn_backend, NeighborBackend):
        return knn_backend
    name = check_backend_name(knn_backend)
    options = dict(options or {})
    if name != "auto":
        nb = neighbor_backend(name, **options)
        if not nb.exact and not options:  # defaults: report the recall measured for them
            from .auto import expected_recall

            nb.info.expected_recall = expected_recall(be.info, name, L=L, E=E)
        return nb
    from .auto import choose

    ch = choose(be.info, L=L, E=E, nq=nq, k=k, shape=shape, libraries=libraries)
    per = options.get(ch.backend) if isinstance(options.get(ch.backend), dict) else None
    if per is None:
        per = {kk: v for kk, v in options.items() if kk not in CHOICES}
        per = {kk: v for kk, v in per.items() if kk in _classes()[ch.backend].defaults()}
    nb = neighbor_backend(ch.backend, **per)
    nb.info.requested = "auto"
    nb.info.source = ch.source
    if not nb.exact:
        nb.info.expected_recall = ch.expected_recall
    return nb


def knn_device(be: Any, x_dev: Any, n: int, *, E: int, tau: int, k: int, qpts: np.ndarray,
               lpts: np.ndarray, radius: int, metric: str = "euclidean", real: str = "float",
               params: Any = None, q_dev: Any = None, knn_backend: str = "exact",
               knn_options: dict[str, Any] | None = None) -> Any:
    """Drop-in for :func:`pyedmcl.primitives.knn.knn_device` with a ``knn_backend`` choice.

    The returned :class:`~pyedmcl.primitives.knn.DeviceKnn` carries ``.neighbors``
    (:class:`NeighborInfo`).
    """
    lp = np.atleast_2d(lpts)
    nb = resolve_backend(knn_backend, be, L=lp.shape[1], E=E, nq=int(np.size(qpts)), k=k,
                         options=knn_options)
    t = nb.device_table(be, x_dev, n, E=E, tau=tau, k=k, qpts=qpts, lpts=lpts, radius=radius,
                        metric=metric, real=real, params=params, q_dev=q_dev)
    t.neighbors = nb.info
    return t


class KnnSearchResult:
    """``indices (nq, k)`` kernel points (-1 none), ``distances``, and ``info`` (:class:`NeighborInfo`)."""

    def __init__(self, indices: np.ndarray, distances: np.ndarray, info: NeighborInfo):
        self.indices, self.distances, self.info = indices, distances, info

    def __iter__(self):
        return iter((self.indices, self.distances))


@renamed_keywords(k="knn", knn_backend="knn_method")
def knn_search(x: Any, *, E: int, tau: int = 1, knn: int | None = None, lib_points: Any = None,
               query_points: Any = None, exclusion_radius: int = 0, metric: str = "euclidean",
               knn_method: str = "auto", knn_options: dict[str, Any] | None = None,
               dtype: Any = "float32", device: Any = None, backend: str | None = None
               ) -> KnnSearchResult:
    """All-k-NN table of the time-delay embedding of ``x`` by any k-NN method.

    Same conventions as :func:`pyedmcl.primitives.knn.knn_table` (kernel points, exclusion
    ``|p - l| <= exclusion_radius``, -1 disables it; ties by distance then
    ``|p - l|``). ``knn`` (neighbours per query) defaults to ``E + 1`` and must not
    exceed the library. ``knn_method``: a name of :data:`CHOICES` ("auto": picked per
    device and problem size, :mod:`pyedmcl.neighbors.auto`); ``knn_options`` its options.
    """
    from clkernels import get_backend

    from ..primitives.knn import centre, check_points
    from ..validation import check_dtype, check_int, check_metric

    be = get_backend(device, backend)
    dt = check_dtype(dtype, be.info)
    metric = check_metric(metric)
    s, E, tau, lp, qp = check_points(x, E, tau, lib_points, query_points)
    k = E + 1 if knn is None else check_int(knn, "knn", 1)
    if k > lp.size:
        raise ValueError(f"knn={k} is larger than the library ({lp.size} points); "
                         f"allowed: 1 <= knn <= {lp.size}")
    exclusion_radius = check_int(exclusion_radius, "exclusion_radius", -1)
    s, dt = centre(s, dt, be.info.fp64, "knn_search")  # float32: offset-free distances
    real = "double" if dt == np.float64 else "float"
    xd = be.to_device(s.astype(dt))
    t = knn_device(be, xd, s.size, E=E, tau=tau, k=k, qpts=qp.astype(np.int32),
                   lpts=lp.astype(np.int32), radius=exclusion_radius, metric=metric, real=real,
                   knn_backend=knn_method, knn_options=knn_options)
    return KnnSearchResult(be.to_host(t.idx)[0], be.to_host(t.dist)[0], t.neighbors)
