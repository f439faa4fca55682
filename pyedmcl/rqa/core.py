"""Public RQA functions: auto-, cross- and joint-RQA by Divide & Recombine.

Conventions (see ``docs`` in each function):

* Embedding: point ``j = (s[j], s[j+tau], ..., s[j+(E-1)tau])`` as in PyRQA and
  pyunicorn, so cell ``(i, j)`` here is cell ``(i, j)`` there.
* Recurrence: ``d(i, j) < radius`` (strict, as both oracles), decided at ties as the
  chosen oracle does (``threshold_rule``, :mod:`pyedmcl.rqa.threshold`): ``"distance"``
  (default, pyunicorn: ``fl64(sqrt(d2)) < radius``) or ``"squared"`` (PyRQA's kernels:
  ``d2 < fl(radius * radius)`` in the working precision). Either way the kernels compare
  the squared distance with one precomputed value (no sqrt per cell).
* Theiler window ``w`` (``theiler``): diagonal lines are taken from diagonals with
  ``|i - j| >= w`` only. ``theiler_scope="lines"`` (default; PyRQA's
  ``theiler_corrector`` and pyunicorn, which is ``w = 1``): the window only
  removes diagonals from the diagonal histogram; RR, vertical and white lines use
  the whole matrix (main diagonal included). ``theiler_scope="matrix"`` (CRP
  toolbox): the band ``|i - j| < w`` is removed from the matrix for every
  measure; RR's denominator is then the number of cells outside the band.
* White vertical lines touching the top/bottom border are counted
  (``white_border=True``, PyRQA and pyunicorn); ``False`` drops them (CRP toolbox).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from clkernels import Backend, get_backend
from clkernels.collector import quiet_collector

from .._extremes import extremes
from .._precision import Prepared, prepare
from ..constant_series import RQA_WHY, checks_constant
from ..kernels.rqa_lines import RQA_LINES, LineSpec
from ..validation import as_series, check_dtype, check_embedding, check_int, check_metric
from . import multi  # noqa: F401  (sets the band runner of detect_lines: several devices, Dask)
from .dnr import Histograms, SpeculationFailed, detect_lines
from .exact import for_run as exact_for_run
from .inputs import state_vectors, std_of
from .job import RqaJob
from .radius import RateThreshold
from .result import RQAResult, band_cells, make_result
from .threshold import check_threshold_rule, kernel_threshold


def _backends(device: Any, devices: Any, backend: str | None) -> list[Backend]:
    if devices is not None:
        if isinstance(devices, str):
            devices = [d for d in devices.split(",") if d]
        bes = [get_backend(d, backend) for d in devices]
        if not bes:
            raise ValueError("devices= is empty; give at least one device selector")
        return bes
    if device is None:  # the default: among CPU runtimes, the one measured faster here
        from clkernels.runtime_choice import default_for

        from ..kernels.rqa_lines import RQA_LINES
        device = default_for((RQA_LINES,))
    return [get_backend(device, backend)]


def _backends_and_dtype(device: Any, devices: Any, backend: str | None, dtype: Any
                        ) -> tuple[list[Backend], np.dtype]:
    """The devices to run on and a dtype every one of them supports."""
    bes = _backends(device, devices, backend)
    dt = check_dtype(dtype, None)
    for be in bes:
        check_dtype(dt, be.info)
    return bes, dt


def _check_common(l_min: int, v_min: int, w_min: int, theiler: int, theiler_scope: str,
                  order: str, edge: int | None, n: int) -> tuple[int, int, int, int, int | None]:
    """Validated (l_min, v_min, w_min, theiler, edge) as ints (``2.0`` -> 2); a minimum
    line length is at most ``n``, the longest side of the matrix (no line is longer)."""
    n = max(n, 2)  # the defaults (2) stay valid on the tiniest series
    try:
        l_min = check_int(l_min, "l_min", 1, n)
        v_min = check_int(v_min, "v_min", 1, n)
        w_min = check_int(w_min, "w_min", 1, n)
    except ValueError as exc:
        raise ValueError(f"{exc} (no line is longer than the {n} embedded points)") from None
    theiler = check_int(theiler, "theiler", 0)
    if theiler_scope not in ("lines", "matrix"):
        raise ValueError(f"theiler_scope={theiler_scope!r} is not supported; allowed: 'lines' "
                         "(PyRQA/pyunicorn) or 'matrix' (CRP toolbox)")
    if order not in ("row", "column"):
        raise ValueError(f"order={order!r} is not supported; allowed: 'row', 'column'")
    if edge is not None:
        edge = check_int(edge, "edge", 1)
    return l_min, v_min, w_min, theiler, edge


def _check_E_tau(E: Any, tau: Any) -> tuple[int, int]:
    """E and tau as ints: integral floats accepted, the rest refused with the range."""
    return check_int(E, "E", 1, 512), check_int(tau, "tau", 1)


def check_scheduler(scheduler: Any, n_workers: Any) -> tuple[Any, int]:
    """``scheduler``: None, ``"local"``, a Dask scheduler address or a
    ``distributed.Client``; ``n_workers`` (LocalCluster processes) an int >= 1."""
    n_workers = check_int(n_workers, "n_workers", 1)
    if scheduler is None:
        return None, n_workers
    try:
        import distributed
    except ModuleNotFoundError as exc:
        if isinstance(scheduler, str) and scheduler.strip():
            raise ModuleNotFoundError("scheduler= needs Dask: pip install 'pyedmcl[dask]'") \
                from exc
        distributed = None  # a bad value is named as such, Dask or not
    if not ((distributed is not None and isinstance(scheduler, distributed.Client))
            or (isinstance(scheduler, str) and scheduler.strip())):
        raise ValueError(f"scheduler={scheduler!r} is not supported; allowed: 'local' (a "
                         "LocalCluster of n_workers processes), a Dask scheduler address or a "
                         "distributed.Client")
    if scheduler == "local":
        from ..dask_local import check_main_guard

        check_main_guard()
    return scheduler, n_workers


def check_radius(radius: Any, name: str = "radius") -> float:
    try:
        r = float(radius)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive number, got {radius!r}") from exc
    if not np.isfinite(r) or r <= 0:
        raise ValueError(f"{name}={radius!r} is out of range; allowed: a finite number > 0")
    return r


def check_rate(rate: Any, name: str = "recurrence_rate") -> float:
    try:
        rr = float(rate)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number in (0, 1), got {rate!r}") from exc
    if not (0.0 < rr < 1.0):
        raise ValueError(f"{name}={rate!r} is out of range; allowed: a number strictly between 0 and 1")
    return rr


def threshold_value(radius: float, metric: str, dt: np.dtype, rule: str = "distance") -> float:
    """What the kernel compares ``d`` (squared for Euclidean) with by ``d < thr`` under
    ``rule`` (:func:`pyedmcl.rqa.threshold.kernel_threshold`)."""
    return kernel_threshold(radius, metric, dt, rule)


def centred(series: list[np.ndarray], names: list[str], dt: np.dtype, bes: list[Backend], *,
             common: bool, what: str) -> tuple[np.dtype, list[np.ndarray]]:
    """float32: each series minus its mean (``common``: minus one mean of all, for
    distances *between* series), in float64, so that distances -- and every recurrence
    decision against a radius in data units -- do not depend on where the data sit
    (:mod:`pyedmcl._precision`; may switch the call to float64). float64: as given."""
    prep = centring(series, names, dt, bes, common=common, what=what)
    return prep.dtype, prep.series


def centring(series: list[np.ndarray], names: list[str], dt: np.dtype, bes: list[Backend], *,
             common: bool, what: str, deferred: bool = False,
             finite: bool = False) -> Prepared:
    """:func:`centred`'s inputs as a :class:`~pyedmcl._precision.Prepared`; ``deferred``:
    the float32 merge check runs in a background thread while the caller computes, and
    the caller asks ``float32_holds()`` before it returns (False: warned, run again in
    float64). The check is a sort: ~10 ms at N = 10^5 on the H100 host, half its call.
    ``finite``: the series are validated finite (:func:`~pyedmcl.validation.as_series`),
    so their extremes, which the call's validation took, bound the centred values (no
    pass over them for the largest magnitude)."""
    ext = [tuple(np.array([v]) for v in extremes(a)[::-1]) for a in series] if finite else None
    return prepare(series, dt, all(be.info.fp64 for be in bes), names=names, scale=False,
                   common_shift=common, what=what, deferred=deferred, extremes=ext)


#: what to pass instead of a 2-D x (rqa reads one series, or state vectors when told so)
EMBEDDED_REMEDY = ("pass one column (x[:, j]), or embedded=True if its rows are state "
                   "vectors (one column per coordinate)")


@checks_constant("rqa", ("x",), RQA_WHY, multi=False)
@quiet_collector
def rqa(x: Any, *, E: int = 1, tau: int = 1, radius: float | None = None,
        recurrence_rate: float | None = None, metric: str = "euclidean", theiler: int = 1,
        l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
        theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
        devices: Any = None, backend: str | None = None, edge: int | None = None,
        order: str = "row", params: dict[str, Any] | None = None,
        threshold_rule: str = "distance", window: int | None = None,
        step: int | None = None, threshold_std: float | None = None,
        embedded: bool = False, neighbourhood: str = "radius", knn: int | None = None,
        threshold_max: float | None = None, scheduler: Any = None, n_workers: int = 2) -> Any:
    """Recurrence quantification analysis of one series by Divide & Recombine.

    Give exactly one of ``radius`` (fixed radius) or ``recurrence_rate`` (the
    radius is chosen so that the recurrence rate is close to it, see
    :func:`pyedmcl.rqa.radius.radius_for_rate`). ``devices`` (a list or a
    comma-separated string of selectors) splits the work over several devices:
    independent tasks (row ranges, :mod:`pyedmcl.rqa.ranges`, or lane bands,
    :mod:`pyedmcl.rqa.bands`), each device taking the next when it is free (devices
    of one model: one row range each, of equal modelled time).
    ``scheduler`` runs the same tasks on Dask workers: a
    scheduler address, ``"local"`` (a LocalCluster of ``n_workers`` processes) or a
    ``distributed.Client``; worker ``i`` uses device ``i`` of ``devices`` (round
    robin) or the default device (:mod:`pyedmcl.rqa.dask_rqa`). The histograms equal
    the one-device run's bit for bit either way; the radius for ``recurrence_rate``
    is found on this process's first device.
    ``edge`` is the sub-matrix edge length (default: tuned per device); ``params``
    replaces the device's tuned launch parameters of the line kernels by a point of
    their tuning space (``VEC``, ``WG``, ``EDGE`` required; flags left out are off:
    the same histograms by another path; a name or value outside the space is refused,
    EDGE may be any positive integer). In float32 the
    series is centred (its mean subtracted in float64) first: a radius is in data units,
    so distances, not the data's offset, decide (see :mod:`pyedmcl._precision`). With a
    fixed radius float32 decides every cell as ``dtype="float64"`` does (a radius found
    for ``recurrence_rate`` or FAN's per-column radii are float32 order statistics, and
    their cells are decided in float32): the few cells whose float32 distance
    lies within a proven rounding bound of the radius (ties on decimal data) are
    recomputed in double from the series as given (:mod:`pyedmcl.rqa.exact`), so the
    histograms equal float64's bit for bit; a device without fp64 decides them in
    float32 (one ``PrecisionWarning``: ties may differ there).
    ``threshold_rule`` decides cells whose distance equals the radius (ties on quantized
    data) as pyunicorn (``"distance"``, default) or PyRQA's kernels (``"squared"``).
    With ``recurrence_rate`` the achieved rate is ``RR``; the target is in ``settings``.

    ``threshold_std`` gives the radius in units of the series' standard deviation
    (pyunicorn's ``threshold_std``; population std in float64 of all values given).
    ``threshold_max`` gives it as a fraction of the largest distance between two
    embedded points (the attractor's diameter; CRP toolbox's max-norm radius), found on
    the host in float64 in ``O(N^2 E)`` (:func:`pyedmcl.rqa.fan.max_distance`).
    ``embedded=True``: ``x`` is a 2-D array of state vectors, one row per point and one
    column per coordinate (pyEDM's multivariate embedding: the columns are the state
    vector); ``E``/``tau`` are then taken from it (E = columns) and must be left at 1.

    ``neighbourhood="fan"`` with ``knn``: a fixed amount of nearest neighbours, column
    ``j`` holding the ``knn`` points nearest to point ``j`` (itself included; CRP toolbox
    ``fan``, pyunicorn's ``local_recurrence_rate`` with ``knn = int(lrr * (N - 1))``); no
    radius then, ``result.radius`` holds each column's radius (:mod:`pyedmcl.rqa.fan`).

    Returns an :class:`RQAResult`; with ``window`` (and ``step``, default ``window``) a
    ``pandas.DataFrame`` of every measure per window of ``window`` embedded points
    (:func:`pyedmcl.rqa.windowed.windowed_rqa`; the radius is found per window with
    ``recurrence_rate``, while ``threshold_std`` and ``threshold_max`` take the whole
    series' standard deviation or diameter: one radius for every window). With a fixed
    radius the windows are computed in one pass over the band of the matrix they cover
    (each cell once; in float32 one pass per run of windows centred alike), rows
    identical to one ``rqa()`` per window; otherwise one run per window.
    """
    _check_neighbourhood(neighbourhood, radius, recurrence_rate, threshold_std, threshold_max,
                         knn)
    x, E, tau, radius = _radius_of_data(x, E, tau, embedded, metric, radius, threshold_std,
                                        threshold_max)
    if scheduler is not None and (window is not None or step is not None
                                  or neighbourhood == "fan"):
        raise ValueError("scheduler= runs one recurrence matrix on a Dask cluster; it is not "
                         "supported with window=/step= or neighbourhood='fan'")
    if window is not None or step is not None:
        if window is None:
            raise ValueError("step= needs window= (the number of embedded points per window)")
        from .windowed import windowed_rqa

        if params is not None:  # the one pass over the band takes none: refused alike
            RQA_LINES.check_params(params)
        return windowed_rqa(rqa, x, band=_band_windows, window=window, step=step, E=E,
                            tau=tau, radius=radius, recurrence_rate=recurrence_rate, metric=metric, theiler=theiler,
                            l_min=l_min, v_min=v_min, w_min=w_min, dtype=dtype,
                            theiler_scope=theiler_scope, white_border=white_border,
                            device=device, devices=devices, backend=backend, edge=edge,
                            order=order, params=params, threshold_rule=threshold_rule,
                            neighbourhood=neighbourhood, knn=knn)
    s = as_series(x, "x", remedy=EMBEDDED_REMEDY)
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    n = check_embedding(s.size, E, tau, "x")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler,
                                                       theiler_scope, order, edge, n)
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    scheduler, n_workers = check_scheduler(scheduler, n_workers)
    prep = centring([s], ["x"], dt, bes, common=False, what="rqa",
                    deferred=scheduler is None, finite=True)
    job = RqaJob(E=E, tau=tau, n=n, radius=radius, recurrence_rate=recurrence_rate,
                 metric=metric, theiler=theiler, theiler_scope=theiler_scope, l_min=l_min,
                 v_min=v_min, w_min=w_min, white_border=white_border, edge=edge, order=order,
                 params=params, threshold_rule=threshold_rule, neighbourhood=neighbourhood,
                 knn=knn, scheduler=scheduler, n_workers=n_workers)
    return _beside_the_check(prep, [s], lambda dt, xs, sp: _rqa_prepared(
        xs[0], dt, bes, job, raw=s, speculation=sp))


def _check_neighbourhood(neighbourhood: str, radius: Any, recurrence_rate: Any,
                         threshold_std: Any, threshold_max: Any, knn: Any) -> None:
    """:func:`rqa`'s neighbourhood set one way: FAN by ``knn`` alone, else at most one of
    ``radius``, ``recurrence_rate``, ``threshold_std`` and ``threshold_max``."""
    if neighbourhood not in ("radius", "fan"):
        raise ValueError(f"neighbourhood={neighbourhood!r} is not supported; allowed: 'radius' "
                         "(fixed radius or rate) or 'fan' (k nearest neighbours per column)")
    if neighbourhood == "fan":
        if radius is not None or recurrence_rate is not None or threshold_std is not None \
                or threshold_max is not None:
            raise ValueError("neighbourhood='fan' takes knn=, not radius=, recurrence_rate=, "
                             "threshold_std= or threshold_max=")
        if knn is None:
            raise ValueError("neighbourhood='fan' needs knn= (neighbours per column, itself "
                             "included)")
    elif knn is not None:
        raise ValueError("knn= is for neighbourhood='fan'")
    given = [n for n, v in (("radius", radius), ("recurrence_rate", recurrence_rate),
                            ("threshold_std", threshold_std), ("threshold_max", threshold_max))
             if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one of radius=, recurrence_rate=, threshold_std= or "
                         f"threshold_max=, got {', '.join(given)}")


def _radius_of_data(x: Any, E: Any, tau: Any, embedded: bool, metric: str, radius: Any,
                    threshold_std: Any, threshold_max: Any) -> tuple[Any, Any, Any, Any]:
    """``(x, E, tau, radius)``: state vectors (``embedded``) as a series with their E and
    tau, and the radius in data units where it is given relative to the data (the
    series' standard deviation, or the largest distance between two embedded points)."""
    if threshold_std is not None:
        radius = check_radius(threshold_std, "threshold_std") * std_of(x, embedded)
    if embedded:
        x, E, tau = state_vectors(x, E, tau)
    if threshold_max is not None:
        from .fan import max_distance

        f = check_radius(threshold_max, "threshold_max")
        E_, tau_ = _check_E_tau(E, tau)
        s_ = as_series(x, "x")
        check_embedding(s_.size, E_, tau_, "x")
        radius = f * max_distance(s_, E_, tau_, check_metric(metric))
        if not radius > 0:
            raise ValueError("threshold_max: every distance is 0 (a constant series)")
    return x, E, tau, radius


def mirrored_diagonals(h: Histograms, n: int, w: int) -> np.ndarray:
    """The diagonal-line histogram of a symmetric ``n`` x ``n`` matrix from its upper
    triangle's (``h``, this call's own: doubled in place, over the bins in use where ``h``
    knows them; an N-long pass and copy cost ~1.7 ms at N ~ 10^6): each upper diagonal
    has a lower twin, and with no Theiler window the main diagonal (d(i, i) = 0 < radius)
    is one line of length ``n``."""
    d = h.diagonal
    if h.nonzero is not None:
        d[h.nonzero[0]] *= 2
    else:
        d[:d.size if h.used is None else h.used[0]] *= 2
    if w == 0:
        d[n - 1] += 1
    return d


def _beside_the_check(prep: Prepared, raw: list[np.ndarray],
                      run: Callable[[np.dtype, list[np.ndarray], Any], RQAResult]) -> RQAResult:
    """``run(dtype, series, speculation)`` on ``prep``'s series while its float32 merge
    check runs (``speculation``: the check, for the launches to stop at once if it
    fails: :class:`~pyedmcl.rqa.dnr.SpeculationFailed`); where the check fails, warned,
    ``run`` again in float64 on the ``raw`` series."""
    try:
        res = run(prep.dtype, prep.series, prep.speculation())
    except SpeculationFailed:  # the check failed while the devices ran: stopped early
        res = None
    if prep.float32_holds() and res is not None:
        return res
    return run(np.dtype(np.float64), raw, None)  # warned: float64


def _rqa_prepared(s: np.ndarray, dt: np.dtype, bes: list[Backend], job: RqaJob, *,
                  raw: np.ndarray | None = None, speculation: Any = None) -> RQAResult:
    """:func:`rqa` of the validated series ``s`` (centred for float32) in dtype ``dt``, as
    ``job`` says; ``raw``: the series as given (what the float64 path reads: a rate's
    radius and FAN's thresholds are its; None: ``s``); ``speculation``: the float32 merge
    check still running (the line detection stops with
    :class:`~pyedmcl.rqa.dnr.SpeculationFailed` once it fails)."""
    raw = s if raw is None else raw
    rule = check_threshold_rule(job.threshold_rule)
    E, tau, n, metric = job.E, job.tau, job.n, job.metric
    w = int(job.theiler)
    if job.neighbourhood == "fan":
        from .fan import fan_rqa

        return fan_rqa(s, job, dt, rule, bes, raw=raw)
    th = _resolve_thresholds(job.radius, job.recurrence_rate, raw, None, E, tau, metric, dt,
                             bes, rule)
    radius, thr = th.radius, th.thr
    xs = s.astype(dt)
    ex = exact_for_run(dt, (raw, raw), (xs, xs), radius, metric, rule, E, thr, thr64=th.thr64)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(job.theiler_scope == "matrix" and w > 0),
                    white_border=bool(job.white_border), fma=(rule == "squared"),
                    exact=ex is not None)
    kmin = max(w, 1)
    h = detect_lines(bes, xs, xs, thr, spec=spec, n_rows=n,
                     n_cols=n, diag_ranges=[(kmin, n)] if kmin < n else [], w=w, edge=job.edge,
                     order=job.order, params=job.params, symmetric=True,
                     scheduler=job.scheduler, n_workers=job.n_workers, speculation=speculation,
                     exact=ex)
    return auto_result(h, spec, n=n, w=w, radius=radius, dt=dt,
                       theiler_scope=job.theiler_scope, l_min=job.l_min, v_min=job.v_min,
                       w_min=job.w_min, rule=rule, recurrence_rate=job.recurrence_rate,
                       white_border=job.white_border)


def auto_result(h: Histograms, spec: LineSpec, *, n: int, w: int, radius: float,
                dt: np.dtype, theiler_scope: str, l_min: int, v_min: int, w_min: int,
                rule: str, recurrence_rate: float | None, white_border: Any) -> RQAResult:
    """The :class:`RQAResult` of an auto-RQA run's histograms ``h`` (upper triangle's
    diagonals, mirrored here) of ``spec``'s matrix of ``n`` points, Theiler window ``w``."""
    diag = mirrored_diagonals(h, n, w)
    n_cells = n * n - (band_cells(n, w) if spec.theiler_matrix else 0)
    nonzero = None
    if h.nonzero is not None:  # the main diagonal's line (w = 0) is bin n - 1, the last
        nz = h.nonzero[0]
        if w == 0 and not (nz.size and nz[-1] == n - 1):
            nz = np.append(nz, n - 1)
        nonzero = (nz, h.nonzero[1], h.nonzero[2])
    return make_result(h, diag, n_cells, radius, l_min, v_min, w_min, nonzero=nonzero,
                       settings=dict(
        kind="rqa", E=spec.E, tau=spec.tau, metric=spec.metric, theiler=w,
        theiler_scope=theiler_scope, l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt),
        white_border=white_border, n_points=n, devices=h.per_device,
        launches=h.launches, device_tasks=h.device_tasks, symmetric=h.symmetric,
        threshold_rule=rule, recurrence_rate=recurrence_rate))


@checks_constant("cross_rqa", ("x", "y"), RQA_WHY, multi=False)
def cross_rqa(x: Any, y: Any, *, E: int = 1, tau: int = 1, radius: float | None = None,
              recurrence_rate: float | None = None, metric: str = "euclidean", theiler: int = 0,
              l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
              white_border: bool = True, device: Any = None, devices: Any = None,
              backend: str | None = None, edge: int | None = None, order: str = "row",
              params: dict[str, Any] | None = None, threshold_rule: str = "distance",
              scheduler: Any = None, n_workers: int = 2, window: int | None = None,
              step: int | None = None) -> Any:
    """Cross-RQA of two series (lengths may differ), as PyRQA's cross analysis.

    The cross recurrence matrix has one column per embedded point of ``x`` and one
    row per point of ``y``: vertical (and white) lines run along ``y`` for a fixed
    point of ``x`` (PyRQA's orientation). Diagonal lines are taken on diagonals
    with ``|i - j| >= theiler`` (default 0: every diagonal), on both sides of the main
    diagonal as pyunicorn's cross plot and PyRQA's Python baseline; PyRQA 8's OpenCL
    kernels leave out only ``0 <= j - i < theiler`` (an unsigned difference wraps on the
    other side), so their diagonal histograms differ from these for ``theiler >= 2``.
    RR divides by ``n_x * n_y``. ``devices``, ``scheduler`` and ``n_workers`` as in
    :func:`rqa`.

    ``window`` (and ``step``, default ``window``): windowed cross-RQA (the CRP toolbox's
    window and shift) of two series of one length, a ``pandas.DataFrame`` with one row per
    window of ``window`` embedded points of both, each row ``cross_rqa`` of that window's
    samples exactly (:func:`pyedmcl.rqa.windowed.windowed_pair`; one run per window).
    """
    if window is not None or step is not None:
        return _windowed_pair(cross_rqa, "cross_rqa", x, y, window, step, scheduler, dict(
            E=E, tau=tau, radius=radius, recurrence_rate=recurrence_rate, metric=metric,
            theiler=theiler, l_min=l_min, v_min=v_min, w_min=w_min, dtype=dtype,
            white_border=white_border, device=device, devices=devices, backend=backend,
            edge=edge, order=order, params=params, threshold_rule=threshold_rule))
    sx = as_series(x, "x")
    sy = as_series(y, "y")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    nx = check_embedding(sx.size, E, tau, "x")
    ny = check_embedding(sy.size, E, tau, "y")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler, "lines",
                                                       order, edge, max(nx, ny))
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    rule = check_threshold_rule(threshold_rule)
    scheduler, n_workers = check_scheduler(scheduler, n_workers)
    prep = centring([sx, sy], ["x", "y"], dt, bes, common=True, what="cross_rqa",
                    deferred=scheduler is None)
    w = int(theiler)
    n_rows, n_cols = ny, nx  # rows: points of y; columns: points of x
    if w == 0:
        ranges = [(-(n_rows - 1), n_cols)]
    else:
        ranges = [r for r in ((-(n_rows - 1), -w + 1), (w, n_cols)) if r[1] > r[0]]

    def run(dt: np.dtype, series: list[np.ndarray], speculation: Any) -> RQAResult:
        cx, cy = series
        th = _resolve_thresholds(radius, recurrence_rate, sy, sx, E, tau, metric, dt, bes,
                                 rule)  # from the raw series: the float64 path's
        radius_, thr = th.radius, th.thr
        zy, zx = cy.astype(dt), cx.astype(dt)
        ex = exact_for_run(dt, (sy, sx), (zy, zx), radius_, metric, rule, E, thr,
                           thr64=th.thr64)
        spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                        white_border=bool(white_border), fma=(rule == "squared"),
                        exact=ex is not None)
        h = detect_lines(bes, zy, zx, thr, spec=spec, n_rows=n_rows,
                         n_cols=n_cols, diag_ranges=ranges, w=w, edge=edge, order=order,
                         params=params, scheduler=scheduler, n_workers=n_workers,
                         speculation=speculation, exact=ex)
        return make_result(h, h.diagonal.copy(), nx * ny, radius_, l_min, v_min, w_min, dict(
            kind="cross_rqa", E=E, tau=tau, metric=metric, theiler=w, l_min=l_min,
            v_min=v_min, w_min=w_min, dtype=str(dt), white_border=white_border,
            n_points_x=nx, n_points_y=ny, devices=h.per_device, launches=h.launches,
            device_tasks=h.device_tasks, threshold_rule=rule, recurrence_rate=recurrence_rate))

    return _beside_the_check(prep, [sx, sy], run)


