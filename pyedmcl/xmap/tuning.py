"""Tunable kernel families of the all-to-all map (``pyedmcl tune xmap_knn`` / ``xmap_skill``).

* ``xmap_knn``: the EDM k-NN kernel (``templates/knn.cl.mako``) batched over
  library series (one launch builds the tables of many series): the same space
  as the ``knn`` family (VARIANT, WG, TILE, ...), tuned separately because the
  batched problem (many small tables) favours other settings than one large table.
* ``xmap_scan``: the fused multi-E scan (``templates/knn_scan.cl.mako``) batched
  over library series (mixed E: every E-group's tables in one pass): the
  ``knn_scan`` space, tuned on a batch of series (a batch fills a GPU without
  cutting the library: SPLIT 1 is the heuristic there).
* ``xmap_skill``: the fused many-target lookup + rho (``templates/xmap_lookup.cl.mako``):
  TJ, the targets sharing one read of a table row, and VEC (those targets as
  the lanes of explicit vectors: CPUs) or PF (the query loop software-pipelined:
  GPUs), or LANES (targets as work-items, LWG per work-group: coalesced reads);
  LB, the libraries of one work-group (the same targets: on GPUs the work-groups
  resident on one SM then gather from fewer target series, which stay in its L1).
  The reduction's work-group size WG is not tuned: it fixes the reduction order,
  which keeps rho bit-identical to :func:`pyedmcl.ccm` (LANES evaluates the same
  tree per work-item).

Every candidate gives the same output bit for bit (the tuner checks it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace

from ..edm.knn import KNN, KnnKernel
from ..edm.lookup import ccm_skill_wg
from ..edm.scan_fused import KNN_SCAN, KnnScanKernel, batch_inputs


def _k_bucket(k: int) -> str:
    return next((f"K{hi}" for hi in (2, 4, 8, 16, 32) if k <= hi), "K64")


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:  # the old batched kernel's tuned choice on the H200 (rows, EA 0)
        return {"VARIANT": "rows", "WG": 16, "TILE": 256, "QB": 1, "EA": 0, "INS": "reg",
                "FLAG": 1, "SPLIT": 1, "QQ": 1, "CB": 0}
    # CPUs: explicit float16 vectors over library points (PoCL 3.0 does not vectorise
    # the cols variant's work-item loop here; measured 2.5x faster on 2-core PoCL)
    return {"VARIANT": "vec", "WG": 32, "TILE": 512, "QB": 16, "EA": 0, "INS": "reg", "FLAG": 1,
            "SPLIT": 1, "QQ": 1, "CB": 0}


class XmapKnnKernel(KnnKernel):
    """k-NN tables of a batch of library series (``knn.cl.mako``, series batching)."""

    name = "xmap_knn"
    space = TuningSpace(params=KNN.space.params, heuristic=_heuristic,
                        constraint=KNN.space.constraint)

    def default_specs(self):
        return [{"E": E, "TAU": 1, "K": E + 1, "METRIC": "euclidean", "REAL": "float"}
                for E in (2, 3, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _KnnCase(backend, spec, size)


class _KnnCase(TuningCase):
    nb = 4

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec, self.M = be, {"METRIC": "euclidean", **spec}, size
        n = size + (spec["E"] - 1) * spec["TAU"]
        self.n = n
        rng = np.random.default_rng(5)
        self.x = be.to_device(rng.standard_normal(self.nb * n).astype(np.float32))
        self.pts = be.to_device(np.arange(size, dtype=np.int32))
        self.idx = be.empty((self.nb * size * spec["K"],), np.int32)
        self.dist = be.empty((self.nb * size * spec["K"],), np.float32)

    def run(self, params: Params) -> list[Any]:
        return [KNN.launch(self.be, params, self.spec, self.x, self.pts, self.M, self.pts, self.M,
                           self.nb, 0, self.idx, self.dist, series_stride=self.n)]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.idx)


def _scan_heuristic(info: DeviceInfo) -> Params:
    return dict(KNN_SCAN.space.heuristic(info), SPLIT=1)


class XmapScanKernel(KnnScanKernel):
    """Fused multi-E k-NN tables of a batch of library series (``knn_scan.cl.mako``)."""

    name = "xmap_scan"
    space = TuningSpace(params=KNN_SCAN.space.params, heuristic=_scan_heuristic,
                        constraint=KNN_SCAN.space.constraint)

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def params_for(self, be: Backend, spec: dict[str, Any], nq: int, nl: int) -> Params:
        """Tuned parameters fitted to local memory; never an automatic SPLIT (the
        batch of series fills the device)."""
        return self.fitted_params(be, spec, max(nq, nl))

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _ScanBatchCase(backend, self._norm(spec), size)


def _mixed_series(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """``(m, n)`` float32 tuning data: the first half random walks, the rest noisy
    oscillators. The cross map's kernels run at data-dependent speeds (smooth series:
    coalesced target gathers, tight k-NN thresholds early; noisy ones: neither), so
    their tuning cases hold both kinds."""
    walks = np.cumsum(rng.standard_normal((m - m // 2, n)), axis=1)
    t = np.arange(n)[None, :]
    osc = (np.sin(t * rng.uniform(0.05, 0.6, (m // 2, 1)) + rng.uniform(0, 6, (m // 2, 1)))
           + 0.2 * rng.standard_normal((m // 2, n)))
    return np.concatenate([walks, osc]).astype(np.float32)


class _ScanBatchCase(TuningCase):
    """``nb`` series of ``size`` rows, leave-one-out over all rows (the map's CCM), as
    many as the map's scan batches hold (GPUs: up to 64, as the engine's batches; the
    case held 16, few enough libraries that splitting each scan could pay, while with
    the real 64 SPLIT=1 was 1.3-3x faster on the H100), half random walks, half noisy
    oscillators (:func:`_mixed_series`; the tile order gains on the first, not on
    the second)."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        from ..edm.scan_fused import _ks
        from .engine import scan_table_budget
        self.be, self.spec = be, dict(spec, KNN=0)
        emax, tau = spec["EMAX"], spec["TAU"]
        self.kmax = max(_ks(emax, 0))
        self.dt = np.float64 if spec.get("REAL") == "double" else np.float32
        # one library's tables (indices + distances), twice for a split scan's partials
        per = 2 * emax * size * self.kmax * (4 + np.dtype(self.dt).itemsize)
        self.nb = int(min(64, max(8, scan_table_budget(be.info) // per))) if be.info.is_gpu else 2
        self.qt = np.arange(size, dtype=np.int64)
        self.qemax = np.minimum(self.qt // tau + 1, emax)
        self.pad = (emax - 1) * tau
        self.x = _mixed_series(np.random.default_rng(8), self.nb, size)
        shape = (self.nb, emax, size, self.kmax)
        self.idx, self.dist = be.empty(shape, np.int32), be.empty(shape, self.dt)
        self._dev: dict = {}

    def _inputs(self, params: Params):
        lanes = KNN_SCAN.padded_lanes(params, self.qt.size)
        if lanes not in self._dev:
            xp, ints, ldx = batch_inputs(self.x, self.qt, self.qemax, self.pad, lanes, self.dt)
            self._dev[lanes] = (self.be.to_device(xp), self.be.to_device(ints), ldx)
        return self._dev[lanes]

    def run(self, params: Params) -> list[Any]:
        xp, ints, ldx = self._inputs(params)
        part = None
        if params["SPLIT"] > 1:
            shape = (self.nb, params["SPLIT"]) + tuple(self.idx.shape[1:])
            part = (self.be.empty(shape, np.int32), self.be.empty(shape, self.dt))
        nq = self.qt.size
        return XMAP_SCAN.launch(self.be, params, self.spec, xp, ints, nq, 0, nq, 0, self.idx,
                                self.dist, part, nseries=self.nb, xstride=ldx)

    def output(self) -> np.ndarray:
        return self.be.to_host(self.dist)


def _skill_heuristic(info: DeviceInfo) -> Params:
    # explicit vectors over targets where the runtime does not vectorise the
    # work-item loop itself (PoCL: measured 0.40 -> 0.27 s CPU for N=100, L=1000)
    if not info.is_gpu and info.runtime == "pocl":
        return {"TJ": 8, "VEC": 1, "LANES": 0, "LWG": 32, "PF": 0, "LB": 1}
    if info.is_gpu:  # H100, N=5,000 x 3,780, E=5, skill device time, random walks / noisy
        # oscillators: 0.84 / 0.91 s; one library per work-group 0.95 / 2.10 s (the
        # targets of the work-groups on one SM no longer fit its L1); TJ 1 0.94 / 1.02 s
        return {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1, "LB": 2}
    # Intel's CPU runtime vectorises over work-items: targets as work-items,
    # N=200 x 1,000, E=5: 0.34 s vs 0.48 s (TJ 4 queries as work-items)
    return {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 32, "PF": 0, "LB": 1}


def _skill_constraint(p: Params, info: DeviceInfo) -> bool:
    if p["LB"] > 1 and (p["LANES"] or p["VEC"] or not info.is_gpu
                        or ccm_skill_wg(info) * p["LB"] > info.max_work_group_size):
        return False  # libraries per work-group: the scalar layout on GPUs (L1 sharing)
    if p["LANES"]:  # TJ targets per work-item; LWG is the launch size
        return (p["TJ"] <= 4 and not p["VEC"] and not p["PF"]
                and p["LWG"] <= info.max_work_group_size)
    if p["PF"]:  # the pipelined query loop: scalar targets, a register per value in flight
        return not p["VEC"] and p["LWG"] == 32 and p["TJ"] <= 4
    # LWG unused: one value only; vector lanes need more than one target
    return p["LWG"] == 32 and (p["TJ"] > 1 or not p["VEC"])


class XmapSkillKernel(TunableKernel):
    """Fused lookup + rho for TJ targets per work-group."""

    name = "xmap_skill"
    template = "xmap_lookup.cl.mako"
    space = TuningSpace(params={"TJ": (1, 2, 4, 8, 16), "VEC": (0, 1), "LANES": (0, 1),
                                "LWG": (32, 64, 128, 256), "PF": (0, 1), "LB": (1, 2, 4)},
                        heuristic=_skill_heuristic, constraint=_skill_constraint)

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        return f"{spec.get('REAL', 'float')}-{spec.get('ACC', 'double')}-{_k_bucket(spec['K'])}"

    def default_specs(self):
        return [{"K": K, "REAL": "float", "WEIGHT": "ccm"} for K in (3, 6, 11, 21)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _SkillCase(backend, spec, size)


class _SkillCase(TuningCase):
    """Libraries x targets as in a row block: real k-NN tables, half of random walks and
    half of noisy oscillators. How well the target gathers coalesce depends on the data:
    in a smooth series a neighbour's time is near the neighbours of the next query, in
    a noisy one it is not (on the H100 the scalar layout took 1.4 s on walks and 3.2 s
    on noisy oscillators, N=5,000 x 3,780), and uniform random indices made the
    target-lane layout win here and lose 10-70% on real maps; so the case has both kinds.
    On GPUs thousands of work-groups even at TJ = 16, else the case under-fills the device."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        from .engine import skill_geometry, skill_wg
        self.geometry = skill_geometry
        self.nb, self.ntg = (64, 2048) if be.info.is_gpu else (4, 64)
        self.be, self.spec, self.nq = be, dict(spec), size
        self.acc = "double" if be.info.fp64 else "float"
        adt = np.float64 if be.info.fp64 else np.float32
        self.wg = skill_wg(be)
        K = spec["K"]
        E = max(1, K - 1)
        rng = np.random.default_rng(6)
        n = size + E
        self.n = n

        y = _mixed_series(rng, self.ntg, n)
        self.y = be.to_device(y)
        self.y_lanes = be.to_device(np.ascontiguousarray(y.T))
        kspec = {"E": E, "TAU": 1, "K": K, "METRIC": "euclidean", "REAL": "float"}
        pts = be.to_device(np.arange(size, dtype=np.int32))
        idx = be.empty((self.nb, size, K), np.int32)
        dist = be.empty((self.nb, size, K), np.float32)
        KNN.launch(be, KNN.space.default(be.info), kspec, be.to_device(_mixed_series(rng, self.nb, n).ravel()),
                   pts, size, pts, size, self.nb, 0, idx, dist, series_stride=n)
        d = be.to_host(dist).astype(adt)
        w = np.exp(-d / np.maximum(d[..., :1], 1e-6))
        # packed layout: k-major per library (pack's)
        self.tidx = be.to_device(np.ascontiguousarray(be.to_host(idx).transpose(0, 2, 1)))
        self.tw = be.to_device(np.ascontiguousarray(w.transpose(0, 2, 1)))
        self.tden = be.to_device(w.sum(-1))
        self.tgt = be.to_device(np.arange(self.ntg, dtype=np.int32))
        self.obs = be.to_device(np.arange(size, dtype=np.int32) + E - 1)
        self.out = be.empty((self.nb * self.ntg,), np.float32)

    def run(self, params: Params) -> list[Any]:
        p = {"K": self.spec["K"], "REAL": "float", "ACC": self.acc, "WG": self.wg,
             "WEIGHT": self.spec.get("WEIGHT", "ccm"), **params}
        k = self.be.kernel(XMAP_SKILL.template, p, "xmap_skill")
        gsize, lsize = self.geometry(params, self.ntg, self.nb, self.wg)
        y, ldy = (self.y_lanes, self.ntg) if params["LANES"] else (self.y, self.n)
        return [self.be.launch(k, gsize, lsize, self.tidx, self.tw, self.tden,
                               np.int32(self.nq), y, np.int32(ldy), np.int32(0), self.tgt,
                               self.tgt, np.int32(self.ntg), self.obs, self.out,
                               np.int32(self.ntg), np.int32(0), np.int32(0),
                               np.int32(self.nb))]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.out)

    def matches(self, got: np.ndarray, ref: np.ndarray) -> bool:
        return bool(np.array_equal(got, ref, equal_nan=True))


XMAP_KNN = XmapKnnKernel()
XMAP_SCAN = XmapScanKernel()
XMAP_SKILL = XmapSkillKernel()
