"""How much line-walk work K nested thresholds need under four designs, counted in NumPy
on bench_rqa_grid.py's series (no device): what bounds ``pe.rqa_grid``'s cost against one
``pe.rqa`` call on CPUs.

    python bench/rqa_grid_walk_steps.py --series logistic

Counted over the column words (64 rows) of the full N x N matrix, per threshold: the
private-bin increments of the lane walk (_lanewalk.mako, WALK=3) as the CPU kernels take
it, VEC columns a step (a step for every lane while any lane has a run left: white runs
pair with black starts, longer black lines pair with their ends), against the runs
themselves (one increment each: what a walk that wastes no lane step would do), against
one vector of the K thresholds of a column per step (thresholds as lanes), and the runs
that differ between consecutive thresholds (what a walk counting differences of nested
sets would have to touch: runs removed and runs added).

``--transitions G`` (every G-th group of VEC columns, the upper triangle's column parts
as the SYM kernels walk them): one walk of every threshold at once, VEC columns a step,
over the transitions of the cells' threshold index (a cell's smallest threshold k at
which it recurs; a run at k ends where the index crosses k): at a transition every
threshold whose run ends there takes one increment, except that the thresholds whose
run started where the largest threshold's did share one (it lasts to the largest
threshold, so it is counted once, at its first, and summed over the thresholds later).
Printed: those increments per 64-cell column word, and the steps per word of VEC columns
(a step for every lane while any lane has an increment left) against the steps of the
walk per threshold (summed over the thresholds) on the same words.
"""

from __future__ import annotations

import argparse

import numpy as np


