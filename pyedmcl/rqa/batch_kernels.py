"""Auto-RQA of many series per launch: the rqa_lines family's MODE ``bvertical`` and
``bdiagonal`` (``rqa_lines/_batch.mako``).

One work-group per series walks its whole recurrence matrix: ``bvertical`` every column
(black and white vertical lines, the recurrences), ``bdiagonal`` the diagonals above the
main one. The series lie end to end in one array (:func:`pack`), each with its own
offset, length and threshold (and, EXACT, its raw float64 values, float64 threshold and
bound), so a launch takes every series of a batch with no host step between them. A
cell is decided by the single-series kernels' code, so each series' histograms equal
those of its own Divide & Recombine run bit for bit.

Launch values (not tuned: :func:`batch_params`): CPUs take the lane-vector walk of the
D&R kernels (VEC 16, WALK 3, private bins); GPUs one lane per work-item (PACK, DPAIR),
a work-group of 128 per series. HBINS holds every line of the launch's longest series
(a power of two, :func:`hist_bins_for`): series longer than :func:`max_points` allow run
one at a time by D&R.

A launcher of the rqa_lines family beside its caller (:mod:`pyedmcl.rqa.batch_lines`),
as :mod:`pyedmcl.rqa.dnr` launches the family's D&R kernels: the family's one module is
:mod:`pyedmcl.kernels.rqa_lines`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params

from ..kernels.rqa_lines import _COLLECT_PARAMS, RQA_LINES, LineSpec

#: the two kernels of a batch
BATCH_MODES = ("bvertical", "bdiagonal")
#: zeros before the first series (a column pointer sits VEC values before its series)
LEAD = 64
#: series start on multiples of this many values (PACK's 16-byte row loads of float32)
ALIGN = 4
#: zeros after the last series' values: lanes past a series' end load up to VEC - 1 values
#: beyond it (masked), PACK's loads up to 3
TAIL = 64
#: the largest local histogram (bins per kind): bvertical keeps two, 32 KiB at 4096
MAX_BINS = 4096
#: histogram bytes (three kinds, 32-bit) of one launch's series at most: more series run
#: in several launches, each read while the next runs
CHUNK_BYTES = 1 << 27
#: launches enqueued ahead of the one the host reads
IN_FLIGHT = 3
#: values of a launch's series arrays at most (their offsets are 32-bit in the kernels)
MAX_VALUES = (1 << 31) - (1 << 20)


def batch_params(info: DeviceInfo) -> Params:
    """The launch values of a batch on ``info``'s device: the D&R kernels' CPU walk (the
    lane vectors of WALK 3) on Intel's and PoCL's runtimes; on GPUs one lane per
    work-item with the sign-bit words and one step per black run (PACK, DPAIR)."""
    if info.is_gpu:
        return {"VEC": 1, "WG": min(128, int(info.max_work_group_size)), "BITS": 2, "PH": 0,
                "WALK": 1, "UNR": 1, "PACK": 1, "DPAIR": 1}
    if info.runtime in ("intel", "pocl"):
        return {"VEC": 16, "WG": 2, "BITS": 2, "PH": 128, "WALK": 3}
    return {"VEC": 16, "WG": 2, "BITS": 2, "PH": 1024, "WALK": 1}


def hist_bins_for(n_max: int) -> int:
    """HBINS of a launch whose longest series has ``n_max`` embedded points: the power of
    two (at least 64) above ``n_max`` (every line length 1 .. n_max in local memory)."""
    return max(64, 1 << int(n_max).bit_length())


def max_points(info: DeviceInfo) -> int:
    """The longest series (embedded points) a batch launch takes on ``info``'s device:
    its two local histograms of :func:`hist_bins_for` bins fit the device's local memory
    (and :data:`MAX_BINS`)."""
    bins = MAX_BINS
    while bins > 64 and 2 * bins * 4 + 64 > info.local_mem_bytes:
        bins //= 2
    return bins - 1


def template_params(spec: LineSpec, mode: str, params: Params, info: DeviceInfo,
                    hbins: int) -> dict[str, Any]:
    """The template values of batch kernel ``mode``: those of the D&R kernels for the
    same launch values (MODE vertical: no shared words, planes or shuffles), with
    ``mode``, the launch's local histogram size and one threshold per launch (NTHR=1)."""
    base = {k: params[k] for k in ("VEC", "WG", "BITS", "PH", "WALK", "UNR", "PACK", "DPAIR")
            if k in params}
    tp = spec.template_params("vertical", base, info)
    tp.update(MODE=mode, HBINS=int(hbins), NTHR=1)
    return tp


