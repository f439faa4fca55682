"""Convergent Cross Mapping (Sugihara et al. 2012) with pyEDM 2.5's semantics.

For each library size L and each of ``sample`` random libraries (L of the M
valid rows, without replacement by default), every valid row is cross-mapped
from its k nearest library neighbours (self and rows within
``exclusion_radius`` excluded) and Pearson rho is taken over all M rows; the
curve is the mean rho per L, in both directions.

RNG (documented so results are reproducible and comparable with pyEDM): for
every (direction, L) a fresh ``numpy.random.default_rng(SeedSequence(e))`` is
made, where ``e = SeedSequence(seed).entropy``, and each sample draws
``rng.choice(M, size=L, replace=replacement)`` (sorted). This is exactly what
pyEDM 2.5 does, so with the same ``seed`` both libraries draw the same samples
and the curves agree to float precision, not only within sampling error.

Ties: pyEDM's CCM takes neighbours in SciPy KDTree order (no tie rule); pyedmcl
uses its deterministic order (distance, then |row difference|, then the earlier
row), so on series with exactly repeated values (integer data) individual
samples can differ from pyEDM where the k-th neighbour is tied; on real-valued
data the two agree (see tests/test_edm_ccm.py). float32 calls (the default) decide
neighbours as the float64 call does: their sorted rows, host-index tables and
per-sample tables come from the float64 call's distances of the raw series (decimal
data tie everywhere, and float32's roundings broke those ties the other way), so
float32 and float64 samples differ only by float32's lookup and rho arithmetic
(tests/test_ccm_float32_order.py). Zero distances follow pyEDM's
CCM rule (weight 1 for exact matches when the nearest distance is 0). Rows left
with fewer than k admissible neighbours predict NaN and are dropped from rho,
as in pyEDM.

Neighbours: ``knn_method="auto"`` (default) takes the exact back-end the measured
CCM crossovers predict to be faster for this device, L, E and number of libraries
(:mod:`pyedmcl.neighbors.auto`, shape ``"ccm"``): the exact kernel, or on CPUs at low E
and large L the k-d tree, which returns the exact kernel's tables bit for bit (same
neighbours, tie order and distances; decision 0059), so the choice never changes a
result. Exact k-NN: every sampled library is a subset of
the same M rows, so on a CPU each direction first sorts every query's full-library
row once (:class:`SortedRows`, kEDM's approach; O(M^2) memory, used while M^2 <=
``MAX_SORTED_ENTRIES``); the k nearest within a sample are then the first k
sample members of that row, found by one launch for all samples of an L. Other
back-ends, larger M and GPUs (whose k-NN launches cost less than the host's sort,
:func:`sorted_rows_pay`) run all samples of one L as one batched k-NN launch (one
library per batch index). Then one lookup and one on-device rho reduction per
L; only S numbers per L come back.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import numpy as np

from clkernels import get_backend, run_blocked
from clkernels.memory import is_oom

from .._bands import map_slices
from .._deprecation import renamed_keywords
from .._precision import prepare
from ..constant_series import checks_constant
from ..kernels.knn import KNN
from ..kernels.lookup import LOOKUP
from ..neighbors import resolve_backend
from ..neighbors.base import HostBackend, tie_key
from ..primitives.knn import DeviceKnn, hold, knn_device
from ..primitives.lookup import ccm_shifts_device, lookup_device, skill_device, skill_out
from ..primitives.ranges import (
    MAX_KNN,
    ccm_valid_times,
    check_lags,
    check_tau,
    point_offset,
    warn_short_lags,
)
from ..validation import (
    as_integer,
    as_series,
    check_dtype,
    check_host_memory,
    check_int,
    check_seed,
)
from .ccm_null import draw_libraries, library_sizes
from .ccm_spec import CrossMapSpec
from .results import CCMLagResult, CCMResult
from .row_check import on_decimal_grid
from .statespace import (
    StateSpace,
    bad_points,
    check_valid_lib,
    filled,
    is_multivariate,
    state_space,
)

log = logging.getLogger("pyedmcl.edm.ccm")

#: cap on k-NN table entries per batched launch (bounds device memory)
MAX_TABLE_ENTRIES = 1 << 25
#: the sorted full-library path holds M x M sorted neighbour rows (index + distance)
#: on the device; above this many entries CCM falls back to per-sample k-NN launches
MAX_SORTED_ENTRIES = 1 << 25


def sorted_rows_pay(info: Any, M: int, k: int) -> bool:
    """Whether a direction of ``M`` rows takes the sorted full-library rows
    (:class:`SortedRows`) rather than one k-NN launch per batch of sampled libraries.
    They must where ``k`` exceeds the fused kernel's ``MAX_KNN``, and cannot where the
    ``M x M`` rows pass ``MAX_SORTED_ENTRIES``. Otherwise they pay on a CPU (a sample's
    table then costs O(k / fraction) per query instead of a scan of its library), not on
    a GPU, where the host's sort of the rows costs far more than every sample's k-NN
    (bench/results/nvidia-h200/ccm_paths_2026-11-28_cabcc4f.txt)."""
    if M * M > MAX_SORTED_ENTRIES:
        return False
    return k > MAX_KNN or not info.is_gpu


@dataclasses.dataclass(frozen=True)
class ExactOrder:
    """What a float32 CCM needs to choose its neighbours as the float64 call does: the
    series as the float64 call's kernels read it (float64, unstandardised)."""

    series: np.ndarray


