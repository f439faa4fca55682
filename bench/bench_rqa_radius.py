"""The fixed-rate radius search: ``threshold_for_rate`` in float32 and float64, on ordinary
(a random walk) and quantized data (the same walk on a 0.1 grid), in one process.

    python bench/bench_rqa_radius.py --device intel --n 4000 10000 100000

N <= 4,000 (E = 3: at most 16 x 10^6 cells) takes the exact order statistic on the device
(float32: the cells near it decided in float64 on the host, :mod:`pyedmcl.rqa.select`);
above, the sampled one (4 x 10^6 random pairs: on the device where it has fp64, else on the host). Prints the best of ``--repeat``
times per case, the float32 / float64 ratio, and whether the two radii are equal. Runs
against any version of ``threshold_for_rate`` (the code under ``PYTHONPATH``), so the
same script times a tree before and after a change.
"""

from __future__ import annotations

import time

import numpy as np
from _common import parser


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[4000, 10_000, 100_000])
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fan", type=int, nargs="*", default=[],
                    help="also FAN's per-column thresholds (knn 20) at these N: float32's "
                         "float64 selection vs the float32-only order statistics (what "
                         "float32 used before) vs all in float64, in this process (CPU "
                         "time of the host's one thread)")
    args = ap.parse_args()
    if args.fan:
        _fan(args.fan, args.E, args.repeat)

    import pyedmcl  # noqa: F401 (configures clkernels before its first use)
    from clkernels import get_backend
    from pyedmcl.rqa.radius import threshold_for_rate

    be = get_backend(args.device)
    print(f"device: {be.info.name} ({be.info.runtime}); E={args.E} rate={args.rate} "
          f"best of {args.repeat}")
    rng = np.random.default_rng(7)
    for n in args.n:
        walk = np.cumsum(rng.standard_normal(n)) * 0.3
        for kind, x in (("ordinary", walk), ("grid0.1", np.round(walk, 1) + 100.0)):
            best, radii = {}, {}
            for dt in (np.float32, np.float64):
                threshold_for_rate(x, None, args.rate, E=args.E, tau=1, metric="euclidean",
                                   dtype=dt, backend=be)  # builds outside the timing
                ts = []
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    r, _thr = threshold_for_rate(x, None, args.rate, E=args.E, tau=1,
                                                 metric="euclidean", dtype=dt, backend=be)
                    ts.append(time.perf_counter() - t)
                best[dt], radii[dt] = min(ts), r
            print(f"N={n:>7} {kind:>9}: float32 {best[np.float32] * 1e3:8.1f} ms  float64 "
                  f"{best[np.float64] * 1e3:8.1f} ms  ratio {best[np.float32] / best[np.float64]:.3f}"
                  f"  radii equal: {radii[np.float32] == radii[np.float64]} "
                  f"({radii[np.float32]!r} / {radii[np.float64]!r})")


def _fan(ns: list[int], E: int, repeat: int) -> None:
    from pyedmcl.rqa.fan import column_order_statistics, fan_thresholds

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    cases = {"float32 (float64 values by selection)":
             lambda x: fan_thresholds(x, E, 1, 20, "euclidean", f32, "distance"),
             "float32-only order statistics":
             lambda x: column_order_statistics(x, E, 1, 20, "euclidean", f32),
             "float64": lambda x: fan_thresholds(x, E, 1, 20, "euclidean", f64, "distance")}
    rng = np.random.default_rng(8)
    for n in ns:
        walk = np.cumsum(rng.standard_normal(n)) * 0.3
        for kind, x in (("ordinary", walk), ("grid0.1", np.round(walk, 1) + 100.0)):
            best = {}
            for name, f in cases.items():
                ts = []
                for _ in range(repeat):
                    t = time.process_time()  # host-only, one thread: CPU time (a
                    f(x)  # shared machine's load swings wall time by 1.5x)
                    ts.append(time.process_time() - t)
                best[name] = min(ts)
            print(f"FAN N={n:>6} {kind:>9} (CPU time): " + "  ".join(
                f"{k} {v * 1e3:.0f} ms" for k, v in best.items()))


if __name__ == "__main__":
    main()
