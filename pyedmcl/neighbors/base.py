"""The neighbour back-end interface shared by Simplex, CCM and all-to-all maps.

A back-end answers one question: for each query point, its ``k`` nearest
library points of the time-delay embedding, skipping library points within the
exclusion radius (``|p - l| <= radius``; radius 0 is leave-one-out, < 0 none).
Points are *kernel points* (see :mod:`pyedmcl.primitives.ranges`): point ``j`` is the
window ``(x[j], x[j+tau], ..., x[j+(E-1)tau])``.

:meth:`NeighborBackend.device_table` has exactly the signature of
:func:`pyedmcl.primitives.knn.knn_device` and returns the same
:class:`~pyedmcl.primitives.knn.DeviceKnn` (idx ``(nbatch, nq, k)`` int32, -1 = none;
dist, +inf = none), so the lookup and skill kernels consume any back-end's table
unchanged. Host back-ends (k-d tree, faiss) embed the series explicitly, ask for
``k + (number of excluded library points)`` neighbours (an exact bound: at most
that many can be filtered away) and filter; results are ordered like the exact
kernel: distance, then ``|p - l|``, then ``l``. The exact host back-end (k-d tree)
returns the exact kernel's table itself, ties at the k-th place included: distances
recomputed in the kernel's arithmetic, the cut widened until it is untied.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from .._fma import job_fma
from ..fma_emulation import fma as fused

#: every concrete back-end name, and what ``knn_method=`` accepts
BACKENDS = ("exact", "kdtree", "ivf", "hnsw")
CHOICES = (*BACKENDS, "auto")
#: largest query x candidate block a host back-end holds at once (bounds memory)
MAX_BLOCK_ENTRIES = 1 << 23
ANN_EXTRA = 'pip install "pyedmcl[ann]"'


@dataclass
class NeighborInfo:
    """Which back-end produced a k-NN table and how much to trust it.

    ``expected_recall``: fraction of the true k nearest neighbours the back-end
    is expected to return (1.0 for exact ones; for approximate ones the value
    measured on Lorenz-63 data at tuning time, see :mod:`.auto`). ``source`` says
    where ``auto``'s choice came from (``"user"`` tuning DB, ``"shipped:LEVEL"``,
    ``"heuristic"``), or ``"requested"``.
    """

    backend: str
    requested: str
    expected_recall: float
    source: str = "requested"
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def windows(x: np.ndarray, points: np.ndarray, E: int, tau: int, dtype: Any = np.float32
            ) -> np.ndarray:
    """Explicit embedding ``(len(points), E)``: row ``i`` is the window at kernel point ``points[i]``."""
    pts = np.asarray(points, dtype=np.int64)
    return np.ascontiguousarray(x[pts[:, None] + abs(tau) * np.arange(E)], dtype=dtype)


def excluded_counts(qpts: np.ndarray, lpts: np.ndarray, radius: int) -> np.ndarray:
    """Per query, how many library points (``lpts`` ascending) fall inside its exclusion window."""
    if radius < 0:
        return np.zeros(qpts.size, np.int64)
    q = qpts.astype(np.int64)
    return (np.searchsorted(lpts, q + radius, side="right")
            - np.searchsorted(lpts, q - radius, side="left"))


def tie_key(p: np.ndarray, lp: np.ndarray) -> np.ndarray:
    """The exact kernel's tie order: ``|p - l|`` first, then the later point."""
    return 2 * np.abs(p - lp) + (lp > p)


def select_k(qpts: np.ndarray, lpts: np.ndarray, pos: np.ndarray, dist: np.ndarray, k: int,
             radius: int) -> tuple[np.ndarray, np.ndarray]:
    """From candidate library positions ``pos (m, c)`` (-1 = none) keep the k best admissible.

    Returns kernel-point indices ``(m, k)`` int32 (-1 = none) and distances (+inf = none).
    """
    m, c = pos.shape
    ok = pos >= 0
    lp = np.where(ok, lpts[np.clip(pos, 0, None)], -1).astype(np.int64)
    p = qpts.astype(np.int64)[:, None]
    if radius >= 0:
        ok &= np.abs(p - lp) > radius
    d = np.where(ok, dist, np.inf)
    key = np.where(ok, tie_key(p, lp), np.iinfo(np.int64).max)
    order = np.lexsort((key, d), axis=-1)[:, :k]
    rows = np.arange(m)[:, None]
    idx = np.where(ok[rows, order], lp[rows, order], -1).astype(np.int32)
    out_d = d[rows, order]
    if c < k:  # fewer candidates than k (tiny library): pad
        idx = np.pad(idx, ((0, 0), (0, k - c)), constant_values=-1)
        out_d = np.pad(out_d, ((0, 0), (0, k - c)), constant_values=np.inf)
    return idx, out_d