def row_order(a: np.ndarray, tie: np.ndarray, tied: bool = False) -> np.ndarray:
    """``(M, M)`` int32: each row's columns in the k-NN kernel's total order, by raw
    distance ``a`` (float32 or float64, non-negative), then ``tie`` (``2 |p - l| + (l >
    p)``). Rows without equal distances take one unstable sort (the tie key is then
    moot); rows with them (or with NaN, ordered last by tie) a two-key sort, every row
    where ``tied`` says most rows tie (decimal data)."""
    if a.dtype == np.float32:  # non-negative floats order like their bit patterns
        key = (a.view(np.int32).astype(np.int64) << 32) | tie
        return np.argsort(key, axis=1).astype(np.int32)
    if tied:
        return np.lexsort((tie, a), axis=-1).astype(np.int32)
    order = np.argsort(a, axis=1)
    srt = np.take_along_axis(a, order, axis=1)
    tied = np.flatnonzero(np.any((srt[:, 1:] == srt[:, :-1]) | np.isnan(srt[:, 1:]), axis=1))
    if tied.size:
        order[tied] = np.lexsort((tie[tied], a[tied]), axis=-1)
    return order.astype(np.int32)


def ordered_rows(a: np.ndarray, f: np.ndarray, pts: np.ndarray, tied: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Every row's :func:`row_order` by raw distances ``a`` ``(M, M)`` (row q the query
    ``pts[q]``, column j the point ``pts[j]``; ties by ``2 |p - l| + (l > p)``), and ``f``'s
    rows in that order: by bands of rows on threads (numpy's sorts and gathers release
    the interpreter; each row is ordered alone, so the result does not depend on the
    bands)."""
    p = pts.astype(np.int64)
    order = np.empty(a.shape, np.int32)
    fs = np.empty(f.shape, f.dtype)

    def band(sl: slice) -> None:
        o = row_order(a[sl], tie_key(p[sl, None], p[None, :]), tied)  # (rows q: query p)
        order[sl] = o
        fs[sl] = np.take_along_axis(f[sl], o, axis=1)

    map_slices(band, a)
    return order, fs


class SortedRows:
    """Every query's full-library neighbours in the k-NN total order, on the device.

    Each sampled library is a subset of the same M rows, so a query's k nearest
    within a sample are the first k sample members of its sorted full row
    (kEDM's CCM idea). Built once per direction: one distance launch, a host sort
    by (distance, |p - l|, l) -- the fused kernel's tie order -- and one upload.
    Sampled tables then cost O(k / fraction) per query instead of O(L).

    float32 calls order each row as the float64 call does (``exact``): the float64
    call's distances of the raw series (the same kernel in double, on the device that
    runs the call) decide the order, so float32's roundings cannot break a tie or swap
    two near-equal neighbours the other way (decimal data tie everywhere); the weights
    take float32's own distances, as every float32 lookup does. One more distance
    launch, the same sort (:func:`row_order`); only a device without fp64 keeps
    float32's own order.
    """

    WG = 64

    def __init__(self, be, x_dev, n: int, *, E: int, tau: int, pts: np.ndarray, q_dev,
                 real: str, metric: str = "euclidean", nc: int = 1,
                 exact: ExactOrder | None = None):
        self.be, self.E, self.tau, self.real, self.metric = be, E, abs(tau), real, metric
        M = pts.size
        self.M = M
        wg = min(self.WG, be.info.max_work_group_size)
        self.wg = wg
        spec = {"E": self.E, "TAU": self.tau, "K": 1, "METRIC": self.metric, "REAL": self.real}
        if nc != 1:  # a state space: E lags of nc columns (the kernel's E counts coordinates)
            spec = {**spec, "E": self.E * nc, "NC": nc}
        float64_order = real == "float" and exact is not None and be.info.fp64
        a, f = self._distances(be, spec, x_dev, q_dev, M, acc=not float64_order)
        tied = False
        if float64_order:
            x64 = be.to_device(np.ascontiguousarray(exact.series, np.float64))
            a, _ = self._distances(be, {**spec, "REAL": "double"}, x64, q_dev, M, fin=False)
            hold(be, x64)
            tied = on_decimal_grid(exact.series)
        order, f = ordered_rows(a, f, pts, tied)
        self.srt = be.to_device(order)
        self.sdist = be.to_device(f)
        self.l_dev = q_dev
        hold(be, self.srt, self.sdist)

    def _distances(self, be, spec: dict[str, Any], x_dev, q_dev, M: int, fin: bool = True,
                   acc: bool = True) -> tuple[Any, Any]:
        """Host copies of every row's raw (squared, ``acc``) and finished (``fin``)
        distances ``(M, M)`` in ``spec``'s precision (None for those not asked)."""
        dt = np.float64 if spec["REAL"] == "double" else np.float32
        ad, fd = be.empty((M, M), dt), be.empty((M, M), dt)
        KNN.launch_sorted(be, spec, self.wg, x_dev, q_dev, M, q_dev, M, ad, fd)
        a = be.to_host(ad) if acc else None
        f = be.to_host(fd) if fin else None
        hold(be, ad, fd)
        return a, f

    def counts(self, libs: np.ndarray, k: int) -> np.ndarray:
        """``(nbatch, M)`` uint8 multiplicity of each row in each library (capped at k)."""
        nb, M = libs.shape[0], self.M
        flat = (libs + (np.arange(nb) * M)[:, None]).reshape(-1)
        cnt = np.bincount(flat, minlength=nb * M).reshape(nb, M)
        if k > 255 and cnt.max() > 255:  # uint8 counts: only with replacement, k > 255
            raise ValueError(f"knn={k} with a row drawn {cnt.max()} times (replacement=True): "
                             "allowed: knn <= 255 with replacement")
        return np.minimum(cnt, min(k, 255)).astype(np.uint8)

    def predict(self, cnt, k: int, q_dev, radius: int, y_dev, tshift: int):
        """CCM predictions ``(nbatch, 1, M)`` for the sampled libraries given by their
        :meth:`counts` ``cnt`` (host or device): neighbour search and lookup fused in one launch, no
        k-NN table stored."""
        be, M = self.be, self.M
        nb = cnt.shape[0]
        c_dev = cnt if be.is_device_array(cnt) else be.to_device(cnt)
        hold(be, c_dev)
        dt = np.float64 if self.real == "double" else np.float32
        pred = be.empty((nb, 1, M), dt)
        LOOKUP.launch_subset(be, self.wg, {"K": k, "REAL": self.real, "WEIGHT": "ccm"},
                             self.srt, self.sdist, c_dev, nb, self.l_dev, q_dev, M, M, radius,
                             y_dev, tshift, pred)
        hold(be, pred)
        return pred


