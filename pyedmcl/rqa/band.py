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


class _Runs:
    """Maximal runs of many lanes, each lane a sequence of pieces (tile lane segments).

    ``first``/``last`` (lane, piece): the pieces' first and last runs as the kernels give
    them, ``plen`` the pieces' lengths, ``pos0`` their first position (row), ``valid``
    which pieces exist. A piece's first run joins the previous segment of its lane when
    that ends right before it in the same colour; its last run (if the piece is not one
    run) starts a new run. Gives every maximal run (``lane``, ``s``, ``e``, ``col``) and,
    per piece, the run holding its first (``first_id``) and last (``last_id``) cell.
    """

    def __init__(self, first: np.ndarray, last: np.ndarray, plen: Any, pos0: np.ndarray,
                 valid: np.ndarray):
        fl, fc = (first & 0x7FFFFFFF).astype(np.int64), (first >> 31).astype(np.int64)
        ll, lc = (last & 0x7FFFFFFF).astype(np.int64), (last >> 31).astype(np.int64)
        full = fl == plen
        start = np.stack([np.broadcast_to(pos0, fl.shape), pos0 + plen - ll], axis=-1)
        length = np.stack([fl, ll], axis=-1)
        col = np.stack([fc, lc], axis=-1)
        ok = np.stack([valid, valid & ~full], axis=-1)
        lane = np.broadcast_to(np.arange(first.shape[0])[:, None, None], ok.shape)
        seg2 = np.broadcast_to(np.array([False, True]), ok.shape)
        st, ln, co, la, s2 = (a[ok] for a in (start, length, col, lane, seg2))
        en = st + ln - 1
        new = np.ones(st.size, bool)
        new[1:] = s2[1:] | (la[1:] != la[:-1]) | (co[1:] != co[:-1]) | (st[1:] != en[:-1] + 1)
        gid = np.cumsum(new) - 1
        gs = np.flatnonzero(new)
        ge = np.append(gs[1:], st.size) - 1
        self.lane, self.s, self.e, self.col = la[gs], st[gs], en[ge], co[gs]
        ids = np.full(ok.shape, -1, np.int64)
        ids[ok] = gid
        self.first_id = ids[..., 0]
        self.last_id = np.where(ok[..., 1], ids[..., 1], ids[..., 0])


