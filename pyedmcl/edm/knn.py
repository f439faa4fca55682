"""Exact all-k-NN table by the fused embedding + distance + top-k kernel.

The k-NN table (for each query: k library points and their distances) is the
one structure Simplex, CCM and the scans share (kEDM's lookup table). Memory is
O(queries * k); no distance matrix is ever stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, get_backend, job_fma, run_blocked
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from ..validation import as_series, check_dtype, check_int, check_metric
from .ranges import MAX_KNN, check_tau

#: device arrays held until process exit on Oclgrind only: it can apply a released
#: buffer's "uninitialised" shadow state after a new buffer reuses the address,
#: which would report false errors in later launches. Oclgrind runs are tiny.
_OCLGRIND_HOLD: list = []


def hold(be: Backend, *arrays) -> None:
    """Keep ``arrays`` alive for the process on Oclgrind (see ``_OCLGRIND_HOLD``)."""
    if be.info.runtime == "oclgrind":
        _OCLGRIND_HOLD.extend(arrays)


def with_fma(be: Backend, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with its FMA value: the job's choice if given, else this device's own.

    One-device calls take :func:`clkernels.job_fma` of their device; jobs over several
    devices (the cross map) set FMA in the spec so that every device sums alike.
    """
    if "FMA" in spec:
        return spec
    return {**spec, "FMA": int(job_fma([be.info]))}


#: Library tile order of the k-NN kernels (``ORD`` of knn.cl.mako / knn_scan.cl.mako):
#: 1 visits the tiles nearest in time to a work-group's queries first. The result does
#: not depend on it (the top-k of a total order); a spec value, so A/B runs can pass 0.
TILE_ORDER = 1


