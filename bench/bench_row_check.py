"""float32 Simplex's exactness check: checked vs unchecked vs kEDM, one process, same data.

Each case is a leave-one-out Simplex of a Mackey-Glass series (delay 17, the classic
chaotic setting, sampled every time unit) at length ``L``, embedding ``E`` and lag
``tau``:

* ``checked``: ``pe.simplex(x, E=E, tau=tau)`` in float32, the default: each
  prediction's float32 error bounded in the lookup, those beyond 1e-5 of the target's
  spread redone in float64 (:mod:`pyedmcl.edm.row_check`);
* ``unchecked``: the same call inside :func:`pyedmcl.edm.row_check.unchecked` (float32
  alone, what the scans compute);
* ``kedm``: ``kedm.eval_simplex(x, x, target=x, E=E, tau=tau, Tp=1)`` (the same
  library x query work; kEDM keeps the self-match, which changes nothing in the cost).

pyedmcl's contenders alternate per repeat (the same load on a shared machine); kEDM
is timed after all of them (``--kedm-interleaved``: with them, as the results of
2026-11-28 on the H100 were; on a 2-core CPU its OpenMP threads, busy after each call,
then slowed the next pyedmcl call by up to 1.6x). The best and the median of ``--repeat`` are printed
with the ratios checked / unchecked and kEDM / pyedmcl, and the rows the check redid. ``--components`` adds the pipeline's
parts on device-resident data (``run_plan``: unchecked, checked, checked from a table
of ``knn`` neighbours (no extra one), unchecked from ``knn + 1``) and the float64 redo's
own time.

Run:  python bench/bench_row_check.py --cases 20000:7:2,10000:12:3
      python bench/bench_row_check.py --device nvidia --cases 100000:7:2,50000:12:3
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from _common import interleaved_times


def mackey_glass(n: int, *, delay: int = 17, beta: float = 0.2, gamma: float = 0.1,
                 power: int = 10, x0: float = 1.2, burn: int = 1000) -> np.ndarray:
    """Mackey-Glass ``dx/dt = beta x(t - delay) / (1 + x(t - delay)^power) - gamma x``
    by Euler steps of one time unit from a constant history ``x0``, ``burn`` steps
    dropped."""
    x = np.empty(n + burn + delay)
    x[:delay + 1] = x0
    for t in range(delay, n + burn + delay - 1):
        xd = x[t - delay]
        x[t + 1] = x[t] + beta * xd / (1.0 + xd ** power) - gamma * x[t]
    return x[delay + burn:]


def interleaved(fns: dict, repeat: int) -> dict:
    """Each callable's times (s), the callables alternating per repeat."""
    return interleaved_times(fns, repeat)


def redone_rows(x: np.ndarray, E: int, tau: int, device, repeat: int = 1) -> tuple[int, float]:
    """Rows the checked call redid in float64 and the redo's own time (s, the best of
    ``repeat`` calls)."""
    import pyedmcl as pe
    from pyedmcl.edm import simplex as S

    names = [n for n in ("redo_float64", "redo_patched") if hasattr(S, n)]
    reals, got = {n: getattr(S, n) for n in names}, []

    def spy(*a, _real, **k):
        t = time.perf_counter()
        r = _real(*a, **k)
        got.append((a[4].size, time.perf_counter() - t))
        return r

    for n in names:
        setattr(S, n, lambda *a, _real=reals[n], **k: spy(*a, _real=_real, **k))
    from pyedmcl.edm import row_redo

    real_fixed = row_redo.EnqueuedRedo.fixed

    def fixed(self, rows):  # the redo enqueued behind the first pass: no time of its own
        f = real_fixed(self, rows)
        if f is not None:
            got.append((rows.size, 0.0))
        return f

    row_redo.EnqueuedRedo.fixed = fixed
    try:
        for _ in range(max(1, repeat)):
            pe.simplex(x, E=E, tau=tau, device=device)
    finally:
        for n in names:
            setattr(S, n, reals[n])
        row_redo.EnqueuedRedo.fixed = real_fixed
    return (got[0][0], min(g[1] for g in got)) if got else (0, 0.0)


