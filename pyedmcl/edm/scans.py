"""Skill scans: embedding dimension, prediction interval, exclusion radius.

``embed_dimension`` runs the fused scan (:mod:`.scan_fused`,
``knn_scan/knn_scan.cl.mako``): the squared distance at E extends the one at E-1
by one coordinate, so one pass over the (query, library) pairs keeps a top-K_E
list for every E at once; one lookup and one skill launch cover all E and one
read brings the skills back. Where the per-E rows do not nest (future lags,
overlapping lib pairs, max_E > 32) it falls back to the generic scan below.

The generic scan (Tp, exclusion radius, and that fallback) resolves every
scanned value's plan first, uploads the series and all distinct point lists
before any launch, enqueues the k-NN + lookup + on-device skill pipeline of every
value with all skills landing in one device array, and reads that array back
once: one host sync per scan, not one per value. Predictions never leave the
device. Semantics per value are exactly :func:`pyedmcl.simplex`'s (pyEDM's
EmbedDimension / PredictInterval / PredictExclusionRadius); the fused tables are
bit-identical to the per-E kernel's.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import numpy as np

from clkernels import get_backend
from clkernels.memory import describe, is_oom

from .._precision import Affine, prepare
from ..constant_series import checks_constant
from ..kernels.knn_scan import MAX_FUSED_E
from ..primitives.knn import knn_request
from ..primitives.lookup import lookup_requests, skill_out
from ..primitives.ranges import MAX_KNN, check_tau, resolve
from ..primitives.scan_fused import run_fused, scan_layout
from ..validation import as_integer, as_series, check_dtype, check_int
from . import scan_buckets
from .results import SkillScan
from .row_check import on_decimal_grid
from .simplex import DeviceData, as_targets, enqueue_plan, plan_device, run_plan
from .statespace import is_multivariate, state_space

log = logging.getLogger("pyedmcl.edm.scans")

#: pyEDM's default exclusion radii for PredictExclusionRadius
DEFAULT_RADII = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 25, 30)


def _scan_dtype(x, dtype, device, backend) -> tuple[Any, np.dtype]:
    """The backend and the type a scan of ``x`` computes in: float64 for decimal data asked
    in float32 (decimals tie in exact arithmetic: float32's roundings choose other k-th
    neighbours than float64's, and a scan has no float32 row check)."""
    be = get_backend(device, backend)
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    if dt == np.float32 and be.info.fp64 and on_decimal_grid(as_series(x, "x")):
        dt = np.dtype(np.float64)
    return be, dt


def _inputs(x, target, dtype, device, backend, what: str = "this scan"
            ) -> tuple[Any, np.dtype, np.ndarray, np.ndarray, Affine]:
    """Backend, dtype, validated series and its single target (every scan takes one), as
    kernel inputs (float32: centred, :mod:`pyedmcl._precision`; Simplex's distance floor
    is in data units), and the target's map back to data units (MAE/RMSE)."""
    be, dt = _scan_dtype(x, dtype, device, backend)
    xs = as_series(x, "x")
    y, single = as_targets(xs if target is None else target, xs.size)
    if not single:
        from ..validation import not_one_series

        raise ValueError(not_one_series("target", np.shape(target),
                                        "a scan predicts one target: pass one series (call "
                                        "once per target, or use simplex, which takes several)"))
    if target is None:
        prep = prepare([xs], dt, be.info.fp64, names=["x"], scale=False, what=what)
        return be, prep.dtype, prep.series[0], prep.series[0][None, :], prep.affine[0]
    prep = prepare([xs, y], dt, be.info.fp64, names=["x", "target"], scale=False, what=what)
    return be, prep.dtype, prep.series[0], prep.series[1], prep.affine[1]


def _skills(name: str, values, sk: np.ndarray, fy: Affine) -> SkillScan:
    return SkillScan(name, np.asarray(values), sk[:, 0], fy.back_spread(sk[:, 1]),
                     fy.back_spread(sk[:, 2]))


def _scan(x, target, name: str, values, make_plan, dtype, device, backend,
          bucketed: bool = False) -> SkillScan:
    """One k-NN + lookup + skill pipeline per value, every kernel built first, one host
    sync. ``bucketed`` (E above the fused range): the pipelines of :mod:`.scan_buckets`,
    two programs per bucket of E values instead of per E, the same skills."""
    be, dt, xs, y, fy = _inputs(x, target, dtype, device, backend, f"the {name} scan")
    plans = [make_plan(xs.size, v) for v in values]
    data = DeviceData.upload(be, xs, y, dt)
    lists = [plan_device(be, p) for p in plans]  # every upload before any launch
    done = _PREBUILT.setdefault(be, set())
    key = (data.real, data.nt, bucketed, tuple(id(p) for p in plans))  # plans are cached
    if key not in done:  # (once per backend and scan: ~0.2 ms a value of host time)
        be.prebuild(_scan_requests(be, plans, data, bucketed))
        if len(done) >= 256:
            done.clear()
        done.add(key)
    out = skill_out(be, len(plans) * data.nt)
    blocked: dict[int, np.ndarray] = {}
    for i, (p, (q_dev, l_dev, obs_dev)) in enumerate(zip(plans, lists, strict=True)):
        try:
            if bucketed:
                scan_buckets.enqueue(data, p, q_dev, l_dev, obs_dev, out, i * data.nt)
            else:
                enqueue_plan(data, p, q_dev, l_dev, obs_dev, out, i * data.nt)
        except Exception as exc:  # this plan's table does not fit: Simplex in query blocks
            if not is_oom(exc):
                raise
            blocked[i] = run_plan(data, p, predictions=False)[2]
    sk = be.to_host(out).astype(np.float64)  # the scan's one host sync
    for i, rows in blocked.items():
        sk[i * data.nt:(i + 1) * data.nt] = rows
    return _skills(name, values, sk, fy)


#: per backend: the scans (dtype, targets, plan ids) whose kernels :func:`_scan` prebuilt.
#: A plan id reused by another plan would only leave that scan's kernels to build as its
#: launches reach them (the same kernels)
_PREBUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scan_requests(be, plans, data: DeviceData, bucketed: bool = False) -> list[tuple]:
    """The kernels of every plan's :func:`.simplex.enqueue_plan` (k-NN, lookup, skill), for
    one :meth:`clkernels.Backend.prebuild`: a scan over E builds a k-NN program per E and a
    lookup per knn, which build in parallel there instead of one by one as the
    pipelines reach them (``bucketed``: per bucket, :mod:`.scan_buckets`)."""
    reqs: list[tuple] = []
    for p in plans:
        if bucketed:
            reqs += scan_buckets.requests(be, p, p.pred_points.size * data.nt, data.real)
            continue
        reqs.append(knn_request(be, E=p.E, tau=p.tau, k=p.knn, qpts=p.pred_points,
                                lpts=p.lib_points, real=data.real))
        reqs += lookup_requests(be, p.knn, p.pred_points.size * data.nt, real=data.real,
                                skill_k=1)
    return reqs


#: largest max_E (the k-NN kernels are specialised for E <= 512 coordinates)
MAX_SCAN_E = 512

#: largest max_E whose float64 E scan takes the fused scan on a CPU (by default): its
#: float64 program's build grows steeply with E, past what all of :mod:`.scan_buckets`'
#: programs cost (decision 0154, ``bench/scan_paths.py``)
FUSED_F64_MAX_E = 20


def _check_max_E(max_E: Any, knn: Any) -> tuple[int, int]:
    """max_E in [1, MAX_SCAN_E], and the largest E the fused k-NN kernels serve (knn, or
    its default E + 1, at most MAX_KNN = 64); larger E run per E on the slower path."""
    default_knn = knn is None or (not isinstance(knn, bool) and knn == 0)
    max_E = as_integer(max_E, "max_E", f"in [1, {MAX_SCAN_E}]")
    if not 1 <= max_E <= MAX_SCAN_E:
        raise ValueError(f"max_E={max_E} is out of range; allowed: in [1, {MAX_SCAN_E}]")
    if default_knn:
        fast = min(max_E, MAX_KNN - 1)
    else:
        fast = max_E if isinstance(knn, int | np.integer) and int(knn) <= MAX_KNN else 0
    return max_E, fast


@checks_constant("embed_dimension", ("x", "target"))
def embed_dimension(x, target=None, *, max_E: int = 10, tau: int = 1, Tp: int = 1,
                    knn: int | None = None, exclusion_radius: int = 0, lib=None, pred=None,
                    dtype: Any = "float32", device: Any = None, backend: str | None = None,
                    fused: bool | None = None, columns: Any = None,
                    valid_lib: Any = None) -> SkillScan:
    """Simplex skill for E = 1..max_E (knn = E + 1, or ``knn`` for every E); ``.best`` is the top E.

    Runs the fused scan (:mod:`.scan_fused`: every E's k-NN table from one pass over
    the pairs, one lookup and one skill launch) for E <= 32 whenever the per-E rows nest
    (tau > 0, no overlapping lib pairs); E beyond 32 (and, in float64 on a CPU, every E of
    a max_E above 20) on :mod:`.scan_buckets`' kernels, two programs per 8 E values;
    rows that do not nest, or ``fused=False``: one k-NN + lookup + skill pipeline per
    E, their kernels built at once. All give :func:`pyedmcl.simplex`'s tables. E whose
    knn (default E + 1) exceeds the fused kernels' 64 neighbours run one
    :func:`pyedmcl.simplex` each (full sorted distance rows: slower). State spaces
    (``columns``, E lags of each), missing data and ``valid_lib`` as in
    :func:`pyedmcl.simplex`: one Simplex per E.
    """
    max_E, fast = _check_max_E(max_E, knn)
    kw = dict(tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius, lib=lib, pred=pred,
              dtype=dtype, device=device, backend=backend)
    if is_multivariate(x, columns, False, valid_lib, target):
        return _per_value(x, target, "E", range(1, max_E + 1), columns=columns,
                          valid_lib=valid_lib, **kw)
    if fast < max_E:
        head = _embed_dimension(x, target, fast, max_E, fused=fused, **kw) if fast else None
        return _beyond_fused(head, x, target, range(fast + 1, max_E + 1), max_E, **kw)
    return _embed_dimension(x, target, max_E, max_E, fused=fused, **kw)


def _fused_default() -> Any:
    """The CPU runtime that tuning measured fastest for the fused scan on this machine,
    where several work and no GPU is the default (None: the ordinary default)."""
    from clkernels.runtime_choice import default_for

    from ..kernels.knn_scan import KNN_SCAN
    return default_for((KNN_SCAN,))


def _embed_dimension(x, target, max_E: int, shown_max_E: int, *, tau, Tp, knn, exclusion_radius,
                     lib, pred, dtype, device, backend, fused) -> SkillScan:
    """:func:`embed_dimension` for E = 1..max_E on the fused kernels (errors name the
    user's ``shown_max_E``)."""
    tau = check_tau(tau)
    Tp = as_integer(Tp, "Tp", "an integer with |Tp| < the series length")
    exclusion_radius = as_integer(exclusion_radius, "exclusion_radius", "an integer >= 0")
    values = list(range(1, max_E + 1))

    def make_plan(n, E):
        try:
            return resolve(n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                           lib=lib, pred=pred)
        except ValueError as exc:
            if E == 1:
                raise
            raise ValueError(f"max_E={shown_max_E} is too large for this series and library: "
                             f"E={E} fails ({exc}); use max_E <= {E - 1}") from exc

    # E beyond the fused kernels' range run per E on buckets' kernels (every plan resolved
    # first: a too large max_E fails before any work); in float32 E 1..32 take the fused
    # scan. Three kernels and two a bucket where the per-E path builds two per E (first use
    # on runtimes that compile each kernel at its first launch, PoCL's). float64 (asked
    # for, or decimal data) above max_E 20 on a CPU: buckets from E = 1, as the fused
    # scan's float64 program alone takes longer to build than all of them (FUSED_F64_MAX_E)
    split = max_E  # E above it take the buckets
    if fused is None and tau > 0 and max_E > FUSED_F64_MAX_E:
        be, dt = _scan_dtype(x, dtype, device, backend)
        if dt != np.float32 and not be.info.is_gpu:
            split = 0
        elif max_E > MAX_FUSED_E:
            split = MAX_FUSED_E
    tail = None
    if split < max_E:
        tail = _scan(x, target, "E", values[split:], make_plan, dtype, device, backend,
                     bucketed=True)
        if split == 0:
            return tail
    head = _fused_or_per_E(x, target, values[:split], make_plan, tau=tau, Tp=Tp, knn=knn,
                           exclusion_radius=exclusion_radius, lib=lib, pred=pred, dtype=dtype,
                           device=device, backend=backend, fused=fused)
    return head if tail is None else _joined(head, tail)


def _fused_or_per_E(x, target, values: list[int], make_plan, *, tau, Tp, knn, exclusion_radius,
                    lib, pred, dtype, device, backend, fused) -> SkillScan:
    """E = 1 .. len(values) on the fused scan where it applies (``fused`` not False, the
    rows nest, the tables fit), else one pipeline per E."""
    max_E = len(values)
    if fused is not False:
        if device is None:  # the default: among CPU runtimes, the one measured faster here
            device = _fused_default()
        be, dt, xs, y, fy = _inputs(x, target, dtype, device, backend, "embed_dimension")
        lay = scan_layout(xs.size, max_E, tau=tau, Tp=Tp, knn=knn,
                          exclusion_radius=exclusion_radius, lib=lib, pred=pred)
        if lay is None and fused:
            raise ValueError("fused=True needs nested per-E rows (tau > 0, lib pairs that do not "
                             "overlap, max_E <= 32); use fused=None to fall back to the per-E path")
        if lay is not None:
            real = "double" if dt == np.float64 else "float"
            try:
                sk, _ = run_fused(be, lay, xs, None if target is None else y[0], dt, real)
                return _skills("E", values, sk, fy)
            except Exception as exc:  # all E's tables at once do not fit: per-E path
                if not is_oom(exc):
                    raise
                if fused:
                    raise describe(be, getattr(exc, "nbytes", 0), "max_E or the series length "
                                   "(or use fused=None)", "fused embed_dimension scan", exc) from exc
                log.info("embed_dimension: fused tables do not fit in device memory (%s); "
                         "running per E", exc)
    return _scan(x, target, "E", values, make_plan, dtype, device, backend)


def _per_value(x, target, name: str, values, **kw) -> SkillScan:
    """One :func:`pyedmcl.simplex` per value of parameter ``name`` (the state-space path)."""
    from .simplex import simplex

    rows = [simplex(x, target, **{**kw, name: v}) for v in values]
    return SkillScan(name, np.asarray(list(values)), np.array([float(r.rho) for r in rows]),
                     np.array([float(r.mae) for r in rows]), np.array([float(r.rmse) for r in rows]))


def _beyond_fused(head: SkillScan | None, x, target, Es, max_E: int, **kw) -> SkillScan:
    """``head`` extended by one Simplex per E of ``Es`` (the slow path of large knn)."""
    from ..progress import Progress, shown
    from .simplex import simplex

    rows = []
    Es = list(Es)
    with Progress(len(Es), f"E {Es[0]}..{Es[-1]}" if Es else "E", shown(), unit="E") as bar:
        for E in Es:
            try:
                r = simplex(x, target, E=E, **kw)
            except ValueError as exc:
                if E == 1:
                    raise
                raise ValueError(f"max_E={max_E} is too large for this series and library: "
                                 f"E={E} fails ({exc}); use max_E <= {E - 1}") from exc
            rows.append((E, float(r.rho), float(r.mae), float(r.rmse)))
            bar.update()
    v, rho, mae, rmse = (np.array([row[i] for row in rows]) for i in range(4))
    tail = SkillScan("E", v.astype(int), rho, mae, rmse)
    return tail if head is None else _joined(head, tail)


def _joined(head: SkillScan, tail: SkillScan) -> SkillScan:
    """One E scan of ``head``'s values then ``tail``'s."""
    return SkillScan("E", np.concatenate([head.values, tail.values]),
                     np.concatenate([head.rho, tail.rho]), np.concatenate([head.mae, tail.mae]),
                     np.concatenate([head.rmse, tail.rmse]))


@checks_constant("predict_interval", ("x", "target"))
def predict_interval(x, target=None, *, E: int | None = None, max_Tp: int = 10, tau: int = 1,
                     knn: int | None = None, exclusion_radius: int = 0, lib=None, pred=None,
                     dtype: Any = "float32", device: Any = None, backend: str | None = None,
                     columns: Any = None, embedded: bool = False,
                     valid_lib: Any = None) -> SkillScan:
    """Simplex skill for Tp = 1..max_Tp (state spaces, missing data and ``valid_lib`` as
    in :func:`pyedmcl.simplex`: one Simplex per Tp)."""
    if is_multivariate(x, columns, embedded, valid_lib, target):
        n = state_space(x, target, columns=columns, embedded=embedded).n
        max_Tp = check_int(max_Tp, "max_Tp", 1, max(1, n - 1))
        return _per_value(x, target, "Tp", range(1, max_Tp + 1), E=E, tau=tau, knn=knn,
                          exclusion_radius=exclusion_radius, lib=lib, pred=pred, dtype=dtype,
                          device=device, backend=backend, columns=columns, embedded=embedded,
                          valid_lib=valid_lib)
    if E is None:
        raise ValueError("E is required (the embedding dimension, 1 <= E <= 512)")
    n = as_series(x, "x").size
    max_Tp = check_int(max_Tp, "max_Tp", 1, max(1, n - 1))  # Tp >= n predicts nothing
    return _scan(x, target, "Tp", list(range(1, max_Tp + 1)),
                 lambda n, Tp: resolve(n, E=E, tau=tau, Tp=Tp, knn=knn,
                                       exclusion_radius=exclusion_radius, lib=lib, pred=pred),
                 dtype, device, backend)


@checks_constant("predict_exclusion_radius", ("x", "target"))
def predict_exclusion_radius(x, target=None, *, E: int | None = None, Tp: int = 1, tau: int = 1,
                             knn: int | None = None, radii=DEFAULT_RADII, lib=None, pred=None,
                             dtype: Any = "float32", device: Any = None,
                             backend: str | None = None, columns: Any = None,
                             embedded: bool = False, valid_lib: Any = None) -> SkillScan:
    """Simplex skill per exclusion radius (pyEDM's default radii 0..30); state spaces,
    missing data and ``valid_lib`` as in :func:`pyedmcl.simplex` (one Simplex per radius)."""
    if isinstance(radii, str):
        radii = [int(r) for r in radii.split()]
    radii = [check_int(r, "radii", 0) for r in radii]
    if not radii:
        raise ValueError("radii is empty; give exclusion radii >= 0")
    if is_multivariate(x, columns, embedded, valid_lib, target):
        return _per_value(x, target, "exclusion_radius", radii, E=E, Tp=Tp, tau=tau, knn=knn,
                          lib=lib, pred=pred, dtype=dtype, device=device, backend=backend,
                          columns=columns, embedded=embedded, valid_lib=valid_lib)
    if E is None:
        raise ValueError("E is required (the embedding dimension, 1 <= E <= 512)")
    return _scan(x, target, "exclusion_radius", radii,
                 lambda n, r: resolve(n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=r,
                                      lib=lib, pred=pred),
                 dtype, device, backend)
