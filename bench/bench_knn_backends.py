"""Simplex with every k-NN back-end on Lorenz-63: the shape of kEDM (IEEE Access 2023) Tables 2-3.

For each E and series length L: runtime of ``pyedmcl.simplex`` (Tp=1,
leave-one-out, k=E+1) with each back-end (minimum over ``--repeats`` runs in
this one process), recall of its k-NN table against exact neighbours on a
sample of queries, Simplex MAPE relative to exact, and which back-end ``auto``
picks, with ``auto/best``: the time of auto's pick over the fastest back-end
meeting the MAPE bound (relative MAPE <= 1.01).

Exact reference: the exact OpenCL kernel; where it would exceed
``--max-seconds`` (predicted from the previous L by its O(L^2) cost) it is
skipped, its time shown as an extrapolation ``~``, and the k-d tree (also
exact: recall 1 is tested) serves as the MAPE and recall reference.

    python bench/bench_knn_backends.py --device pocl --L 1024 4096 16384 --E 1 20
    python bench/bench_knn_backends.py --device nvidia --L 1048576 --E 20 --backends exact

``--write-model FILE`` stores the measured winners as a ``knn_backend`` model
(the format of ``tuning/knn_backend_default.json``) for ``auto``.

``--shape ccm`` times ``pyedmcl.ccm`` instead (Lorenz-63 x cross-mapping a lagged
function of x, one library size L, S1 and S2 sampled libraries per direction, the
exact back-ends only) and fits each back-end's cost line, seconds fixed + seconds
per library: the model's ``"ccm"``-shape entries (see :mod:`pyedmcl.neighbors.auto`).

    python bench/bench_knn_backends.py --shape ccm --E 1 2 3 4 6 8 10 \
        --L 1000 2000 4000 8000 16000 --level global --write-model ccm.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyedmcl as pe  # noqa: E402
from clkernels import get_backend  # noqa: E402
from clkernels.tuning import pow2_bucket  # noqa: E402
from clkernels.tuning.database import level_key  # noqa: E402
from pyedmcl.neighbors import BACKENDS, knn_search  # noqa: E402
from pyedmcl.neighbors.auto import FAMILY, MAPE_BOUND, MODEL_VERSION, choose, e_bucket  # noqa: E402
from pyedmcl.neighbors.lorenz import lorenz63  # noqa: E402
from pyedmcl.neighbors.recall import mape, recall  # noqa: E402


def parse_sizes(vals: list[str]) -> list[int]:
    out = []
    for v in vals:
        out.append(2 ** int(v[2:]) if v.startswith("2^") else int(v))
    return out


def run_simplex(x, E, name, device, opts, repeats, min_total=0.0, max_runs=10):
    """Minimum wall time over ``repeats`` runs, more (up to ``max_runs``) until ``min_total`` s
    (the main loop calls it once per interleaved round)."""
    best, res, total, runs = float("inf"), None, 0.0, 0
    while runs < repeats or (total < min_total and runs < max_runs):
        t0 = time.perf_counter()
        res = pe.simplex(x, E=E, Tp=1, knn_method=name, knn_options=opts.get(name), device=device)
        dt = time.perf_counter() - t0
        best, total, runs = min(best, dt), total + dt, runs + 1
    return best, res


def ccm_pair(N: int, E: int) -> tuple[np.ndarray, np.ndarray]:
    """Lorenz-63 x and a lagged nonlinear function of it: a pair with a CCM signal."""
    a = lorenz63(N + 5)
    return a[:N], a[5:N + 5] ** 2 / 10


def run_ccm(x, y, E, L, S, name, device, opts):
    t0 = time.perf_counter()
    r = pe.ccm(x, y, E=E, lib_sizes=[L], sample=S, seed=1, dtype="float64",
               knn_method=name, knn_options=opts.get(name), device=device)
    return time.perf_counter() - t0, r


def ccm_model(args, info, opts) -> list[dict]:
    """Cost lines of the exact back-ends for CCM, one entry per (E, L)."""
    S1, S2 = args.ccm_samples
    names = [b for b in args.backends if b in ("exact", "kdtree")]
    print(f"device: {info.name} ({info.runtime}), CCM, {S1} and {S2} libraries per "
          f"direction, cost = fixed + per library (s)", flush=True)
    x, y = ccm_pair(400, 1)
    for E in args.E:  # warm-up: kernel builds, imports (never timed)
        for b in names:
            run_ccm(x, y, E, 300, 2, b, args.device, opts)
    model = []
    for E in args.E:
        print(f"\nE = {E}\n{'L':>8} " + " ".join(f"{b + ' fixed':>13} {b + '/lib':>11}"
                                                for b in names) + f" {'pick@10':>8} {'auto@10':>8}")
        for L in parse_sizes(args.L):
            x, y = ccm_pair(L + E + 1, E)
            t = {(b, S): float("inf") for b in names for S in (S1, S2)}
            rho = {}
            for _ in range(args.repeats):  # interleaved rounds, minimum per point
                for b in names:
                    for S in (S1, S2):
                        sec, r = run_ccm(x, y, E, L, S, b, args.device, opts)
                        t[b, S] = min(t[b, S], sec)
                        rho[b] = r.rho_xy_samples
            if len(rho) == 2:
                assert np.array_equal(rho["exact"], rho["kdtree"], equal_nan=True), (E, L)
            cost = {}
            for b in names:
                per = max(0.0, (t[b, S2] - t[b, S1]) / (S2 - S1))
                cost[b] = [max(0.0, t[b, S1] - per * S1), per]
            pick = min(cost, key=lambda b: cost[b][0] + 10 * cost[b][1])
            ch = choose(info, L=L, E=E, shape="ccm", libraries=10)
            print(f"{L:>8} " + " ".join(f"{cost[b][0]:>13.4f} {cost[b][1]:>11.4f}" for b in names)
                  + f" {pick:>8} {ch.backend:>8}", flush=True)
            model.append({"kernel": FAMILY, "version": MODEL_VERSION, "level": args.level,
                          "key": level_key(info, args.level), "device_type": info.device_type,
                          "device_name": info.name, "driver": info.driver_version,
                          "spec_bucket": e_bucket(E), "size_bucket": pow2_bucket(L), "size": L,
                          "spec": {"E": E, "shape": "ccm"}, "params": {"BACKEND": pick},
                          "cost": cost, "times": {b: t[b, S2] for b in names},
                          "libraries": S2})
    return model


def model_entry(info, level: str, row: dict) -> dict:
    """One crossover-model entry from a measured row (``--json`` rows carry all of it)."""
    E, size = row["E"], row["L"]  # L + E values: L library vectors
    return {"kernel": FAMILY, "version": MODEL_VERSION, "level": level,
            "key": level_key(info, level), "device_type": info.device_type,
            "device_name": info.name, "driver": info.driver_version,
            "spec_bucket": e_bucket(E), "size_bucket": pow2_bucket(size), "size": size,
            "spec": {"E": E}, "params": {"BACKEND": row["fastest_meeting_bound"]},
            "times": row["times"], "recall": row["recall"],
            "relative_mape": row["relative_mape"], "meets_bound": row["meets_bound"]}


def merge_models(new: list[dict], old: list[dict]) -> list[dict]:
    """Combine two runs' entries point by point: minimum time, lower recall, higher MAPE."""
    def key(e):
        return (e["level"], e["key"], e["spec"]["E"], e["size"])
    prev = {key(e): e for e in old}
    out = []
    for e in new:
        o = prev.get(key(e))
        if o is not None:
            e = dict(e)
            e["times"] = {b: min(t, o["times"].get(b, t)) for b, t in e["times"].items()}
            e["recall"] = {b: min(r, o["recall"].get(b, r)) for b, r in e["recall"].items()}
            e["relative_mape"] = {b: max(r, o["relative_mape"].get(b, r))
                                  for b, r in e["relative_mape"].items()}
            e["meets_bound"] = {b: r <= 1 + MAPE_BOUND for b, r in e["relative_mape"].items()}
            good = [b for b in e["times"] if e["meets_bound"][b]]
            if good:
                e["params"] = {"BACKEND": min(good, key=e["times"].get)}
        out.append(e)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--L", nargs="+", default=[f"2^{p}" for p in range(10, 18)],
                    help="series lengths (ints or 2^p)")
    ap.add_argument("--E", nargs="+", type=int, default=[1, 20])
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--min-total", type=float, default=1.0,
                    help="repeat short runs (up to 10) until this many seconds were timed")
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="skip a back-end whose predicted run exceeds this")
    ap.add_argument("--recall-sample", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=None, help="faiss/k-d tree threads")
    ap.add_argument("--json", default=None, help="write all rows to this JSON file")
    ap.add_argument("--write-model", default=None, help="write a knn_backend model JSON")
    ap.add_argument("--merge-with", default=None,
                    help="combine with an earlier --write-model file (min time per point)")
    ap.add_argument("--level", default="device", choices=("device", "arch", "vendor_type", "global"))
    ap.add_argument("--model-from", default=None,
                    help="no measuring: write --write-model from an earlier run's --json rows "
                         "(same device), merged with --merge-with if given")
    ap.add_argument("--shape", default="simplex", choices=("simplex", "ccm"))
    ap.add_argument("--ccm-samples", nargs=2, type=int, default=[1, 5], metavar=("S1", "S2"),
                    help="--shape ccm: the two library counts the cost line is fitted from")
    args = ap.parse_args(argv)

    be = get_backend(args.device)
    info = be.info
    if args.shape == "ccm":
        opts = {"kdtree": {"workers": args.threads}} if args.threads else {}
        model = ccm_model(args, info, opts)
        if args.write_model:
            Path(args.write_model).write_text(json.dumps({"format": 1, "entries": model},
                                                         indent=1))
        return 0
    if args.model_from:
        if not args.write_model:
            ap.error("--model-from needs --write-model")
        rows = json.loads(Path(args.model_from).read_text())
        model = [model_entry(info, args.level, r) for r in rows if r.get("fastest_meeting_bound")]
        if args.merge_with:
            model = merge_models(model, json.loads(Path(args.merge_with).read_text())["entries"])
        Path(args.write_model).write_text(json.dumps({"format": 1, "entries": model}, indent=1))
        print(f"{len(model)} model entries -> {args.write_model}")
        return 0
    opts = {}
    if args.threads:
        opts = {"kdtree": {"workers": args.threads}, "ivf": {"threads": args.threads},
                "hnsw": {"threads": args.threads}}
    sizes = parse_sizes(args.L)
    print(f"device: {info.name} ({info.runtime}), backends {args.backends}, "
          f"MAPE bound {1 + MAPE_BOUND:.2f}x exact, repeats {args.repeats}", flush=True)
    rows, model = [], []
    for E in args.E:  # warm-up: kernel builds, library imports, thread pools (never timed)
        for b in args.backends:
            run_simplex(lorenz63(600 + E), E, b, args.device, opts, 1)
    for E in args.E:
        last: dict[str, tuple[int, float]] = {}
        print(f"\nE = {E}")
        hdr = f"{'L':>8} " + " ".join(f"{b + ' s':>10} {'rec':>6} {'relMAPE':>8}" for b in args.backends)
        print(hdr + f"  {'auto':>7} {'src':>16} {'auto/best':>9}", flush=True)
        for L in sizes:
            x = lorenz63(L + E)  # L + E values: L - 1 library vectors with a target
            rng = np.random.default_rng(0)
            npts = x.size - (E - 1)
            qs = np.sort(rng.choice(npts, size=min(args.recall_sample, npts), replace=False))
            t, m, rec, est = {}, {}, {}, {}
            active = []
            for b in args.backends:
                if b in last:
                    L0, t0 = last[b]
                    p = 2.0 if b == "exact" else 1.2
                    pred = t0 * (L / L0) ** p
                    if pred > args.max_seconds:
                        est[b] = pred
                        continue
                active.append(b)
            # interleaved rounds: every back-end once per round, so slow drifts of the
            # machine's load hit all of them alike; minimum per back-end
            total = dict.fromkeys(active, 0.0)
            rounds = 0
            while active and (rounds < args.repeats
                              or (rounds < 10 and min(total.values()) < args.min_total)):
                for b in active:
                    sec, res = run_simplex(x, E, b, args.device, opts, 1)
                    t[b] = min(t.get(b, sec), sec)
                    total[b] += sec
                    m[b] = mape(res.predicted, res.observed)
                rounds += 1
            for b in active:
                last[b] = (L, t[b])
            ref = "exact" if "exact" in m else ("kdtree" if "kdtree" in m else None)
            if ref is None:  # no exact reference ran: get one from the k-d tree
                _, res = run_simplex(x, E, "kdtree", args.device, opts, 1)
                m["_ref"] = mape(res.predicted, res.observed)
                ref = "_ref"
            kw = dict(E=E, query_points=qs, device=args.device)
            true = knn_search(x, knn_method="kdtree" if ref != "exact" or "exact" not in t
                              else "exact", **kw).indices
            for b in t:
                if b in ("exact", "kdtree"):
                    rec[b] = recall(knn_search(x, knn_method=b, **kw).indices, true)
                else:
                    rec[b] = recall(knn_search(x, knn_method=b, knn_options=opts.get(b),
                                               **kw).indices, true)
            rel = {b: m[b] / m[ref] for b in t}
            ok = {b: rel[b] <= 1 + MAPE_BOUND for b in t}
            good = [b for b in t if ok[b]]
            best = min(good, key=t.get) if good else None
            ch = choose(info, L=npts - 1, E=E)
            ratio = t[ch.backend] / t[best] if (best and ch.backend in t) else float("nan")
            cells = []
            for b in args.backends:
                if b in t:
                    cells.append(f"{t[b]:>10.3f} {rec[b]:>6.3f} {rel[b]:>8.4f}")
                elif b in est:
                    cells.append(f"{'~' + format(est[b], '.0f'):>10} {'':>6} {'':>8}")
                else:
                    cells.append(f"{'-':>10} {'':>6} {'':>8}")
            print(f"{L:>8} " + " ".join(cells)
                  + f"  {ch.backend:>7} {ch.source:>16} {ratio:>9.3f}", flush=True)
            row = {"E": E, "L": L, "times": t, "estimated_times": est, "recall": rec,
                   "relative_mape": rel, "mape": {b: m[b] for b in t}, "meets_bound": ok,
                   "fastest_meeting_bound": best, "auto": ch.backend, "auto_source": ch.source,
                   "auto_over_best": ratio, "device": info.name, "runtime": info.runtime}
            rows.append(row)
            if best:
                model.append(model_entry(info, args.level, row))
    ratios = [r["auto_over_best"] for r in rows if not math.isnan(r["auto_over_best"])]
    if ratios:
        print(f"\nauto within 10% of the fastest back-end meeting the bound at "
              f"{sum(q <= 1.10 for q in ratios)}/{len(ratios)} points (worst {max(ratios):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.write_model:
        if args.merge_with:
            model = merge_models(model, json.loads(Path(args.merge_with).read_text())["entries"])
        Path(args.write_model).write_text(json.dumps({"format": 1, "entries": model}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
