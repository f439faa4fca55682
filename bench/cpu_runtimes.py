"""PoCL vs Intel's CPU runtime on test-shaped work: first-run cost and warm speed.

Prints, per CPU runtime: the probe's cold time (a fresh verdict), the first call of
each operation (its kernels built, PoCL's cache empty) and the median of warm calls.
Run: ``PYEDMCL_CACHE_DIR=$(mktemp -d) python bench/cpu_runtimes.py`` (a fresh cache
root makes the first-run numbers real).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import pyedmcl as pe
from clkernels.devices import list_devices, usable


def _timed(fn, reps: int = 7) -> tuple[float, float]:
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    warm = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t)
    return first, statistics.median(warm)


def main() -> None:
    x = np.sin(np.arange(1000) * 0.37) + 0.1 * np.random.default_rng(0).standard_normal(1000)
    long = np.sin(np.arange(8000) * 0.37) + 0.1 * np.random.default_rng(1).standard_normal(8000)
    ops = {
        "pairwise_distances L=257 E=3": lambda d: pe.pairwise_distances(x[:257], E=3, device=d),
        "simplex L=1000 E=3": lambda d: pe.simplex(x, E=3, device=d),
        "simplex L=8000 E=5": lambda d: pe.simplex(long, E=5, device=d),
        "rqa N=2000 E=3": lambda d: pe.rqa(x[:1000].repeat(2), E=3, radius=0.1, device=d),
    }
    for info in list_devices():
        if info.runtime not in ("pocl", "intel"):
            continue
        t = time.perf_counter()
        v = usable(info)
        print(f"{info.runtime:<6} {info.name}: probe {'ok' if v.ok else 'FAILED'} "
              f"({'cached' if v.cached else f'cold {v.seconds:.2f} s'}; call {time.perf_counter() - t:.3f} s)")
        if not v.ok:
            continue
        for name, fn in ops.items():
            first, warm = _timed(lambda fn=fn, r=info.runtime: fn(r))
            print(f"  {name:<30} first {first * 1e3:8.1f} ms   warm {warm * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