def kernel_distances(x: np.ndarray, qpts: np.ndarray, lpts: np.ndarray, E: int, tau: int,
                     metric: str, fma: bool = False) -> np.ndarray:
    """The exact kernel's comparison value between query point ``qpts[i]`` and library
    points ``lpts[i, j]`` (kernel points of the series ``x``), in ``x``'s dtype and the
    kernel's operation order: coordinates newest first (lag E-1 down to 0), one rounding
    per operation, no contraction (decisions 0002, 0007). Euclidean: the squared distance;
    ``fma``: each square added by a fused multiply-add, as the kernels' ``FMA=1`` (GPU
    jobs, :func:`pyedmcl._fma.job_fma`). Bit-identical to the kernels' values."""
    q = np.asarray(qpts, np.int64)[:, None]
    lp = np.asarray(lpts, np.int64)
    acc = np.zeros(lp.shape, x.dtype)
    for j in reversed(range(E)):
        d = x[lp + j * abs(tau)] - x[q + j * abs(tau)]
        if metric == "euclidean" and fma:
            acc = fused(d, d, acc)
        elif metric == "euclidean":
            acc += d * d
        elif metric == "manhattan":
            acc += np.abs(d)
        else:
            np.maximum(acc, np.abs(d), out=acc)
    return acc


def finish_distance(acc: np.ndarray, metric: str) -> np.ndarray:
    """The distance the kernels report from their comparison value (sqrt for euclidean,
    correctly rounded in the value's dtype as the kernels' sqrt, decision 0004)."""
    return np.sqrt(acc) if metric == "euclidean" else acc


def float32_distances(x: np.ndarray, idx: np.ndarray, qpts: np.ndarray, E: int, tau: int,
                      metric: str, fma: bool) -> np.ndarray:
    """float32 ``(..., nq, k)``: the float32 kernel's distances (bit for bit,
    :func:`kernel_distances` of the float32 series ``x``) from query point ``qpts[i]``
    to the table's points ``idx[..., i, :]`` (kernel points; -1 = none: inf)."""
    idx = np.asarray(idx)
    flat = idx.reshape(-1, idx.shape[-2], idx.shape[-1])
    out = np.empty(flat.shape, np.float32)
    for b in range(flat.shape[0]):
        acc = kernel_distances(x, qpts, np.maximum(flat[b], 0), E, tau, metric, fma)
        out[b] = np.where(flat[b] >= 0, finish_distance(acc, metric), np.inf)
    return out.reshape(idx.shape)


def rounding_margin(E: int, dtype: Any) -> float:
    """A relative bound, with room to spare (4x), on how far a distance over E coordinates
    computed in ``dtype`` (the kernel) and one computed in float64 (an index such as
    cKDTree, which may order its pruning differently) can each be from the true distance
    of the same points: E differences, E squares and E - 1 additions round once each."""
    u = float(np.finfo(dtype).eps) / 2 + float(np.finfo(np.float64).eps) / 2
    return 4.0 * (2 * E + 2) * u


