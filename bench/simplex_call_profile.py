"""Where one float32 Simplex (or S-map) call's time goes on a device: FastCCM's
single-series shape (noise, E=20, Tp=1, exclusion 10) or its 1 source x S targets shape
(E=5, Tp=0, exclusion 5, a 2-D target): the warm wall time, the device timeline of one
call (every launch and transfer, bench/gpu_timeline.py) and the host's profile of one call.

Run:  python bench/simplex_call_profile.py --device nvidia --T 2000
      python bench/simplex_call_profile.py --device nvidia --T 1000 --targets 20000
      python bench/simplex_call_profile.py --device nvidia --T 8000 --method smap
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import call_times, parser  # noqa: E402


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--T", type=int, default=2000, help="points of each series")
    ap.add_argument("--targets", type=int, default=0,
                    help="targets of one source (0: the single-series shape)")
    ap.add_argument("--method", choices=("simplex", "smap"), default="simplex",
                    help="smap: theta 1 (the single-series shape only)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=16, help="rows of the host profile")
    a = ap.parse_args()

    from gpu_timeline import record, show

    import pyedmcl as pe

    rng = np.random.default_rng(0)
    if a.targets:
        X = rng.standard_normal((a.T, a.targets + 1))
        tg = np.ascontiguousarray(X[:, 1:].T)
        fn = lambda: pe.simplex(X[:, 0], target=tg, E=5, Tp=0, exclusion_radius=5,  # noqa: E731
                                device=a.device)
        what = f"1 source x {a.targets} targets, T={a.T}"
    elif a.method == "smap":
        x = rng.standard_normal(a.T)
        fn = lambda: pe.smap(x, E=20, Tp=1, theta=1.0, exclusion_radius=10,  # noqa: E731
                             device=a.device)
        what = f"S-map of a single series, T={a.T}"
    else:
        x = rng.standard_normal(a.T)
        fn = lambda: pe.simplex(x, E=20, Tp=1, exclusion_radius=10, device=a.device)  # noqa: E731
        what = f"single series, T={a.T}"
    times = call_times(fn, a.repeat, warmup=1)
    print(f"{what}: wall best {min(times) * 1e3:.2f} ms, median "
          f"{np.median(times) * 1e3:.2f} ms")
    show(what, *record(fn))
    prof = cProfile.Profile()
    prof.runcall(fn)
    pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
