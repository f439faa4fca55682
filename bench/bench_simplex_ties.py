"""Simplex on decimal data: pyedmcl's ``pe.simplex`` against pyEDM's ``Simplex`` in one
process, and what deciding the tied rows by pyEDM's rule costs.

pyEDM ranks equally far neighbours by (distance, |p - l|, l) on its own float64 roots;
pyedmcl's kernels by (squared distance, |p - l|, l) in theirs. On decimal data the two
part where a tie straddles the knn-th place; pyedmcl lists those rows on the device and
decides them by pyEDM's rule (``pyedmcl/edm/simplex_ties.py``). Each case prints:

* pyEDM's time (best of ``--repeat // 2``, at most ``--pyedm-max`` rows) and pyedmcl's
  (best of ``--repeat``) in float64 and float32, with the rule on and off
  (``simplex_ties.ENABLED``), and the ratios;
* the rows the rule decided (float64: the tied ones the device listed);
* the largest |prediction - pyEDM's| with the rule on and off, and the rows off by more
  than 1e-9 of the target's spread.

Series: Lorenz-63 x sampled every 0.01 rounded to one and two decimals, a random walk on
the 0.1 grid; disjoint halves (library, then predictions) and leave-one-out.

``--compat``: ``pyedmcl.compat.pyedm.Simplex`` against ``pyEDM.Simplex`` on Lorenz-63
x, y sampled every 0.02 and rounded to one decimal (2,000 rows, E 3), halves and
leave-one-out: tied decimal data keep the fused path there; then ``EmbedDimension``
(E 1-10) and ``PredictInterval`` (E 3, Tp 1-10) on halves, one fast Simplex a value.

Run:  python bench/bench_simplex_ties.py
      python bench/bench_simplex_ties.py --L 2000,20000 --E 3,5 --repeat 5
      python bench/bench_simplex_ties.py --compat
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import best_with_result


def series(name: str, n: int) -> np.ndarray:
    from pyedmcl.data import lorenz63

    if name.startswith("lorenz"):
        x = lorenz63(n, dt=0.01, sample_every=1)[:, 0]
        return np.round(x, 1 if name == "lorenz1" else 2)
    rng = np.random.default_rng(5)
    return np.round(np.cumsum(rng.choice([-0.1, 0.1], n)), 1)


def compat_part(repeat: int, device) -> None:
    import pandas as pd
    import pyEDM

    import pyedmcl.compat.pyedm as EDM
    from pyedmcl.data import lorenz63

    v = np.round(lorenz63(2000, sample_every=2), 1)
    df = pd.DataFrame({"Time": np.arange(1, 2001), "x": v[:, 0], "y": v[:, 1]})
    print("compat vs pyEDM, Lorenz rounded to one decimal, 2,000 rows, E 3")
    for lib, pred in (("1 1000", "1001 2000"), ("1 2000", "1 2000")):
        kw = dict(dataFrame=df, columns="x", target="y", lib=lib, pred=pred, E=3, Tp=1)
        EDM.Simplex(**kw, device=device)
        ta, a = best_with_result(lambda kw=kw: EDM.Simplex(**kw, device=device), repeat)
        tb, b = best_with_result(lambda kw=kw: pyEDM.Simplex(**kw), max(1, repeat // 2))
        d = np.nanmax(np.abs(a["Predictions"].to_numpy(float) - b["Predictions"].to_numpy(float)))
        print(f"  Simplex lib {lib:>6} pred {pred:>9}: pyedmcl {ta * 1e3:7.1f} ms  pyEDM "
              f"{tb * 1e3:7.1f} ms  {tb / ta:5.1f}x  max |diff| {d:.1e}", flush=True)
    for name, extra in (("EmbedDimension", dict(maxE=10)), ("PredictInterval", dict(E=3))):
        kw = dict(dataFrame=df, columns="x", target="y", lib="1 1000", pred="1001 2000",
                  showPlot=False, **extra)
        getattr(EDM, name)(**kw, device=device)
        ta, a = best_with_result(lambda kw=kw, n=name: getattr(EDM, n)(**kw, device=device),
                                 repeat)
        tb, b = best_with_result(lambda kw=kw, n=name: getattr(pyEDM, n)(**kw, numProcess=1),
                                 max(1, repeat // 2))
        d = np.nanmax(np.abs(a["rho"].to_numpy(float) - b["rho"].to_numpy(float)))
        print(f"  {name:15s} halves: pyedmcl {ta * 1e3:7.1f} ms  pyEDM {tb * 1e3:7.1f} ms  "
              f"{tb / ta:5.1f}x  max |diff rho| {d:.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--L", default="2000,20000", help="series lengths")
    ap.add_argument("--E", default="3,5")
    ap.add_argument("--series", default="lorenz1,lorenz2,walk")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pyedm-max", type=int, default=20000,
                    help="longest series pyEDM runs on (it scans tied rows in full)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--compat", action="store_true", help="the compat part alone")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    if a.compat:
        compat_part(a.repeat, a.device)
        return
    import pandas as pd

    import pyedmcl as pe
    from pyedmcl.edm import simplex as simplex_mod
    from pyedmcl.edm import simplex_ties

    try:
        import pyEDM
    except ImportError:
        pyEDM = None
    counted: list[int] = []
    orig = simplex_ties.pyedm_rows

    def counting(*args, **kw):
        out = orig(*args, **kw)
        counted.append(out[0].size)
        return out

    simplex_mod.simplex_ties.pyedm_rows = counting
    dev = a.device
    print(f"device: {pe.select_device(dev)}")
    print("case                          split     rule  dtype     pyedmcl ms  vs pyEDM  "
          "rows  max|diff|  off")
    for name in a.series.split(","):
        for n in (int(v) for v in a.L.split(",")):
            x = series(name, n)
            for E in (int(v) for v in a.E.split(",")):
                for split in ("halves", "loo"):
                    h = n // 2
                    lib, pred = ((1, h), (h + 1, n)) if split == "halves" else ((1, n), (1, n))
                    tref = None
                    if pyEDM is not None and n <= a.pyedm_max:
                        df = pd.DataFrame({"t": np.arange(1, n + 1), "x": x})
                        kw = dict(dataFrame=df, columns="x", target="x", lib=f"{lib[0]} {lib[1]}",
                                  pred=f"{pred[0]} {pred[1]}", E=E, Tp=1)
                        tref, r = best_with_result(lambda kw=kw: pyEDM.Simplex(**kw), max(1, a.repeat // 2))
                        m = dict(zip(r.iloc[:, 0].astype(int), r["Predictions"].to_numpy(float),
                                     strict=True))
                    spread = float(np.ptp(x))
                    for dtype in ("float64", "float32"):
                        for on in (False, True):
                            simplex_ties.ENABLED = on
                            kw = dict(E=E, tau=1, Tp=1, lib=lib, pred=pred, dtype=dtype,
                                      device=dev)
                            pe.simplex(x, **kw)
                            counted.clear()
                            t, g = best_with_result(lambda kw=kw, x=x: pe.simplex(x, **kw), a.repeat)
                            rows = counted[-1] if counted else 0
                            line = (f"{name:8s} L {n:6d} E {E:2d}          {split:8s} "
                                    f"{'on' if on else 'off':4s}  {dtype:8s} {t * 1e3:10.1f}")
                            if tref is not None:
                                p = np.asarray(g.predicted)
                                want = np.array([m.get(int(tt) + 1, np.nan) for tt in g.times])
                                ok = np.isfinite(want) & np.isfinite(p)
                                d = np.abs(p[ok] - want[ok])
                                line += (f"  {tref / t:7.1f}x  {rows:5d}  {d.max():.1e}  "
                                         f"{int((d > 1e-9 * spread).sum()):4d}")
                            else:
                                line += f"  {'-':>8s}  {rows:5d}"
                            print(line, flush=True)
                    if tref is not None:
                        print(f"{'':38s}pyEDM {tref * 1e3:10.1f} ms", flush=True)
    simplex_ties.ENABLED = True


if __name__ == "__main__":
    main()
