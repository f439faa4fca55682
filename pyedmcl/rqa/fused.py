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

import time

import numpy as np

from clkernels import Backend
from clkernels.tuning import Params

from ..kernels.rqa_lines import RQA_LINES
from . import dnr
from .dnr import Histograms, _DevState, _Matrix


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


def detect_fused(be: Backend, m: _Matrix, x: np.ndarray, params: Params,
                 edge: int | None) -> Histograms:
    """The line histograms of the symmetric matrix of ``x`` (row series = column series,
    in the working dtype), fused (see the module's docstring)."""
    p = dict(params)
    if edge is not None:
        p["EDGE"] = int(edge)
    tp = m.spec.fused_params(p, be.info)
    fr, fkw, wg = tp["FR"], tp["FKW"], tp["WG"]
    n, hlen, spec = m.n_rows, m.hlen, m.spec
    kernels = {name: be.kernel(RQA_LINES.template, tp, name)
               for name in ("rqa_fused", "rqa_fjoin_diag", "rqa_fjoin_col", "rqa_fjoin_row")}
    with be.zero_batch():
        series = RQA_LINES.series(be, p, spec, x, x)
        h32 = {k: be.zeros(hlen, np.uint32) for k in ("d", "v", "w")}
        h64 = {k: be.zeros(hlen, np.uint64) for k in ("d", "v", "w")}
        dcarry, cb, cw = (be.zeros(n, np.uint32) for _ in range(3))
        npts0 = be.zeros(n, np.uint32)
    ctop = be.to_device(np.ones(n, np.uint32))   # every column starts at the top border
    head, tail = be.empty(n, np.uint32), be.empty(n, np.uint32)
    st = _DevState(be, p, series, h32, h64)
    per_warp = wg // 32
    nbands = -(-n // fr)
    limit = dnr._u32_limit()
    nb = max(1, min(max(1, int(p["EDGE"]) // fr), (limit - 4 * n) // (fr * n)))
    ranges0 = -(-(n - 1) // fkw)
    tiles = -(-nb * ranges0 // per_warp) * per_warp
    pd = be.empty(tiles * fkw, np.uint32)
    pc = be.empty(tiles * 2 * (fr + fkw), np.uint32)
    pr = be.empty(tiles * 2 * fr, np.uint32)
    blocks = range(0, nbands, nb)
    per_launch = tiles // per_warp
    counts = be.zeros(len(blocks) * per_launch, np.uint32)   # each launch's groups' counts
    # the launches' arguments bound once; per launch only the block (and the counts'
    # offset) change (~40 us of host time a launch otherwise)
    i32 = np.int32
    fused = be.bind(kernels["rqa_fused"], series[0], spec.dtype(m.thr), i32(n), i32(0), i32(nb),
                    h32["d"], h32["v"], h32["w"], counts, i32(0), pd, pc, pr)
    jdiag = be.bind(kernels["rqa_fjoin_diag"], pd, i32(n), i32(0), i32(nb), dcarry, h32["d"])
    jcol = be.bind(kernels["rqa_fjoin_col"], pc, i32(n), i32(0), i32(nb),
                   i32(spec.white_border), cb, cw, ctop, h32["v"], h32["w"])
    jrow = be.bind(kernels["rqa_fjoin_row"], pr, i32(n), i32(0), i32(nb), head, tail,
                   h32["v"], h32["w"])
    t0 = time.perf_counter()
    since = 0
    for li, b0 in enumerate(blocks):
        pending = dnr._speculating(st, m)
        nbl = min(nb, nbands - b0)
        r0, r1 = b0 * fr, min(n, (b0 + nbl) * fr)
        groups = -(-nbl * -(-(n - 1 - r0) // fkw) // per_warp)
        cells = (2 * n - 1 - r0 - r1) * (r1 - r0) // 2 + 4 * n   # rows r0 .. r1 - 1, joins
        if since + cells > limit:
            dnr._fold(st, hlen, final=True)
            since = 0
        block = {3: i32(b0), 4: i32(nbl)}
        st.events.append(be.launch_bound(fused, (groups * wg,), (wg,),
                                         {**block, 9: i32(li * per_launch)}))
        block = {2: i32(b0), 3: i32(nbl)}
        for bound, items in ((jdiag, n - 1), (jcol, n), (jrow, r1 - r0)):
            st.events.append(be.launch_bound(bound, (-(-items // 64) * 64,), (64,), block))
        if pending:
            st.inflight.append(st.events[-1])
        st.launches += 4
        since += cells
    sums = [RQA_LINES.count_sums(be, counts, 0, len(blocks) * per_launch)]
    # the diagonals' runs open at the border; each column joined through the diagonal
    # with its row (the recurrences are counted per launch: the join's are not read)
    dnr._fold(st, hlen, final=True)
    RQA_LINES.add_runs(be, dcarry, n - 1, h32["d"])
    RQA_LINES.sym_join(be, (cb, cw, npts0), (head, tail), 0, n, n, dnr._diag_black(m),
                       spec.white_border, hlen, h32["v"], h32["w"])
    dnr._fold(st, hlen, final=True)
    (d, v, w), totals = dnr.read_totals(st, m, sums)
    out = [np.zeros(hlen, np.uint64) for _ in range(3)]
    for full, part in zip(out, (d, v, w), strict=True):
        full[:part.size] += part
    n_rec = 2 * sum(totals) + n * int(dnr._diag_black(m))
    return Histograms(out[0][:-1], out[1][:-1], out[2][:-1], n_rec, launches=st.launches,
                      seconds=time.perf_counter() - t0, per_device=[be.info.selector],
                      events=list(st.events), symmetric=True, used=(d.size, v.size, w.size),
                      fused=True)


def run(backends: list[Backend], m: _Matrix, x: np.ndarray, params: Params | None,
        edge: int | None, vertical: bool, symmetric: bool, diag_ranges: list[tuple[int, int]],
        order: str, tcol: np.ndarray | None) -> Histograms | None:
    """:func:`detect_fused` where :func:`applies`, else None (the caller's other paths)."""
    p = applies(backends, m, params, vertical, symmetric, diag_ranges, order, tcol)
    return None if p is None else detect_fused(backends[0], m, x, p, edge)


dnr.FUSED_RUNNER = run
