"""The E scan beyond the fused range in buckets of E values: two programs a bucket, not per E.

Beyond the fused scan's E <= 32 (:mod:`pyedmcl.primitives.scan_fused`), an E scan runs a
k-NN, a lookup and a skill launch per E. Specialised per E (coordinates and K = E + 1
neighbours unrolled), that is two programs per E: on runtimes that compile each kernel
at its first launch, one at a time (PoCL), minutes of first use at ``max_E=64``.

Here those E values fall into buckets of :data:`BUCKET_E` (E 33..40, 41..48, ...; in
float64 on a CPU every E from 1 above max_E 20, where the fused scan's own float64 build is
the slow part; decision 0154 has the measurements). A bucket's k-NN is the
knn family's state-space kernel (NC columns of one lag) of its largest E, ``EB``, and
``KB`` = min(EB + 1, MAX_KNN) neighbours; it reads, per E, a matrix whose row P holds
``x[P + j*tau]`` in column j < E and zeros beyond. Each distance then adds the per-E
kernel's terms in the same order and exact zeros: the same value. The ``k`` nearest in
the kernel's total order (distance, then the point keys, which are the same points) are
the first ``k`` of its ``KB`` nearest; ``knn_trim`` empties the slots past ``k`` and the
bucket's lookup (K = KB) skips empty slots, so predictions and skills equal the per-E
path's bit for bit. The price: the zero columns' reads and terms (at most
``BUCKET_E - 1`` of ``EB``) and a matrix made on the device per E (``knn_columns``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..kernels.knn import KNN
from ..primitives.knn import knn_device, knn_request
from ..primitives.lookup import lookup_device, lookup_requests, skill_device
from ..primitives.ranges import MAX_KNN, Plan

#: E values per bucket beyond the fused range (E 33..40 share one k-NN program, ...)
BUCKET_E = 8

#: a bucket's coordinate matrix larger than this is waited for before the next E's
#: (the launches of every E are otherwise queued at once, each holding its matrix)
SYNC_BYTES = 32 << 20


def bucket(E: int, k: int) -> tuple[int, int]:
    """``(EB, KB)``: the coordinates and the table width of E's bucket (E 1..8, 9..16,
    ...; ``k``: E's knn; the default E + 1 widens to the bucket's, a fixed knn stays)."""
    if E < 1:
        raise ValueError(f"E={E} is out of range; allowed: E >= 1")
    EB = math.ceil(E / BUCKET_E) * BUCKET_E
    KB = min(EB + 1, MAX_KNN) if k == E + 1 else k
    return EB, max(KB, k)


def coordinates(x: np.ndarray, E: int, EB: int, tau: int) -> np.ndarray:
    """The ``(n, EB)`` matrix of ``x`` (already in the kernels' type) whose row P holds
    ``x[P + j*tau]`` in column j < E where the window fits, zeros elsewhere: what
    ``knn_columns`` makes on the device (its NumPy reference)."""
    n = x.size
    rows = max(0, n - (E - 1) * tau)
    out = np.zeros((n, EB), x.dtype)
    for j in range(E):
        out[:rows, j] = x[j * tau:j * tau + rows]
    return out


def requests(be: Any, plan: Plan, size: int, real: str) -> list[tuple]:
    """The kernels :func:`enqueue` launches for ``plan`` (``size``: queries x targets), as
    ``(template, params, name)`` for :meth:`clkernels.Backend.prebuild`."""
    EB, KB = bucket(plan.E, plan.knn)
    reqs = [knn_request(be, E=1, tau=1, k=KB, qpts=plan.pred_points, lpts=plan.lib_points,
                        real=real, nc=EB)]
    return reqs + KNN.bucket_requests(real) + lookup_requests(be, KB, size, real=real,
                                                              skill_k=1)


def enqueue(data: Any, plan: Plan, q_dev, l_dev, obs_dev, out, row0: int) -> None:
    """k-NN + lookup + skill of ``plan`` through its bucket's kernels (:mod:`.simplex`'s
    ``enqueue_plan``, the same rows in ``out[row0:row0 + nt]``); the coordinate matrix
    made on the device from the uploaded series (:func:`coordinates`' values). No host
    sync but past :data:`SYNC_BYTES` of matrix."""
    be = data.be
    EB, KB = bucket(plan.E, plan.knn)
    xe_dev = be.empty((data.n, EB), np.float64 if data.real == "double" else np.float32)
    KNN.launch_columns(be, data.real, data.x_dev, data.n, plan.E, plan.tau, EB, xe_dev)
    table = knn_device(be, xe_dev, data.n, E=1, tau=1, k=KB, qpts=plan.pred_points,
                       lpts=plan.lib_points, radius=plan.exclusion_radius, real=data.real,
                       q_dev=q_dev, l_dev=l_dev, nc=EB)
    if KB > plan.knn:
        KNN.launch_trim(be, data.real, table.idx, table.dist, table.nbatch * table.nq, KB,
                        plan.knn)
    pred_dev, _ = lookup_device(be, table, data.y_dev, data.n, data.nt, plan.offset + plan.Tp,
                                real=data.real)
    skill_device(be, pred_dev, data.nt, plan.pred_times.size, data.y_dev, data.n, data.nt,
                 obs_dev, real=data.real, out=out, row0=row0)
    if xe_dev.nbytes > SYNC_BYTES:
        be.finish()
