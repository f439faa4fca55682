"""Recurrence networks: pyedmcl's device path vs its host path (scipy) vs pyunicorn's
``RecurrenceNetwork``, in one process, on the same series and radius. Prints times and
ratios, and checks that every library gives the same degrees and measures.

    python bench/bench_rqa_network.py --sizes 2000 10000
    python bench/bench_rqa_network.py --device nvidia --sizes 2000 10000 30000 \
        --paths-max 30000 --host-max 10000 --pyunicorn-max 10000

Per N: "counts" is degree, link density, local/global clustering and transitivity;
"paths" the average path length alone (where N <= --paths-max). The radius gives
--recurrence-rate (found once per N by pyedmcl.rqa.radius on the float64 series; every
library then uses that fixed radius). float64 throughout, so pyunicorn's matrix is ours
(the series is float32-representable: pyunicorn stores float32). Device times are the
median of --repeat runs after one warm-up (kernel builds); peers run once. Wall seconds,
ratios of wall seconds; CPU seconds of the process (all threads) in brackets: on a
shared machine they are less disturbed by other load.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import parser


def series(n: int, E: int, tau: int) -> np.ndarray:
    """x of the Lorenz-63 system (pyedmcl.data.lorenz63), float32-representable."""
    from pyedmcl.data import lorenz63

    x = np.asarray(lorenz63(n + (E - 1) * tau))
    x = x[:, 0] if x.ndim == 2 else x
    return x.astype(np.float32).astype(np.float64)


CPU: dict[str, float] = {}


def _timed(f, *a, key: str | None = None, **kw) -> tuple[float, object]:
    """Wall seconds of ``f(*a, **kw)`` and its result; CPU seconds under ``key``."""
    c, t = time.process_time(), time.perf_counter()
    out = f(*a, **kw)
    wall = time.perf_counter() - t
    if key:
        CPU[key] = time.process_time() - c
    return wall, out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=4)
    ap.add_argument("--recurrence-rate", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paths-max", type=int, default=10000, help="largest N timed with paths")
    ap.add_argument("--host-max", type=int, default=10000, help="largest N for the host path")
    ap.add_argument("--host-paths-max", type=int, default=5000)
    ap.add_argument("--pyunicorn-max", type=int, default=10000)
    ap.add_argument("--pyunicorn-paths-max", type=int, default=5000)
    args = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.rqa.radius import threshold_for_rate

    be = get_backend(args.device)
    print(f"device: {be.info.name} ({be.info.runtime}); E={args.E} tau={args.tau} "
          f"RR~{args.recurrence_rate} float64 (Lorenz-63 x)")
    for n in args.sizes:
        x = series(n, args.E, args.tau)
        radius, _ = threshold_for_rate(x, None, args.recurrence_rate, E=args.E, tau=args.tau,
                                       metric="euclidean", dtype=np.float64, backend=be)
        kw = dict(E=args.E, tau=args.tau, radius=radius, dtype="float64", device=args.device)
        row: dict[str, float] = {}
        pe.recurrence_network(x[:4000], path_lengths=True, **kw)  # builds
        dev = None
        for paths in (False, True):
            if paths and n > args.paths_max:
                continue
            ts = []
            key = f"device_{'paths' if paths else 'counts'}"
            for _ in range(max(1, args.repeat)):
                t, dev_ = _timed(pe.recurrence_network, x, path_lengths=paths, key=key, **kw)
                ts.append(t)
            row[f"device_{'paths' if paths else 'counts'}"] = float(np.median(ts))
            dev = dev_ if dev is None or paths else dev
        ref = {"degree": dev.degree, "transitivity": dev.transitivity,
               "global_clustering": dev.global_clustering}
        checks = []
        if n <= args.host_max:
            t, host = _timed(pe.recurrence_network, x, path_lengths=False, method="host",
                             key="host_counts", **kw)
            row["host_counts"] = t
            checks.append(("host", np.array_equal(host.degree, ref["degree"]) and
                           host.transitivity == ref["transitivity"]))
            if n <= min(args.host_paths_max, args.paths_max):
                t0, _ = _timed(pe.recurrence_network, x, path_lengths=True, method="host",
                               key="host_paths", **kw)
                row["host_paths"] = t0 - t
                CPU["host_paths"] -= CPU["host_counts"]
        if n <= args.pyunicorn_max:
            from pyunicorn.timeseries import RecurrenceNetwork

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c, t = time.process_time(), time.perf_counter()
                net = RecurrenceNetwork(x, metric="euclidean", dim=args.E, tau=args.tau,
                                        threshold=radius, silence_level=3)
                deg = net.degree()
                net.local_clustering()
                gc = net.global_clustering()
                tr = net.transitivity()
                row["pyunicorn_counts"] = time.perf_counter() - t
                CPU["pyunicorn_counts"] = time.process_time() - c
                ok = (np.array_equal(deg, ref["degree"])
                      and abs(tr - ref["transitivity"]) <= 1e-12 * abs(tr)
                      and abs(gc - ref["global_clustering"]) <= 1e-12 * abs(gc))
                if n <= min(args.pyunicorn_paths_max, args.paths_max):
                    t, apl = _timed(net.average_path_length, key="pyunicorn_paths")
                    row["pyunicorn_paths"] = t
                    ok = ok and abs(apl - dev.average_path_length) <= 1e-12 * apl
            checks.append(("pyunicorn", ok))
        print(f"N={n}: radius {radius:.6g}, links {dev.n_links}, link density "
              f"{dev.link_density:.4f}, transitivity {dev.transitivity:.6f}, APL "
              f"{dev.average_path_length:.6f}; agree: "
              + ", ".join(f"{k} {v}" for k, v in checks))
        for part in ("counts", "paths"):
            d = row.get(f"device_{part}")
            if d is None:
                continue
            dc = CPU[f"device_{part}"]
            if part == "paths":
                d, dc = d - row["device_counts"], dc - CPU["device_counts"]
            line = f"  {part:6s} device {d:8.3f} s [{dc:7.2f}]"
            for peer in ("host", "pyunicorn"):
                p = row.get(f"{peer}_{part}")
                if p is not None:
                    line += f" | {peer} {p:8.3f} s [{CPU[f'{peer}_{part}']:7.2f}] ({p / d:6.1f}x)"
            print(line)


if __name__ == "__main__":
    main()
