"""The cost of float32 RQA that decides every cell as float64 does (EXACT, pyedmcl.rqa.exact):
float32 with the near cells redone in double against float32 unchecked (EXACT=0,
``pyedmcl.rqa.exact.unchecked``), in one process, runs alternating.

    python bench/bench_rqa_exact.py --device intel --n 100000 --repeat 3

Auto-RQA (E = 3, tau = 6, float32, the device's default kernels) of two records:
"ordinary" (a Roessler record, the radius of recurrence rate 0.05) and "quantized" (the
same record rounded to a 0.1 grid, the radius rounded to a grid multiple: many cells
exactly at the radius, each redone). Prints per record the median seconds of the unchecked run and of
each EXACT kernel value (``--modes``; rqa_lines' EXACT_KERNEL), their ratios, whether the
histograms equal float64's (``--check``; a float64 run per record), and the fraction of
cells the bound flags (host estimate from a sample of rows). ``--out`` writes the lines to a file as well.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from _common import parser


def _hists(r: Any) -> tuple:
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a: tuple, b: tuple) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _records(n: int, E: int, tau: int, be: Any) -> dict[str, tuple[np.ndarray, float]]:
    from pyedmcl.data import roessler
    from pyedmcl.rqa.radius import radius_for_rate

    x = roessler(n + (E - 1) * tau)
    r = radius_for_rate(x[: min(x.size, 20_000)], None, 0.05, E=E, tau=tau, metric="euclidean",
                        dtype=np.dtype("float32"), backend=be)
    q = np.round(x, 1)
    return {"ordinary": (x, float(r)), "quantized": (q, max(0.1, round(float(r), 1)))}


def _near_fraction(x: np.ndarray, r: float, E: int, tau: int, rows: int = 400) -> float:
    """The fraction of cells the bound flags, on ``rows`` sampled rows (host, NumPy)."""
    from pyedmcl.rqa.distances import kernel_distances
    from pyedmcl.rqa.exact import error_bound, largest
    from pyedmcl.rqa.threshold import kernel_threshold

    z = (x - x.mean()).astype(np.float32)
    n = x.size - (E - 1) * tau
    pts = np.stack([z[m * tau: m * tau + n] for m in range(E)], axis=1)
    t32 = kernel_threshold(r, "euclidean", np.float32)
    t64 = kernel_threshold(r, "euclidean", np.float64)
    b = error_bound(largest(z), t64, t32, "euclidean", E)
    idx = np.random.default_rng(0).choice(n, size=min(rows, n), replace=False)
    acc = kernel_distances(pts[idx], pts, "euclidean")
    return float(np.mean(np.abs((acc - np.float32(t32)).astype(np.float32)) <= b))


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000], help="embedded points N")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="compare with a float64 run")
    ap.add_argument("--out", default=None)
    ap.add_argument("--modes", type=int, nargs="+", default=None,
                    help="EXACT kernel values to time (rqa_lines.EXACT_KERNEL; default: the "
                         "device's)")
    args = ap.parse_args()

    import pyedmcl as pe
    import pyedmcl.kernels.rqa_lines as K
    from clkernels import get_backend
    from pyedmcl.rqa.exact import unchecked

    be = get_backend(args.device)
    kind = "gpu" if be.info.is_gpu else "cpu"
    modes = args.modes or [K.EXACT_KERNEL[kind]]
    E, tau = 3, 6
    lines = [f"device: {be.info.name} ({be.info.runtime}); E={E} tau={tau} float32, "
             f"median of {args.repeat} after a warm-up, runs alternating"]
    print(lines[0], flush=True)
    for n in args.n:
        for name, (x, r) in _records(n, E, tau, be).items():
            def run(mode: int, x=x, r=r) -> Any:
                if mode:
                    K.EXACT_KERNEL[kind] = mode
                    return pe.rqa(x, E=E, tau=tau, radius=r, device=args.device)
                with unchecked():
                    return pe.rqa(x, E=E, tau=tau, radius=r, device=args.device)
            times: dict[int, list[float]] = {m: [] for m in (0, *modes)}
            got: dict[int, Any] = {}
            for mode in times:
                got[mode] = run(mode)  # warm-up: builds
            for _ in range(args.repeat):
                for mode in times:
                    t = time.perf_counter()
                    run(mode)
                    times[mode].append(time.perf_counter() - t)
            tu = statistics.median(times[0])
            ref = None
            if args.check:
                ref = pe.rqa(x, E=E, tau=tau, radius=r, dtype="float64", device=args.device)
            near = _near_fraction(x, r, E, tau)
            head = (f"N={n} {name:9s} r={r:.4g} RR={got[0].RR:.4f} near cells {near:.2e} "
                    f"unchecked {tu:.4f} s")
            if ref is not None:
                head += f" (==float64: {_same(_hists(got[0]), _hists(ref))})"
            parts = [head]
            for mode in modes:
                te = statistics.median(times[mode])
                part = f"EXACT={mode} {te:.4f} s ratio {te / tu:.3f}"
                if ref is not None:
                    part += f" (==float64: {_same(_hists(got[mode]), _hists(ref))})"
                parts.append(part)
            line = "; ".join(parts)
            print(line, flush=True)
            lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
