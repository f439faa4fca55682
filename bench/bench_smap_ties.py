"""S-map on quantised data (distance ties): pyedmcl's S-map against pyEDM's in one
process, and what deciding ties as pyEDM's KDTree costs pyedmcl's own API.

pyEDM decides which of equally far points fall inside its neighbour query (a user
``knn``) and which farthest point its default ``knn = |lib| - 1`` leaves out by the order
of its KDTree (decision 0167). Two parts:

* ``compat``: ``pyedmcl.compat.pyedm.SMap`` / ``PredictNonlinear`` against ``pyEDM``'s on
  Lorenz-63 x, y sampled every 0.02 and rounded to one decimal (2,000 rows, E 4, theta 2),
  disjoint halves and leave-one-out, default knn and knn 12: best-of times, the ratio and
  the largest prediction difference.
* ``native``: ``pe.smap`` on the same rounded Lorenz x and on a random walk on the 0.1
  grid (steps -0.1, 0, 0.1: ties at nearly every row), library and prediction halves at
  E 5, float32 and float64: best-of time and the rows solved on the host (where pyEDM's
  tree decides the ties).

Run:  python bench/bench_smap_ties.py                 (both parts)
      python bench/bench_smap_ties.py --native --L 4000,16000
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import best_with_result


def compat_part(repeat: int, device) -> None:
    import pandas as pd
    import pyEDM

    import pyedmcl.compat.pyedm as EDM
    from pyedmcl.data import lorenz63

    v = np.round(lorenz63(2000, sample_every=2), 1)
    df = pd.DataFrame({"Time": np.arange(1, 2001), "x": v[:, 0], "y": v[:, 1]})
    print("compat vs pyEDM, Lorenz rounded to one decimal, 2,000 rows, E 4")
    for knn in (0, 12):
        for lib, pred in (("1 1000", "1001 2000"), ("1 2000", "1 2000")):
            kw = dict(dataFrame=df, columns="x", target="y", lib=lib, pred=pred, E=4, Tp=1,
                      theta=2.0, knn=knn)
            EDM.SMap(**kw, device=device)
            ta, a = best_with_result(lambda kw=kw: EDM.SMap(**kw, device=device), repeat)
            tb, b = best_with_result(lambda kw=kw: pyEDM.SMap(**kw), max(1, repeat // 2))
            pa = a["predictions"]["Predictions"].to_numpy(float)
            pb = b["predictions"]["Predictions"].to_numpy(float)
            print(f"  SMap knn {knn:2d} lib {lib:>6} pred {pred:>9}: pyedmcl {ta * 1e3:7.1f} ms"
                  f"  pyEDM {tb * 1e3:7.1f} ms  {tb / ta:5.1f}x  max |diff| "
                  f"{np.nanmax(np.abs(pa - pb)):.1e}")
        kw = dict(dataFrame=df, columns="x", target="y", lib="1 1000", pred="1001 2000", E=4,
                  Tp=1, knn=knn)
        EDM.PredictNonlinear(**kw, device=device)
        ta, a = best_with_result(lambda kw=kw: EDM.PredictNonlinear(**kw, device=device), repeat)
        tb, b = best_with_result(lambda kw=kw: pyEDM.PredictNonlinear(showPlot=False, **kw), 1)
        d = np.abs(a["rho"].to_numpy(float) - b["rho"].to_numpy(float)).max()
        print(f"  PredictNonlinear knn {knn:2d}: pyedmcl {ta * 1e3:7.1f} ms  pyEDM "
              f"{tb * 1e3:7.1f} ms  {tb / ta:5.1f}x  max |rho diff| {d:.1e}")


def native_part(Ls: list[int], repeat: int, device) -> None:
    import pyedmcl as pe
    from pyedmcl.data import lorenz63

    n = 2 * max(Ls) + 10
    series = {"lorenz-1-decimal": np.round(lorenz63(n, sample_every=2)[:, 0], 1),
              "walk-0.1-grid": np.round(np.cumsum(
                  np.random.default_rng(3).choice([-0.1, 0, 0.1], n)), 1)}
    print("pe.smap, E 5, theta 2, library and prediction halves")
    for name, s in series.items():
        for L in Ls:
            for dt in ("float32", "float64"):
                kw = dict(E=5, theta=2.0, lib=(1, L), pred=(L + 1, 2 * L), dtype=dt,
                          device=device)
                pe.smap(s, **kw)
                t, r = best_with_result(lambda s=s, kw=kw: pe.smap(s, **kw), repeat)
                print(f"  {name:17s} L {L:6d} {dt}: {t * 1e3:8.1f} ms, host rows "
                      f"{r.n_fallback}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--L", default="4000", help="comma list of library sizes (native part)")
    ap.add_argument("--native", action="store_true", help="the native part only")
    ap.add_argument("--compat", action="store_true", help="the compat part only")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    import pyedmcl

    print(f"pyedmcl {pyedmcl.__version__}")
    if not a.native:
        compat_part(a.repeat, a.device)
    if not a.compat:
        native_part([int(v) for v in a.L.split(",")], a.repeat, a.device)


if __name__ == "__main__":
    main()
