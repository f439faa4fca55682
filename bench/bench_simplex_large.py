"""Exact Simplex at large L: the k-NN rows variant's SLIDE option on vs off (issue 24).

``pe.simplex`` on a float32 random walk of ``--L`` points (every point a query and a
library point, leave-one-out), E in ``--E``, in one process. For each E:

* ``today``: the parameters ``pe.simplex`` takes without SLIDE (the tuned entry or the
  heuristic, SLIDE forced to 0): what the kernel did before the option existed;
* ``rows``: the GPU heuristic's rows variant (WG ``--wg`` 128, TILE ``--tile`` 256, EA
  ``--ea``), SLIDE 0;
* ``slide S``: the same rows parameters with SLIDE = S for each S of ``--slides``.

Every case's predictions must equal the ``today`` case's bit for bit (the tables are the
same, so the weighted sums are); a mismatch stops the run. Prints one line per case: the
best of ``--repeat`` timed calls after a warm-up call (kernel builds outside the timing)
and the pairs per second (L x L pairs: queries x library points).

    python bench/bench_simplex_large.py --L 1048576 --device nvidia
    python bench/bench_simplex_large.py --L 65536 --E 1 7 --slides 8 16 32 --ea 2 4

At L = 2^20 on an H100 each call takes 0.3-2 s: the defaults take about 1.5 min there.
"""

from __future__ import annotations

import time

import numpy as np
from _common import parser


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--L", type=int, default=1 << 20, help="series length (points)")
    ap.add_argument("--E", type=int, nargs="+", default=[1, 3, 7, 20])
    ap.add_argument("--slides", type=int, nargs="+", default=[16],
                    help="SLIDE block lengths to time (8, 16, 32)")
    ap.add_argument("--ea", type=int, nargs="+", default=[4],
                    help="early-abandon chunks (EA) of the rows cases (0, 2, 4, 8)")
    ap.add_argument("--tile", type=int, default=256, help="TILE of the rows cases")
    ap.add_argument("--wg", type=int, default=128, help="WG of the rows cases")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.kernels import knn as knn_family

    be = get_backend(args.device)
    x = np.cumsum(np.random.default_rng(0).standard_normal(args.L)).astype(np.float32)
    original = knn_family.KNN.params_for
    forced: dict = {}

    def params_for(be_, spec, size, nq_total=None, contiguous=False):
        p = original(be_, spec, size, nq_total=nq_total, contiguous=contiguous)
        return {**p, **forced}

    knn_family.KNN.params_for = params_for  # this process only: the cases' parameters
    rows = {"VARIANT": "rows", "WG": args.wg, "TILE": args.tile, "QB": 1, "INS": "reg", "FLAG": 1,
            "SPLIT": 1, "QQ": 1, "CB": 0}
    print(f"exact Simplex, L={args.L} random walk, float32, device {be.info.name}")
    try:
        for E in args.E:
            span = E - 1
            pairs = float(args.L - span) * (args.L - span)
            cases = [("today", {"SLIDE": 0})]
            for ea in args.ea:
                cases.append((f"rows EA{ea}", {**rows, "EA": ea, "SLIDE": 0}))
                cases += [(f"slide {s} EA{ea}", {**rows, "EA": ea, "SLIDE": s}) for s in args.slides]
            ref = None
            for name, params in cases:
                forced.clear()
                forced.update(params)
                r = pe.simplex(x, E=E, device=be)  # warm-up: builds, plan, pool
                pred = np.asarray(r.predicted)
                if ref is None:
                    ref = pred
                elif not np.array_equal(pred, ref, equal_nan=True):
                    raise SystemExit(f"E={E} {name}: predictions differ from 'today' "
                                     f"({int((pred != ref).sum())} values)")
                best = np.inf
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    pe.simplex(x, E=E, device=be)
                    best = min(best, time.perf_counter() - t)
                chosen = original(be, {"E": E, "TAU": 1, "K": E + 1, "METRIC": "euclidean",
                                       "REAL": "float"}, args.L, nq_total=args.L - span,
                                  contiguous=True) if name == "today" else None
                what = (f"{chosen['VARIANT']} SLIDE {chosen['SLIDE']} (now)" if chosen
                        else "same predictions")
                print(f"E={E:2d} {name:16s} {best:8.3f} s  {pairs / best:.3e} pairs/s  {what}",
                      flush=True)
    finally:
        knn_family.KNN.params_for = original


if __name__ == "__main__":
    main()
