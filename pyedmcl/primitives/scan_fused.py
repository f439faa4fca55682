"""Fused embedding-dimension scan: k-NN tables of every E = 1..Emax in one launch.

The squared distance at E is the one at E-1 plus one coordinate (time
coordinates, past lags). The ``knn_scan`` family (:mod:`pyedmcl.kernels.knn_scan`)
adds the coordinates once per (query, library row) pair and keeps a top-K_E list
for every E at once; one lookup launch predicts for all E (batch dimension = E) and
one skill launch reduces all E, read back once. Tables, predictions and skills are those of
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

from clkernels import Backend
from clkernels.tuning import Params

from ..kernels.knn_scan import KNN_SCAN, MAX_FUSED_E, k_per_e, scan_inputs
from .knn import DeviceKnn, hold
from .lookup import lookup_device, lookup_requests, skill_device, skill_out
from .ranges import Plan, _embeddable, _lib_rows, check_tau, observed, parse_ranges, resolve


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
    segs = [r[_embeddable(r, n, 0, tau)] for r in (np.arange(a - 1, b, dtype=np.int64)
                                                   for a, b in parse_ranges(pred, "pred", n))]
    qt = np.concatenate(segs)
    qemax = np.minimum(qt // tau + 1, max_E)
    obs = np.where(observed(segs, Tp, n), qt + Tp, -1)
    return FusedLayout(max_E, tau, 0 if default_knn else top.knn, top.exclusion_radius, Tp, qt,
                       qemax, t0, lemax, obs)


@dataclass
class FusedDevice:
    """Device inputs of one fused scan: padded series (also the lookup's target) and
    the int buffer ``obs | qt | qemax | lmask`` (obs first: the skill kernel reads it)."""

    x: Any
    ints: Any
    pad: int
    ldy: int


def upload(be: Backend, lay: FusedLayout, x: np.ndarray, dt, params: Params) -> FusedDevice:
    """Pad the series and pack the int arrays (:func:`scan_inputs`): two uploads."""
    lanes = KNN_SCAN.padded_lanes(params, lay.lemax.size)
    xp, ints, pad = scan_inputs(x, dt, lanes, emax=lay.emax, tau=lay.tau, t0=lay.t0, qt=lay.qt,
                                qemax=lay.qemax, lemax=lay.lemax, obs=lay.obs)
    xd, idev = be.to_device(xp), be.to_device(ints)
    hold(be, xd, idev)
    return FusedDevice(xd, idev, pad, xp.size)


#: per backend: (name, shape, dtype, thread) -> device array reused by the next scan of
#: that shape (the k-NN tables are tens of MB at L = 10,000: creating them per call
#: costs ~ms on a GPU, where the whole scan takes a few). A run finishes (host sync)
#: before it returns, so the next run of the same thread may overwrite them.
_SCRATCH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: per backend: the (spec, params, kmax, lookup size) whose kernels :func:`run_fused` built
_PREBUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    kmax = max(k_per_e(lay.emax, lay.knn))
    # the scan's, the lookup's and the skill's programs built at once, before the first
    # launch (once per backend and shape: ~30 us of host time a call otherwise)
    done = _PREBUILT.setdefault(be, set())
    key = (tuple(sorted(spec.items())), tuple(sorted(params.items())), kmax, nq * lay.emax)
    if key not in done:
        be.prebuild(KNN_SCAN.requests(be, params, spec)
                    + lookup_requests(be, kmax, nq * lay.emax, real=real, skill_k=1))
        done.add(key)
    dev = upload(be, lay, x, dt, params)
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