class NeighborBackend(abc.ABC):
    """One k-NN algorithm. Hyperparameters are constructor keywords (see :attr:`options`)."""

    name: ClassVar[str]
    #: True when the back-end returns the exact k nearest neighbours (recall 1)
    exact: ClassVar[bool]
    metrics: ClassVar[tuple[str, ...]] = ("euclidean",)

    def __init__(self, **options: Any):
        unknown = set(options) - set(self.defaults())
        if unknown:
            raise ValueError(f"knn_options {sorted(unknown)} are not options of knn_method="
                             f"{self.name!r}; allowed: {sorted(self.defaults()) or 'none'}")
        self.options = {**self.defaults(), **options}
        self.info = NeighborInfo(self.name, self.name, 1.0 if self.exact else float("nan"),
                                 params=dict(self.options))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Hyperparameters and their defaults (``None``: derived from the library size)."""
        return {}

    def check_metric(self, metric: str) -> None:
        if metric not in self.metrics:
            raise ValueError(f"metric={metric!r} is not supported by knn_method={self.name!r}; "
                             f"allowed: {', '.join(self.metrics)}")

    @abc.abstractmethod
    def device_table(self, be: Any, x_dev: Any, n: int, *, E: int, tau: int, k: int,
                     qpts: np.ndarray, lpts: np.ndarray, radius: int, metric: str = "euclidean",
                     real: str = "float", params: Any = None, q_dev: Any = None,
                     l_dev: Any = None, near: int = 0) -> Any:
        """A :class:`~pyedmcl.primitives.knn.DeviceKnn` on ``be`` (signature of ``knn_device``;
        a table of exact entries throughout meets any ``near``)."""

    def search(self, x: np.ndarray, *, E: int, tau: int, k: int, qpts: np.ndarray,
               lpts: np.ndarray, radius: int, metric: str = "euclidean", device: Any = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Host arrays ``(nbatch, nq, k)``: indices (int32, -1 none) and distances."""
        from clkernels import get_backend

        be = get_backend(device)
        real = "double" if x.dtype == np.float64 and be.info.fp64 else "float"
        xd = be.to_device(np.ascontiguousarray(x, np.float64 if real == "double" else np.float32))
        t = self.device_table(be, xd, x.size, E=E, tau=tau, k=k, qpts=qpts, lpts=lpts,
                              radius=radius, metric=metric, real=real)
        return be.to_host(t.idx), be.to_host(t.dist)


