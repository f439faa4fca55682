"""Marwan's RP_Speed_Test (github.com/pucicu/RP_Speed_Test) with pyedmcl, against the
published AccRQA times and measures.

The test: the x component of the Roessler system (a = b = 0.25, c = 4) integrated by
scipy's ``odeint`` from a seed-42 random start with dt = 0.05, the first 1,000 points
dropped (its ``Scripts/create_data.py``); RQA of the first N values with m = 3, tau = 6,
Euclidean distance, threshold 1.2 and l_min = 2: RR, DET, L, ENTR, LAM, TT. Published
AccRQA 0.9.1 times on an NVIDIA H100 (``Results/time_python_accrqa_nv_gpu.csv``, the
mean of 10 runs of its DET and LAM calls) and its measures
(``Results/rqa_python_accrqa_nv_gpu.csv``) are below; ``pe.rqa`` is timed the same
way (mean of ``--repeat`` calls after one warm call) on this machine's ``--device``.

Run:  python bench/bench_rp_speed_test.py --device nvidia
      python bench/bench_rp_speed_test.py --device nvidia --n 100237 --timeline
      python bench/bench_rp_speed_test.py --device intel --n 50238 100237
      python bench/bench_rp_speed_test.py --device nvidia --compare '[{"DSEG": 1, "EDGE": 8192}]'
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser  # noqa: E402

#: N -> AccRQA's published mean seconds (H100) of its RQA calls
ACCRQA_SECONDS = {50238: 0.05178453922271729, 100237: 0.2170403242111206,
                  200000: 0.7753008604049683, 474275: 4.32773916721344}
#: N -> AccRQA's published RR, DET, L, ENTR, LAM, TT
ACCRQA_MEASURES = {
    50238: (0.0339217804690164, 0.9991012332701545, 19.332209976395486, 3.6378661345296157,
            0.9966909351212656, 6.57734960950634),
    100237: (0.03413007159433803, 0.9991058700189495, 19.417031460440914, 3.6457381412582217,
             0.9967160465739917, 6.579400052941352),
    200000: (0.03432866196585272, 0.9991178498630335, 19.558348098768104, 3.6487706484170355,
             0.9967965174038527, 6.581458631579837),
    474275: (0.03421031609009329, 0.9991150000500788, 19.487826429965878, 3.64637000253481,
             0.9967864105274169, 6.581596066688954),
}
NAMES = ("RR", "DET", "L", "L_entr", "LAM", "TT")


def roessler_x(n: int) -> np.ndarray:
    """The test's series: n values after the 1,000-point transient."""
    from scipy.integrate import odeint

    def f(v, t):
        return [-(v[1] + v[2]), v[0] + 0.25 * v[1], 0.25 + (v[0] - 4) * v[2]]

    rng = np.random.default_rng(seed=42)
    dt = 0.05
    return odeint(f, rng.random(3), np.arange(0, dt * (1000 + n), dt))[1000:, 0]


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[50238, 100237, 200000, 474275, 946303])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--theiler", type=int, default=1)
    ap.add_argument("--timeline", action="store_true",
                    help="also each N's device timeline and host steps (gpu_timeline, host_steps)")
    ap.add_argument("--compare", default="",
                    help='JSON list of rqa_lines values over the device defaults, e.g. '
                         '\'[{"DSEG": 1, "EDGE": 8192}]\': each N also timed with each, '
                         'interleaved with the defaults, histograms compared')
    a = ap.parse_args()

    import pyedmcl as pe

    x = roessler_x(max(a.n))
    print(f"RP_Speed_Test: m=3 tau=6 eps=1.2 l_min=2 euclidean, theiler={a.theiler}; "
          f"device {a.device}; mean of {a.repeat} calls after one warm call")
    print(f"{'N':>8s} {'pyedmcl s':>10s} {'best s':>9s} {'AccRQA H100 s':>14s} {'ratio':>7s}  "
          "measures (pyedmcl / AccRQA)")
    for n in a.n:
        def call(n=n):
            return pe.rqa(x[:n], E=3, tau=6, radius=1.2, l_min=2, theiler=a.theiler,
                          device=a.device)
        r = call()
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        mean = float(np.mean(times))
        pub = ACCRQA_SECONDS.get(n)
        ratio = f"{pub / mean:6.1f}x" if pub else "    -  "
        ours = [r.measures[k] for k in NAMES]
        ref = ACCRQA_MEASURES.get(n)
        vals = "  ".join(f"{k} {v:.6g}" + (f"/{w:.6g}" if ref else "")
                         for k, v, w in zip(NAMES, ours, ref or ours, strict=True))
        print(f"{n:8d} {mean:10.4f} {min(times):9.4f} {pub or float('nan'):14.4f} {ratio}  {vals}")
        if a.compare:
            _compare(x[:n], a, json.loads(a.compare))
        if a.timeline:
            from gpu_timeline import record, show
            from host_steps import least
            from host_steps import record as host_record
            from host_steps import show as host_show
            show(f"N={n}", *record(call))
            host_show(f"N={n}: host steps", least([host_record(call) for _ in range(5)]))


def _compare(x: np.ndarray, a, variants: list[dict]) -> None:
    """The call with the device defaults and with each of ``variants`` (rqa_lines values
    over them), interleaved ``a.repeat`` times: best / median ms, histograms compared."""
    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.kernels.rqa_lines import RQA_LINES

    base = RQA_LINES.params_for(get_backend(a.device), {"E": 3, "REAL": "float",
                                                       "METRIC": "euclidean"}, len(x) - 12)
    configs = [("defaults", None)] + [(json.dumps(v), {**base, **v}) for v in variants]
    calls = [partial(pe.rqa, x, E=3, tau=6, radius=1.2, l_min=2, theiler=a.theiler,
                     device=a.device, params=p) for _, p in configs]
    first = [c() for c in calls]
    same = all(np.array_equal(getattr(r, h), getattr(first[0], h)) for r in first
               for h in ("diagonal_hist", "vertical_hist", "white_hist"))
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(a.repeat):
        for c, ts in zip(calls, times, strict=True):
            t = time.perf_counter()
            c()
            ts.append(time.perf_counter() - t)
    print(f"         same histograms: {same}; " + " | ".join(
        f"{name} {min(ts) * 1e3:.2f}/{np.median(ts) * 1e3:.2f} ms"
        for (name, _), ts in zip(configs, times, strict=True)))


if __name__ == "__main__":
    main()
