"""What the benchmark scripts share: the ``--device`` parser, call timings, the RQA
batch benchmarks' panel and the tuning sweeps' table check.

Each script is run as ``python bench/<name>.py`` (its folder is on ``sys.path``), so it
imports ``from _common import ...``. Timings are wall-clock seconds of whole calls
(``time.perf_counter``); compare them as ratios against a peer timed in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any


def parser(doc: str | None, *, device: str | None = None) -> argparse.ArgumentParser:
    """An argument parser showing the script's docstring, with ``--device`` (a
    selector as ``pyedmcl.select_device`` takes; default ``device``)."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=device, help="device selector (default: %(default)s)")
    return ap


def call_times(fn: Callable[[], Any], repeat: int, *, warmup: int = 0) -> list[float]:
    """Seconds of each of ``repeat`` calls of ``fn``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def best_time(fn: Callable[[], Any], repeat: int, *, warmup: int = 0) -> float:
    """The shortest of ``repeat`` timed calls (seconds): the least disturbed by others."""
    return min(call_times(fn, repeat, warmup=warmup))


def best_with_result(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The shortest of ``repeat`` timed calls (seconds) and the last call's result (what
    a script then compares with a peer's)."""
    out, ts = None, []
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return min(ts), out


def median_time(fn: Callable[[], Any], repeat: int, *, warmup: int = 0) -> float:
    """The median of ``repeat`` timed calls (seconds)."""
    return float(statistics.median(call_times(fn, repeat, warmup=warmup)))


def interleaved_times(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Each callable's seconds per call, the callables alternating per repeat (at least
    one) so that all see the same load of a shared machine."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(max(1, repeat)):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return times


def add_shape_args(ap: argparse.ArgumentParser, *, L: int) -> None:
    """The shape options of the EDM host/device timelines: --L (default ``L``), --E,
    --tau, --theta, --warm."""
    ap.add_argument("--L", type=int, default=L)
    ap.add_argument("--E", type=int, default=7)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--theta", type=float, default=3.0)
    ap.add_argument("--warm", type=int, default=3)


def edm_calls(job: str, x: Any, a: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    """The calls a timeline compares for ``job`` on series ``x``: float32 Simplex
    "checked" (the default) and "unchecked" (inside ``row_check.unchecked``), or one
    S-map ("smap"); shape and device from ``a`` (:func:`add_shape_args`, --device)."""
    import pyedmcl as pe
    from pyedmcl.edm import row_check

    if job == "smap":
        return {"smap": lambda: pe.smap(x, E=a.E, tau=a.tau, theta=a.theta, device=a.device)}

    def checked() -> Any:
        return pe.simplex(x, E=a.E, tau=a.tau, device=a.device)

    def unchecked() -> Any:
        with row_check.unchecked():
            return checked()
    return {"checked": checked, "unchecked": unchecked}


def add_batch_args(ap: argparse.ArgumentParser, *, series: int, points: int,
                   repeat: int) -> None:
    """The shape of an ``rqa_batch`` probe: ``--series`` random walks of ``--points``
    values (:func:`random_walk_panel`), ``--radius`` and ``--repeat``."""
    ap.add_argument("--series", type=int, default=series)
    ap.add_argument("--points", type=int, default=points)
    ap.add_argument("--radius", type=float, default=0.2,
                    help="radius (the series are standardised: 0.2 gives RR ~ 3%%)")
    ap.add_argument("--repeat", type=int, default=repeat)


def random_walk_panel(points: int, series: int, seed: int = 0) -> Any:
    """``(points, series)`` random walks (cumulative sums of standard normal steps), each
    column scaled to unit standard deviation: the RQA batch benchmarks' data (a radius
    of 0.2 gives a recurrence rate near 3% at E=3, tau=2)."""
    import numpy as np

    X = np.random.default_rng(seed).standard_normal((points, series)).cumsum(axis=0)
    X /= X.std(axis=0)
    return X


class SameAsFirst:
    """Whether each array equals the first one given (a launch sweep's check that every
    configuration computes the same table); the first is its own reference."""

    def __init__(self) -> None:
        self.ref: Any = None

    def __call__(self, got: Any) -> bool:
        import numpy as np

        if self.ref is None:
            self.ref = got
            return True
        return bool(np.array_equal(got, self.ref))
