"""Device timeline of one pyedmcl call: every kernel launch and transfer on the
queue with its device start, duration and the gap before it, and the call's wall time.

Where a call's wall time exceeds the sum of its kernels, the difference is host work
and host-device round trips; this shows which. Used on float32 Simplex (checked and
unchecked) and S-map to find what the exactness check and the host add to the kernels.

Run:  python bench/gpu_timeline.py --device nvidia --job simplex --L 100000 --E 7 --tau 2
      python bench/gpu_timeline.py --device nvidia --job smap --L 20000 --E 8 --theta 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_shape_args, edm_calls  # noqa: E402


def record(fn):
    """Run ``fn()`` with every queue command's event recorded: (what, event) list, wall s."""
    import pyopencl as cl

    from clkernels.backends import pyopencl_backend as P

    events: list = []
    orig_launch, orig_bound = P.PyOpenCLBackend.launch, P.PyOpenCLBackend.launch_bound
    orig_copy = cl.enqueue_copy

    def launch(self, kernel, *a, **k):
        ev = orig_launch(self, kernel, *a, **k)
        events.append((kernel.handle.function_name, ev))
        return ev

    def launch_bound(self, bound, *a, **k):
        ev = orig_bound(self, bound, *a, **k)
        events.append((bound.kernel.handle.function_name, ev))
        return ev

    def copy(queue, dest, src, **k):
        ev = orig_copy(queue, dest, src, **k)
        what = "read" if isinstance(dest, np.ndarray) else "write"
        nbytes = (dest if isinstance(dest, np.ndarray) else src).nbytes \
            if hasattr(dest if isinstance(dest, np.ndarray) else src, "nbytes") else 0
        events.append((f"{what} {nbytes} B", ev))
        return ev

    P.PyOpenCLBackend.launch, P.PyOpenCLBackend.launch_bound = launch, launch_bound
    cl.enqueue_copy = copy
    try:
        t = time.perf_counter()
        fn()
        wall = time.perf_counter() - t
    finally:
        P.PyOpenCLBackend.launch, P.PyOpenCLBackend.launch_bound = orig_launch, orig_bound
        cl.enqueue_copy = orig_copy
    return events, wall


#: commands above which a timeline is summarised per command name
SUMMARY_OVER = 40


def show(title: str, events: list, wall: float) -> None:
    rows = []
    for what, ev in events:
        try:
            ev.wait()
            p = ev.profile
            rows.append((what, p.queued, p.start, p.end))
        except Exception:  # an event without profiling (a user event)
            continue
    if not rows:
        print(f"{title}: wall {wall * 1e3:.2f} ms, no events")
        return
    t0 = min(r[1] for r in rows)
    busy = sum(r[3] - r[2] for r in rows) * 1e-6
    print(f"{title}: wall {wall * 1e3:.2f} ms, device busy {busy:.2f} ms, "
          f"{len(rows)} commands")
    if len(rows) > SUMMARY_OVER:  # many launches: device time per command name
        per: dict[str, list[float]] = {}
        for what, _q, st, en in rows:
            per.setdefault(what.split(" ")[0], []).append((en - st) * 1e-6)
        for what, ts in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            print(f"    {what:34s} {len(ts):5d} x  {sum(ts):8.3f} ms")
        span = (max(r[3] for r in rows) - t0) * 1e-6
        print(f"    first queued to last end {span:.3f} ms")
        return
    last = None
    for what, q, s, e in sorted(rows, key=lambda r: r[2]):
        gap = 0.0 if last is None else (s - last) * 1e-6
        print(f"    {what:34s} queued {(q - t0) * 1e-6:8.3f}  start {(s - t0) * 1e-6:8.3f}"
              f"  {((e - s) * 1e-6):8.3f} ms  gap {gap:7.3f}")
        last = e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--job", choices=("simplex", "smap", "rqa"), default="simplex",
                    help="rqa: auto-RQA of a Roessler record rounded to a 0.1 grid (E=3, "
                         "tau=6, the radius of RR 0.05 rounded to the grid; --L points), "
                         "with the float32 check (EXACT) and without")
    add_shape_args(ap, L=100_000)
    ap.add_argument("--profile", action="store_true",
                    help="also the host's profile of one call (cProfile, by cumulative time)")
    a = ap.parse_args()

    from bench_row_check import mackey_glass

    import pyedmcl as pe

    x = mackey_glass(a.L)
    if a.job != "rqa":
        calls = edm_calls(a.job, x, a)
    else:
        from bench_rqa_exact import _records

        from clkernels import get_backend
        from pyedmcl.rqa.exact import unchecked as rqa_unchecked

        q, r = _records(a.L, 3, 6, get_backend(a.device))["quantized"]
        calls = {"exact": lambda: pe.rqa(q, E=3, tau=6, radius=r, device=a.device)}

        def rqa_plain():
            with rqa_unchecked():
                pe.rqa(q, E=3, tau=6, radius=r, device=a.device)
        calls["unchecked"] = rqa_plain
    for name, fn in calls.items():
        for _ in range(a.warm):
            fn()
        shape = "E=3 tau=6 (quantized)" if a.job == "rqa" else f"E={a.E} tau={a.tau}"
        show(f"{a.job} {name} L={a.L} {shape}", *record(fn))
        if a.profile:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.runcall(fn)
            pstats.Stats(pr).sort_stats("cumtime").print_stats(45)


if __name__ == "__main__":
    main()
