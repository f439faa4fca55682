"""RQA over several devices (and Dask): one device against all of them, same process.

    python bench/bench_rqa_scaling.py --devices nvidia:0,nvidia:1
    python bench/bench_rqa_scaling.py --devices nvidia:0,nvidia:1 --dask
    python bench/bench_rqa_scaling.py --n 20000 --trace            # here: 2 contexts, 1 CPU

Auto-RQA of a logistic map (r = 3.9) or, ``--series roessler``, of the Roessler
system's x coordinate (issue 24's shape), E = 3, tau = 6, the radius of recurrence rate ``--rr`` (0.05; pyunicorn's order
statistic on a sample, found once, outside the timings). The one-device run takes
the row-order path (SHARE/SYM where the device's parameters say so); several
devices run row ranges (SHARE kept, pyedmcl.rqa.ranges) or lane bands
(pyedmcl.rqa.bands), dynamically balanced (``--split``); ``--dask`` runs the same
tasks on a LocalCluster of one worker process per device (pyedmcl.rqa.dask_rqa). Times are medians of ``--repeat`` runs after one warm-up
run (kernel builds). Cell rate: N^2 matrix cells per second (the work walked is
N^2 verticals + N^2 / 2 diagonals without SYM; "SYM 1": the run walked the upper
triangle only, as row ranges can too, decision 0084). Each run's histograms are checked
equal to the one-device run's.

``--set JSON`` puts kernel values over every device's tuned ones (``'{"EDGE": 16384}'``).

``--phases`` prints host stamps of the last run of each kind (ms from the call's start,
per thread): the entry to and return from detect_lines, the row ranges and their device
threads, each row-range device's construction, build, run, warm-up, finish and collect,
and the call's end; with
``--trace``, where a device sat idle shows against where the host was.

``--trace`` prints each device's busy time (sum of its launches' profiled device
time), its launches and bands, and the span from the run's first enqueue to the
device's last end, and its device time per launch mode (vertical, diagonal, SYM's
horizontal): a device whose busy time is far below the wall time waited (for the
host, a fold, or work the split did not give it). With no ``--devices`` and no
GPU, the default device is used twice (two contexts): on one physical device the
speed-up cannot show, but serialisation in the host code does.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
import warnings
from typing import Any

import numpy as np


def logistic(n: int) -> np.ndarray:
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=3.9, x0=0.4, burn=0)


def series(name: str, n: int) -> np.ndarray:
    """``n`` values of the logistic map, of the Roessler system's x coordinate or of a
    standardised Gaussian random walk (seed 0: long lines near the main diagonal)."""
    if name == "walk":
        x = np.random.default_rng(0).standard_normal(n).cumsum()
        return x / x.std()
    if name == "roessler":
        from pyedmcl.data import roessler

        return roessler(n)
    return logistic(n)


def _devices(spec: str | None) -> tuple[list[Any], str]:
    """Backends to run on: ``--devices``, else every GPU that builds kernels, else the
    default device twice (two contexts of one device: a host-serialisation check)."""
    from clkernels import get_backend
    from clkernels.devices import list_devices, usable

    if spec:
        bes = [get_backend(s) for s in spec.split(",") if s]
        return bes, "as given"
    gpus = [d for d in list_devices() if d.is_gpu and d.runtime != "oclgrind" and usable(d).ok]
    if gpus:
        return [get_backend(d) for d in gpus], "every GPU present"
    be = get_backend(None)
    return [be, type(be)(be.info)], "one device, two contexts (no GPU present)"


def _hists(r: Any) -> tuple:
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a: tuple, b: tuple) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


class _Trace:
    """Captures the device states of the last D&R run (profiling events per device)."""

    def __init__(self) -> None:
        self.dnr = importlib.import_module("pyedmcl.rqa.dnr")
        self.states: list[Any] = []
        orig = self.dnr._recombine

        def recombine(states, *rest):
            self.states = list(states)
            return orig(states, *rest)
        self.dnr._recombine = recombine
        self.warm: dict[int, Any] = {}  # row ranges: each device's walk-up launches
        multi = importlib.import_module("pyedmcl.rqa.multi")
        run_threads = multi.run_threads

        def run_noting(devs, tasks, **kw):
            self.states = [d.st for d in devs]
            self.warm = {id(d.st): d.warm_events for d in devs if hasattr(d, "warm_events")}
            return run_threads(devs, tasks, **kw)
        multi.run_threads = run_noting
        self.modes: dict[int, list[str]] = {}  # per device state: each launch's mode
        launch = self.dnr._launch

        def launch_noting(st, ln, m, fold_bins):
            self.modes.setdefault(id(st), []).append(ln.task.mode)
            return launch(st, ln, m, fold_bins)
        self.dnr._launch = launch_noting

    def report(self, wall: float) -> None:
        evs = [e for st in self.states for e in st.events]
        if not evs:
            return
        t0 = min(e.profile.queued for e in evs)
        for st in self.states:
            if not st.events:
                print(f"    {st.be.info.selector:>6} {st.be.info.name[:28]:<28} took no band")
                continue
            p = np.array([(e.profile.queued, e.profile.start, e.profile.end) for e in st.events],
                         np.float64)
            p = (p - t0) * 1e-9
            busy = float((p[:, 2] - p[:, 1]).sum())
            print(f"    {st.be.info.selector:>6} {st.be.info.name[:28]:<28} busy {busy:7.3f} s "
                  f"({busy / wall:5.1%} of wall)  launches {len(st.events):6d}"
                  f"  last enqueue {p[:, 0].max():7.3f} s  last end {p[:, 2].max():7.3f} s")
            modes = self.modes.get(id(st), [])[-len(st.events):]
            if len(modes) == len(st.events):  # device time per launch mode
                per = {md: float(sum(p[i, 2] - p[i, 1] for i in range(len(modes))
                                     if modes[i] == md)) for md in dict.fromkeys(modes)}
                warm = self.warm.get(id(st))
                if warm:
                    per["warm-up"] = float(sum((e.profile.end - e.profile.start) * 1e-9
                                               for e in warm))
                print("           " + "  ".join(f"{md} {t:.3f} s" for md, t in per.items()))


class _Phases:
    """Host stamps (ms from the call's start, per thread) of the phases of one run."""

    def __init__(self) -> None:
        import collections
        import threading

        self.stamps: dict[str, list[float]] = collections.defaultdict(list)
        self.t0 = 0.0
        ranges = importlib.import_module("pyedmcl.rqa.ranges")
        core = importlib.import_module("pyedmcl.rqa.core")
        multi = importlib.import_module("pyedmcl.rqa.multi")

        def wrap(obj: Any, attr: str, name: str) -> None:
            f = getattr(obj, attr)

            def g(*a: Any, **k: Any) -> Any:
                who = threading.current_thread().name.split(" ")[0]
                self.stamps[f"{name} > {who}"].append(self.now())
                try:
                    return f(*a, **k)
                finally:
                    self.stamps[f"{name} < {who}"].append(self.now())
            setattr(obj, attr, g)
        wrap(core, "detect_lines", "detect_lines")
        wrap(multi, "_detect_ranges", "row ranges")
        wrap(multi, "run_threads", "device threads")
        for meth in ("__init__", "build", "run", "_warm", "finish", "collect"):
            wrap(ranges.RangeDevice, meth, f"range device {meth}")

    def now(self) -> float:
        return 1e3 * (time.perf_counter() - self.t0)

    def start(self) -> None:
        self.stamps.clear()
        self.t0 = time.perf_counter()

    def report(self) -> None:
        self.stamps["call end"].append(self.now())
        for name, ts in sorted(self.stamps.items(), key=lambda kv: kv[1][0]):
            print(f"      {name:40s} " + " ".join(f"{t:.1f}" for t in ts[:8])
                  + (f" ... ({len(ts)})" if len(ts) > 8 else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000, help="embedded points N")
    ap.add_argument("--series", default="logistic", choices=("logistic", "roessler", "walk"))
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=6)
    ap.add_argument("--rr", type=float, default=0.05, help="recurrence rate the radius gives")
    ap.add_argument("--radius", type=float, default=None, help="fixed radius (instead of --rr)")
    ap.add_argument("--devices", default=None,
                    help="comma-separated selectors, e.g. nvidia:0,nvidia:1 (default: every GPU)")
    ap.add_argument("--dask", action="store_true",
                    help="also run on a LocalCluster, one worker process per device")
    ap.add_argument("--band", type=int, default=None, help="lanes per band (default: ~8/device)")
    ap.add_argument("--edge", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", action="store_true", help="per-device busy time of each run")
    ap.add_argument("--phases", action="store_true",
                    help="host stamps of the phases of each kind's last run")
    ap.add_argument("--one-band", action="store_true",
                    help="also time the multi-device path (--split) on one device")
    ap.add_argument("--split", default="auto", choices=("auto", "lanes", "rows"),
                    help="several devices: lane bands (no SHARE), row ranges (SHARE kept, "
                         "warm-ups) or auto (rows where the devices take SHARE)")
    ap.add_argument("--set", default=None, metavar="JSON",
                    help='kernel values over each device\'s tuned ones, e.g. \'{"EDGE": 16384}\'')
    ap.add_argument("--twice", action="store_true",
                    help="the first device in two contexts, as two devices (one GPU: the "
                         "row ranges' warm-ups measured where no second GPU is lent)")
    ap.add_argument("--rate-call", action="store_true",
                    help="call pe.rqa with recurrence_rate=--rr (the radius found in each "
                         "call) instead of the radius found once beforehand")
    ap.add_argument("--warm-box-levels", type=int, default=None, choices=(0, 1, 2, 3),
                    help="levels of row boxes the column walk-ups skip white blocks by "
                         "(default: the library's; 0: every cell walked)")
    ap.add_argument("--range-costs", action="append", default=None, metavar="JSON",
                    help='the row-range plan\'s cost constants, e.g. \'{"BLOCK_LANES": 196608}\' '
                         "(pyedmcl.rqa.ranges); given several times, the devices' call is timed "
                         "with each in turn")
    ap.add_argument("--project", type=int, default=10_000_000,
                    help="N to project the time of from the measured cell rate")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")

    import pyedmcl as pe
    from pyedmcl.rqa.radius import radius_for_rate

    if args.set:  # every device's tuned parameters with these values over them
        import json

        from pyedmcl.kernels.rqa_lines import RQA_LINES

        over = json.loads(args.set)
        tuned = RQA_LINES.params_for
        RQA_LINES.params_for = lambda *a, **k: {**tuned(*a, **k), **over}
    if args.warm_box_levels is not None:
        importlib.import_module("pyedmcl.kernels.rqa_lines").WARM_BOX_LEVELS = \
            args.warm_box_levels
    x = series(args.series, args.n + (args.E - 1) * args.tau)
    bes, why = _devices(args.devices)
    if args.twice:
        bes, why = [bes[0], type(bes[0])(bes[0].info)], "the first device in two contexts"
    print(f"devices ({why}):")
    for be in bes:
        print(f"  {be.info.selector:>6}  {be.info.runtime:<7} {be.info.name}")
    radius = args.radius if args.radius is not None else radius_for_rate(
        x, None, args.rr, E=args.E, tau=args.tau, metric="euclidean", dtype=np.float32,
        backend=bes[0])
    print(f"N = {args.n:,}  E = {args.E}  tau = {args.tau}  radius = {radius:.6g}"
          f"{'' if args.radius is not None else f' (RR target {args.rr})'}")
    kw = dict(E=args.E, tau=args.tau, radius=radius, edge=args.edge)
    if args.rate_call:
        kw = dict(E=args.E, tau=args.tau, recurrence_rate=args.rr, edge=args.edge)
        print(f"each call: recurrence_rate={args.rr} (its radius found in the call)")
    trace = _Trace() if args.trace else None
    phases = _Phases() if args.phases else None
    if args.band is not None:
        multi = importlib.import_module("pyedmcl.rqa.multi")
        multi.default_width = lambda *a, **k: args.band  # read by each run (and Dask's plan)
    cells = float(args.n) ** 2

    def timed(label: str, **extra: Any) -> tuple[float, Any]:
        r = pe.rqa(x, **kw, **extra)  # warm-up: kernel builds, worker start-up
        ts = []
        for _ in range(args.repeat):
            if phases is not None:
                phases.start()
            t = time.perf_counter()
            r = pe.rqa(x, **kw, **extra)
            ts.append(time.perf_counter() - t)
        med = statistics.median(ts)
        tasks = r.settings.get("device_tasks") or []
        print(f"{label:<28} {med:8.3f} s  (min {min(ts):.3f})  {cells / med:.3e} cells/s"
              f"  RR {r.RR:.4f}  DET {r.DET:.4f}  SYM {int(bool(r.settings.get('symmetric')))}"
              + (f"  tasks/device {tasks}" if tasks else ""))
        if trace is not None and "scheduler" not in extra:
            trace.report(ts[-1])  # the last run (its events)
        if phases is not None and "scheduler" not in extra:
            print("    host phases of the last run (ms):")
            phases.report()
        return med, r

    t1, r1 = timed(f"1 device ({bes[0].info.selector})", device=bes[0])
    importlib.import_module("pyedmcl.rqa.multi").SPLIT = args.split
    if args.one_band:  # the multi-device path on one device: what several devices each run
        core = importlib.import_module("pyedmcl.rqa.core")
        rows = core.detect_lines
        core.detect_lines = lambda *a, **k: rows(*a, **{**k, "band": 0})  # default size
        tb, rb = timed(f"1 device, split {args.split}", device=bes[0])
        core.detect_lines = rows
        print(f"  multi-device path / row path on 1 device: {tb / t1:.2f}x the time  "
              f"identical: {_same(_hists(rb), _hists(r1))}")
    if args.range_costs:
        import json

        ranges = importlib.import_module("pyedmcl.rqa.ranges")
        given = [json.loads(text) for text in args.range_costs]
        names = {k for g in given for k in g}
        if names - vars(ranges).keys():
            raise SystemExit(f"--range-costs: pyedmcl.rqa.ranges has no "
                             f"{', '.join(sorted(names - vars(ranges).keys()))}")
        library = {k: getattr(ranges, k) for k in names}
        for text, costs in zip(args.range_costs, given, strict=True):
            for k, v in {**library, **costs}.items():
                setattr(ranges, k, v)
            tc, rc = timed(f"{len(bes)} devices {text}", devices=bes)
            print(f"  speed-up {t1 / tc:.2f}x  identical: {_same(_hists(rc), _hists(r1))}")
        for k, v in library.items():
            setattr(ranges, k, v)
    tn, rn = timed(f"{len(bes)} devices", devices=bes)
    print(f"speed-up {len(bes)} devices / 1: {t1 / tn:.2f}x   identical histograms: "
          f"{_same(_hists(rn), _hists(r1))}")
    best = min(t1, tn)
    print(f"projected N = {args.project:,}: {best * (args.project / args.n) ** 2:.1f} s "
          f"at {cells / best:.3e} cells/s")
    if args.dask:
        import distributed

        with distributed.LocalCluster(n_workers=len(bes), threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            td, rd = timed(f"Dask, {len(bes)} workers", devices=bes, scheduler=client)
        print(f"Dask speed-up over 1 device: {t1 / td:.2f}x   identical histograms: "
              f"{_same(_hists(rd), _hists(r1))}   projected N = {args.project:,}: "
              f"{td * (args.project / args.n) ** 2:.1f} s")


if __name__ == "__main__":
    main()
