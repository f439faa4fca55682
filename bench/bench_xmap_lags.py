"""All-to-all cross map at many lags: ``pe.xmap(X, Tp=[...])`` (one neighbour search per
library and E-group for every lag, :mod:`pyedmcl.xmap.lag_engine`) vs the per-lag loop
it replaced (one whole ``pe.xmap(X, Tp=lag)`` per lag, the targets' E found by the first
and given to the others), one process, interleaved, best and median of ``--repeat``.

Two cases: E given (``--E``, one value for every series) and ``E="auto"`` (both find E
once: the E scan is the same work either way). Same device and dtype; every lag's
matrix is checked equal between the two before timing. ``--profile`` adds the device
time per kernel of one call of each (OpenCL events, :func:`bench_xmap.profile`).

Run:  python bench/bench_xmap_lags.py --device intel --N 50 --L 1000 --lags=-8:0 --E 3
      python bench/bench_xmap_lags.py --device nvidia --N 500 --L 3780 --lags=-5:5
"""

from __future__ import annotations

import platform
import statistics

import numpy as np
from _common import interleaved_times, parser
from bench_xmap import panel, profile


def per_lag_loop(X: np.ndarray, lags: list[int], E, max_E: int, device) -> np.ndarray:
    """The per-lag loop (the lag scan before one-pass tables): the lag nearest 0 first
    (with ``E="auto"`` its map scans E up to ``max_E``), its E given to the others;
    ``(n_lags, N, N)``."""
    import pyedmcl as pe

    order = sorted(range(len(lags)), key=lambda a: abs(lags[a]))
    first = pe.xmap(X, E=E, max_E=max_E, Tp=lags[order[0]], device=device)
    rho = np.empty((len(lags),) + np.shape(first.rho), np.float32)
    rho[order[0]] = first.rho
    for a in order[1:]:
        rho[a] = pe.xmap(X, E=first.E, Tp=lags[a], device=device).rho
    return rho


def main() -> None:
    import pyedmcl as pe

    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=50)
    ap.add_argument("--L", type=int, default=1000)
    ap.add_argument("--lags", default="-8:0", help="first:last (inclusive)")
    ap.add_argument("--E", type=int, default=3, help="the given-E case's E")
    ap.add_argument("--max-E", type=int, default=20, help="the auto case's max_E")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="device time per kernel")
    a = ap.parse_args()
    lo, hi = (int(v) for v in a.lags.split(":"))
    lags = list(range(lo, hi + 1))
    X = panel(a.N, a.L)
    print(f"N={a.N} L={a.L} lags={lo}..{hi} ({len(lags)}) device={a.device or 'default'} "
          f"python={platform.python_version()}; {a.repeat} interleaved runs each")
    for label, E in ((f"E={a.E}", a.E), (f"E=auto (max_E={a.max_E})", "auto")):
        def one_pass(E=E):
            return pe.xmap(X, E=E, Tp=lags, max_E=a.max_E, device=a.device).rho

        def loop(E=E):
            return per_lag_loop(X, lags, E, a.max_E, a.device)

        np.testing.assert_array_equal(one_pass(), loop())  # (also the warm-up: builds)
        t = interleaved_times({"one pass": one_pass, "per-lag loop": loop}, a.repeat)
        b1, bl = min(t["one pass"]), min(t["per-lag loop"])
        m1, ml = statistics.median(t["one pass"]), statistics.median(t["per-lag loop"])
        print(f"{label:22s} one pass best {b1:.3f} s median {m1:.3f} s | per-lag loop best "
              f"{bl:.3f} s median {ml:.3f} s | speed-up best {bl / b1:.2f}x median "
              f"{ml / m1:.2f}x (matrices equal)")
        if a.profile:
            from clkernels import get_backend

            be = get_backend(a.device)
            for name, fn in (("one pass", one_pass), ("per-lag loop", loop)):
                print(f" {name}:")
                profile(be, fn)


if __name__ == "__main__":
    main()
