"""RQA measures from line-length histograms (pure NumPy, float64).

A histogram ``P`` is indexed by ``length - 1``: ``P[0]`` counts lines of length 1.
Definitions (identical to PyRQA 8 and pyunicorn, which agree on them):

* ``RR = n_recurrences / n_cells``
* ``DET = sum_{l>=l_min} l P(l) / sum_{l>=1} l P(l)`` -- the denominator is the
  number of recurrence points on the diagonals that are analysed (outside the
  Theiler window), not ``RR * n_cells``.
* ``L = sum_{l>=l_min} l P(l) / sum_{l>=l_min} P(l)``; ``L_max`` = longest line
  (over all lengths); ``DIV = 1 / L_max``; ``L_entr = -sum p ln p`` with
  ``p = P(l) / sum_{l>=l_min} P(l)`` over ``l >= l_min`` (Shannon, nats).
* ``LAM, TT, V_max, V_entr`` likewise on the vertical histogram with ``v_min``.
* ``W`` (mean recurrence time), ``W_max``, ``W_div = 1/W_max``, ``W_entr`` on the
  white-vertical histogram with ``w_min``.
* ``RTE`` (recurrence-time entropy): ``W_entr / ln(W_max)``, the Shannon entropy of the
  recurrence times ``T >= w_min`` (white vertical line lengths) normalised by the largest
  entropy of times up to the longest one (the CRP toolbox's ``rpde``, the recurrence
  period density entropy of Little et al. 2007; in [0, 1]); ``nan`` when ``W_max <= 1``.
  RecurrenceAnalysis.jl documents its ``RTE`` as this normalised measure, but its code
  returns the unnormalised entropy (``W_entr`` here) of its own recurrence times
  (distances between the midpoints of consecutive vertical lines, border gaps left out),
  which line-length histograms cannot give.
* ``DET_RR = DET / RR`` and ``LAM_DET = LAM / DET``.

A ratio whose denominator is zero is ``nan`` (``DIV``/``W_div`` without lines too).
pyunicorn adds 1e-8 to every denominator, so it reports 0 there; PyRQA divides in
float32 with NumPy's errors silenced: ``nan`` for 0/0 and ``inf`` for ``DIV``/``W_div``
without lines (docs/rqa_internals.md, "Measures and their denominators").
"""

from __future__ import annotations

import math

import numpy as np

from .._bands import map_pieces

MEASURES = ("RR", "DET", "L", "L_max", "DIV", "L_entr", "LAM", "TT", "V_max", "V_entr",
            "W", "W_max", "W_div", "W_entr", "RTE", "DET_RR", "LAM_DET")


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else float("nan")


def line_stats(hist: np.ndarray, l_min: int, nz: np.ndarray | None = None) -> dict[str, float]:
    """Points in lines >= l_min, all points in lines, number of lines >= l_min, max, entropy.

    Works on the nonzero bins only: a histogram has N bins but few distinct line lengths;
    ``nz``: those bins, ascending, where the caller knows them (no pass over the N bins)."""
    h = np.asarray(hist)
    if nz is None:  # the lengths that occur, ascending (through a bool mask)
        nz = np.flatnonzero(h != 0)
    counts = h[nz].astype(np.int64)  # counts and l * P(l) <= N^2 fit int64 exactly
    lengths = nz.astype(np.int64) + 1
    lmax = int(lengths[-1]) if lengths.size else 0
    pts_all = int((counts * lengths).sum())
    keep = lengths >= l_min
    sel = counts[keep]
    pts_min = int((sel * lengths[keep]).sum())
    n_min = int(sel.sum())
    p = sel.astype(np.float64)  # the nonzero bins >= l_min, in length order
    entr = float(-(p / n_min * np.log(p / n_min)).sum()) if n_min else 0.0
    return {"points_min": pts_min, "points_all": pts_all, "lines_min": n_min, "max": lmax,
            "entropy": entr}


