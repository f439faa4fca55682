"""FastCCM (PyTorch) vs pyedmcl on FastCCM's own benchmark shapes, one process, same data.

FastCCM (https://github.com/pao-unit/FastCCM, MIT, ``pip install fastccm``) computes
pairwise CCM (Simplex) and pairwise S-map matrices with PyTorch. Its README times the
shapes below; this script times both libraries on them, warm (pyedmcl's programs built
and FastCCM's CUDA context/allocator primed by one untimed call each), best and median
of ``--repeat`` interleaved runs, and prints the ratio FastCCM / pyedmcl (> 1: pyedmcl
faster), the max |rho| difference between the two over the whole shape and, on a small
side problem, which of the two is closer to float64 pyEDM.

Shapes (``--shapes``, comma separated; the numbers may be changed, e.g. ``m10x10_T500``):

* ``mNxN_TT`` (README "CCM matrices": 100x100 T=1000, 200x200 T=1000, 800x800 T=500,
  100x100 T=8000; E=5): N series; every series cross-maps every series.
  pyedmcl ``pe.xmap(X, E=5, Tp=0)`` (simplex) / ``pe.xmap(..., method="smap",
  theta, exclusion_radius=5)``; FastCCM ``score_matrix(X_emb=[N embeddings],
  Y_emb=[N series], tp=0)``, its ``[0].T`` is pyedmcl's ``rho[library, target]``.
* ``flatSx1_TT`` (README "flat arrays", 20000 sources x 1 target, T=1000 and 2000;
  Simplex, E=5): S library series each cross-map one target.
* ``flat1xS_TT`` (1 source x 20000 targets, T=1000; Simplex, E=5, exclusion 5): one
  library series cross-maps S targets: ``pe.simplex(x, target=(S, n) array, E=5, Tp=0,
  exclusion_radius=5)`` (one k-NN table serves every target). With
  ``--targets-return-device`` the predictions stay on the device (``return_device=True``:
  rho read back, as FastCCM returns only rho) instead of 2 x S x T float64 values on the
  host.
* ``single_TT`` (README "single time series", T=2,000 .. 128,000; E=20, tp=1,
  exclusion 10): ``pe.simplex`` / ``pe.smap(x, E=20, Tp=1, exclusion_radius=10,
  theta)`` vs ``score_matrix(X_emb=[embedding], Y_emb=[series], tp=1)``.

Semantics (read from fastccm/ccm.py 0.4.2) and how they map onto pyEDM / pyedmcl:

* Embedding: FastCCM takes embeddings; they are built here with its own
  ``fastccm.utils.get_td_embedding_np(x[:, None], E, 1)``: row j = (x[j] .. x[j+E-1]),
  the state at time t = j + E - 1 with lags into the past: pyEDM ``tau=-1``, pyedmcl
  ``tau=1`` (coordinate order does not change distances or S-map predictions). Inputs
  of unequal length are end-aligned (last rows match), so the series (Y_emb, length n)
  and the embedding (n - E + 1 rows) line up at t; the README's "T" is the embedding's
  rows, so the matrix and flat shapes use series of T + E - 1 values (T rows for both
  libraries); ``single_TT`` uses series of T values, as FastCCM's script does.
* Library and queries: ``library_size=None, sample_size=None`` (FastCCM's benchmarks):
  every usable row is both library and query (a permutation of all rows, so no
  sampling); with ``tp`` the rows whose target t + tp exists. That is pyEDM's
  ``lib = pred = whole series`` (leave-one-out), CCM at full library size.
* ``tp`` = pyEDM ``Tp`` (prediction of Y[t + tp] from X's state at t).
* ``exclusion_window=r``: library rows with |t_lib - t_query| <= r are left out (r = 0
  leaves the query itself out) = pyEDM ``exclusionRadius=r`` with lib = pred.
  pyedmcl's simplex cross map (``pe.xmap`` method "simplex", CCM's) has no exclusion
  radius beyond the query itself, so the simplex matrix and ``flatSx1`` shapes run
  FastCCM with ``exclusion_window=0`` (the README used 5; the cost of the mask is small
  next to the k-NN). S-map matrices, ``flat1xS`` and ``single`` use the README's radius.
* Simplex: ``nbrs_num`` default E_x + 1 (pyEDM knn = E + 1), weights
  ``exp(-d / max(d_min, float32 eps))`` (pyEDM floors d_min at 1e-6; no difference for
  these continuous data), rho = Pearson over all query rows.
* S-map: weights ``exp(-theta d / dbar)`` squared in the normal equations (pyEDM's
  weighted lstsq), ``theta`` default 1.0 (the README's runs used the default: ``--theta``
  here, default 1.0), ridge 0. Difference: FastCCM's ``dbar`` is the mean distance to
  *every* library row, the excluded ones (the query's own row at d = 0 and its
  exclusion window) included, while pyEDM and pyedmcl average over the rows actually in
  the library; the effective theta differs by ~(2r+1)/L, which shows in rho at the
  1e-3 level (the pyEDM check below measures it). A float64 S-map with FastCCM's dbar
  reproduces its rho to ~1e-7 (one pair, 200 rows, E=5, r=5, theta=1: 0.672605 vs
  pyEDM's convention 0.671806), so the gap is this convention, not float32.
* Precision: both float32 inputs; FastCCM computes distances by the matmul expansion
  ||q||^2 - 2 q.p + ||p||^2 in float32 and solves S-map by ``torch.linalg.solve`` in
  float32; pyedmcl as documented (float32 distances, float64 accumulation where the
  device has fp64, rows checked and redone).

``flatSx1`` in pyedmcl: the public API has no call for "each of S library series
cross-maps one common target": ``pe.xmap`` maps all (S+1)^2 pairs (S+1 times the
work), a loop of ``pe.simplex`` pays one call per source. The xmap engine does it
efficiently (one batched k-NN table per library, one target lookup): it is used here
through its internals (:class:`pyedmcl.xmap.engine.XmapEngine` with the E-group's
target list cut to the one target) and marked "engine (internal)" in the output.

Data (``--data``): ``noise`` (default; FastCCM's benchmarks time i.i.d. standard normal
inputs, rho ~ 0) or ``osc`` (bench_xmap.py's coupled noisy oscillators). The pyEDM check
always uses ``osc`` (skill spread over (0, 1)). pyedmcl's S-map time depends on the
conditioning of the local fits (rows failing its checks are solved on the host).

Timing: FastCCM's ``score_matrix`` from NumPy embeddings (host->device copy included;
``torch.cuda.synchronize`` before the clock stops), ``memory_budget_gb`` as the README
(``--memory-budget-gb``, default 16), ``batch_size="auto"``; pyedmcl from the NumPy
panel (upload included). Neither's data generation or embedding is timed.

On the GPU machine (no package index there). Wheels to carry beyond numpy, scipy,
pandas and torch (a CUDA build; with its ``nvidia-*``/``triton`` wheels if they are not
there yet): ``fastccm-0.4.2-py3-none-any.whl``, installed with ``pip install --no-deps``
(its metadata also asks for matplotlib, which this script never imports), and what it
imports here: ``scikit_learn`` (``fastccm.utils`` imports sklearn's PCA) with ``joblib``
and ``threadpoolctl``; ``tqdm`` (optional: progress bars). pyEDM (pure Python) only for
the float64 check, which is skipped with a message when absent::

    python bench/bench_fastccm.py --device nvidia --fastccm-device cuda \\
        --shapes m100x100_T1000,m200x200_T1000,m800x800_T500,m100x100_T8000 --repeat 5
    python bench/bench_fastccm.py --device nvidia --fastccm-device cuda \\
        --shapes flat20000x1_T1000,flat20000x1_T2000,flat1x20000_T1000 --repeat 5
    python bench/bench_fastccm.py --device nvidia --fastccm-device cuda \\
        --shapes single_T2000,single_T8000,single_T32000,single_T128000 --repeat 5

CPU smoke run (small shapes; torch CPU, Intel's OpenCL runtime)::

    python bench/bench_fastccm.py --device intel --fastccm-device cpu \\
        --shapes m10x10_T500,flat200x1_T500,flat1x200_T500,single_T2000 --repeat 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEFAULT_SHAPES = ("m100x100_T1000,m200x200_T1000,m800x800_T500,m100x100_T8000,"
                  "flat20000x1_T1000,flat20000x1_T2000,flat1x20000_T1000,"
                  "single_T2000,single_T8000,single_T32000,single_T128000")
E_MATRIX, R_MATRIX = 5, 5  # README: E=5, exclusion_window=5 (matrices, flat arrays)
E_SINGLE, R_SINGLE, TP_SINGLE = 20, 10, 1  # README: E=20, exclusion 10; its script tp=1


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # "matrix", "sources", "targets", "single"
    n_src: int
    n_tgt: int
    T: int


def parse_shape(name: str) -> Shape:
    """``mNxN_TT`` | ``flatSx1_TT`` | ``flat1xS_TT`` | ``single_TT``; ValueError otherwise."""
    m = re.fullmatch(r"m(\d+)x(\d+)_T(\d+)", name)
    if m:
        a, b, T = map(int, m.groups())
        if a != b:
            raise ValueError(f"shape {name!r}: matrix shapes are square (mNxN_TT)")
        return Shape(name, "matrix", a, a, T)
    m = re.fullmatch(r"flat(\d+)x(\d+)_T(\d+)", name)
    if m:
        a, b, T = map(int, m.groups())
        if b == 1:
            return Shape(name, "sources", a, 1, T)
        if a == 1:
            return Shape(name, "targets", 1, b, T)
        raise ValueError(f"shape {name!r}: flat shapes are flatSx1_TT or flat1xS_TT")
    m = re.fullmatch(r"single_T(\d+)", name)
    if m:
        return Shape(name, "single", 1, 1, int(m.group(1)))
    raise ValueError(f"shape {name!r}: expected mNxN_TT, flatSx1_TT, flat1xS_TT or single_TT")


def noise(N: int, n: int, seed: int = 0) -> np.ndarray:
    """(n, N) float32 i.i.d. standard normal: FastCCM's benchmark data."""
    return np.random.default_rng(seed).standard_normal((n, N), dtype=np.float32)