def launch_spec(be: Backend, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` completed with the caller-side values of the k-NN templates: FMA
    (:func:`with_fma`) and the tile order ORD (:data:`TILE_ORDER` unless given)."""
    return {"ORD": TILE_ORDER, **with_fma(be, spec)}


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        return {"VARIANT": "rows", "WG": 128, "TILE": 256, "QB": 1, "EA": 4, "INS": "reg", "FLAG": 1,
                "SPLIT": 1, "QQ": 1, "CB": 0}
    # CPUs: explicit SIMD vectors over library points (the cols variant's work-item
    # loop is not vectorised by PoCL 3.0 here; vec measured 2.5-3.5x faster than the
    # tuned cols on PoCL and Intel for one table of 8,192 points, E=5)
    return {"VARIANT": "vec", "WG": 32, "TILE": 512, "QB": 16, "EA": 0, "INS": "reg", "FLAG": 1,
            "SPLIT": 1, "QQ": 1, "CB": 0}


def _fits(p: Params, info: DeviceInfo) -> bool:
    if p["WG"] > info.max_work_group_size or p["WG"] > info.max_work_item_sizes[0]:
        return False
    if p["INS"] == "reg" and not p["FLAG"]:
        return False
    if p["INS"] == "mask" and (p["FLAG"] or p["VARIANT"] != "cols" or p["TILE"] > 32):
        return False  # mask: one candidate bit per lane of a tile in a 32-bit word
    if p.get("SPLIT", 1) > 1 and (p["VARIANT"] == "cols" or p["WG"] % p["SPLIT"]):
        return False
    if p["VARIANT"] == "vec" and p.get("SPLIT", 1) > 1 and (p.get("QQ", 1) > 1 or p["SPLIT"] > 8):
        return False  # vec splits a query over at most 8 work-items, one query each
    if (p.get("QQ", 1) > 1 or p.get("CB", 0)) and p["VARIANT"] != "vec":
        return False  # queries per work-item, candidate buffers: vec-variant options
    if p["VARIANT"] == "vec":
        # QB = library points per explicit SIMD vector; QQ queries per work-item
        return (p["QB"] in (4, 8, 16) and p["TILE"] % p["QB"] == 0 and p["EA"] == 0
                and p["INS"] == "reg" and p["FLAG"] == 1
                and (p["TILE"] * 4 * 33 + p.get("CB", 0) * p["WG"] * 8 * p.get("QQ", 1)
                     + (p["WG"] * 32 * 8 if p.get("SPLIT", 1) > 1 else 0)  # merge lists, K <= 32
                     <= info.local_mem_bytes))
    if p["VARIANT"] == "rows":
        return (p["QB"] == 1 and p["INS"] == "reg" and p["FLAG"] == 1
                and p["TILE"] * 4 * 33 <= info.local_mem_bytes)
    # cols: TILE is a multiple of WG (R = TILE / WG points per work-item), QB <= WG
    return (p["TILE"] % p["WG"] == 0 and p["TILE"] // p["WG"] <= 4 and 1 < p["QB"] <= min(p["WG"], 32)
            and p["QB"] * p["TILE"] * 4 <= info.local_mem_bytes // 2)


def _k_bucket(k: int) -> str:
    for hi in (2, 4, 8, 16, 32, 64):
        if k <= hi:
            return f"K{hi}"
    return "K64+"


class KnnKernel(TunableKernel):
    """Tunable family ``knn``: work-group size WG and library tile TILE."""

    name = "knn"
    template = "knn.cl.mako"
    space = TuningSpace(
        params={"VARIANT": ("rows", "cols", "vec"), "WG": (8, 16, 32, 64, 128, 256),
                "TILE": (16, 32, 64, 128, 256, 512), "QB": (1, 4, 8, 16), "EA": (0, 2, 4, 8),
                "INS": ("reg", "local", "mask"), "FLAG": (0, 1), "SPLIT": (1, 2, 4, 8, 16, 32),
                "QQ": (1, 2), "CB": (0, 4, 8)},
        heuristic=_heuristic,
        constraint=_fits,
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        from ..kernels.distance import e_bucket
        return f"{spec.get('REAL', 'float')}-{e_bucket(spec['E'])}-{_k_bucket(spec['K'])}"

    def default_specs(self):
        return [{"E": E, "TAU": 1, "K": E + 1, "METRIC": "euclidean", "REAL": "float"}
                for E in (2, 3, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [2048]
        return [8192, 32768] if info.is_gpu else [4096]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _KnnCase(backend, spec, size)

    def params_for(self, be: Backend, spec: dict[str, Any], size: int,
                   nq_total: int | None = None) -> Params:
        p = lookup(self, be.info, self.spec_bucket(spec), self.size_bucket(size)).params
        p = {"SPLIT": 1, "QQ": 1, "CB": 0, **p}
        item = 8 if spec["REAL"] == "double" else 4
        # rows only: the vec variant's SPLIT is tuned (splitting there admits more
        # candidates in all: 7-10 ms instead of 4.8 ms at L=32,768, E=20 on the H100)
        split_max = 32 if p["VARIANT"] == "rows" else 1
        if be.info.is_gpu and p["SPLIT"] == 1 and nq_total is not None:
            # few queries: split each query's library scan so the GPU fills up
            want = be.info.compute_units * 1024
            while (p["SPLIT"] < split_max and nq_total * p["SPLIT"] < want
                   and p["WG"] % (2 * p["SPLIT"]) == 0
                   and (p["WG"] * spec["K"] * (item + 4)) <= be.info.local_mem_bytes // 2):
                p = {**p, "SPLIT": 2 * p["SPLIT"]}
        while p["SPLIT"] > 1 and p["WG"] * spec["K"] * (item + 4) > be.info.local_mem_bytes // 2:
            p = {**p, "SPLIT": p["SPLIT"] // 2}  # the partial lists must fit local memory
        # the rows / vec variants' local tile holds E coordinates per point
        while (p["VARIANT"] in ("rows", "vec") and p["TILE"] > max(16, p["QB"])
               and p["TILE"] * (spec["E"] + 1) * item > be.info.local_mem_bytes // 2):
            p = {**p, "TILE": p["TILE"] // 2}
        return p

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], x_dev, q_dev, nq: int,
               l_dev, nl: int, nbatch: int, radius: int, idx_dev, dist_dev, *,
               xoff: int = 0, series_stride: int = 0):
        """Tables of ``nbatch`` batches into ``idx_dev`` / ``dist_dev`` (nbatch, nq, K).

        Batch ``b`` is library list ``b`` of ``l_dev`` (nbatch, nl); or, with
        ``series_stride`` > 0, series ``b`` of ``x_dev``, i.e. the data from
        ``xoff + b * series_stride`` on, all batches sharing the lists ``q_dev`` /
        ``l_dev`` (points and output indices are then the series' own).
        """
        params = {"SPLIT": 1, "QQ": 1, "CB": 0, **params}
        k = be.kernel(self.template, {**launch_spec(be, spec), **params}, "knn")
        if params["VARIANT"] in ("rows", "vec"):
            qw = params["WG"] // params["SPLIT"] * params["QQ"]
            gx = (nq + qw - 1) // qw * params["WG"]
        else:
            gx = (nq + params["QB"] - 1) // params["QB"] * params["WG"]
        lstride = 0 if series_stride else nl
        return be.launch(k, (gx, nbatch), (params["WG"], 1), x_dev, np.int32(xoff),
                         np.int32(series_stride), q_dev, np.int32(nq), l_dev, np.int32(nl),
                         np.int32(lstride), np.int32(radius), idx_dev, dist_dev)


KNN = KnnKernel()


class _KnnCase(TuningCase):
    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec = be, dict(spec)
        span = (spec["E"] - 1) * spec["TAU"]
        dt = np.float64 if spec.get("REAL") == "double" else np.float32
        # a chaotic series (logistic map, as the benchmarks use), not iid noise: how
        # often candidates pass the k-th distance, and so the cost of the top-k,
        # depends on the data
        from ..data import logistic_map
        x = logistic_map(size + span, r=3.9, x0=0.4, burn=0).astype(dt)
        self.n = size
        self.x = be.to_device(x)
        self.pts = be.to_device(np.arange(size, dtype=np.int32))
        self.idx = be.empty((size, spec["K"]), np.int32)
        self.dist = be.empty((size, spec["K"]), dt)

    def run(self, params: Params) -> list[Any]:
        return [KNN.launch(self.be, params, self.spec, self.x, self.pts, self.n, self.pts, self.n,
                           1, 0, self.idx, self.dist)]

    def output(self) -> np.ndarray:
        # distances, not indices: a float32 near-tie may legitimately swap two ranks
        # between configurations that contract multiply-adds differently
        return self.be.to_host(self.dist)


@dataclass
class DeviceKnn:
    """A k-NN table on the device: ``idx`` (int32 kernel points, -1 = none), ``dist``."""

    idx: Any
    dist: Any
    nbatch: int
    nq: int
    k: int
    #: device inputs the enqueued launch reads; kept alive until the table is dropped
    #: (some runtimes, e.g. Oclgrind, free a released buffer before queued work ends)
    keep: tuple = ()


def knn_device(be: Backend, x_dev, n: int, *, E: int, tau: int, k: int, qpts: np.ndarray,
               lpts: np.ndarray, radius: int, metric: str = "euclidean", real: str = "float",
               params: Params | None = None, q_dev=None, l_dev=None) -> DeviceKnn:
    """Launch the fused kernel; ``lpts`` is (nl,) or (nbatch, nl) ascending kernel points.

    ``q_dev`` / ``l_dev``: ``qpts`` / ``lpts`` already on the device (no upload).
    """
    lpts = np.ascontiguousarray(np.atleast_2d(lpts), dtype=np.int32)
    nbatch, nl = lpts.shape
    nq = int(qpts.size)
    spec = {"E": E, "TAU": abs(tau), "K": k, "METRIC": metric, "REAL": real}
    if params is None:
        params = KNN.params_for(be, spec, max(nq, nl), nq_total=nq * nbatch)
    dt = np.float64 if real == "double" else np.float32
    idx = be.empty((nbatch, nq, k), np.int32)
    dist = be.empty((nbatch, nq, k), dt)
    if q_dev is None:
        q_dev = be.to_device(np.ascontiguousarray(qpts, dtype=np.int32))
    if l_dev is None:
        l_dev = be.to_device(lpts)
    KNN.launch(be, params, spec, x_dev, q_dev, nq, l_dev, nl, nbatch, radius, idx, dist)
    hold(be, idx, dist, q_dev, l_dev)
    return DeviceKnn(idx, dist, nbatch, nq, k, keep=(q_dev, l_dev))


def check_points(x: Any, E: Any, tau: Any, lib_points: Any, query_points: Any
                 ) -> tuple[np.ndarray, int, int, np.ndarray, np.ndarray]:
    """Validated series, E, |tau|, sorted unique library points and query points.

    Shared by every k-NN entry point (exact kernel and the other back-ends).
    """
    s = as_series(x, "x")
    E = check_int(E, "E", 1, 512)
    tau = abs(check_tau(tau))
    npts = s.size - (E - 1) * tau
    if npts < 2:
        raise ValueError(f"x has {s.size} values, too short for E={E}, tau={tau}")
    lp = np.arange(npts) if lib_points is None else np.unique(np.asarray(lib_points))
    qp = np.arange(npts) if query_points is None else np.asarray(query_points)
    for name, a in (("lib_points", lp), ("query_points", qp)):
        if a.size == 0 or a.min() < 0 or a.max() >= npts:
            raise ValueError(f"{name} must be non-empty kernel points in [0, {npts - 1}]")
    return s, E, tau, lp, qp


def centre(s: np.ndarray, dt: np.dtype, fp64: bool, what: str) -> tuple[np.ndarray, np.dtype]:
    """A validated series as a k-NN kernel input: float32 centres it (distances in data
    units, independent of the offset; :mod:`pyedmcl._precision`, which may switch the
    call to float64), float64 returns it as given. Returns (series, dtype to run in)."""
    from .._precision import prepare

    prep = prepare([s], dt, fp64, names=["x"], scale=False, what=what)
    return prep.series[0], prep.dtype


def knn_table(x, *, E: int, tau: int = 1, k: int | None = None, lib_points=None,
              query_points=None, exclusion_radius: int = 0, metric: str = "euclidean",
              dtype: Any = np.float32, device: Any = None, backend: str | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """All-k-NN table of the time-delay embedding of ``x`` (kernel point coordinates).

    Point ``j`` is the window ``(x[j], x[j+|tau|], ..., x[j+(E-1)|tau|])`` (the
    vector at time ``j + (E-1)tau`` for past lags). ``lib_points`` /
    ``query_points`` default to every point; library point ``l`` is skipped for
    query ``p`` when ``|p - l| <= exclusion_radius`` (-1: no exclusion). Ties
    are ordered by distance, then ``|p - l|``, then ``l`` (pyEDM's Simplex order).
    Returns ``(indices (nq, k) int32, distances (nq, k))``, -1/inf where fewer than
    ``k`` neighbours are admissible. In float32 ``x`` is centred (in float64) first, so
    neither depends on the data's offset; distances stay in data units.
    """
    be = get_backend(device, backend)
    dt = check_dtype(dtype, be.info)
    metric = check_metric(metric)
    s, E, tau, lp, qp = check_points(x, E, tau, lib_points, query_points)
    k = E + 1 if k is None else check_int(k, "k", 1, MAX_KNN)
    s, dt = centre(s, dt, be.info.fp64, "knn_table")
    real = "double" if dt == np.float64 else "float"
    xd = be.to_device(s.astype(dt))
    hold(be, xd)

    def rows(q0: int, q1: int):  # query blocks when the (queries x k) table does not fit
        t = knn_device(be, xd, s.size, E=E, tau=tau, k=k, qpts=qp[q0:q1], lpts=lp,
                       radius=check_int(exclusion_radius, "exclusion_radius", -1), metric=metric, real=real)
        return be.to_host(t.idx)[0], be.to_host(t.dist)[0]

    blocks = run_blocked(be, rows, qp.size, parameter="the number of query_points or k",
                         what=f"k-NN table ({qp.size} queries x k={k})",
                         nbytes=lambda q: q * k * (4 + dt.itemsize))
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])