def compute_measures(n_rec: int, n_cells: int, diag: np.ndarray, vert: np.ndarray,
                     white: np.ndarray, l_min: int = 2, v_min: int = 2, w_min: int = 2,
                     nonzero: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                     ) -> dict[str, float]:
    """Every measure of :data:`MEASURES` from the three histograms and the counts
    (``nonzero``: their nonzero bins, ascending, where known)."""
    nzd, nzv, nzw = (None, None, None) if nonzero is None else nonzero
    d = line_stats(diag, l_min, nzd)
    v = line_stats(vert, v_min, nzv)
    w = line_stats(white, w_min, nzw)
    rr = _ratio(n_rec, n_cells)
    det = _ratio(d["points_min"], d["points_all"])
    lam = _ratio(v["points_min"], v["points_all"])
    return {
        "RR": rr,
        "DET": det,
        "L": _ratio(d["points_min"], d["lines_min"]),
        "L_max": d["max"],
        "DIV": _ratio(1, d["max"]),
        "L_entr": d["entropy"],
        "LAM": lam,
        "TT": _ratio(v["points_min"], v["lines_min"]),
        "V_max": v["max"],
        "V_entr": v["entropy"],
        "W": _ratio(w["points_min"], w["lines_min"]),
        "W_max": w["max"],
        "W_div": _ratio(1, w["max"]),
        "W_entr": w["entropy"],
        "RTE": _ratio(w["entropy"], math.log(w["max"])) if w["max"] else float("nan"),
        "DET_RR": _ratio(det, rr) if rr == rr else float("nan"),
        "LAM_DET": _ratio(lam, det) if det == det else float("nan"),
    }


def entropies(vals: np.ndarray, start: np.ndarray, count: np.ndarray, n_min: np.ndarray,
              scale: float | np.ndarray = 1.0, tail: np.ndarray | None = None) -> np.ndarray:
    """Per row (and kind: ``start``, ``count``, ``n_min``, ``tail`` of shape ``(S,)`` or
    ``(S, K)``, ``scale`` a number or one per kind), :func:`line_stats`' entropy of its
    line counts: ``scale * vals[start : start + count]`` (its nonzero bins >= l_min, in
    length order), then a count of 1 where ``tail`` (a last bin), over ``n_min`` lines;
    0 where ``n_min`` is 0. Each value is the 1-D call's bit for bit: the terms ``q ln q``
    of the segments, in the order of their starts, lie end to end in one contiguous array
    (the same elementwise division, log and product as the 1-D call's array), each
    segment's terms summed in numpy's pairwise order (:func:`_piece`); by pieces of
    :data:`PIECE_VALUES` values, which stay in cache through every step, on threads."""
    shape = np.shape(start)
    st = np.asarray(start, np.int64).ravel()
    cnt = np.asarray(count, np.int64).ravel()
    nm = np.asarray(n_min, np.float64).ravel()
    out = np.zeros(st.size)
    tl = np.zeros(st.size, bool) if tail is None else np.asarray(tail, bool).ravel()
    sc = np.broadcast_to(np.asarray(scale, np.float64), shape).ravel()
    live = np.flatnonzero(nm > 0)
    if not live.size:
        return out.reshape(shape)
    live = live[np.argsort(st[live], kind="stable")]
    st, cnt, nm, tl, sc = st[live], cnt[live], nm[live], tl[live], sc[live]
    off = np.zeros(live.size + 1, np.int64)
    np.cumsum(cnt, out=off[1:])
    if live.size > 1 and not np.array_equal(st[1:], st[:-1] + cnt[:-1]):
        vals = vals[np.repeat(st - off[:-1], cnt) + np.arange(off[-1])]  # gaps: gathered
    else:
        vals = vals[st[0]:st[0] + off[-1]]
    ends = np.searchsorted(off, np.arange(0, off[-1], PIECE_VALUES)[1:], "right") - 1
    cuts = np.unique(np.r_[0, ends, live.size])

    pow2 = bool(np.all(np.frexp(sc)[0] == 0.5))
    fn = _piece if pow2 and _reduceat_pairwise() else _fallback_piece

    def piece(ab: tuple[int, int]) -> None:
        a, b = ab
        out[live[a:b]] = -fn(vals[off[a]:off[b]], cnt[a:b], nm[a:b], sc[a:b], tl[a:b])

    map_pieces(piece, list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)))
    return out.reshape(shape)


#: values of one piece of :func:`entropies`: pieces of this size keep the numpy calls
#: long enough that threads computing several launches' measures do not queue for the
#: GIL between short calls (smaller pieces, which stay in a core's cache, were slower
#: on a 16-core host: bench/rqa_batch_phases.py)
PIECE_VALUES = 1 << 18


