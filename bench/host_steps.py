"""Host time between a call's queue commands: when the host enqueued each launch, upload
and read of one pyedmcl call (ms from the call's start), when it first waited for the
device, and how long it worked after the last wait.

:mod:`gpu_timeline` shows the device's view (queue, start, end of each command); this
shows the host's, on any device: the steps the host takes before the first launch,
between launches and after the results are back. On a GPU those are what the call costs
beyond its kernels. Each step's time is the least over ``--repeat`` calls (the least
disturbed by other work on a shared machine).

``--gpu-path``: on a CPU device, take the steps a GPU takes where they differ only in
host work: the float64 redo of float32 Simplex enqueued behind the checked lookup
(:data:`pyedmcl.edm.row_redo.ENQUEUE_ON`), uploads beside a running kernel through a
queue of their own (:data:`clkernels.backends.pyopencl_backend.UPLOAD_ASIDE_ON`) and the
widened k-NN table's tuning lookup (:func:`pyedmcl.primitives.knn.widened_params`).

Run:  python bench/host_steps.py --job simplex --L 5000 --E 12 --tau 3 --gpu-path
      python bench/host_steps.py --job smap --L 2000 --E 8 --theta 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_shape_args, edm_calls  # noqa: E402


def record(fn) -> list[tuple[str, float]]:
    """Run ``fn()`` once with the host time of every queue command, blocking read and wait
    recorded: ``(what, seconds from the call's start)``; the last entry is "end"."""
    from clkernels.backends import pyopencl_backend as P

    B = P.PyOpenCLBackend
    marks: list[tuple[str, float]] = []
    t0 = [0.0]
    saved = {n: getattr(B, n) for n in ("launch", "launch_bound", "to_device", "to_device_aside",
                                         "to_host", "to_host_async")}

    def mark(what: str) -> None:
        marks.append((what, time.perf_counter() - t0[0]))

    def launch(self, kernel, *a, **k):
        mark(kernel.name)
        return saved["launch"](self, kernel, *a, **k)

    def launch_bound(self, bound, *a, **k):
        mark(bound.kernel.name)
        return saved["launch_bound"](self, bound, *a, **k)

    def to_device(self, array, **kw):
        mark(f"upload {np.asarray(array).nbytes} B")
        return saved["to_device"](self, array, **kw)

    def to_device_aside(self, array, **kw):
        mark(f"upload {np.asarray(array).nbytes} B (aside)")
        return saved["to_device_aside"](self, array, **kw)

    def to_host(self, array):
        mark(f"read {getattr(array, 'nbytes', 0)} B: wait")
        out = saved["to_host"](self, array)
        mark("  back")
        return out

    def to_host_async(self, array, *a, **k):
        mark(f"read {getattr(array, 'nbytes', 0)} B (async)")
        w = saved["to_host_async"](self, array, *a, **k)

        def wait():
            mark("  wait")
            out = w()
            mark("  back")
            return out
        return wait

    for n, f in (("launch", launch), ("launch_bound", launch_bound), ("to_device", to_device),
                 ("to_device_aside", to_device_aside), ("to_host", to_host),
                 ("to_host_async", to_host_async)):
        setattr(B, n, f)
    try:
        t0[0] = time.perf_counter()
        fn()
        mark("end")
    finally:
        for n, f in saved.items():
            setattr(B, n, f)
    return marks


def least(runs: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """Each step's least time since the previous one over ``runs`` (of one sequence),
    summed back into times from the start."""
    names = [w for w, _ in runs[0]]
    runs = [r for r in runs if [w for w, _ in r] == names]
    steps = np.array([np.diff([0.0] + [t for _, t in r]) for r in runs]).min(axis=0)
    return list(zip(names, np.cumsum(steps), strict=True))


def show(title: str, marks: list[tuple[str, float]]) -> None:
    print(title)
    last = 0.0
    first_wait = next((t for w, t in marks if w.strip() in ("wait",) or w.endswith(": wait")),
                      None)
    for what, t in marks:
        print(f"    {what:34s} {t * 1e3:8.3f} ms  (+{(t - last) * 1e3:6.3f})")
        last = t
    back = [t for w, t in marks if w.strip() == "back"]
    end = marks[-1][1]
    if first_wait is not None:
        print(f"    host before the first wait {first_wait * 1e3:.3f} ms, "
              f"after the last read {(end - back[-1]) * 1e3:.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--job", choices=("simplex", "smap"), default="simplex")
    add_shape_args(ap, L=5000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--gpu-path", action="store_true",
                    help="take the GPU's host steps on a CPU device (see the docstring)")
    a = ap.parse_args()

    from bench_row_check import mackey_glass

    from pyedmcl.edm import row_redo

    if a.gpu_path:
        _gpu_path()
    x = mackey_glass(a.L)
    calls = edm_calls(a.job, x, a)
    if a.job == "simplex":
        print(f"flagged rows: {_flagged(x, a)}; redo enqueued on "
              f"{row_redo.ENQUEUE_ON}")
    for name, fn in calls.items():
        for _ in range(a.warm):
            fn()
        runs = [record(fn) for _ in range(a.repeat)]
        walls = [r[-1][1] for r in runs]
        show(f"{a.job} {name} L={a.L} E={a.E} tau={a.tau}: wall best {min(walls) * 1e3:.3f} ms,"
             f" median {np.median(walls) * 1e3:.3f} ms; least step times:", least(runs))


def _flagged(x: np.ndarray, a) -> int:
    from bench_row_check import redone_rows

    return redone_rows(x, a.E, a.tau, a.device)[0]


def _gpu_path() -> None:
    """The GPU's host steps on a CPU device: the enqueued redo, the widened table's
    tuning lookup (its parameters: the base table's bucket)."""
    from clkernels.backends import pyopencl_backend as P
    from pyedmcl.edm import row_redo
    from pyedmcl.kernels.knn import KNN, is_contiguous
    from pyedmcl.primitives import knn as K

    row_redo.ENQUEUE_ON = ("gpu", "cpu")
    # uploads beside a running kernel through a queue of their own, as on GPUs (on a CPU
    # runtime an upload's array waits for the kernels queued before it when dropped)
    P.UPLOAD_ASIDE_ON = ("gpu", "cpu")

    def widened(be, *, E, tau, k, qpts, lpts, base_k, metric="euclidean", real="float", nc=1):
        lp = np.ascontiguousarray(np.atleast_2d(lpts), dtype=np.int32)
        spec = {"E": E, "TAU": abs(tau), "K": k, "METRIC": metric, "REAL": real}
        nq = int(qpts.size)
        return KNN.params_for(be, spec, max(nq, lp.shape[1]), nq_total=nq * lp.shape[0],
                              contiguous=is_contiguous(lp), bucket_k=base_k)

    K.widened_params = widened
    import pyedmcl.edm.simplex as S

    S.widened_params = widened


if __name__ == "__main__":
    main()
