"""How much line-walk work K nested thresholds need under three designs, counted in NumPy
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--radii", type=int, default=8)
    ap.add_argument("--series", default="walk,logistic")
    ap.add_argument("--vec", type=int, default=16, help="lanes of the lane walk")
    ap.add_argument("--every", type=int, default=7, help="columns sampled for the differences")
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


if __name__ == "__main__":
    main()
