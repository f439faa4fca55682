"""FUSE: auto-RQA's cells and all three walks in one kernel per row block (decision 0120).

Each launch covers a row block's bands of ``FR`` rows over every range of ``FKW``
diagonals (MODE ``fused``, :mod:`pyedmcl.kernels.rqa_lines`): a warp per tile computes
the cells diagonal-major, walks the diagonals, the whole column words and the rows, and
leaves the first and last runs of each lane segment it holds. Three joins per launch
link those pieces into the diagonals' and columns' carries (from block to block, as
the other paths carry them) and into each row's runs at the diagonal and the right
border; after the last block the diagonals' open runs close at the border and
``rqa_symjoin`` joins each column through the diagonal with its row, as SYM does. The
histograms are those of the column-major path, bit for bit: the same cells, the same
runs.

Taken where the parameters ask for it (``FUSE``) on one device, for auto-RQA's
symmetric matrix over diagonals 1 .. n - 1 whose cells DMAJ could compute
(:meth:`~pyedmcl.kernels.rqa_lines.LineSpec.takes_fused`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.memory import is_oom
from clkernels.tuning import Params

from ..kernels.rqa_lines import RQA_LINES, WARM_MODES
from . import dnr
from .dnr import Histograms, _DevState, _Matrix, _Task
from .ranges import RowRange, _diagonals_ending, _warm_interval

log = logging.getLogger("pyedmcl.rqa.fused")


def applies(backends: list[Backend], m: _Matrix, params: Params | None, vertical: bool,
            symmetric: bool, diag_ranges: list[tuple[int, int]], order: str,
            tcol: np.ndarray | None) -> Params | None:
    """The parameters to run ``m`` fused with, or None where the fused path does not
    apply: FUSE asked for (given or tuned parameters) on one device, row order, auto-
    RQA's symmetric matrix over diagonals 1 .. n - 1, a spec it computes, and a band whose
    cells of one launch stay below the 32-bit histogram budget."""
    if len(backends) != 1 or not (vertical and symmetric and order == "row") or tcol is not None:
        return None
    n = m.n_rows
    if m.n_cols != n or n < 2 or [r for r in diag_ranges if r[1] > r[0]] != [(1, n)]:
        return None
    if not m.spec.takes_fused():
        return None
    be = backends[0]
    p = dict(params) if params is not None else dict(
        RQA_LINES.params_for(be, m.spec.tuning_spec(), n))
    if not p.get("FUSE", 0):
        return None
    tp = m.spec.fused_params(p, be.info)
    if tp["WG"] % 32 or tp["FR"] * n > dnr._u32_limit():
        return None
    return p


class FusedDevice:
    """One device's fused run over row blocks: the buffers, the bound launches, the lanes'
    carries (diagonals: their open black run; columns: black, white and whether a
    recurrence lies above; rows: their runs at the diagonal and the right border)."""

    def __init__(self, be: Backend, m: _Matrix, x: np.ndarray, params: Params,
                 edge: int | None):
        p = dict(params)
        if edge is not None:
            p["EDGE"] = int(edge)
        self.be, self.m = be, m
        tp = m.spec.fused_params(p, be.info)
        self.fr, self.fkw, self.wg = tp["FR"], tp["FKW"], tp["WG"]
        n, hlen, spec = m.n_rows, m.hlen, m.spec
        kernels = {name: be.kernel(RQA_LINES.template, tp, name)
                   for name in ("rqa_fused", "rqa_fjoin_diag", "rqa_fjoin_col", "rqa_fjoin_row")}
        with be.zero_batch():
            series = RQA_LINES.series(be, p, spec, x, x)
            h32 = {k: be.zeros(hlen, np.uint32) for k in ("d", "v", "w")}
            h64 = {k: be.zeros(hlen, np.uint64) for k in ("d", "v", "w")}
            # the carries in the layout of the walk-ups' (row ranges): diagonal k at k - 1
            self.dcarry = be.zeros(n, np.uint32)
            self.cols = tuple(be.zeros(n, np.uint32) for _ in range(3))   # black, white, above
            self.npts0 = be.zeros(n, np.uint32)
        self.head, self.tail = be.empty(n, np.uint32), be.empty(n, np.uint32)
        self.st = _DevState(be, dict(p, SHARE=0, OVL=0), series, h32, h64)
        per_warp = self.wg // 32
        self.per_warp = per_warp
        self.nbands = -(-n // self.fr)
        limit = dnr._u32_limit()
        self.nb = max(1, min(max(1, int(p["EDGE"]) // self.fr), (limit - 4 * n) // (self.fr * n)))
        tiles = -(-self.nb * -(-(n - 1) // self.fkw) // per_warp) * per_warp
        self.per_launch = tiles // per_warp
        pd = be.empty(tiles * self.fkw, np.uint32)
        pc = be.empty(tiles * 2 * (self.fr + self.fkw), np.uint32)
        pr = be.empty(tiles * 2 * self.fr, np.uint32)
        # each launch's groups' counts, from entry launch * per_launch on
        self.counts = be.zeros(-(-self.nbands // self.nb) * self.per_launch, np.uint32)
        self.counted = 0   # launches whose counts are not summed yet
        self.count_from = 0
        self.sums: list[Any] = []
        self.since = 0
        # a bin of length L holds at most (cells) / L runs: only the first bins can ever pass
        # 32 bits, so only those are folded between launches (the final fold takes all)
        self.fold_bins = min(hlen, n * (n - 1) // 2 // limit + 2)
        # the launches' arguments bound once; per launch only the block (and the counts'
        # offset) change (~40 us of host time a launch otherwise)
        i32 = np.int32
        cb, cw, cnz = self.cols
        self.bound = (
            be.bind(kernels["rqa_fused"], series[0], spec.dtype(m.thr), i32(n), i32(0),
                    i32(self.nb), h32["d"], h32["v"], h32["w"], self.counts, i32(0), pd, pc, pr),
            be.bind(kernels["rqa_fjoin_diag"], pd, i32(n), i32(0), i32(self.nb), self.dcarry,
                    h32["d"]),
            be.bind(kernels["rqa_fjoin_col"], pc, i32(n), i32(0), i32(self.nb),
                    i32(spec.white_border), cb, cw, cnz, h32["v"], h32["w"]),
            be.bind(kernels["rqa_fjoin_row"], pr, i32(n), i32(0), i32(self.nb), self.head,
                    self.tail, h32["v"], h32["w"]))

    def run_rows(self, r0: int, r1: int) -> Any:
        """Enqueue rows ``r0 .. r1 - 1`` (whole bands; ``r1`` may be past the matrix): a
        launch and its joins per block of bands, folds where a bin could pass 32 bits.
        Returns the last event."""
        be, m, st, fr, n = self.be, self.m, self.st, self.fr, self.m.n_rows
        i32 = np.int32
        fused, jdiag, jcol, jrow = self.bound
        limit = dnr._u32_limit()
        for b0 in range(r0 // fr, min(self.nbands, -(-r1 // fr)), self.nb):
            pending = dnr._speculating(st, m)
            nbl = min(self.nb, self.nbands - b0, -(-r1 // fr) - b0)
            a, b = b0 * fr, min(n, (b0 + nbl) * fr)
            groups = -(-nbl * -(-(n - 1 - a) // self.fkw) // self.per_warp)
            cells = (2 * n - 1 - a - b) * (b - a) // 2 + 4 * n   # rows a .. b - 1, joins
            if self.since + cells > limit:
                dnr._fold(st, self.fold_bins, final=True)
                self.since = 0
            if (self.counted + 1) * self.per_launch > self.counts.size:
                # ranges make more launches than blocks: the counts summed, then cleared
                # for reuse (in queue order: the sums read them first)
                self.count_sums()
                be.fill(self.counts, 0)
                self.counted = self.count_from = 0
            block = {3: i32(b0), 4: i32(nbl)}
            at = self.counted * self.per_launch
            st.events.append(be.launch_bound(fused, (groups * self.wg,), (self.wg,),
                                             {**block, 9: i32(at)}))
            self.counted += 1
            block = {2: i32(b0), 3: i32(nbl)}
            for bound, items in ((jdiag, n - 1), (jcol, n), (jrow, b - a)):
                st.events.append(be.launch_bound(bound, (-(-items // 64) * 64,), (64,), block))
            if pending:
                st.inflight.append(st.events[-1])
            st.launches += 4
            self.since += cells
        return st.events[-1] if st.events else None

    def count_sums(self) -> None:
        """The recurrences the launches since the last call counted, summed on the device."""
        k = self.counted - self.count_from
        if k:
            self.sums.append(RQA_LINES.count_sums(self.be, self.counts,
                                                  self.count_from * self.per_launch,
                                                  k * self.per_launch))
        self.count_from = self.counted

    def join_columns(self, j0: int, j1: int) -> None:
        """Columns ``j0 .. j1 - 1`` (their diagonal cells walked) joined through the
        diagonal with their rows' runs (``rqa_symjoin``, as SYM's)."""
        be, m = self.be, self.m
        if j1 <= j0:
            return
        col = []
        for buf in (*self.cols[:2], self.npts0):   # the join reads its lanes from entry 0
            part = be.empty(j1 - j0, np.uint32)
            be.copy_within(part, 0, buf, j0, j1 - j0)
            col.append(part)
        RQA_LINES.sym_join(be, tuple(col), (self.head, self.tail), j0, j1 - j0, m.n_cols,
                           dnr._diag_black(m), m.spec.white_border, m.hlen,
                           self.st.h32["v"], self.st.h32["w"])

    def totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The 64-bit histograms (read up to their last bin) and the recurrences above the
        diagonal counted so far."""
        dnr._fold(self.st, self.m.hlen, final=True)
        self.count_sums()
        (d, v, w), totals = dnr.read_totals(self.st, self.m, self.sums)
        return d, v, w, sum(totals)


