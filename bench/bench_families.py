"""Time every kernel family through the public API, optionally against another tree.

A refactoring of the kernels (parts, family modules, tuning keys) must leave tuned
speeds unchanged. This runs one representative call per family on one device (warm:
kernels built and tuning looked up before timing), reports the best of ``--repeat``
wall times, and with ``--compare DIR`` runs the same cases in a subprocess importing
pyedmcl from DIR (another checkout) on the same data, printing the ratio per case.

    python bench/bench_families.py --device nvidia --compare .old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _lorenz(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = np.empty((n + 1000, 3))
    x[0] = (1.0 + rng.random(), 1.0, 1.0)
    dt = 0.01
    for i in range(1, len(x)):
        a, b, c = x[i - 1]
        x[i] = (a + dt * 10 * (b - a), b + dt * (a * (28 - c) - b), c + dt * (a * b - 8 / 3 * c))
    return x[1000:, 0].copy()


def cases(gpu: bool):
    """name -> (callable(device), what it exercises)."""
    import numpy as np

    import pyedmcl as pe

    big = 2 ** 18 if gpu else 2 ** 14
    x = _lorenz(big, 0)
    y = _lorenz(big, 1)
    n_x = 1000 if gpu else 100
    X = np.stack([_lorenz(1000, s) for s in range(n_x)], axis=1)  # (time, series), as xmap takes
    rng = np.random.default_rng(5)
    E_mixed = rng.integers(1, 21 if gpu else 11, size=n_x)
    n_rqa = 100_000 if gpu else 10_000
    L_scan = 10_000 if gpu else 4_000
    return {
        "simplex E=20 (knn, lookup)": lambda d: pe.simplex(x, E=20, device=d),
        "edim E=1..20 (knn_scan, lookup)": lambda d: pe.embed_dimension(x[:L_scan], max_E=20, device=d),
        "smap E=5 theta=2 (smap)": lambda d: pe.smap(x[:L_scan], E=5, theta=2.0, device=d),
        "ccm E=5 5 sizes x 20 (knn, lookup)": lambda d: pe.ccm(
            x[:L_scan], y[:L_scan], E=5, lib_sizes=[100, 500, 1000, 2000, 3000], sample=20,
            seed=1, device=d),
        "xmap E=5 (xmap_knn, xmap_skill)": lambda d: pe.xmap(X, E=5, device=d),
        "xmap mixed E (xmap_scan, xmap_skill)": lambda d: pe.xmap(X, E=E_mixed, device=d),
        "rqa E=3 tau=6 RR=0.05 (rqa_lines)": lambda d: pe.rqa(
            x[:n_rqa], E=3, tau=6, recurrence_rate=0.05, device=d),
        "pairwise 4000 E=5 (pairwise_distance)": lambda d: pe.pairwise_distances(
            x[:4000], E=5, device=d),
    }


def run_here(device: str | None, repeat: int) -> dict[str, float]:
    import pyedmcl  # noqa: F401  (configures clkernels: first, before any of its devices)
    from clkernels import get_backend

    be = get_backend(device)
    out = {}
    for name, fn in cases(be.info.is_gpu).items():
        fn(device)  # build kernels, tuning lookups, first touch
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(device)
            best = min(best, time.perf_counter() - t0)
        out[name] = best
    out["_device"] = be.info.name
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="another checkout: run the same cases with its pyedmcl and print ratios")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    mine = run_here(a.device, a.repeat)
    if a.json:
        print(json.dumps(mine))
        return 0
    other = None
    if a.compare:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(a.compare).resolve())] + [p for p in os.environ.get("PYTHONPATH", "").split(
                os.pathsep) if p and Path(p).resolve() != Path.cwd().resolve()])}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--json", "--repeat", str(a.repeat)]
        if a.device:
            cmd += ["--device", a.device]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")
        if res.returncode != 0:
            print(res.stderr[-2000:], file=sys.stderr)
            return 1
        other = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"device: {mine.pop('_device')}  (best of {a.repeat}, seconds)")
    head = f"{'case':42s} {'this tree':>10s}"
    if other:
        other.pop("_device", None)
        head += f" {'compare':>10s} {'ratio':>7s}"
    print(head)
    for name, t in mine.items():
        line = f"{name:42s} {t:10.4f}"
        if other and name in other:
            line += f" {other[name]:10.4f} {other[name] / t:6.3f}x"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
