"""Recurrence networks: the recurrence matrix as the adjacency matrix of a graph.

As pyunicorn's ``RecurrenceNetwork``: ``A = R - I`` (no self-loops; undirected, the
fixed-radius matrix is symmetric), decided with the same rule as :func:`pyedmcl.rqa.rqa`
(:mod:`pyedmcl.rqa.threshold`). Measures (pyunicorn's / igraph's definitions):

* ``degree`` ``k_i = sum_j A_ij``; ``link_density = sum_i k_i / (N (N - 1))``;
* ``local_clustering`` ``C_i = (A^3)_ii / (k_i (k_i - 1))`` (0 where ``k_i < 2``);
  ``global_clustering`` = mean of ``C_i`` (Watts-Strogatz, Newman's C_2);
* ``transitivity`` = ``trace(A^3) / sum_i k_i (k_i - 1)`` (3 x triangles / connected
  triples, Newman's C_1; nan without triples);
* ``average_path_length``: mean shortest path (unit links) over the ordered pairs
  ``i != j`` joined by a path (igraph's ``unconn=True``).

Two paths give the same integer counts (degrees, ``(A^3)_ii``, sums of path lengths),
hence the same measures bit for bit:

* ``method="device"`` (default; :mod:`pyedmcl.rqa.network_device`, kernel family
  ``rqa_network``): a bit-packed adjacency built on the device (``N^2 / 8`` bytes, one
  allocation: the limit on N), triangles by popcounts of row ANDs (``links * N / 32``
  word operations), path lengths by one frontier-bitset BFS per node (``N^3 / 32``:
  computed by default for ``N <= DEVICE_PATH_MAX_N`` on a GPU, ``PATH_MAX_N``
  elsewhere);
* ``method="host"``, the reference: the adjacency built in blocks of rows with the line
  kernels' arithmetic (:func:`pyedmcl.rqa.distances.kernel_distances`, working precision, fma
  sums emulated under ``"squared"``) into a sparse matrix (memory ~ ``RR * N^2``
  links), triangles by sparse products, path lengths by breadth-first search (scipy,
  ``O(N * links)``, by default for ``N <= PATH_MAX_N``). Needs scipy
  (``pip install 'pyedmcl[network]'``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..constant_series import RQA_WHY, checks_constant

#: largest N whose average path length is computed unless asked for explicitly (host, and
#: the device path on CPUs)
PATH_MAX_N = 5000
#: the same on a GPU (device path: N^3 / 32 word operations)
DEVICE_PATH_MAX_N = 20000
#: cells per host block when building the adjacency
BLOCK_CELLS = 1 << 22


@dataclass
class RecurrenceNetworkResult:
    """Network measures of one recurrence network (arrays per node)."""

    degree: np.ndarray
    link_density: float
    local_clustering: np.ndarray
    global_clustering: float
    transitivity: float
    average_path_length: float
    n_nodes: int
    n_links: int
    radius: float
    settings: dict[str, Any] = field(default_factory=dict)
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)

    #: the input's time axis where it had labels (:class:`pyedmcl.labels.Labels`)
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "time"

    def as_dataframe(self):
        """One row per node (embedded point): ``degree`` and ``local_clustering``, indexed
        by the node's time, that of its latest sample (point ``k`` spans samples
        ``k .. k + (E - 1) tau``): the input's time labels, else the 0-based rows."""
        import pandas as pd

        from ..labels import Labels

        span = (int(self.settings.get("E", 1)) - 1) * int(self.settings.get("tau", 1))
        index = (self.labels or Labels()).at(np.arange(self.n_nodes) + span)
        return pd.DataFrame({"degree": np.asarray(self.degree),
                             "local_clustering": np.asarray(self.local_clustering)},
                            index=index)

    def as_dict(self) -> dict[str, Any]:
        return {"link_density": self.link_density, "global_clustering": self.global_clustering,
                "transitivity": self.transitivity,
                "average_path_length": self.average_path_length, "n_nodes": self.n_nodes,
                "n_links": self.n_links, "radius": self.radius, "settings": self.settings}