def panel(N: int, n: int, seed: int = 0) -> np.ndarray:
    """(n, N) float32: noisy oscillators with random periods, weakly coupled in a ring
    (bench_xmap.py's data: cross-map skill spread over (0, 1), no ties)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    base = np.sin(t[:, None] * rng.uniform(0.05, 0.6, N)[None, :] + rng.uniform(0, 6, N))
    drive = np.roll(base, 1, axis=1) * rng.uniform(0, 0.5, N)[None, :]
    return (base + drive + 0.2 * rng.standard_normal((n, N))).astype(np.float32)


def embeddings(X: np.ndarray, E: int) -> list[np.ndarray]:
    """FastCCM's inputs: each column's delay embedding, (n - E + 1, E) float32."""
    from fastccm.utils import get_td_embedding_np

    return [np.ascontiguousarray(get_td_embedding_np(X[:, i:i + 1], E, 1)[:, :, 0])
            for i in range(X.shape[1])]


def columns(X: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(X[:, i:i + 1]) for i in range(X.shape[1])]


# -- FastCCM ---------------------------------------------------------------------------------
def fastccm_runner(args) -> Callable[..., np.ndarray]:
    import torch
    from fastccm import PairwiseCCM

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    ccm = PairwiseCCM(device=args.fastccm_device, dtype="float32",
                      memory_budget_gb=args.memory_budget_gb, verbose=0)

    def run(x_emb, y_emb, *, tp: int, R: int, method: str) -> np.ndarray:
        """(n_Y, n_X) rho: source i (column) cross-maps target j (row)."""
        kw = {"theta": args.theta, "xtwx_precompute": True,
              "xtwy_precompute": len(x_emb) == 1 and len(y_emb) == 1} if method == "smap" \
            else {"target_batch_size": None}
        out = ccm.score_matrix(X_emb=x_emb, Y_emb=y_emb, library_size=None, sample_size=None,
                               exclusion_window=R, tp=tp, method=method, seed=0,
                               batch_size="auto", **kw)
        if args.fastccm_device.startswith("cuda"):
            torch.cuda.synchronize()
        return out[0]
    return run


# -- pyedmcl ---------------------------------------------------------------------------------
def sources_engine(pe_device, X: np.ndarray, E: int):
    """Callable: rho of each of X's first S columns (libraries) cross-mapping its last
    column, through the xmap engine with the target list cut to that column (internal
    API: no public call fits, see the module docstring)."""
    from clkernels import get_backend
    from pyedmcl.xmap.engine import XmapEngine

    be = get_backend(pe_device)
    Xd = X.astype(np.float64)
    Xd = (Xd - Xd.mean(axis=0)) / Xd.std(axis=0)  # as xmap's float32 path: standardised
    series = np.ascontiguousarray(Xd.T, dtype=np.float32)
    N = series.shape[0]

    def run() -> np.ndarray:
        eng = XmapEngine(be, series, None, tau=1, Tp=0, real="float")
        eng.set_E(np.full(N, E))
        eng.groups[0].targets = np.array([N - 1], np.int32)
        return eng.block(0, N - 1)[:, N - 1].copy()
    return run


def pyedmcl_call(shape: Shape, method: str, X: np.ndarray, args) -> Callable[[], np.ndarray]:
    """The pyedmcl call of one shape and method; returns rho shaped as FastCCM's
    ``[0]`` (targets x sources)."""
    import pyedmcl as pe

    dev = args.device
    if shape.kind == "matrix":
        kw = {"method": "smap", "theta": args.theta, "exclusion_radius": R_MATRIX} \
            if method == "smap" else {}
        return lambda: np.asarray(pe.xmap(X, E=E_MATRIX, Tp=0, device=dev, **kw).rho).T
    if shape.kind == "sources":
        run = sources_engine(dev, X, E_MATRIX)
        return lambda: run()[None, :]
    if shape.kind == "targets":
        tg = np.ascontiguousarray(X[:, 1:].T)
        on_dev = bool(getattr(args, "targets_return_device", False))
        return lambda: np.asarray(pe.simplex(X[:, 0], target=tg, E=E_MATRIX, Tp=0,
                                             exclusion_radius=R_MATRIX, device=dev,
                                             return_device=on_dev).rho)[:, None]
    fn = pe.smap if method == "smap" else pe.simplex
    kw = {"theta": args.theta} if method == "smap" else {}
    return lambda: np.atleast_2d(np.asarray(
        fn(X[:, 0], E=E_SINGLE, Tp=TP_SINGLE, exclusion_radius=R_SINGLE, device=dev, **kw).rho))


def fastccm_call(shape: Shape, method: str, X: np.ndarray, run) -> Callable[[], np.ndarray]:
    if shape.kind == "single":
        xe, ye = embeddings(X, E_SINGLE), columns(X)
        return lambda: run(xe, ye, tp=TP_SINGLE, R=R_SINGLE, method=method)
    emb = embeddings(X, E_MATRIX)
    cols = columns(X)
    if shape.kind == "matrix":
        R = R_MATRIX if method == "smap" else 0  # pe.xmap's simplex: the query only
        return lambda: run(emb, cols, tp=0, R=R, method=method)
    if shape.kind == "sources":
        return lambda: run(emb[:-1], cols[-1:], tp=0, R=0, method=method)
    return lambda: run(emb[:1], cols[1:], tp=0, R=R_MATRIX, method=method)


def shape_data(shape: Shape, data: str = "noise") -> np.ndarray:
    gen = noise if data == "noise" else panel
    if shape.kind == "single":
        return gen(1, shape.T, seed=1)
    N = shape.n_src + shape.n_tgt if shape.kind != "matrix" else shape.n_src
    return gen(N, shape.T + E_MATRIX - 1)  # T embedding rows


def timed(fn: Callable[[], np.ndarray]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_shape(shape: Shape, method: str, args, fc_run) -> dict:
    X = shape_data(shape, args.data)
    pe_fn = pyedmcl_call(shape, method, X, args)
    fc_fn = fastccm_call(shape, method, X, fc_run)
    rho_pe, rho_fc = pe_fn(), fc_fn()  # warm: programs built, allocator/context primed
    if rho_pe.shape != rho_fc.shape:
        raise RuntimeError(f"{shape.name}: rho shapes differ: {rho_pe.shape} vs {rho_fc.shape}")
    t_pe, t_fc = [], []
    for _ in range(args.repeat):  # interleaved
        t_fc.append(timed(fc_fn))
        t_pe.append(timed(pe_fn))
    diff = float(np.nanmax(np.abs(rho_pe.astype(np.float64) - rho_fc)))
    return {"shape": shape.name, "method": method, "pe": t_pe, "fc": t_fc, "diff": diff,
            "path": ("engine (internal)" if shape.kind == "sources" else
                     "xmap" if shape.kind == "matrix" else
                     ("simplex(2-D, on dev)" if getattr(args, "targets_return_device", False)
                      else "simplex(target 2-D)") if shape.kind == "targets" else method)}


def report_line(r: dict) -> str:
    pe_b, pe_m = min(r["pe"]), statistics.median(r["pe"])
    fc_b, fc_m = min(r["fc"]), statistics.median(r["fc"])
    return (f"{r['shape']:<20} {r['method']:<8} {r['path']:<20} {fc_b:9.4f} {fc_m:9.4f} "
            f"{pe_b:9.4f} {pe_m:9.4f} {fc_b / pe_b:8.2f}x {fc_m / pe_m:8.2f}x {r['diff']:10.2e}")


# -- float64 pyEDM check ---------------------------------------------------------------------
def pyedm_rho(X: np.ndarray, i: int, j: int, *, E: int, Tp: int, R: int, method: str,
              theta: float, ccm: bool) -> float:
    """pyEDM float64 rho of column i's embedding predicting column j."""
    import pandas as pd
    import pyEDM

    n = X.shape[0]
    df = pd.DataFrame({"Time": np.arange(1, n + 1), "a": X[:, i].astype(np.float64),
                       "b": X[:, j].astype(np.float64)})
    tgt = "a" if i == j else "b"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if ccm:  # CCM at full library size: what pe.xmap's simplex is
            o = pyEDM.CCM(dataFrame=df, columns="a", target=tgt, E=E, tau=-1, Tp=0,
                          libSizes=[n - E + 1], sample=1, parallel=False)
            return float(o[f"a:{tgt}"].iloc[0])
        kw = dict(dataFrame=df, columns="a", target=tgt, lib=[1, n], pred=[1, n], E=E, tau=-1,
                  Tp=Tp, exclusionRadius=R)
        out = (pyEDM.SMap(theta=theta, **kw)["predictions"] if method == "smap"
               else pyEDM.Simplex(**kw))
    p, o = out["Predictions"].to_numpy(float), out["Observations"].to_numpy(float)
    ok = np.isfinite(p) & np.isfinite(o)
    return float(np.corrcoef(p[ok], o[ok])[0, 1])


