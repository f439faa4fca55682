"""Precision and recall of ``pe.causal_network`` on coupled logistic maps of known graphs.

Graphs (3-4 nodes): chain x0->x1->x2, fork x0->{x1,x2}, collider {x0,x1}->x2, each with a
bystander x3, and a chain of 4; couplings 0.1, 0.2, 0.3; N = 1,000 points; growth rates in
3.85..3.95 (chaotic, clear of the period-3 window) drawn by the simulation seed.
Simulation seeds 1000+ are held out: no test and no calibration used them (the partial
ratio was set on seeds 11-12 and the tests use seeds below 100).

Usage: python bench/causal_network_accuracy.py [--seeds 1000 1001] [--pairwise]
(--pairwise: also the pairwise-only network of the same maps, the earlier behaviour).
Writes bench/results/<device>/causal_network_accuracy_<date>_<commit>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from datetime import date
from pathlib import Path

import numpy as np

GRAPHS = {
    "chain+bystander": [(0, 1), (1, 2)],
    "fork+bystander": [(0, 1), (0, 2)],
    "collider+bystander": [(0, 2), (1, 2)],
    "chain4": [(0, 1), (1, 2), (2, 3)],
}
COUPLINGS = (0.1, 0.2, 0.3)


def adjacency(edges: list[tuple[int, int]], N: int = 4) -> np.ndarray:
    A = np.zeros((N, N))
    for a, b in edges:
        A[a, b] = 1
    return A


def score(found: set, truth: set, N: int) -> dict:
    tp = len(found & truth)
    return {"tp": tp, "fp": len(found - truth), "fn": len(truth - found)}


def main() -> None:
    import pyedmcl as pe
    from pyedmcl.data import logistic_graph
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[1000, 1001, 1002])
    ap.add_argument("--surrogates", type=int, default=199)
    ap.add_argument("--pairwise", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--r-range", type=float, nargs=2, default=[3.85, 3.95],
                    help="growth rates' range (3.6 3.9: logistic_network's, with periodic windows)")
    args = ap.parse_args()
    rows, tot, tot_pw = [], {"tp": 0, "fp": 0, "fn": 0}, {"tp": 0, "fp": 0, "fn": 0}
    t0 = time.perf_counter()
    for name, edges in GRAPHS.items():
        A = adjacency(edges)
        truth = set(edges)
        for c in COUPLINGS:
            for s in args.seeds:
                X = logistic_graph(A, 1000, coupling=c, seed=s, r_range=tuple(args.r_range))
                net = pe.causal_network(X, E=2, surrogates=args.surrogates, seed=1)
                found = set(zip(net.edges["source"], net.edges["target"], strict=True))
                sc = score(found, truth, 4)
                row = {"graph": name, "coupling": c, "seed": s, **sc,
                       "found": sorted(found),
                       "pruned": net.pruned[["source", "target", "reason", "via"]]
                       .astype(str).values.tolist()}
                for k in tot:
                    tot[k] += sc[k]
                if args.pairwise:
                    pw = pe.causal_network(net.xmap, alpha=0.05)
                    fpw = set(zip(pw["source"], pw["target"], strict=True))
                    spw = score(fpw, truth, 4)
                    row["pairwise"] = spw
                    for k in tot_pw:
                        tot_pw[k] += spw[k]
                rows.append(row)
                print(name, c, s, sc, sorted(found), flush=True)
    wall = time.perf_counter() - t0

    def pr(t: dict) -> tuple[float, float]:
        return (t["tp"] / max(1, t["tp"] + t["fp"]), t["tp"] / max(1, t["tp"] + t["fn"]))

    p, r = pr(tot)
    out = {"r_range": args.r_range, "precision": p, "recall": r, "totals": tot, "seeds": args.seeds,
           "surrogates": args.surrogates, "wall_s": wall, "runs": rows}
    if args.pairwise:
        out["pairwise_precision"], out["pairwise_recall"] = pr(tot_pw)
    print(f"precision {p:.3f} recall {r:.3f}", {k: out.get(k) for k in
                                                  ("pairwise_precision", "pairwise_recall")})
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        tag = "r{:g}-{:g}".format(*args.r_range)
        path = Path(args.out) / f"causal_network_accuracy_{date.today()}_{commit}_{tag}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, default=str))
        print("wrote", path)


if __name__ == "__main__":
    main()
