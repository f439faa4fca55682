"""Recurrence-network counts on one OpenCL device (the ``rqa_network`` kernel family).

The adjacency ``A = R - I`` is built on the device as bit-packed rows (``N^2 / 8``
bytes, kept there), decided exactly as :func:`pyedmcl.rqa.rqa` decides its cells (same
kernels' sums, ``fma()`` under ``threshold_rule="squared"``, one ``d < thr``). From it:
degrees, ``(A^3)_ii`` (``sum_{j in N(i)} popcount(row_i & row_j)``, ``O(links * N / 32)``
word operations) and, for the average path length, one breadth-first search per node by
frontier bitsets (``O(N^3 / 32)`` word operations: every node's row is ORed once per
source). Every count is an integer, so the measures equal the host path's
(:mod:`pyedmcl.rqa.network`) bit for bit.

Limits: the packed matrix must fit in one device allocation (``N`` up to ~1.8 x 10^5 on a
GPU allowing a 4 GiB buffer); path lengths cost ``N^3 / 32`` word operations, so seconds at
``N = 10^4`` and hours at ``10^5`` (see ``docs`` of :func:`recurrence_network`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend

from ..kernels import rqa_network as K

#: word operations per launch on a CPU (keeps launches short: Ctrl-C, other work)
WORK_PER_LAUNCH = 1 << 29
#: the same on a GPU (~10-100 ms there; a watchdog may stop launches of seconds)
GPU_WORK_PER_LAUNCH = 1 << 34


def _budget(be: Backend) -> int:
    return GPU_WORK_PER_LAUNCH if be.info.is_gpu else WORK_PER_LAUNCH


def _chunks(work: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``[a, b)`` whose summed ``work`` stays within ``budget`` (at
    least one item each)."""
    out, a, acc = [], 0, 0
    for i, w in enumerate(work.tolist()):
        if i > a and acc + w > budget:
            out.append((a, i))
            a, acc = i, 0
        acc += w
    if a < work.size:
        out.append((a, int(work.size)))
    return out


def device_counts(be: Backend, s: np.ndarray, E: int, tau: int, thr: float, metric: str,
                  dt: np.dtype, rule: str, paths: bool, exact: Any = None) -> dict[str, Any]:
    """Degrees, ``(A^3)_ii`` and (``paths``) the sum and number of finite shortest-path
    lengths over ordered pairs, for the series ``s`` (working values, ``dt``) embedded
    with ``E``, ``tau``, recurrent where the kernels' distance is ``< thr``. ``exact``
    (float32, :class:`pyedmcl.rqa.exact.Exact`): the cells near the threshold decided
    as the float64 path decides them."""
    spec = K.NetworkSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                         fma=(rule == "squared"), exact=exact is not None)
    ex = None
    if K.exact_on(spec, be):
        ex = (be.to_device(exact.x), exact.thr64, exact.b)
    elif spec.exact and spec.real == "float":
        from .exact import warn_no_fp64

        warn_no_fp64(be.info.name)
    n = s.size - (E - 1) * tau
    nw = K.words(n)
    be.check_alloc(n * nw, np.uint32)  # the packed matrix: one allocation, or a clear error
    x = be.to_device(np.ascontiguousarray(s, dtype=dt))
    adj = be.empty(n * nw, np.uint32)
    deg = be.zeros(n, np.uint32)
    budget = _budget(be)
    rows = max(1, budget // (nw * 32))  # 32 cells a word
    for r0 in range(0, n, rows):
        K.adjacency(be, spec, x, n, thr, r0=r0, rows=min(rows, n - r0), adj=adj, deg=deg,
                    exact=ex)
    k = be.to_host(deg).astype(np.int64)
    tri = be.empty(n, np.uint64)
    for a, b in _chunks((k + 1) * nw, budget):
        K.triangles(be, spec, adj, n, r0=a, rows=b - a, tri=tri)
    out: dict[str, Any] = {"degree": k, "tri2": be.to_host(tri).astype(np.int64),
                           "path_total": None, "path_count": None}
    if paths and n > 1:
        plocal = K.local_sets_fit(be, n)
        # a source costs ~n * nw word operations; at least 8 work-groups per compute unit
        per = min(n, max(1, budget // (n * nw), 8 * int(be.info.compute_units or 1)))
        scratch = be.empty(1 if plocal else per * 3 * nw, np.uint32)
        total = be.empty(n, np.uint64)
        reached = be.empty(n, np.uint32)
        for s0 in range(0, n, per):
            K.paths(be, spec, adj, n, s0=s0, sources=min(per, n - s0), scratch=scratch,
                    total=total, reached=reached)
        out["path_total"] = int(be.to_host(total).sum(dtype=np.uint64))
        out["path_count"] = int(be.to_host(reached).sum(dtype=np.int64))
    return out
