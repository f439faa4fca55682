"""``pe.xmap``: the all-to-all cross-map matrix (pairwise CCM at full library size).

Pipeline (kEDM/mpEDM's scheme): (1) the optimal E of every series by a batched
embedding scan (:meth:`XmapEngine.edim_block`), unless E is given; (2) targets
grouped by E; (3) row blocks of the N x N matrix, each on whichever device or
Dask worker is free: per library series one k-NN table per E-group, reused for
every target of the group, rho reduced on the device. Blocks stream into Zarr
(``out=``) as they finish and a rerun resumes; without ``out`` the matrix is
returned in memory.

Data convention: ``X`` is (L, N), one series per column (a DataFrame's columns,
kEDM's ``dataset``). ``rho[i, j]`` is library ``i`` cross-mapping target ``j``
with ``E[j]`` (pyEDM CCM column ``"i:j"``): high values suggest ``j`` drives ``i``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from clkernels.collector import collector_quiet

from .._deprecation import renamed_keywords
from .._outputs import locks_output
from ..primitives.ranges import ccm_valid_times, check_lags, check_tau
from ..validation import (
    check_dtype,
    check_frame_time,
    check_int,
    check_int_array,
    check_seed,
    warn_constant,
)
from .head_start import HeadStart, engine_maker
from .job import EngineSpec, HeadAssumption, Panel, XmapJob
from .lag_engine import LagEngineSpec
from .lags import XmapLagResult, nearest_zero_first, refuse_lag_options
from .results import XmapResult
from .smap_map import check_smap_options, refuse_smap_options, smap_result

#: default rows per block over several devices: big enough to amortise a launch, small
#: enough to balance
DEFAULT_BLOCK_ROWS = 32
#: on one CPU: fewer and larger launches (each block launches per E-group;
#: bench/results/intel-2core/xmap_host_choices_2026-11-24_3017022.txt)
LARGE_BLOCK_ROWS = 64
#: on GPUs (one or several): a block is one batch of the engine (``max_batch``), whose
#: k-NN and skill launches fill the GPU better with 128 libraries than with 64 (256 and
#: 512 no better; decision 0099), and 128-row blocks still balance two GPUs
GPU_BLOCK_ROWS = 128


#: panels of at most this many values take float32's merge check on the calling thread
#: when the map's first row blocks are queued, while the devices run them, not on a
#: thread beside the host's enqueueing (where it waits for the interpreter): a small map's
#: device work is shorter than the check, so the thread's hand-off is the call's tail;
#: larger panels gain nothing inline (bench/results/nvidia-h200/xmap_inline_check_*.txt)
MAP_INLINE_CHECK = 1 << 17

#: edge of the square tiles of the (L, N) -> (N, L) copy, and its threads (at most the
#: cores; 8 measured best of 4, 8 and 16 on a 32-core host: decision 0099)
TRANSPOSE_TILE = 256
TRANSPOSE_THREADS = 8
#: copies from this size (bytes) run on threads
PARALLEL_BYTES = 16 << 20
#: threads of the copy where each band is also standardised (``then``): more work per
#: byte than the copy alone, so more threads, but each thread's dozen numpy calls a band
#: contend for the interpreter lock, so about one per FUSED_BYTES_PER_THREAD of the
#: float64 panel, within FUSED_THREADS_MIN..FUSED_THREADS (measured per panel size on a
#: 32-core host: decision 0117)
FUSED_THREADS_MIN, FUSED_THREADS = 8, 12
FUSED_BYTES_PER_THREAD = 12 << 20


def fused_threads(nbytes: int) -> int:
    """Threads of the standardising copy into a panel of ``nbytes`` (float64; before the
    cores and bands bound them): :data:`FUSED_BYTES_PER_THREAD` each, within
    :data:`FUSED_THREADS_MIN` .. :data:`FUSED_THREADS`."""
    return int(min(FUSED_THREADS, max(FUSED_THREADS_MIN, nbytes // FUSED_BYTES_PER_THREAD)))


def series_major_f32(arr: np.ndarray, tile: int = TRANSPOSE_TILE, dtype: Any = np.float32,
                     extremes: bool = False,
                     then: Callable[[np.ndarray, slice], Any] | None = None,
                     out: np.ndarray | None = None) -> Any:
    """``arr.T`` (an ``(L, N)`` table) as a C-contiguous ``dtype`` (default float32)
    ``(N, L)`` array, copied
    in square tiles: a plain transposing copy strides through memory (several times
    slower: bench/results/intel-2core/xmap_host_choices_2026-11-24_3017022.txt), and by
    a few threads for large panels (numpy copies without the GIL).

    ``extremes``: also each row's largest and smallest value, ``(out, hi, lo)``, reduced
    from every tile while it is in cache (NaN where the row holds one): the finite
    check, the constant-series check and the largest magnitude after centring follow
    from them without three more passes over the panel (decision 0098).

    ``then(rows, sl)``: called with each band of rows ``sl`` of the copy as soon as it is
    written, in the thread that wrote it (e.g. a :class:`pyedmcl._precision.RowStandardiser`:
    the standardisation reads the band from cache, not in a pass of its own). ``out``:
    the ``(N, L)`` ``dtype`` array to copy into (default a new one)."""
    L, N = arr.shape
    out = np.empty((N, L), dtype) if out is None else out
    hi = np.full(N, -np.inf, dtype) if extremes else None
    lo = np.full(N, np.inf, dtype) if extremes else None

    def band(c0: int) -> None:
        for r0 in range(0, L, tile):
            blk = out[c0:c0 + tile, r0:r0 + tile]
            blk[...] = arr[r0:r0 + tile, c0:c0 + tile].T
            if extremes and then is None:  # maximum / minimum propagate NaN, like max / min
                np.maximum(hi[c0:c0 + tile], blk.max(axis=1), out=hi[c0:c0 + tile])
                np.minimum(lo[c0:c0 + tile], blk.min(axis=1), out=lo[c0:c0 + tile])
        if then is not None:
            # the band's extremes in two calls (four per tile: on many threads the GIL's
            # hand-overs between small calls cost more than reading the band again)
            rows = out[c0:c0 + tile]
            if extremes:
                hi[c0:c0 + tile], lo[c0:c0 + tile] = rows.max(axis=1), rows.min(axis=1)
            then(rows, slice(c0, min(N, c0 + tile)))

    bands = range(0, N, tile)
    workers = min(fused_threads(out.nbytes) if then is not None else TRANSPOSE_THREADS,
                  os.cpu_count() or 1, len(bands))
    if workers > 1 and out.nbytes >= PARALLEL_BYTES:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(band, bands))
    else:
        for c0 in bands:
            band(c0)
    return (out, hi, lo) if extremes else out


def uploads_early(be: Any) -> bool:
    """Whether the map sends its float32 panel to device ``be`` band by band while the
    host prepares it (GPUs: the upload leaves the path to the first launch), rather
    than its engine uploading the finished panel (CPUs: a copy in the same memory)."""
    return be.info.is_gpu and be.writes_async


def even_blocks(N: int, rows: int, devices: int) -> list[tuple[int, int, int]]:
    """Row blocks ``(id, r0, r1)`` of an N-row matrix: at most ``rows`` rows each, their
    number a multiple of ``devices`` where N allows, their sizes within one row of each
    other. Devices of one speed then take equal shares and finish together; blocks of
    ``rows`` and a short last one left one device a block behind (decision 0101)."""
    count = -(-N // rows)
    count = min(N, -(-count // devices) * devices)
    edges = [N * b // count for b in range(count + 1)]
    return [(b, edges[b], edges[b + 1]) for b in range(count)]


def _row_blocks(N: int, block_rows: Any, devs: list[Any], backend: str | None, out: Any,
                scheduler: Any) -> tuple[int, list[tuple[int, int, int]]]:
    """The map's rows per block and its blocks ``(id, r0, r1)``: given ``block_rows``,
    else by device kind; in memory even blocks (:func:`even_blocks`: balanced devices),
    a store's or a cluster's ``block_rows`` each (resuming finds them by number)."""
    from clkernels import get_backend

    if block_rows is None:
        br = DEFAULT_BLOCK_ROWS
        if scheduler is None:
            if get_backend(devs[0], backend).info.is_gpu:
                br = GPU_BLOCK_ROWS
            elif len(devs) == 1:
                br = LARGE_BLOCK_ROWS
    else:
        br = check_int(block_rows, "block_rows", 1)
    br = min(br, N)
    if block_rows is None and out is None and scheduler is None:
        return br, even_blocks(N, br, len(devs))
    return br, [(b, b * br, min(N, (b + 1) * br)) for b in range(-(-N // br))]


def _head_start(early: list[Any], uploads: list[Any], rows: np.ndarray, job: XmapJob
                ) -> tuple[HeadStart, HeadAssumption] | None:
    """A head start for an in-memory map on GPUs that take the panel band by band
    (``early``, every device of the job; ``uploads`` their panel buffers), with ``E``
    given (``rows``: the float32 panel that the pass fills), and what it assumed (the
    blocks, E, the engines' parameters), which the map checks before it takes the head
    start's engines; None where it does not apply, or where a parameter is invalid (the
    map refuses it after the pass, in its usual order)."""
    if not early or len(early) != len(job.devices) or job.knn_kernel not in (
            None, "edm", "batched", "scan") or job.method != "simplex" or job.lags is not None:
        return None
    N, n = rows.shape
    try:
        tau, Tp = check_tau(job.tau), check_int(job.Tp, "Tp", -(n - 1), n - 1)
        E_arr = _resolve_E(job.E, N, n)
        if E_arr is None:
            return None
        _check_rows(E_arr, n, tau, Tp)
        _, blocks = _row_blocks(N, job.block_rows, job.devices, job.backend, None, None)
    except (ValueError, TypeError):
        return None
    spec = EngineSpec(tau=tau, Tp=Tp, knn_kernel=job.knn_kernel, fma=job.fma, real="float")
    head = HeadStart([engine_maker(be, rows, E_arr, buf, spec)
                      for be, buf in zip(early, uploads, strict=True)], blocks, N)
    return head, HeadAssumption(X=rows, blocks=blocks, E=E_arr, spec=spec)


def as_panel(X: Any, dtype: Any = np.float32) -> tuple[np.ndarray, list[str] | None]:
    """(N, L) ``dtype`` rows = series, and column names, from an (L, N) table.

    Accepts a 2-D array (columns = series), a DataFrame, or a list / dict of 1-D
    series (which must all have the same length: no silent alignment).
    """
    out, names, _ = panel_with_extremes(X, dtype)
    return out, names


def panel_with_extremes(X: Any, dtype: Any = np.float32,
                        then: Callable[[np.ndarray], Callable[[np.ndarray, slice], Any]]
                        | None = None
                        ) -> tuple[np.ndarray, list[str] | None, tuple[np.ndarray, np.ndarray]]:
    """:func:`as_panel`'s rows and names, and each row's largest and smallest value
    ``(hi, lo)`` (:func:`series_major_f32`'s ``extremes``): the map's constant-series
    check and its float32 range check take them instead of passes of their own.
    ``then(rows)``: given the ``(N, L)`` array the copy is about to fill, the function
    each band of rows is handed to as the copy writes it (:func:`series_major_f32`'s
    ``then``; the extremes are those of the copied values, taken before it runs)."""
    names = None
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        check_frame_time(X, "X")
        names = [str(c) for c in X.columns]
        arr = X.to_numpy(dtype=np.float64)
    elif isinstance(X, dict) or (isinstance(X, list | tuple) and X and np.ndim(X[0]) == 1):
        items = list(X.items()) if isinstance(X, dict) else list(enumerate(X))
        lens = {str(k): int(np.size(v)) for k, v in items}
        if len(set(lens.values())) > 1:
            raise ValueError(f"series have different lengths {lens}; xmap needs equally long, "
                             "time-aligned series (trim or resample them first)")
        names = [str(k) for k, _ in items] if isinstance(X, dict) else None
        arr = np.stack([np.asarray(v, dtype=np.float64) for _, v in items], axis=1)
    else:
        arr = np.asarray(X)
        if arr.dtype.kind not in "fiu":
            arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-D (time steps x series), got shape {arr.shape}")
    L, N = arr.shape
    if N < 2:
        raise ValueError(f"X has N={N} series (columns); xmap needs N >= 2")
    # one copy, rows = series (the job's data); values beyond the dtype's range
    # become inf here and are refused with the NaNs
    with np.errstate(over="ignore"):
        if L:
            out = np.empty((N, L), dtype)
            out, hi, lo = series_major_f32(arr, dtype=dtype, extremes=True, out=out,
                                           then=None if then is None else then(out))
        else:  # no values: nothing to refuse (the callers refuse the length)
            out = series_major_f32(arr, dtype=dtype)
            hi = lo = np.zeros(N, out.dtype)
    bad = np.flatnonzero(~(np.isfinite(hi) & np.isfinite(lo)))
    if bad.size:
        label = [names[i] for i in bad[:10]] if names else bad[:10].tolist()
        raise ValueError(f"series {label}{' ...' if bad.size > 10 else ''} contain NaN or "
                         "inf values (or values beyond float32's range); xmap needs finite "
                         "series (drop or fill those columns)")
    return out, names, (hi, lo)


def check_no_duplicates(X64: np.ndarray, names: Any, ptp: np.ndarray) -> None:
    """Refuse two identical series (constant ones left to the constant-series warning):
    each cross-maps the other from a library that holds it, rho near 1 whatever the
    coupling, a false edge of the map. One pass (a checksum per series), then exact
    comparison of the series whose checksums agree."""
    live = np.flatnonzero(np.asarray(ptp) != 0)
    if live.size < 2:
        return
    w = np.random.default_rng(0).standard_normal(X64.shape[1])
    with np.errstate(all="ignore"):
        sums = (X64 @ w)[live]
    order = np.argsort(sums, kind="stable")
    ranked = sums[order]
    # BLAS may round equal rows' sums differently (their alignment): near-equal sums are
    # candidates, decided exactly
    tol = 1e-9 * (np.abs(ranked[1:]) + np.abs(ranked[:-1]) + 1e-300)
    same = np.flatnonzero(np.abs(ranked[1:] - ranked[:-1]) <= tol)
    for k in same:
        i, j = sorted((int(live[order[k]]), int(live[order[k + 1]])))
        if np.array_equal(X64[i], X64[j], equal_nan=True):
            a, b = (names[i], names[j]) if names is not None else (i, j)
            raise ValueError(f"xmap: series {a!r} and {b!r} are identical: each cross-maps "
                             "the other from a library that holds it (rho near 1 whatever the "
                             "dynamics); drop one of them")


def _resolve_E(E: Any, N: int, n: int) -> np.ndarray | None:
    if isinstance(E, str):
        if E != "auto":
            raise ValueError(f"E={E!r} is invalid; allowed: 'auto', an int >= 1, or N ints")
        return None
    if E is None:
        raise TypeError("E must be 'auto', an int >= 1, or N ints; got None")
    if n - 3 < 1:
        raise ValueError(f"X has {n} time points (rows) per series, too few for any E "
                         f"(at least 4); X is (time, series): pass X.T if its {N} columns "
                         "are time points")
    arr = check_int_array(E, "E", 1, min(64, n - 3))  # E=1.5 is refused, not run as 1
    if arr.size == 1:
        arr = np.full(N, arr[0], dtype=np.int64)
    if arr.shape != (N,):
        raise ValueError(f"E has {arr.size} values for N={N} series; give one int or N ints")
    return arr


def _check_rows(E_arr: np.ndarray, n: int, tau: int, Tp: int) -> None:
    """Every given E leaves its E + 1 neighbours and the query among the usable rows, as
    :func:`pyedmcl.ccm` requires (rho[i, j] is that CCM's); else a ValueError naming the
    largest E that does (the map used to cross-map such a target with fewer neighbours)."""
    for E in np.unique(E_arr):
        M = int(ccm_valid_times(n, int(E), tau, Tp).size)
        if M >= E + 2:
            continue
        fits = [e for e in range(1, int(E)) if ccm_valid_times(n, e, tau, Tp).size >= e + 2]
        hint = f"E <= {fits[-1]} fits" if fits else "no E fits"
        raise ValueError(f"E={int(E)} is too large for series of {n} values (tau={tau}, "
                         f"Tp={Tp}): {M} usable rows, needs at least E+2 = {int(E) + 2} "
                         f"(E+1 neighbours and the query); {hint}")


def _default_device() -> Any:
    """The CPU runtime that tuning measured fastest for the map's kernel families on this
    machine, where several work and no GPU is the default (None: the ordinary default)."""
    from clkernels.runtime_choice import default_for

    from ..kernels.xmap import XMAP_KNN, XMAP_SCAN, XMAP_SKILL
    return default_for((XMAP_KNN, XMAP_SCAN, XMAP_SKILL))


def _devices(devices: Any) -> list[Any]:
    if devices is None:
        return [None]
    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d]
    out = []
    for d in devices:
        if d not in out:
            out.append(d)
    if not out:
        raise ValueError("devices is empty; give e.g. 'pocl' or 'pocl,intel'")
    return out


@renamed_keywords(E_max="max_E", knn_kernel="knn_method")
@locks_output("out", what="xmap output")
def xmap(X: Any, *, E: Any = "auto", tau: int = 1, Tp: int = 0, max_E: int = 20,
         out: str | Path | None = None, block_rows: int | None = None, device: Any = None,
         devices: Any = None, backend: str | None = None, scheduler: str | None = None,
         n_workers: int = 2, overwrite: bool = False, progress: bool = False,
         knn_method: str | None = None, fma: bool | None = None,
         dtype: Any = None, surrogates: int = 0, surrogate_method: str = "ebisuzaki",
         surrogate_options: dict | None = None, seed: int | None = None,
         method: str = "simplex", theta: float | None = None,
         exclusion_radius: int = 0) -> XmapResult | XmapLagResult:
    """All-to-all cross-map skill among the N columns of ``X`` (L x N).

    ``E``: "auto" (optimal E per series: Simplex, library = first half, prediction
    = second half, Tp=1, E = 1..``max_E``, first best), one int, or N ints; a given E
    must leave E + 2 usable rows (E + 1 neighbours and the query, as ``pyedmcl.ccm``).
    ``tau`` > 0 lags into the past; ``Tp`` is the cross-map prediction interval
    (0: simultaneous, as in CCM), or a list or range of lags (negative allowed, each
    within ``-(L - 1) .. L - 1``): time-delayed cross maps of every pair, an
    :class:`~pyedmcl.xmap.lags.XmapLagResult` (``rho[lag, library, target]``,
    ``best_lag``; each lag's matrix ``xmap(X, Tp=lag)``'s bit for bit, the targets' E
    found once and one neighbour search per library series and E-group for every lag,
    :mod:`pyedmcl.xmap.lags`; in memory, without surrogates). ``out``: a ``.zarr`` path to stream row blocks
    into (rerunning the same job resumes it, recomputing any block that fails its
    checksum; different parameters are refused unless ``overwrite``, which replaces
    only a store pyedmcl wrote; a second job on the same ``out`` is refused with
    :class:`pyedmcl.OutputBusyError` while this one runs). ``devices``: several devices of this node (e.g.
    ``"pocl,intel"`` or ``["nvidia:0", "nvidia:1"]``), one thread each, blocks
    dynamically scheduled. ``scheduler``: a Dask scheduler address, or "local" to
    start a LocalCluster of ``n_workers`` processes (needs ``out``).
    ``knn_method`` (the maps' neighbours are always exact; this picks the kernel): None
    (default: "scan" for mixed E where it saves work, on CPUs
    with the scan's private-list variant, else "batched"), "batched" (the k-NN tables of many library series per launch,
    ``xmap_knn`` tuning), "edm" (one table per launch, ``knn`` tuning) or "scan" (every
    E-group's tables of many libraries in one fused multi-E pass, ``xmap_scan``
    tuning; needs tau > 0); the matrix is the same bit for bit.
    ``fma``: fuse the distance's multiply-adds with OpenCL's correctly rounded
    ``fma()`` on every device of the job (faster on GPUs, slower on CPUs); None: the
    stored choice when resuming, else on when every device given is a GPU
    (:func:`pyedmcl._fma.job_fma`; for a Dask cluster, the device its workers are told
    to use as seen on this machine: give ``fma`` for a cluster of other devices).
    Stored with the parameters: all rows of a job are computed alike.
    ``dtype``: "float32" (default; each series centred in float64 first, so the matrix
    does not depend on offsets, nor, CCM's weights having no floor, on units; the E scan's
    Simplex floor is in data units as pyEDM's, :mod:`pyedmcl._precision`) or
    "float64" (every device of the job needs fp64). Stored with the parameters (None:
    the stored dtype when resuming, else float32, or float64 for decimal data on fp64
    devices, whose ties float32 decides otherwise: :func:`decimal_panel`). The matrix (``rho``, ``edim_rho``) is
    float32 either way: the dtype is the computation's, rounded once at the end.
    ``surrogates=n`` > 0: every target series is also cross-mapped as ``n`` surrogates
    of ``surrogate_method`` (``surrogate_options``: see :func:`pyedmcl.surrogates`) from
    the same library k-NN tables (:mod:`pyedmcl.xmap.xmap_null`), and the result
    (and the store) holds per pair the p-value and the null's mean and 95% quantile
    beside rho; :func:`pyedmcl.causal_network` gives the FDR-controlled edges. ``seed``
    makes the surrogates reproducible (None: the stored seed when resuming, else a fresh
    one, stored). With ``scheduler`` each worker reduces its row blocks' nulls
    (the same matrices, bit for bit).
    ``method``: "simplex" (default: CCM's simplex cross map) or "smap": pyEDM's
    ``SMap(columns=i, target=j)`` over the whole series (each row left out of its
    library with its ``exclusion_radius`` neighbourhood) with localisation ``theta``
    (required by, and only valid with, "smap"; :mod:`pyedmcl.xmap.smap_map`), on one
    device, without surrogates or ``scheduler``.
    """
    lags = None
    if np.ndim(Tp) > 0 or isinstance(Tp, range):  # a lag scan (pyedmcl.xmap.lags)
        refuse_lag_options(method=method, out=out, scheduler=scheduler, surrogates=surrogates)
        lags, Tp = Tp, 0  # (the lags are checked against the panel's length)
    heads: list[tuple[HeadStart, HeadAssumption]] = []  # (the map's head start, if any)
    # in memory, no full collection stalls the host's feeding of the devices (a store's
    # job may run for hours: its collector is left alone)
    quiet = collector_quiet() if out is None and scheduler is None else nullcontext()
    try:
        with quiet:
            job = _job(E=E, tau=tau, Tp=Tp, max_E=max_E, out=out, block_rows=block_rows,
                       device=device, devices=devices, backend=backend, scheduler=scheduler,
                       n_workers=n_workers, overwrite=overwrite, progress=progress,
                       knn_kernel=knn_method, fma=fma, dtype=dtype, surrogates=surrogates,
                       surrogate_method=surrogate_method,
                       surrogate_options=surrogate_options, seed=seed, method=method,
                       theta=theta, exclusion_radius=exclusion_radius, lags=lags)
            if dtype is None and job.fp64 and job.dtype == np.float32 and (
                    job.out is None or "dtype" not in _stored_params(job.out)) \
                    and decimal_panel(X):
                job = dataclasses.replace(job, dtype=np.dtype(np.float64))
            return _xmap(X, heads, job) if lags is None else _xmap_lags(X, heads, job)
    finally:
        for head, _ in heads:
            head.release()


#: rows of a panel's head that :func:`decimal_panel` reads (every series for N <= 1024)
DECIMAL_HEAD_VALUES = 1024


def decimal_panel(X: Any) -> bool:
    """Whether the head of the ``(L, N)`` table ``X`` holds decimals of few places
    (:func:`pyedmcl.edm.row_check.on_decimal_grid`): data whose distances tie in exact
    arithmetic, where float32's roundings choose other k-th neighbours than float64's
    (rho moved by 3e-2 on a 0.1 grid). A default-dtype map of such data runs in float64
    (a map has no float32 row check); a store keeps the dtype it was made with."""
    from ..edm.row_check import on_decimal_grid

    try:
        if isinstance(X, dict):
            cols = [np.asarray(v, dtype=np.float64)[:1] for v in X.values()]
            head = np.concatenate(cols) if cols else np.empty(0)
        else:
            arr = X.to_numpy(dtype=np.float64) if hasattr(X, "to_numpy") else np.asarray(X)
            n_col = arr.shape[1] if arr.ndim == 2 else 1
            head = np.asarray(arr[:max(1, -(-DECIMAL_HEAD_VALUES // n_col))], np.float64)
    except (TypeError, ValueError, IndexError):
        return False  # not a numeric table: the panel's own checks explain
    return head.size > 0 and on_decimal_grid(head.reshape(-1))


def _job(*, E: Any, tau: Any, Tp: Any, max_E: Any, out: str | Path | None, block_rows: Any,
         device: Any, devices: Any, backend: str | None, scheduler: str | None,
         n_workers: Any, overwrite: bool, progress: bool, knn_kernel: str | None,
         fma: bool | None, dtype: Any, surrogates: Any, surrogate_method: str,
         surrogate_options: dict | None, seed: Any, method: str = "simplex",
         theta: Any = None, exclusion_radius: Any = 0, lags: Any = None) -> XmapJob:
    """:func:`xmap`'s options validated (in the order they are refused) and resolved:
    the devices (the measured default runtime), a resumed store's ``block_rows``,
    ``fma``, ``dtype`` and ``seed``, the FMA default of the devices. Those checked
    against the panel are kept as given (:class:`~pyedmcl.xmap.job.XmapJob`)."""
    n_workers = check_int(n_workers, "n_workers", 1)  # (checked with or without a cluster)
    if scheduler == "local":  # before any output is made
        from ..dask_local import check_main_guard

        check_main_guard()
    E_max = check_int(max_E, "max_E", 1, 64)
    surrogates = check_int(surrogates, "surrogates", 0)
    if surrogates:
        from ..primitives.surrogates import check_method, check_options
        surrogate_method = check_method(surrogate_method, "surrogate_method")
        surrogate_options = check_options(surrogate_options, "surrogate_options")
    seed = check_seed(seed)
    method, theta, exclusion_radius = check_smap_options(method, theta, exclusion_radius)
    devs = _devices(devices if devices is not None else ([device] if device is not None
                                                          else None))
    if method == "smap":
        refuse_smap_options(surrogates, scheduler, devs)
    if devs == [None] and not scheduler:  # the default: the CPU runtime measured faster here
        devs = [_default_device()]
    from clkernels import get_backend
    if not scheduler:  # an unknown device is refused before a store is made
        for d in devs:
            get_backend(d, backend)
    stored = _stored_params(out) if out is not None else {}
    if block_rows is None:  # resuming: keep the store's row blocks
        block_rows = stored.get("block_rows")
    if fma is None:
        fma = stored.get("fma")
    if fma is None:
        fma = _default_fma(devs, backend)
    dt = check_dtype(stored.get("dtype") if dtype is None else dtype)  # resuming: the store's
    fp64 = _fp64(devs, backend, dt)
    if surrogates and seed is None:  # resuming: the store's; else fresh, and stored
        seed = stored.get("seed")
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (1 << 63))
    return XmapJob(E=E, tau=tau, Tp=Tp, E_max=E_max, out=out, block_rows=block_rows,
                   devices=tuple(devs), backend=backend, scheduler=scheduler,
                   n_workers=n_workers, overwrite=overwrite, progress=progress,
                   knn_kernel=knn_kernel, fma=bool(fma), dtype=dt, fp64=fp64,
                   surrogates=surrogates, surrogate_method=surrogate_method,
                   surrogate_options=surrogate_options, seed=seed, method=method,
                   theta=theta, exclusion_radius=exclusion_radius, lags=lags)


def _xmap(X: Any, heads: list[tuple[HeadStart, HeadAssumption]], job: XmapJob) -> XmapResult:
    """:func:`xmap`'s work: the host pass, the store, (1) the optimal E, (2, 3) the
    matrix by row blocks. The head start it makes (:func:`_head_start`) goes to
    ``heads``, which :func:`xmap` releases whatever happens (its engines and tables)."""
    panel = _read_panel(X, job, heads)
    br, blocks = _row_blocks(panel.N, job.block_rows, job.devices, job.backend, job.out,
                             job.scheduler)
    store = _open_store(job, panel, br)
    if job.knn_kernel not in (None, "edm", "batched", "scan"):
        raise ValueError(f"knn_method={job.knn_kernel!r} is invalid; allowed: None, 'edm', "
                         "'batched', 'scan'")
    spec = EngineSpec(tau=panel.tau, Tp=panel.Tp, knn_kernel=job.knn_kernel, fma=job.fma,
                      real=panel.real)
    runner = (_dask_runner(job.scheduler, job.n_workers, job.devices, job.backend)
              if job.scheduler else None)
    E_arr, edim_rho = _optimal_E(job, panel, spec, blocks, store, runner)
    if job.method == "smap":
        res = smap_result(job, panel, blocks, E_arr, store, edim_rho,
                          raw=as_panel(X, np.float64)[0])
        if panel.float32_holds():
            return res
        return xmap(X, E=job.E, tau=panel.tau, Tp=panel.Tp, max_E=job.E_max,  # warned
                    block_rows=job.block_rows, devices=list(job.devices), backend=job.backend,
                    dtype="float64", progress=job.progress, method="smap", theta=job.theta,
                    exclusion_radius=job.exclusion_radius)
    if job.surrogates:
        try:
            return _xmap_surrogates(job, panel, spec, blocks, E_arr, store, edim_rho, runner)
        finally:
            if runner is not None:
                runner.close()
    rho, counts = _matrix(job, panel, spec, blocks, E_arr, store, runner, heads)
    if runner is not None:
        runner.close()
    if not panel.float32_holds():  # warned: the same map in float64
        return xmap(X, E=job.E, tau=panel.tau, Tp=panel.Tp, max_E=job.E_max,
                    block_rows=job.block_rows, devices=list(job.devices), backend=job.backend,
                    knn_method=job.knn_kernel, fma=job.fma, dtype="float64",
                    progress=job.progress)
    return XmapResult(rho=rho, E=E_arr, names=panel.names, edim_rho=edim_rho,
                      path=None if job.out is None else str(job.out), blocks_per_device=counts)


def _read_panel(X: Any, job: XmapJob, heads: list[tuple[HeadStart, HeadAssumption]]) -> Panel:
    """The host pass over ``X``: the (N, n) panel as the kernels read it, checked (finite,
    no duplicates, E, tau and Tp against its length; constant series warned), prepared
    for the dtype (:func:`pyedmcl._precision.prepare`) and, with surrogates, their panel.

    In float32 each band of the transposing copy is centred in place and cast while it
    is in cache (no pass of its own, nor a second float64 panel; a fall-back to float64
    copies the raw panel again), and on GPUs that take it (:func:`uploads_early`) each
    band's cast is sent as soon as it is made, so that their engines start without
    uploading the panel; with ``E`` given in memory they also start the k-NN tables of
    blocks whose rows are there (:func:`_head_start`, appended to ``heads``)."""
    from clkernels import get_backend

    from .._precision import RowStandardiser, prepare, standardises

    dt, surrogates = job.dtype, job.surrogates
    stz: list[RowStandardiser] = []
    early = [] if job.scheduler is not None or surrogates else \
        [be for be in (get_backend(d, job.backend) for d in job.devices) if uploads_early(be)]
    uploads: list[Any] = []
    writes: list[Any] = []  # their copies' handles: held until the map has run

    def standardiser(rows: np.ndarray) -> Callable[[np.ndarray, slice], None]:
        std = RowStandardiser(rows.shape, scale=False, cast=dt, out=rows)
        stz.append(std)
        uploads[:] = [be.empty(rows.size, dt) for be in early]
        L = rows.shape[1]
        made = None if job.out is not None else _head_start(early, uploads, std.out_c, job)
        head = None if made is None else made[0]
        if made is not None:
            heads.append(made)

        def band(r: np.ndarray, sl: slice) -> None:
            std(r, sl)
            for be, buf in zip(early, uploads, strict=True):
                writes.append(be.write_async(buf, std.out_c[sl], sl.start * L))
            if head is not None:
                head.written(sl)
        return band

    X64, names, extremes = panel_with_extremes(
        X, dtype=np.float64, then=standardiser if standardises(dt) and not surrogates else None)
    N, n = X64.shape
    tau = check_tau(job.tau)
    Tp, lags = _panel_lags(job, n)
    E_arr = _resolve_E(job.E, N, n)
    if E_arr is not None:  # (E="auto" refuses constant series: no E fits them)
        warn_constant(X64, names, "xmap", ptp=extremes[0] - extremes[1])
        for lag in ([Tp] if lags is None else nearest_zero_first(lags)):
            _check_rows(E_arr, n, tau, int(lag))
    check_no_duplicates(X64, names, extremes[0] - extremes[1])

    # in memory, the float32 merge check runs beside the map (a store or a cluster
    # keeps it up front: their blocks must not be written in a dtype then dropped)
    speculate = job.in_memory and not surrogates
    # centred only: the E scan's Simplex weights floor d_min at 1e-6 in data units (the
    # map's CCM weights and rho are the same either way: a power-of-two scale is exact)
    prep = prepare([X64], dt, job.fp64, names=["X"], scale=False, what="xmap",
                   row_labels=[[f"column {c!r}" for c in names]] if names else None,
                   deferred="gated" if speculate else False, extremes=[extremes], cast=True,
                   standardised=[stz[0].result()] if stz else None,
                   raw=(lambda: [panel_with_extremes(X, dtype=np.float64)[0]]) if stz else None)
    Xr = prep.kernel_input(0)
    # per device of the job, the kernel input already there (None: the engine uploads it)
    on_device = None
    if uploads and Xr is stz[0].out_c:
        on_device = [uploads[early.index(be)] if be in early else None
                     for be in (get_backend(d, job.backend) for d in job.devices)]
    else:
        writes.clear()
    surr_panel = None
    if surrogates:
        from .xmap_null import check_panel_memory, surrogate_panel
        check_panel_memory(N, n, surrogates, np.dtype(prep.dtype).itemsize, job.devices,
                           job.backend)
        surr_panel = surrogate_panel(X64, surrogates, job.surrogate_method,
                                     job.surrogate_options, job.seed, prep.dtype)
    # only the kernels' copy stays (and prep's check): host memory is bounded while
    # N x N streams
    return Panel(X=Xr, names=names, tau=tau, Tp=Tp, E=E_arr, real=prep.real, dtype=prep.dtype,
                 float32_holds=prep.float32_holds,
                 start_check=functools.partial(prep.start_check, inline_values=MAP_INLINE_CHECK),
                 on_device=on_device, writes=writes, surrogates=surr_panel, lags=lags)


def _panel_lags(job: XmapJob, n: int) -> tuple[int, np.ndarray | None]:
    """The map's ``Tp`` checked against the series length ``n`` and, for a lag scan, its
    lags (ascending) and the lag nearest 0 as ``Tp`` (it leaves the most rows: a given E
    is checked there first, then at the lags farther out, naming the first that does not
    fit)."""
    if job.lags is None:
        return check_int(job.Tp, "Tp", -(n - 1), n - 1), None
    lags = check_lags(job.lags, n, "Tp")
    return int(nearest_zero_first(lags)[0]), lags


def _open_store(job: XmapJob, panel: Panel, block_rows: int) -> Any:
    """The Zarr store of a map with ``out`` (made, or opened to resume: its parameters
    must be this job's), else None; a cluster without ``out`` is refused."""
    from .store import XmapStore, data_checksum

    params = {"N": panel.N, "L": panel.n, "tau": panel.tau, "Tp": panel.Tp,
              "block_rows": block_rows,
              "E": "auto" if panel.E is None else [int(e) for e in panel.E],
              "E_max": job.E_max if panel.E is None else None,
              # the data's checksum guards a store's resume: only computed for one
              "data_sha256": data_checksum(panel.X) if job.out is not None else None,
              "dtype": str(panel.dtype), "fma": job.fma,
              "convention": "rho[i, j] = library i cross-maps target j, E = E[j]"}
    if job.method != "simplex":  # (as surrogates: other jobs' parameters are unchanged)
        params.update({"method": job.method, "theta": job.theta,
                       "exclusion_radius": job.exclusion_radius})
    if job.surrogates:  # only then: the parameters (and checksums) of other jobs are unchanged
        params.update({"surrogates": job.surrogates, "surrogate_method": job.surrogate_method,
                       "surrogate_options": job.surrogate_options, "seed": job.seed})
    if job.out is not None:
        return XmapStore.open(job.out, params, overwrite=job.overwrite)
    if job.scheduler is not None:
        raise ValueError("scheduler= needs out= (a Zarr path the workers write to)")
    return None


def _optimal_E(job: XmapJob, panel: Panel, spec: EngineSpec, blocks: list[tuple[int, int, int]],
               store: Any, runner: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(1) E per series and the E scan's skill (None unless scanned here): ``E`` as
    given, else a resumed store's, else the first best of 1..max_E by the batched
    embedding scan (:meth:`XmapEngine.edim_block`) over the row blocks; stored."""
    E_arr, N, E_max = panel.E, panel.N, job.E_max
    if E_arr is not None:
        if store is not None and store.saved_E() is None:
            store.save_E(E_arr)
        return E_arr, None
    saved = store.saved_E() if store is not None else None
    if saved is not None and saved.shape == (N,) and (saved >= 1).all():
        return saved.astype(np.int64), None
    edim_rho = np.full((N, E_max), np.nan, np.float32)

    def put_edim(b: int, rows: np.ndarray) -> None:
        r0 = blocks[b][1]
        edim_rho[r0:r0 + rows.shape[0]] = rows

    if runner is not None:
        runner.edim(panel.X, blocks, spec, E_max, put_edim, job.progress)
    else:
        from .scheduler import run_local
        run_local(panel.X, blocks, "edim", put_edim, devices=job.devices, spec=spec,
                  E_max=E_max, backend=job.backend, progress=job.progress,
                  uploaded=panel.on_device, on_started=panel.start_check)
    if np.isnan(edim_rho).all(axis=1).any():
        bad = np.flatnonzero(np.isnan(edim_rho).all(axis=1))[:10].tolist()
        raise ValueError(f"series {bad} are too short or constant for any E in "
                         f"1..{E_max}; give E explicitly")
    E_arr = (np.nanargmax(np.where(np.isnan(edim_rho), -np.inf, edim_rho), axis=1)
             + 1).astype(np.int64)
    if store is not None:
        store.save_E(E_arr, edim_rho)
    return E_arr, edim_rho


def _matrix(job: XmapJob, panel: Panel, spec: EngineSpec, blocks: list[tuple[int, int, int]],
            E_arr: np.ndarray, store: Any, runner: Any,
            heads: list[tuple[HeadStart, HeadAssumption]]) -> tuple[Any, dict[str, int]]:
    """(2, 3) the matrix ``rho`` by row blocks (a store's pending ones, or all of an
    in-memory matrix, each read from the device straight into its rows) and the blocks
    each device computed. A head start's engines and claimed blocks are taken where it
    assumed this map (else its tables are freed: e.g. float64 after all)."""
    N = panel.N
    mat = None
    if store is not None:
        pend = set(store.pending())
        todo = [b for b in blocks if b[0] in pend]
        sink = store.write_block
    else:
        mat = np.empty((N, N), np.float32)
        todo = blocks

        def rows_of(b: int) -> np.ndarray:
            return mat[blocks[b][1]:blocks[b][2]]

        def sink(b: int, rows: np.ndarray) -> None:
            if not np.shares_memory(rows, mat):  # a runner that returns its own copy
                mat[blocks[b][1]:blocks[b][1] + rows.shape[0]] = rows

    counts: dict[str, int] = {}
    if todo:
        if runner is not None:
            counts = runner.xmap(panel.X, todo, spec, E_arr, str(job.out), job.progress)
        else:
            from .scheduler import run_local
            engines = claimed = None
            if heads:
                head, assumed = heads[0]
                head.close()
                if assumed.holds(panel.X, todo, E_arr, spec):
                    engines, claimed = head.engines, head.claimed
                else:
                    head.release()
            counts = run_local(panel.X, todo, "xmap", sink, devices=job.devices, spec=spec,
                               E=E_arr, backend=job.backend, progress=job.progress,
                               dest=None if store is not None else rows_of,
                               uploaded=panel.on_device, engines=engines, claimed=claimed,
                               on_started=panel.start_check)
    return (store.rho if store is not None else mat), counts


def _xmap_lags(X: Any, heads: list[tuple[HeadStart, HeadAssumption]], job: XmapJob
               ) -> XmapLagResult:
    """:func:`xmap` with ``Tp`` a list of lags (:mod:`pyedmcl.xmap.lags`): the host pass
    and the optimal E as the map at the lag nearest 0 has them, then the matrices of every
    lag in one pass over the row blocks (:class:`~pyedmcl.xmap.lag_engine.XmapLagEngine`:
    one neighbour search per library and E-group for all lags). In memory only."""
    panel = _read_panel(X, job, heads)
    _, blocks = _row_blocks(panel.N, job.block_rows, job.devices, job.backend, None, None)
    if job.knn_kernel not in (None, "edm", "batched", "scan"):
        raise ValueError(f"knn_method={job.knn_kernel!r} is invalid; allowed: None, 'edm', "
                         "'batched', 'scan'")
    spec = EngineSpec(tau=panel.tau, Tp=panel.Tp, knn_kernel=job.knn_kernel, fma=job.fma,
                      real=panel.real)
    E_arr, edim_rho = _optimal_E(job, panel, spec, blocks, None, None)
    if panel.E is None:  # found here: checked at every lag (a given E was, by the pass)
        for lag in nearest_zero_first(panel.lags):
            _check_rows(E_arr, panel.n, panel.tau, int(lag))
    N, lags = panel.N, panel.lags
    rho = np.empty((lags.size, N, N), np.float32)

    def sink(b: int, rows: np.ndarray) -> None:  # (lag, library rows of block b, target)
        rho[:, blocks[b][1]:blocks[b][2]] = rows

    from .scheduler import run_local
    run_local(panel.X, blocks, "xmap", sink, devices=job.devices,
              spec=LagEngineSpec(spec, tuple(int(v) for v in lags)), E=E_arr,
              backend=job.backend, progress=job.progress, uploaded=panel.on_device,
              on_started=panel.start_check)
    if not panel.float32_holds():  # warned: the same scan in float64
        return xmap(X, E=job.E, tau=panel.tau, Tp=[int(v) for v in lags], max_E=job.E_max,
                    block_rows=job.block_rows, devices=list(job.devices), backend=job.backend,
                    knn_method=job.knn_kernel, fma=job.fma, dtype="float64",
                    progress=job.progress)
    return XmapLagResult(lags=lags, rho=rho, E=E_arr, names=panel.names, edim_rho=edim_rho)


def _xmap_surrogates(job: XmapJob, panel: Panel, spec: EngineSpec,
                     blocks: list[tuple[int, int, int]], E_arr: np.ndarray, store: Any,
                     edim_rho: np.ndarray | None, runner: Any = None) -> XmapResult:
    """The map with surrogate targets (:mod:`pyedmcl.xmap.xmap_null`): row blocks
    of the extended panel, each reduced to rho, p-value and null summary as it arrives
    (on the Dask ``runner``'s workers when given: each block's task reduces and writes it)."""
    from .scheduler import run_local
    from .xmap_null import extend_E, reduce_block

    N, n_surr = panel.N, job.surrogates
    X_ext = np.concatenate([panel.X, panel.surrogates])
    mats = None
    if store is not None:
        pend = set(store.pending())
        todo = [b for b in blocks if b[0] in pend]

        def sink(b: int, rows: np.ndarray) -> None:
            rho, extra = reduce_block(rows, N, n_surr)
            store.write_block(b, rho, extra)
    else:
        todo = blocks
        mats = {k: np.empty((N, N), np.float32) for k in ("rho", "p_value", "null_mean",
                                                         "null_q95")}

        def sink(b: int, rows: np.ndarray) -> None:
            r0 = blocks[b][1]
            rho, extra = reduce_block(rows, N, n_surr)
            for k, v in {"rho": rho, **extra}.items():
                mats[k][r0:r0 + v.shape[0]] = v

    counts: dict[str, int] = {}
    if todo and runner is not None:
        counts = runner.xmap(X_ext, todo, spec, extend_E(E_arr, n_surr), str(job.out),
                             job.progress, null=(N, n_surr))
    elif todo:
        counts = run_local(X_ext, todo, "xmap", sink, devices=job.devices, spec=spec,
                           E=extend_E(E_arr, n_surr), backend=job.backend,
                           progress=job.progress)
    arrs = ({k: store.group[k] for k in ("rho", "p_value", "null_mean", "null_q95")}
            if store is not None else mats)
    return XmapResult(rho=arrs["rho"], E=E_arr, names=panel.names, edim_rho=edim_rho,
                      path=None if job.out is None else str(job.out), blocks_per_device=counts,
                      surrogates=n_surr, p_value=arrs["p_value"], null_mean=arrs["null_mean"],
                      null_q95=arrs["null_q95"])


def _default_fma(devs: list[Any], backend: str | None) -> bool:
    from clkernels import DeviceSelectionError, get_backend

    from .._fma import job_fma
    try:
        return job_fma([get_backend(d, backend).info for d in devs])
    except DeviceSelectionError:  # a Dask client without the workers' device
        return False


def _fp64(devs: list[Any], backend: str | None, dt: np.dtype) -> bool:
    """Whether every device of the job has fp64 (``dtype=float64`` is refused otherwise).
    A Dask client that cannot see its workers' device assumes fp64 (the workers refuse)."""
    from clkernels import DeviceSelectionError, get_backend
    try:
        infos = [get_backend(d, backend).info for d in devs]
    except DeviceSelectionError:
        return True
    for info in infos:
        check_dtype(dt, info)
    return all(info.fp64 for info in infos)


def _stored_params(out: str | Path) -> dict[str, Any]:
    """The parameters of an existing store at ``out`` (resuming), else {}."""
    if not Path(out).exists():
        return {}
    try:
        from .store import XmapStore
        return dict(XmapStore.open_existing(out, mode="r").params)
    except Exception:  # noqa: BLE001 - not a store of ours: XmapStore.open explains
        return {}


def _dask_runner(scheduler: str, n_workers: int, devs: list[Any], backend: str | None):
    try:
        from .dask_runner import DaskRunner
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on extras
        raise ModuleNotFoundError("scheduler= needs Dask: pip install 'pyedmcl[dask]'") from exc
    return DaskRunner(scheduler, n_workers=n_workers, device=devs[0], backend=backend)
