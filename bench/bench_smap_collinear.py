"""S-map on oversampled smooth data (nearly collinear lags): pyedmcl against lstsq row by
row (pyEDM's algorithm, in pyedmcl's own loop) and pyEDM itself, same process, same data,
ratios printed.

Data: Mackey-Glass (:func:`bench_row_check.mackey_glass`) at E 20 and Lorenz-63's x
sampled every 0.02 (:func:`pyedmcl.data.lorenz63`) at E 7 and E 20, tau 1, theta 1, every
point predicted (leave one out). Lorenz at E 20 is too collinear for the rotation and the
basis (condition above 1e7): its rows are lstsq's, one by one, as pyEDM's. Unrotated, nearly every row's centred normal equations fail
the device's test there; pyedmcl runs the states in the library's principal axes
(:mod:`pyedmcl.edm.smap_rotation`), whose rows pass it, and solves the rows left to the
host in the library's orthonormal basis (:mod:`pyedmcl.edm.smap_host`). The peers run only
up to ``--peer-max-L`` (one lstsq of L x (E + 1) a row). Each output line also gives the
largest prediction difference to lstsq row by row, relative to the largest prediction.
Examples::

    python bench/bench_smap_host_rows.py --L 1000,2000,4000
    python bench/bench_smap_host_rows.py --device nvidia --L 2000,8000,32000 --peer-max-L 2000
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import interleaved_times
from bench_row_check import mackey_glass

CASES = (("mackey-glass", 20, np.float32), ("mackey-glass", 20, np.float64),
         ("lorenz-0.02", 7, np.float64), ("lorenz-0.02", 20, np.float64))


def series(name: str, L: int) -> np.ndarray:
    if name == "mackey-glass":
        return mackey_glass(L)
    from pyedmcl.data import lorenz63

    return lorenz63(L, sample_every=2)[:, 0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--L", default="1000,2000,4000", help="comma list of series lengths")
    ap.add_argument("--peer-max-L", type=int, default=2000,
                    help="the largest L the peers (row-by-row lstsq, pyEDM) run at")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.edm import smap as smap_mod
    from pyedmcl.edm import smap_host

    try:
        import pandas as pd
        import pyEDM
    except ImportError:
        pyEDM = None
    dev = get_backend(a.device).info
    print(f"device: {dev.name} ({dev.runtime}); host threads {smap_host.HOST_THREADS}; "
          f"best / median of {a.repeat}, runs interleaved")
    print(f"{'data':14s} {'E':>3s} {'dtype':8s} {'L':>6s} {'host rows':>10s} {'pyedmcl s':>10s} "
          f"{'lstsq s':>9s} {'ratio':>7s} {'pyEDM s':>9s} {'ratio':>7s} {'max dpred':>10s}")
    for name, E, dtype in CASES:
        for L in (int(v) for v in a.L.split(",")):
            x = series(name, L)
            kw = dict(E=E, tau=1, theta=1.0, dtype=dtype, device=a.device)
            res = pe.smap(x, **kw)  # builds the kernels

            def by_rows(x=x, kw=kw):
                whitened, axes = smap_host._whitened_rows, smap_mod.principal_axes
                smap_host._whitened_rows = lambda *args, **kws: None
                smap_mod.principal_axes = lambda *args, **kws: None
                try:
                    return pe.smap(x, **kw)
                finally:
                    smap_host._whitened_rows, smap_mod.principal_axes = whitened, axes

            fns = {"pyedmcl": lambda x=x, kw=kw: pe.smap(x, **kw)}
            if L <= a.peer_max_L:
                fns["lstsq"] = by_rows
                if pyEDM is not None:
                    df = pd.DataFrame({"Time": np.arange(1, L + 1), "x": x})

                    def pyedm(df=df, L=L, E=E):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            return pyEDM.SMap(dataFrame=df, columns="x", target="x",
                                              lib=[1, L], pred=[1, L], E=E, tau=-1,
                                              theta=1.0, Tp=1)
                    fns["pyEDM"] = pyedm
            t = {k: (min(v), float(np.median(v))) for k, v in
                 interleaved_times(fns, a.repeat).items()}
            ours = t["pyedmcl"][0]
            cells = [f"{name:14s} {E:3d} {np.dtype(dtype).name:8s} {L:6d} {res.n_fallback:10d} "
                     f"{ours:10.3f}"]
            for peer in ("lstsq", "pyEDM"):
                cells.append(f"{t[peer][0]:9.3f} {t[peer][0] / ours:6.1f}x" if peer in t
                             else f"{'-':>9s} {'-':>7s}")
            if "lstsq" in t:
                ref = by_rows()
                ok = np.isfinite(ref.predicted)
                d = np.abs(res.predicted - ref.predicted)[ok].max() / np.abs(ref.predicted[ok]).max()
                cells.append(f"{d:10.1e}")
            print(" ".join(cells), flush=True)


if __name__ == "__main__":
    main()
