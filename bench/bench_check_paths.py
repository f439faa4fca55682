"""float32's exactness check per EDM path: the default call against the same call inside
:func:`pyedmcl.edm.row_check.unchecked`, one process, same data, runs alternating.

Paths (Mackey-Glass series, :func:`bench_row_check.mackey_glass`; ``--scale`` multiplies
every length): ``simplex`` (leave-one-out, L = 20,000, E = 7, tau = 2), ``simplex_E12`` (L = 10,000, E = 12, tau = 3), ``ccm`` (L = 2,000,
E = 4, four library sizes, 10 samples, the series against its own lag-1 copy), ``xmap`` (8
series of 2,000, E = "auto"), ``embed_dimension`` (L = 10,000, E = 1..10), ``predict_interval``
(L = 10,000, E = 4, Tp = 1..10) and ``predict_nonlinear`` (L = 4,000, E = 4, pyEDM's 15
thetas).

Each call is timed twice: wall-clock and the process's CPU time (``time.process_time``:
every thread's, the OpenCL runtime's workers included), which on a machine shared with
other jobs varies far less than the wall clock (the work, not the wait for a core).
Besides the times (best and median of ``--repeat``, ratio of the bests) each line says
whether the call consulted the check's switch at all (``uses check``: the number of
times :func:`pyedmcl.edm.row_check.row_check` and :func:`enabled` read it during one
default call): a path that never reads it has no float32 row check, and its ratio is
that of two identical calls (the noise of the machine).

Run:  python bench/bench_check_paths.py --repeat 9
      python bench/bench_check_paths.py --paths simplex,ccm --scale 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_row_check import mackey_glass  # noqa: E402


class CountingSwitch(list):
    """The row check's switch stack (``row_check._ENABLED``), counting its reads."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        CountingSwitch.reads += 1
        return super().__getitem__(i)


def paths(scale: float, device: Any) -> dict[str, Callable[[], Any]]:
    """One call per path (see the module docstring)."""
    import pyedmcl as pe

    def n(v: int) -> int:
        return max(200, int(v * scale))

    s1 = mackey_glass(n(20_000))
    s2 = mackey_glass(n(10_000))
    s3 = mackey_glass(n(4_000) + 1)
    s4 = mackey_glass(n(2_000) + 1)
    xm = np.stack([mackey_glass(n(2_000), x0=1.2 + 0.05 * i) for i in range(8)], axis=1)
    Lc = s4.size - 1
    libs = [Lc // 8, Lc // 4, Lc // 2, Lc - 10]
    return {
        "simplex": lambda: pe.simplex(s1, E=7, tau=2, device=device),
        "simplex_E12": lambda: pe.simplex(s2, E=12, tau=3, device=device),
        "ccm": lambda: pe.ccm(s4[1:], s4[:-1], E=4, lib_sizes=libs, sample=10, seed=1,
                              device=device),
        "xmap": lambda: pe.xmap(xm, E="auto", max_E=10, device=device),
        "embed_dimension": lambda: pe.embed_dimension(s2, max_E=10, device=device),
        "predict_interval": lambda: pe.predict_interval(s2, E=4, max_Tp=10, device=device),
        "predict_nonlinear": lambda: pe.predict_nonlinear(s3, E=4, device=device),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="pyedmcl device selector (intel, nvidia, ...)")
    ap.add_argument("--paths", default="simplex,simplex_E12,ccm,xmap,embed_dimension,predict_interval,"
                                       "predict_nonlinear")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every series length")
    a = ap.parse_args(argv)

    import pyedmcl  # noqa: F401  (configures clkernels before its runtimes register)
    from clkernels import get_backend
    from pyedmcl.edm import row_check as rc

    be = get_backend(a.device)
    rc._ENABLED = CountingSwitch(rc._ENABLED)
    print(f"device: {be.info.name} [{be.info.runtime}], {be.info.compute_units} CUs; "
          f"scale {a.scale}, best / median of {a.repeat}, checked and unchecked alternating",
          flush=True)
    calls = paths(a.scale, be)
    for name in a.paths.split(","):
        fn = calls[name]

        def off(fn: Callable[[], Any] = fn) -> Any:
            with rc.unchecked():
                return fn()

        fn(), off()  # warm-up: kernels built, tuning looked up
        CountingSwitch.reads = 0
        fn()
        reads = CountingSwitch.reads
        times: dict[str, list[float]] = {"checked": [], "unchecked": []}
        cpu: dict[str, list[float]] = {"checked": [], "unchecked": []}
        for _ in range(max(1, a.repeat)):
            for key, f in (("checked", fn), ("unchecked", off)):
                t, c = time.perf_counter(), time.process_time()
                f()
                times[key].append(time.perf_counter() - t)
                cpu[key].append(time.process_time() - c)
        bc, bu = min(times["checked"]), min(times["unchecked"])
        cc, cu = min(cpu["checked"]), min(cpu["unchecked"])
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"  {name:<18} wall: checked {bc * 1e3:9.2f} ms (median {med['checked']:9.2f}), "
              f"unchecked {bu * 1e3:9.2f} ms (median {med['unchecked']:9.2f}) x{bc / bu:6.3f};  "
              f"CPU: {cc * 1e3:9.2f} / {cu * 1e3:9.2f} ms x{cc / cu:6.3f};  "
              f"uses check: {'yes' if reads else 'no'} ({reads} reads)", flush=True)


if __name__ == "__main__":
    main()
