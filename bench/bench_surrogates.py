"""Surrogate significance: false-positive rate of independent pairs, and throughput.

1. False-positive rate (``--seeds`` pairs): two independent chaotic logistic maps
   (r = 4, random start) per seed; ``pe.ccm(..., surrogates=n)`` in both directions; a
   false positive is p < 0.05 at the largest library size. Each method in ``--methods``;
   the rate is printed with its binomial 95% interval (Wilson). Nominal: 5%.
2. CCM surrogate throughput: one ``ccm`` call with ``--ccm-surrogates`` surrogates;
   "surrogate cross-maps" = sampled libraries x library sizes x surrogates x 2
   directions, each a full prediction of the M rows and its rho; per second of the
   call's extra time over the same call without surrogates.
3. All-to-all throughput: ``xmap`` of N series with ``--xmap-surrogates`` surrogates per
   target; "surrogate pairs" = N x N x n (one library series cross-mapping one
   surrogate target at full library); per second of the extra time over the plain map,
   and end to end.

Times are wall-clock after a warm-up call (kernels built). Run:
    python bench/bench_surrogates.py --device intel
    python bench/bench_surrogates.py --device nvidia --N 1000 --L 1000 --xmap-surrogates 100
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score 95% interval of a binomial proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def independent_pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from pyedmcl.data import logistic_map
    rng = np.random.default_rng(seed)
    return (logistic_map(n, r=4.0, x0=rng.uniform(0.05, 0.95)),
            logistic_map(n, r=4.0, x0=rng.uniform(0.05, 0.95)))


def false_positives(args, pe) -> None:
    sizes = [20, args.L // 4, args.L - 10]
    for method in args.methods.split(","):
        t0 = time.perf_counter()
        p = []
        for s in range(args.seeds):
            x, y = independent_pair(args.L, 1000 + s)
            r = pe.ccm(x, y, E=2, lib_sizes=sizes, sample=args.sample, seed=s,
                       surrogates=args.fp_surrogates, surrogate_method=method,
                       device=args.device)
            p += [r.significance.p_xy[-1], r.significance.p_yx[-1]]
        p = np.asarray(p)
        k, n = int((p < 0.05).sum()), p.size
        lo, hi = wilson(k, n)
        hist = np.histogram(p, bins=10, range=(0, 1))[0].tolist()
        print(f"false positives {method:>15}: {k}/{n} = {k / n:.3f} (95% CI {lo:.3f}-{hi:.3f}); "
              f"p histogram (10 bins) {hist}; {time.perf_counter() - t0:.1f} s "
              f"[{args.seeds} pairs, L={args.L}, sizes {sizes}, sample={args.sample}, "
              f"{args.fp_surrogates} surrogates]")


def ccm_throughput(args, pe) -> None:
    from pyedmcl.data import coupled_logistic
    d = coupled_logistic(args.L)
    sizes = list(range(50, args.L - 9, max(1, (args.L - 60) // 5)))
    kw = dict(E=2, lib_sizes=sizes, sample=args.sample, seed=1, device=args.device)
    pe.ccm(d[:200, 0], d[:200, 1], **{**kw, "lib_sizes": [50, 150]}, surrogates=3)  # warm-up
    t0 = time.perf_counter()
    pe.ccm(d[:, 0], d[:, 1], **kw)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    pe.ccm(d[:, 0], d[:, 1], **kw, surrogates=args.ccm_surrogates)
    t_surr = time.perf_counter() - t0
    maps = args.sample * len(sizes) * args.ccm_surrogates * 2
    print(f"ccm surrogate null: L={args.L}, {len(sizes)} sizes x sample {args.sample} x "
          f"{args.ccm_surrogates} surrogates x 2 directions = {maps} cross-maps; plain "
          f"{t_plain:.2f} s, with surrogates {t_surr:.2f} s -> "
          f"{maps / max(t_surr - t_plain, 1e-9):,.0f} surrogate cross-maps/s (extra time)")


def xmap_throughput(args, pe) -> None:
    rng = np.random.default_rng(0)
    X = np.stack([independent_pair(args.L, 5000 + s)[0] for s in range(args.N)], axis=1)
    X += 1e-3 * rng.standard_normal(X.shape)
    pe.xmap(X[:200, :4], E=3, surrogates=3, seed=0, device=args.device)  # warm-up
    t0 = time.perf_counter()
    pe.xmap(X, E=3, device=args.device)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = pe.xmap(X, E=3, surrogates=args.xmap_surrogates, seed=0, device=args.device)
    t_surr = time.perf_counter() - t0
    pairs = args.N * args.N * args.xmap_surrogates
    off = ~np.eye(args.N, dtype=bool)
    fp = float((np.asarray(r.p_value)[off] < 0.05).mean())
    edges = len(pe.causal_network(r))
    print(f"xmap surrogate null: N={args.N}, L={args.L}, E=3, {args.xmap_surrogates} "
          f"surrogates per target = {pairs:,} surrogate pairs; plain {t_plain:.2f} s, with "
          f"surrogates {t_surr:.2f} s -> {pairs / max(t_surr - t_plain, 1e-9):,.0f} surrogate "
          f"pairs/s (extra time), {pairs / t_surr:,.0f} end to end; independent series: "
          f"{fp:.3f} of pairs at p < 0.05, {edges} edges after BH at 0.05")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--seeds", type=int, default=100, help="independent pairs (FP rate)")
    ap.add_argument("--L", type=int, default=300, help="series length")
    ap.add_argument("--sample", type=int, default=10, help="libraries per size")
    ap.add_argument("--fp-surrogates", type=int, default=99)
    ap.add_argument("--methods", default="ebisuzaki,random_shuffle")
    ap.add_argument("--ccm-surrogates", type=int, default=200)
    ap.add_argument("--N", type=int, default=50, help="series of the xmap throughput run")
    ap.add_argument("--xmap-surrogates", type=int, default=100)
    ap.add_argument("--skip", default="", help="comma list of fp, ccm, xmap to skip")
    args = ap.parse_args()
    import warnings

    import pyedmcl as pe
    warnings.simplefilter("ignore")  # precision notes of individual series
    from clkernels import get_backend
    info = get_backend(args.device).info
    print(f"device: {info.name} ({info.runtime})")
    skip = set(args.skip.split(","))
    if "fp" not in skip:
        false_positives(args, pe)
    if "ccm" not in skip:
        ccm_throughput(args, pe)
    if "xmap" not in skip:
        xmap_throughput(args, pe)


if __name__ == "__main__":
    main()