def oracle_check(kinds: set, methods: list[str], args, fc_run) -> list[str]:
    """Small problems (``--oracle-T`` rows, ``--oracle-pairs`` pairs): max |rho - pyEDM|
    of FastCCM and of pyedmcl for each shape kind and method timed."""
    try:
        import pyEDM  # noqa: F401
    except ImportError:
        return ["pyEDM check skipped: pyEDM is not installed here"]
    lines = []
    T = args.oracle_T
    for kind in sorted(kinds):
        for method in methods:
            if kind in ("sources", "targets") and method != "simplex":
                continue
            npair = args.oracle_pairs
            shape = Shape("oracle", kind, npair if kind != "targets" else 1,
                          npair if kind == "targets" else 1, T)
            if kind == "matrix":
                shape = Shape("oracle", kind, npair, npair, T)
            X = shape_data(shape, "osc")  # skill spread over (0, 1)
            rho_pe = pyedmcl_call(shape, method, X, args)()
            rho_fc = fastccm_call(shape, method, X, fc_run)()
            ref = np.full(rho_pe.shape, np.nan)
            for jt in range(ref.shape[0]):
                for isrc in range(ref.shape[1]):
                    if kind == "matrix":
                        i, j = isrc, jt
                        kw = dict(E=E_MATRIX, Tp=0, R=R_MATRIX, ccm=method == "simplex")
                    elif kind == "sources":
                        i, j = isrc, X.shape[1] - 1
                        kw = dict(E=E_MATRIX, Tp=0, R=0, ccm=True)
                    elif kind == "targets":
                        i, j = 0, jt + 1
                        kw = dict(E=E_MATRIX, Tp=0, R=R_MATRIX, ccm=False)
                    else:
                        i, j = 0, 0
                        kw = dict(E=E_SINGLE, Tp=TP_SINGLE, R=R_SINGLE, ccm=False)
                    ref[jt, isrc] = pyedm_rho(X, i, j, method=method, theta=args.theta, **kw)
            d_fc = float(np.nanmax(np.abs(rho_fc - ref)))
            d_pe = float(np.nanmax(np.abs(rho_pe - ref)))
            closer = "pyedmcl" if d_pe < d_fc else "FastCCM" if d_fc < d_pe else "tie"
            lines.append(f"  {kind:<8} {method:<8} pairs={ref.size:<3} T={T:<6} "
                         f"max|FastCCM-pyEDM|={d_fc:.2e}  max|pyedmcl-pyEDM|={d_pe:.2e}  "
                         f"closer: {closer}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="pyedmcl device selector (nvidia, intel, ...)")
    ap.add_argument("--fastccm-device", default=None,
                    help="torch device for FastCCM: cuda, cuda:0, cpu (default: cuda if "
                         "available, else cpu)")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--methods", default="simplex,smap",
                    help="simplex, smap or both (flat shapes: simplex only, as the README)")
    ap.add_argument("--theta", type=float, default=1.0, help="S-map theta (FastCCM's default)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-budget-gb", type=float, default=16.0)
    ap.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    ap.add_argument("--oracle-T", type=int, default=300)
    ap.add_argument("--oracle-pairs", type=int, default=3)
    ap.add_argument("--no-oracle", action="store_true")
    ap.add_argument("--targets-return-device", action="store_true",
                    help="flat1xS: pe.simplex(..., return_device=True), rho read back only")
    ap.add_argument("--data", choices=("noise", "osc"), default="noise",
                    help="timed shapes' data: noise (FastCCM's benchmarks: i.i.d. normal) or "
                         "osc (coupled noisy oscillators)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    shapes = [parse_shape(s.strip()) for s in args.shapes.split(",") if s.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in ("simplex", "smap") for m in methods):
        ap.error("--methods: simplex, smap or simplex,smap")

    import torch

    if args.fastccm_device is None:
        args.fastccm_device = "cuda" if torch.cuda.is_available() else "cpu"
    import fastccm

    import pyedmcl as pe  # before any clkernels submodule: pyedmcl configures it

    info = pe.select_device(args.device)
    print(f"pyedmcl device: {info.name} ({info.runtime}); FastCCM {fastccm.__version__} on "
          f"torch {torch.__version__} device {args.fastccm_device}"
          + (f" ({torch.cuda.get_device_name()})" if args.fastccm_device.startswith("cuda")
             else f" ({torch.get_num_threads()} threads)"))
    print(f"data={args.data} theta={args.theta} repeat={args.repeat} memory_budget_gb={args.memory_budget_gb}")
    fc_run = fastccm_runner(args)
    print(f"{'shape':<20} {'method':<8} {'pyedmcl path':<20} {'FC best':>9} {'FC med':>9} "
          f"{'pe best':>9} {'pe med':>9} {'FC/pe b':>9} {'FC/pe m':>9} {'max|drho|':>10}")
    for shape in shapes:
        for method in methods:
            if shape.kind in ("sources", "targets") and method != "simplex":
                continue
            print(report_line(bench_shape(shape, method, args, fc_run)), flush=True)
    if not args.no_oracle:
        print("float64 pyEDM check (small problems; which float32 result is closer):")
        for line in oracle_check({s.kind for s in shapes}, methods, args, fc_run):
            print(line, flush=True)


if __name__ == "__main__":
    main()
