"""S-map rows solved one by one on the host (lstsq, pyEDM's algorithm): BLAS on one
thread, as ``pyedmcl.edm.smap_host`` runs them, against BLAS's own threads (the loop as it
was), interleaved in one process, idle or with ``--load`` busy processes beside it.

Data: Lorenz-63's x sampled every 0.02 at E 20, tau 1, theta 1, float64, every point
predicted: too collinear for the principal axes and the library's orthonormal basis, so
every row is lstsq's.

``--xmap``: the S-map cross map of 12 such components (x, y, z of seeded Lorenz runs, T
1,000, E 10, float64), nearly every row on the host: its libraries' rows in the library's
orthonormal basis on threads with BLAS on one thread each, against one thread on BLAS's own
threads (the loop as it was).

Run:  python bench/bench_smap_row_blas.py --L 1000,2000
      python bench/bench_smap_row_blas.py --L 1000,2000 --load 2
      python bench/bench_smap_row_blas.py --xmap
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--L", default="1000,2000", help="comma list of series lengths")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    ap.add_argument("--xmap", action="store_true", help="the S-map cross map's host rows")
    a = ap.parse_args()
    if a.xmap:
        _xmap(a)
        return

    import pyedmcl as pe
    from pyedmcl.data import lorenz63
    from pyedmcl.edm import smap_host as H

    limits = H.one_blas_thread
    configs = {"BLAS's threads": contextlib.nullcontext, "one BLAS thread": limits}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    try:
        print(f"busy processes beside: {a.load}; best of {a.repeat}, interleaved")
        for L in (int(v) for v in a.L.split(",")):
            x = lorenz63(L, sample_every=2)[:, 0]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = pe.smap(x, E=20, tau=1, theta=1.0, dtype="float64", device=a.device)
                t: dict[str, list[float]] = {k: [] for k in configs}
                for _ in range(a.repeat):
                    for name, lim in configs.items():
                        H.one_blas_thread = lim
                        s = time.perf_counter()
                        pe.smap(x, E=20, tau=1, theta=1.0, dtype="float64", device=a.device)
                        t[name].append(time.perf_counter() - s)
            H.one_blas_thread = limits
            old, new = min(t["BLAS's threads"]), min(t["one BLAS thread"])
            print(f"L={L} host rows {r.n_fallback}: BLAS's threads {old:.3f} s, one BLAS thread "
                  f"{new:.3f} s ({old / new:.2f}x)", flush=True)
    finally:
        H.one_blas_thread = limits
        for p in busy:
            p.kill()


def _xmap(a) -> None:
    import numpy as np

    import pyedmcl as pe
    from pyedmcl.data import lorenz63
    from pyedmcl.xmap import smap_map

    rng = np.random.default_rng(0)
    X = np.column_stack([lorenz63(1000, sample_every=2,
                                  start=tuple(rng.uniform(-5, 5, 3) + [0, 0, 20]))[:, c % 3]
                         for c in range(12)])
    limits, threads = smap_map.one_blas_thread, smap_map.HOST_THREADS
    configs = {"BLAS's threads, 1 thread": (contextlib.nullcontext, 1),
               f"one BLAS thread, {threads} threads": (limits, threads)}
    rho, t = {}, {k: [] for k in configs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pe.xmap(X, E=10, method="smap", theta=1.0, dtype="float64", device=a.device)
            for _ in range(a.repeat):
                for name, (lim, th) in configs.items():
                    smap_map.one_blas_thread, smap_map.HOST_THREADS = lim, th
                    s = time.perf_counter()
                    r = pe.xmap(X, E=10, method="smap", theta=1.0, dtype="float64",
                                device=a.device)
                    t[name].append(time.perf_counter() - s)
                    rho[name] = np.asarray(r.rho)
        finally:
            smap_map.one_blas_thread, smap_map.HOST_THREADS = limits, threads
    old, new = (min(v) for v in t.values())
    same = np.array_equal(*rho.values())
    print(f"S-map cross map, 12 x 1,000 Lorenz components, E 10, float64, best of {a.repeat}: "
          + "; ".join(f"{k} {min(v):.3f} s" for k, v in t.items())
          + f" ({old / new:.1f}x); rho bit for bit: {same}")


if __name__ == "__main__":
    main()
