"""Where one cross-map call's time goes on a device: FastCCM's matrix shapes (N series
of T i.i.d. noise points, E=5, tau=1, Tp=0, every point predicted): the warm wall time,
the device timeline of one call (every launch and transfer, bench/gpu_timeline.py), the
host's steps between its queue commands (bench/host_steps.py) and the host's profile of
one call. A small panel whose wall time is far above the device's
busy time is bound by the call's fixed cost (host work, launches, transfers).

Run:  python bench/xmap_call_profile.py --device nvidia --N 100 --T 1000
      python bench/xmap_call_profile.py --device nvidia --N 800 --T 500 --method smap
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
    ap.add_argument("--N", type=int, default=100, help="series")
    ap.add_argument("--T", type=int, default=1000, help="points of each series")
    ap.add_argument("--method", choices=("simplex", "smap"), default="simplex")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=20, help="rows of the host profile")
    a = ap.parse_args()

    from gpu_timeline import record, show
    from host_steps import least
    from host_steps import record as host_record
    from host_steps import show as host_show

    import pyedmcl as pe

    X = np.random.default_rng(0).standard_normal((a.T, a.N))
    kw = {"theta": 1.0} if a.method == "smap" else {}
    fn = lambda: pe.xmap(X, E=5, tau=1, Tp=0, method=a.method, device=a.device, **kw)  # noqa: E731
    what = f"xmap {a.method} {a.N} x {a.N}, T={a.T}"
    times = call_times(fn, a.repeat, warmup=1)
    print(f"{what}: wall best {min(times) * 1e3:.2f} ms, median {np.median(times) * 1e3:.2f} ms")
    show(what, *record(fn))
    host_show(f"{what}: host steps (least of {a.repeat})",
              least([host_record(fn) for _ in range(a.repeat)]))
    prof = cProfile.Profile()
    prof.runcall(fn)
    pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
