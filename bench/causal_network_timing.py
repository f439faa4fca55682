"""Wall and CPU time of ``pe.causal_network`` on a data matrix, and of its all-to-all map.

N logistic maps coupled along a random graph (``logistic_network``, edge probability
2 / N, coupling 0.25), 1,000 points, E = 2, 199 surrogates, seed 1, on ``--device``.
The pipeline's extra stages (lag scans of the candidate edges, convergence tests,
partial cross maps; on the host but for the lag scans' distance rows) are the difference
between the two times. ``true_direct`` counts the direct edges that are true links. A small network runs first to build the kernels. With N = 100
and 199 surrogates, BH over 9,900 pairs resolves no edge (docs/causal_network.md), so
``--method none`` times the later stages at work on every pair significant at alpha.

Usage: python bench/causal_network_timing.py [--device nvidia] [--N 30 100]
       [--method bh none] [--repeat 1] [--out bench/results/<device-dir>]
Writes DIR/causal_network_timing_<date>_<commit>.json (wall and process CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import warnings
from datetime import date
from pathlib import Path


def timed(fn, *args, **kw):
    """``(result, wall_s, cpu_s)`` of one call (CPU: this process, all threads)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.data import logistic_network
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, nargs="+", default=[30, 100])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--surrogates", type=int, default=199)
    ap.add_argument("--device", default=None, help="e.g. nvidia, nvidia:0, intel (default: "
                                                      "the default device)")
    ap.add_argument("--method", nargs="+", default=["bh", "none"],
                    help="corrections to time (default: bh and none)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per setting (best kept)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    be = get_backend(args.device, None)
    print(f"device: {be.info.runtime} {be.info.name}", flush=True)
    warnings.simplefilter("ignore")  # the resolution warning at N = 100, float64 fallbacks
    X0, _ = logistic_network(8, args.points, coupling=0.25, p_edge=0.25, seed=3)
    pe.causal_network(X0, E=2, surrogates=19, seed=1, device=args.device)  # kernels built
    rows = []
    for N in args.N:
        X, A = logistic_network(N, args.points, coupling=0.25, p_edge=2.0 / N, seed=7)
        kw = {"E": 2, "surrogates": args.surrogates, "seed": 1, "device": args.device}
        pe.xmap(X, **kw)  # untimed: builds any kernel this data needs (a float64 fallback)
        best_map = min(timed(pe.xmap, X, **kw)[1:] for _ in range(args.repeat))
        for method in args.method:
            runs = [timed(pe.causal_network, X, method=method, **kw)
                    for _ in range(args.repeat)]
            net, wall, cpu = min(runs, key=lambda r: r[1])
            reasons = net.pruned["reason"].value_counts().to_dict()
            row = {"N": N, "points": args.points, "surrogates": args.surrogates,
                   "method": method, "xmap_wall_s": round(best_map[0], 3),
                   "xmap_cpu_s": round(best_map[1], 3), "network_wall_s": round(wall, 3),
                   "network_cpu_s": round(cpu, 3),
                   "candidates": len(net.edges) + len(net.pruned), "direct": len(net.edges),
                   "pruned": {k: int(v) for k, v in reasons.items()},
                   "partial_maps": 0 if net.partial is None else len(net.partial),
                   "true_edges": int(A.sum()),
                   "true_direct": int(sum(A[s, t] for s, t in zip(net.edges["source"],
                                                                   net.edges["target"],
                                                                   strict=True)))}
            rows.append(row)
            print(row, flush=True)
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        path = Path(args.out) / f"causal_network_timing_{date.today()}_{commit}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"device": f"{be.info.runtime} {be.info.name}",
                                   "runs": rows}, indent=1))
        tmp.replace(path)
        print("wrote", path)


if __name__ == "__main__":
    main()
