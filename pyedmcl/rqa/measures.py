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
import os

import numpy as np

from .._bands import PARALLEL_VALUES, THREADS

MEASURES = ("RR", "DET", "L", "L_max", "DIV", "L_entr", "LAM", "TT", "V_max", "V_entr",
            "W", "W_max", "W_div", "W_entr", "RTE", "DET_RR", "LAM_DET")


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else float("nan")


def line_stats(hist: np.ndarray, l_min: int) -> dict[str, float]:
    """Points in lines >= l_min, all points in lines, number of lines >= l_min, max, entropy.

    Works on the nonzero bins only: a histogram has N bins but few distinct line lengths
    (the measures of an N = 10^5 run took ~0.8 ms of host time over the full bins)."""
    h = np.asarray(hist)
    nz = np.flatnonzero(h != 0)  # the lengths that occur, ascending (a bool mask: 10x faster)
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
                     white: np.ndarray, l_min: int = 2, v_min: int = 2,
                     w_min: int = 2) -> dict[str, float]:
    """Every measure of :data:`MEASURES` from the three histograms and the counts."""
    d = line_stats(diag, l_min)
    v = line_stats(vert, v_min)
    w = line_stats(white, w_min)
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
              scale: float = 1.0, tail: np.ndarray | None = None) -> np.ndarray:
    """Per row, :func:`line_stats`' entropy of its line counts: ``scale *
    vals[start : start + count]`` (its nonzero bins >= l_min, in length order), then a
    count of 1 where ``tail`` (a last bin), over ``n_min`` lines; 0 where ``n_min`` is 0.
    Each row's value is the 1-D call's bit for bit: rows of as many values (and tails)
    are stacked into one C-contiguous block, whose row sums numpy takes pairwise row by
    row, as it sums a 1-D array, and whose log is the same elementwise loop."""
    S = start.size
    out = np.zeros(S)
    tail = np.zeros(S, bool) if tail is None else np.asarray(tail, bool)
    live = np.flatnonzero(np.asarray(n_min) > 0)
    if not live.size:
        return out
    key = np.asarray(count, np.int64)[live] * 2 + tail[live]
    order = np.argsort(key, kind="stable")
    live, key = live[order], key[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    nmin = np.asarray(n_min, np.float64)

    def block(ab: tuple[int, int]) -> None:
        rows = live[ab[0]:ab[1]]
        c, t = int(key[ab[0]]) // 2, bool(key[ab[0]] % 2)
        p = np.empty((rows.size, c + t))
        p[:, :c] = vals[start[rows][:, None] + np.arange(c)]  # (exact: counts < 2^53)
        if scale != 1.0:
            p[:, :c] *= scale
        if t:
            p[:, c] = 1.0
        q = p / nmin[rows][:, None]
        out[rows] = -(q * np.log(q)).sum(axis=1)

    blocks = list(zip(np.r_[0, cuts].tolist(), np.r_[cuts, key.size].tolist(), strict=True))
    threads = min(THREADS, os.cpu_count() or 1)
    if threads < 2 or int(np.asarray(count)[live].sum()) < PARALLEL_VALUES // 4:
        for ab in blocks:
            block(ab)
    else:  # numpy releases the GIL in each block's loops
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(block, blocks))
    return out


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
