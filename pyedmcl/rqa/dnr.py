"""Divide & Recombine line detection (Rawald et al.): scheduling, carryovers, recombination.

The recurrence matrix ``R[i][j]`` (row ``i``: embedded point of ``x``; column
``j``: point of ``y``) is divided into sub-matrices of ``edge`` rows and ``edge``
lanes, where a lane is a column (vertical lines) or a diagonal ``k = j - i``
(diagonal lines). Each sub-matrix is recomputed on the fly from the raw series
inside the line-detection kernel (``templates/rqa_lines.cl.mako``).

Carryover buffers hold, per column, the open black and white vertical runs and
the recurrence count, and, per diagonal, the open diagonal run. Runs only flow
from a row block to the next one, so

* the sub-matrices of one row block are independent (one launch, or several
  devices at once), and
* a lane band (a set of columns / diagonals) never depends on another band, so
  bands can be processed to completion on different devices.

Orders: ``"row"`` (row block by row block, all lanes of a band per launch) and
``"column"`` (one lane block at a time, all its row blocks). Every order, edge
length and device split gives bit-identical integer histograms. The carryovers
left after the last row block are flushed into the histograms on the host (the
recombination step adds the per-device 64-bit histograms).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.memory import is_oom
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

log = logging.getLogger("pyedmcl.rqa.dnr")
TEMPLATE = "rqa_lines.cl.mako"
_U32_SAFE = (1 << 32) - 1


def _u32_limit() -> int:
    """Cells a 32-bit launch histogram may take before a fold (tests lower it)."""
    return _U32_SAFE


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:  # the H200's tuned entry before SYM existed (SYM: CPU only so far)
        return {"VEC": 1, "WG": 32, "EDGE": 2048, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0,
                "WALK": 0}
    return {"VEC": 16, "WG": 4, "EDGE": 4096, "BITS": 2, "PH": 1024, "SHARE": 1, "SYM": 1,
            "WALK": 1}


def _walk(params: Params, info: DeviceInfo, wg: int) -> int:
    """WALK template value: given, else the device default (1 on CPUs, 0 on GPUs)."""
    if not params.get("BITS", 0) or _intel_walk_crash(params, info, wg):
        return 0
    return int(params.get("WALK", 0 if info.is_gpu else 1))


def _intel_walk_crash(params: Params, info: DeviceInfo, wg: int) -> bool:
    """Intel's CPU OpenCL compiler (2024.x) aborts the process building the WALK paths
    with direct private bins (PH >= 64) in work-groups of 16 or more (it vectorises over
    work-items); those builds use WALK=0 (same histograms)."""
    return info.runtime == "intel" and wg >= 16 and int(params.get("PH", 0)) >= 64


def _fits(p: Params, info: DeviceInfo) -> bool:
    return ((not p.get("SHARE", 0) or p.get("BITS", 0) == 2)
            and (not p.get("SYM", 0) or p.get("SHARE", 0))
            and (not p.get("WALK", 0) or p.get("BITS", 0))
            and (p.get("WALK", 0) != 2 or p.get("PH", 0) >= 64)
            and not (p.get("WALK", 0) and _intel_walk_crash(p, info, p["WG"]))
            and p["WG"] <= info.max_work_group_size and p["WG"] <= info.max_work_item_sizes[0]
            and 3 * hist_bins(info) * 4 <= info.local_mem_bytes)


def hist_bins(info: DeviceInfo) -> int:
    """Line lengths kept in the work-group-local histogram (longer ones go global)."""
    return 1024 if info.local_mem_bytes >= 3 * 1024 * 4 * 2 else 256


class RQALinesKernel(TunableKernel):
    """Tunable family: lanes per work-item (VEC), work-group size, sub-matrix edge."""

    name = "rqa_lines"
    template = TEMPLATE
    space = TuningSpace(
        params={"VEC": (1, 4, 8, 16), "WG": (4, 8, 16, 32, 64, 128, 256),
                "EDGE": (512, 1024, 2048, 4096), "BITS": (0, 1, 2), "PH": (0, 32, 1024),
                "SHARE": (0, 1), "SYM": (0, 1), "WALK": (0, 1, 2)},
        heuristic=_heuristic,
        constraint=_fits,
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        e = spec["E"]
        eb = "E1-2" if e <= 2 else "E3-8" if e <= 8 else "E9+"
        return f"{spec.get('REAL', 'float')}-{spec.get('METRIC', 'euclidean')}-{eb}"

    def default_specs(self):
        return [{"E": 5, "TAU": 3, "METRIC": "euclidean", "REAL": "float"}]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [4096]
        return [100_000] if info.is_gpu else [8192]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _LinesCase(backend, spec, size)


RQA_LINES = RQALinesKernel()


def _wg(mode: str, params: Params) -> int:
    """Work-group size of a launch: horizontal launches have only edge/64 work-items, each
    walking whole rows, so one per work-group lets the runtime balance them over cores."""
    return 1 if mode == "horizontal" else int(params["WG"])


@dataclass
class LineSpec:
    """What shapes the generated kernel (besides the tunables)."""

    E: int
    tau: int
    metric: str
    real: str  # "float" | "double"
    joint: bool = False
    theiler_matrix: bool = False
    white_border: bool = True

    def template_params(self, mode: str, params: Params, info: DeviceInfo) -> dict[str, Any]:
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "MODE": mode, "VEC": params["VEC"], "WG": _wg(mode, params),
                "HBINS": hist_bins(info), "JOINT": int(self.joint),
                "THEILER_MATRIX": int(self.theiler_matrix), "WBORDER": int(self.white_border),
                "BITS": int(params.get("BITS", 0)), "PH": int(params.get("PH", 0)),
                "CBITS": int(info.runtime == "pocl"), "SHARE": int(params.get("SHARE", 0)),
                "SYM": int(params.get("SYM", 0)), "WALK": _walk(params, info, _wg(mode, params))}


@dataclass
class Histograms:
    """Recombined global result of one D&R run (64-bit counts, index = length - 1)."""

    diagonal: np.ndarray
    vertical: np.ndarray
    white: np.ndarray
    n_recurrences: int
    launches: int = 0
    seconds: float = 0.0
    per_device: list[str] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    shared: bool = False  # SHARE path taken: diagonals gathered from the vertical bit words
    symmetric: bool = False  # SYM path taken: upper triangle only, verticals joined on the host


@dataclass
class _DevState:
    be: Backend
    params: Params
    x: Any
    y: Any
    x2: Any
    y2: Any
    h32: dict[str, Any]
    h64: dict[str, Any]
    cells_since_fold: int = 0
    launches: int = 0
    events: list[Any] = field(default_factory=list)


def _split(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split lanes [lo, hi) into ``parts`` contiguous bands (empty ones dropped)."""
    edges = np.linspace(lo, hi, parts + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def detect_lines(backends: list[Backend], x: np.ndarray, y: np.ndarray, thr: float, *,
                 spec: LineSpec, n_rows: int, n_cols: int, diag_ranges: list[tuple[int, int]],
                 x2: np.ndarray | None = None, y2: np.ndarray | None = None, thr2: float = 0.0,
                 w: int = 0, edge: int | None = None, order: str = "row",
                 params: Params | None = None, vertical: bool = True,
                 symmetric: bool = False) -> Histograms:
    """Run the D&R line detection on one or more devices and recombine the histograms.

    ``x``/``y`` are the raw row / column series (already in the working dtype),
    ``n_rows``/``n_cols`` their numbers of embedded points; ``diag_ranges`` lists
    half-open ranges of diagonals ``k = j - i`` to detect. Lanes are split into
    contiguous bands, one per backend; each band runs to completion independently.
    ``symmetric=True`` says the matrix is symmetric (auto- and joint RQA: ``x is y``,
    ``x2 is y2``); the ``SYM`` path then computes the upper triangle only.
    """
    if order not in ("row", "column"):
        raise ValueError(f"order={order!r} is not supported; allowed: 'row', 'column'")
    dt = np.float64 if spec.real == "double" else np.float32
    rdt = dt
    hlen = max(n_rows, n_cols) + 1
    states = []
    for be in backends:
        p = dict(params) if params is not None else dict(lookup(
            RQA_LINES, be.info, RQA_LINES.spec_bucket({"E": spec.E, "REAL": spec.real,
                                                       "METRIC": spec.metric}),
            RQA_LINES.size_bucket(max(n_rows, n_cols))).params)
        if edge is not None:
            p["EDGE"] = int(edge)
        vec = p["VEC"]
        pad = np.zeros(vec, dtype=dt)
        xd = be.to_device(np.ascontiguousarray(x, dtype=dt))
        yd = be.to_device(np.concatenate([pad, np.asarray(y, dtype=dt), pad]))
        if spec.joint:
            x2d = be.to_device(np.ascontiguousarray(x2, dtype=dt))
            y2d = be.to_device(np.concatenate([pad, np.asarray(y2, dtype=dt), pad]))
        else:
            x2d, y2d = xd, yd
        h32 = {k: be.to_device(np.zeros(hlen, np.uint32)) for k in ("d", "v", "w")}
        h64 = {k: be.to_device(np.zeros(hlen, np.uint64)) for k in ("d", "v", "w")}
        states.append(_DevState(be, p, xd, yd, x2d, y2d, h32, h64))

    # SHARE: the diagonal launches of a row block gather their bits from the column words
    # the vertical launch of that block stored; needs every column on one in-order queue.
    share = vertical and order == "row" and len(states) == 1 and n_cols > 0
    sbits = None
    for st in states:
        st.params["SHARE"] = int(share and bool(st.params.get("SHARE", 0))
                                 and st.params.get("BITS", 0) == 2)
        # SYM: a horizontal launch walks nrows whole rows; its 32-bit counts must not overflow
        st.params["SYM"] = int(st.params["SHARE"] and symmetric and n_rows == n_cols
                               and bool(st.params.get("SYM", 0))
                               and min(st.params["EDGE"], n_rows) * n_cols < _U32_SAFE)
        if st.params["SHARE"]:
            sstride = n_cols + 2 * (64 + st.params["VEC"])
            words = (min(st.params["EDGE"], n_rows) + 63) // 64
            try:  # EDGE x n_cols bits: the one buffer that grows with sub-matrix size and N
                sbits = st.be.to_device(np.zeros(words * sstride, np.uint64))
            except Exception as exc:  # too big for the device: the unshared path (same counts)
                if not is_oom(exc):
                    raise
                log.info("RQA: shared column bits (%d bytes) do not fit in device memory (%s); "
                         "diagonals recompute their cells", words * sstride * 8, exc)
                st.params["SHARE"] = st.params["SYM"] = 0
                continue
            kmin = min((lo for lo, hi in diag_ranges if hi > lo), default=0)
            st.params["_sbits"] = (sbits, np.int32(sstride), np.int32(kmin))
    # lane bands per device, for columns and for each diagonal range
    col_bands = _split(0, n_cols, len(states)) if vertical else []
    diag_bands: list[list[tuple[int, int]]] = [[] for _ in states]
    for lo, hi in diag_ranges:
        for di, band in enumerate(_split(lo, hi, len(states))):
            diag_bands[di].append(band)

    vcarry: dict[int, tuple] = {}
    dcarry: dict[tuple[int, int], Any] = {}
    tasks: list[list[tuple]] = [[] for _ in states]  # per device: (mode, band, carry) work lists
    for di, st in enumerate(states):
        be, vec = st.be, st.params["VEC"]
        if vertical and di < len(col_bands):
            lo, hi = col_bands[di]
            bufs = tuple(be.to_device(np.zeros(hi - lo + vec, np.uint32)) for _ in range(3))
            vcarry[di] = (lo, hi, bufs)
            tasks[di].append(("vertical", lo, hi, bufs))
        for lo, hi in diag_bands[di]:
            buf = be.to_device(np.zeros(hi - lo + vec, np.uint32))
            dcarry[(di, lo)] = (lo, hi, buf)
            tasks[di].append(("diagonal", lo, hi, (buf,)))
        if st.params["SYM"]:  # per row: its first (diagonal) and last (bottom) runs
            hrow = tuple(be.to_device(np.zeros(n_rows, np.uint32)) for _ in range(2))
            tasks[di].append(("horizontal", 0, n_cols, hrow))

    def launch(st: _DevState, mode: str, lo: int, hi: int, bufs: tuple, row0: int, nrows: int,
               lane0: int, nlanes: int) -> None:
        be, p = st.be, st.params
        cells = _cells(mode, row0, nrows, nlanes)
        if st.cells_since_fold + cells > _u32_limit():
            _fold(st, fold_bins)
        k = be.kernel(TEMPLATE, spec.template_params(mode, p, be.info), f"rqa_{mode}")
        per_item = 1 if mode == "horizontal" else p["VEC"]  # horizontal: one 64-row word
        wg = _wg(mode, p)
        gsz = round_up((nlanes + per_item - 1) // per_item, wg)
        hist = (st.h32["d"],) if mode == "diagonal" else (st.h32["v"], st.h32["w"])
        ev = be.launch(k, (gsz,), (wg,), st.x, st.y, st.x2, st.y2, rdt(thr), rdt(thr2),
                  np.int32(n_rows), np.int32(n_cols), np.int32(row0), np.int32(nrows),
                  np.int32(lane0), np.int32(nlanes), np.int32(w), np.int32(lo), *bufs, *hist,
                  *p.get("_sbits", ()))
        st.events.append(ev)
        st.cells_since_fold += cells
        st.launches += 1

    def _cells(mode: str, row0: int, nrows: int, nlanes: int) -> int:
        return nrows * (n_cols - row0) if mode == "horizontal" else nrows * nlanes

    import time

    t0 = time.perf_counter()
    # Enqueue work device by device in row-block waves so that all devices run at once
    # (launches are asynchronous; each device's queue keeps its own order).
    plans = []
    for di, st in enumerate(states):
        e = st.params["EDGE"]
        plan = []
        for mode, lo, hi, bufs in tasks[di]:
            if order == "row":
                for r0 in range(0, n_rows, e):
                    nr = min(e, n_rows - r0)
                    if mode == "horizontal":  # the row block's 64-row words
                        plan.append((r0, mode, lo, hi, bufs, r0, nr, 0, (nr + 63) // 64))
                        continue
                    # SYM: columns j < row0 have no cell above the diagonal in this block
                    start = max(lo, r0) if st.params["SYM"] and mode == "vertical" else lo
                    # one launch per row block covering the band, chunked for 32-bit counts
                    step = max(e, (_U32_SAFE // max(nr, 1)) // 2)
                    for l0 in range(start, hi, step):
                        plan.append((r0, mode, lo, hi, bufs, r0, nr, l0, min(step, hi - l0)))
            else:
                for l0 in range(lo, hi, e):
                    for r0 in range(0, n_rows, e):
                        nr = min(e, n_rows - r0)
                        plan.append((l0, mode, lo, hi, bufs, r0, nr, l0, min(e, hi - l0)))
        if st.params["SHARE"]:  # per row block: its vertical launches, then its diagonals
            plan.sort(key=lambda t: t[0])
        plans.append(plan)
    # A bin of length L holds at most cells / L lines, so only the first
    # total_cells / 2^32 bins can ever overflow 32 bits: intermediate folds touch
    # those only; the final fold takes every bin.
    total_cells = sum(_cells(t[1], t[5], t[6], t[8]) for plan in plans for t in plan)
    fold_bins = min(hlen, total_cells // _u32_limit() + 2)
    longest = max((len(p) for p in plans), default=0)
    for idx in range(longest):
        for di, st in enumerate(states):
            if idx < len(plans[di]):
                _, mode, lo, hi, bufs, r0, nr, l0, nl = plans[di][idx]
                launch(st, mode, lo, hi, bufs, r0, nr, l0, nl)
    for st in states:
        _fold(st, hlen, final=True)
    for st in states:
        st.be.finish()
    seconds = time.perf_counter() - t0

    # recombine: per-device 64-bit histograms plus the runs still open in the carryovers
    diag = np.zeros(hlen, np.uint64)
    vert = np.zeros(hlen, np.uint64)
    white = np.zeros(hlen, np.uint64)
    n_rec = 0
    for st in states:
        diag += st.be.to_host(st.h64["d"])
        vert += st.be.to_host(st.h64["v"])
        white += st.be.to_host(st.h64["w"])
    sym = any(s.params["SYM"] for s in states)
    for di, (lo, hi, bufs) in vcarry.items():
        be = states[di].be
        vr, wr, npts = (be.to_host(b)[: hi - lo].astype(np.int64) for b in bufs)
        if sym:
            hrow = next(t[3] for t in tasks[di] if t[0] == "horizontal")
            head, tail = (be.to_host(b).astype(np.int64) for b in hrow)
            diag_black = (rdt(thr) > 0 and (not spec.joint or rdt(thr2) > 0)
                          and not (spec.theiler_matrix and w > 0))
            v, wh, n_rec = _join_symmetric(vr, wr, npts, head, tail, diag_black,
                                           spec.white_border, hlen)
            vert += v
            white += wh
            continue
        vert += _runs_hist(vr, hlen)
        if spec.white_border:  # open white runs touch the bottom border
            white += _runs_hist(wr, hlen)
        n_rec += int(npts.sum())
    for (di, _), (lo, hi, buf) in dcarry.items():
        diag += _runs_hist(states[di].be.to_host(buf)[: hi - lo].astype(np.int64), hlen)
    return Histograms(diag[:-1], vert[:-1], white[:-1], n_rec,
                      launches=sum(s.launches for s in states), seconds=seconds,
                      per_device=[s.be.info.selector for s in states],
                      events=[e for s in states for e in s.events],
                      shared=any(s.params["SHARE"] for s in states), symmetric=sym)


def _join_symmetric(vr: np.ndarray, wr: np.ndarray, npts: np.ndarray, head: np.ndarray,
                    tail: np.ndarray, diag_black: bool, white_border: bool, hlen: int
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """Vertical runs of the full symmetric matrix that the SYM kernels left open.

    Column ``j`` reads (column ``j`` above the diagonal: its open run ``vr``/``wr``)
    + (cell ``(j, j)``: black unless the Theiler band is removed from the matrix)
    + (row ``j`` right of the diagonal: its first run ``head`` and, when the row
    has several runs, its last one ``tail``; ``length | colour << 31``). Runs of
    one colour are joined through the diagonal cell; a white run is counted when
    ``white_border`` or when it touches neither the top (row 0) nor the bottom.
    Returns the vertical and white histograms of these runs and the recurrence count.
    """
    n = vr.size
    j = np.arange(n, dtype=np.int64)
    below = n - 1 - j                        # cells of column j under the diagonal
    d = int(diag_black)
    a = np.where(vr > 0, vr, wr)             # open run at the diagonal (0: column 0)
    cu = (vr > 0).astype(np.int64)
    hl, hc = head & 0x7FFFFFFF, head >> 31
    tl, tc = tail & 0x7FFFFFFF, tail >> 31
    up, down = (a > 0) & (cu == d), (hl > 0) & (hc == d)
    runs = [  # (mask, colour, length, touches top, touches bottom)
        (np.ones(n, bool), np.full(n, d), 1 + np.where(up, a, 0) + np.where(down, hl, 0),
         (j == 0) | (up & (a == j)), (below == 0) | (down & (hl == below))),
        ((a > 0) & (cu != d), cu, a, a == j, np.zeros(n, bool)),
        ((hl > 0) & (hc != d), hc, hl, np.zeros(n, bool), hl == below),
        (tl > 0, tc, tl, np.zeros(n, bool), np.ones(n, bool)),
    ]
    vert = np.zeros(hlen, np.uint64)
    white = np.zeros(hlen, np.uint64)
    for m, c, ln, top, bot in runs:
        black = m & (c == 1)
        wh = m & (c == 0) & (white_border | ~(top | bot))
        vert += np.bincount(ln[black] - 1, minlength=hlen)[:hlen].astype(np.uint64)
        white += np.bincount(ln[wh] - 1, minlength=hlen)[:hlen].astype(np.uint64)
    return vert, white, 2 * int(npts.sum()) + n * d


def _runs_hist(runs: np.ndarray, hlen: int) -> np.ndarray:
    """Histogram (index = length - 1) of the positive run lengths in ``runs``."""
    r = runs[runs > 0]
    return np.bincount(r - 1, minlength=hlen)[:hlen].astype(np.uint64)


def _fold(st: _DevState, hlen: int, final: bool = False) -> None:
    """Add the first ``hlen`` bins of the 32-bit histograms into the 64-bit totals."""
    if st.cells_since_fold == 0 and not final:
        return
    be = st.be
    k = be.kernel(TEMPLATE, {"E": 1, "TAU": 1, "METRIC": "euclidean", "REAL": "float",
                             "MODE": "diagonal", "VEC": 1, "WG": 1, "HBINS": 1, "JOINT": 0,
                             "THEILER_MATRIX": 0, "WBORDER": 1, "BITS": 0, "PH": 0,
                             "CBITS": 0, "SHARE": 0, "SYM": 0, "WALK": 0},
                  "rqa_accumulate")
    wg = min(64, be.info.max_work_group_size)
    # histograms are indexed by length - 1 on the device; slot hlen-1 is unused padding
    for key in ("d", "v", "w"):
        be.launch(k, (round_up(hlen, wg),), (wg,), st.h32[key], st.h64[key], np.int32(hlen))
    st.cells_since_fold = 0


class _LinesCase(TuningCase):
    """Auto-RQA of a logistic-map series (E, tau from the spec, RR about 0.1)."""

    def __init__(self, backend: Backend, spec: dict[str, Any], size: int):
        self.backend = backend
        self.spec = LineSpec(spec["E"], spec["TAU"], spec["METRIC"], spec.get("REAL", "float"))
        n = size + (spec["E"] - 1) * spec["TAU"]
        s = np.empty(n)
        s[0] = 0.4
        for i in range(1, n):
            s[i] = 3.9 * s[i - 1] * (1 - s[i - 1])
        self.x = s
        self.n = size
        self.out: np.ndarray | None = None

    def run(self, params: Params) -> list[Any]:
        h = detect_lines([self.backend], self.x, self.x, 0.3 ** 2, spec=self.spec,
                         n_rows=self.n, n_cols=self.n, diag_ranges=[(1, self.n)],
                         params=params, symmetric=True)
        self.out = np.concatenate([h.diagonal, h.vertical, h.white, [h.n_recurrences]])
        return h.events

    def output(self) -> np.ndarray:
        assert self.out is not None
        return self.out
