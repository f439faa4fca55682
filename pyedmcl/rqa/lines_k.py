"""Several thresholds in one pass of the rqa_lines kernels (template value NTHR).

A launch of ``LineSpec(nthr=K)`` computes each cell's distance once and decides it
against K ascending thresholds, keeping K sets of everything a threshold owns: its
column words (SHARE: K planes of :meth:`RQALinesKernel.shared_layout`'s buffer), its
carryovers (:meth:`RQALinesKernel.carry` with ``copies=K``: K copies laid end to end),
its 32-bit and 64-bit histograms (K copies of ``hstride`` bins) and, EXACT, its
float64 threshold and bound. Threshold k's walks are the one-threshold walks, run on
its slice (``templates/rqa_lines/_khist.mako``). The run's bookkeeping kernels (folds,
open runs, SYM's join, the end of the run) take every threshold in one launch, k being
the launch's second dimension (``_kcollect.mako``).

The paths that take K > 1 (:func:`fit_params`): 64-row words shared by the diagonal
launches (BITS 2, SHARE), without the sign-bit packing, unrolled halves, 32-bit planes,
warp shuffles or diagonal-major cells; SYM only with the whole-row horizontal walk
(HCH 0, a CPU path: GPUs take SYM 0 instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params

from ..kernels.rqa_lines import _COLLECT_PARAMS, RQA_LINES, LineSpec

#: the most thresholds one pass takes (private histograms and bit words grow with it)
MAX_THRESHOLDS = 16


class PathUnsupported(Exception):  # noqa: N818 - a signal to run threshold by threshold
    """The launch parameters a device took cannot decide several thresholds per pass
    (:func:`takes`): the caller runs one threshold per pass instead (the same results)."""


def fit_params(p: Params, info: DeviceInfo) -> Params:
    """``p`` (a device's launch parameters) with the values an NTHR > 1 pass cannot take
    turned off (the same histograms by another path): PACK, UNR, PLANES and what needs
    them (HCH, SHFL, DMAJ); SYM on GPUs (its whole-row walk is a CPU design)."""
    q = dict(p, PACK=0, UNR=0, PLANES=0, HCH=0, SHFL=0, DMAJ=0)
    if info.is_gpu:
        q["SYM"] = 0
    if q.get("OVL", 0) == 2:  # OVL 2 is SYM's chunked row walk in a third queue
        q["OVL"] = 1
    return q


def takes(params: Params, spec: LineSpec, info: DeviceInfo) -> bool:
    """Whether a run with ``params`` (after :func:`fit_params`) and ``spec`` can decide
    several thresholds per pass on the device ``info``: shared 64-row words, one pair of
    series, one threshold per cell (no JOINT, PERCOL), and every threshold's two local
    histograms in half the device's local memory."""
    bins = spec.template_params("vertical", params, info)["HBINS"]
    return (params.get("BITS", 0) == 2 and bool(params.get("SHARE", 0))
            and not spec.joint and not spec.percol
            and 2 * spec.nthr * bins * 4 <= info.local_mem_bytes // 2)


@dataclass
class ThresholdInputs:
    """The device side of a K-threshold run: the thresholds in the working dtype
    (ascending), the strides of a threshold's histograms (``hstride`` bins) and column
    words (``pstride`` 64-bit words, set once they are allocated), and EXACT's float64
    thresholds and bounds (None without EXACT)."""

    thr: Any
    nthr: int
    hstride: int
    pstride: int = 0
    thr64: Any = None
    bounds: Any = None


def upload(backend: Backend, spec: LineSpec, thr: np.ndarray, hstride: int,
           thr64: np.ndarray | None = None, bounds: np.ndarray | None = None
           ) -> ThresholdInputs:
    """The thresholds (and EXACT's float64 thresholds and bounds, where the kernels take
    them: :meth:`LineSpec.exact_on`) on the device."""
    thr = np.asarray(thr, dtype=spec.dtype)
    out = ThresholdInputs(backend.to_device(thr), thr.size, hstride)
    if spec.exact_on(backend.info):
        if thr64 is None or bounds is None:
            raise ValueError("an EXACT K-threshold run needs the float64 thresholds and bounds")
        out.thr64 = backend.to_device(np.asarray(thr64, dtype=np.float64))
        out.bounds = backend.to_device(np.asarray(bounds, dtype=np.float32))
    return out


def launch_args(inputs: ThresholdInputs, carry: tuple[Any, ...], nthr: int) -> tuple[Any, ...]:
    """The arguments an NTHR launch takes after the others (``_khist.mako``: args): the
    thresholds and the strides of a threshold's carries (``carry``: the task's K-fold
    buffers), histograms and column words; EXACT: float64 thresholds and bounds."""
    cstride = carry[0].size // nthr if carry else 0
    out = (inputs.thr, np.int32(cstride), np.int32(inputs.hstride), np.int32(inputs.pstride))
    if inputs.thr64 is not None:
        out = (*out, inputs.thr64, inputs.bounds)
    return out


def _program(nthr: int, mode: str = "collect") -> dict[str, Any]:
    return dict(_COLLECT_PARAMS, MODE=mode, NTHR=int(nthr))


def _launch(backend: Backend, name: str, n: int, nthr: int, *args: Any, stream: int = 0,
            mode: str = "collect", wg: int = 64) -> None:
    k = backend.kernel(RQA_LINES.template, _program(nthr, mode), name)
    wg = min(wg, backend.info.max_work_group_size)
    queue = {"stream": stream} if stream else {}
    backend.launch(k, (round_up(max(n, 1), wg), nthr), (wg, 1), *args, **queue)


def fold(backend: Backend, pairs: list[tuple[Any, Any]], n: int, nthr: int, hstride: int,
         stream: int = 0) -> None:
    """:meth:`RQALinesKernel.fold` of every threshold: bins ``0 .. n - 1`` of each."""
    for h32, h64 in pairs:
        _launch(backend, "rqa_accumulate", n, nthr, h32, h64, np.int32(n), np.int32(hstride),
                stream=stream)


def add_runs(backend: Backend, runs: Any, n: int, h32: Any, nthr: int, hstride: int) -> None:
    """:meth:`RQALinesKernel.add_runs` of every threshold (``runs``: K-fold carries)."""
    if n > 0:
        _launch(backend, "rqa_add_runs", n, nthr, runs, np.int32(0), np.int32(n), h32,
                np.int32(runs.size // nthr), np.int32(hstride))


def collect(backend: Backend, d: Any, v: Any, w: Any, rows: tuple[Any, Any] | None, n: int,
            nthr: int, hstride: int) -> Any:
    """:meth:`RQALinesKernel.collect` of every threshold: a device uint32[3 K], threshold
    k's extents at 3 k .. 3 k + 2."""
    ext = backend.zeros(3 * nthr, np.uint32)
    hv, hw = rows if rows is not None else (d, d)
    _launch(backend, "rqa_collect", n, nthr, d, v, w, hv, hw, np.int32(rows is not None),
            np.int32(n), ext, np.int32(hstride))
    return ext


def count_sums(backend: Backend, counts: Any, n: int, nthr: int) -> Any:
    """:meth:`RQALinesKernel.count_sums` of every threshold (``counts``: a task's K-fold
    recurrence counts, entries 0 .. n - 1 of each): a device array of K rows of partial
    sums (one per 1,024 entries)."""
    groups = max(1, (n + 1023) // 1024)
    sums = backend.empty(groups * nthr, np.uint64)
    k = backend.kernel(RQA_LINES.template, _program(nthr), "rqa_count_sums")
    backend.launch(k, (groups * 64, nthr), (64, 1), counts, np.int32(0), np.int32(n), sums,
                   np.int32(counts.size // nthr), np.int32(groups))
    return sums


def sym_join(backend: Backend, col: tuple[Any, Any, Any], rows: tuple[Any, Any], j0: int,
             nj: int, n: int, diag_black: bool, white_border: bool, hlen: int, hv: Any,
             hw: Any, nthr: int, hstride: int) -> Any:
    """:meth:`RQALinesKernel.sym_join` of every threshold (``col``, ``rows``: the K-fold
    carries): the per-work-group recurrence sums, ``groups`` per threshold."""
    groups = max(1, (nj + 63) // 64)
    nsum = backend.empty(groups * nthr, np.uint64)
    k = backend.kernel(RQA_LINES.template, _program(nthr, "symjoin"), "rqa_symjoin")
    backend.launch(k, (groups * 64, nthr), (64, 1), *col, *rows, np.int32(j0), np.int32(nj),
                   np.int32(n), np.int32(diag_black), np.int32(white_border), np.int32(hlen),
                   hv, hw, nsum, np.int32(col[0].size // nthr), np.int32(rows[0].size // nthr),
                   np.int32(hstride), np.int32(groups))
    return nsum
