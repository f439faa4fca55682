"""Divide & Recombine with several thresholds decided in one pass over the cells.

:func:`detect_lines_k` runs :func:`pyedmcl.rqa.dnr.detect_lines`' schedule once for K
thresholds (``LineSpec(nthr=K)``, :mod:`pyedmcl.rqa.lines_k`): each cell's
distance is computed once and decided against every threshold, and each threshold keeps
its own column words, carryovers and histograms, so its histograms are the ones a run
of that threshold alone gives, bit for bit (float32 with EXACT too: each threshold's
near cells are redone against its own float64 threshold). One device, row order.
:func:`recombine_k` is :func:`~pyedmcl.rqa.dnr._recombine` for such a run: the open
runs, SYM's joins, folds and extents of every threshold in one launch each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.tuning import Params

from ..kernels.rqa_lines import LineSpec
from . import lines_k as klines
from .dnr import Histograms, _DevState, _diag_black, _fold, _Matrix, _u32_limit, detect_lines

#: reads of a run's K-fold histograms larger than this many bytes are compacted on the
#: device first (each threshold's bins in use only); smaller ones are read whole
COMPACT_BYTES = 8 << 20


@dataclass(frozen=True)
class Thresholds:
    """The thresholds of a K-threshold run: ``thr`` in the working dtype (what the
    kernels compare with), and EXACT's float64 thresholds ``thr64`` and float32 bounds
    ``bounds`` (:func:`pyedmcl.rqa.exact.error_bound`), or None."""

    thr: np.ndarray
    thr64: np.ndarray | None = None
    bounds: np.ndarray | None = None


def detect_lines_k(backend: Backend, x: np.ndarray, y: np.ndarray, thresholds: Thresholds,
                   *, spec: LineSpec, n_rows: int, n_cols: int,
                   diag_ranges: list[tuple[int, int]], w: int = 0, edge: int | None = None,
                   params: Params | None = None, symmetric: bool = False,
                   exact: Any = None) -> list[Histograms]:
    """:func:`~pyedmcl.rqa.dnr.detect_lines` of every threshold of ``thresholds`` in one
    pass (``spec.nthr`` of them, ascending; each positive, so that every threshold's main
    diagonal decides alike): one histogram set per threshold, in their order. ``exact``: the
    float64 series (:class:`pyedmcl.rqa.exact.Exact`; its scalar thresholds unused)."""
    thr = np.asarray(thresholds.thr)
    if thr.ndim != 1 or thr.size != spec.nthr or spec.nthr < 2:
        raise ValueError(f"detect_lines_k: {thr.size} thresholds for a spec of nthr="
                         f"{spec.nthr}; give 2 .. {klines.MAX_THRESHOLDS}, one per threshold")
    if spec.nthr > klines.MAX_THRESHOLDS:
        raise ValueError(f"detect_lines_k: {spec.nthr} thresholds, more than "
                         f"{klines.MAX_THRESHOLDS} in one pass")
    if not np.all(thr > 0):
        raise ValueError("detect_lines_k: every threshold must be positive")
    if np.any(np.diff(thr) < 0) or (thresholds.thr64 is not None
                                    and np.any(np.diff(thresholds.thr64) < 0)):
        raise ValueError("detect_lines_k: the thresholds must ascend")
    out = detect_lines([backend], x, y, float(thr[0]), spec=spec, n_rows=n_rows,
                       n_cols=n_cols, diag_ranges=diag_ranges, w=w, edge=edge,
                       params=params, symmetric=symmetric, exact=exact,
                       thresholds=thresholds, recombine=recombine_k)
    return list(out)  # type: ignore[arg-type]


def recombine_k(states: list[_DevState], m: _Matrix) -> list[Histograms]:
    """The histograms of every threshold of a finished K-threshold run on its one device:
    open runs and SYM's joins counted and folded on the device, each threshold's bins in
    use read (:func:`~pyedmcl.rqa.dnr._recombine`, threshold by threshold)."""
    (st,) = states
    K, hlen = m.nthr, m.hlen
    nsum = _finish_k(st, m)
    be, h = st.be, st.h64
    rows = (h["hv"], h["hw"]) if "hv" in h else None
    ext = klines.collect(be, h["d"], h["v"], h["w"], rows, hlen, K, hlen)
    cols = [t for t in st.tasks if t.mode == "vertical"]
    if nsum is None:  # the recurrences each column counted
        sums = [klines.count_sums(be, t.bufs[2], t.hi - t.lo, K) for t in cols]
    else:  # SYM: the upper triangle's, per work-group of the join
        sums = [nsum]
    parts = [be.to_host_async(s) for s in sums]
    ends = be.to_host(ext).reshape(K, 3).astype(np.int64)  # behind every launch
    hists = [_read_bins(be, h[k], ends[:, i], hlen) for i, k in enumerate(("d", "v", "w"))]
    totals = np.zeros(K, np.uint64)
    for p in parts:
        totals += p().reshape(K, -1).sum(axis=1, dtype=np.uint64)
    n_cols = sum(t.hi - t.lo for t in cols)
    out = []
    for k in range(K):
        diag, vert, white = (np.zeros(hlen, np.uint64) for _ in range(3))
        d, v, w = (hh[k] for hh in hists)
        diag[:d.size] += d
        vert[:v.size] += v
        white[:w.size] += w
        if nsum is None:
            n_rec = int(totals[k])
        else:  # SYM: twice the upper triangle, plus a black diagonal
            n_rec = 2 * int(totals[k]) + n_cols * _diag_black(m)
        out.append(Histograms(diag[:-1], vert[:-1], white[:-1], n_rec, launches=st.launches,
                              per_device=[be.info.selector], events=list(st.events),
                              shared=bool(st.params["SHARE"]),
                              symmetric=bool(st.params["SYM"]),
                              overlapped=int(st.params.get("OVL", 0)),
                              used=(d.size, v.size, w.size)))
    return out


def _finish_k(st: _DevState, m: _Matrix) -> Any:
    """:func:`~pyedmcl.rqa.dnr._finish_on_device` of every threshold: the runs the
    carryovers hold open (or, SYM, joined through the diagonal) counted into the emptied
    32-bit histograms and folded. Returns SYM's per-work-group sums (None without SYM)."""
    K, hlen, be = m.nthr, m.hlen, st.be
    sym = bool(st.params["SYM"])
    open_lanes = sum((4 if sym and t.mode == "vertical" else 1) * (t.hi - t.lo)
                     for t in st.tasks if t.mode != "horizontal")
    if max(st.cells_since_fold.values(), default=0) + open_lanes > _u32_limit():
        _fold(st, hlen, final=True)
    nsum = None
    rows = next((t.bufs for t in st.tasks if t.mode == "horizontal"), None)
    for t in st.tasks:
        n = t.hi - t.lo
        if t.mode == "diagonal":
            klines.add_runs(be, t.bufs[0], n, st.h32["d"], K, hlen)
        elif t.mode == "vertical" and sym:
            nsum = klines.sym_join(be, t.bufs, rows, t.lo, n, m.n_cols, _diag_black(m),
                                   m.spec.white_border, hlen, st.h32["v"], st.h32["w"], K,
                                   hlen)
        elif t.mode == "vertical":
            klines.add_runs(be, t.bufs[0], n, st.h32["v"], K, hlen)
            if m.spec.white_border:  # open white runs touch the bottom border
                klines.add_runs(be, t.bufs[1], n, st.h32["w"], K, hlen)
    _fold(st, hlen, final=True)
    return nsum


def _read_bins(be: Backend, arr: Any, ends: Sequence[int], hlen: int) -> list[np.ndarray]:
    """Threshold k's bins ``0 .. ends[k] - 1`` of the K-fold device histogram ``arr``
    (threshold k's from ``k * hlen``): one read of the prefix that holds them all, or,
    where that is larger than :data:`COMPACT_BYTES` and the backend copies on the device,
    of the bins in use gathered into one array first."""
    K = len(ends)
    last = max((k * hlen + int(e) for k, e in enumerate(ends) if e), default=0)
    if last * arr.dtype.itemsize > COMPACT_BYTES and sum(ends):
        try:
            packed = be.empty(int(sum(ends)), arr.dtype)
            at = 0
            for k, e in enumerate(ends):
                be.copy_within(packed, at, arr, k * hlen, int(e))
                at += int(e)
            flat = be.to_host(packed)
            cuts = np.cumsum([0, *ends])
            return [flat[cuts[k]:cuts[k + 1]] for k in range(K)]
        except NotImplementedError:  # a backend without device copies: the prefix
            pass
    flat = be.to_host_async(arr, count=last)() if last else np.zeros(0, arr.dtype)
    return [flat[k * hlen:k * hlen + int(e)] for k, e in enumerate(ends)]