def adjacency(s: np.ndarray, E: int, tau: int, thr: float, metric: str, dtype: Any,
              rule: str = "distance", exact: Any = None) -> Any:
    """Sparse (CSR, bool) ``A = R - I`` with ``R = d < thr`` (``d`` as the kernels compute
    it in ``dtype``, squared for Euclidean; summed by fma under ``rule="squared"``).
    ``exact`` (:class:`pyedmcl.rqa.exact.Exact`): cells within its bound of ``thr`` are
    decided from the raw float64 series, as the EXACT kernels decide them."""
    import scipy.sparse as sp

    from .distances import kernel_distances
    from .distances import points as _points

    pts = _points(np.asarray(s, dtype=dtype), E, tau)
    raw = None if exact is None else _points(exact.x, E, tau)
    n = pts.shape[0]
    t = np.dtype(dtype).type(thr)
    step = max(1, BLOCK_CELLS // n)
    blocks = []
    for r0 in range(0, n, step):
        acc = kernel_distances(pts[r0: r0 + step], pts, metric, fma=(rule == "squared"))
        rec = acc < t
        if raw is not None:
            near = np.abs((acc - t).astype(acc.dtype)) <= np.float32(exact.b)
            if near.any():
                d64 = kernel_distances(raw[r0: r0 + step], raw, metric, fma=(rule == "squared"))
                rec[near] = d64[near] < exact.thr64
        rows = np.arange(r0, min(r0 + step, n))
        rec[rows - r0, rows] = False  # no self-loops
        blocks.append(sp.csr_matrix(rec))
    return sp.vstack(blocks, format="csr")


def network_measures(A: Any, paths: bool) -> dict[str, Any]:
    """Every measure of the module docstring from a symmetric sparse adjacency (host)."""
    from scipy.sparse.csgraph import shortest_path

    n = A.shape[0]
    Ai = A.astype(np.int64)
    k = np.asarray(Ai.sum(axis=1)).ravel()
    tri2 = np.asarray((Ai @ Ai).multiply(Ai).sum(axis=1)).ravel()  # (A^3)_ii
    total, count = None, None
    if paths and n > 1:
        total, count = 0, 0
        step = max(1, BLOCK_CELLS // n)
        for r0 in range(0, n, step):
            d = shortest_path(A, unweighted=True, directed=False,
                              indices=np.arange(r0, min(r0 + step, n)))
            ok = np.isfinite(d) & (d > 0)
            total += int(d[ok].sum())
            count += int(ok.sum())
    return measures_from_counts(k, tri2, total, count)


def measures_from_counts(k: np.ndarray, tri2: np.ndarray, path_total: int | None,
                         path_count: int | None) -> dict[str, Any]:
    """The measures from the integer counts: degrees ``k``, ``tri2 = (A^3)_ii``, and the
    sum and number of the finite shortest-path lengths between ordered pairs ``i != j``
    (``None``: not computed, average path length nan)."""
    n = k.size
    k = np.asarray(k, dtype=np.int64)
    tri2 = np.asarray(tri2, dtype=np.int64)
    pairs = k * (k - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        local = np.where(pairs > 0, tri2 / np.where(pairs > 0, pairs, 1), 0.0)
    trans = float(tri2.sum() / pairs.sum()) if pairs.sum() > 0 else float("nan")
    apl = float(path_total) / path_count if path_count else float("nan")
    return {"degree": k, "link_density": float(k.sum()) / (n * (n - 1)) if n > 1 else float("nan"),
            "local_clustering": local, "global_clustering": float(local.mean()),
            "transitivity": trans, "average_path_length": apl, "n_links": int(k.sum()) // 2}


METHODS = ("device", "host")


@checks_constant("recurrence_network", ("x",), RQA_WHY, multi=False)
def recurrence_network(x: Any, *, E: int = 1, tau: int = 1, radius: float | None = None,
                       recurrence_rate: float | None = None, metric: str = "euclidean",
                       dtype: Any = "float32", device: Any = None, backend: str | None = None,
                       threshold_rule: str = "distance", path_lengths: bool | None = None,
                       method: str = "device") -> RecurrenceNetworkResult:
    """Recurrence network measures of one series (pyunicorn's ``RecurrenceNetwork``).

    ``radius`` or ``recurrence_rate`` as in :func:`pyedmcl.rqa.rqa` (same tie rule, same
    matrix without its main diagonal). ``method="device"`` (default) builds a bit-packed
    adjacency on ``device`` and counts degrees, triangles and (``path_lengths``)
    shortest paths there (:mod:`pyedmcl.rqa.network_device`): the packed matrix
    (``N^2 / 8`` bytes) must fit in one device allocation, and path lengths cost
    ``N^3 / 32`` word operations, so ``path_lengths`` defaults to ``N <=``
    :data:`DEVICE_PATH_MAX_N` on a GPU and ``N <=`` :data:`PATH_MAX_N` elsewhere.
    ``method="host"``: the reference path on the host (scipy; sparse products and BFS,
    ``N <= PATH_MAX_N`` for paths by default), the distances computed exactly as the
    kernels compute them. Both give the same integer counts, hence the same measures.
    """
    from ..validation import as_series, check_embedding, check_metric
    from .core import _backends_and_dtype, _check_E_tau, _resolve_thresholds, centred
    from .exact import for_run as exact_for_run
    from .threshold import check_threshold_rule

    if method not in METHODS:
        raise ValueError(f"method={method!r} is not supported; allowed: 'device' (the "
                         "OpenCL device, default) or 'host' (scipy, the reference)")
    if method == "host":
        try:
            import scipy  # noqa: F401
        except ImportError as exc:
            raise ModuleNotFoundError("recurrence networks on the host need scipy: pip "
                                      "install 'pyedmcl[network]' (or use method='device')"
                                      ) from exc
    s = as_series(x, "x")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    n = check_embedding(s.size, E, tau, "x")
    rule = check_threshold_rule(threshold_rule)
    bes, dt = _backends_and_dtype(device, None, backend, dtype)
    raw = s
    dt, (s,) = centred([s], ["x"], dt, bes, common=False, what="recurrence_network")
    th = _resolve_thresholds(radius, recurrence_rate, raw, None, E, tau, metric, dt, bes, rule)
    r, thr = th.radius, th.thr  # a rate's: the float64 path's (from the raw series)
    z = s.astype(dt)
    ex = exact_for_run(dt, (raw, raw), (z, z), r, metric, rule, E, thr, thr64=th.thr64)
    if path_lengths is None:
        gpu = method == "device" and bes[0].info.is_gpu
        paths = n <= (DEVICE_PATH_MAX_N if gpu else PATH_MAX_N)
    elif isinstance(path_lengths, bool | np.bool_):
        paths = bool(path_lengths)
    else:
        raise TypeError(f"path_lengths must be True, False or None (by the network's size), "
                        f"got {path_lengths!r}")
    if method == "device":
        from .network_device import device_counts

        c = device_counts(bes[0], z, E, tau, thr, metric, dt, rule, paths, exact=ex)
        m = measures_from_counts(c["degree"], c["tri2"], c["path_total"], c["path_count"])
    else:
        m = network_measures(adjacency(s, E, tau, thr, metric, dt, rule, exact=ex), paths)
    return RecurrenceNetworkResult(
        m["degree"], m["link_density"], m["local_clustering"], m["global_clustering"],
        m["transitivity"], m["average_path_length"], n, m["n_links"], r,
        dict(E=E, tau=tau, metric=metric, dtype=str(dt), threshold_rule=rule,
             recurrence_rate=recurrence_rate, method=method))