def _piece(v: np.ndarray, cnt: np.ndarray, nm: np.ndarray, sc: np.ndarray,
           tl: np.ndarray) -> np.ndarray:
    """Each segment's sum of ``q ln q`` (:func:`entropies`), the segments' values ``v``
    end to end. Each segment's slots: a count of 1 over 1 first (its term ``1 ln 1`` is
    +0.0, which changes no sum of these terms: none is -0.0), its values
    over ``n_min / scale`` (``scale`` a power of two: the same quotient as ``scale *
    value / n_min``, both exact operands of one rounding), then its tail, 1 over
    ``n_min``; one division, log and product over all slots, then the sums."""
    k = cnt.size
    first = np.zeros(k, np.int64)
    np.cumsum(cnt[:-1], out=first[1:])
    t = np.flatnonzero(tl)
    # the slots inserted, in segment order (a tail and the next segment's first slot, or
    # a segment of no values' own tail, go in at one place in the order given)
    order = np.argsort(np.concatenate([2 * np.arange(k), 2 * t + 1]), kind="stable")
    at = np.concatenate([first, first[t] + cnt[t]])[order]
    x = np.insert(v, at, 1)
    div = np.empty((k, 3))
    div[:, 0], div[:, 1], div[:, 2] = 1.0, nm / sc, nm
    reps = np.empty((k, 3), np.int64)
    reps[:, 0], reps[:, 1], reps[:, 2] = 1, cnt, tl
    d = np.repeat(div.ravel(), reps.ravel())
    q = np.divide(x, d)
    q *= np.log(q, out=d)
    return np.add.reduceat(q, first + np.arange(k) + np.searchsorted(t, np.arange(k)))


def _fallback_piece(v: np.ndarray, cnt: np.ndarray, nm: np.ndarray, sc: np.ndarray,
                    tl: np.ndarray) -> np.ndarray:
    """:func:`_piece` by :func:`pairwise_rows` (any scales; reduceat's rule unchecked)."""
    q = np.multiply(v, np.repeat(sc, cnt), dtype=np.float64)  # (exact: counts < 2^53)
    q /= np.repeat(nm, cnt)
    q *= np.log(q)
    first = np.zeros(cnt.size, np.int64)
    np.cumsum(cnt[:-1], out=first[1:])
    t = np.flatnonzero(tl)
    tq = 1.0 / nm[t]  # a tail's term, after its segment's values
    tq *= np.log(tq)
    q = np.insert(q, first[t] + cnt[t], tq)
    return pairwise_rows(q, first + np.searchsorted(t, np.arange(cnt.size)), cnt + tl)


_REDUCEAT: list[bool] = []


def _reduceat_pairwise() -> bool:
    """Whether ``np.add.reduceat`` sums a segment as its first value plus numpy's
    pairwise sum of the others (this numpy's rule, checked once on segments of 1 to 300
    values and two longer ones against :func:`pairwise_rows`): then a zero put first
    gives the segment's pairwise sum, as ``sum`` takes it (a sum that is not -0.0)."""
    if not _REDUCEAT:
        rng = np.random.default_rng(0)
        n = np.r_[np.arange(1, 301), 1000, 8193]
        first = np.r_[0, np.cumsum(n)[:-1]]
        a = rng.standard_normal(int(n.sum())) * np.exp2(rng.integers(-30, 30, int(n.sum())))
        got = a[first] + pairwise_rows(a, first + 1, n - 1)
        _REDUCEAT.append(bool(np.array_equal(np.add.reduceat(a, first), got)))
    return _REDUCEAT[0]


#: numpy's pairwise summation: rows up to this many values are summed in 8 accumulators
PW_BLOCK = 128