class FusedRangeDevice(FusedDevice):
    """A device of the row-range runner (:func:`pyedmcl.rqa.multi.detect_bands`) on the
    fused path, as :class:`~pyedmcl.rqa.ranges.RangeDevice` on the others: a range's
    carries at its first row come from the same walk-ups; after its launches its
    diagonals that end inside it are counted and its columns (their diagonal cells are
    its) joined through the diagonal with its rows, before another range of the device
    takes the carries over. Runs open at its bottom are left to the range below."""

    sym = True
    fused = True

    def __init__(self, be: Backend, m: _Matrix, x: np.ndarray, params: Params,
                 edge: int | None):
        super().__init__(be, m, x, params, edge)
        self.ranges = 0
        self.rows = 0   # the rows of its ranges (their diagonal cells)
        n = m.n_rows
        self.tasks = (_Task("diagonal", 1, n, (self.dcarry,)), _Task("vertical", 0, n, self.cols))

    def build(self) -> None:
        """The kernels are built with the device (nothing left to build)."""

    def run(self, rr: RowRange) -> tuple[None, Any]:
        be, m, st = self.be, self.m, self.st
        n = m.n_rows
        if rr.r0 > 0:   # the carries at its first row, walked up from the row above
            for buf in (self.dcarry, *self.cols):
                be.fill(buf, 0)
            for task in self.tasks:
                a, b = _warm_interval(m, task, rr.r0, True)
                if b <= a:
                    continue
                mode = WARM_MODES[task.mode]
                hist = ((st.h32["v"], st.h32["w"]) if task.mode == "vertical"
                        else (st.h32["d"],))
                go = RQA_LINES.launcher(be, st.params, m.spec, mode, series=st.series,
                                        thr=m.thr, thr2=m.thr2, n_rows=n, n_cols=n, w=m.w,
                                        carry0=task.lo, carry=task.bufs, hist=hist)
                st.events.append(go(rr.r0, 0, a, b - a))
        self.run_rows(rr.r0, rr.r1)
        ka, kb = _diagonals_ending(m, 1, n, rr)
        RQA_LINES.add_runs(be, self.dcarry, kb - ka, st.h32["d"], ka - 1)
        self.join_columns(rr.r0, min(rr.r1, n))
        self.ranges += 1
        self.rows += min(rr.r1, n) - rr.r0
        return None, st.events[-1] if st.events else None

    def finish(self) -> None:
        self.be.flush()

    def collect(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        d, v, w, upper = self.totals()
        return d, v, w, 2 * upper + self.rows * int(dnr._diag_black(self.m))


def detect_fused(dev: FusedDevice) -> Histograms:
    """The line histograms of ``dev``'s symmetric matrix, fused (see the module's
    docstring) on its one device."""
    be, m = dev.be, dev.m
    n, hlen = m.n_rows, m.hlen
    t0 = time.perf_counter()
    dev.run_rows(0, n)
    # the diagonals' runs open at the border; each column joined through the diagonal
    # with its row (the recurrences are counted per launch: the join's are not read)
    dnr._fold(dev.st, hlen, final=True)
    RQA_LINES.add_runs(be, dev.dcarry, n - 1, dev.st.h32["d"])
    RQA_LINES.sym_join(be, (*dev.cols[:2], dev.npts0), (dev.head, dev.tail), 0, n, n,
                       dnr._diag_black(m), m.spec.white_border, hlen, dev.st.h32["v"],
                       dev.st.h32["w"])
    d, v, w, upper = dev.totals()
    out = [np.zeros(hlen, np.uint64) for _ in range(3)]
    for full, part in zip(out, (d, v, w), strict=True):
        full[:part.size] += part
    n_rec = 2 * upper + n * int(dnr._diag_black(m))
    return Histograms(out[0][:-1], out[1][:-1], out[2][:-1], n_rec, launches=dev.st.launches,
                      seconds=time.perf_counter() - t0, per_device=[be.info.selector],
                      events=list(dev.st.events), symmetric=True, used=(d.size, v.size, w.size),
                      fused=True)


def run(backends: list[Backend], m: _Matrix, x: np.ndarray, params: Params | None,
        edge: int | None, vertical: bool, symmetric: bool, diag_ranges: list[tuple[int, int]],
        order: str, tcol: np.ndarray | None) -> Histograms | None:
    """:func:`detect_fused` where :func:`applies`, else None (the caller's other paths,
    also where its buffers do not fit in the device's memory)."""
    p = applies(backends, m, params, vertical, symmetric, diag_ranges, order, tcol)
    if p is None:
        return None
    try:
        dev = FusedDevice(backends[0], m, x, p, edge)
    except Exception as exc:
        if not is_oom(exc):
            raise
        log.info("RQA: the fused path's buffers do not fit (%s); the other paths", exc)
        return None
    return detect_fused(dev)


dnr.FUSED_RUNNER = run
