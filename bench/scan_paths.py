"""The E scan's three paths on one device: the fused scan, buckets of E, one pipeline per E.

For series of each length (a random walk rounded to ``--decimals``: decimal data, which
the scans run in float64) and each max_E, prints the first call of each path in this
process (its kernels built, or loaded where the caches hold them: run with an empty
``PYEDMCL_CACHE_DIR`` to time builds) and the best of three repeated calls. ``fused``
is ``pyedmcl.embed_dimension(fused=True)`` (max_E <= 32); ``buckets`` and ``per-E``
call the scan's pipelines directly. The numbers behind decision 0154's float64 rule.

Run:  PYEDMCL_CACHE_DIR=$(mktemp -d) python bench/scan_paths.py --device intel
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def paths(x: np.ndarray, max_E: int, dtype: str, device: str | None) -> dict:
    """The three ways to scan E = 1..max_E of ``x``, as functions of no argument."""
    import pyedmcl as pe
    from pyedmcl.edm.scans import _scan
    from pyedmcl.primitives.ranges import resolve

    Es = list(range(1, max_E + 1))

    def plan(n: int, E: int):
        return resolve(n, E=E)

    return {
        "fused": lambda: pe.embed_dimension(x, max_E=max_E, device=device, fused=True),
        "buckets": lambda: _scan(x, None, "E", Es, plan, dtype, device, None, bucketed=True),
        "per-E": lambda: _scan(x, None, "E", Es, plan, dtype, device, None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="device selector (default: pyedmcl's)")
    ap.add_argument("--lengths", default="700,4000", help="series lengths")
    ap.add_argument("--max-E", default="10,20,32", help="max_E values")
    ap.add_argument("--decimals", type=int, default=2, help="round the series (float64 path)")
    ap.add_argument("--dtype", default="float64", help="the pipelines' dtype")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    print(f"# E scan paths, device {args.device or 'default'}, dtype {args.dtype}, "
          f"{args.decimals} decimals")
    print(f"{'L':>6} {'max_E':>5} {'path':8} {'first s':>8} {'repeat s':>9}")
    for L in map(int, args.lengths.split(",")):
        x = np.round(np.cumsum(rng.standard_normal(L)), args.decimals)
        for max_E in map(int, args.max_E.split(",")):
            for name, run in paths(x, max_E, args.dtype, args.device).items():
                t = time.perf_counter()
                run()
                first = time.perf_counter() - t
                best = np.inf
                for _ in range(3):
                    t = time.perf_counter()
                    run()
                    best = min(best, time.perf_counter() - t)
                print(f"{L:6d} {max_E:5d} {name:8} {first:8.2f} {best:9.3f}", flush=True)


if __name__ == "__main__":
    main()