def parse_lib_sizes(lib_sizes: Any, n: int, E: int) -> np.ndarray:
    """pyEDM's libSizes: a list, or ``"start stop increment"`` (3 values, increment < stop)."""
    try:
        if isinstance(lib_sizes, str):
            vals = [int(v) for v in lib_sizes.replace(",", " ").split()]
        else:  # integral numbers only: 20.7 is refused, not cut to 20
            vals = [as_integer(v.item() if isinstance(v, np.generic) else v, "lib_sizes")
                    for v in np.atleast_1d(np.asarray(lib_sizes, dtype=object)).reshape(-1)]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lib_sizes={lib_sizes!r} is not a list of integers; allowed: e.g. "
                         "[20, 50, 100] or 'start stop increment'") from exc
    if not vals:
        raise ValueError("lib_sizes is empty; give library sizes, e.g. [20, 50, 100]")
    if len(vals) == 3 and vals[2] < vals[1]:
        start, stop, inc = vals
        if inc < 1 or start > stop:
            raise ValueError(f"lib_sizes 'start stop increment' = {vals} is invalid; "
                             "allowed: increment >= 1 and start <= stop")
        vals = list(range(start, stop + 1, inc))
    arr = np.asarray(vals, dtype=np.int64)
    if arr.min() < E + 2 or arr.max() > n:
        raise ValueError(f"lib_sizes={vals} out of range; allowed: {E + 2} <= L <= {n} "
                         f"(E + 2 .. series length)")
    return arr


def _float64_rows(exact: ExactOrder, search: Any) -> Any:
    """``search`` (the exact device kernel's table, :func:`knn_device`'s signature) run
    on the float64 call's series in double for its neighbours, their distances those
    the float32 kernel computes (:meth:`~pyedmcl.kernels.knn.KnnKernel.launch_table_distances`
    on the call's own series, bit for bit): the float64 call's rows for a float32 CCM
    without sorted rows (the per-sample path of long series; its k-NN at double's
    speed), all on the device."""
    x64: list = []

    def run(be, x_dev, n: int, **kw) -> DeviceKnn:
        if not x64:
            x64.append(be.to_device(np.ascontiguousarray(exact.series, np.float64)))
        t = search(be, x64[0], n, **{**kw, "real": "double"})
        nc = kw.get("nc", 1)
        spec = {"E": kw["E"] * nc, "TAU": abs(kw["tau"]), "K": 1,
                "METRIC": kw.get("metric", "euclidean"), "REAL": "float"}
        if nc != 1:
            spec["NC"] = nc
        q_dev = kw.get("q_dev")
        if q_dev is None:
            q_dev = be.to_device(np.ascontiguousarray(kw["qpts"], np.int32))
        d = be.empty((t.nbatch * t.nq * t.k,), np.float32)
        KNN.launch_table_distances(be, spec, x_dev, q_dev, t.nq, t.idx, t.nbatch * t.nq, t.k, d)
        return DeviceKnn(t.idx, d, t.nbatch, t.nq, t.k, keep=(x64[0], x_dev, q_dev))
    return run


