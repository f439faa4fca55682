"""float32 Simplex's float64 redo enqueued behind the checked lookup, with no host round trip.

Why. The row check (:mod:`.row_check`) flags the few predictions float32 cannot hold;
redone after the first pass's wait, their float64 k-NN, lookup and patch cost a read, the
host's list, uploads and a second wait: on a GPU that round trip is milliseconds of host
latency around well under a millisecond of device work.

What. On a GPU with fp64 the redo is enqueued at once, behind the checked lookup, for a
fixed number of slots (:data:`REDO_SLOTS`): ``select_flagged`` takes the first flagged
queries from the lookup's device list (slots past the count get query 0's point and row
-1); the float64 k-NN of those slots' points (the exact kernel, each query's library
scan split over a work-group: few queries, so the split keeps the device busy), the
float64 lookup and the patch of the float32 predictions (slots of row -1 skipped) follow,
and the caller's skill runs on the patched predictions, all behind the one wait of the
first pass. Where the count exceeds the slots, the caller redoes every flagged row after
the wait as before (:func:`.row_check.redo_patched`), writing the same values again.

The values equal :func:`.row_check.redo_patched`'s: the same float64 series, the single
launch's table (a split scan keeps the kernel's total order, so the table does not depend
on the split), the same lookup and patch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import Backend

from ..primitives.ranges import Plan

#: flagged queries the enqueued redo takes (a float64 k-NN of this many queries runs
#: whether or not any is flagged); beyond them the caller redoes all after the wait
REDO_SLOTS = 128
#: work-items scanning one query's library in the redo's k-NN (its SPLIT and work-group),
#: the largest of these whose merge lists and a tile of as many points fit
#: :data:`REDO_LOCAL_BYTES`: few queries, so each query's scan is spread wide
REDO_SPLITS = (128, 64, 32)
#: local memory the redo's k-NN leaves free of the device's (its runtime's own use)
REDO_LOCAL_SPARE = 8 << 10
#: work-groups per compute unit the redo's k-NN aims at: each slot's library is scanned
#: in chunks by as many work-groups (their tables merged on the device, the same table),
#: at most :data:`REDO_MAX_CHUNKS`, each work-item keeping :data:`REDO_MIN_POINTS` points
REDO_GROUPS_PER_CU = 4
REDO_MAX_CHUNKS = 16
REDO_MIN_POINTS = 32
#: the kinds of device ("gpu", "cpu") that enqueue the redo: not CPUs, whose few cores
#: would scan the library for every slot, flagged or not, where the redo after the wait
#: scans it for the flagged rows only
ENQUEUE_ON: tuple[str, ...] = ("gpu",)


@dataclass
class RedoInputs:
    """What the enqueued redo reads besides the plan: the original float64 series ``x``
    and targets ``y`` ``(nt, n)``, the float32 arrays' units (``x = z * scale + shift``
    per target), whether variances are predicted and the k-NN back-end."""

    x: np.ndarray
    y: np.ndarray
    shift: np.ndarray
    scale: np.ndarray
    variance: bool
    neighbors: Any


@dataclass
class EnqueuedRedo:
    """The device arrays of an enqueued redo: ``rsel`` (the slots' rows, -1 unused), the
    float64 predictions (and variances) ``(1, nt, slots)``; :meth:`reads` enqueues their
    reads, :meth:`fixed` returns the host's values per flagged row after the wait."""

    rsel: Any
    p64: Any
    v64: Any
    slots: int
    _reads: list = field(default_factory=list)

    def reads(self, be: Backend) -> None:
        """Enqueue the reads of the slots and their values (no wait)."""
        self._reads = [be.to_host_async(self.rsel), be.to_host_async(self.p64)]
        if self.v64 is not None:
            self._reads.append(be.to_host_async(self.v64))

    def fixed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The float64 predictions (and variances) ``(nt, rows.size)`` of the flagged
        queries ``rows`` (ascending, from the checked lookup's count and list), or None
        where the slots did not hold them all (the caller redoes them after the wait)."""
        if rows.size > self.slots or not self._reads:
            return None
        got = [r() for r in self._reads]
        rsel = got[0]
        first: dict[int, int] = {}
        for i, r in enumerate(rsel.tolist()):
            if r >= 0 and r not in first:
                first[r] = i
        if any(int(r) not in first for r in rows):
            return None
        cols = np.fromiter((first[int(r)] for r in rows), np.int64, rows.size)
        p = got[1][0][:, cols]
        v = got[2][0][:, cols] if self.v64 is not None else None
        return p, v


def applies(be: Backend, redo: RedoInputs | None, single_block: bool) -> bool:
    """Whether the redo is enqueued behind the checked lookup: fp64 on a device of a
    kind in :data:`ENQUEUE_ON`, the exact device k-NN, one query block."""
    from ..neighbors.exact import ExactBackend

    kind = "gpu" if be.info.is_gpu else "cpu"
    return (redo is not None and single_block and be.info.fp64 and kind in ENQUEUE_ON
            and type(redo.neighbors) is ExactBackend)


def redo_params(E: int, K: int, max_wg: int = 256, local_bytes: int = 32 << 10
                ) -> dict[str, Any]:
    """The redo k-NN's launch parameters: the "rows" variant with one query a work-group
    of ``SPLIT`` work-items (:data:`REDO_SPLITS`, at most ``max_wg``), each scanning every
    ``SPLIT``-th point of a float64 tile of ``SPLIT`` points; the tile (8 bytes a
    coordinate, 4 an index) and the split's merge lists (12 bytes an entry) within
    ``local_bytes``."""
    def local(s: int) -> int:
        return s * (8 * E + 4) + (s - 1) * K * 12

    fits = [s for s in REDO_SPLITS if s <= max_wg and local(s) <= local_bytes]
    s = fits[0] if fits else 1
    return {"VARIANT": "rows", "WG": s, "SPLIT": s, "TILE": max(s, 16), "EA": 0,
            "QB": 1, "QQ": 1, "CB": 0, "INS": "reg", "FLAG": 1, "SLIDE": 0}


def redo_chunks(nl: int, slots: int, split: int, compute_units: int) -> int:
    """Chunks of the library each slot's scan is spread over (:data:`REDO_GROUPS_PER_CU`
    work-groups a compute unit in all, at most :data:`REDO_MAX_CHUNKS`, at least
    :data:`REDO_MIN_POINTS` points a work-item); 1: one work-group a slot."""
    want = -(-REDO_GROUPS_PER_CU * compute_units // max(slots, 1))
    most = nl // (REDO_MIN_POINTS * max(split, 1))
    return max(1, min(REDO_MAX_CHUNKS, want, most))


def enqueue_redo(be: Backend, plan: Plan, redo: RedoInputs, checked: Any, q_dev: Any,
                 l_dev: Any) -> EnqueuedRedo:
    """Enqueue the float64 redo of the first :data:`REDO_SLOTS` flagged queries of the
    checked lookup ``checked`` (:class:`pyedmcl.primitives.lookup.CheckedLookup`) and its
    patch of ``checked.pred`` / ``checked.var``, behind it on ``be``'s queue (no wait).
    ``q_dev`` / ``l_dev``: the plan's query and library points on the device."""
    from ..kernels.lookup import LOOKUP
    from ..primitives.knn import hold, knn_device_chunked
    from ..primitives.lookup import lookup_device

    x, y = redo.x, redo.y
    nq = plan.pred_points.size
    slots = int(min(REDO_SLOTS, checked.cap))
    # (the series stay unchanged until the call has its results: no private copies)
    xd = be.to_device_aside(np.ascontiguousarray(x, np.float64), copy=False)
    same = (y.shape == (1, x.size) and y.dtype == x.dtype  # x predicts itself
            and y[0].ctypes.data == x.ctypes.data and y.strides[-1] == x.strides[0])
    yd = xd if same else be.to_device_aside(np.ascontiguousarray(y, np.float64), copy=False)
    qsel, rsel = be.empty(slots, np.int32), be.empty(slots, np.int32)
    sh = be.to_device_aside(np.asarray(redo.shift, np.float64))
    sc = be.to_device_aside(np.asarray(redo.scale, np.float64))
    hold(be, xd, yd, qsel, rsel, sh, sc)
    LOOKUP.launch_select(be, checked.report, slots, q_dev, qsel, rsel)
    params = redo_params(plan.E, plan.knn, be.info.max_work_group_size,
                         be.info.local_mem_bytes - REDO_LOCAL_SPARE)
    nl = int(plan.lib_points.size)
    chunks = redo_chunks(nl, slots, params["SPLIT"], be.info.compute_units)
    if chunks > 1:
        table = knn_device_chunked(be, xd, x.size, E=plan.E, tau=plan.tau, k=plan.knn,
                                   q_dev=qsel, nq=slots, l_dev=l_dev, nl=nl,
                                   radius=plan.exclusion_radius, chunks=chunks, params=params,
                                   real="double")
    else:
        table = redo.neighbors.device_table(
            be, xd, x.size, E=plan.E, tau=plan.tau, k=plan.knn,
            qpts=np.zeros(slots, np.int32), lpts=plan.lib_points, radius=plan.exclusion_radius,
            real="double", q_dev=qsel, l_dev=l_dev, params=params)
    p64, v64 = lookup_device(be, table, yd, x.size, y.shape[0], plan.offset + plan.Tp,
                             real="double", variance=redo.variance)
    LOOKUP.launch_patch(be, "float", checked.pred, checked.var, nq, y.shape[0], rsel, slots,
                        p64, v64 if redo.variance else None, sh, sc)
    return EnqueuedRedo(rsel, p64, v64 if redo.variance else None, slots)