@checks_constant("joint_rqa", ("x", "y"), RQA_WHY, multi=False)
def joint_rqa(x: Any, y: Any, *, E: int = 1, tau: int = 1, radius: Any = None,
              recurrence_rate: Any = None, metric: str = "euclidean", theiler: int = 1,
              l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
              theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
              devices: Any = None, backend: str | None = None, edge: int | None = None,
              order: str = "row", params: dict[str, Any] | None = None,
              threshold_rule: str = "distance", scheduler: Any = None,
              n_workers: int = 2, window: int | None = None, step: int | None = None) -> Any:
    """Joint RQA: ``JR = R_x & R_y`` (same length series, same E/tau/metric).

    ``radius`` is one number for both series or a pair ``(r_x, r_y)``; or
    ``recurrence_rate``, one rate or a pair, fixes each series' own recurrence rate
    (pyunicorn's ``JointRecurrencePlot(recurrence_rate=(rr_x, rr_y))``: each radius is
    the order statistic of its own distances), so the joint rate is lower. The radii
    used are ``result.radius`` (a pair). ``devices``, ``scheduler`` and ``n_workers``
    as in :func:`rqa`.

    ``window`` (and ``step``, default ``window``): windowed joint RQA, a
    ``pandas.DataFrame`` with one row per window of ``window`` embedded points, each row
    ``joint_rqa`` of that window's samples exactly (radii found per window for
    ``recurrence_rate``: columns ``radius_x``, ``radius_y``;
    :func:`pyedmcl.rqa.windowed.windowed_pair`; one run per window).
    """
    if window is not None or step is not None:
        return _windowed_pair(joint_rqa, "joint_rqa", x, y, window, step, scheduler, dict(
            E=E, tau=tau, radius=radius, recurrence_rate=recurrence_rate, metric=metric,
            theiler=theiler, l_min=l_min, v_min=v_min, w_min=w_min, dtype=dtype,
            theiler_scope=theiler_scope, white_border=white_border, device=device,
            devices=devices, backend=backend, edge=edge, order=order, params=params,
            threshold_rule=threshold_rule))
    sx = as_series(x, "x")
    sy = as_series(y, "y")
    if sx.size != sy.size:
        raise ValueError(f"joint RQA needs series of equal length, got x: {sx.size}, y: {sy.size}")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    n = check_embedding(sx.size, E, tau, "x")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler,
                                                       theiler_scope, order, edge, n)
    rule = check_threshold_rule(threshold_rule)
    if (radius is None) == (recurrence_rate is None):
        raise ValueError("give exactly one of radius= (one number or a pair (r_x, r_y)) or "
                         "recurrence_rate= (one rate or a pair) for joint RQA")
    rx, ry = _pair(radius, "radius")
    qx, qy = _pair(recurrence_rate, "recurrence_rate")
    for name, check, pair in (("radius", check_radius, (rx, ry)),
                              ("recurrence_rate", check_rate, (qx, qy))):
        for series, value in zip("xy", pair, strict=True):
            if value is not None:  # the error names the series (a pair's said neither)
                check(value, f"{name} of {series}")
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    scheduler, n_workers = check_scheduler(scheduler, n_workers)
    # each series centred by its own mean; float64 for both where either cannot hold
    prep = centring([sx, sy], ["x", "y"], dt, bes, common=False, what="joint_rqa",
                    deferred=scheduler is None)
    w = int(theiler)
    kmin = max(w, 1)

    def run(dt: np.dtype, series: list[np.ndarray], speculation: Any) -> RQAResult:
        thr = {}
        for name, r, q, s in (("x", rx, qx, sx), ("y", ry, qy, sy)):  # raw: float64's
            try:
                thr[name] = _resolve_thresholds(r, q, s, None, E, tau, metric, dt, bes, rule)
            except ValueError as exc:  # (a rate below the floor of one series): say which
                raise ValueError(f"series {name}: {exc}") from None
        rx_, thr_x, ry_, thr_y = thr["x"].radius, thr["x"].thr, thr["y"].radius, thr["y"].thr
        a, b = series[0].astype(dt), series[1].astype(dt)
        ex = exact_for_run(dt, (sx, sx), (a, a), rx_, metric, rule, E, thr_x,
                           pair2=((sy, sy), (b, b), ry_, thr_y), thr64=thr["x"].thr64,
                           thr264=thr["y"].thr64)
        spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float", joint=True,
                        theiler_matrix=(theiler_scope == "matrix" and w > 0),
                        white_border=bool(white_border), fma=(rule == "squared"),
                        exact=ex is not None)
        h = detect_lines(bes, a, a, thr_x, spec=spec, n_rows=n, n_cols=n,
                         diag_ranges=[(kmin, n)] if kmin < n else [], x2=b, y2=b,
                         thr2=thr_y, w=w, edge=edge, order=order, params=params,
                         symmetric=True, scheduler=scheduler, n_workers=n_workers,
                         speculation=speculation, exact=ex)
        diag = mirrored_diagonals(h, n, w)
        n_cells = n * n - (band_cells(n, w) if spec.theiler_matrix else 0)
        return make_result(h, diag, n_cells, (rx_, ry_), l_min, v_min, w_min, dict(
            kind="joint_rqa", E=E, tau=tau, metric=metric, theiler=w,
            theiler_scope=theiler_scope, l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt),
            n_points=n, devices=h.per_device, launches=h.launches,
            device_tasks=h.device_tasks, symmetric=h.symmetric, threshold_rule=rule,
            recurrence_rate=recurrence_rate))

    return _beside_the_check(prep, [sx, sy], run)


