"""Row ranges as independent tasks: several devices, each keeping the SHARE path.

A *row range* is a run of contiguous row blocks over every lane (all columns and
diagonals), processed in row order exactly as one device does (the diagonal launch
of a row block gathers its bits from the column words the vertical launch stored:
SHARE). Ranges are independent once each starts from the carryovers the rows above
it leave, and those are found on the device itself: a *warm-up* (MODE ``warmcol`` /
``warmdiag``) walks each lane up from the range's first row, 32 cells a step (a column
skips whole blocks of rows whose box lies beyond the threshold from its point), until
its open run began, and writes the carries straight into the range's buffers, queued
before the range's own launches (no read-back: the host never waits for it).

The range counts the runs that close inside it; runs left open at its bottom are
dropped (the next range counts them whole) except in the last range, whose open
runs close at the matrix border. Recurrence counts: the warm-up's counts stay in
the carries (white lines under ``white_border=False`` need "a recurrence above")
and are subtracted once. The histograms are integer sums of the same lines as the
one-device run: bit-identical.

SYM (a symmetric matrix, every device on the SYM path): a range walks the upper
triangle of its rows, its rows' horizontal runs right of the diagonal, and joins each
of its columns ``j`` (``r0 <= j < r1``: the range holds that column's diagonal cell)
through the diagonal with row ``j``'s first and last runs (``rqa_symjoin``), as one
device joins every column. Columns right of the range need the carries the rows above
leave (warm-ups, as above: those cells are all above the diagonal); columns left of
it have no cell in the range. Recurrences: twice the range's (above the diagonal) plus
its diagonal cells.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.tuning import Params

from ..kernels.rqa_lines import RQA_LINES, WARM_MODES
from . import dnr
from .bands import MAX_IN_FLIGHT
from .dnr import Counts, _choose_paths, _device_state, _DevState, _Matrix, _Task

#: ranges per device the default split aims at: devices of different speed (a dynamic
#: queue evens them out with several each)
RANGES_PER_DEVICE = 8
#: ranges per device when every device is the same model: equal cells each, and no
#: range costs a second warm-up and carry set on the same device
ALIKE_RANGES_PER_DEVICE = 1
#: wall time a diagonal cell adds relative to a column cell on the SHARE path (the
#: diagonal launch gathers bits the vertical launch stored, and with OVL it runs in a
#: second queue beside the next block's verticals, so most of its time hides): the value
#: at which two H200s' last launches end closest together
DIAGONAL_COST = 0.15
#: SYM: wall time a row's horizontal walk and join add per upper-triangle cell relative
#: to the vertical launch's (their ratio on the H100 over the same cells)
HORIZONTAL_COST = 0.8
#: on GPUs, a row block's fixed time (its five or so launches' start, and the tail of
#: launches too narrow to fill the GPU) as that of this many more columns: the bottom
#: range of a SYM split holds many narrow blocks: cuts moved down from equal cells end
#: two H100s' ranges closer together; with the walk-ups a work-group per lane and the
#: row walks on a third queue, this value moves the cut by 4 blocks from equal cells at
#: N = 946,303. CPUs take none (a narrow launch there only ends sooner)
BLOCK_LANES = 3 << 15


@dataclass(frozen=True)
class RowRange:
    """Rows ``r0 .. r1 - 1`` over every lane; ``cells``: the cells its launches walk."""

    r0: int
    r1: int
    cells: int


def plan_ranges(m: _Matrix, vertical: bool, diag_ranges: list[tuple[int, int]], edge: int,
                n_devices: int, height: int | None = None,
                per_device: int = RANGES_PER_DEVICE, sym: bool = False,
                block_lanes: int = 0) -> list[RowRange]:
    """Ranges of whole row blocks, largest first: ``height`` rows each (rounded up to
    blocks), else about ``per_device`` ranges per device of equal time (column cells
    plus :data:`DIAGONAL_COST` per diagonal cell; the diagonals' cells lie mostly in
    the top rows, so equal heights would not balance them). ``sym``: the column cells
    are a block's columns from its first row on, and its rows' walks
    (:data:`HORIZONTAL_COST`) add as many. Each block adds ``block_lanes`` columns' time
    (its launches' fixed cost: :data:`BLOCK_LANES` on GPUs)."""
    blocks = -(-m.n_rows // edge)
    starts = np.arange(0, m.n_rows, edge)
    block_diag = block_diagonal_cells(m, diag_ranges, edge)
    heights = np.diff(np.append(starts, m.n_rows))
    if sym and vertical:  # columns j >= the block's first row (the launches' lanes)
        block_cols = heights * np.maximum(0, m.n_cols - starts)
        block_cells = (1 + HORIZONTAL_COST) * block_cols
    else:
        block_cols = heights * (m.n_cols if vertical else 0)
        block_cells = block_cols
    block_cells = block_cells + block_diag
    if height:
        per = -(-height // edge)
        cuts = list(range(0, blocks, per)) + [blocks]
    else:
        count = max(1, min(blocks, n_devices * per_device))
        cum = np.cumsum(block_cells - block_diag + DIAGONAL_COST * block_diag
                        + heights * block_lanes)
        total = float(cum[-1]) if blocks else 0.0
        # block b ends range r when the time up to it reaches r / count of the total
        ends = np.searchsorted(cum, [total * r / count for r in range(1, count)], side="left")
        cuts = sorted({0, blocks, *(int(e) + 1 for e in ends if int(e) + 1 < blocks)})
    out = []
    for b0, b1 in zip(cuts[:-1], cuts[1:], strict=False):
        out.append(RowRange(b0 * edge, min(m.n_rows, b1 * edge),
                            int((block_cols[b0:b1] + block_diag[b0:b1]).sum())))
    return sorted(out, key=lambda r: (-r.cells, r.r0))


def block_diagonal_cells(m: _Matrix, diag_ranges: list[tuple[int, int]], edge: int
                         ) -> np.ndarray:
    """Cells of the diagonals ``diag_ranges`` in each block of ``edge`` rows (int64),
    in closed form: row ``r`` holds ``max(0, min(hi, n_cols - r) - max(lo, -r))`` cells
    of ``lo <= k < hi``, linear in ``r`` between the rows ``n_cols - hi`` and ``-lo``, so
    the cells above any row are at most three arithmetic series, summed at every block
    boundary at once (no per-row arrays, which are slow at large N and lie on the
    critical path of a multi-GPU run)."""
    bounds = np.append(np.arange(0, m.n_rows, edge, dtype=np.int64), np.int64(m.n_rows))
    out = np.zeros(bounds.size - 1, np.int64)
    for lo, hi in diag_ranges:
        if hi > lo:
            above = _cells_above(bounds, lo, hi, m.n_rows, m.n_cols)
            out += np.diff(above)
    return out


def _cells_above(x: np.ndarray, lo: int, hi: int, n_rows: int, n_cols: int) -> np.ndarray:
    """Cells of diagonals ``lo <= k < hi`` in the rows above each ``x`` (rows ``0 .. x -
    1``): per linear piece ``[u, v)`` of ``g(r) = min(hi, n_cols - r) - max(lo, -r)``
    (slope -1, 0 or +1), the sum of ``max(0, g)`` over ``[u, min(x, v))``."""
    def g(r: int) -> int:
        return min(hi, n_cols - r) - max(lo, -r)
    knots = sorted({0, n_rows, *(k for k in (n_cols - hi, -lo) if 0 < k < n_rows)})
    total = np.zeros(x.size, np.int64)
    for u, v in zip(knots[:-1], knots[1:], strict=False):
        end = np.clip(x, u, v)
        g0 = g(u)
        slope = g(u + 1) - g0 if v - u > 1 else 0
        if slope == 0:
            total += (end - u) * max(0, g0)
        elif slope < 0:  # positive while r < u + g0
            c = np.clip(np.minimum(end, u + g0) - u, 0, None)
            total += c * g0 - c * (c - 1) // 2
        else:  # slope +1: positive from r1 on
            r1 = max(u, u - g0 + 1)
            c = np.clip(end - r1, 0, None)
            total += c * g(r1) + c * (c - 1) // 2
    return total


class RangeDevice:
    """One device: the SHARE row path over ranges, each range's carries found by the
    walk-up launches (:meth:`_warm`)."""

    def __init__(self, be: Backend, m: _Matrix, x: np.ndarray, y: np.ndarray,
                 x2: np.ndarray | None, y2: np.ndarray | None, params: Params | None,
                 edge: int | None, tcol: np.ndarray | None, vertical: bool,
                 diag_ranges: list[tuple[int, int]], n_fold: int, symmetric: bool = False):
        self.m, self.n_fold, self.vertical, self.diag_ranges = m, n_fold, vertical, diag_ranges
        self.st: _DevState = _device_state(be, m, x, y, x2, y2, params, edge, tcol)
        self.boxes: Any = None
        _choose_paths(self.st, m, vertical and m.n_cols > 0, symmetric, diag_ranges)
        #: SYM: the rows' first and last runs right of the diagonal (every range's rows)
        self.rows: _Task | None = None
        if self.st.params["SYM"]:
            self.rows = _Task("horizontal", 0, m.n_cols,
                              RQA_LINES.carry(be, self.st.params, "horizontal", m.n_rows))
        dnr._overlap(self.st, m)  # OVL: a range's diagonals in the device's second queue
        self.warm_events: list[Any] = []  # the walk-up launches (traces time them)
        self.ranges = 0
        self.seeds: list[Any] = []  # the seeded column counts of each warm-up (subtracted)
        self.open: list[tuple[_Task, RowRange]] = []  # every range's tasks (carries)
        self.window: deque = deque()  # events of the launches in flight
        self.bands = 0

    @property
    def be(self) -> Backend:
        return self.st.be

    @property
    def sym(self) -> bool:
        """Whether this device runs the SYM path (the caller keeps every device alike)."""
        return self.rows is not None

    def build(self) -> None:
        """Build the kernels (both paths) and the fold kernel in the calling thread."""
        for mode in ("vertical", "diagonal", *WARM_MODES.values()):
            self.st.kernels[mode] = RQA_LINES.kernel(self.be, self.st.params, self.m.spec, mode)
        if self.sym:
            modes = ("horizontal", "hjoin") if self.st.hrec is not None else ("horizontal",)
            for mode in modes:
                self.st.kernels[mode] = RQA_LINES.kernel(self.be, self.st.params, self.m.spec,
                                                         mode)
        dnr._fold(self.st, 1, final=True)

    def _tasks(self) -> list[_Task]:
        be, p, m = self.st.be, self.st.params, self.m
        tasks = []
        if self.vertical and m.n_cols:
            tasks.append(_Task("vertical", 0, m.n_cols, RQA_LINES.carry(be, p, "vertical",
                                                                        m.n_cols)))
        for lo, hi in self.diag_ranges:
            if hi > lo:
                tasks.append(_Task("diagonal", lo, hi,
                                   RQA_LINES.carry(be, p, "diagonal", hi - lo)))
        return dnr._head_first(tasks, p)

    def _warm(self, tasks: list[_Task], r0: int) -> None:
        """Set the carries of ``tasks`` (zeroed) at row ``r0``: one launch per task
        (MODE ``warmcol`` / ``warmdiag``) walks each lane of its warm interval up from
        row ``r0 - 1`` until its open run began, straight into the carry buffers, in the
        device's queue before the range's own launches: no read-back, no host wait. The
        recurrences the column carries were seeded with are summed on the device
        (:meth:`~pyedmcl.kernels.rqa_lines.RQALinesKernel.count_sums`) and subtracted when
        the range is collected. The walk-up kernels read no
        histogram: their histogram arguments are the range's own, never written."""
        be, m, st = self.st.be, self.m, self.st
        for task in tasks:
            a, b = _warm_interval(m, task, r0, self.sym)
            if b <= a:
                continue
            mode = WARM_MODES[task.mode]
            hist = (st.h32["v"], st.h32["w"]) if task.mode == "vertical" else (st.h32["d"],)
            if task.mode == "vertical" and self.boxes is None:
                self.boxes = RQA_LINES.row_boxes(be, m.spec, st.series[0], m.n_rows)
            go = RQA_LINES.launcher(be, st.params, m.spec, mode, series=st.series, thr=m.thr,
                                    thr2=m.thr2, n_rows=m.n_rows, n_cols=m.n_cols, w=m.w,
                                    carry0=task.lo, carry=task.bufs, hist=hist,
                                    kernel=st.kernels.get(mode), boxes=self.boxes)
            self.warm_events.append(go(r0, 0, a, b - a))
            if task.mode == "vertical":
                self.seeds.append(RQA_LINES.count_sums(be, task.bufs[2], a - task.lo, b - a))

    def run(self, rr: RowRange) -> tuple[None, Any]:
        """Enqueue every launch of ``rr`` (warm-up first when it does not start at row 0);
        returns (None, its last event) as :meth:`pyedmcl.rqa.bands.BandDevice.run`."""
        tasks = self._tasks()
        if rr.r0 > 0:
            self._warm(tasks, rr.r0)
        e, sym = self.st.params["EDGE"], self.sym
        chunked = sym and self.st.hrec is not None
        plan = [ln for t in tasks + ([self.rows] if sym else [])
                for ln in dnr._row_blocks(t, e, self.m, sym, chunked, rows=(rr.r0, rr.r1))]
        if self.st.params["SHARE"]:  # per row block: the launch that computes its cells,
            plan.sort(key=lambda ln: ln.key)  # then the others (a stable sort)
        dnr.begin_overlap(self.st, rr.r0)
        # the range's tasks: their bound launches are made once (dnr._launcher), not per
        # launch (~40 us of host time each, with two devices' threads sharing the GIL)
        self.st.tasks = tasks + ([self.rows] if sym else [])
        n0 = len(self.st.events)
        for ln in plan:
            dnr._launch(self.st, ln, self.m, self.n_fold)
            self.window.append(self.st.events[-1])
            if len(self.window) > MAX_IN_FLIGHT:
                self.st.be.wait(self.window.popleft())
        self.open += [(t, rr) for t in tasks]
        self.ranges += 1
        self.bands = self.ranges
        return None, (self.st.events[-1] if len(self.st.events) > n0 else None)

    def finish(self) -> None:
        dnr._fold(self.st, self.m.hlen, final=True)
        self.st.be.join_streams()  # the open runs and reads after it use queue 0 alone
        dnr.end_overlap(self.st)

    def collect(self) -> tuple[Counts, Counts, Counts, int]:
        """Histograms and recurrences of every range this device ran: device totals,
        plus the runs that end at the matrix border inside a range (columns: the last
        range; diagonal ``k``: the range holding its last row), minus the recurrences
        the warm-ups seeded."""
        be, m = self.st.be, self.m
        # the runs open where their lane ends: the columns' at the bottom border (the
        # last range's), the diagonals' that end inside this range; counted on the device
        # as one device's run counts them (dnr._finish_on_device), so no N-long carry is
        # read back and binned on the host
        added = False
        for task, rr in self.open:
            if task.mode == "diagonal":
                ka, kb = _diagonals_ending(m, task.lo, task.hi, rr)
                RQA_LINES.add_runs(be, task.bufs[0], kb - ka, self.st.h32["d"], ka - task.lo)
                added = True
            elif task.mode == "vertical" and self.sym:
                self._join(task, rr)
                added = True
            elif task.mode == "vertical" and rr.r1 == m.n_rows:
                n = task.hi - task.lo
                RQA_LINES.add_runs(be, task.bufs[0], n, self.st.h32["v"])
                if m.spec.white_border:  # open white runs touch the bottom border
                    RQA_LINES.add_runs(be, task.bufs[1], n, self.st.h32["w"])
                added = True
        if added:
            dnr._fold(self.st, m.hlen, final=True)
        cols = [task for task, _ in self.open if task.mode == "vertical"]
        # the recurrences its columns counted, and those the warm-ups seeded (subtracted)
        sums = [RQA_LINES.count_sums(be, t.bufs[2], 0, t.hi - t.lo) for t in cols]
        out, totals = dnr.read_totals(self.st, m, [*sums, *self.seeds])
        n_rec = sum(totals[:len(sums)]) - sum(totals[len(sums):])
        if self.sym:  # above the diagonal, mirrored; plus the ranges' diagonal cells
            rows = sum(rr.r1 - rr.r0 for t, rr in self.open if t.mode == "vertical")
            n_rec = 2 * n_rec + rows * int(dnr._diag_black(m))
        return out[0], out[1], out[2], n_rec

    def _join(self, task: _Task, rr: RowRange) -> None:
        """SYM: columns ``rr.r0 .. rr.r1 - 1`` (their diagonal cells are this range's)
        joined through the diagonal with their rows' first and last runs, counted into
        the 32-bit histograms (the column carries copied out at the range's first column:
        the join reads them from its first lane)."""
        be, m, n = self.be, self.m, rr.r1 - rr.r0
        col, a = [], rr.r0 - task.lo
        for buf in task.bufs:
            try:
                part = be.empty(n, np.uint32)
                be.copy_within(part, 0, buf, a, n)
            except NotImplementedError:  # a backend without device copies: via the host
                part = be.to_device(np.ascontiguousarray(be.to_host(buf)[a:a + n]))
            col.append(part)
        RQA_LINES.sym_join(be, tuple(col), self.rows.bufs, rr.r0, n, m.n_cols,
                           dnr._diag_black(m), m.spec.white_border, m.hlen,
                           self.st.h32["v"], self.st.h32["w"])


    def take(self) -> tuple[Counts, Counts, Counts, int]:
        """:meth:`collect` of the ranges run since the last ``take``; then clears the
        device totals and records (Dask: one range per call)."""
        self.finish()
        out = self.collect()
        for k in self.st.h64:
            self.st.be.fill(self.st.h64[k], 0)
        self.open.clear()
        self.seeds.clear()
        self.st.events.clear()
        self.warm_events.clear()
        self.window.clear()
        return out


def _warm_interval(m: _Matrix, task: _Task, r0: int, sym: bool) -> tuple[int, int]:
    """The lanes ``[a, b)`` of ``task`` a warm-up above row ``r0`` walks: diagonals with
    cells on both sides of ``r0`` (first row ``max(0, -k) < r0``, end ``n_cols - k > r0``
    and ``n_rows > r0``), under SYM the columns ``j >= r0`` (those left of the range have
    no cell in it), else every column."""
    if task.mode == "diagonal":
        if m.n_rows <= r0:
            return task.lo, task.lo
        a, b = max(task.lo, 1 - r0), min(task.hi, m.n_cols - r0)
    elif sym:
        a, b = max(task.lo, r0), task.hi
    else:
        a, b = task.lo, task.hi
    return a, max(a, b)


def _diagonals_ending(m: _Matrix, lo: int, hi: int, rr: RowRange) -> tuple[int, int]:
    """The diagonals ``k`` of ``[lo, hi)`` whose last cell lies in range ``rr``
    (``rr.r0 < end(k) <= rr.r1``, ``end(k) = min(n_rows, n_cols - k)`` the row after the
    diagonal's last cell), a run of lanes ``[ka, kb)`` since the end never grows with
    ``k`` (empty: ``ka == kb``)."""
    ka = lo if m.n_rows <= rr.r1 else max(lo, m.n_cols - rr.r1)
    kb = min(hi, m.n_cols - rr.r0)
    return ka, max(ka, kb)
