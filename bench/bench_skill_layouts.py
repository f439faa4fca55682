"""The cross map's skill kernel (``xmap_skill``) in several layouts on one case, one process.

The case is the skill family's tuning case (:class:`pyedmcl.kernels.xmap._SkillCase`: 64
libraries on a GPU, real k-NN tables over random walks and noisy oscillators) with a
chosen number of targets, so that a layout is timed at the size of a wide E-group
(thousands of targets) or of a narrow one (a mixed-E map's few hundred). Every layout
must give the same rho bit for bit (checked); the time is the wall time of a launch and
its wait, best of ``--repeat`` (one kernel: the device time plus ~30 us of launch).

Layouts: ``tuned`` (what the map takes for that many targets: the tuned entry of the
narrow or wide bucket, after :func:`~pyedmcl.kernels.xmap.gpu_layout` /
``cpu_layout``), ``heuristic`` (the device's untuned layout), ``staged:LWG.LB.SPL[.TJ]``
(target lanes, tables staged in local memory, SPL subtrees a target, TJ targets a
work-item; decision 0082)
and ``lanes:LWG.LB`` (target lanes reading the tables from global memory, decision 0080).

Run:  python bench/bench_skill_layouts.py --device nvidia --K 7 21 --targets 256 512 2048 8192
      python bench/bench_skill_layouts.py --device intel --K 7 --targets 64 --layouts tuned staged:32.1.4
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import best_time


def layouts(names: list[str], be, xk, spec: dict, nq: int, ntg: int) -> list[tuple[str, dict]]:
    """(name, layout) for each name of ``--layouts``."""
    out = []
    wide = be.info.is_gpu and ntg >= xk.wide_targets(be.info)
    for name in names:
        if name == "tuned":
            p = xk.XMAP_SKILL.layout(be, dict(spec, **({"WIDE": 1} if wide else {})), nq)
            if be.info.is_gpu:
                p = xk.gpu_layout(p, ntg, be.info)
            else:
                p = xk.cpu_layout(p, ntg, time_major=be.info.runtime == "pocl")
        elif name == "heuristic":
            p = dict(xk._LAYOUT, **xk._skill_heuristic(be.info))
        elif name.startswith(("staged:", "lanes:")):
            kind, _, v = name.partition(":")
            f = [int(x) for x in v.split(".")]
            p = dict(xk._LAYOUT, TJ=1, LANES=1, LWG=f[0], LB=f[1], LMAJ=1, CM=1)
            if kind == "staged":
                p.update(ST=1, CH=16, SPL=f[2] if len(f) > 2 else 1, TJ=f[3] if len(f) > 3 else 1)
        else:
            raise SystemExit(f"--layouts: {name!r} is not tuned, heuristic, staged:LWG.LB.SPL[.TJ] "
                             "or lanes:LWG.LB")
        out.append((name, p))
    return out


def time_layout(be, xk, case, p: dict, nq: int, ntg: int, repeat: int):
    """(best time of ``repeat`` launches, rho) of layout ``p`` on ``case``'s first ``ntg``
    targets."""
    tidx, tw, tden = case.cm if p["CM"] else (case.tidx, case.tw, case.tden)
    y, ldy = case.lanes(xk.lane_tile(p)) if xk.reads_time_major(p) else (case.y, case.n)

    def run():
        xk.XMAP_SKILL.launch(be, p, case.spec, tidx, tw, tden, nq, case.nb, y, ldy, 0,
                             case.tgt, case.tgt, ntg, case.obs, case.out, ntg, 0)
        be.finish()
    t = best_time(run, repeat, warmup=1)
    return t, be.to_host(case.out)[:case.nb * ntg].copy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--K", type=int, nargs="+", default=[7, 21], help="neighbours (E + 1)")
    ap.add_argument("--nq", type=int, default=1000, help="queries (the series' length)")
    ap.add_argument("--targets", type=int, nargs="+", default=[512, 8192])
    ap.add_argument("--layouts", nargs="+", default=["tuned", "heuristic", "staged:64.1.1",
                                                     "staged:32.1.4"])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()

    import clkernels
    import pyedmcl  # noqa: F401  (registers the kernel families)
    from pyedmcl.kernels import xmap as xk

    be = clkernels.get_backend(a.device)
    print(f"device: {be.info.name} ({be.info.runtime})")
    for K in a.K:
        for ntg in a.targets:
            spec = {"K": K, "REAL": "float", "WEIGHT": "ccm"}
            # the wide case holds at least 2 x wide_targets targets: enough for any --targets
            case = xk._SkillCase(be, dict(spec, WIDE=1), a.nq)
            if ntg > case.ntg:
                raise SystemExit(f"--targets {ntg}: the case holds {case.ntg} on this device")
            case.ntg = ntg
            ref, base = None, None
            for name, p in layouts(a.layouts, be, xk, spec, a.nq, ntg):
                t, got = time_layout(be, xk, case, p, a.nq, ntg, a.repeat)
                ref = got if ref is None else ref
                base = t if base is None else base
                same = np.array_equal(got, ref, equal_nan=True)
                print(f"K={K:2d} targets={ntg:5d} {name:16s} {t * 1e3:8.3f} ms "
                      f"({base / t:.2f}x the first)  same rho: {same}", flush=True)
                if not same:
                    raise SystemExit("a layout changed rho")


if __name__ == "__main__":
    main()
