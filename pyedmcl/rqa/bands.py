"""Lane bands as independent tasks: several devices of one node, dynamically balanced.

A *band* is a set of contiguous lanes of one mode (columns: vertical and white
lines; diagonals ``k = j - i``) run from the top row block to the bottom one with
its own carryover buffers. Carries flow only down a lane, so bands never depend on
one another: any device may take any band, in any order, and the recombined
histograms are integer sums of the same counts (bit-identical to one device).

:func:`run_threads` gives every device a thread that takes the next band (largest
first) from a shared queue as soon as its device starts on the band last enqueued
(one band of look-ahead, a bounded number of launches in flight), so a fast device
takes more bands than a slow one and none idles while work is left. :mod:`pyedmcl.rqa.dask_rqa` runs the same bands as Dask tasks.

SHARE and SYM (one device, row order: the diagonal launch reads the column words the
vertical launch of the same row block stored) need every lane of a row block on one
queue, so band runs take the unshared path; one device keeps the row-order path of
:func:`pyedmcl.rqa.dnr.detect_lines`, and row ranges (:mod:`pyedmcl.rqa.ranges`) keep
both on several.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.threads import pull_tasks
from clkernels.tuning import Params

from ..kernels.rqa_lines import RQA_LINES
from . import dnr
from .dnr import (
    _U32_SAFE,
    Counts,
    _device_state,
    _DevState,
    _fold,
    _Launch,
    _Matrix,
    _Task,
)

#: bands per device the default width aims at (enough for the largest-first queue to
#: even out devices of different speed; few enough that each launch fills a GPU)
BANDS_PER_DEVICE = 8
#: narrowest default band (lanes): narrower launches leave a GPU's cores idle
MIN_BAND = 256
#: launches a device may have queued before its thread waits for the oldest: enough to
#: hide the host's enqueue time, far below the queue depth at which a driver blocks
MAX_IN_FLIGHT = 64


@dataclass(frozen=True)
class Band:
    """Lanes ``lo .. hi - 1`` of ``mode`` ("vertical" or "diagonal"); ``cells`` walked."""

    mode: str
    lo: int
    hi: int
    cells: int


def diagonal_rows(m: _Matrix, lo: int, hi: int) -> tuple[int, int]:
    """Rows ``[first, last)`` that hold a cell of some diagonal ``lo <= k < hi``."""
    return max(0, -(hi - 1)), max(0, min(m.n_rows, m.n_cols - lo))


def _diagonal_cells(m: _Matrix, lo: int, hi: int) -> int:
    """Cells of the diagonals ``lo <= k < hi``, in closed form: a diagonal's length
    ``min(n_rows, n_cols - k) - max(0, -k)`` is linear in ``k`` between the breakpoints
    ``-n_rows``, 0, ``n_cols - n_rows`` and ``n_cols`` and never changes sign between
    them (no arange over N diagonals on the host)."""
    R, C = m.n_rows, m.n_cols

    def length(k: int) -> int:
        return max(0, min(R, C - k) - max(0, -k))

    cuts = sorted({lo, hi, *(b for b in (-R, 0, C - R, C) if lo < b < hi)})
    return sum((b - a) * (length(a) + length(b - 1)) // 2
               for a, b in zip(cuts, cuts[1:], strict=False) if b > a)


def default_width(m: _Matrix, n_devices: int, vertical: bool,
                  diag_ranges: list[tuple[int, int]]) -> int:
    """Lanes per band: about :data:`BANDS_PER_DEVICE` bands per device over all lanes,
    at least :data:`MIN_BAND` (a multiple of 64 above 64)."""
    lanes = (m.n_cols if vertical else 0) + sum(max(0, hi - lo) for lo, hi in diag_ranges)
    width = -(-lanes // max(1, n_devices * BANDS_PER_DEVICE))
    return max(MIN_BAND, -(-width // 64) * 64 if width > 64 else width)


def check_width(width: int) -> int:
    """``width`` (lanes per band, rows per range) when it is at least 1; else the error."""
    if width < 1:
        raise ValueError(f"band width={width} is out of range; allowed: >= 1 lanes")
    return width


def plan_bands(m: _Matrix, vertical: bool, diag_ranges: list[tuple[int, int]],
               width: int) -> list[Band]:
    """Every band of the job, largest first (ties: columns, then by lane), so that the
    last bands a dynamic queue hands out are the small ones."""
    check_width(width)
    out: list[Band] = []
    if vertical:
        out += [Band("vertical", lo, min(lo + width, m.n_cols), m.n_rows * (min(lo + width, m.n_cols) - lo))
                for lo in range(0, m.n_cols, width)]
    for a, b in diag_ranges:
        for lo in range(a, b, width):
            hi = min(lo + width, b)
            cells = _diagonal_cells(m, lo, hi)
            if cells:
                out.append(Band("diagonal", lo, hi, cells))
    order = {"vertical": 0, "diagonal": 1}
    return sorted(out, key=lambda t: (-t.cells, order[t.mode], t.lo))


def band_launches(task: _Task, e: int, m: _Matrix) -> list[_Launch]:
    """A band's launches, top row block first: one per row block (lanes chunked so a
    launch's 32-bit counts cannot overflow); diagonal bands skip the row blocks where
    none of their diagonals has a cell (their carries stay as they are)."""
    first, last = (0, m.n_rows) if task.mode == "vertical" else diagonal_rows(m, task.lo, task.hi)
    out = []
    for r0 in range((first // e) * e, last, e):
        nr = min(e, m.n_rows - r0)
        step = max(e, (_U32_SAFE // max(nr, 1)) // 2)
        for l0 in range(task.lo, task.hi, step):
            out.append(_Launch(r0, task, r0, nr, l0, min(step, task.hi - l0)))
    return out


def fold_bins(m: _Matrix, vertical: bool, diag_ranges: list[tuple[int, int]]) -> int:
    """Bins an intermediate fold must take: a bin of length L holds at most cells / L
    lines, so only the first ``cells / 2^32`` bins of the whole job can overflow."""
    cells = (m.n_rows * m.n_cols if vertical else 0) + sum(
        _diagonal_cells(m, lo, hi) for lo, hi in diag_ranges if hi > lo)
    return min(m.hlen, cells // dnr._u32_limit() + 2)


class BandDevice:
    """One device's state for band tasks: series on the device, launch parameters
    (unshared path), 32/64-bit histograms and the carryovers of the bands it ran."""

    def __init__(self, be: Backend, m: _Matrix, x: np.ndarray, y: np.ndarray,
                 x2: np.ndarray | None, y2: np.ndarray | None, params: Params | None,
                 edge: int | None, tcol: np.ndarray | None, n_fold: int):
        self.m, self.n_fold = m, n_fold
        self.st: _DevState = _device_state(be, m, x, y, x2, y2, params, edge, tcol)
        self.st.params["SHARE"] = self.st.params["SYM"] = 0
        self.bands = 0
        self.window: deque = deque()  # events of the launches in flight

    @property
    def be(self) -> Backend:
        return self.st.be

    def build(self, modes: tuple[str, ...] = ("vertical", "diagonal")) -> None:
        """Build this device's kernels now (in the calling thread: builds print nothing
        and are cached; worker threads then only enqueue)."""
        for mode in modes:
            self.st.kernels[mode] = RQA_LINES.kernel(self.st.be, self.st.params, self.m.spec,
                                                     mode)
        _fold(self.st, 1, final=True)  # builds the fold kernel (the histograms are zero)

    def run(self, band: Band) -> tuple[_Task, Any]:
        """Enqueue every launch of ``band``; returns its task (carryovers) and its last
        event (None when the band has no launch)."""
        st = self.st
        task = _Task(band.mode, band.lo, band.hi,
                     RQA_LINES.carry(st.be, st.params, band.mode, band.hi - band.lo))
        st.tasks.append(task)
        n0 = len(st.events)
        for ln in band_launches(task, st.params["EDGE"], self.m):
            dnr._launch(st, ln, self.m, self.n_fold)
            self.window.append(st.events[-1])
            if len(self.window) > MAX_IN_FLIGHT:  # a driver may block a full queue's
                st.be.wait(self.window.popleft())  # enqueue with the GIL held: never fill it
        self.bands += 1
        return task, (st.events[-1] if len(st.events) > n0 else None)

    def finish(self) -> None:
        """Fold every bin into the 64-bit totals and wait for the device."""
        _fold(self.st, self.m.hlen, final=True)
        self.st.be.finish()

    def take(self, task: _Task) -> tuple[Counts, Counts, Counts, int]:
        """The 64-bit histograms counted since the last ``take`` plus the runs ``task``
        left open (:class:`~pyedmcl.rqa.dnr.Counts`); the device totals are cleared (Dask: one band per
        call)."""
        self.finish()
        st, m = self.st, self.m
        # the runs the band leaves open at the matrix border, counted on the device
        # (as dnr._finish_on_device does for one device's run), then folded
        n_lanes = task.hi - task.lo
        if task.mode == "diagonal":
            RQA_LINES.add_runs(st.be, task.bufs[0], n_lanes, st.h32["d"])
        else:
            RQA_LINES.add_runs(st.be, task.bufs[0], n_lanes, st.h32["v"])
            if m.spec.white_border:  # open white runs touch the bottom border
                RQA_LINES.add_runs(st.be, task.bufs[1], n_lanes, st.h32["w"])
        _fold(st, m.hlen, final=True)
        sums = [] if task.mode == "diagonal" else [
            RQA_LINES.count_sums(st.be, task.bufs[2], 0, n_lanes)]
        out, totals = dnr.read_totals(st, m, sums)
        for k in ("d", "v", "w"):
            st.be.fill(st.h64[k], 0)
        n = sum(totals)
        st.tasks.remove(task)
        st.events.clear()  # a worker runs many bands: keep no finished event
        self.window.clear()
        return out[0], out[1], out[2], n


def run_threads(devices: list[BandDevice], bands: list[Band],
                after: Callable[[Any], None] | None = None) -> None:
    """Run ``bands`` over ``devices`` (:func:`clkernels.threads.pull_tasks`, the node's
    tile scheduler): one host thread per device takes the next band from a shared queue
    once its device has finished the band before the one just enqueued (and never more
    than :data:`MAX_IN_FLIGHT` launches ahead), so a device never idles while bands are
    left and a slow device does not hold bands a fast one could run. A thread takes a
    band beyond its first only while more are left than threads yet to take one: with
    one band per device (alike devices' row ranges) each device runs its own, however
    late its thread starts (a fast thread enqueued a short range and took the other
    device's too). ``after(device)`` runs in a device's thread once its device has
    finished (its read-back then overlaps the devices still at work)."""
    def run(dev: BandDevice, band: Band) -> Any:
        return dev.run(band)[1]  # the band's last event

    def settle(dev: BandDevice, last: Any) -> None:
        if last is not None:  # the device is on the next band now: take another
            dev.be.wait(last)

    def close(dev: BandDevice, failed: bool, stopped: bool) -> None:
        if failed:
            return  # (its error is reported; nothing of it is read)
        dev.finish()
        if after is not None and not stopped:
            after(dev)

    pull_tasks(devices, bands, open_slot=lambda i, dev: dev, run=run, settle=settle,
               close_slot=close, leave_one_each=True)
