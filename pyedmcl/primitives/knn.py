"""Exact all-k-NN table by the fused embedding + distance + top-k kernel.

The k-NN table (for each query: k library points and their distances) is the
one structure Simplex, CCM and the scans share (kEDM's lookup table). Memory is
O(queries * k); no distance matrix is ever stored. The kernel family (space,
tuning, launch) is :mod:`pyedmcl.kernels.knn`; here: validation, allocation and
query blocking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, get_backend, run_blocked
from clkernels.tuning import Params

from .._deprecation import renamed_keywords
from ..kernels.knn import KNN, SLIDE_SPAN_MAX, is_contiguous, slide_applies
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
               params: Params | None = None, q_dev=None, l_dev=None, nc: int = 1,
               near: int = 0) -> DeviceKnn:
    """Launch the fused kernel; ``lpts`` is (nl,) or (nbatch, nl) ascending kernel points.

    ``q_dev`` / ``l_dev``: ``qpts`` / ``lpts`` already on the device (no upload).
    ``nc`` > 1: ``x_dev`` is a row-major ``(n, nc)`` matrix and a point holds ``E`` lags
    of each of its ``nc`` columns (see :mod:`.statespace`). ``near``: the table's last
    ``near`` entries need only hold the neighbours within a few float32 distance bounds
    of entry ``k - 1 - near`` (float32 euclidean; -1 / inf past them: the ``NEAR``
    contract of knn.cl.mako), which a float32 table widened for the row check then
    costs no more than the narrower one.
    """
    if k > MAX_KNN:
        raise ValueError(f"knn={k} is out of range for the fused k-NN kernel; allowed: 1 <= knn "
                         f"<= {MAX_KNN} (larger knn: knn_rows_sorted, full sorted rows)")
    lpts = np.ascontiguousarray(np.atleast_2d(lpts), dtype=np.int32)
    nbatch, nl = lpts.shape
    nq = int(qpts.size)
    given = params
    spec, params, contiguous = _knn_launch(be, E, tau, k, nq, lpts, metric, real, nc, given)
    if near and metric == "euclidean" and real == "float":
        spec = {**spec, "NEAR": near}
    if given is not None and given.get("SLIDE", 0) and not slide_applies(spec, contiguous):
        raise ValueError(f"params SLIDE={params['SLIDE']} needs contiguous library points, "
                         f"one column and (E-1)*|tau| <= {SLIDE_SPAN_MAX}; use SLIDE=0 for these lib_points")
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


def _knn_launch(be: Backend, E: int, tau: int, k: int, nq: int, lpts: np.ndarray, metric: str,
                real: str, nc: int, params: Params | None = None
                ) -> tuple[dict[str, Any], Params, bool]:
    """The spec, launch parameters (``params``, else the family's choice) and library
    contiguity of :func:`knn_device`'s launch (``lpts`` 2-D int32)."""
    nbatch, nl = lpts.shape
    spec = {"E": E, "TAU": abs(tau), "K": k, "METRIC": metric, "REAL": real}
    if nc != 1:  # the kernel's E counts coordinates: E lags of nc columns
        spec = {**spec, "E": E * nc, "NC": nc}
    contiguous = is_contiguous(lpts)
    if params is None:
        params = KNN.params_for(be, spec, max(nq, nl), nq_total=nq * nbatch,
                                contiguous=contiguous)
    return spec, params, contiguous


def knn_device_chunked(be: Backend, x_dev, n: int, *, E: int, tau: int, k: int, q_dev,
                       nq: int, l_dev, nl: int, radius: int, chunks: int, params: Params,
                       metric: str = "euclidean", real: str = "float") -> DeviceKnn:
    """:func:`knn_device` for few queries over a long library (one list ``l_dev`` of
    ``nl`` points, queries ``q_dev``): the library scanned in ``chunks`` overlapping
    chunks by as many work-groups per query (:func:`~pyedmcl.kernels.knn.chunk_layout`),
    their tables merged on the device in the kernel's total order, so the table equals
    the single launch's bit for bit. ``params``: the per-chunk launch (any variant)."""
    from ..kernels.knn import chunk_layout

    nb, length, stride = chunk_layout(nl, chunks)
    spec = {"E": E, "TAU": abs(tau), "K": k, "METRIC": metric, "REAL": real}
    dt = np.float64 if real == "double" else np.float32
    raw_idx = be.empty((nb, nq, k), np.int32)
    raw_dist = be.empty((nb, nq, k), dt)
    idx = be.empty((1, nq, k), np.int32)
    dist = be.empty((1, nq, k), dt)
    KNN.launch(be, {**params, "RAW": 1}, spec, x_dev, q_dev, nq, l_dev, length, nb, radius,
               raw_idx, raw_dist, lstride=stride)
    KNN.launch_merge(be, spec, nb, q_dev, nq, raw_idx, raw_dist, idx, dist)
    hold(be, raw_idx, raw_dist, idx, dist, q_dev, l_dev)
    return DeviceKnn(idx, dist, 1, nq, k, keep=(q_dev, l_dev))


def widened_params(be: Backend, *, E: int, tau: int, k: int, qpts: np.ndarray,
                   lpts: np.ndarray, base_k: int, metric: str = "euclidean",
                   real: str = "float", nc: int = 1) -> Params | None:
    """Launch parameters for a table of ``k`` neighbours widened from ``base_k`` (float32
    Simplex's row check reads one or two more): on GPUs the tuning entries of that NEAR
    table (float32 euclidean, :func:`knn_device`'s ``near``) where the device has some,
    else the tuning of ``base_k``, the table it widens, not the next bucket's (H100, E =
    7: 9 neighbours at the tuning of 16 took 15% longer than 8); None elsewhere, where
    :func:`knn_device` then takes the wider table's own (Intel's CPU runtime, E = 7, L =
    20,000: its K16 tuning is the faster one, even for 8 neighbours)."""
    if not be.info.is_gpu:
        return None
    lpts = np.ascontiguousarray(np.atleast_2d(lpts), dtype=np.int32)
    spec = {"E": E, "TAU": abs(tau), "K": k, "METRIC": metric, "REAL": real}
    if nc != 1:
        spec = {**spec, "E": E * nc, "NC": nc}
    nq = int(qpts.size)
    kw = dict(nq_total=nq * lpts.shape[0], contiguous=is_contiguous(lpts))
    if k > base_k and metric == "euclidean" and real == "float":
        # the NEAR table knn_device(near=k - base_k) launches: its own tuning entries
        # where there are some, else those of the table it widens (KnnKernel.params_for)
        return KNN.params_for(be, {**spec, "NEAR": k - base_k}, max(nq, lpts.shape[1]), **kw)
    return KNN.params_for(be, spec, max(nq, lpts.shape[1]), bucket_k=base_k, **kw)


def range_lists(be: Backend, x_dev, *, E: int, tau: int, qpts: np.ndarray, l_dev, nl: int,
                lim: np.ndarray, radius: int, cap: int, real: str = "double"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Every library point within each query's squared Euclidean limit ``lim`` (host
    arrays): ``(points (nq, cap), counts (nq,))``, a query's points in library order
    (``l_dev``, ``nl`` kernel points on the device), -1 past them; a count above ``cap``
    says its list is cut. Library points within ``radius`` rows of the query are skipped
    (``knn/range.cl.mako``)."""
    nq = int(qpts.size)
    if nq == 0:
        return np.zeros((0, cap), np.int32), np.zeros(0, np.int32)
    dt = np.float64 if real == "double" else np.float32
    q_dev = be.to_device(np.ascontiguousarray(qpts, np.int32))
    lim_dev = be.to_device(np.ascontiguousarray(lim, dt))
    out = be.empty((nq, cap), np.int32)
    count = be.empty(nq, np.int32)
    hold(be, q_dev, lim_dev, out, count)
    KNN.launch_range(be, real, E, tau, x_dev, l_dev, nl, q_dev, lim_dev, nq, radius, cap,
                     out, count)
    got = be.to_host(out)
    cnt = be.to_host(count)
    got[np.arange(cap)[None, :] >= np.minimum(cnt, cap)[:, None]] = -1
    return got, cnt


def knn_request(be: Backend, *, E: int, tau: int, k: int, qpts: np.ndarray, lpts: np.ndarray,
                metric: str = "euclidean", real: str = "float", nc: int = 1) -> tuple:
    """The kernel :func:`knn_device` builds for these arguments (default parameters), as
    ``(template, params, name)`` for :meth:`clkernels.Backend.prebuild`."""
    lpts = np.ascontiguousarray(np.atleast_2d(lpts), dtype=np.int32)
    spec, params, _ = _knn_launch(be, E, tau, k, int(qpts.size), lpts, metric, real, nc)
    return KNN.request(be, params, spec)


def knn_rows_sorted(be: Backend, x_dev, n: int, *, E: int, tau: int, k: int, qpts: np.ndarray,
                    lpts: np.ndarray, radius: int, metric: str = "euclidean", real: str = "float",
                    nc: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The k-NN table for any ``k`` (the fused kernel keeps at most ``MAX_KNN``): every
    query's distances to the whole library from the knn family's ``sorted`` variant (the
    fused kernel's arithmetic, so the same distances), sorted on the host in the same
    total order (distance, |p - l|, l), in query blocks that fit the device.

    Returns host ``(idx (nq, k) int32 kernel points, dist (nq, k))``, -1/inf where fewer
    than ``k`` library points are admissible (``|p - l| > radius``). O(nq * nl) work and
    transfer: the slow path for large ``k``.
    """
    lpts = np.ascontiguousarray(lpts, dtype=np.int32).reshape(-1)
    qpts = np.ascontiguousarray(qpts, dtype=np.int32).reshape(-1)
    nl = lpts.size
    spec = {"E": E, "TAU": abs(tau), "K": 1, "METRIC": metric, "REAL": real}
    if nc != 1:
        spec = {**spec, "E": E * nc, "NC": nc}
    dt = np.float64 if real == "double" else np.float32
    wg = min(64, be.info.max_work_group_size)
    l_dev = be.to_device(lpts)
    hold(be, l_dev)
    kk = min(k, nl)

    def rows(q0: int, q1: int) -> tuple[np.ndarray, np.ndarray]:
        m = q1 - q0
        q_dev = be.to_device(qpts[q0:q1])
        acc, fin = be.empty((m, nl), dt), be.empty((m, nl), dt)
        hold(be, q_dev, acc, fin)
        KNN.launch_sorted(be, spec, wg, x_dev, q_dev, m, l_dev, nl, acc, fin)
        a, f = be.to_host(acc), be.to_host(fin)
        diff = lpts[None, :].astype(np.int64) - qpts[q0:q1, None].astype(np.int64)
        excluded = np.abs(diff) <= radius
        tie = 2 * np.abs(diff) + (diff > 0)
        if dt == np.float32:  # non-negative floats order like their bit patterns
            key = (a.view(np.int32).astype(np.int64) << 32) | tie
            key[excluded] = np.iinfo(np.int64).max
            order = np.argsort(key, axis=1, kind="stable")[:, :kk]
        else:
            a = np.where(excluded, np.inf, a)
            order = np.lexsort((tie, a), axis=-1)[:, :kk]
        bad = np.take_along_axis(excluded, order, axis=1)
        idx = np.where(bad, -1, lpts[order]).astype(np.int32)
        dist = np.where(bad, np.inf, np.take_along_axis(f, order, axis=1))
        if kk < k:
            idx = np.pad(idx, ((0, 0), (0, k - kk)), constant_values=-1)
            dist = np.pad(dist, ((0, 0), (0, k - kk)), constant_values=np.inf)
        return idx, dist

    blocks = run_blocked(be, rows, qpts.size, parameter="the number of query points",
                         what=f"full distance rows ({qpts.size} queries x {nl} library points)",
                         nbytes=lambda m: 2 * m * nl * np.dtype(dt).itemsize)
    return (np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks]))


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