class HostBackend(NeighborBackend):
    """A back-end that searches explicitly embedded vectors on the host.

    Subclasses implement :meth:`build` (an index over library vectors) and
    :meth:`query` (``c`` candidates per query: library positions, -1 = none, and
    Euclidean/metric distances); exclusion and tie order are handled here. An exact
    back-end's rows are the exact kernel's rows: the same neighbours, order and
    distances, ties included (:meth:`_kernel_order_rows`, decision 0059).
    """

    @abc.abstractmethod
    def build(self, lib: np.ndarray, metric: str, train: np.ndarray | None = None) -> Any:
        """An index over library vectors ``lib (nl, E)``."""

    @abc.abstractmethod
    def query(self, index: Any, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """``c`` nearest candidates of each row of ``q``: positions (-1 none), distances."""

    def vector_dtype(self, real: str) -> Any:
        return np.float32

    def search_host(self, x: np.ndarray, *, E: int, tau: int, k: int, qpts: np.ndarray,
                    lpts: np.ndarray, radius: int, metric: str = "euclidean", fma: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``(nbatch, nq, k)`` indices and distances from the host series ``x``; ``fma``:
        an exact back-end's distances in the arithmetic of kernels that fuse
        multiply-adds (:func:`kernel_distances`)."""
        self.check_metric(metric)
        lpts = np.atleast_2d(np.asarray(lpts, dtype=np.int64))
        qpts = np.asarray(qpts, dtype=np.int64)
        nbatch, nl = lpts.shape
        if k > nl:
            raise ValueError(f"k={k} is larger than the library ({nl} points); allowed: 1 <= k <= {nl}")
        vdt = self.vector_dtype("double" if x.dtype == np.float64 else "float")
        qv = windows(x, qpts, E, tau, vdt)
        train = None
        if nbatch > 1:  # one training set for every sampled library (CCM): all query points
            train = qv
        idx = np.empty((nbatch, qpts.size, k), np.int32)
        dist = np.empty((nbatch, qpts.size, k), np.float64)
        for b in range(nbatch):
            lp = np.sort(lpts[b])
            index = self.build(windows(x, lp, E, tau, vdt), metric, train)
            cnt = excluded_counts(qpts, lp, radius)
            need = np.minimum(k + cnt, nl)
            # group queries by their candidate count (most share the same one), in blocks
            for c in np.unique(need):
                rows = np.flatnonzero(need == c)
                step = max(1, MAX_BLOCK_ENTRIES // (int(c) + 1))
                for s in range(0, rows.size, step):
                    r = rows[s:s + step]
                    if self.exact:
                        idx[b, r], dist[b, r] = self._kernel_order_rows(
                            index, x, qv[r], qpts[r], lp, int(c), k, radius, E, tau, metric,
                            fma)
                        continue
                    pos, d = self.query(index, qv[r], int(c))
                    idx[b, r], dist[b, r] = select_k(qpts[r], lp, pos, d, k, radius)
        return idx, dist

    def _kernel_order_rows(self, index: Any, x: np.ndarray, qv: np.ndarray, qpts: np.ndarray,
                           lp: np.ndarray, c: int, k: int, radius: int, E: int, tau: int,
                           metric: str, fma: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The exact kernel's k-NN rows from an exact index: same set, order and distances.

        The index finds ``c + 1`` candidates (one more than can be excluded plus k); their
        distances are recomputed in the kernel's arithmetic (:func:`kernel_distances`) and
        ordered by the kernel's total order. A row is final when the index's last candidate
        is farther, beyond both arithmetics' rounding (:func:`rounding_margin`), than its
        k-th kept neighbour: then no point the index did not return can tie with or beat
        it in the kernel's arithmetic. Other rows (a tie, or too few admissible candidates,
        at the cut) ask for twice as many candidates, up to the whole library.
        """
        nl = lp.size
        m = qv.shape[0]
        out_i = np.empty((m, k), np.int32)
        out_d = np.empty((m, k), np.float64)
        margin = rounding_margin(E, x.dtype)
        pending = np.arange(m)
        cq = min(c + 1, nl)
        while pending.size:
            again = []
            step = max(1, MAX_BLOCK_ENTRIES // cq)  # bounded memory as cq grows
            for s in range(0, pending.size, step):
                rows = pending[s:s + step]
                pos, dtree = self.query(index, qv[rows], cq)
                acc = kernel_distances(x, qpts[rows], lp[np.clip(pos, 0, None)], E, tau, metric,
                                       fma)
                acc = np.where(pos >= 0, acc, np.inf)
                i, a = select_k(qpts[rows], lp, pos, acc, k, radius)
                d = finish_distance(a, metric)
                if cq >= nl:
                    done = np.ones(rows.size, bool)
                else:
                    done = dtree[:, -1] * (1.0 - margin) > d[:, -1]
                out_i[rows[done]], out_d[rows[done]] = i[done], d[done]
                again.append(rows[~done])
            pending = np.concatenate(again)
            cq = min(2 * cq, nl)
        return out_i, out_d

    def device_table(self, be: Any, x_dev: Any, n: int, *, E: int, tau: int, k: int,
                     qpts: np.ndarray, lpts: np.ndarray, radius: int, metric: str = "euclidean",
                     real: str = "float", params: Any = None, q_dev: Any = None,
                     l_dev: Any = None, reference: np.ndarray | None = None,
                     near: int = 0) -> Any:
        """The exact kernel's table on ``be`` from the host (see the base class; its
        entries are exact throughout, which meets any ``near``).
        ``reference``: the float64 call's series (a float32 call's ``x_dev`` is its
        standardised cast): an exact back-end then chooses the neighbours that call
        chooses (float32's roundings decide no tie) and reports their distances in the
        float32 kernel's arithmetic (:func:`float32_distances`)."""
        from ..primitives.knn import DeviceKnn

        x = np.asarray(be.to_host(x_dev))[:n]
        fma = job_fma([be.info])
        # the exact kernel's arithmetic on this device (its one-device FMA choice)
        if reference is not None and self.exact and x.dtype == np.float32:
            idx, _ = self.search_host(np.asarray(reference, np.float64), E=E, tau=tau, k=k,
                                      qpts=qpts, lpts=lpts, radius=radius, metric=metric,
                                      fma=fma)
            dist = float32_distances(x, idx, qpts, E, tau, metric, fma)
        else:
            idx, dist = self.search_host(x, E=E, tau=tau, k=k, qpts=qpts, lpts=lpts,
                                         radius=radius, metric=metric, fma=fma)
        dt = np.float64 if real == "double" else np.float32
        nbatch, nq, _ = idx.shape
        return DeviceKnn(be.to_device(idx), be.to_device(dist.astype(dt)), nbatch, nq, k)

    def search(self, x: np.ndarray, *, E: int, tau: int, k: int, qpts: np.ndarray,
               lpts: np.ndarray, radius: int, metric: str = "euclidean", device: Any = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """As the exact back-end's :meth:`NeighborBackend.search` on ``device`` (the
        default one if None): its rows and, for an exact index, its distances' bits."""
        from clkernels import get_backend

        return self.search_host(x, E=E, tau=tau, k=k, qpts=qpts, lpts=lpts, radius=radius,
                                metric=metric, fma=job_fma([get_backend(device).info]))
