"""Where one ``pe.rqa_batch`` call's wall time goes: each host step of the batched path
timed as it runs (start and end relative to the call's start, and on which thread),
so that host work, uploads and waits on the device show as a timeline.

    python bench/rqa_batch_phases.py --device nvidia --series 100000 --points 1000

Steps: ``prepared`` (float32 centring and merge check of one length's series),
``thresholds``, ``error_bounds`` (the exact-redo bounds), ``inputs`` (the series'
uploads enqueued), ``wait`` (reading one launch's counts: the device's work shows
here), ``measures`` (one launch's measures, the entropies above all: on threads beside
the reading one; ``--inline-measures`` puts them back on it). The last of --repeat
calls is printed step by step, every call's wall time in one line.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict

from _common import add_batch_args, parser, random_walk_panel


class _Inline:
    """An executor that runs each task when it is submitted (the A side of --inline-measures)."""

    def __init__(self, *args, **kw) -> None:
        pass

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args, **kw):
        from concurrent.futures import Future

        f: Future = Future()
        f.set_result(fn(*args, **kw))
        return f


def main() -> None:
    ap = parser(__doc__)
    add_batch_args(ap, series=20000, points=1000, repeat=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="host threads of row bands and pieces (pyedmcl._bands.THREADS)")
    ap.add_argument("--measure-threads", type=int, default=None,
                    help="threads of the launches' measures (batch_lines.MEASURE_THREADS)")
    ap.add_argument("--inline-measures", action="store_true",
                    help="each launch's measures on the reading thread (no overlap)")
    a = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.rqa import batch_kernels as kb
    from pyedmcl.rqa import batch_lines as bl

    if a.threads:
        from pyedmcl import _bands

        _bands.THREADS = a.threads
    if a.measure_threads:
        bl.MEASURE_THREADS = a.measure_threads
    if a.inline_measures:
        bl.ThreadPoolExecutor = _Inline
    log: list[tuple[str, float, float, str]] = []
    origin = [0.0]

    def timed(mod, name: str, label: str) -> None:
        real = getattr(mod, name)

        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                log.append((label, t0 - origin[0], time.perf_counter() - origin[0],
                            threading.current_thread().name))

        setattr(mod, name, wrapper)

    timed(bl, "_prepared", "prepared")
    timed(bl, "_thresholds", "thresholds")
    timed(bl, "error_bounds", "error_bounds")
    timed(kb, "_inputs", "inputs")
    timed(kb, "_read_counts", "wait")
    timed(bl, "measures_of_counts", "measures")

    X = random_walk_panel(a.points, a.series)
    print(f"{a.series} series x {a.points} points, E=3 tau=2 radius={a.radius}; "
          f"host cores {os.cpu_count()}")
    walls = []
    for _ in range(a.repeat):
        log.clear()
        origin[0] = time.perf_counter()
        pe.rqa_batch(X, E=3, tau=2, radius=a.radius, device=a.device)
        walls.append(time.perf_counter() - origin[0])
    print("calls: " + ", ".join(f"{w:.3f} s" for w in walls))
    total: dict[str, float] = defaultdict(float)
    for label, t0, t1, thread in log:
        total[label] += t1 - t0
        print(f"  {label:13s} {t0 * 1e3:9.1f} -> {t1 * 1e3:9.1f} ms  ({(t1 - t0) * 1e3:7.1f})"
              f"  {thread}")
    print("sums: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in total.items()))


if __name__ == "__main__":
    main()
