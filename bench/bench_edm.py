"""EDM benchmark: pyedmcl vs kEDM vs pyEDM on the same data, in one process.

Cases (each prints times and the ratios peer / pyedmcl):

* ``sweep``  leave-one-out embedding scan E = 1..Emax at length L (lib = pred = all):
  pyedmcl.embed_dimension (the fused scan kernel, one pass for every E) and, for
  reference, its per-E pipeline (``fused=False``), vs kEDM timed with
  ``kedm.eval_simplex(x, x, E=E)`` per E (same L x L distance work; kEDM keeps the
  self-match, which changes nothing in the cost), and ``kedm.edim`` (its own
  lib/pred split) for reference. The contenders alternate per repeat (same load
  on a shared machine); medians are printed.
* ``edim``   embedding scan with kEDM's split (library = first half, predictions =
  second half): pyedmcl.embed_dimension (fused, and per-E for reference) vs
  kedm.edim, interleaved, medians.
* ``ccm``    CCM curve at length ``--ccm-L``: pyedmcl.ccm (both directions) vs
  kedm.ccm called for both directions vs pyEDM.CCM.
* ``gpu``    the H100 table of the issue: Simplex at L=32,768 and 65,536 for E=1
  and 20 (best of ``--repeat``, as kEDM's line): the pipeline on device-resident
  data with a resolved plan (k-NN, lookup, skill read back), and the public
  ``pe.simplex`` end to end (host series in, predictions out, like
  ``kedm.eval_simplex``); embedding scans E=1..20 at L=10,000 and 65,536, and one
  Simplex at ``--big-L`` (default 150,000) to show that no L x L matrix is stored.

Times exclude kernel compilation (one warm-up call first) and include uploads and
the few numbers read back. GFLOP/s counts 3 flops per coordinate of every
library x query distance (subtract, multiply, add), which is what the fused
kernel must do; on CPUs compare with 2 cores x SIMD width x 2 FMA x clock.

Run:  python bench/bench_edm.py --device pocl --L 10000 --Emax 20
      python bench/bench_edm.py --device nvidia --case gpu --data lorenz   (the issue's data)
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import best_time, interleaved_times


def logistic(n: int, r: float = 3.9, x0: float = 0.4) -> np.ndarray:
    """Logistic map from x0, no burn-in (pyedmcl.data.logistic_map)."""
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=r, x0=x0, burn=0)


def series(args, n: int) -> np.ndarray:
    """The benchmark series of length ``n``: ``--data logistic`` (r = 3.9, the default)
    or ``lorenz`` (Lorenz-63 x, RK4 step 0.01: the issue's H100 kEDM figures). The
    fused k-NN's speed depends on the data (how often a candidate beats the k-th
    distance); kEDM's full distance matrix does not."""
    if getattr(args, "data", "logistic") == "lorenz":
        from pyedmcl.neighbors.lorenz import lorenz63
        return lorenz63(n, component="x")
    return logistic(n)