def _direction(be, real, x: np.ndarray, y: np.ndarray, spec: CrossMapSpec, *,
               valid: np.ndarray | None = None, exact: ExactOrder | None = None) -> np.ndarray:
    """rho samples ``(len(spec.sizes), spec.sample)`` for x's embedding cross-mapping y.

    ``x`` a series or an ``(n, m)`` state space (``E`` lags of each column); ``valid``:
    a mask over rows allowed at all (complete state, finite target, ``valid_lib``);
    ``exact``: x as the float64 call has it, for a float32 call's sorted rows."""
    E, tau, Tp, k, radius = spec.E, spec.tau, spec.Tp, spec.k, spec.radius
    sizes, sample, neighbors = spec.sizes, spec.sample, spec.neighbors
    n = x.shape[0]
    nc = 1 if x.ndim == 1 else x.shape[1]
    extra = {} if nc == 1 else {"nc": nc}
    dt = np.float64 if real == "double" else np.float32
    times = ccm_valid_times(n, E, tau, Tp)
    if valid is not None:
        times = times[valid[times]]
    M = times.size
    off = point_offset(E, tau)
    pts = (times - off).astype(np.int32)
    x_dev = be.to_device(x.astype(dt))
    yk = y.astype(dt)  # the values the kernels read
    y_dev = be.to_device(yk)
    q_dev = be.to_device(pts)
    obs_dev = be.to_device((times + Tp).astype(np.int32))
    shift = ccm_shifts_device(be, yk, times + Tp)  # the target's (skill_device)
    hold(be, x_dev, y_dev, q_dev, obs_dev)
    out = np.full((sizes.size, sample), np.nan)
    item = np.dtype(dt).itemsize
    sorted_rows = None
    if ((neighbors is None or getattr(neighbors, "name", None) == "exact")
            and sorted_rows_pay(be.info, M, k)):
        try:
            sorted_rows = SortedRows(be, x_dev, n, E=E, tau=tau, pts=pts, q_dev=q_dev, real=real,
                                     nc=nc, exact=exact)
        except Exception as exc:  # M x M rows do not fit: per-sample k-NN launches instead
            if not is_oom(exc):
                raise
            log.info("CCM: sorted M x M rows (M=%d) do not fit in device memory (%s); "
                     "using batched k-NN launches", M, exc)
    groups: dict[int, list] = {}  # sorted path: every L of one k in one launch
    for i, L, kk in library_sizes(sizes, M, k):
        libs = draw_libraries(M, L, sample, spec.entropy, spec.random, spec.replacement)
        ns = libs.shape[0]
        if sorted_rows is not None:
            groups.setdefault(kk, []).append((i, sorted_rows.counts(libs, kk)))
            continue
        search = knn_device if neighbors is None else neighbors.device_table
        if exact is not None and isinstance(neighbors, HostBackend) and neighbors.exact:
            # a host index decides in float64 at float32's cost: the float64 call's rows
            extra = {**extra, "reference": exact.series}
        elif exact is not None and be.info.fp64 and getattr(neighbors, "name", "exact") == "exact":
            search = _float64_rows(exact, search)

        def batch(c0: int, c1: int, libs=libs, kk=kk, search=search, extra=extra):
            # one k-NN table (samples c0:c1 x M queries x kk) + lookup + rho per sample
            table = search(be, x_dev, n, E=E, tau=tau, k=kk, qpts=pts, lpts=pts[libs[c0:c1]],
                           radius=radius, real=real, q_dev=q_dev, **extra)
            pred, _ = lookup_device(be, table, y_dev, n, 1, off + Tp, weight="ccm", real=real)
            return _rho(skill_device(be, pred, table.nbatch, M, y_dev, n, 1, obs_dev, real=real,
                                     ccm=True, shift=shift))

        per = max(1, MAX_TABLE_ENTRIES // max(1, M * kk))
        out[i, :ns] = np.concatenate(run_blocked(
            be, batch, ns, block=per, parameter="sample (libraries per launch) or the series length",
            what=f"CCM k-NN tables ({M} rows x k={kk} per library)",
            nbytes=lambda s_, kk=kk: s_ * M * kk * (4 + item)))
    if groups:
        # one skill array read back once; the predictions (libraries x M) are made in
        # chunks, smaller ones when they do not fit in device memory
        cnts = [(kk, np.concatenate([c for _, c in items])) for kk, items in groups.items()]
        sk_dev = skill_out(be, sum(c.shape[0] for _, c in cnts))
        row = 0
        for kk, cnt in cnts:
            def chunk(c0: int, c1: int, kk=kk, cnt=cnt, row=row):
                c_dev = be.to_device(cnt[c0:c1])
                pred = sorted_rows.predict(c_dev, kk, q_dev, radius, y_dev, off + Tp)
                skill_device(be, pred, pred.shape[0], M, y_dev, n, 1, obs_dev, real=real,
                             out=sk_dev, row0=row + c0, ccm=True, shift=shift)

            run_blocked(be, chunk, cnt.shape[0], block=max(1, MAX_TABLE_ENTRIES // M),
                        parameter="sample (libraries per launch) or the series length",
                        what=f"CCM predictions ({M} rows per library)",
                        nbytes=lambda s_: s_ * M * (1 + item))
            row += cnt.shape[0]
        r = _rho(be.to_host(sk_dev).astype(np.float64))
        row = 0
        for items in groups.values():
            for i, c in items:
                out[i, :c.shape[0]] = r[row:row + c.shape[0]]
                row += c.shape[0]
    return out


def direction_lags(be, real: str, x: np.ndarray, y: np.ndarray, spec: CrossMapSpec,
                   lags: np.ndarray, exact: ExactOrder | None = None) -> np.ndarray:
    """rho samples ``(len(lags), len(sizes), sample)`` of x's embedding cross-mapping y
    at every lag (pyEDM's ``CCM(Tp=lag)`` each): time-delayed CCM (Ye et al. 2015, Sci
    Rep 5:14750; a driver's skill peaks at a lag <= 0, a peak at a positive lag marks
    synchrony, the reverse artefact).

    A state's neighbours do not depend on the lag: the direction sorts every query's
    full row of library distances once (:class:`SortedRows`) over all embeddable rows;
    a lag only changes which rows may serve (a library row needs its target ``t + lag``
    inside the data; a query without one is left out of rho: ``obs = -1``) and where
    the lookup reads the target (``tshift = offset + lag``). Each lag's libraries are
    drawn over its own valid rows as pyEDM's ``CCM(Tp=lag)`` draws them, so every lag's
    skill is pyEDM's. Without sorted rows (an inexact k-NN back-end, or where they do
    not pay, :func:`sorted_rows_pay`) each lag runs :func:`_direction` on its own
    (``spec.Tp`` is left aside: each lag is its own)."""
    n = x.shape[0]
    E, tau, k, radius, sizes, sample = (spec.E, spec.tau, spec.k, spec.radius, spec.sizes,
                                        spec.sample)
    union = ccm_valid_times(n, E, tau, 0)  # every embeddable row (the target's own time)
    U = union.size
    if not sorted_rows_pay(be.info, U, k) or not getattr(spec.neighbors, "exact", True):
        return np.stack([_direction(be, real, x, y, dataclasses.replace(spec, Tp=int(lag)),
                                    exact=exact) for lag in lags])
    dt = np.float64 if real == "double" else np.float32
    off = point_offset(E, tau)
    pts = (union - off).astype(np.int32)
    x_dev, yk = be.to_device(x.astype(dt)), y.astype(dt)
    y_dev, q_dev = be.to_device(yk), be.to_device(pts)
    hold(be, x_dev, y_dev, q_dev)
    rows = SortedRows(be, x_dev, n, E=E, tau=tau, pts=pts, q_dev=q_dev, real=real, exact=exact)
    out = np.full((lags.size, sizes.size, sample), np.nan)
    for a, lag in enumerate(lags):
        lag = int(lag)
        ok = (union + lag >= 0) & (union + lag < n)
        pos = np.flatnonzero(ok)  # this lag's valid rows, as pyEDM's CCM(Tp=lag) has them
        M = pos.size
        obs = np.where(ok, union + lag, -1).astype(np.int32)
        obs_dev = be.to_device(obs)
        shift = ccm_shifts_device(be, yk, obs)
        hold(be, obs_dev)
        for i, L, kk in library_sizes(sizes, M, k):
            libs = draw_libraries(M, L, sample, spec.entropy, spec.random, spec.replacement)
            cnt = rows.counts(pos[libs], kk)
            ns = cnt.shape[0]
            sk_dev = skill_out(be, ns)
            per = max(1, MAX_TABLE_ENTRIES // U)
            for c0 in range(0, ns, per):
                c1 = min(ns, c0 + per)
                pred = rows.predict(cnt[c0:c1], kk, q_dev, radius, y_dev, off + lag)
                skill_device(be, pred, c1 - c0, U, y_dev, n, 1, obs_dev, real=real,
                             out=sk_dev, row0=c0, ccm=True, shift=shift)
            out[a, i, :ns] = _rho(be.to_host(sk_dev).astype(np.float64))
    return out


def check_ccm_knn(knn: int, M: int, knn_method: Any) -> None:
    """knn beyond the fused kernel's MAX_KNN runs through the sorted full-library rows
    (exact back-end, M x M rows within MAX_SORTED_ENTRIES); else it is an error."""
    sorted_ok = knn_method == "exact" and M * M <= MAX_SORTED_ENTRIES
    hi = max(M - 1, 1) if sorted_ok else MAX_KNN
    if knn > max(hi, MAX_KNN):
        why = ("" if sorted_ok else f"; above {MAX_KNN} CCM needs knn_method='exact' and at most "
               f"{int(MAX_SORTED_ENTRIES ** 0.5)} usable rows (sorted full-library rows)")
        raise ValueError(f"knn={knn} is out of range; allowed: 1 <= knn <= {max(hi, MAX_KNN)}{why}")


def _rho(sk: np.ndarray) -> np.ndarray:
    """rho per skill row with pyEDM's rules: < 3 pairs NaN, zero variance 0."""
    r = sk[:, 0].copy()
    r[sk[:, 3] < 3] = np.nan
    r[(sk[:, 3] >= 3) & np.isnan(r)] = 0.0  # zero variance: pyEDM reports 0
    return r


@renamed_keywords(knn_backend="knn_method")
@checks_constant("ccm", ("x", "y", "target"))
def ccm(x, y=None, *, E: int | None = None, tau: int = 1, Tp: Any = 0, lib_sizes: Any,
        sample: int = 100, seed: int | None = None, knn: int | None = None,
        exclusion_radius: int = 0, random: bool = True, replacement: bool = False,
        dtype: Any = "float32", device: Any = None, backend: str | None = None,
        knn_method: str = "auto", knn_options: dict | None = None, columns: Any = None,
        target: Any = None, embedded: bool = False, valid_lib: Any = None,
        surrogates: int = 0, surrogate_method: str = "ebisuzaki",
        surrogate_options: dict | None = None) -> CCMResult:
    """CCM curves in both directions.

    ``rho_xy`` (pyEDM column ``x:y``): x's embedding cross-maps y; ``rho_yx``:
    y's embedding cross-maps x. ``lib_sizes`` as in pyEDM (list, or
    ``"start stop increment"``); ``sample`` random libraries per size (one
    contiguous library of the first L rows if ``random=False``); ``seed`` makes
    the draw reproducible (see module docstring for the exact RNG). ``tau > 0``
    lags into the past. ``dtype`` "float32" (default; each series centred and scaled
    first, :mod:`pyedmcl._precision`) or "float64".

    Multivariate libraries (pyEDM's CCM): ``x`` and ``y`` may be 2-D ``(L, m)`` or
    DataFrames (``columns`` picks x's columns; with ``y=None``, ``target`` names the
    columns of ``x`` that form y). Each side's state is ``E`` lags of each of its
    columns (or, ``embedded=True``, the columns); ``rho_xy`` cross-maps y's first
    column from x's state and ``rho_yx`` x's first column from y's state, with ``knn``
    defaulting to E + 1 (E = x's column count when embedded), as pyEDM. Rows with a NaN in
    a state vector or target, or outside ``valid_lib``, are left out (pyEDM's rule).

    Significance of two 1-D series (:mod:`pyedmcl.edm.ccm_null`):
    ``surrogates=n`` > 0 replaces, in each direction, the cross-mapped series (the putative driver) by ``n`` surrogates
    of ``surrogate_method`` ("ebisuzaki", "random_shuffle", "seasonal", "twin";
    ``surrogate_options`` go to :func:`pyedmcl.surrogates`) on the same libraries, and
    ``result.significance`` holds the null curves, p-values and null bands per library
    size (reproducible by ``seed``). ``result.convergence``: Kendall's tau of rho over
    library size, its p-value and a fitted curve.

    Time-delayed CCM (Ye et al. 2015): ``Tp`` a list or range of lags (negative
    included) cross-maps at every lag from one neighbour order per direction
    (:func:`direction_lags`) and returns a
    :class:`~pyedmcl.edm.results.CCMLagResult` (skill per lag and library size, and
    each direction's lag of highest skill); two 1-D series, no surrogates.
    """
    lagged = np.ndim(Tp) > 0
    if lagged and (y is None or is_multivariate(x, columns, embedded, valid_lib, None)
                   or is_multivariate(y) or surrogates):
        raise ValueError("Tp as a list of lags needs two 1-D series without NaN and "
                         "surrogates=0; give one Tp for multivariate CCM or surrogates")
    if y is None or is_multivariate(x, columns, embedded, valid_lib, None) \
            or is_multivariate(y):
        if surrogates:
            raise ValueError("surrogates= needs two 1-D series without NaN (multivariate "
                             "or missing-data CCM has no surrogate null yet)")
        return _ccm_states(x, y, E=E, tau=tau, Tp=Tp, lib_sizes=lib_sizes, sample=sample,
                           seed=seed, knn=knn, exclusion_radius=exclusion_radius, random=random,
                           replacement=replacement, dtype=dtype, device=device, backend=backend,
                           knn_method=knn_method, columns=columns, target=target,
                           embedded=embedded, valid_lib=valid_lib)
    if E is None:
        raise ValueError("E is required (the embedding dimension, 1 <= E <= 512)")
    be = get_backend(device, backend)
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    xs, ys = as_series(x, "x"), as_series(y, "y")
    if xs.size != ys.size:
        raise ValueError(f"x and y must be equally long, got {xs.size} and {ys.size}")
    if np.array_equal(xs, ys):  # xmap's diagonal is this map: warned, not refused
        from .._precision import _user_level
        from ..validation import SelfMapWarning

        warnings.warn("ccm: x and y are the same series: each cross-maps itself trivially "
                      "(rho near 1 whatever the dynamics); pass two different series",
                      SelfMapWarning, stacklevel=_user_level())
    surrogates = check_int(surrogates, "surrogates", 0)
    if surrogates:
        from ..primitives.surrogates import check_method, check_options
        surrogate_method = check_method(surrogate_method, "surrogate_method")
        check_options(surrogate_options, "surrogate_options")
    raw = (xs, ys)  # surrogates are made from the series as given
    # float32: each series centred and scaled (rho is invariant; see pyedmcl._precision)
    prep = prepare([xs, ys], dt, be.info.fp64, names=["x", "y"], what="ccm")
    real = prep.real
    xs, ys = prep.series
    spec, lags = _cross_map_spec(be, xs.size, E=E, tau=tau, Tp=Tp, lagged=lagged, knn=knn,
                                 sample=sample, exclusion_radius=exclusion_radius,
                                 lib_sizes=lib_sizes, seed=seed, random=random,
                                 replacement=replacement, knn_method=knn_method,
                                 knn_options=knn_options)
    # float32: the neighbours the float64 call chooses (its distances of the raw series)
    ex = [ExactOrder(r) for r in raw] if real == "float" else [None, None]
    if lagged:
        s_xy = direction_lags(be, real, xs, ys, spec, lags, exact=ex[0])
        s_yx = direction_lags(be, real, ys, xs, spec, lags, exact=ex[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return CCMLagResult(lags=lags, lib_sizes=spec.sizes, rho_xy=np.nanmean(s_xy, axis=2),
                                rho_yx=np.nanmean(s_yx, axis=2), rho_xy_samples=s_xy,
                                rho_yx_samples=s_yx, neighbors=spec.neighbors.info)
    s_xy = _direction(be, real, xs, ys, spec, exact=ex[0])
    s_yx = _direction(be, real, ys, xs, spec, exact=ex[1])
    rho_xy, rho_yx = _sample_means(s_xy, s_yx, spec.sizes, spec.radius)
    sig = None
    if surrogates:
        from .ccm_null import ccm_significance
        sig = ccm_significance(be, prep.dtype, real, *raw, xs, ys, rho_xy, rho_yx,
                               n=surrogates, method=surrogate_method,
                               options=surrogate_options, entropy=spec.entropy, spec=spec)
    return CCMResult(lib_sizes=spec.sizes, rho_xy=rho_xy, rho_yx=rho_yx, rho_xy_samples=s_xy,
                     rho_yx_samples=s_yx, neighbors=spec.neighbors.info, significance=sig)


def _cross_map_spec(be, n: int, *, E: Any, tau: Any, Tp: Any, lagged: bool, knn: Any,
                    sample: Any, exclusion_radius: Any, lib_sizes: Any, seed: Any,
                    random: bool, replacement: bool, knn_method: str,
                    knn_options: dict | None) -> tuple[CrossMapSpec, np.ndarray | None]:
    """:func:`ccm`'s options for two series of ``n`` values, validated (in the order
    they are refused) into the :class:`CrossMapSpec` of both directions, and the lags of
    a lag scan (None: one ``Tp``; the spec's ``Tp`` is then the lag leaving the fewest
    rows, which every check reads). The k-NN back-end is resolved for this device."""
    E = check_int(E, "E", 1, 512)
    tau = check_tau(tau)
    lags = None
    if lagged:
        lags = check_lags(Tp, n, "Tp")
        Tp = int(lags[np.argmax(np.abs(lags))])  # the lag leaving the fewest rows
    else:
        Tp = check_int(Tp, "Tp", -(n - 1), n - 1)
    knn = E + 1 if knn is None or knn == 0 else check_int(knn, "knn", 1, None)
    sample = check_int(sample, "sample", 1)
    exclusion_radius = check_int(exclusion_radius, "exclusion_radius", 0, n)
    sizes = parse_lib_sizes(lib_sizes, n, E)
    M = ccm_valid_times(n, E, tau, Tp).size
    if lagged:  # a lag scan; one Tp caps its libraries silently, as pyEDM does
        warn_short_lags(n, E, tau, lags, sizes, "Tp")
    if knn_method == "auto" and knn > MAX_KNN:  # only the sorted exact rows take such a knn
        knn_method = "exact"
    check_ccm_knn(knn, M, knn_method)
    if M < knn + 1:
        raise ValueError(f"series of {n} values leaves {M} usable rows for E={E}, tau={tau}, "
                         f"Tp={Tp}; needs at least knn+1 = {knn + 1}")
    seed = check_seed(seed)
    if random:
        # every sample's library (int64 indices, transient) and its row counts / rho
        # (kept for every size) live on the host: bound sample by the memory they need
        per_sample = 16 * int(sizes.max()) + 8 * M + sizes.size * (M + 16)
        check_host_memory("sample", sample, 2 * per_sample,
                          f"{sizes.size} library sizes x M={M} rows, both directions")
    entropy = np.random.SeedSequence(seed).entropy
    if not random:
        sample = 1
    neighbors = resolve_backend(knn_method, be, L=int(min(sizes.max(), M)), E=E, nq=M, k=knn,
                                options=knn_options, shape="ccm",
                                libraries=int(sizes.size * sample))
    return CrossMapSpec(E=E, tau=tau, Tp=Tp, k=knn, radius=exclusion_radius, sizes=sizes,
                        sample=sample, entropy=entropy, random=random, replacement=replacement,
                        neighbors=neighbors), lags


def _sample_means(s_xy: np.ndarray, s_yx: np.ndarray, sizes: np.ndarray,
                  exclusion_radius: int) -> tuple[np.ndarray, np.ndarray]:
    """rho per library size, the mean over its samples' rho (NaN samples left out; NaN
    where every sample is NaN, with one warning that says which sizes and why, instead
    of numpy's 'Mean of empty slice')."""
    empty = np.isnan(s_xy).all(axis=1) & np.isnan(s_yx).all(axis=1)
    if empty.any():
        from .._precision import _user_level

        why = (f"exclusion_radius={exclusion_radius} leaves fewer admissible neighbours "
               "than knn" if exclusion_radius else "too few admissible neighbours or pairs")
        warnings.warn(f"rho is NaN at library sizes {sizes[empty].tolist()}: no sample there "
                      f"predicted ({why})", RuntimeWarning, stacklevel=_user_level())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(s_xy, axis=1), np.nanmean(s_yx, axis=1)


def check_library_target(sx: StateSpace, sy: StateSpace) -> None:
    """Refuse a side whose library columns hold the series the other side cross-maps:
    ``rho_xy`` predicts y's first column from x's state, so an x that contains it maps
    it onto itself (rho near 1 whatever the coupling); likewise ``rho_yx``. A ValueError
    names the column and the remedy."""
    for lib, lname, tgt, tname, rho in ((sx, "x", sy, "y", "rho_xy"),
                                         (sy, "y", sx, "x", "rho_yx")):
        t = tgt.data[:, 0]
        for j in range(lib.nc):
            if np.array_equal(lib.data[:, j], t, equal_nan=True):
                col = lib.names[j]
                fix = ("leave it out of columns=" if lname == "x"
                       else "leave it out of y (or of target=)")
                raise ValueError(
                    f"ccm: {lname}'s column {col!r} (shape of {lname}: {lib.data.shape}) is "
                    f"the series {rho} cross-maps ({tname}'s first column {tgt.names[0]!r}): "
                    f"a library that holds its own target maps it onto itself (rho near 1 "
                    f"whatever the coupling); {fix}")


def _ccm_states(x, y, *, E, tau, Tp, lib_sizes, sample, seed, knn, exclusion_radius, random,
                replacement, dtype, device, backend, knn_method, columns, target, embedded,
                valid_lib) -> CCMResult:
    """CCM between two state spaces (see :func:`ccm`)."""
    if knn_method not in ("exact", "auto"):
        raise ValueError("multivariate CCM runs the exact k-NN; pass knn_method='exact' "
                         "(or 'auto')")
    if y is None:
        if target is None:
            raise ValueError("ccm needs y, or target= naming columns of x")
        sy = state_space(x, columns=target, embedded=embedded)
    else:
        sy = state_space(y, columns=target, embedded=embedded)
    sx = state_space(x, columns=columns, embedded=embedded)
    if sx.n != sy.n:
        raise ValueError(f"x and y must be equally long, got {sx.n} and {sy.n}")
    check_library_target(sx, sy)
    be = get_backend(device, backend)
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    n = sx.n
    if embedded:
        E = 1
    elif E is None:
        raise ValueError("E is required (the number of lags of each column) unless embedded=True")
    E = check_int(E, "E", 1, 512)
    tau = check_tau(tau)
    Tp = check_int(Tp, "Tp", -(n - 1), n - 1)
    sample = check_int(sample, "sample", 1)
    exclusion_radius = check_int(exclusion_radius, "exclusion_radius", 0, n)
    vl = check_valid_lib(valid_lib, n)
    seed = check_seed(seed)
    entropy = np.random.SeedSequence(seed).entropy
    # float32: each column centred (no scaling: distances across columns), float64 as given
    prep = prepare([filled(sx.data, 0).T, filled(sy.data, 0).T], dt, be.info.fp64,
                   names=["x", "y"], scale=False, what="ccm")
    def columns_of(series: list[np.ndarray]) -> list[np.ndarray]:
        cols = [np.ascontiguousarray(np.asarray(a, np.float64).T) for a in series]
        return [c[:, 0] if c.shape[1] == 1 else c for c in cols]

    xz, yz = columns_of(prep.series)
    # float32: the neighbours the float64 call chooses
    ex = [ExactOrder(c) for c in columns_of([filled(sx.data, 0).T, filled(sy.data, 0).T])] \
        if prep.real == "float" else [None, None]
    sizes = parse_lib_sizes(lib_sizes, n, E)

    def valid(state: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        ok = np.zeros(n, dtype=bool)
        span = (E - 1) * abs(tau)
        off = point_offset(E, tau)
        ok[off: off + n - span] = ~bad_points(state, E, tau)
        rows = np.arange(n) + Tp
        inside = (rows >= 0) & (rows < n)
        ok &= inside
        ok[inside] &= ~np.isnan(tgt[rows[inside]])
        return ok if vl is None else ok & vl

    # pyEDM 2.5.7 sets knn = E + 1 in Validate (E = x's column count when embedded)
    # before its per-direction "state dimension + 1" default could apply: both
    # directions use it
    k = (sx.default_knn(E) if knn is None or knn == 0 else check_int(knn, "knn", 1, None))
    spec = CrossMapSpec(E=E, tau=tau, Tp=Tp, k=k, radius=exclusion_radius, sizes=sizes,
                        sample=1 if not random else sample, entropy=entropy, random=random,
                        replacement=replacement)
    out = []
    for a, az, b, bz, e in ((sx, xz, sy, yz, ex[0]), (sy, yz, sx, xz, ex[1])):
        ok = valid(a.data, b.data[:, 0])
        check_ccm_knn(k, int(ok.sum()), "exact")
        if int(ok.sum()) < k + 1:
            raise ValueError(f"{int(ok.sum())} usable rows (complete state, finite target) for "
                             f"E={E}, tau={tau}, Tp={Tp}; need at least knn+1 = {k + 1}")
        tz = bz if bz.ndim == 1 else np.ascontiguousarray(bz[:, 0])
        out.append(_direction(be, prep.real, az, tz, spec, valid=ok, exact=e))
    s_xy, s_yx = out
    nb = resolve_backend("exact", be, L=int(sizes.max()), E=E * sx.nc, nq=n, k=k)
    return CCMResult(lib_sizes=sizes, rho_xy=np.nanmean(s_xy, axis=1),
                     rho_yx=np.nanmean(s_yx, axis=1), rho_xy_samples=s_xy, rho_yx_samples=s_yx,
                     neighbors=nb.info)
