"""The fused embedding-dimension scan family (``knn_scan/knn_scan.cl.mako``).

One pass builds the exact k-NN tables of every E = 1..EMAX (time coordinates, past
lags: the squared distance at E is the one at E-1 plus one coordinate), bit-identical
to the ``knn`` family's per-E tables; see the template's header. This module holds
the specialisation space and its rules, :meth:`KnnScanKernel.params_for`, the kernel's
input layout (:func:`scan_inputs`, :func:`batch_inputs`), the launcher and the
tuning case. Which problems the scan applies to, and the lookup and skill after it,
are the algorithm's (:mod:`pyedmcl.primitives.scan_fused`, :mod:`pyedmcl.xmap`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from .distance import e_bucket
from .knn import launch_spec

TEMPLATE = "knn_scan/knn_scan.cl.mako"
#: candidate bits per (query, library lane) are one 32-bit word
MAX_FUSED_E = 32
#: parameters an entry may omit (tuned before they existed), as they read then
OPTIONAL = {"VEC": 1, "ANY": 0, "LPB": 0, "CQ": 0}


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        # per-(query, E) lists over each query's candidate lanes (CQ) in small tiles: the
        # H100's winners (E 1..10 / 1..20, L 5,000 / 32,768) hold WG 32, SPLIT 1, and
        # TILE 64 but at E 1..10, L 32,768 (TILE 128, 4% faster than this)
        return {"WG": 32, "TILE": 64, "QB": 4, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 1,
                "LPB": 0, "CQ": 1}
    # CPUs: one query per work-item, its lists of every E in private memory (INS "key":
    # faster than local-memory lists, the same tables; decision 0049); LPB 64: one branch
    # per 64 library lanes (decision 0076)
    return {"WG": 32, "TILE": 512, "QB": 32, "SPLIT": 1, "INS": "key", "VEC": 16, "ANY": 0,
            "LPB": 64}


def _local_bytes(p: Params, emax: int, kt: int, item: int) -> int:
    if p["INS"] == "key":  # lists in private memory, the library read from the series
        return 0
    cq = 8 + 2 * p["TILE"] if p.get("CQ", 0) else 0  # candidate counts and lanes
    return p["QB"] * (2 * emax * item + 16 + p["TILE"] * 4 + kt * (item + 4) + cq)


def _fits(p: Params, info: DeviceInfo, emax: int = 20, kt: int = 230, item: int = 4) -> bool:
    """Device limits, and a space pruned to what can win (the tuner times every
    candidate): GPUs one lane per work-item with the candidate words (VEC 1, ANY 1,
    WG >= 32); CPUs explicit vectors (VEC >= 8), a few work-items, no split."""
    vec = p.get("VEC", 1)
    if p["WG"] > info.max_work_group_size or p["WG"] > info.max_work_item_sizes[0]:
        return False
    lpb = p.get("LPB", 0)
    if p.get("CQ", 0) and (p["INS"] != "qe" or not p.get("ANY", 0)):
        return False  # candidate lanes: the per-(query, E) insertion with candidate words
    if p["INS"] == "key":  # CPUs: one query per work-item, TILE lanes per tile-order step
        return (not info.is_gpu and p["QB"] == p["WG"] and vec >= 8 and p["SPLIT"] == 1
                and not p.get("ANY", 0) and p["TILE"] % (2 * vec) == 0 and p["TILE"] // vec <= 64
                and (lpb == 0 or (lpb > vec and p["TILE"] % lpb == 0)))
    if lpb:  # the private-list scan's branch grouping only
        return False
    lanes = p["WG"] * vec
    if p["TILE"] % lanes or p["TILE"] // lanes > 4:
        return False
    if info.is_gpu:
        if vec != 1 or not p.get("ANY", 0) or p["WG"] < 32 or p["QB"] > 16:
            return False
    elif vec < 8 or p["WG"] > 16 or p.get("ANY", 0) or p["SPLIT"] > 2:
        return False
    return _local_bytes(p, emax, kt, item) <= _local_budget(info)


def _local_budget(info: DeviceInfo) -> int:
    """Local memory one group may take: GPUs all but a margin (occupancy is tuned),
    CPUs half (their local memory is cache)."""
    return info.local_mem_bytes - 1024 if info.is_gpu else info.local_mem_bytes // 2


def k_per_e(emax: int, knn: int) -> list[int]:
    """K_E of E = 1..emax: E + 1, or ``knn`` for every E when ``knn`` > 0."""
    return [knn if knn > 0 else E + 1 for E in range(1, emax + 1)]


class KnnScanKernel(TunableKernel):
    """Tunable family ``knn_scan``: WG, TILE (library lanes), QB (queries per group),
    SPLIT (library chunks per query group, merged after), INS (insertion mode), VEC
    (explicit vector width of the distance block: CPUs), LPB (INS "key": library lanes
    whose candidate tests share one branch; 0: one vector's), CQ (INS "qe" with ANY:
    each query's candidate lanes listed, so an insertion visits only those: GPUs)."""

    name = "knn_scan"
    template = TEMPLATE
    space = TuningSpace(
        params={"WG": (1, 2, 4, 8, 16, 32, 64, 128, 256), "TILE": (16, 32, 64, 128, 256, 512),
                "QB": (2, 4, 8, 16, 32), "SPLIT": (1, 2, 4, 8), "INS": ("q", "qe", "key"),
                "VEC": (1, 4, 8, 16), "ANY": (0, 1), "LPB": (0, 32, 64), "CQ": (0, 1)},
        heuristic=_heuristic,
        constraint=_fits,
        filled={"LPB": 0, "CQ": 0},
    )

    @staticmethod
    def _norm(spec: dict[str, Any]) -> dict[str, Any]:
        """``pyedmcl tune --E N`` sets ``E``: here that is the scan's largest E."""
        spec = dict(spec)
        if "E" in spec:
            spec["EMAX"] = spec.pop("E")
        return spec

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        spec = self._norm(spec)
        return f"{spec.get('REAL', 'float')}-{e_bucket(spec['EMAX'])}-k{spec.get('KNN', 0)}"

    def default_specs(self):
        return [{"EMAX": e, "TAU": 1, "KNN": 0, "METRIC": "euclidean", "REAL": "float"}
                for e in (10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [2048]
        return [5000, 32768] if info.is_gpu else [4096]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _ScanCase(backend, self._norm(spec), size)

    def fitted_params(self, be: Backend, spec: dict[str, Any], size: int) -> Params:
        """Tuned parameters at ``size``, QB lowered until the lists fit local memory."""
        p = {**OPTIONAL, **lookup(self, be.info, self.spec_bucket(spec),
                                self.size_bucket(size)).params}
        item = 8 if spec["REAL"] == "double" else 4
        kt = sum(k_per_e(spec["EMAX"], spec["KNN"]))
        while p["QB"] > 1 and _local_bytes(p, spec["EMAX"], kt, item) > _local_budget(be.info):
            p["QB"] //= 2
        return p

    def params_for(self, be: Backend, spec: dict[str, Any], nq: int, nl: int) -> Params:
        p = self.fitted_params(be, spec, max(nq, nl))
        if be.info.is_gpu and p["SPLIT"] == 1:
            # few queries: cut each query group's library scan so the GPU fills up
            want = be.info.compute_units * 16
            groups = -(-nq // p["QB"])
            while p["SPLIT"] < 8 and groups * p["SPLIT"] < want and nl >= 4 * p["SPLIT"] * p["TILE"]:
                p["SPLIT"] *= 2
        return p

    def requests(self, be: Backend, params: Params, spec: dict[str, Any]) -> list[tuple]:
        """The kernels :meth:`launch` builds for ``params`` / ``spec``, as
        ``(template, params, name)`` (for :meth:`clkernels.Backend.prebuild`): the scan,
        and its merge when SPLIT > 1."""
        params = {**OPTIONAL, **params}
        full = {**launch_spec(be, spec), **params}
        names = ("knn_scan", "knn_scan_merge") if params["SPLIT"] > 1 else ("knn_scan",)
        return [(self.template, full, name) for name in names]

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], x_dev, ints_dev, nq: int,
               t0: int, nl: int, radius: int, idx_dev, dist_dev, part=None, nseries: int = 1,
               xoff: int = 0, xstride: int = 0):
        """Enqueue the scan (and the merge when SPLIT > 1; ``part`` = its scratch pair);
        returns both events (a tuning case times their sum, not the merge alone).
        ``nseries`` > 1: series ``b`` at ``x_dev + xoff + b * xstride`` (one layout for all),
        tables ``(nseries, EMAX, nq, KMAX)`` (partials ``(nseries, SPLIT, ...)``)."""
        reqs = self.requests(be, params, spec)
        params = {**OPTIONAL, **params}
        spec = launch_spec(be, spec)  # as knn's, so the tables stay bit-identical
        split = params["SPLIT"]
        chunk = round_up(-(-nl // split), params["TILE"])
        k = be.kernel(*reqs[0])
        gx = -(-nq // params["QB"]) * params["WG"]
        oi, od = (idx_dev, dist_dev) if split == 1 else part
        ev = be.launch(k, (gx, split, nseries), (params["WG"], 1, 1), x_dev, ints_dev,
                       np.int32(nq), np.int32(t0), np.int32(chunk), np.int32(radius), oi, od,
                       np.uint32(xoff), np.uint32(xstride))
        evs = [ev]
        if split > 1:
            m = be.kernel(*reqs[1])
            evs.append(be.launch(m, (round_up(nq, 64), spec["EMAX"], nseries), (64, 1, 1),
                                 ints_dev, np.int32(nq), oi, od, idx_dev, dist_dev))
        return evs

    @staticmethod
    def padded_lanes(params: Params, nl: int) -> int:
        """Library lanes the launch reads (``lmask`` / ``x`` must cover them)."""
        split = params["SPLIT"]
        return split * round_up(-(-nl // split), params["TILE"])


KNN_SCAN = KnnScanKernel()


def scan_inputs(x: np.ndarray, dt, lanes: int, *, emax: int, tau: int, t0: int,
                qt: np.ndarray, qemax: np.ndarray, lemax: np.ndarray, obs: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """Host inputs of one scan: the series padded with ``PAD = (emax - 1) * tau``
    leading zeros and trailing ones up to the ``lanes`` the launch reads
    (:meth:`KnnScanKernel.padded_lanes`), so ``xp[PAD + t] = x[t]``; the int layout
    ``obs | qt | qemax | lmask`` (``obs`` target times shifted by PAD, -1 kept; the
    lookup's skill reads it, the scan skips it; ``lmask`` bit E-1 of lane ``li`` set
    iff time ``t0 + li`` is a library row at E, ``lemax`` the largest such E); PAD."""
    pad = (emax - 1) * tau
    nl, n = lemax.size, x.size
    xp = np.zeros(pad + max(n, t0 + lanes), dt)
    xp[pad:pad + n] = x
    lmask = np.zeros(lanes, np.int64)
    lmask[:nl] = (1 << lemax) - 1
    obs = np.where(obs >= 0, obs + pad, -1)
    ints = np.concatenate([obs, qt, qemax, lmask.astype(np.uint32).view(np.int32)])
    return xp, ints.astype(np.int32), pad


def padded_columns(n: int, qt: np.ndarray, pad: int, lanes: int) -> tuple[np.ndarray, int]:
    """The padded row of :func:`batch_inputs` as columns of a series of ``n`` values:
    ``cols[c]`` = the value's index, -1 where the row is padding (zero), and the row
    stride ``ldx``; a device gather of a panel already uploaded makes the padded panel
    (:func:`clkernels.arrays.gather`) without the host's copy."""
    ldx = pad + max(n, int(qt[0]) + lanes)
    cols = np.full(ldx, -1, np.int32)
    cols[pad:pad + n] = np.arange(n, dtype=np.int32)
    return cols, ldx


def batch_ints(qt: np.ndarray, qemax: np.ndarray, lanes: int) -> np.ndarray:
    """The int layout of :func:`batch_inputs`: ``obs (unused) | qt | qemax | lmask``."""
    nq = qt.size
    lmask = np.zeros(lanes, np.int64)
    lmask[:nq] = (1 << qemax) - 1  # library lane li = time qt[0] + li
    ints = np.concatenate([np.full(nq, -1), qt, qemax, lmask.astype(np.uint32).view(np.int32)])
    return ints.astype(np.int32)


def batch_inputs(X: np.ndarray, qt: np.ndarray, qemax: np.ndarray, pad: int, lanes: int,
                 dt) -> tuple[np.ndarray, np.ndarray, int]:
    """Host inputs of a series-batched scan whose library rows are its query rows
    (leave-one-out over contiguous times ``qt``, the all-to-all map's CCM rows):
    the series padded per row, ``(nseries, ldx)`` flattened (:func:`padded_columns`),
    the int layout (:func:`batch_ints`) and the row stride ``ldx``."""
    n = X.shape[1]
    _, ldx = padded_columns(n, qt, pad, lanes)
    xp = np.zeros((X.shape[0], ldx), dt)
    xp[:, pad:pad + n] = X
    return xp.reshape(-1), batch_ints(qt, qemax, lanes), ldx


class _ScanCase(TuningCase):
    """Library rows 0..size-2, queries size..2 size-1 of a 2 size-long series, Tp = 1,
    exclusion radius 0: the layout :func:`pyedmcl.primitives.scan_fused.fused_layout` makes of
    lib ``1 size``, pred ``size+1 2size``."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec = be, dict(spec)
        rng = np.random.default_rng(7)
        dt = np.float64 if spec.get("REAL") == "double" else np.float32
        n = 2 * size
        x = rng.standard_normal(n)
        emax, tau = spec["EMAX"], spec["TAU"]
        qt = np.arange(size, n, dtype=np.int64)
        self.lay = dict(emax=emax, tau=tau, t0=0, qt=qt, qemax=np.minimum(qt // tau + 1, emax),
                        lemax=np.minimum(np.arange(size - 1) // tau + 1, emax),
                        obs=np.where(qt + 1 < n, qt + 1, -1))
        self.x, self.dt = x, dt
        kmax = max(k_per_e(emax, spec["KNN"]))
        self.nq, self.nl = qt.size, size - 1
        self.idx = be.empty((emax, self.nq, kmax), np.int32)
        self.dist = be.empty((emax, self.nq, kmax), dt)
        self._dev: dict = {}

    def run(self, params: Params) -> list[Any]:
        be = self.be
        lanes = KNN_SCAN.padded_lanes(params, self.nl)
        if lanes not in self._dev:
            xp, ints, _ = scan_inputs(self.x, self.dt, lanes, **self.lay)
            self._dev[lanes] = be.to_device(xp), be.to_device(ints)
        x_dev, ints_dev = self._dev[lanes]
        part = None
        if params["SPLIT"] > 1:
            shape = (params["SPLIT"],) + tuple(self.idx.shape)
            part = (be.empty(shape, np.int32), be.empty(shape, self.dt))
        return KNN_SCAN.launch(be, params, self.spec, x_dev, ints_dev, self.nq, 0, self.nl, 0,
                               self.idx, self.dist, part)

    def output(self) -> np.ndarray:
        return self.be.to_host(self.dist)
