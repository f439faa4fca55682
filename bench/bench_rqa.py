"""RQA benchmark: pyedmcl (D&R) vs PyRQA (optimisations on; default and fastest variant)
and pyunicorn, in one process, on the same logistic-map series. Prints times and ratios.

    python bench/bench_rqa.py --device pocl --sizes 30000 100000
    python bench/bench_rqa.py --device pocl --sizes 30000 --recurrence-rate 0.1 --repeat 5 \
        --peer-repeat 3
    python bench/bench_rqa.py --device nvidia --sizes 100012 1000012 --pyrqa-platform NVIDIA \
        --pyrqa-max 100012
    python bench/bench_rqa.py --device nvidia --sizes 1000000 --no-peers \
        --params '{"VEC": 1, "WG": 128, "EDGE": 2048, "BITS": 2, "PH": 0}'

PyRQA's "fastest variant" is picked by timing its variants at --pilot points
first. pyunicorn stores the full N x N matrix: it only runs up to --pyunicorn-max.
CPU seconds (process_time, all threads) are printed too: on a shared machine they
are less disturbed by other load than wall time. Times are medians of --repeat
(pyedmcl) and --peer-repeat (PyRQA) runs, interleaved in one process; ratios are
of medians. --recurrence-rate picks, per N, the radius giving that rate (pyunicorn's
order statistic, pyedmcl.rqa.radius) before timing; every library then runs with
that fixed radius. Measured histograms are checked
against PyRQA's (float32 both: a few threshold
cells may differ; the count of differing recurrences is printed).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

VARIANTS = ("ColumnNoOverlapMaterialisationByteNoRecycling",  # PyRQA's default
            "ColumnOverlapMaterialisationByteRecycling",
            "ColumnNoOverlapMaterialisationBitRecycling",
            "RowNoOverlapMaterialisationByteRecycling",
            "ColumnNoOverlapNoMaterialisation",
            "RowNoOverlapNoMaterialisation")


def logistic(n: int) -> np.ndarray:
    """Logistic map r=3.9 from 0.4, no burn-in (pyedmcl.data.logistic_map)."""
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=3.9, x0=0.4, burn=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--devices", default=None, help="comma-separated: split over several devices")
    ap.add_argument("--sizes", type=int, nargs="+", default=[30000, 100000])
    ap.add_argument("--E", type=int, default=5)
    ap.add_argument("--tau", type=int, default=3)
    ap.add_argument("--radius", type=float, default=0.44)
    ap.add_argument("--recurrence-rate", type=float, default=None,
                    help="pick the radius per N for this recurrence rate (overrides --radius)")
    ap.add_argument("--peer-repeat", type=int, default=1, help="PyRQA runs per size (median)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--edge", type=int, default=None)
    ap.add_argument("--params", default=None,
                    help='rqa_lines tunables as JSON, e.g. \'{"VEC": 1, "WG": 128, "EDGE": 2048, '
                         '"BITS": 2, "PH": 0}\' (default: tuned / heuristic)')
    ap.add_argument("--pyrqa-platform", default="Portable Computing Language")
    ap.add_argument("--pyrqa-max", type=int, default=30000, help="largest N run with PyRQA")
    ap.add_argument("--pyunicorn-max", type=int, default=10000)
    ap.add_argument("--pilot", type=int, default=5000, help="N for picking PyRQA's fastest variant")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="pyedmcl runs per size; medians (and minima) of wall and CPU-s")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.rqa._oracles import pyrqa_run, pyunicorn_measures, pyunicorn_rp
    from pyedmcl.rqa.radius import radius_for_rate

    rbe = get_backend(args.devices.split(",")[0] if args.devices else args.device)
    kw = dict(E=args.E, tau=args.tau, radius=args.radius, dtype=args.dtype, edge=args.edge)
    if args.params:
        kw["params"] = json.loads(args.params)
    if args.devices:
        kw["devices"] = args.devices
    else:
        kw["device"] = args.device
    pe.rqa(logistic(2000), **kw)  # build kernels once
    fastest = VARIANTS[0]
    rows = []
    if not args.no_peers:
        x = logistic(args.pilot)
        pr = args.radius if args.recurrence_rate is None else radius_for_rate(
            x, None, args.recurrence_rate, E=args.E, tau=args.tau, metric="euclidean",
            dtype=np.dtype(args.dtype), backend=rbe)
        times = {}
        for v in VARIANTS:
            try:
                pyrqa_run(x, E=args.E, tau=args.tau, radius=pr, dtype=np.float32,
                          variant=v, platform=args.pyrqa_platform)
                _, times[v] = pyrqa_run(x, E=args.E, tau=args.tau, radius=pr,
                                        dtype=np.float32, variant=v, platform=args.pyrqa_platform)
            except Exception as exc:  # a variant may not build on a platform
                print(f"PyRQA variant {v} failed: {exc}")
        fastest = min(times, key=times.get)
        print(f"PyRQA variants at N={args.pilot}: "
              + ", ".join(f"{k}={t:.3f}s" for k, t in sorted(times.items(), key=lambda kv: kv[1])))
    for n in args.sizes:
        x = logistic(n + (args.E - 1) * args.tau)
        radius = args.radius
        if args.recurrence_rate is not None:
            radius = radius_for_rate(x, None, args.recurrence_rate, E=args.E, tau=args.tau,
                                     metric="euclidean", dtype=np.dtype(args.dtype),
                                     backend=rbe)
            kw["radius"] = radius
        peers = ([] if args.no_peers or n > args.pyrqa_max else
                 [("pyrqa_default", VARIANTS[0])]
                 + ([("pyrqa_fastest", fastest)] if fastest != VARIANTS[0] else []))
        walls: dict[str, list[float]] = {k: [] for k in ["pyedmcl", *(p for p, _ in peers)]}
        cpus: dict[str, list[float]] = {k: [] for k in walls}
        rec_diff: dict[str, int] = {}
        for it in range(max(1, args.repeat, args.peer_repeat)):  # interleaved: same load for all
            if it < max(1, args.repeat):
                t, c = time.perf_counter(), time.process_time()
                r = pe.rqa(x, **kw)
                walls["pyedmcl"].append(time.perf_counter() - t)
                cpus["pyedmcl"].append(time.process_time() - c)
            if it < args.peer_repeat:
                for label, v in peers:
                    c = time.process_time()
                    pr, sec = pyrqa_run(x, E=args.E, tau=args.tau, radius=radius,
                                        dtype=np.float32, variant=v, platform=args.pyrqa_platform)
                    walls[label].append(sec)
                    cpus[label].append(time.process_time() - c)
                    rec_diff[label] = int(r.n_recurrences) - int(pr.number_of_recurrence_points)
        ours, ours_cpu = float(np.median(walls["pyedmcl"])), float(np.median(cpus["pyedmcl"]))
        row = {"N": n, "pyedmcl_s": ours, "pyedmcl_min_s": min(walls["pyedmcl"]),
               "pyedmcl_cpu_s": ours_cpu, "radius": radius, "RR": r.RR, "DET": r.DET, "LAM": r.LAM,
               "devices": r.settings["devices"], "launches": r.settings["launches"],
               "symmetric": r.settings.get("symmetric")}
        cells = 1.5 * n * n
        row["Gcells_per_s"] = cells / ours / 1e9
        for label, _ in peers:
            row[label + "_s"] = float(np.median(walls[label]))
            row[label + "_cpu_s"] = float(np.median(cpus[label]))
            row[label + "_ratio"] = row[label + "_s"] / ours
            row[label + "_cpu_ratio"] = row[label + "_cpu_s"] / ours_cpu
            row[label + "_rec_diff"] = rec_diff[label]
        if peers:
            if fastest == VARIANTS[0]:
                for suffix in ("_s", "_cpu_s", "_ratio", "_cpu_ratio"):
                    row["pyrqa_fastest" + suffix] = row["pyrqa_default" + suffix]
            row["pyrqa_fastest_variant"] = fastest
        if not args.no_peers and n <= args.pyunicorn_max:
            t = time.perf_counter()
            rp = pyunicorn_rp(x, E=args.E, tau=args.tau, radius=radius)
            pyunicorn_measures(rp)
            row["pyunicorn_s"] = time.perf_counter() - t
            row["pyunicorn_ratio"] = row["pyunicorn_s"] / ours
        rows.append(row)
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