@renamed_keywords(k="knn")
def knn_table(x, *, E: int, tau: int = 1, knn: int | None = None, lib_points=None,
              query_points=None, exclusion_radius: int = 0, metric: str = "euclidean",
              dtype: Any = "float32", device: Any = None, backend: str | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """All-k-NN table of the time-delay embedding of ``x`` (kernel point coordinates).

    Point ``j`` is the window ``(x[j], x[j+|tau|], ..., x[j+(E-1)|tau|])`` (the
    vector at time ``j + (E-1)tau`` for past lags). ``lib_points`` /
    ``query_points`` default to every point; library point ``l`` is skipped for
    query ``p`` when ``|p - l| <= exclusion_radius`` (-1: no exclusion). Ties
    are ordered by distance, then ``|p - l|``, then ``l`` (pyEDM's Simplex order).
    ``knn`` neighbours per query (default ``E + 1``; up to the library size: above
    ``MAX_KNN`` = 64 full distance rows are sorted instead, slower, same order).
    Returns ``(indices (nq, knn) int32, distances (nq, knn))``, -1/inf where fewer than
    ``knn`` neighbours are admissible. In float32 ``x`` is centred (in float64) first, so
    neither depends on the data's offset; distances stay in data units.
    """
    be = get_backend(device, backend)
    dt = check_dtype(dtype, be.info)
    metric = check_metric(metric)
    s, E, tau, lp, qp = check_points(x, E, tau, lib_points, query_points)
    k = E + 1 if knn is None else check_int(knn, "knn", 1, lp.size)
    s, dt = centre(s, dt, be.info.fp64, "knn_table")
    real = "double" if dt == np.float64 else "float"
    xd = be.to_device(s.astype(dt))
    hold(be, xd)

    if k > MAX_KNN:  # more than the fused kernel keeps: full sorted distance rows
        return knn_rows_sorted(be, xd, s.size, E=E, tau=tau, k=k, qpts=qp, lpts=lp,
                               radius=check_int(exclusion_radius, "exclusion_radius", -1),
                               metric=metric, real=real)

    def rows(q0: int, q1: int):  # query blocks when the (queries x k) table does not fit
        t = knn_device(be, xd, s.size, E=E, tau=tau, k=k, qpts=qp[q0:q1], lpts=lp,
                       radius=check_int(exclusion_radius, "exclusion_radius", -1), metric=metric, real=real)
        return be.to_host(t.idx)[0], be.to_host(t.dist)[0]

    blocks = run_blocked(be, rows, qp.size, parameter="the number of query_points or knn",
                         what=f"k-NN table ({qp.size} queries x knn={k})",
                         nbytes=lambda q: q * k * (4 + dt.itemsize))
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])
