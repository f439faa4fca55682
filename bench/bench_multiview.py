"""Multiview benchmark: pyedmcl's compat Multiview and pe.multiview vs pyEDM.Multiview.

Data: ``m`` coupled Lorenz-63 coordinates plus lags (pyedmcl.data.lorenz63, x y z and
their sums), ``L`` rows; ``E`` lags of each column, every ``D``-subset ranked by
Simplex rho on ``lib`` and the top views averaged on ``pred`` (trainLib=False).
Both in float64 on the same frame; pyEDM with ``numProcess`` worker processes.
pyedmcl is timed warm (kernels built). Example::

    python bench/bench_multiview.py --device intel --L 400 --E 2 --D 3
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from _common import parser
from bench_smap import best_of


def frame(L: int) -> pd.DataFrame:
    from pyedmcl.data import lorenz63

    xyz = lorenz63(L)
    return pd.DataFrame({"Time": np.arange(1, L + 1), "x": xyz[:, 0], "y": xyz[:, 1],
                         "z": xyz[:, 2], "xy": xyz[:, 0] + xyz[:, 1]})


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--L", type=int, default=400)
    ap.add_argument("--E", type=int, default=2)
    ap.add_argument("--D", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--numProcess", type=int, default=2)
    a = ap.parse_args(argv)
    import pyedmcl.compat.pyedm as EDM

    df = frame(a.L)
    half = a.L // 2
    kw = dict(columns="x y z xy", target="x", lib=[1, half], pred=[half + 1, a.L], D=a.D, E=a.E,
              Tp=1, trainLib=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = EDM.Multiview(df, device=a.device, **kw)  # warm-up: kernels built
        t_ours = best_of(lambda: EDM.Multiview(df, device=a.device, **kw), a.repeats)
        try:
            import pyEDM
        except ImportError:
            print(f"pyedmcl Multiview: {t_ours:.3f} s (pyEDM not installed)")
            return
        ref = pyEDM.Multiview(df, numProcess=a.numProcess, **kw)
        t_ref = best_of(lambda: pyEDM.Multiview(df, numProcess=a.numProcess, **kw), a.repeats)
    import pyedmcl as pe

    core_kw = dict(columns="x y z xy", E=a.E, D=a.D, lib=[1, half], pred=[half + 1, a.L],
                   train_lib=False, device=a.device)
    t_core = {}
    for dt in ("float64", "float32"):
        pe.multiview(df, "x", dtype=dt, **core_kw)  # warm-up
        t_core[dt] = best_of(lambda dt=dt: pe.multiview(df, "x", dtype=dt, **core_kw), a.repeats)
    same = list(ours["View"]["Columns"]) == list(ref["View"]["Columns"])
    diff = float(np.nanmax(np.abs(ours["Predictions"]["Predictions"].to_numpy()
                                  - ref["Predictions"]["Predictions"].to_numpy())))
    n = len(ours["View"])
    from math import comb
    print(f"Multiview L={a.L} E={a.E} D={a.D}: {comb(4 * a.E, a.D)} views ranked, top {n}")
    print(f"pyedmcl {t_ours:.3f} s   pyEDM (numProcess={a.numProcess}) {t_ref:.3f} s   "
          f"ratio pyEDM/pyedmcl {t_ref / t_ours:.2f}x   same ranking: {same}   "
          f"max |pred diff| {diff:.1e}")
    for dt, t in t_core.items():
        print(f"pe.multiview ({dt}) {t:.3f} s   ratio pyEDM/pe.multiview {t_ref / t:.2f}x")


if __name__ == "__main__":
    main()
