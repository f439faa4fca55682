"""RQA with kernel values changed over the device's defaults, against the defaults, in one
process: the A/B behind the rqa_lines decisions (e.g. 0118's DMAJ).

    python bench/bench_rqa_paths.py --device nvidia --series roessler --n 946303 \\
        --variant 'dmaj0={"DMAJ": 0}' --per-launch

Auto-RQA of a Roessler record or a logistic map (E = 3, tau = 6, the radius of recurrence
rate 0.05, float32: issue 24's shape). Each ``--variant NAME=JSON`` updates the device's
default parameters (``RQA_LINES.params_for``); the runs alternate, ``--repeat`` times
after one warm-up each (kernel builds), and each variant's median is printed with its
ratio to the defaults' and whether its histograms equal theirs (they must: the variants
are different schedules of the same cells). ``--per-launch``: each variant's device time
per kernel over one call with one queue (``OVL`` 0, so the launches do not overlap and
their profiled times add up).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import numpy as np
from _common import parser


def _hists(r: Any) -> tuple:
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a: tuple, b: tuple) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _per_launch(be: Any, run: Any) -> dict[str, float]:
    """Device seconds per kernel name over one ``run()`` (its launches' profiling events)."""
    events: list[tuple[str, Any]] = []
    launch, bound = be.launch, be.launch_bound

    def spy(kernel, *a, **kw):
        ev = launch(kernel, *a, **kw)
        events.append((kernel.name, ev))
        return ev

    def spy_bound(b, *a, **kw):
        ev = bound(b, *a, **kw)
        events.append((b.kernel.name, ev))
        return ev
    be.launch, be.launch_bound = spy, spy_bound
    try:
        run()
    finally:
        be.launch, be.launch_bound = launch, bound
    out: dict[str, float] = {}
    for name, ev in events:
        ev.wait()
        out[name] = out.get(name, 0.0) + be.event_seconds(ev)
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=946_303, help="embedded points N")
    ap.add_argument("--series", default="roessler", choices=("roessler", "logistic"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variant", action="append", default=[],
                    help='NAME=JSON kernel values over the defaults, e.g. dmaj0=\'{"DMAJ": 0}\'')
    ap.add_argument("--per-launch", action="store_true",
                    help="device time per kernel of each variant, one queue (OVL 0)")
    args = ap.parse_args()

    from bench_gpu import _rqa_input

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.kernels.rqa_lines import RQA_LINES

    be = get_backend(args.device)
    variants: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    for v in args.variant:
        name, _, values = v.partition("=")
        variants.append((name, json.loads(values)))
    x, radius = _rqa_input(args.n, 3, 6, 0.05, be, args.series)
    over: dict[str, Any] = {}
    params_for = RQA_LINES.params_for
    RQA_LINES.params_for = lambda *a, **k: {**params_for(*a, **k), **over}  # type: ignore[method-assign]
    run = lambda: pe.rqa(x, E=3, tau=6, radius=radius, dtype="float32", device=be)  # noqa: E731
    print(f"device: {be.info.runtime} {be.info.name}; {args.series} N={args.n:,}, E=3, tau=6, "
          f"RR 0.05; medians of {args.repeat}, variants alternating")
    hists, times = {}, {name: [] for name, _ in variants}
    for name, values in variants:
        over.clear()
        over.update(values)
        hists[name] = _hists(run())
    for _ in range(args.repeat):
        for name, values in variants:
            over.clear()
            over.update(values)
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times["defaults"])
    for name, values in variants:
        med = statistics.median(times[name])
        same = _same(hists[name], hists["defaults"])
        print(f"  {name:<12} {1e3 * med:8.1f} ms (min {1e3 * min(times[name]):.1f})  "
              f"{base / med:5.3f}x the defaults  histograms {'equal' if same else 'DIFFER'}"
              f"  {json.dumps(values) if values else ''}")
        if args.per_launch:
            over.clear()
            over.update(values, OVL=0)
            per = _per_launch(be, run)
            top = sorted(per.items(), key=lambda kv: -kv[1])[:5]
            print("      one queue: " + ", ".join(f"{k} {1e3 * s:.1f} ms" for k, s in top))
    RQA_LINES.params_for = params_for  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