@dataclass
class Packed:
    """Series laid end to end for a batch launch: ``xs`` (working dtype) and, EXACT,
    ``xs64`` (the raw float64 series) with series ``s`` at ``soff[s]`` -- each the laid
    out array, or the list of blocks :func:`lay_out_blocks` lays out; ``sn`` its
    embedded points; ``thr`` its threshold (working dtype), ``thr64`` and ``exb`` the
    float64 threshold and bound of EXACT (None without)."""

    xs: np.ndarray
    soff: np.ndarray
    sn: np.ndarray
    thr: np.ndarray
    xs64: np.ndarray | None = None
    thr64: np.ndarray | None = None
    exb: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.sn.size)


def block_offsets(blocks: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Where :func:`lay_out_blocks` puts every series (block after block) and the length
    of the whole array."""
    soff, at = [], LEAD
    for b in blocks:
        st = -(-b.shape[1] // ALIGN) * ALIGN
        soff.append(at + st * np.arange(b.shape[0], dtype=np.int64))
        at += b.shape[0] * st
    return (np.concatenate(soff) if soff else np.zeros(0, np.int64)), at + TAIL


def lay_out_blocks(blocks: list[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Series laid end to end: ``blocks`` of equal-length series (2-D, one per row), each
    block's rows at a stride of their length rounded up to :data:`ALIGN`, after
    :data:`LEAD` zeros and before :data:`TAIL` (reads past a series' end meet the next
    series' values or the tail, and are masked). The array (``dtype``) and every
    series' offset, block after block."""
    soff, total = block_offsets(blocks)
    out = np.empty(total, dtype)
    out[:LEAD] = 0
    at = LEAD
    for b in blocks:
        st = -(-b.shape[1] // ALIGN) * ALIGN
        view = out[at:at + b.shape[0] * st].reshape(b.shape[0], st)
        view[:, :b.shape[1]] = b
        view[:, b.shape[1]:] = 0
        at += b.shape[0] * st
    out[at:] = 0
    return out, soff


def to_device_blocks(be: Backend, blocks: list[np.ndarray], dtype: Any) -> tuple[Any, list]:
    """:func:`lay_out_blocks`' array on the device: where every block's rows are already
    :data:`ALIGN`-long and the backend writes into device arrays, each block straight
    from its rows (no host copy of the layout: 0.4 GB of float32 and 0.8 GB of float64 at
    10^5 series of 1,000); else the host layout uploaded. Also the writes' handles (keep
    them until the launches that read the array are enqueued)."""
    dt = np.dtype(dtype)
    if not (be.writes_async and all(b.shape[1] % ALIGN == 0 and b.dtype == dt
                                    and b.flags.c_contiguous for b in blocks)):
        return be.to_device(lay_out_blocks(blocks, dt)[0]), []
    _, total = block_offsets(blocks)
    dev = be.empty(total, dt)
    zeros = np.zeros(max(LEAD, TAIL), dt)
    handles = [be.write_async(dev, zeros[:LEAD], 0),
               be.write_async(dev, zeros[:TAIL], total - TAIL)]
    at = LEAD
    for b in blocks:
        handles.append(be.write_async(dev, b, at))
        at += b.size
    return dev, handles


def lay_out(rows: list[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lay_out_blocks` of single series (1-D arrays of any lengths)."""
    return lay_out_blocks([np.asarray(r)[None, :] for r in rows], dtype)


@dataclass
class Counts:
    """What the measures of a batch's series take, from the device (MODE ``bstats``):
    per series ``s`` and kind ``q`` (0: the upper diagonals, 1: vertical, 2: white lines)
    ``stats[s, q]`` = (points in lines >= its minimum, points in all lines, lines >= the
    minimum, the longest line), and its nonzero bins >= the minimum in length order,
    ``vals[start[s, q] : start[s, q] + count[s, q]]``; ``nrec[s]`` its recurrences."""

    nrec: np.ndarray
    stats: np.ndarray
    start: np.ndarray
    count: np.ndarray
    vals: np.ndarray


def _inputs(be: Backend, spec: LineSpec, params: Params, packed: Packed, hstride: int
            ) -> tuple[Params, dict[str, Any], list[Any], list[Any]]:
    """The launch values (PACK off for an infinite threshold), the two kernels, their
    series arguments on the device and the handles of the writes that put them there."""
    p = dict(params)
    if p.get("PACK", 0) and not np.all(np.isfinite(packed.thr)):
        p["PACK"] = 0  # the sign of d - thr is d < thr for finite thresholds only
    exact = bool(spec.exact_on(be.info))
    if spec.exact and spec.real == "float" and not be.info.fp64:
        from .._precision import warn_no_fp64

        warn_no_fp64(be.info.name)
    if exact and packed.xs64 is None:
        raise ValueError("an EXACT batch needs the raw float64 series (Packed.xs64)")
    hbins = hist_bins_for(hstride - 1)
    ks = {m: RQA_LINES_BATCH.kernel(be, spec, p, m, hbins) for m in BATCH_MODES}
    rdt = spec.dtype
    xs, held = _series(be, packed.xs, rdt)
    head = [xs, be.to_device(packed.soff.astype(np.int32)),
            be.to_device(packed.sn.astype(np.int32)), be.to_device(packed.thr.astype(rdt))]
    if exact:
        xs64, held64 = _series(be, packed.xs64, np.float64)
        held += held64
        head += [xs64, be.to_device(packed.thr64.astype(np.float64)),
                 be.to_device(packed.exb.astype(np.float32))]
    return p, ks, head, held


def _series(be: Backend, xs: Any, dt: Any) -> tuple[Any, list]:
    """Series laid out (an array) or as blocks (a list) on the device, and the handles
    of its writes."""
    if isinstance(xs, list):
        dev, held = to_device_blocks(be, xs, dt)
        return dev, [held]
    return be.to_device(np.ascontiguousarray(xs, dtype=dt)), []


def _launches(be: Backend, spec: LineSpec, params: Params, packed: Packed, w: int,
              hstride: int) -> Any:
    """Per launch of :data:`CHUNK_BYTES` histograms at most: ``(s0, cs, (hd, hv, hw),
    nrec)``, the device arrays of series ``s0 .. s0 + cs - 1`` (enqueued, not waited for)."""
    p, ks, head, held = _inputs(be, spec, params, packed, hstride)
    S, wg = packed.count, int(p["WG"])
    per = max(1, CHUNK_BYTES // (12 * hstride))
    for s0 in range(0, S, per):
        cs = min(per, S - s0)
        hd, hv, hw = (be.empty(cs * hstride, np.uint32) for _ in range(3))
        nr = be.empty(cs, np.uint32)
        fixed = (np.int32(w), np.int32(s0), np.int32(hstride))
        be.launch(ks["bvertical"], (cs * wg,), (wg,), *head, *fixed, hv, hw, nr)
        be.launch(ks["bdiagonal"], (cs * wg,), (wg,), *head, *fixed, hd)
        yield s0, cs, (hd, hv, hw), nr
    del held  # (the series' writes: enqueued before every launch that reads them)


def histograms(be: Backend, spec: LineSpec, params: Params, packed: Packed, *, w: int,
               hstride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The upper diagonals', vertical and white histograms ``(S, hstride)`` (uint32, index
    length - 1) and recurrence counts ``(S,)`` of every series of ``packed`` (Theiler
    window ``w``: diagonals from ``max(w, 1)``; the Theiler band of ``spec``)."""
    S = packed.count
    out = [np.empty((S, hstride), np.uint32) for _ in range(3)]
    nrec = np.empty(S, np.uint32)
    reads = []
    for s0, cs, hists, nr in _launches(be, spec, params, packed, w, hstride):
        for dev, host in zip(hists, out, strict=True):
            reads.append(be.to_host_async(dev, out=host[s0:s0 + cs].reshape(-1)))
        reads.append(be.to_host_async(nr, out=nrec[s0:s0 + cs]))
    for r in reads:
        r()
    return out[0], out[1], out[2], nrec


def chunk_counts(be: Backend, spec: LineSpec, params: Params, packed: Packed, *, w: int,
                 hstride: int, minima: tuple[int, int, int]) -> Iterator[tuple[int, Counts]]:
    """Per launch, in order: its first series and the :class:`Counts` of its series (as
    :func:`histograms`; ``minima``: l_min, v_min, w_min), its histograms reduced on the
    device (MODE ``bstats``), the host reading the nonzero bins only. :data:`IN_FLIGHT`
    launches are enqueued ahead of the one read: the host's work on one launch's counts
    runs while the device runs the next, and the device holds the arrays of a few."""
    wgs = min(64, be.info.max_work_group_size)
    ks = be.kernel(RQA_LINES.template, dict(_COLLECT_PARAMS, MODE="bstats", WG=wgs),
                   "rqa_bstats")
    inflight: deque = deque()
    for s0, cs, hists, nr in _launches(be, spec, params, packed, w, hstride):
        st, of = be.empty(cs * 12, np.uint32), be.empty(cs * 6, np.uint32)
        vals, used = be.empty(cs * 3 * hstride, np.uint32), be.zeros(1, np.uint32)
        be.launch(ks, (3 * cs * wgs,), (wgs,), *hists, np.int32(hstride),
                  *(np.int32(m) for m in minima), st, of, vals, used)
        be.flush()
        inflight.append((s0, cs, vals, [be.to_host_async(a) for a in (st, of, nr, used)]))
        if len(inflight) > IN_FLIGHT:
            yield _read_counts(be, *inflight.popleft())
    while inflight:
        yield _read_counts(be, *inflight.popleft())


def _read_counts(be: Backend, s0: int, cs: int, vals: Any, reads: list
                 ) -> tuple[int, Counts]:
    """One launch's :class:`Counts`: its small arrays (already being read), then the
    values its ``bstats`` placed."""
    st, of, nr, used = (r() for r in reads)
    n_used = int(used[0])
    got = be.to_host_async(vals, count=n_used)() if n_used else np.zeros(0, np.uint32)
    of = of.reshape(cs, 3, 2).astype(np.int64)
    return s0, Counts(nr.astype(np.int64), st.reshape(cs, 3, 4).astype(np.int64),
                      of[:, :, 0], of[:, :, 1], got)


def counts(be: Backend, spec: LineSpec, params: Params, packed: Packed, *, w: int,
           hstride: int, minima: tuple[int, int, int]) -> Counts:
    """:func:`chunk_counts` of every launch as one :class:`Counts`."""
    parts = list(chunk_counts(be, spec, params, packed, w=w, hstride=hstride, minima=minima))
    base = np.cumsum([0] + [c.vals.size for _, c in parts])
    return Counts(*(np.concatenate([getattr(c, k) for _, c in parts])
                    for k in ("nrec", "stats")),
                  np.concatenate([c.start + b for (_, c), b in zip(parts, base, strict=False)]),
                  np.concatenate([c.count for _, c in parts]),
                  np.concatenate([c.vals for _, c in parts]))


class RQALinesBatch:
    """The batch kernels of the rqa_lines family (built once per shape, cached)."""

    template = RQA_LINES.template

    def kernel(self, be: Backend, spec: LineSpec, params: Params, mode: str,
               hbins: int) -> Any:
        return be.kernel(self.template, template_params(spec, mode, params, be.info, hbins),
                         f"rqa_{mode}")


RQA_LINES_BATCH = RQALinesBatch()