def components(x: np.ndarray, E: int, tau: int, be, repeat: int) -> dict:
    """Times of the pipeline's parts on device-resident data (see the module docstring)."""
    from pyedmcl.edm import row_check as rc
    from pyedmcl.edm import simplex as S
    from pyedmcl.neighbors import resolve_backend
    from pyedmcl.primitives.ranges import resolve

    xz = x - x.mean()
    yz = xz[None]
    data = S.DeviceData.upload(be, xz, yz, np.float32)
    plan = resolve(x.size, E=E, tau=tau, Tp=1, knn=None, exclusion_radius=0, lib=None, pred=None)
    nb = resolve_backend("exact", be, L=plan.lib_points.size, E=plan.E,
                         nq=plan.pred_points.size, k=plan.knn, options=None)

    class Narrow(rc.RowCheck):
        widen = property(lambda self: False)

    wide = dataclasses.replace(plan, knn=plan.knn + 1)
    rows = S.run_plan(data, plan, neighbors=nb, check=rc.RowCheck(plan, xz, yz))[3]
    rows = np.asarray(rows if rows is not None and rows.dtype != np.uint8 else [], np.int64)
    redo = redo_parts(be, plan, x, rows, nb) if rows.size else {}
    fns = {"run_plan unchecked": lambda: S.run_plan(data, plan, neighbors=nb),
           "run_plan checked": lambda: S.run_plan(data, plan, neighbors=nb,
                                                  check=rc.RowCheck(plan, xz, yz)),
           "run_plan checked, no extra neighbour": lambda: S.run_plan(
               data, plan, neighbors=nb, check=Narrow(plan, xz, yz)),
           "run_plan unchecked, knn + 1": lambda: S.run_plan(data, wide, neighbors=nb)}
    if hasattr(S, "widened_params"):  # the widened table at the next bucket's tuning, as before
        def own_bucket():
            real = S.widened_params
            S.widened_params = lambda *a, **k: None
            try:
                S.run_plan(data, plan, neighbors=nb, check=rc.RowCheck(plan, xz, yz))
            finally:
                S.widened_params = real
        fns["run_plan checked, K+1's own tuning"] = own_bucket

    def no_flush():  # the k-NN kernel not handed to the device before the host work
        flush = be.flush
        be.flush = lambda: None
        try:
            S.run_plan(data, plan, neighbors=nb, check=rc.RowCheck(plan, xz, yz))
        finally:
            be.flush = flush
    fns["run_plan checked, no flush"] = no_flush
    fns.update(redo)
    for f in fns.values():
        f()
    return interleaved(fns, repeat)


def redo_parts(be, plan, x: np.ndarray, rows: np.ndarray, nb) -> dict:
    """The float64 redo's steps, each waited for (:func:`pyedmcl.edm.row_check.redo_float64`):
    the series' upload, the k-NN table of the rows, the lookup and its read."""
    from pyedmcl.primitives.lookup import lookup_device

    x64 = np.ascontiguousarray(x, np.float64)
    xd = be.to_device(x64)
    kw = dict(E=plan.E, tau=plan.tau, k=plan.knn, qpts=plan.pred_points[rows],
              lpts=plan.lib_points, radius=plan.exclusion_radius)
    table = nb.device_table(be, xd, x.size, real="double", **kw)
    be.finish()

    def upload():
        be.to_device(x64)
        be.finish()

    def knn():
        nb.device_table(be, xd, x.size, real="double", **kw)
        be.finish()

    def lookup():
        p, _ = lookup_device(be, table, xd, x.size, 1, plan.offset + plan.Tp, real="double")
        be.to_host(p)

    parts = {f"redo ({rows.size} rows): x float64 upload": upload,
             "redo: float64 k-NN of the rows, one list": knn, "redo: lookup + read": lookup}
    from pyedmcl.edm import row_check as rc
    if hasattr(rc, "redo_table"):
        def lists():
            on_cpu = rc.REDO_LISTS_ON_CPU
            rc.REDO_LISTS_ON_CPU = True  # the GPUs' choice, on any device
            try:
                rc.redo_table(be, nb, xd, x.size, kw, None)
            finally:
                rc.REDO_LISTS_ON_CPU = on_cpu
            be.finish()
        parts["redo: float64 k-NN of the rows, lists merged"] = lists
    return parts


