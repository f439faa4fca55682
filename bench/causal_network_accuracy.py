"""Precision and recall of ``pe.causal_network`` on held-out coupled systems of known graph.

Systems: bench/heldout_systems.py (coupled logistic maps with diffusive coupling,
coupled Henon maps, coupled Ricker maps; chains, forks and a chain-with-fork with
bystanders, a chain of 4, a collider; couplings 0.1, 0.2, 0.3; N = 1,000 points; 1%
observational noise) -- families, coupling forms and seed streams that no test uses.
Each network: ``pe.causal_network(X, E=2, surrogates=199, seed=1)``.

``--set dev`` runs the development seeds (the only ones looked at while changing the
method); ``--set eval`` the evaluation seeds (run for the report). Every false edge is
classed: ``reverse`` (the reverse of a true edge), ``indirect`` (a directed path joins
source to target), ``confounded`` (a common ancestor), ``spurious`` (none of these).

Usage: python bench/causal_network_accuracy.py --set dev [--pairwise] [--out DIR]
Writes DIR/causal_network_accuracy_<date>_<commit>_<set>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heldout_systems as hs  # noqa: E402

#: the graphs the acceptance criterion names (chains and forks with bystanders)
HEADLINE = ("chain+bystander", "fork+bystander", "chain4", "chain+fork+bystander")


def false_kind(edge: tuple[int, int], truth: set, N: int) -> str:
    """Why a found edge that is not true may have appeared."""
    s, t = edge
    A = hs.adjacency(N, sorted(truth)) > 0
    R = A.copy()  # reachability (transitive closure)
    for k in range(N):
        R |= R[:, [k]] & R[[k], :]
    if (t, s) in truth:
        return "reverse"
    if R[s, t]:
        return "indirect"
    if R[t, s]:
        return "reverse-indirect"
    if any(R[a, s] and R[a, t] for a in range(N)):
        return "confounded"
    return "spurious"


def score(found: set, truth: set) -> dict:
    return {"tp": len(found & truth), "fp": len(found - truth), "fn": len(truth - found)}


def pr(t: dict) -> dict:
    p = t["tp"] / max(1, t["tp"] + t["fp"])
    r = t["tp"] / max(1, t["tp"] + t["fn"])
    return {"precision": round(p, 4), "recall": round(r, 4), **t}


def run_one(pe, X, truth, N, args) -> dict:
    net = pe.causal_network(X, E=2, surrogates=args.surrogates, seed=1, **args.options)
    found = set(zip(net.edges["source"], net.edges["target"], strict=True))
    row = {**score(found, truth), "found": sorted(found),
           "false": {f"{s}->{t}": false_kind((s, t), truth, N) for s, t in found - truth},
           "missed": sorted(truth - found),
           "pruned": [[int(a), int(b), r, None if v is None else int(v)] for a, b, r, v in
                      net.pruned[["source", "target", "reason", "via"]].values.tolist()]}
    if args.pairwise:
        pw = pe.causal_network(net.xmap, alpha=0.05)
        fpw = set(zip(pw["source"], pw["target"], strict=True))
        row["pairwise"] = {**score(fpw, truth),
                           "false": {f"{s}->{t}": false_kind((s, t), truth, N)
                                     for s, t in fpw - truth}}
    return row


def main() -> None:
    import pyedmcl as pe
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("dev", "eval"), default="dev")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="override the set's seeds (a subset of it)")
    ap.add_argument("--families", nargs="+", default=list(hs.FAMILIES))
    ap.add_argument("--graphs", nargs="+", default=list(hs.GRAPHS))
    ap.add_argument("--couplings", type=float, nargs="+", default=list(hs.COUPLINGS))
    ap.add_argument("--surrogates", type=int, default=199)
    ap.add_argument("--pairwise", action="store_true", help="also the pairwise-only network")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="extra causal_network keyword (a Python literal), for studies")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import ast
    args.options = {k: ast.literal_eval(v) for k, v in (o.split("=", 1) for o in args.option)}
    seeds = args.seeds or list(hs.DEV_SEEDS if args.set == "dev" else hs.EVAL_SEEDS)
    allowed = set(hs.DEV_SEEDS if args.set == "dev" else hs.EVAL_SEEDS)
    if not set(seeds) <= allowed:
        ap.error(f"--seeds must come from the {args.set} set {sorted(allowed)}")
    rows = []
    tot = defaultdict(Counter)
    t0 = time.perf_counter()
    for fam, graph, c, s in itertools.product(args.families, args.graphs, args.couplings, seeds):
        X, truth = hs.system(fam, graph, c, s)
        N = X.shape[1]
        row = {"family": fam, "graph": graph, "coupling": c, "seed": s,
               **run_one(pe, X, truth, N, args)}
        rows.append(row)
        keys = ["all", f"family={fam}", f"graph={graph}", f"coupling={c}"]
        keys += ["headline"] if graph in HEADLINE else []
        for k in keys:
            tot[k].update({m: row[m] for m in ("tp", "fp", "fn")})
            tot[k].update(Counter(row["false"].values()))
            if args.pairwise:
                tot["pairwise " + k].update({m: row["pairwise"][m] for m in ("tp", "fp", "fn")})
                tot["pairwise " + k].update(Counter(row["pairwise"]["false"].values()))
        print(fam, graph, c, s, {m: row[m] for m in ("tp", "fp", "fn")}, row["false"],
              flush=True)
    wall = time.perf_counter() - t0
    summary = {k: {**pr({m: v.get(m, 0) for m in ("tp", "fp", "fn")}),
                   "false_kinds": {m: n for m, n in v.items() if m not in ("tp", "fp", "fn")}}
               for k, v in sorted(tot.items())}
    for k, v in summary.items():
        print(f"{k:40s} P {v['precision']:.3f} R {v['recall']:.3f} {v['false_kinds']}")
    out = {"set": args.set, "seeds": seeds, "families": args.families, "graphs": args.graphs,
           "couplings": args.couplings, "surrogates": args.surrogates, "options": args.options,
           "call": f"pe.causal_network(X, E=2, surrogates={args.surrogates}, seed=1"
                   + "".join(f", {k}={v!r}" for k, v in args.options.items()) + ")",
           "wall_s": round(wall, 1), "summary": summary, "runs": rows}
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        tag = "".join(f"_{k}-{v}" for k, v in args.options.items())
        path = Path(args.out) / f"causal_network_accuracy_{date.today()}_{commit}_{args.set}{tag}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1, default=str))
        tmp.replace(path)
        print("wrote", path)


if __name__ == "__main__":
    main()
