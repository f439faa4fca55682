"""All-to-all cross map at many lags: one ``pe.xmap(X, Tp=[...])`` call vs a loop of
single-Tp ``pe.xmap(X, Tp=lag)`` calls, one process, interleaved, best of ``--repeat``.

Two cases: ``E="auto"`` (the loop scans each target's E at every call; the lag call
once) and a given E vector (the same work both ways: the ratio shows the call's
overhead). Same device and dtype; the matrices are checked equal.

Run:  python bench/bench_xmap_lags.py --N 20 --L 1000 --lags=-5:5
      python bench/bench_xmap_lags.py --device nvidia --N 500 --L 3780 --lags=-5:5
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from bench_xmap import panel


def _best(f, repeat: int) -> float:
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return min(t)


def main() -> None:
    import pyedmcl as pe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=20)
    ap.add_argument("--L", type=int, default=1000)
    ap.add_argument("--lags", default="-5:5", help="first:last (inclusive)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    lo, hi = (int(v) for v in a.lags.split(":"))
    lags = list(range(lo, hi + 1))
    X = panel(a.N, a.L)
    E_given = pe.xmap(X, device=a.device).E  # warm-up (builds), and the E vector
    print(f"N={a.N} L={a.L} lags={lo}..{hi} ({len(lags)}) device={a.device or 'default'} "
          f"python={platform.python_version()} best of {a.repeat}, interleaved")
    for label, E in (("E=auto", "auto"), ("E given", E_given)):
        r = pe.xmap(X, E=E, Tp=lags, device=a.device)  # warm-up of every lag's shapes
        for i, lag in enumerate(lags):
            np.testing.assert_array_equal(r.rho[i], pe.xmap(X, E=E, Tp=lag, device=a.device).rho)
        tb, tl = [], []
        for _ in range(a.repeat):
            tb.append(_best(lambda E=E: pe.xmap(X, E=E, Tp=lags, device=a.device), 1))
            tl.append(_best(lambda E=E: [pe.xmap(X, E=E, Tp=lag, device=a.device)
                                         for lag in lags], 1))
        print(f"{label:8s} lag call {min(tb):.3f} s  loop of single-Tp calls {min(tl):.3f} s  "
              f"loop / lag call {min(tl) / min(tb):.2f}  (matrices equal)")


if __name__ == "__main__":
    main()
