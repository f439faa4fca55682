"""The host work of ``pe.rqa_batch``'s batched path, without the device's time: the
measures of every launch's counts (``measures_of_counts``, the entropies above all) and
the float32 preparation (``_centred_float32``), on the counts and panel of one call.

    python bench/bench_rqa_batch_host.py --series 20000 --points 1000 --repeat 5

The counts come from one run of the kernels on --device (any device gives the same
counts); then each host step is timed alone (best of --repeat, wall and CPU). To compare two trees,
run this script under each (``PYTHONPATH=<tree>``), interleaved.
"""

from __future__ import annotations

import time

import numpy as np
from _common import add_batch_args, parser, random_walk_panel


def _best(fn, repeat: int) -> str:
    """Best wall and best CPU seconds (all threads) of ``repeat`` calls: on a shared
    machine the CPU time is the steadier measure of the host's work."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return f"{min(wall):8.4f} s wall  {min(cpu):8.4f} s CPU"


def main() -> None:
    ap = parser(__doc__)
    add_batch_args(ap, series=20000, points=1000, repeat=5)
    a = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.rqa import batch_lines as bl

    X = random_walk_panel(a.points, a.series)
    seen: list[tuple] = []
    real = bl.measures_of_counts

    def keep(*args):
        seen.append(args)
        return real(*args)

    bl.measures_of_counts = keep
    pe.rqa_batch(X, E=3, tau=2, radius=a.radius, device=a.device)
    bl.measures_of_counts = real
    raw = np.ascontiguousarray(X.T)
    rows = sum(s[0].nrec.size for s in seen)
    vals = sum(s[0].vals.size for s in seen)
    print(f"{a.series} series x {a.points} points; {len(seen)} launches, {rows} rows, "
          f"{vals} nonzero bins; best of {a.repeat}")
    t = _best(lambda: [real(*s) for s in seen], a.repeat)
    print(f"measures_of_counts (all launches) {t}")
    t = _best(lambda: bl._centred_float32(raw), a.repeat)
    print(f"_centred_float32                  {t}")


if __name__ == "__main__":
    main()