def _windowed_pair(one: Callable[..., Any], what: str, x: Any, y: Any, window: Any,
                   step: Any, scheduler: Any, kw: dict[str, Any]) -> Any:
    """:func:`~pyedmcl.rqa.windowed.windowed_pair` of ``one`` (cross_rqa or joint_rqa)."""
    if scheduler is not None:
        raise ValueError("scheduler= runs one recurrence matrix on a Dask cluster; it is not "
                         "supported with window=/step=")
    if window is None:
        raise ValueError("step= needs window= (the number of embedded points per window)")
    from .windowed import windowed_pair

    return windowed_pair(one, x, y, window=window, step=step, what=what, **kw)


def _pair(value: Any, name: str) -> tuple[Any, Any]:
    """One value for both series, or a pair; ``(None, None)`` for None."""
    if value is None:
        return None, None
    if np.ndim(value) == 0:
        return value, value
    v = tuple(value)
    if len(v) != 2:
        raise ValueError(f"{name} must be one number or a pair (x, y), got {value!r}")
    return v[0], v[1]


def _resolve_radius(radius: Any, rate: Any, rows: np.ndarray, cols: np.ndarray | None, E: int,
                    tau: int, metric: str, dt: np.dtype, bes: list[Backend]) -> float:
    return _resolve_threshold(radius, rate, rows, cols, E, tau, metric, dt, bes)[0]