def coupled(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.empty(n), np.empty(n)
    x[0], y[0] = 0.4, 0.2
    for t in range(n - 1):
        x[t + 1] = x[t] * (3.8 - 3.8 * x[t])
        y[t + 1] = y[t] * (3.5 - 3.5 * y[t] - 0.3 * x[t])
    return x, y


def timed(fn, repeat: int = 1) -> float:
    return best_time(fn, repeat)


def flops(nq: int, nl: int, Es) -> float:
    return float(sum(3.0 * E * nq * nl for E in Es))


def have(name: str):
    """The peer library, imported without pinning this process to one core (kEDM)."""
    from peers import import_peer
    return import_peer(name)


def line(label: str, t: float, ref: float | None = None, gflop: float | None = None) -> None:
    s = f"  {label:<44} {t * 1e3:10.1f} ms"
    if gflop:
        s += f"  {gflop / t / 1e9:8.1f} GFLOP/s"
    if ref is not None:
        s += f"  ratio {t / ref:7.2f}x"
    print(s, flush=True)


def interleaved(fns: dict, repeat: int) -> dict:
    """Median wall time of each callable, the callables alternating per repeat so all
    see the same (shared-machine) load."""
    return {k: float(np.median(v)) for k, v in interleaved_times(fns, repeat).items()}


def case_sweep(args, be) -> None:
    import pyedmcl as pe
    L, Emax = args.L, args.Emax
    x = series(args, L)
    print(f"\n[sweep] leave-one-out Simplex E=1..{Emax}, L={L} (lib = pred = all); "
          f"medians of {args.repeat}, interleaved")
    kedm = None if args.no_kedm else have("kedm")
    x32 = x.astype(np.float32)
    fns = {"fused": lambda: pe.embed_dimension(x, max_E=Emax, device=be, fused=True)}
    if args.per_e:
        fns["per_e"] = lambda: pe.embed_dimension(x, max_E=Emax, device=be, fused=False)
    if kedm is not None:  # kEDM's first call initialises Kokkos (and JITs on a GPU): never timed
        kedm.eval_simplex(x32[:200], x32[:200], target=x32[:200], E=2, tau=1, Tp=1)
        fns["kedm"] = lambda: [kedm.eval_simplex(x32, x32, target=x32, E=E, tau=1, Tp=1)
                               for E in range(1, Emax + 1)]
    for k in ("fused", "per_e"):  # warm-up: compile every kernel first
        if k in fns:
            fns[k]()
    t = interleaved(fns, args.repeat)
    gf = flops(L, L, range(1, Emax + 1))
    line("pyedmcl.embed_dimension (fused scan kernel)", t["fused"], gflop=gf)
    if "per_e" in t:
        line("pyedmcl per-E pipeline (fused=False)", t["per_e"], t["fused"], gflop=gf)
    if "kedm" in t:
        line("kedm.eval_simplex per E (same L x L work)", t["kedm"], t["fused"])
        tk2 = timed(lambda: kedm.edim(x32, E_max=Emax, tau=1, Tp=1), 1)
        line("kedm.edim (its own lib/pred split)", tk2, t["fused"])
    if not args.no_pyedm and L <= args.pyedm_max_L:
        import pandas as pd
        import pyEDM
        df = pd.DataFrame({"t": np.arange(1, L + 1), "x": x})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tp = timed(lambda: [pyEDM.Simplex(dataFrame=df, columns="x", target="x",
                                              lib=f"1 {L}", pred=f"1 {L}", E=E)
                                for E in range(1, Emax + 1)], 1)
        line("pyEDM.Simplex x Emax", tp, t["fused"])


def case_edim(args, be, L: int | None = None) -> None:
    import pyedmcl as pe
    L = L or args.L
    Emax = args.Emax
    x = series(args, L)
    h = L // 2
    print(f"\n[edim] embedding scan E=1..{Emax}, L={L}: lib = first half, pred = second half; "
          f"medians of {args.repeat}, interleaved")
    kw = dict(max_E=Emax, lib=f"1 {h}", pred=f"{h + 1} {L}", device=be)
    fns = {"fused": lambda: pe.embed_dimension(x, fused=True, **kw)}
    if args.per_e:
        fns["per_e"] = lambda: pe.embed_dimension(x, fused=False, **kw)
    kedm = None if args.no_kedm else have("kedm")
    if kedm is not None:
        x32 = x.astype(np.float32)
        kedm.edim(x32, E_max=Emax, tau=1, Tp=1)  # warm-up (Kokkos init / JIT), not timed
        fns["kedm"] = lambda: kedm.edim(x32, E_max=Emax, tau=1, Tp=1)
    for k in ("fused", "per_e"):
        if k in fns:
            fns[k]()
    t = interleaved(fns, args.repeat)
    gf = flops(L - h, h, range(1, Emax + 1))
    line("pyedmcl.embed_dimension (fused scan kernel)", t["fused"], gflop=gf)
    if "per_e" in t:
        line("pyedmcl per-E pipeline (fused=False)", t["per_e"], t["fused"], gflop=gf)
    if "kedm" in t:
        line("kedm.edim", t["kedm"], t["fused"])


def case_ccm(args, be) -> None:
    import pyedmcl as pe
    L = args.ccm_L
    x, y = coupled(L)
    sizes = list(range(L // 10, L + 1, L // 10))
    S = args.sample
    print(f"\n[ccm] CCM curve L={L}, lib sizes {sizes[0]}..{sizes[-1]} ({len(sizes)}), "
          f"{S} samples, E={args.ccm_E}, both directions")
    kw = dict(E=args.ccm_E, lib_sizes=sizes, sample=S, seed=1, device=be)
    pe.ccm(x, y, **kw)
    t = timed(lambda: pe.ccm(x, y, **kw), args.repeat)
    M = L - (args.ccm_E - 1)
    line("pyedmcl.ccm", t, gflop=2 * S * sum(flops(M, s, [args.ccm_E]) for s in sizes))
    kedm = None if args.no_kedm else have("kedm")
    if kedm is not None:
        x32, y32 = x.astype(np.float32), y.astype(np.float32)
        tk = timed(lambda: (kedm.ccm(x32, y32, lib_sizes=sizes, sample=S, E=args.ccm_E, tau=1,
                                     Tp=0, seed=1),
                            kedm.ccm(y32, x32, lib_sizes=sizes, sample=S, E=args.ccm_E, tau=1,
                                     Tp=0, seed=1)), args.repeat)
        line("kedm.ccm x 2 directions", tk, t)
    if not args.no_pyedm:
        import pandas as pd
        import pyEDM
        df = pd.DataFrame({"t": np.arange(L), "x": x, "y": y})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tp = timed(lambda: pyEDM.CCM(dataFrame=df, columns="x", target="y", libSizes=sizes,
                                         sample=S, E=args.ccm_E, seed=1), 1)
        line("pyEDM.CCM (its default process pool)", tp, t)


def case_gpu(args, be) -> None:
    import pyedmcl as pe
    from pyedmcl.edm.simplex import DeviceData, run_plan
    from pyedmcl.primitives.ranges import resolve
    print("\n[gpu] the issue's H100 table (kEDM CUDA: 12/21 ms at 32,768; 51/71 ms at 65,536;"
          " scans 31 ms at 10,000, 0.86 s at 65,536)")
    kedm = None if args.no_kedm else have("kedm")
    for L in (32768, 65536):
        x = series(args, L)
        data = DeviceData.upload(be, x, x[None, :], np.float32)
        for E in (1, 20):
            plan = resolve(L, E=E, tau=1, Tp=1)
            run_plan(data, plan, predictions=False)
            t = timed(lambda d=data, p=plan: run_plan(d, p, predictions=False), args.repeat)
            line(f"Simplex leave-one-out L={L} E={E}", t, gflop=flops(L, L, [E]))
            # the public API end to end: host series in, validation, plan, upload,
            # predictions and observations back (what kEDM's call also does)
            pe.simplex(x, E=E, device=be)
            ta = timed(lambda x=x, E=E: pe.simplex(x, E=E, device=be), args.repeat)
            line("  pe.simplex (host in, predictions out)", ta, gflop=flops(L, L, [E]))
            if kedm is not None:  # the same work by kEDM on the same device, warm
                x32 = x.astype(np.float32)

                def run(E=E, x32=x32):
                    return kedm.eval_simplex(x32, x32, target=x32, E=E, tau=1, Tp=1)

                run()
                tk = timed(run, args.repeat)
                line(f"kedm.eval_simplex L={L} E={E}", tk, t)
                print(f"  {'':<44} ratio to pe.simplex {tk / ta:7.2f}x", flush=True)
    for L in (10000, 65536):
        case_edim(args, be, L)
    L = args.big_L
    x = series(args, L)
    data = DeviceData.upload(be, x, x[None, :], np.float32)
    plan = resolve(L, E=20, tau=1, Tp=1)
    run_plan(data, plan, predictions=False)
    t = timed(lambda: run_plan(data, plan, predictions=False), 1)
    line(f"Simplex leave-one-out L={L} E=20 (no L x L)", t, gflop=flops(L, L, [20]))


def case_multivariate(args, be) -> None:
    """Multivariate Simplex (3 columns x E lags) and embedded S-map (coefficients) of
    Lorenz-63 (x, y, z) vs pyEDM's Simplex / SMap on the same frame (lib = first half)."""
    import pandas as pd

    import pyedmcl as pe
    from pyedmcl.data import lorenz63

    L, E = args.mv_L, args.mv_E
    X = lorenz63(L)
    df = pd.DataFrame({"Time": np.arange(1, L + 1), "x": X[:, 0], "y": X[:, 1], "z": X[:, 2]})
    lib, pred = [1, L // 2], [L // 2 + 1, L - 1]
    print(f"multivariate: L={L}, columns x y z, E={E} lags (Simplex), embedded (S-map)")
    dev = be.info.runtime
    sx = lambda: pe.simplex(df, target="z", columns="x y z", E=E, lib=lib, pred=pred,  # noqa: E731
                            device=dev)
    sm = lambda: pe.smap(df, target="x", columns="x y z", embedded=True, theta=2.0,  # noqa: E731
                         lib=lib, pred=pred, device=dev)
    sx(), sm()  # builds
    t = interleaved({"simplex": sx, "smap": sm}, args.repeat)
    line("pyedmcl.simplex (3 columns)", t["simplex"])
    line("pyedmcl.smap (embedded, coefficients)", t["smap"])
    if not args.no_pyedm and have("pyEDM") and L <= args.pyedm_max_L:
        import warnings

        import pyEDM
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tp = timed(lambda: pyEDM.Simplex(dataFrame=df, columns="x y z", target="z", E=E,
                                             lib=lib, pred=pred), args.repeat)
            line("pyEDM.Simplex (3 columns)", tp, t["simplex"])
            tp = timed(lambda: pyEDM.SMap(dataFrame=df, columns="x y z", target="x", E=3,
                                          theta=2.0, embedded=True, lib=lib, pred=pred),
                       args.repeat)
            line("pyEDM.SMap (embedded)", tp, t["smap"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="pyedmcl device selector (pocl, intel, nvidia, ...)")
    ap.add_argument("--case", default="sweep,ccm",
                    help="comma list of: sweep, edim, ccm, gpu, multivariate")
    ap.add_argument("--L", type=int, default=10000)
    ap.add_argument("--data", choices=("logistic", "lorenz"), default="logistic",
                    help="series: logistic map (r=3.9) or Lorenz-63 x (the issue's H100 setting)")
    ap.add_argument("--Emax", type=int, default=20)
    ap.add_argument("--ccm-L", type=int, default=1000)
    ap.add_argument("--ccm-E", type=int, default=3)
    ap.add_argument("--sample", type=int, default=100)
    ap.add_argument("--big-L", type=int, default=150000)
    ap.add_argument("--mv-L", type=int, default=4000, help="multivariate case: rows")
    ap.add_argument("--mv-E", type=int, default=2, help="multivariate case: lags per column")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-per-e", dest="per_e", action="store_false",
                    help="skip the per-E pipeline reference in sweep/edim")
    ap.add_argument("--no-kedm", action="store_true")
    ap.add_argument("--no-pyedm", action="store_true")
    ap.add_argument("--pyedm-max-L", type=int, default=20000, help="skip pyEDM above this L")
    args = ap.parse_args()
    import pyedmcl  # noqa: F401  (configures clkernels: PYEDMCL_* variables)
    from clkernels import get_backend
    be = get_backend(args.device)
    print(f"device: {be.info.name} [{be.info.runtime}], {be.info.compute_units} CUs; data {args.data}")
    for c in args.case.split(","):
        {"sweep": case_sweep, "edim": case_edim, "ccm": case_ccm, "gpu": case_gpu,
         "multivariate": case_multivariate}[c.strip()](args, be)


if __name__ == "__main__":
    main()
