"""RQA at scale: ``pe.rqa_batch`` against a pyunicorn loop and a loop of ``pe.rqa``, and
``pe.rqa_grid`` with K radii against one ``pe.rqa`` call, in one process, on the same device.
Prints times (medians of --repeat, runs interleaved), ratios and the cells per second.

    python bench/bench_rqa_batch.py                        # 300 series x 800, N=5000 grid
    python bench/bench_rqa_batch.py --series 50 --points 400 --grid-n 2000 --repeat 3
    python bench/bench_rqa_batch.py --device nvidia --series 100000 --points 1000 \\
        --methods batched --peer-series 20 --grid-n 0        # the GPU target: <= 1 s

pyunicorn runs RecurrencePlot + its measures per series (pyedmcl.rqa._oracles, as the
tests call it; float64 distances); pyedmcl in float32 (every cell decided as float64
does). The pyunicorn loop and the pe.rqa loop are timed on --peer-series series and
scaled per series. The batch rows of those series are checked equal to the pe.rqa
loop's rows (every measure, bit for bit). ``--methods``: the rqa_batch methods timed
(``batched``: every series in two launches, the default; ``series``: one D&R run per
series; ``packed``: series end to end in one band pass). Cells: the n x n cells of every
series' recurrence matrix.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import median_time


def _median_time(fn, repeat: int) -> float:
    return median_time(fn, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--points", type=int, default=800)
    ap.add_argument("--peer-series", type=int, default=60,
                    help="pyunicorn and the pe.rqa loop: series timed (and rows checked)")
    ap.add_argument("--methods", default="batched,series",
                    help="rqa_batch methods, comma separated (batched, series, packed)")
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--radius", type=float, default=0.2,
                    help="radius (the series are standardised: 0.2 gives RR ~ 3%%)")
    ap.add_argument("--grid-n", type=int, default=5000, help="rqa_grid's N (0: skip)")
    ap.add_argument("--radii", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--set", default=None,
                    help="JSON launch values over the batch kernels' defaults (batch_params)")
    ap.add_argument("--profile", action="store_true",
                    help="also the host's profile of one batched call (cProfile)")
    a = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
    from pyedmcl.rqa.measures import MEASURES

    methods = [m for m in a.methods.split(",") if m]
    if a.set:
        import json

        from pyedmcl.rqa import batch_kernels as kb

        extra, base = json.loads(a.set), kb.batch_params
        kb.batch_params = lambda info: {**base(info), **extra}
        print(f"launch values over the defaults: {extra}")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((a.points, a.series)).cumsum(axis=0)
    X /= X.std(axis=0)
    peer = min(a.peer_series, a.series)
    kw = dict(E=a.E, tau=a.tau, radius=a.radius, device=a.device)
    be = get_backend(a.device)
    print(f"device: {be.info.name} ({be.info.runtime}); {a.series} series x {a.points} "
          f"points, E={a.E} tau={a.tau} radius={a.radius} float32; median of {a.repeat}")
    for m in methods:  # programs built
        pe.rqa_batch(X[:, :2], method=m, **kw)
    out: dict[str, list[float]] = {m: [] for m in methods}
    frames: dict[str, object] = {}
    tl, tu = [], []
    rows = []

    try:  # a GPU machine may lack pyunicorn: its loop is then not timed
        import pyunicorn  # noqa: F401
        have_unicorn = True
    except ImportError:
        have_unicorn = False
        print("pyunicorn is not installed here: its loop is not timed")

    def unicorn() -> None:
        for j in range(peer if have_unicorn else 0):
            pyunicorn_measures(pyunicorn_rp(X[:, j], E=a.E, tau=a.tau, radius=a.radius))

    def loop() -> None:
        rows[:] = [pe.rqa(X[:, j], **kw) for j in range(peer)]

    unicorn()  # warm-up (imports, Cython)
    for _ in range(a.repeat):  # interleaved
        for m in methods:
            t0 = time.perf_counter()
            frames[m] = pe.rqa_batch(X, method=m, **kw)
            out[m].append(time.perf_counter() - t0)
        tl.append(_median_time(loop, 1) * a.series / peer)
        tu.append(_median_time(unicorn, 1) * a.series / peer if have_unicorn else float("nan"))
    tl_, tu_ = statistics.median(tl), statistics.median(tu)
    if a.profile and methods:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.runcall(lambda: pe.rqa_batch(X, method=methods[0], **kw))
        pstats.Stats(pr).sort_stats("cumtime").print_stats(30)

    def same(df) -> bool:
        return all(all((np.isnan(r.measures[k]) and np.isnan(df.iloc[j][k]))
                       or r.measures[k] == df.iloc[j][k] for k in MEASURES)
                   for j, r in enumerate(rows))

    n = a.points - (a.E - 1) * a.tau
    cells = a.series * n * n
    rr = float(np.median(frames[methods[0]]["RR"])) if methods else float("nan")
    print(f"median RR {rr:.4f}; {cells:.3g} cells")
    for m in methods:
        t = statistics.median(out[m])
        print(f"rqa_batch {m:8s} {t:8.3f} s  ({t / a.series * 1e3:.3f} ms/series, "
              f"{cells / t:.3g} cells/s)  rows == pe.rqa ({peer} checked): "
              f"{same(frames[m])}  pe.rqa loop/this {tl_ / t:.2f}  pyunicorn/this "
              f"{tu_ / t:.1f}  (runs: {', '.join(f'{x:.3f}' for x in out[m])})")
    print(f"pe.rqa loop        {tl_:8.3f} s  ({tl_ / a.series * 1e3:.3f} ms/series, "
          f"{peer} series timed)")
    print(f"pyunicorn loop     {tu_:8.3f} s  ({tu_ / a.series * 1e3:.3f} ms/series, "
          f"{peer} series timed)")
    if not a.grid_n:
        return
    x = rng.standard_normal(a.grid_n).cumsum()
    x /= x.std()
    radii = list(np.linspace(0.05, 0.4, a.radii))
    gkw = dict(E=a.E, tau=a.tau, device=a.device)
    mid = radii[(a.radii - 1) // 2]
    pe.rqa(x, radius=mid, **gkw)
    pe.rqa_grid(x, radius=radii, **gkw)
    t1s, tks = [], []
    for _ in range(a.repeat):  # interleaved
        t1s.append(_median_time(lambda: pe.rqa(x, radius=mid, **gkw), 1))
        tks.append(_median_time(lambda: pe.rqa_grid(x, radius=radii, **gkw), 1))
    t1, tk = statistics.median(t1s), statistics.median(tks)
    rrs = pe.rqa_grid(x, radius=radii, **gkw)["RR"]
    print(f"rqa_grid RR over the radii: {rrs.min():.4f} .. {rrs.max():.4f}")
    print(f"rqa_grid N={a.grid_n}: one pe.rqa call (r={mid:.2f}) {t1:.4f} s, {a.radii} radii "
          f"{tk:.4f} s, ratio {tk / t1:.2f} (every radius decided in one D&R pass; "
          "bench/bench_rqa_grid.py: more series, dtypes, best of)")
    t1 = _median_time(lambda: pe.rqa_grid(x, radius=radii[0], **gkw), a.repeat)
    tl1 = _median_time(lambda: pe.rqa_grid(x, radius=radii[0], l_min=list(range(2, 10)),
                                           **gkw), a.repeat)
    print(f"rqa_grid N={a.grid_n}: 8 l_min at 1 radius {tl1:.4f} s, ratio {tl1 / t1:.2f} "
          "(one pass, measures per l_min from its histograms)")


if __name__ == "__main__":
    main()
