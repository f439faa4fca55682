"""Windowed RQA in one pass over the band of the recurrence matrix.

Window ``k`` is the square ``[kS, kS + W)^2`` of the auto-recurrence matrix (``W``:
window, ``S``: step). With ``G = gcd(W, S)`` every window is a union of ``m x m`` whole
``G x G`` tiles (``m = W / G``), and a tile lies in up to ``(m / (S / G))^2`` windows, so
computing each tile once (kernel family :mod:`pyedmcl.kernels.rqa_band`) does about
``W / S`` times fewer cells than one RQA per window.

Per tile and lane (column, or diagonal crossing the tile) the kernels return the lane's
first and last runs (length, colour) and add the runs touching neither lane end into the
tile's histograms. A window's line histograms are then exact:

* runs inside a tile's lane are inside every window holding the tile: the window's
  histograms are the sums of its tiles' histograms, plus
* the runs touching tile borders, joined here along each of the window's columns
  (tiles ``(k0 .. k0 + m - 1, b)``) and diagonals (alternating tiles ``(a, a + q)`` and
  ``(a, a + q + 1)`` for ``d = qG + t``), and cut at the window's border exactly where a
  single RQA of the window ends them (white runs touching its top or bottom border are
  dropped with ``white_border=False``).

Vertical lines use every tile of the window; diagonal lines the tiles on and above the
main diagonal (diagonals ``d >= max(w, 1)``, doubled, plus the main diagonal as one line
of length ``W`` when ``w = 0``), as :func:`pyedmcl.rqa.core.rqa` counts them. Host work is
``O(W^2 / G)`` per window, vectorised over windows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from math import gcd
from typing import Any

import numpy as np

from clkernels import Backend

from ..kernels.rqa_band import BandSpec, TileSummary, run_tiles
from .measures import compute_measures
from .result import band_cells

#: the band pass is used when the tile edge G = gcd(window, step) is at least this (host
#: work per window grows as W^2 / G; smaller G, or m = 1, use one RQA per window)
MIN_TILE = 32
_BATCH = 1 << 19  # window-lane elements per vectorised host step


def tile_edge(window: int, step: int) -> int:
    """The tile edge ``G = gcd(window, step)``: window starts and ends fall on multiples."""
    return gcd(int(window), int(step))


def band_applies(window: int, step: int) -> bool:
    """Whether the one-pass band is worth it: tiles of at least :data:`MIN_TILE` cells
    on a side, and windows that overlap (otherwise each window is its own pass anyway)."""
    return tile_edge(window, step) >= MIN_TILE and step < window


class _Tiles:
    """The tiles the windows cover: ids by (tile row a, offset b - a + m - 1)."""

    def __init__(self, starts: np.ndarray, m: int):
        k0 = starts
        nb = int(k0.max()) + m if k0.size else 0
        present = np.zeros((nb, 2 * m - 1), bool)
        for p in range(m):
            for q in range(m):
                present[k0 + p, q - p + m - 1] = True
        self.m = m
        self.vid = np.full(present.shape, -1, np.int64)
        self.vid[present] = np.arange(int(present.sum()))
        a, off = np.nonzero(present)
        self.va, self.vb = a, a + off - (m - 1)
        upper = present.copy()
        upper[:, : m - 1] = False
        self.did = np.full(present.shape, -1, np.int64)
        self.did[upper] = np.arange(int(upper.sum()))
        a, off = np.nonzero(upper)
        self.da, self.db = a, a + off - (m - 1)


def _run(bes: list[Backend], spec: BandSpec, mode: str, xs: np.ndarray, thr: float,
         ta: np.ndarray, tb: np.ndarray, w: int, kmin: int) -> TileSummary:
    """Tile summaries, the tile list split into one contiguous part per device."""
    parts = np.array_split(np.arange(ta.size), len(bes))

    def one(be: Backend, idx: np.ndarray) -> TileSummary:
        x = be.to_device(xs)
        return run_tiles(be, spec, mode, x, thr, ta[idx], tb[idx], w=w, kmin=kmin)

    if len(bes) == 1:
        return one(bes[0], parts[0])
    with ThreadPoolExecutor(len(bes)) as pool:
        res = list(pool.map(one, bes, parts))
    cat = [np.concatenate([getattr(r, f) for r in res]) for f in ("first", "last", "hb", "hw")]
    nrec = None if mode != "vertical" else np.concatenate([r.nrec for r in res])
    return TileSummary(*cat, nrec)


class _Chain:
    """Runs of many lanes joined piece by piece (vectorised), emitted into histograms."""

    def __init__(self, shape: tuple[int, int], hlen: int, whites: bool = True):
        self.whites = whites  # diagonal chains count black runs only
        self.ol = np.zeros(shape, np.int64)   # open run: length, colour, touches the top
        self.oc = np.zeros(shape, np.int64)
        self.ot = np.zeros(shape, bool)
        self.rows = np.arange(shape[0], dtype=np.int64)[:, None] * hlen
        self.hlen = hlen
        self.black = np.zeros(shape[0] * hlen, np.int64)
        self.white = np.zeros(shape[0] * hlen, np.int64)
        self.white_border = True

    def _emit(self, mask: np.ndarray, ln: np.ndarray, col: np.ndarray, top: np.ndarray,
              bottom: bool) -> None:
        b = mask & (col == 1)
        self.black += np.bincount((self.rows + ln - 1)[b], minlength=self.black.size)
        if not self.whites:
            return
        wh = mask & (col == 0)
        if not self.white_border:
            wh &= ~top if not bottom else np.zeros_like(wh)
        self.white += np.bincount((self.rows + ln - 1)[wh], minlength=self.white.size)

    def piece(self, first: np.ndarray, last: np.ndarray, plen: Any, valid: np.ndarray,
              start: bool) -> None:
        """Append one piece (a tile's lane segment of length ``plen``) to every valid lane;
        ``start``: the lanes' first piece (its first run touches the window's top)."""
        fl, fc = (first & 0x7FFFFFFF).astype(np.int64), (first >> 31).astype(np.int64)
        ll, lc = (last & 0x7FFFFFFF).astype(np.int64), (last >> 31).astype(np.int64)
        full = fl == plen
        if start:
            join = np.zeros_like(valid)
            ml, mt = fl, np.ones_like(valid)
        else:
            join = fc == self.oc
            ml, mt = np.where(join, self.ol + fl, fl), np.where(join, self.ot, False)
            self._emit(valid & ~join, self.ol, self.oc, self.ot, False)
        self._emit(valid & ~full, ml, fc, mt, False)
        self.ol = np.where(valid, np.where(full, ml, ll), self.ol)
        self.oc = np.where(valid, np.where(full, fc, lc), self.oc)
        self.ot = np.where(valid, full & mt, self.ot)

    def close(self) -> tuple[np.ndarray, np.ndarray]:
        """Emit the open runs (they touch the window's bottom border); the histograms."""
        self._emit(self.ol > 0, self.ol, self.oc, self.ot, True)
        n = self.rows.shape[0]
        return self.black.reshape(n, self.hlen), self.white.reshape(n, self.hlen)


def band_histograms(bes: list[Backend], xs: np.ndarray, thr: float, *, E: int, tau: int,
                    metric: str, real: str, fma: bool, theiler_matrix: bool, w: int,
                    white_border: bool, n_points: int, window: int, step: int
                    ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per window ``(n_recurrences, diagonal, vertical, white)`` histograms (index
    length - 1, ``window`` bins) of the auto-recurrence matrix of ``xs`` (the working
    dtype, ``n_points`` embedded points), equal to :func:`pyedmcl.rqa.core.rqa` of each
    window's samples (float64 data, or float32 data that is not re-centred per window)."""
    W, S = int(window), int(step)
    G = tile_edge(W, S)
    m = W // G
    starts = np.arange(0, n_points - W + 1, S, dtype=np.int64)
    k0 = starts // G
    tiles = _Tiles(k0, m)
    spec = BandSpec(E, tau, metric, real, G, fma=fma, theiler_matrix=theiler_matrix)
    kmin = max(w, 1)
    vs = _run(bes, spec, "vertical", xs, thr, tiles.va, tiles.vb, w, kmin)
    ds = _run(bes, spec, "diagonal", xs, thr, tiles.da, tiles.db, w, kmin)
    out: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    per = max(1, _BATCH // W)
    for b0 in range(0, k0.size, per):
        kb = k0[b0: b0 + per]
        out += _assemble(kb, tiles, vs, ds, G, m, W, kmin, w, white_border)
    return out


def _assemble(kb: np.ndarray, tiles: _Tiles, vs: TileSummary, ds: TileSummary, G: int,
              m: int, W: int, kmin: int, w: int, white_border: bool
              ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Histograms of the windows whose first tile row/column is ``kb``."""
    nw = kb.size
    hlen = W
    # -- vertical and white lines: column q of the window in tile column q // G
    q = np.arange(W)
    qb, qc = q // G, q % G
    ch = _Chain((nw, W), hlen)
    ch.white_border = white_border
    every = np.ones((nw, W), bool)
    for p in range(m):
        tid = tiles.vid[(kb + p)[:, None], (qb - p + m - 1)[None, :]]
        ch.piece(vs.first[tid, qc], vs.last[tid, qc], G, every, start=(p == 0))
    vert, white = ch.close()
    nrec = np.zeros(nw, np.int64)
    diag_in = np.zeros((nw, hlen), np.int64)
    for p in range(m):
        for pq in range(m):
            tid = tiles.vid[kb + p, pq - p + m - 1]
            vert[:, :G] += vs.hb[tid]
            white[:, :G] += vs.hw[tid]
            nrec += vs.nrec[tid]
            if pq >= p:
                diag_in[:, :G] += ds.hb[tiles.did[kb + p, pq - p + m - 1]]
    # -- diagonal lines: d = qd * G + t0 in pieces A (tile (a, a + qd), lane t0 + G - 1)
    #    and B (tile (a, a + qd + 1), lane t0 - 1), a = k0, k0 + 1, ...
    d = np.arange(kmin, W)
    diag = np.zeros((nw, hlen), np.int64)
    if d.size:
        qd, t0 = d // G, d % G
        ch = _Chain((nw, d.size), hlen, whites=False)
        ncol = tiles.did.shape[1]
        for u in range(m):
            va = np.broadcast_to(u <= m - 1 - qd, (nw, d.size))
            tid = tiles.did[(kb + u)[:, None], np.minimum(qd + m - 1, ncol - 1)[None, :]]
            tid = np.where(va, tid, 0)
            ch.piece(ds.first[tid, t0 + G - 1], ds.last[tid, t0 + G - 1], G - t0, va,
                     start=(u == 0))
            vb = np.broadcast_to((t0 > 0) & (u <= m - 2 - qd), (nw, d.size))
            if not vb.any():
                continue
            tid = tiles.did[(kb + u)[:, None], np.minimum(qd + m, ncol - 1)[None, :]]
            tid = np.where(vb, tid, 0)
            ch.piece(ds.first[tid, np.maximum(t0 - 1, 0)], ds.last[tid, np.maximum(t0 - 1, 0)],
                     t0, vb, start=False)
        diag, _ = ch.close()
    diag = 2 * (diag + diag_in)
    if w == 0:
        diag[:, W - 1] += 1  # the main diagonal: one line of length W
    return [(int(nrec[i]), diag[i].astype(np.uint64), vert[i].astype(np.uint64),
             white[i].astype(np.uint64)) for i in range(nw)]


def band_rows(hists: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]], W: int, w: int,
              theiler_matrix: bool, l_min: int, v_min: int, w_min: int
              ) -> list[dict[str, float]]:
    """Every measure per window from :func:`band_histograms`."""
    n_cells = W * W - (band_cells(W, w) if theiler_matrix else 0)
    rows = []
    for n_rec, d, v, wh in hists:
        row = compute_measures(n_rec, n_cells, d, v, wh, l_min, v_min, w_min)
        row.update(n_recurrences=n_rec, n_cells=n_cells)
        rows.append(row)
    return rows
