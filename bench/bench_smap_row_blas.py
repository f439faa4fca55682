"""S-map rows solved one by one on the host (lstsq, pyEDM's algorithm): BLAS on one
thread, as ``pyedmcl.edm.smap_host`` runs them, against BLAS's own threads (the loop as it
was), interleaved in one process, idle or with ``--load`` busy processes beside it.

Data: Lorenz-63's x sampled every 0.02 at E 20, tau 1, theta 1, float64, every point
predicted: too collinear for the principal axes and the library's orthonormal basis, so
every row is lstsq's.

Run:  python bench/bench_smap_row_blas.py --L 1000,2000
      python bench/bench_smap_row_blas.py --L 1000,2000 --load 2
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
    a = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.data import lorenz63
    from pyedmcl.edm import smap_host as H

    limits = H.threadpool_limits
    configs = {"BLAS's threads": lambda **k: contextlib.nullcontext(), "one BLAS thread": limits}
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
                        H.threadpool_limits = lim
                        s = time.perf_counter()
                        pe.smap(x, E=20, tau=1, theta=1.0, dtype="float64", device=a.device)
                        t[name].append(time.perf_counter() - s)
            H.threadpool_limits = limits
            old, new = min(t["BLAS's threads"]), min(t["one BLAS thread"])
            print(f"L={L} host rows {r.n_fallback}: BLAS's threads {old:.3f} s, one BLAS thread "
                  f"{new:.3f} s ({old / new:.2f}x)", flush=True)
    finally:
        H.threadpool_limits = limits
        for p in busy:
            p.kill()


if __name__ == "__main__":
    main()