def line(label: str, ts: list, ref: float | None = None, note: str = "") -> None:
    best = min(ts)
    s = f"  {label:<40} best {best * 1e3:9.2f} ms  median {np.median(ts) * 1e3:9.2f} ms"
    if ref is not None:
        s += f"  x{best / ref:6.3f}"
    print(s + note, flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="pyedmcl device selector (nvidia, intel, ...)")
    ap.add_argument("--cases", default="20000:7:2,10000:12:3", help="comma list of L:E:tau")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-kedm", action="store_true")
    ap.add_argument("--kedm-interleaved", action="store_true",
                    help="time kEDM alternating with pyedmcl (default: after it)")
    ap.add_argument("--components", action="store_true", help="also time the pipeline's parts")
    a = ap.parse_args(argv)

    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.edm import row_check as rc
    from pyedmcl.edm import simplex as S

    kedm = None
    if not a.no_kedm:
        from peers import import_peer  # the CPU mask restored after kEDM's import
        kedm = import_peer("kedm")
    be = get_backend(a.device)
    print(f"device: {be.info.name} [{be.info.runtime}], {be.info.compute_units} CUs; "
          f"kEDM {'absent' if kedm is None else getattr(kedm, '__version__', 'present')}")
    later: list = []  # kEDM after every pyedmcl timing: (case, call, checked, unchecked)
    for case in a.cases.split(","):
        L, E, tau = (int(v) for v in case.split(":"))
        x = mackey_glass(L)
        x32 = x.astype(np.float32)

        def unchecked(x=x, E=E, tau=tau):
            with rc.unchecked():
                return pe.simplex(x, E=E, tau=tau, device=be)

        fns = {"checked": lambda x=x, E=E, tau=tau: pe.simplex(x, E=E, tau=tau, device=be),
               "unchecked": unchecked}
        if a.components and hasattr(S, "widened_params"):
            def own_tuning(x=x, E=E, tau=tau):  # the widened table at the next bucket's tuning
                real = S.widened_params
                S.widened_params = lambda *a, **k: None
                try:
                    return pe.simplex(x, E=E, tau=tau, device=be)
                finally:
                    S.widened_params = real
            fns["own"] = own_tuning
        if a.components and hasattr(rc, "REDO_LISTS"):
            def one_list(x=x, E=E, tau=tau):  # the redo's k-NN in one launch (no lists)
                lists = rc.REDO_LISTS
                rc.REDO_LISTS = 1
                try:
                    return pe.simplex(x, E=E, tau=tau, device=be)
                finally:
                    rc.REDO_LISTS = lists
            fns["one list"] = one_list
        peer = (None if kedm is None else
                lambda v=x32, E=E, tau=tau: kedm.eval_simplex(v, v, target=v, E=E, tau=tau, Tp=1))
        if peer is not None and a.kedm_interleaved:
            kedm.eval_simplex(x32[:300], x32[:300], target=x32[:300], E=2, tau=1, Tp=1)
            fns["kedm"] = peer
        for f in fns.values():  # warm-up: kernels built, tuning looked up
            f()
        rows, t_redo = redone_rows(x, E, tau, be, a.repeat)
        rho = pe.simplex(x, E=E, tau=tau, device=be).rho
        print(f"\nSimplex leave-one-out, Mackey-Glass L={L} E={E} tau={tau}: rho {rho:.6f}, "
              f"{rows} rows redone in float64 (best {t_redo * 1e3:.2f} ms)")
        t = interleaved(fns, a.repeat)
        ref = min(t["unchecked"])
        if peer is not None and not a.kedm_interleaved:
            later.append((case, peer, min(t["checked"]), ref))
        line("pyedmcl float32 unchecked", t["unchecked"])
        line("pyedmcl float32 checked (default)", t["checked"], ref, "  checked / unchecked")
        if "own" in t:
            line("  the same, K+1's own tuning", t["own"], ref)
        if "one list" in t:
            line("  the same, the redo's k-NN in one list", t["one list"], ref)
        if "kedm" in t:
            k = min(t["kedm"])
            line("kedm.eval_simplex", t["kedm"], None,
                 f"  kEDM / checked {k / min(t['checked']):6.2f}x, / unchecked {k / ref:6.2f}x")
        if a.components:
            for label, ts in components(x, E, tau, be, a.repeat).items():
                line(label, ts)
    if later:
        print("\nkEDM, timed after every pyedmcl call above (best of --repeat):")
        w = mackey_glass(300).astype(np.float32)
        kedm.eval_simplex(w, w, target=w, E=2, tau=1, Tp=1)  # Kokkos' first call, untimed
    for case, peer, checked, unchecked in later:
        ts = interleaved({"kedm": peer}, a.repeat)["kedm"]
        k = min(ts)
        line(f"kedm.eval_simplex L:E:tau {case}", ts, None,
             f"  kEDM / checked {k / checked:6.2f}x, / unchecked {k / unchecked:6.2f}x")


if __name__ == "__main__":
    main()
