"""First-use cost of mixed-E jobs: the same job with cold kernel caches, warm ones, and hot.

A mixed-E job launches one kernel specialisation per E value (the cross map's pack and
skill per E-group, the E scan's fused kernels); the first run of a job builds them.
Each case runs three times, every run a fresh process except the last:

* cold: empty caches (``PYEDMCL_CACHE_DIR`` a new folder, which holds PyOpenCL's binary
  cache and PoCL's kernel cache; ``CUDA_CACHE_PATH`` a new folder, NVIDIA's own cache,
  which PyOpenCL relies on there). The job builds every program (on GPUs whose compiler
  builds one program at a time, NVIDIA's, a mixed-E map's wide E-groups share one
  runtime-K program, theirs built behind the job by helper processes: decision 0102).
* warm: a new process on the caches the cold run filled (binaries loaded, not compiled).
* hot: the same job again in the warm run's process (nothing built: compute alone).

The device is chosen and probed before the clock starts (the probe's own builds are not
counted). Printed per case: job seconds of each run, the cold job's CPU seconds (all
threads: steadier than wall time on a shared machine), programs built in the cold run
and the sum of their build times (which exceeds the cold job's wall time when programs build
in parallel, :meth:`clkernels.Backend.prebuild`). ``--threads 1`` builds one program at
a time (``PYEDMCL_BUILD_THREADS``), to compare.

Cases: ``xmap``: all-to-all cross map of N random walks of length L, E per series
cycling 1..max_E (every E present); ``auto``: the same map with E chosen per series
(the optimal-E scan over 1..max_E first); ``scan``: ``pyedmcl.embed_dimension`` of one
series, E = 1..max_E (the fused scan).

Run:  python bench/bench_first_use.py --device intel
      python bench/bench_first_use.py --device nvidia --N 1000 --L 1000
      python bench/bench_first_use.py --device nvidia --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads (the compilers' too): on a
    machine shared with other jobs it moves less than the wall time."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(args: argparse.Namespace) -> None:
    """One process: pick the device (probe), time the job (cold/warm), then again (hot)."""
    import numpy as np

    import pyedmcl as pe
    from clkernels import get_backend

    be = get_backend(args.device)
    build_s = [0.0]
    by_kernel: dict[str, list[float]] = {}  # first kernel name of a program: [count, seconds]
    build = type(be)._build  # the PyOpenCL backend's: one call per program built or loaded

    def timed_build(self, source, options):
        t = time.perf_counter()
        try:
            return build(self, source, options)
        finally:
            dt = time.perf_counter() - t
            build_s[0] += dt
            names = re.findall(r"__kernel\s+(?:__attribute__\(\(.*?\)\)\s+)?void\s+(\w+)", source)
            row = by_kernel.setdefault(names[0] if names else "?", [0, 0.0])
            row[0] += 1
            row[1] += dt

    type(be)._build = timed_build
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.standard_normal((args.L, args.N)), axis=0)
    if args.decimals is not None:  # as instruments record: scans then run in float64
        X = np.round(X, args.decimals)
    E = np.arange(args.N) % args.max_E + 1

    def job() -> None:
        if args.case == "xmap":
            pe.xmap(X, E=E, device=be.info.selector)
        elif args.case == "auto":
            pe.xmap(X, E="auto", max_E=args.max_E, device=be.info.selector)
        else:
            pe.embed_dimension(X[:, 0], max_E=args.max_E, device=be.info.selector)

    n0 = be.build_count
    t, c = time.perf_counter(), cpu_seconds()
    job()
    first, cpu = time.perf_counter() - t, cpu_seconds() - c
    built, spent = be.build_count - n0, build_s[0]
    t = time.perf_counter()
    job()
    hot = time.perf_counter() - t
    print(json.dumps({"job_s": first, "cpu_s": cpu, "built": built, "build_s": spent, "hot_s": hot,
                      "by_kernel": by_kernel, "device": f"{be.info.runtime}:{be.info.name}"}))


def run_case(args: argparse.Namespace, case: str) -> dict:
    cache = tempfile.mkdtemp(prefix="pyedmcl-first-use-")
    env = dict(os.environ, PYEDMCL_CACHE_DIR=cache, CUDA_CACHE_PATH=str(Path(cache) / "cuda"),
               PYEDMCL_QUIET="1")
    env.pop("POCL_CACHE_DIR", None)  # clkernels then keeps PoCL's cache in PYEDMCL_CACHE_DIR
    if args.threads:
        env["PYEDMCL_BUILD_THREADS"] = str(args.threads)
    cmd = [sys.executable, __file__, "--child", case, "--device", args.device, "--N",
           str(args.N), "--L", str(args.L), "--max-E", str(args.max_E)]
    if args.decimals is not None:
        cmd += ["--decimals", str(args.decimals)]
    out = {}
    for run in ("cold", "warm"):
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if res.returncode:
            sys.exit(f"{case} ({run}) failed:\n{res.stderr[-3000:]}")
        out[run] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="device selector (default: pyedmcl's)")
    ap.add_argument("--N", type=int, default=50, help="series of the cross map")
    ap.add_argument("--L", type=int, default=500, help="series length")
    ap.add_argument("--max-E", type=int, default=20, help="E values 1..max_E")
    ap.add_argument("--cases", default="xmap,auto,scan",
                    help="xmap, auto, scan (comma-separated)")
    ap.add_argument("--threads", type=int, default=0,
                    help="programs built at once (0: clkernels' default, one per CPU)")
    ap.add_argument("--decimals", type=int, default=None,
                    help="round the series to this many decimals (the scan's float64 path)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.case = args.child
        args.device = args.device or None
        child(args)
        return
    args.device = args.device or ""
    print(f"# first-use cost, N={args.N} L={args.L} E=1..{args.max_E}, build threads "
          f"{args.threads or 'default'}"
          + (f", rounded to {args.decimals} decimals" if args.decimals is not None else ""))
    print(f"{'case':6} {'cold s':>8} {'cold cpu':>8} {'warm s':>8} {'hot s':>8} {'built':>6} "
          f"{'build s':>8}  device")
    rows = []
    for case in args.cases.split(","):
        r = run_case(args, case.strip())
        c, w = r["cold"], r["warm"]
        print(f"{case:6} {c['job_s']:8.2f} {c['cpu_s']:8.2f} {w['job_s']:8.2f} {w['hot_s']:8.2f} "
              f"{c['built']:6d} "
              f"{c['build_s']:8.2f}  {c['device']}", flush=True)
        rows.append((case, c["job_s"], w["hot_s"]))
        for name, (count, secs) in sorted(c["by_kernel"].items(), key=lambda kv: -kv[1][1]):
            print(f"    {name:40} {count:4d} programs {secs:8.2f} s")
    for case, cold, hot in rows:
        print(f"{case}: cold/hot ratio {cold / max(hot, 1e-9):.1f}x "
              f"(first-use cost {cold - hot:.2f} s)")


if __name__ == "__main__":
    main()
