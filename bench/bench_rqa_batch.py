"""RQA at scale: ``pe.rqa_batch`` against a pyunicorn loop and a loop of ``pe.rqa``, and
``pe.rqa_grid`` with K radii against one ``pe.rqa`` call, in one process, on the same device. Prints times
(medians of --repeat, runs interleaved) and ratios.

    python bench/bench_rqa_batch.py                        # 300 series x 800, N=5000 grid
    python bench/bench_rqa_batch.py --series 50 --points 400 --grid-n 2000 --repeat 3

pyunicorn runs RecurrencePlot + its measures per series (pyedmcl.rqa._oracles, as the
tests call it; float64 distances); pyedmcl in float32 (every cell decided as float64
does). The pyunicorn loop is timed on --peer-series series and scaled per series.
Each batch row is checked equal to the pe.rqa loop's row.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _median_time(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--points", type=int, default=800)
    ap.add_argument("--peer-series", type=int, default=60, help="pyunicorn: series timed")
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--radius", type=float, default=0.2,
                    help="radius (the series are standardised: 0.2 gives RR ~ 5%%)")
    ap.add_argument("--grid-n", type=int, default=5000)
    ap.add_argument("--radii", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
    from pyedmcl.rqa.measures import MEASURES

    rng = np.random.default_rng(0)
    X = rng.standard_normal((a.points, a.series)).cumsum(axis=0)
    X /= X.std(axis=0)
    kw = dict(E=a.E, tau=a.tau, radius=a.radius, device=a.device)
    be = get_backend(a.device) if a.device else None
    print(f"device: {be.info.selector if be else 'default'}; {a.series} series x {a.points} "
          f"points, E={a.E} tau={a.tau} radius={a.radius} float32; median of {a.repeat}")
    for method in ("packed", "series"):  # programs built
        pe.rqa_batch(X[:, :2], method=method, **kw)

    def batch() -> None:
        batch.df = pe.rqa_batch(X, method="packed", **kw)

    def per_series() -> None:
        per_series.df = pe.rqa_batch(X, method="series", **kw)

    def loop() -> None:
        loop.rows = [pe.rqa(X[:, j], **kw) for j in range(a.series)]

    def unicorn() -> None:
        for j in range(a.peer_series):
            pyunicorn_measures(pyunicorn_rp(X[:, j], E=a.E, tau=a.tau, radius=a.radius))

    unicorn()  # warm-up (imports, Cython)
    tb, ts, tl, tu = [], [], [], []
    for _ in range(a.repeat):  # interleaved
        tb.append(_median_time(batch, 1))
        ts.append(_median_time(per_series, 1))
        tl.append(_median_time(loop, 1))
        tu.append(_median_time(unicorn, 1) * a.series / a.peer_series)
    tb, ts, tl, tu = (statistics.median(t) for t in (tb, ts, tl, tu))

    def same(df) -> bool:
        return all(all((np.isnan(r.measures[k]) and np.isnan(df.iloc[j][k]))
                       or r.measures[k] == df.iloc[j][k] for k in MEASURES)
                   for j, r in enumerate(loop.rows))

    rr = float(np.median(batch.df["RR"]))
    print(f"median RR {rr:.4f}")
    for name, t, df in (("rqa_batch packed", tb, batch.df),
                        ("rqa_batch series", ts, per_series.df)):
        print(f"{name} {t:8.3f} s  ({t / a.series * 1e3:.2f} ms/series)  rows == pe.rqa "
              f"loop: {same(df)}  pe.rqa loop/this {tl / t:.2f}  pyunicorn/this {tu / t:.1f}")
    print(f"pe.rqa loop      {tl:8.3f} s  ({tl / a.series * 1e3:.2f} ms/series)")
    print(f"pyunicorn loop   {tu:8.3f} s  ({tu / a.series * 1e3:.2f} ms/series, "
          f"{a.peer_series} series timed)")

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