def _resolve_threshold(radius: Any, rate: Any, rows: np.ndarray, cols: np.ndarray | None,
                       E: int, tau: int, metric: str, dt: np.dtype, bes: list[Backend],
                       rule: str = "distance") -> tuple[float, float]:
    """``(radius, thr)``: the radius (given, or found for the rate) and the kernels'
    threshold under ``rule`` (:func:`_resolve_thresholds`)."""
    t = _resolve_thresholds(radius, rate, rows, cols, E, tau, metric, dt, bes, rule)
    return t.radius, t.thr


def _resolve_thresholds(radius: Any, rate: Any, rows: np.ndarray, cols: np.ndarray | None,
                        E: int, tau: int, metric: str, dt: np.dtype, bes: list[Backend],
                        rule: str = "distance") -> RateThreshold:
    """The radius (given, or found for the rate), the kernels' threshold in ``dt`` and the
    float64 path's threshold (:class:`~pyedmcl.rqa.radius.RateThreshold`). ``rows`` and
    ``cols`` are the series the float64 path reads (the raw ones, not float32's centred
    inputs): for a rate the radius and ``thr64`` are then the float64 path's bit for bit
    in either dtype (:func:`~pyedmcl.rqa.radius.rate_threshold`)."""
    if (radius is None) == (rate is None):
        raise ValueError("give exactly one of radius= (fixed radius) or recurrence_rate= "
                         "(fixed recurrence rate)")
    if radius is not None:
        r = check_radius(radius)
        return RateThreshold(r, kernel_threshold(r, metric, dt, rule),
                             kernel_threshold(r, metric, np.float64, rule))
    from .radius import rate_threshold

    return rate_threshold(rows, cols, check_rate(rate), E=E, tau=tau, metric=metric,
                          dtype=dt, backend=bes[0], rule=rule)