def pairwise_rows(a: np.ndarray, first: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``a[first[i] : first[i] + n[i]].sum()`` for every ``i``, bit for bit numpy's sum of
    that 1-D float64 slice, vectorised over the slices: numpy sums fewer than 8 values one
    after the other, up to :data:`PW_BLOCK` in 8 accumulators (``r[j]`` the values
    ``j, j + 8, ...`` of the whole blocks of 8, combined as ``((r0 + r1) + (r2 + r3)) +
    ((r4 + r5) + (r6 + r7))``, then the rest one by one) and more as the sums of their
    two halves, the first ``n // 2`` rounded down to a multiple of 8 values."""
    first, n = np.asarray(first, np.int64), np.asarray(n, np.int64)
    out = np.empty(n.size)
    big = n > PW_BLOCK
    if big.any():
        h = n[big] // 2
        h -= h % 8
        f = first[big]
        out[big] = pairwise_rows(a, f, h) + pairwise_rows(a, f + h, n[big] - h)
    few = np.flatnonzero(n < 8)
    if few.size:  # padded with -0.0, which adds nothing (not even to a -0.0 sum)
        j = np.arange(7)
        take = j < n[few, None]
        block = np.where(take, a[np.where(take, first[few, None] + j, 0)], -0.0)
        out[few] = block.sum(axis=1)  # numpy's own loop: 0 + the values, in order
    mid = np.flatnonzero((n >= 8) & ~big)
    if mid.size:
        out[mid] = _eight_accumulators(a, first[mid], n[mid])
    return out


def _eight_accumulators(a: np.ndarray, first: np.ndarray, n: np.ndarray) -> np.ndarray:
    """numpy's pairwise sum of slices of 8 to :data:`PW_BLOCK` values (:func:`pairwise_rows`)."""
    j = np.arange(8)
    blocks = n // 8
    r = a[first[:, None] + j]
    for b in range(1, int(blocks.max())):
        on = np.flatnonzero(blocks > b)
        r[on] += a[first[on, None] + 8 * b + j]
    res = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    end = first + 8 * blocks
    for i in range(7):
        on = np.flatnonzero(n % 8 > i)
        res[on] += a[end[on] + i]
    return res


def _rows_stats(H: np.ndarray, l_min: int) -> dict[str, np.ndarray]:
    """:func:`line_stats` of every row of the histograms ``H`` (rows, bins), each value
    that of the row alone bit for bit (the integer sums are exact; the entropies:
    :func:`entropies`)."""
    H = np.asarray(H)
    S, L = H.shape
    lengths = np.arange(1, L + 1, dtype=np.int64)
    nz = H != 0
    last = L - np.argmax(nz[:, ::-1], axis=1)
    lmax = np.where(nz.any(axis=1), last, 0).astype(np.int64)
    counts = H.astype(np.int64)
    k0 = max(int(l_min) - 1, 0)
    kept = counts[:, k0:]
    mask = nz[:, k0:]
    per = mask.sum(axis=1)
    n_min = kept.sum(axis=1)
    start = np.concatenate([[0], np.cumsum(per)[:-1]]).astype(np.int64)
    vals = kept[mask].astype(np.float64)  # row by row, in length order
    return {"points_min": kept @ lengths[k0:], "points_all": counts @ lengths,
            "lines_min": n_min, "max": lmax, "entropy": entropies(vals, start, per, n_min)}


def _ratios(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a / b`` in float64 per element, ``nan`` where ``b`` is 0 (:func:`_ratio`)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1.0), np.nan)


def _logs(m: np.ndarray) -> np.ndarray:
    """``math.log`` of each longest line (0 where there is none), as :func:`compute_measures`
    takes it: by ``math.log`` once per distinct length, since numpy's vector ``log`` need not
    round as libm does (a ratio over ``ln 1 = 0`` is then ``nan``, as is one over 0)."""
    m = np.asarray(m, np.int64)
    uniq, inv = np.unique(m, return_inverse=True)
    logs = np.array([math.log(int(u)) if u > 0 else 0.0 for u in uniq], dtype=np.float64)
    return logs[inv.reshape(m.shape)]


def measures_of_rows(n_rec: np.ndarray, n_cells: np.ndarray, diag: np.ndarray,
                     vert: np.ndarray, white: np.ndarray, l_min: int = 2, v_min: int = 2,
                     w_min: int = 2) -> dict[str, np.ndarray]:
    """:func:`compute_measures` of many results at once: row ``s`` of the histograms
    ``(rows, bins)`` and of the counts gives, for every measure, the value
    ``compute_measures`` gives for that row alone, bit for bit (``L_max``, ``V_max``,
    ``W_max`` as int64 arrays, the others float64)."""
    return measures_of_stats(n_rec, n_cells, _rows_stats(diag, l_min),
                             _rows_stats(vert, v_min), _rows_stats(white, w_min))


def measures_of_stats(n_rec: np.ndarray, n_cells: np.ndarray, d: dict[str, np.ndarray],
                      v: dict[str, np.ndarray], w: dict[str, np.ndarray]
                      ) -> dict[str, np.ndarray]:
    """Every measure per row from each kind's :func:`line_stats` values as arrays
    (``points_min``, ``points_all``, ``lines_min``, ``max``, ``entropy``): the formulas
    of :func:`compute_measures`, element by element."""
    rr = _ratios(n_rec, n_cells)
    det = _ratios(d["points_min"], d["points_all"])
    lam = _ratios(v["points_min"], v["points_all"])
    one = np.ones(rr.shape)
    return {
        "RR": rr, "DET": det, "L": _ratios(d["points_min"], d["lines_min"]),
        "L_max": np.asarray(d["max"], np.int64), "DIV": _ratios(one, d["max"]),
        "L_entr": d["entropy"], "LAM": lam, "TT": _ratios(v["points_min"], v["lines_min"]),
        "V_max": np.asarray(v["max"], np.int64), "V_entr": v["entropy"],
        "W": _ratios(w["points_min"], w["lines_min"]), "W_max": np.asarray(w["max"], np.int64),
        "W_div": _ratios(one, w["max"]), "W_entr": w["entropy"],
        "RTE": _ratios(w["entropy"], _logs(w["max"])),
        "DET_RR": _ratios(det, rr), "LAM_DET": _ratios(lam, det),
    }
