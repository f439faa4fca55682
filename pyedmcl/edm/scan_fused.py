"""Fused embedding-dimension scan: k-NN tables of every E = 1..Emax in one launch.

The squared distance at E is the one at E-1 plus one coordinate (time
coordinates, past lags). ``templates/knn_scan.cl.mako`` adds the coordinates
once per (query, library row) pair and keeps a top-K_E list for every E at once;
one lookup launch predicts for all E (batch dimension = E) and one skill launch
reduces all E, read back once. Tables, predictions and skills are those of
:func:`pyedmcl.simplex` per E: the per-E kernel adds coordinates in the same
order (newest first), so the tables are bit-identical.

Applies when the per-E rows nest, which :func:`fused_layout` checks from the
resolved plans (it returns None otherwise and the caller runs the per-E path):
tau > 0, library rows of E unique and a subset of those of E-1, prediction rows of
E the rows of E=1 with enough history, one knn rule (E+1, or one fixed knn).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from .knn import DeviceKnn, hold, launch_spec
from .lookup import lookup_device, skill_device, skill_out
from .ranges import Plan, _embeddable, _lib_rows, check_tau, parse_ranges, resolve

TEMPLATE = "knn_scan.cl.mako"
#: candidate bits per (query, library lane) are one 32-bit word
MAX_FUSED_E = 32


@dataclass(frozen=True)
class FusedLayout:
    """Host arrays of a fused scan (time coordinates).

    ``qt`` query times (the prediction rows of E=1, in order), ``qemax`` the
    largest E at which each is a prediction row; ``t0`` first library time,
    ``lemax[li]`` the largest E at which time ``t0 + li`` is a library row (0: none).
    """

    emax: int
    tau: int
    knn: int  # 0: E + 1 per E
    radius: int
    Tp: int
    qt: np.ndarray
    qemax: np.ndarray
    t0: int
    lemax: np.ndarray
    obs: np.ndarray  # target time per query, -1 where unobserved


def fused_layout(plans: list[Plan]) -> FusedLayout | None:
    """The fused scan's layout if ``plans`` (E = 1..Emax in order) nest, else None."""
    emax = len(plans)
    p1 = plans[0]
    if emax > MAX_FUSED_E or p1.tau <= 0 or [p.E for p in plans] != list(range(1, emax + 1)):
        return None
    if any(p.tau != p1.tau or p.Tp != p1.Tp or p.exclusion_radius != p1.exclusion_radius
           for p in plans):
        return None
    knns = [p.knn for p in plans]
    if knns == [p.E + 1 for p in plans]:
        knn = 0
    elif len(set(knns)) == 1:
        knn = knns[0]
    else:
        return None
    tau = p1.tau
    # prediction rows: those of E=1 with (E-1)*tau rows of history, order kept
    qt = p1.pred_times.astype(np.int64)
    qemax = np.minimum(qt // tau + 1, emax)
    for p in plans[1:]:
        if not np.array_equal(p.pred_times, qt[qemax >= p.E]):
            return None
    # library rows: unique per E and nested (lib_E subset of lib_{E-1})
    lib1 = p1.lib_times
    if np.unique(lib1).size != lib1.size:
        return None
    t0, t1 = int(lib1.min()), int(lib1.max())
    lemax = np.zeros(t1 - t0 + 1, np.int64)
    for p in plans:
        lt = p.lib_times
        if (lt.size == 0 or np.unique(lt).size != lt.size or lt.min() < t0 or lt.max() > t1
                or np.any(lemax[lt - t0] != p.E - 1)):  # every row of E is one of E-1
            return None
        lemax[lt - t0] = p.E
    obs = np.where(p1.observed_mask, p1.target_times, -1)
    return FusedLayout(emax, tau, knn, p1.exclusion_radius, p1.Tp, qt, qemax, t0, lemax, obs)


def scan_layout(n: int, max_E: int, *, tau: Any = 1, Tp: Any = 1, knn: Any = None,
                exclusion_radius: Any = 0, lib: Any = None, pred: Any = None) -> FusedLayout | None:
    """:func:`fused_layout` of E = 1..max_E, cached per parameter set (host time
    matters on GPUs: a scan there takes a few ms; scanning many series of one
    length, e.g. xmap's automatic E, reuses it). Arrays are read-only."""
    try:
        key = (n, max_E, tau, Tp, knn, exclusion_radius,
               tuple(parse_ranges(lib, "lib", n)), tuple(parse_ranges(pred, "pred", n)))
        hash(key)
    except (ValueError, TypeError):
        return None
    return _scan_layout_cached(*key)


@lru_cache(maxsize=64, typed=True)  # typed: tau=True or 2.0 must not hit the entry of 1 or 2
def _scan_layout_cached(n, max_E, tau, Tp, knn, exclusion_radius, lib, pred):
    lay = _scan_layout(n, max_E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                       lib=list(lib), pred=list(pred))
    if lay is not None:
        for a in (lay.qt, lay.qemax, lay.lemax, lay.obs):
            a.flags.writeable = False
    return lay


def _scan_layout(n: int, max_E: int, *, tau: Any = 1, Tp: Any = 1, knn: Any = None,
                 exclusion_radius: Any = 0, lib: Any = None, pred: Any = None) -> FusedLayout | None:
    """:func:`fused_layout` of E = 1..max_E without resolving every E (host time).

    One :func:`resolve` at ``max_E`` validates every E (each of its checks only
    gets stricter with E: span, knn, fewer library rows). Per E only the library
    rows are computed (``_lib_rows``, what :func:`resolve` calls); prediction rows
    of E are those of E=1 with ``(E-1) tau`` rows of history (``_embeddable``).
    None where the fused scan does not apply or a parameter is invalid (the
    caller's per-E path then raises the error of the first failing E).
    """
    try:
        tau = check_tau(tau)
        if tau <= 0 or max_E > MAX_FUSED_E:
            return None
        top = resolve(n, E=max_E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                      lib=lib, pred=pred)
    except (ValueError, TypeError):
        return None
    default_knn = knn is None or (not isinstance(knn, bool) and isinstance(knn, int | np.integer)
                                  and int(knn) == 0)
    Tp = top.Tp
    pairs = parse_ranges(lib, "lib", n)
    lib1 = _lib_rows(pairs, n, 1, tau, Tp)
    if lib1.size == 0 or not (np.all(np.diff(lib1) > 0) or np.unique(lib1).size == lib1.size):
        return None
    t0, t1 = int(lib1.min()), int(lib1.max())
    lemax = np.zeros(t1 - t0 + 1, np.int64)
    lemax[lib1 - t0] = 1
    for E in range(2, max_E + 1):
        lt = _lib_rows(pairs, n, E, tau, Tp)
        if lt.size == 0 or lt.min() < t0 or lt.max() > t1 or np.any(lemax[lt - t0] != E - 1):
            return None
        if lt.size > 1 and not np.all(np.diff(lt) > 0) and np.unique(lt).size != lt.size:
            return None
        lemax[lt - t0] = E
    rows = np.concatenate([np.arange(a - 1, b, dtype=np.int64)
                           for a, b in parse_ranges(pred, "pred", n)])
    qt = rows[_embeddable(rows, n, 0, tau)]
    qemax = np.minimum(qt // tau + 1, max_E)
    tt = qt + Tp
    obs = np.where((tt >= 0) & (tt < n), tt, -1)
    return FusedLayout(max_E, tau, 0 if default_knn else top.knn, top.exclusion_radius, Tp, qt,
                       qemax, t0, lemax, obs)


# --- tunable kernel family --------------------------------------------------------

def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        # the H100 tuning winner at every (Emax, L) bucket (quick runs): few queries per
        # work-group keep the per-(query, E) lists small enough for high occupancy
        return {"WG": 64, "TILE": 128, "QB": 2, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1}
    # CPUs: explicit SIMD vectors over library rows, branch-free distance block
    return {"WG": 4, "TILE": 64, "QB": 16, "SPLIT": 1, "INS": "q", "VEC": 16, "ANY": 0}


def _local_bytes(p: Params, emax: int, kt: int, item: int) -> int:
    return p["QB"] * (2 * emax * item + 16 + p["TILE"] * 4 + kt * (item + 4))


def _fits(p: Params, info: DeviceInfo, emax: int = 20, kt: int = 230, item: int = 4) -> bool:
    """Device limits, and a space pruned to what can win (the tuner times every
    candidate): GPUs one lane per work-item with the candidate words (VEC 1, ANY 1,
    WG >= 32); CPUs explicit vectors (VEC >= 8), a few work-items, no split."""
    vec = p.get("VEC", 1)
    if p["WG"] > info.max_work_group_size or p["WG"] > info.max_work_item_sizes[0]:
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


def _ks(emax: int, knn: int) -> list[int]:
    return [knn if knn > 0 else E + 1 for E in range(1, emax + 1)]


class KnnScanKernel(TunableKernel):
    """Tunable family ``knn_scan``: WG, TILE (library lanes), QB (queries per group),
    SPLIT (library chunks per query group, merged after), INS (insertion mode), VEC
    (explicit vector width of the distance block: CPUs)."""

    name = "knn_scan"
    template = TEMPLATE
    space = TuningSpace(
        params={"WG": (1, 2, 4, 8, 16, 32, 64, 128, 256), "TILE": (16, 32, 64, 128, 256, 512),
                "QB": (2, 4, 8, 16, 32), "SPLIT": (1, 2, 4, 8), "INS": ("q", "qe"),
                "VEC": (1, 4, 8, 16), "ANY": (0, 1)},
        heuristic=_heuristic,
        constraint=_fits,
    )

    @staticmethod
    def _norm(spec: dict[str, Any]) -> dict[str, Any]:
        """``pyedmcl tune --E N`` sets ``E``: here that is the scan's largest E."""
        spec = dict(spec)
        if "E" in spec:
            spec["EMAX"] = spec.pop("E")
        return spec

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        from ..kernels.distance import e_bucket
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
        p = {"VEC": 1, "ANY": 0, **lookup(self, be.info, self.spec_bucket(spec),
                                self.size_bucket(size)).params}
        item = 8 if spec["REAL"] == "double" else 4
        kt = sum(_ks(spec["EMAX"], spec["KNN"]))
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

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], x_dev, ints_dev, nq: int,
               t0: int, nl: int, radius: int, idx_dev, dist_dev, part=None, nseries: int = 1,
               xoff: int = 0, xstride: int = 0):
        """Enqueue the scan (and the merge when SPLIT > 1; ``part`` = its scratch pair);
        returns both events (a tuning case times their sum, not the merge alone).
        ``nseries`` > 1: series ``b`` at ``x_dev + xoff + b * xstride`` (one layout for all),
        tables ``(nseries, EMAX, nq, KMAX)`` (partials ``(nseries, SPLIT, ...)``)."""
        params = {"VEC": 1, "ANY": 0, **params}
        spec = launch_spec(be, spec)  # as knn.cl.mako's, so the tables stay bit-identical
        split = params["SPLIT"]
        chunk = round_up(-(-nl // split), params["TILE"])
        k = be.kernel(self.template, {**spec, **params}, "knn_scan")
        gx = -(-nq // params["QB"]) * params["WG"]
        oi, od = (idx_dev, dist_dev) if split == 1 else part
        ev = be.launch(k, (gx, split, nseries), (params["WG"], 1, 1), x_dev, ints_dev,
                       np.int32(nq), np.int32(t0), np.int32(chunk), np.int32(radius), oi, od,
                       np.uint32(xoff), np.uint32(xstride))
        evs = [ev]
        if split > 1:
            m = be.kernel(self.template, {**spec, **params}, "knn_scan_merge")
            evs.append(be.launch(m, (round_up(nq, 64), spec["EMAX"], nseries), (64, 1, 1),
                                 ints_dev, np.int32(nq), oi, od, idx_dev, dist_dev))
        return evs

    @staticmethod
    def padded_lanes(params: Params, nl: int) -> int:
        """Library lanes the launch reads (``lmask`` / ``x`` must cover them)."""
        split = params["SPLIT"]
        return split * round_up(-(-nl // split), params["TILE"])


KNN_SCAN = KnnScanKernel()


def batch_inputs(X: np.ndarray, qt: np.ndarray, qemax: np.ndarray, pad: int, lanes: int,
                 dt) -> tuple[np.ndarray, np.ndarray, int]:
    """Host inputs of a series-batched scan whose library rows are its query rows
    (leave-one-out over contiguous times ``qt``, the all-to-all map's CCM rows):
    the series padded per row, ``(nseries, ldx)`` flattened, the int layout
    ``obs (unused) | qt | qemax | lmask`` and the row stride ``ldx``."""
    nq, n = qt.size, X.shape[1]
    ldx = pad + max(n, int(qt[0]) + lanes)
    xp = np.zeros((X.shape[0], ldx), dt)
    xp[:, pad:pad + n] = X
    lmask = np.zeros(lanes, np.int64)
    lmask[:nq] = (1 << qemax) - 1  # library lane li = time qt[0] + li
    ints = np.concatenate([np.full(nq, -1), qt, qemax, lmask.astype(np.uint32).view(np.int32)])
    return xp.reshape(-1), ints.astype(np.int32), ldx


@dataclass
class FusedDevice:
    """Device inputs of one fused scan: padded series (also the lookup's target) and
    the int buffer ``obs | qt | qemax | lmask`` (obs first: the skill kernel reads it)."""

    x: Any
    ints: Any
    pad: int
    ldy: int


def upload(be: Backend, lay: FusedLayout, x: np.ndarray, dt, params: Params) -> FusedDevice:
    """Pad the series and pack the int arrays: two uploads."""
    pad = (lay.emax - 1) * lay.tau
    nl = lay.lemax.size
    lanes = KNN_SCAN.padded_lanes(params, nl)
    n = x.size
    xp = np.zeros(pad + max(n, lay.t0 + lanes), dt)
    xp[pad:pad + n] = x
    lmask = np.zeros(lanes, np.int64)
    lmask[:nl] = (1 << lay.lemax) - 1
    obs = np.where(lay.obs >= 0, lay.obs + pad, -1)
    ints = np.concatenate([obs, lay.qt, lay.qemax, lmask.astype(np.uint32).view(np.int32)])
    xd, idev = be.to_device(xp), be.to_device(ints.astype(np.int32))
    hold(be, xd, idev)
    return FusedDevice(xd, idev, pad, xp.size)


#: per backend: (name, shape, dtype, thread) -> device array reused by the next scan of
#: that shape (the k-NN tables are tens of MB at L = 10,000: creating them per call
#: costs ~ms on a GPU, where the whole scan takes a few). A run finishes (host sync)
#: before it returns, so the next run of the same thread may overwrite them.
_SCRATCH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scratch(be: Backend, name: str, shape: tuple, dtype) -> Any:
    d = _SCRATCH.setdefault(be, {})
    key = (name, tuple(shape), np.dtype(dtype).str, threading.get_ident())
    a = d.get(key)
    if a is None:
        if len(d) >= 16:
            d.clear()
        a = d[key] = be.empty(shape, dtype)
    return a


def run_fused(be: Backend, lay: FusedLayout, x: np.ndarray, y: np.ndarray | None, dt,
              real: str, *, params: Params | None = None, predictions: bool = False):
    """Scan + lookup + skill for all E; returns (skill (Emax, 4), predictions (Emax, nq) or None).

    ``y``: the target series (None: ``x``). ``predictions`` rows hold NaN for
    queries that are no prediction row at that E.
    """
    spec = {"EMAX": lay.emax, "TAU": lay.tau, "KNN": lay.knn, "METRIC": "euclidean", "REAL": real}
    nq, nl = lay.qt.size, lay.lemax.size
    if params is None:
        params = KNN_SCAN.params_for(be, spec, nq, nl)
    dev = upload(be, lay, x, dt, params)
    kmax = max(_ks(lay.emax, lay.knn))
    idx = _scratch(be, "idx", (lay.emax, nq, kmax), np.int32)
    dist = _scratch(be, "dist", (lay.emax, nq, kmax), dt)
    part = None
    if params["SPLIT"] > 1:
        part = (_scratch(be, "pidx", (params["SPLIT"], lay.emax, nq, kmax), np.int32),
                _scratch(be, "pdist", (params["SPLIT"], lay.emax, nq, kmax), dt))
    hold(be, idx, dist, *(part or ()))
    KNN_SCAN.launch(be, params, spec, dev.x, dev.ints, nq, lay.t0, nl, lay.radius, idx, dist, part)
    table = DeviceKnn(idx, dist, lay.emax, nq, kmax, keep=(dev.x, dev.ints))
    y_dev = dev.x
    if y is not None and not np.array_equal(y, x):
        yp = np.zeros(dev.ldy, dt)
        yp[dev.pad:dev.pad + y.size] = y
        y_dev = be.to_device(yp)
        hold(be, y_dev)
    pred_dev, _ = lookup_device(be, table, y_dev, dev.ldy, 1, dev.pad + lay.Tp, real=real)
    out = skill_out(be, lay.emax)
    skill_device(be, pred_dev, lay.emax, nq, y_dev, dev.ldy, 1, dev.ints, real=real, out=out)
    sk = be.to_host(out).astype(np.float64)  # the scan's one host sync
    pred = be.to_host(pred_dev)[:, 0, :] if predictions else None
    return sk, pred


class _ScanCase(TuningCase):
    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec = be, dict(spec)
        rng = np.random.default_rng(7)
        dt = np.float64 if spec.get("REAL") == "double" else np.float32
        n = 2 * size
        x = rng.standard_normal(n)
        plans = [resolve(n, E=E, tau=spec["TAU"], Tp=1, lib=f"1 {size}", pred=f"{size + 1} {n}")
                 for E in range(1, spec["EMAX"] + 1)]
        self.lay = fused_layout(plans)
        self.x, self.dt = x, dt
        kmax = max(_ks(spec["EMAX"], spec["KNN"]))
        nq = self.lay.qt.size
        self.idx = be.empty((spec["EMAX"], nq, kmax), np.int32)
        self.dist = be.empty((spec["EMAX"], nq, kmax), dt)
        self._dev: dict = {}

    def run(self, params: Params) -> list[Any]:
        lay, be = self.lay, self.be
        key = KNN_SCAN.padded_lanes(params, lay.lemax.size)
        if key not in self._dev:
            self._dev[key] = upload(be, lay, self.x, self.dt, params)
        dev = self._dev[key]
        part = None
        if params["SPLIT"] > 1:
            shape = (params["SPLIT"],) + tuple(self.idx.shape)
            part = (be.empty(shape, np.int32), be.empty(shape, self.dt))
        return KNN_SCAN.launch(be, params, self.spec, dev.x, dev.ints, lay.qt.size, lay.t0,
                               lay.lemax.size, lay.radius, self.idx, self.dist, part)

    def output(self) -> np.ndarray:
        return self.be.to_host(self.dist)
