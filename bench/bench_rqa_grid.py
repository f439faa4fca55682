"""``pe.rqa_grid`` with K radii (one Divide & Recombine pass deciding every radius, NTHR)
against one ``pe.rqa`` call and against a loop of K ``pe.rqa`` calls, in one process, on
the same device. Prints wall times (best and median of --repeat, runs interleaved) and
the ratios; checks every grid row equal to its single call.

    python bench/bench_rqa_grid.py                      # N = 5,000, 8 radii, CPU default
    python bench/bench_rqa_grid.py --device nvidia --n 100000
    python bench/bench_rqa_grid.py --per-kernel         # and device ms per kernel

Series: "walk" (a standardised Gaussian random walk: recurrences cluster near the main
diagonal, most of the matrix empty) and "logistic" (the logistic map at r = 3.9:
recurrences spread over the whole matrix). The single call takes the middle radius of
the K (RR about 5 % on the walk); the ratios against the smallest and largest single
radius are printed too. ``--per-kernel``: the device milliseconds per kernel of one grid
call and one single call (profiling events, best of --repeat), and the host's share
(wall minus device).
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np


def _series(kind: str, n: int, E: int, tau: int) -> tuple[np.ndarray, np.ndarray]:
    """The series (n embedded points) and its K radii's range (lo, hi)."""
    size = n + (E - 1) * tau
    if kind == "walk":
        x = np.random.default_rng(0).standard_normal(size).cumsum()
        return x / x.std(), np.array([0.05, 0.4])
    from pyedmcl.data import logistic_map

    return logistic_map(size, r=3.9, x0=0.4, burn=0), np.array([0.02, 0.16])


def _time(fn, out: list[float]) -> None:
    t0 = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t0)


def _interleaved(pe, x: np.ndarray, radii: list[float], mid: float, kw: dict, repeat: int
                 ) -> tuple[dict[str, float], dict[str, float]]:
    """Best and median wall seconds of one call (the middle, smallest and largest radius),
    the grid and the loop of single calls, ``repeat`` rounds, interleaved."""
    runs = {"one": lambda: pe.rqa(x, radius=mid, **kw),
            "grid": lambda: pe.rqa_grid(x, radius=radii, **kw),
            "lo": lambda: pe.rqa(x, radius=radii[0], **kw),
            "hi": lambda: pe.rqa(x, radius=radii[-1], **kw),
            "loop": lambda: [pe.rqa(x, radius=r, **kw) for r in radii]}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeat):
        for k, fn in runs.items():
            _time(fn, times[k])
    return ({k: min(v) for k, v in times.items()},
            {k: statistics.median(v) for k, v in times.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000, help="embedded points")
    ap.add_argument("--radii", type=int, default=8)
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--series", default="walk,logistic")
    ap.add_argument("--dtype", default="float32,float64")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--device", default=None)
    ap.add_argument("--per-kernel", action="store_true",
                    help="device ms per kernel of one grid call and one single call")
    a = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.rqa.measures import MEASURES
    from pyedmcl.rqa.radii import run_radii  # noqa: F401  (the path measured)

    be = get_backend(a.device)
    print(f"device: {be.info.runtime} {be.info.name}; N={a.n} embedded points, E={a.E}, "
          f"tau={a.tau}, {a.radii} radii; best / median of {a.repeat}, runs interleaved")
    for kind in a.series.split(","):
        x, (lo, hi) = _series(kind, a.n, a.E, a.tau)
        radii = [float(r) for r in np.linspace(lo, hi, a.radii)]
        mid = radii[(a.radii - 1) // 2]
        for dt in a.dtype.split(","):
            kw = dict(E=a.E, tau=a.tau, dtype=dt, device=be)
            grid = pe.rqa_grid(x, radius=radii, **kw)  # programs built
            singles = [pe.rqa(x, radius=r, **kw) for r in radii]
            same = all(all((np.isnan(s.measures[k]) and np.isnan(grid.iloc[i][k]))
                           or s.measures[k] == grid.iloc[i][k] for k in MEASURES)
                       and s.n_recurrences == grid.iloc[i]["n_recurrences"]
                       for i, s in enumerate(singles))
            best, med = _interleaved(pe, x, radii, mid, kw, a.repeat)
            rr = grid["RR"]
            print(f"{kind} {dt}: RR {rr.min():.4f} .. {rr.max():.4f}; rows == pe.rqa: {same}")
            print(f"  pe.rqa r={mid:.3f}      {best['one'] * 1e3:8.2f} ms (median "
                  f"{med['one'] * 1e3:.2f}); r={radii[0]:.3f} {best['lo'] * 1e3:.2f}, "
                  f"r={radii[-1]:.3f} {best['hi'] * 1e3:.2f}")
            print(f"  rqa_grid {a.radii} radii      {best['grid'] * 1e3:8.2f} ms (median "
                  f"{med['grid'] * 1e3:.2f})  ratio to one call {best['grid'] / best['one']:.2f}"
                  f" (median {med['grid'] / med['one']:.2f}; to r={radii[0]:.3f} "
                  f"{best['grid'] / best['lo']:.2f}, to r={radii[-1]:.3f} "
                  f"{best['grid'] / best['hi']:.2f})")
            print(f"  loop of {a.radii} pe.rqa     {best['loop'] * 1e3:8.2f} ms (median "
                  f"{med['loop'] * 1e3:.2f})  loop / grid {best['loop'] / best['grid']:.2f}")
            if a.per_kernel:
                calls = {"grid": partial(pe.rqa_grid, x, radius=radii, **kw),
                         "one": partial(pe.rqa, x, radius=mid, **kw)}
                for name, fn in calls.items():
                    _print_kernels(be, name, fn, best[name], a.repeat)


def _print_kernels(be, name: str, fn, wall: float, repeat: int) -> None:
    """Device ms per kernel of ``fn`` (each kernel's best over ``repeat`` calls) and the
    wall's remainder (host work the device does not hide)."""
    from bench_rqa_paths import _per_launch

    per: dict[str, float] = {}
    for _ in range(repeat):
        for k, v in _per_launch(be, fn).items():
            per[k] = min(per.get(k, v), v)
    dev = sum(per.values())
    top = sorted(per.items(), key=lambda kv: -kv[1])
    print(f"    {name}: device {dev * 1e3:.2f} ms (" + ", ".join(
        f"{k.removeprefix('rqa_')} {v * 1e3:.2f}" for k, v in top if v >= 5e-5)
        + f"), wall - device {(wall - dev) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
