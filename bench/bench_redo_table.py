"""The float64 redo's k-NN table for float32 Simplex's flagged rows: one launch over
the whole library against the library in lists merged on the device
(:func:`pyedmcl.edm.row_check.redo_table`), at several list sizes, and the checked
call with each; the kernel parameters each launch takes are printed.

Run:  python bench/bench_redo_table.py --device nvidia --cases 100000:7:2,50000:12:3
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import best_time


def best(fn, repeat: int) -> float:
    """The best time (ms) of ``repeat`` calls of ``fn``, after one untimed call."""
    return best_time(fn, repeat, warmup=1) * 1e3


def run_case(be, L: int, E: int, tau: int, chunks: list[int], repeat: int, seen: list) -> None:
    """One case's tables and checked calls at each list size (``seen``: the k-NN
    launches' parameters, appended by the caller's spy)."""
    from bench_row_check import mackey_glass

    import pyedmcl as pe
    from pyedmcl.edm import row_check as rc
    from pyedmcl.edm import simplex as S
    from pyedmcl.neighbors import resolve_backend
    from pyedmcl.primitives.ranges import resolve

    x = mackey_glass(L)
    rows: list = []
    real_redo = S.redo_patched
    S.redo_patched = lambda *r, **k: rows.append(r[4]) or real_redo(*r, **k)
    pe.simplex(x, E=E, tau=tau, device=be)
    S.redo_patched = real_redo
    if not rows:
        print(f"L={L} E={E} tau={tau}: nothing flagged")
        return
    plan = resolve(x.size, E=E, tau=tau, Tp=1, knn=None, exclusion_radius=0, lib=None,
                   pred=None)
    nb = resolve_backend("exact", be, L=plan.lib_points.size, E=plan.E,
                         nq=plan.pred_points.size, k=plan.knn, options=None)
    xd = be.to_device(np.ascontiguousarray(x, np.float64))
    l_dev = S.plan_device(be, plan)[1]
    kw = dict(E=plan.E, tau=plan.tau, k=plan.knn, qpts=plan.pred_points[rows[0]],
              lpts=plan.lib_points, radius=plan.exclusion_radius)

    def table():
        rc.redo_table(be, nb, xd, x.size, kw, l_dev)
        be.finish()

    def call():
        pe.simplex(x, E=E, tau=tau, device=be)

    print(f"\nL={L} E={E} tau={tau}: {rows[0].size} rows")
    saved = rc.REDO_CHUNK, rc.REDO_LISTS, rc.REDO_QUERY_LISTS, rc.REDO_LISTS_ON_CPU
    try:
        for chunk in chunks:
            rc.REDO_CHUNK, rc.REDO_LISTS = max(chunk, 1), (1 if chunk == 0 else 1024)
            rc.REDO_QUERY_LISTS, rc.REDO_LISTS_ON_CPU = 1 << 20, True
            seen.clear()
            t_table = best(table, repeat)
            p = seen[-1]
            t_call = best(call, repeat)
            label = "one launch" if chunk == 0 else f"lists of {chunk}"
            print(f"  {label:<16} table {t_table:7.3f} ms  checked call {t_call:7.2f} ms  "
                  f"params {p}", flush=True)
    finally:
        rc.REDO_CHUNK, rc.REDO_LISTS, rc.REDO_QUERY_LISTS, rc.REDO_LISTS_ON_CPU = saved
    with rc.unchecked():
        t_un = best(call, repeat)
    print(f"  unchecked call {t_un:7.2f} ms")
    stages(be, x, plan, nb, kw, l_dev, repeat)


def stages(be, x: np.ndarray, plan, nb, kw: dict, l_dev, repeat: int) -> None:
    """The redo's steps at the library's default lists, each waited for (best of
    ``repeat``): the float64 series' upload, the table, the lookup with its read."""
    from pyedmcl.edm import row_check as rc
    from pyedmcl.primitives.lookup import lookup_device

    x64 = np.ascontiguousarray(x, np.float64)
    xd = be.to_device(x64)
    table = rc.redo_table(be, nb, xd, x.size, kw, l_dev)[0]
    be.finish()

    def upload():
        be.to_device(x64)
        be.finish()

    def lists():
        rc.redo_table(be, nb, xd, x.size, kw, l_dev)
        be.finish()

    def lookup():
        p, _ = lookup_device(be, table, xd, x.size, 1, plan.offset + plan.Tp, real="double")
        be.to_host(p)
    for label, fn in (("x float64 upload", upload), ("table (default lists)", lists),
                      ("lookup + read", lookup)):
        print(f"  redo step: {label:<24} {best(fn, repeat):7.3f} ms")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default=None)
    ap.add_argument("--cases", default="20000:7:2")
    ap.add_argument("--chunks", default="0,512,1024,2048,4096,16384",
                    help="library points per list (0: one launch over the whole library)")
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args(argv)

    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN

    be = get_backend(a.device)
    print(f"device: {be.info.name} [{be.info.runtime}], {be.info.compute_units} CUs")
    real_launch, seen = KNN.launch, []
    KNN.launch = lambda b, params, *r, **k: seen.append(params) or real_launch(b, params, *r, **k)
    chunks = [int(c) for c in a.chunks.split(",")]
    for case in a.cases.split(","):
        L, E, tau = (int(v) for v in case.split(":"))
        run_case(be, L, E, tau, chunks, a.repeat, seen)


if __name__ == "__main__":
    main()