def _steps(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (word, column) of the bool matrix ``b`` (rows x columns): the black run starts
    (the white walk's steps) and the black runs longer than one (the black walk's)."""
    nw = b.shape[0] // 64
    w = b[:nw * 64].reshape(nw, 64, -1)
    z = np.zeros((nw, 1, w.shape[2]), bool)
    prev = np.concatenate([z, w[:, :-1]], 1)
    nxt = np.concatenate([w[:, 1:], z], 1)
    starts = (w & ~prev).sum(1)
    return starts, starts - (w & ~prev & ~nxt).sum(1)


def _runs(col: np.ndarray) -> set[tuple[int, int, bool]]:
    ch = np.flatnonzero(np.diff(col.astype(np.int8))) + 1
    st = np.concatenate([[0], ch])
    en = np.concatenate([ch, [col.size]])
    return set(zip(st.tolist(), en.tolist(), col[st].tolist(), strict=True))


def _transition_steps(lev: np.ndarray, walked: np.ndarray, K: int) -> tuple[int, int, int]:
    """Over the column words of ``lev`` (rows x VEC columns: each cell's threshold index,
    K for none; ``walked``: the cells a column walks): (increments, steps of the one walk
    of all thresholds, steps of the walk per threshold summed over the thresholds)."""
    rows, V = lev.shape
    nw = (rows + 63) // 64
    items = np.zeros((nw, V), np.int64)
    for c in range(V):
        col = lev[walked[:, c], c]
        s = np.zeros(K, np.int64)
        cur = K
        for i in np.flatnonzero(np.diff(np.concatenate([[K], col]))):
            b = int(col[i])
            lo, hi = min(cur, b), max(cur, b)
            if hi == K:  # thresholds lo..K-1 end a run here; those sharing K-1's start: one
                items[i // 64, c] += 1 + int(np.count_nonzero(s[lo:K - 1] != s[K - 1]))
            else:
                items[i // 64, c] += hi - lo
            s[lo:hi] = i
            cur = b
    per_k = 0
    for k in range(K):
        b = (lev <= k) & walked
        b = np.concatenate([b, np.zeros((nw * 64 - rows, V), bool)])
        sw, sb = _steps(b)
        per_k += int(sw.max(1).sum() + sb.max(1).sum())
    return int(items.sum()), int(items.max(1).sum()), per_k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--radii", type=int, default=8)
    ap.add_argument("--series", default="walk,logistic")
    ap.add_argument("--vec", type=int, default=16, help="lanes of the lane walk")
    ap.add_argument("--every", type=int, default=7, help="columns sampled for the differences")
    ap.add_argument("--transitions", type=int, default=0,
                    help="every G-th group of VEC columns counted for the one walk of all "
                    "thresholds (0: not counted)")
    a = ap.parse_args()

    from bench_rqa_grid import _series

    E, tau, V = 3, 2, a.vec
    for kind in a.series.split(","):
        x, (lo, hi) = _series(kind, a.n, E, tau)
        p = np.stack([x[m * tau:m * tau + a.n] for m in range(E)], 1)
        radii = np.linspace(lo, hi, a.radii)
        lane = exact = klanes = 0
        runs = diffs = 0
        rr = np.zeros(a.radii)
        for c0 in range(0, a.n - a.n % V, 512 - 512 % V):
            cols = np.arange(c0, min(c0 + 512 - 512 % V, a.n - a.n % V))
            d = np.sqrt(((p[:, None, :] - p[None, cols, :]) ** 2).sum(-1))
            sw, sb = zip(*(_steps(d < r) for r in radii), strict=True)
            for k, r in enumerate(radii):
                rr[k] += (d < r).sum()
                for s in (sw[k], sb[k]):
                    lane += int(s.reshape(s.shape[0], -1, V).max(-1).sum()) * V
                    exact += int(s.sum())
            klanes += int(np.stack(sw).max(0).sum() + np.stack(sb).max(0).sum()) * a.radii
            for j in range(0, cols.size, a.every):
                prev = None
                for r in radii:
                    cur = _runs(d[:, j] < r)
                    runs += len(cur)
                    diffs += len(cur) if prev is None else len(cur ^ prev)
                    prev = cur
        print(f"{kind}: N={a.n}, E={E}, tau={tau}, {a.radii} radii, RR "
              f"{rr[0] / a.n ** 2:.4f} .. {rr[-1] / a.n ** 2:.4f}")
        print(f"  lane walk ({V} columns a step), increments     {lane:>12,}")
        print(f"  runs (no lane step wasted)                    {exact:>12,}  "
              f"({exact / lane:.2f} of the lane walk's)")
        print(f"  the {a.radii} thresholds of a column as lanes       {klanes:>12,}  "
              f"({klanes / lane:.2f})")
        print(f"  runs differing between consecutive thresholds: {diffs / runs:.2f} of all "
              f"runs (every {a.every}th column)")
        if a.transitions:
            _print_transitions(p, radii, a.n, V, a.transitions)


def _print_transitions(p: np.ndarray, radii: np.ndarray, n: int, V: int, every: int) -> None:
    """The one walk of all thresholds against the walk per threshold (``--transitions``)."""
    K = radii.size
    inc = steps = per_k = words = 0
    for c0 in range(0, n - V + 1, V * every):
        cols = np.arange(c0, c0 + V)
        rows = int(cols[-1])
        if rows == 0:
            continue
        d = np.sqrt(((p[:rows, None, :] - p[None, cols, :]) ** 2).sum(-1))
        lev = np.searchsorted(radii, d, side="right")  # smallest k with d < radii[k]
        walked = np.arange(rows)[:, None] < cols[None, :]  # rows above the diagonal
        i, s, q = _transition_steps(lev, walked, K)
        inc, steps, per_k, words = inc + i, steps + s, per_k + q, words + (rows + 63) // 64
    print(f"  one walk of all thresholds (1 group of {V} columns in {every}, upper "
          f"triangle): {inc / words / V:.1f} increments per column word; steps per "
          f"{V}-column word {steps / words:.1f}, the walk per threshold's "
          f"{per_k / words:.1f} (summed over the {K} thresholds)")


if __name__ == "__main__":
    main()