def _band_windows(s: np.ndarray, n: int, window: int, step: int, E: int, tau: int, *,
                  radius: Any, metric: str = "euclidean", theiler: Any = 1, l_min: Any = 2,
                  v_min: Any = 2, w_min: Any = 2, dtype: Any = "float32",
                  theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
                  devices: Any = None, backend: str | None = None, edge: Any = None,
                  order: str = "row", threshold_rule: str = "distance",
                  **_: Any) -> list[dict[str, Any]] | str:
    """Rows of the windows of ``s`` (``n`` embedded points) from one pass over the band
    (:mod:`pyedmcl.rqa.band`), validated as :func:`rqa` validates them. In float32 each
    window is prepared as :func:`rqa` prepares it (centred by its mean rounded to a power
    of two at or below its std, or run in float64 where float32 would merge its values):
    consecutive windows prepared alike share one pass over the same working values.
    A string (why; one run per window instead) where fewer than two windows share a
    preparation on average. ``edge``, ``order`` and ``params`` shape D&R runs only (same results)."""
    from .._precision import Affine, prepare
    from .band import band_passes, band_rows

    metric = check_metric(metric)
    l_min, v_min, w_min, theiler, _edge = _check_common(l_min, v_min, w_min, theiler,
                                                        theiler_scope, order, edge, window)
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    rule = check_threshold_rule(threshold_rule)
    r = check_radius(radius)
    w = int(theiler)
    tm = theiler_scope == "matrix" and w > 0
    span = (E - 1) * tau
    starts = range(0, n - window + 1, step)
    keys: list[tuple[Any, float, float]] = []
    fp64 = all(be.info.fp64 for be in bes)
    for a in starts:
        if dt == np.float64:
            keys.append((np.dtype(np.float64), 0.0, 1.0))
            continue
        prep = prepare([s[a: a + window + span]], dt, fp64, names=["x"], scale=False,
                       what="rqa")
        keys.append((prep.dtype, float(prep.affine[0].shift[0]),
                     float(prep.affine[0].scale[0])))
    groups = [k for k in range(len(keys)) if k == 0 or keys[k] != keys[k - 1]]
    if 2 * len(groups) > len(keys):
        return ("in float32 most windows are centred differently (fewer than two windows "
                "per shared centring); use dtype='float64'")
    rows: list[dict[str, Any]] = []
    for ka, kb in zip(groups, [*groups[1:], len(keys)], strict=True):
        gdt, shift, scale = keys[ka]
        pts = (kb - ka - 1) * step + window
        raw = s[ka * step: ka * step + pts + span]
        seg = raw
        if gdt != np.float64:
            seg = Affine(np.array([shift]), np.array([scale])).forward(raw.copy())
        z, thr = seg.astype(gdt), kernel_threshold(r, metric, gdt, rule)
        ex = exact_for_run(gdt, (raw, raw), (z, z), r, metric, rule, E, thr)
        for nrec, d, v, wh in band_passes(
                bes, z, thr, E=E, tau=tau,
                metric=metric, real="double" if gdt == np.float64 else "float",
                fma=(rule == "squared"), theiler_matrix=tm, w=w,
                white_border=bool(white_border), n_points=pts, window=window, step=step,
                exact=None if ex is None else (ex.x, ex.thr64, ex.b)):
            rows += band_rows(nrec, d, v, wh, window, w, tm, l_min, v_min, w_min)
    for row in rows:
        row["radius"] = r
    return rows