class _Windows:
    """Per-window histograms by difference arrays over the window index: a run (or a
    tile's histogram) inside windows ``klo .. khi`` is added at ``klo`` and removed at
    ``khi + 1``; the cumulative sum over windows gives every window's counts."""

    def __init__(self, nw: int, W: int, S: int):
        self.nw, self.W, self.S = nw, W, S
        self.diff = np.zeros((nw + 1) * W, np.int64)

    def krange(self, lo_row: np.ndarray, hi_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Windows ``k`` with ``lo_row <= k * S <= hi_row``."""
        return np.maximum(-(-lo_row // self.S), 0), np.minimum(hi_row // self.S, self.nw - 1)

    def add_runs(self, klo: np.ndarray, khi: np.ndarray, length: np.ndarray) -> None:
        m = klo <= khi
        klo, khi, li = klo[m], khi[m], length[m] - 1
        n = self.diff.size
        self.diff += np.bincount(klo * self.W + li, minlength=n)
        self.diff -= np.bincount((khi + 1) * self.W + li, minlength=n)

    def add_hists(self, klo: np.ndarray, khi: np.ndarray, hist: np.ndarray) -> None:
        m = klo <= khi
        klo, khi, h = klo[m], khi[m], hist[m].astype(np.float64)  # exact: counts < 2^53
        g = np.arange(h.shape[1])
        n = self.diff.size
        for k, sign in ((klo, 1), (khi + 1, -1)):
            idx = (k[:, None] * self.W + g[None, :]).ravel()
            self.diff += sign * np.rint(np.bincount(idx, weights=h.ravel(),
                                                    minlength=n)).astype(np.int64)

    def add_cut(self, length: np.ndarray, mask: np.ndarray) -> None:
        """Runs cut by a window's border: ``length`` (window, lane), where ``mask``."""
        k = np.broadcast_to(np.arange(self.nw)[:, None], length.shape)[mask]
        self.add_runs(k, k, length[mask])

    def hist(self) -> np.ndarray:
        return np.cumsum(self.diff.reshape(self.nw + 1, self.W), axis=0)[: self.nw]


def _tile_windows(lo: np.ndarray, hi: np.ndarray, sb: int, nw: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Windows ``k`` whose first tile ``k * sb`` lies in ``lo .. hi``."""
    return np.maximum(-(-lo // sb), 0), np.minimum(hi // sb, nw - 1)


def _cut(black: _Windows, white: _Windows | None, runs: _Runs, top: np.ndarray,
         bot: np.ndarray, first: np.ndarray, last: np.ndarray) -> None:
    """The runs each window cuts: ``top`` (window, lane) holds the lane's first cell in the
    window (position ``first``), ``bot`` its last (``last``); ``white`` None: white runs
    touching the border are not counted."""
    st, et, ct = runs.s[top], runs.e[top], runs.col[top]
    cut_t = st < first
    lt = np.minimum(et, last) - first + 1
    sb_, eb, cb = runs.s[bot], runs.e[bot], runs.col[bot]
    cut_b = (eb > last) & (sb_ >= first)
    lb = last - sb_ + 1
    for win, colour in ((black, 1), (white, 0)):
        if win is not None:
            win.add_cut(lt, cut_t & (ct == colour))
            win.add_cut(lb, cut_b & (cb == colour))


def _assemble(starts: np.ndarray, tiles: _Tiles, vs: TileSummary, ds: TileSummary, G: int,
              m: int, W: int, S: int, kmin: int, w: int, white_border: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per window: recurrences and diagonal, vertical, white histograms (window, W)."""
    nw = starts.size
    sb = S // G  # window step in tiles
    k0 = starts // G
    nb = tiles.vid.shape[0]
    ends = starts + W - 1
    black, white, diag = _Windows(nw, W, S), _Windows(nw, W, S), _Windows(nw, W, S)
    # -- tiles: interior runs and recurrences, in the windows k0 in [max(a,b) - m + 1, min(a,b)]
    a, b = tiles.va, tiles.vb
    klo, khi = _tile_windows(np.maximum(a, b) - m + 1, np.minimum(a, b), sb, nw)
    black.add_hists(klo, khi, vs.hb)
    white.add_hists(klo, khi, vs.hw)
    nrec = np.zeros(nw + 1, np.int64)
    mk = klo <= khi
    np.add.at(nrec, klo[mk], vs.nrec[mk])
    np.add.at(nrec, khi[mk] + 1, -vs.nrec[mk])
    nrec = np.cumsum(nrec)[:nw]
    klo, khi = _tile_windows(tiles.db - m + 1, tiles.da, sb, nw)
    diag.add_hists(klo, khi, ds.hb)
    # -- vertical runs across tile rows: column j, pieces a = j // G - m + 1 + o
    j = np.arange(int(ends[-1]) + 1)
    jb, jc = j // G, j % G
    o = np.arange(2 * m - 1)
    ar = jb[:, None] - (m - 1) + o[None, :]
    tid = tiles.vid[np.clip(ar, 0, nb - 1), (2 * m - 2 - o)[None, :]]
    valid = (ar >= 0) & (ar < nb) & (tid >= 0)
    tid = np.where(valid, tid, 0)
    runs = _Runs(vs.first[tid, jc[:, None]], vs.last[tid, jc[:, None]], G, ar * G, valid)
    ln = runs.e - runs.s + 1
    bl = runs.col == 1
    klo, khi = black.krange(np.maximum(runs.e, runs.lane) - W + 1, np.minimum(runs.s, runs.lane))
    black.add_runs(klo[bl], khi[bl], ln[bl])
    if not white_border:  # white runs touching the window's top or bottom are dropped
        klo, khi = white.krange(np.maximum(runs.e + 1, runs.lane) - W + 1,
                                np.minimum(runs.s - 1, runs.lane))
    white.add_runs(klo[~bl], khi[~bl], ln[~bl])
    jj = starts[:, None] + np.arange(W)[None, :]              # (window, column)
    ot = k0[:, None] - jb[jj] + m - 1                         # piece of the window's top row
    _cut(black, white if white_border else None, runs, runs.first_id[jj, ot],
         runs.last_id[jj, ot + m - 1], starts[:, None], ends[:, None])
    # -- diagonal runs d = qd * G + t0 along i: A(a) = tile (a, a + qd), lane t0 + G - 1,
    #    rows aG .. aG + G - t0 - 1; B(a) = tile (a, a + qd + 1), lane t0 - 1, the t0 rows after
    d = np.arange(kmin, W)
    if d.size:
        nd = d.size
        qd, t0 = d // G, d % G
        arow = np.arange(nb)
        ncol = tiles.did.shape[1]
        ta = tiles.did[arow[None, :], (qd + m - 1)[:, None]]
        tb = np.where((qd + m < ncol)[:, None],
                      tiles.did[arow[None, :], np.minimum(qd + m, ncol - 1)[:, None]], -1)
        va, vb = ta >= 0, (tb >= 0) & (t0 > 0)[:, None]
        ta, tb = np.where(va, ta, 0), np.where(vb, tb, 0)
        la, lb = (t0 + G - 1)[:, None], np.maximum(t0 - 1, 0)[:, None]

        def inter(u: Any, v: Any) -> np.ndarray:  # A(0), B(0), A(1), ... per diagonal
            return np.stack(np.broadcast_arrays(u, v), axis=-1).reshape(nd, 2 * nb)

        runs = _Runs(inter(ds.first[ta, la], ds.first[tb, lb]),
                     inter(ds.last[ta, la], ds.last[tb, lb]),
                     inter((G - t0)[:, None] + 0 * ta, t0[:, None] + 0 * tb),
                     inter(arow[None, :] * G + 0 * ta, arow[None, :] * G + (G - t0)[:, None]),
                     inter(va, vb))
        bl = runs.col == 1
        klo, khi = diag.krange(runs.e + d[runs.lane] - W + 1, runs.s)
        diag.add_runs(klo[bl], khi[bl], (runs.e - runs.s + 1)[bl])
        top = runs.first_id[np.arange(nd)[None, :], 2 * k0[:, None]]    # (window, diagonal)
        bot = runs.last_id[np.arange(nd)[None, :], 2 * (k0[:, None] + m - 1 - qd[None, :])]
        _cut(diag, None, runs, top, bot, starts[:, None], ends[:, None] - d[None, :])
    dh = 2 * diag.hist()
    if w == 0:
        dh[:, W - 1] += 1  # the main diagonal: one line of length W
    return nrec, dh, black.hist(), white.hist()


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
    nrec, dh, vh, wh = _assemble(starts, tiles, vs, ds, G, m, W, S, kmin, w, white_border)
    return [(int(nrec[k]), dh[k].astype(np.uint64), vh[k].astype(np.uint64),
             wh[k].astype(np.uint64)) for k in range(starts.size)]


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
