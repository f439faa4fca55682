"""The recurrence-network kernel family (``rqa_network/rqa_network.cl.mako``).

Three kernels over a bit-packed adjacency ``A = R - I`` (row ``i``: ``nw = ceil(n / 32)``
uint words, bit ``b`` of word ``w`` the cell ``(i, 32 w + b)``), decided as the line
kernels decide a cell (same sums, ``d < thr``):

* :func:`adjacency` writes the words of a tile of rows and adds each row's popcount to
  the degrees;
* :func:`triangles` gives ``(A^3)_ii = sum_{j in N(i)} popcount(row_i & row_j)`` per row
  (a work-group per row, words strided over its work-items);
* :func:`paths` runs one breadth-first search per source by frontier bitsets (a
  work-group per source: ``next = OR of the frontier's rows & ~visited``) and gives the
  sum of the distances to, and the number of, the nodes each source reaches.

The whole packed matrix stays on one device (``n * nw * 4`` bytes: 12.5 MB at
``n = 10^4``, 1.25 GB at ``10^5``). Not tunable (yet): work-groups of 128 work-items on
GPUs, 64 elsewhere (fewer where the device takes fewer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend

TEMPLATE = "rqa_network/rqa_network.cl.mako"


@dataclass(frozen=True)
class NetworkSpec:
    """What shapes the generated kernels: embedding, metric, precision, fma sums."""

    E: int
    tau: int
    metric: str
    real: str  # "float" | "double"
    fma: bool = False  # Euclidean squares summed by fma() (threshold_rule="squared")
    #: float32 with the near cells redone in double (EXACT, on devices with fp64)
    exact: bool = False

    @property
    def dtype(self) -> type:
        return np.float64 if self.real == "double" else np.float32

    def template_params(self, wg: int, lset: int = 0) -> dict[str, Any]:
        """``lset``: words of each BFS set in local memory (0: global scratch)."""
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "FMA": int(self.fma and self.metric == "euclidean"), "WG": wg, "LSET": lset}


def words(n: int) -> int:
    """uint words per packed row of ``n`` columns."""
    return -(-int(n) // 32)


def work_group(backend: Backend) -> int:
    """Work-items per work-group: 128 on GPUs, 64 elsewhere, a power of two the device
    takes (the kernels' reductions halve it) whose local lists (:func:`local_fixed`) use
    at most half the local memory."""
    info = backend.info
    cap = min(128 if info.is_gpu else 64, info.max_work_group_size, info.max_work_item_sizes[0])
    wg = 1 << (max(1, cap).bit_length() - 1)
    while wg > 1 and local_fixed(wg) > int(info.local_mem_bytes) // 2:
        wg //= 2
    return wg


def local_fixed(wg: int) -> int:
    """Local bytes of a work-group besides the BFS sets: a neighbour list of 32 entries
    per work-item, a reduction slot each, counters."""
    return 4 * 32 * wg + 8 * wg + 16


def exact_on(spec: NetworkSpec, backend: Backend) -> int:
    """EXACT template value: asked for, in float32, on a device with fp64."""
    return int(spec.exact and spec.real == "float" and bool(backend.info.fp64))


def _kernel(backend: Backend, spec: NetworkSpec, name: str, lset: int = 0) -> tuple[Any, int]:
    wg = work_group(backend)
    params = dict(spec.template_params(wg, lset), EXACT=exact_on(spec, backend))
    return backend.kernel(TEMPLATE, params, name), wg


def adjacency(backend: Backend, spec: NetworkSpec, x: Any, n: int, thr: float, *, r0: int,
              rows: int, adj: Any, deg: Any, exact: tuple | None = None) -> Any:
    """Enqueue rows ``r0 .. r0 + rows - 1`` of the packed adjacency of the ``n`` embedded
    points of device series ``x`` (the spec's dtype) into ``adj`` (``n * nw`` uint32)
    and add their degrees to ``deg`` (``n`` uint32, zeroed by the caller). ``exact``
    (EXACT, :func:`exact_on`): (raw float64 series on the device, thr64, bound)."""
    k, wg = _kernel(backend, spec, "rn_adjacency")
    nw = words(n)
    extra: tuple[Any, ...] = ()
    if exact_on(spec, backend):
        if exact is None:
            raise ValueError("an EXACT network spec needs exact= (raw series, thr64, bound)")
        extra = (exact[0], np.float64(exact[1]), np.float32(exact[2]))
    return backend.launch(k, (-(-nw // wg) * wg, int(rows)), (wg, 1), x, *extra, np.int32(n),
                          np.int32(nw), np.int32(r0), spec.dtype(thr), adj, deg)


def triangles(backend: Backend, spec: NetworkSpec, adj: Any, n: int, *, r0: int, rows: int,
              tri: Any) -> Any:
    """Enqueue ``tri[i] = (A^3)_ii`` (uint64) for rows ``r0 .. r0 + rows - 1``."""
    k, wg = _kernel(backend, spec, "rn_triangles")
    return backend.launch(k, (int(rows) * wg,), (wg,), adj, np.int32(words(n)), np.int32(r0),
                          tri)


def local_set_words(n: int) -> int:
    """Words of each BFS set sized at compile time: ``nw`` rounded up to 64 (one build per
    2,048 nodes of N)."""
    return -(-words(n) // 64) * 64


def local_sets_fit(backend: Backend, n: int) -> bool:
    """Whether a work-group's three sets of :func:`paths` fit in local memory beside its
    lists."""
    return (3 * local_set_words(n) * 4 + local_fixed(work_group(backend))
            <= int(backend.info.local_mem_bytes))


def paths(backend: Backend, spec: NetworkSpec, adj: Any, n: int, *, s0: int, sources: int,
          scratch: Any, total: Any, reached: Any) -> Any:
    """Enqueue breadth-first searches from sources ``s0 .. s0 + sources - 1``:
    ``total[s]`` (uint64) the sum of the distances to the nodes ``s`` reaches,
    ``reached[s]`` (uint32) their number. ``scratch``: ``sources * 3 * nw`` uint32 where
    the sets do not fit in local memory (:func:`local_sets_fit`), else any small array."""
    lset = local_set_words(n) if local_sets_fit(backend, n) else 0
    k, wg = _kernel(backend, spec, "rn_paths", lset)
    return backend.launch(k, (int(sources) * wg,), (wg,), adj, np.int32(words(n)),
                          np.int32(s0), scratch, total, reached)
