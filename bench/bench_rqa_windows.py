"""Windowed RQA benchmark: pyedmcl ``rqa(window=W, step=S)`` vs a pyunicorn loop (one
RecurrencePlot and its 12 measures per window), on the same float32-representable
logistic-map series in float64. Prints times, the ratio and whether every window's
recurrence count agrees with pyunicorn's.

    python bench/bench_rqa_windows.py --device intel --n 100000 --peer-n 20000

pyunicorn runs on the first ``--peer-n`` points only (its loop takes ~0.1 s per window
of 1,000 points here); pyedmcl runs on those and on all ``--n`` points. The ratio is
taken on the same ``--peer-n`` points.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--n", type=int, default=100_000, help="points for pyedmcl")
    ap.add_argument("--peer-n", type=int, default=20_000, help="points for the pyunicorn loop")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--step", type=int, default=100)
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=1)
    ap.add_argument("--radius", type=float, default=0.1)
    ap.add_argument("--dtype", default="float64")
    args = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.data import logistic_map
    from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp

    x = logistic_map(args.n, r=3.9, x0=0.4, burn=0).astype(np.float32).astype(np.float64)
    kw = dict(E=args.E, tau=args.tau, radius=args.radius, window=args.window, step=args.step,
              dtype=args.dtype, device=args.device, w_min=1)
    xp = x[: args.peer_n]
    pe.rqa(xp[: args.window * 3], **kw)  # kernel builds outside the timing
    t = time.perf_counter()
    ours = pe.rqa(xp, **kw)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    full = pe.rqa(x, **kw)
    t_full = time.perf_counter() - t

    span = (args.E - 1) * args.tau
    t = time.perf_counter()
    counts = []
    for a, b in ours.index:
        rp = pyunicorn_rp(xp[a: b + 1 + span], E=args.E, tau=args.tau, radius=args.radius)
        pyunicorn_measures(rp, 2, 2, 1)
        counts.append(int(rp.R.sum()))
    t_uni = time.perf_counter() - t
    agree = counts == list(ours["n_recurrences"])
    print(f"windows: W={args.window} S={args.step} E={args.E} tau={args.tau} r={args.radius} "
          f"dtype={args.dtype} device={full.attrs.get('device', args.device)}")
    print(f"N={args.peer_n}: {len(ours)} windows; pyedmcl {t_ours:.2f} s, pyunicorn loop "
          f"{t_uni:.2f} s, ratio {t_uni / t_ours:.1f}x; recurrence counts agree: {agree}")
    print(f"N={args.n}: {len(full)} windows; pyedmcl {t_full:.2f} s "
          f"({1e3 * t_full / len(full):.2f} ms per window); pyunicorn loop extrapolated "
          f"{t_uni / len(ours) * len(full):.0f} s")


if __name__ == "__main__":
    main()
