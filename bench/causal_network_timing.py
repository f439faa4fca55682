"""Wall time of ``pe.causal_network`` on a data matrix, and of its all-to-all map alone.

N logistic maps coupled along a random graph (``logistic_network``, edge probability
2 / N, coupling 0.25), 1,000 points, E = 2, 199 surrogates, seed 1, default device.
The pipeline's extra stages (lag scans of the candidate edges, partial cross maps) are
the difference between the two times. The map runs first once to build its kernels.

Usage: python bench/causal_network_timing.py [--N 30 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from datetime import date
from pathlib import Path


def main() -> None:
    import pyedmcl as pe
    from pyedmcl.data import logistic_network
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, nargs="+", default=[30, 100])
    ap.add_argument("--surrogates", type=int, default=199)
    ap.add_argument("--out", default=None)
    ap.add_argument("--method", nargs="+", default=["bh"],
                    help="corrections to time; with N = 100 and 199 surrogates BH returns no "
                         "edge (resolution), so 'none' times the pruning stages at work")
    args = ap.parse_args()
    X0, _ = logistic_network(8, 1000, coupling=0.25, p_edge=0.25, seed=3)
    pe.causal_network(X0, E=2, surrogates=19, seed=1)  # kernels built once
    rows = []
    for N in args.N:
        X, A = logistic_network(N, 1000, coupling=0.25, p_edge=2.0 / N, seed=7)
        t0 = time.perf_counter()
        pe.xmap(X, E=2, surrogates=args.surrogates, seed=1)
        t_map = time.perf_counter() - t0
        for method in args.method:
            t0 = time.perf_counter()
            net = pe.causal_network(X, E=2, surrogates=args.surrogates, seed=1, method=method)
            t_net = time.perf_counter() - t0
            row = {"N": N, "points": 1000, "surrogates": args.surrogates, "method": method,
                   "xmap_s": t_map, "network_s": t_net,
                   "candidates": len(net.edges) + len(net.pruned),
                   "direct": len(net.edges), "pruned": len(net.pruned),
                   "partial_maps": 0 if net.partial is None else len(net.partial),
                   "true_edges": int(A.sum())}
            rows.append(row)
            print(row, flush=True)
    if args.out:
        from clkernels import get_backend
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        path = Path(args.out) / f"causal_network_timing_{date.today()}_{commit}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"device": get_backend(None, None).info.name,
                                    "runs": rows}, indent=1))
        print("wrote", path)


if __name__ == "__main__":
    main()
