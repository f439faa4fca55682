"""RQA on several devices or a Dask cluster: the band runner of
:func:`pyedmcl.rqa.dnr.detect_lines` (set there when this module is imported).

Lane bands (:mod:`pyedmcl.rqa.bands`) run on one host thread per device, or as Dask
tasks (:mod:`pyedmcl.rqa.dask_rqa`); the histograms are recombined as integer sums.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.threads import short_switches
from clkernels.tuning import Params

from ..kernels.rqa_lines import RQA_LINES
from . import dnr
from . import ranges as row_ranges
from .bands import BandDevice, check_width, default_width, fold_bins, plan_bands, run_threads
from .dnr import Histograms, _Matrix
from .ranges import RangeDevice, plan_ranges


def detect_bands(backends: list[Backend], m: _Matrix, x: np.ndarray, y: np.ndarray,
                 x2: np.ndarray | None, y2: np.ndarray | None, params: Params | None,
                 edge: int | None, tcol: np.ndarray | None, vertical: bool,
                 diag_ranges: list[tuple[int, int]], scheduler: Any, n_workers: int,
                 band: int | None, split: str = "auto", *, symmetric: bool = False
                 ) -> Histograms:
    """Independent tasks over ``backends`` (one host thread each, the next task to the
    first free device) or, with ``scheduler``, Dask workers. ``split``: ``"lanes"``
    (lane bands of ``band`` lanes, None or 0: :func:`~pyedmcl.rqa.bands.default_width`),
    ``"rows"`` (row ranges of ``band`` rows, :mod:`pyedmcl.rqa.ranges`:
    the SHARE path kept) or ``"auto"`` (:data:`SPLIT`; ``"auto"`` there: rows where
    every device's parameters take SHARE, else lanes). ``symmetric``: the matrix is
    symmetric; row ranges then take SYM where every device's parameters do (lane bands
    walk the whole matrix)."""
    if split == "auto":
        split = SPLIT
    if split not in ("auto", "lanes", "rows"):
        raise ValueError(f"split={split!r} is not supported; allowed: 'auto', 'lanes', 'rows'")
    n_dev = n_workers if scheduler is not None else len(backends)
    width = check_width(default_width(m, n_dev, vertical, diag_ranges) if not band
                        else int(band))
    n_fold = fold_bins(m, vertical, diag_ranges)
    if split == "auto":
        split = "rows" if _shares(backends, m, params, vertical) else "lanes"
    bands = plan_bands(m, vertical, diag_ranges, width) if split == "lanes" else []
    if scheduler is not None:
        from .dask_rqa import run_dask  # distributed: an optional dependency

        tasks = bands if split == "lanes" else plan_ranges(
            m, vertical, diag_ranges, _edge(backends[0], m, params, edge), n_dev,
            band or None, _ranges_per_device(backends),
            sym=symmetric and _sym_params(backends, m, params),
            block_lanes=_block_lanes(backends))
        return run_dask(scheduler, n_workers, [be.info.selector for be in backends],
                        backends[0].name, m, (x, y, x2, y2, tcol), params, edge, tasks,
                        vertical, diag_ranges, symmetric=symmetric and split == "rows")
    if split == "rows":
        return _detect_ranges(backends, m, x, y, x2, y2, params, edge, tcol, vertical,
                              diag_ranges, n_fold, band, symmetric)
    devs = [BandDevice(be, m, x, y, x2, y2, params, edge, tcol, n_fold) for be in backends]
    for dev in devs:
        dev.build()
    t0 = time.perf_counter()
    run_threads(devs, bands)
    h = dnr._recombine([d.st for d in devs], m)
    h.seconds = time.perf_counter() - t0
    h.device_tasks = [d.bands for d in devs]
    return h


#: how several devices split the matrix by default ("auto", "lanes" or "rows")
SPLIT = "auto"
#: row ranges: each device's buffers, uploads and kernels set up in a thread of its own
PARALLEL_SETUP = True


def _shares(backends: list[Backend], m: _Matrix, params: Params | None, vertical: bool) -> bool:
    """Whether every device's parameters take the SHARE path (then row ranges keep it)."""
    if not vertical or m.n_cols == 0:
        return False
    return all(p.get("SHARE", 0) and p.get("BITS", 0) == 2
               for p in (_params(be, m, params) for be in backends))


def _sym_params(backends: list[Backend], m: _Matrix, params: Params | None) -> bool:
    """Whether every device's parameters ask for SYM on this (square) matrix: the cost
    model of the ranges planned before the Dask workers settle their paths."""
    return m.n_rows == m.n_cols and all(_params(be, m, params).get("SYM", 0) for be in backends)


def _ranges_per_device(backends: list[Backend]) -> int:
    """Row ranges per device: one when every device is the same model on the same
    runtime (equal cells each), else several for the dynamic queue to balance."""
    kinds = {(be.info.runtime, be.info.name, be.info.compute_units) for be in backends}
    return (row_ranges.ALIKE_RANGES_PER_DEVICE if len(kinds) == 1
            else row_ranges.RANGES_PER_DEVICE)


def _block_lanes(backends: list[Backend]) -> int:
    """A row block's fixed cost in the range plan: :data:`~pyedmcl.rqa.ranges.BLOCK_LANES`
    where every device is a GPU, none on CPUs."""
    return row_ranges.BLOCK_LANES if all(be.info.is_gpu for be in backends) else 0


def _edge(be: Backend, m: _Matrix, params: Params | None, edge: int | None) -> int:
    """The sub-matrix edge ``be`` would run with (range boundaries are its row blocks)."""
    return int(edge) if edge is not None else int(_params(be, m, params)["EDGE"])


def _params(be: Backend, m: _Matrix, params: Params | None) -> Params:
    """The line-detection parameters ``be`` runs ``m`` with: the given ones, else its
    tuned ones."""
    if params is not None:
        return params
    return RQA_LINES.params_for(be, m.spec.tuning_spec(), max(m.n_rows, m.n_cols))


def _detect_ranges(backends: list[Backend], m: _Matrix, x: np.ndarray, y: np.ndarray,
                   x2: np.ndarray | None, y2: np.ndarray | None, params: Params | None,
                   edge: int | None, tcol: np.ndarray | None, vertical: bool,
                   diag_ranges: list[tuple[int, int]], n_fold: int,
                   height: int | None, symmetric: bool = False) -> Histograms:
    """Row ranges (:mod:`pyedmcl.rqa.ranges`) over ``backends``, one thread each; SYM
    (``symmetric``) only where every device takes it (a range joins its columns through
    the diagonal with its own rows' runs: one device walking the whole matrix beside one
    walking the upper triangle would count the lower triangle twice)."""
    def device(be: Backend, sym: bool) -> RangeDevice:
        with be.zero_batch():  # its zeroed buffers: one launch per 8 of them
            dev = RangeDevice(be, m, x, y, x2, y2, params, edge, tcol, vertical,
                              diag_ranges, n_fold, symmetric=sym)
        dev.build()
        return dev

    def devices(sym: bool) -> list[RangeDevice]:
        if not PARALLEL_SETUP or len(backends) < 2:
            return [device(be, sym) for be in backends]
        with short_switches(), ThreadPoolExecutor(len(backends)) as pool:
            return list(pool.map(lambda be: device(be, sym), backends))

    devs = devices(symmetric)
    if symmetric and not all(d.sym for d in devs) and any(d.sym for d in devs):
        devs = devices(False)
    # range boundaries on row blocks of the first device; any other edge only chunks
    # a range differently (same counts)
    ranges = plan_ranges(m, vertical, diag_ranges, devs[0].st.params["EDGE"], len(devs),
                         height or None, _ranges_per_device(backends), sym=devs[0].sym,
                         block_lanes=_block_lanes(backends))
    t0 = time.perf_counter()
    collected: dict[int, tuple] = {}  # each device's counts, read back in its own thread
    run_threads(devs, ranges, after=lambda dev: collected.__setitem__(id(dev), dev.collect()))
    seconds = time.perf_counter() - t0
    hist = [np.zeros(m.hlen, np.uint64) for _ in range(3)]
    n_rec = 0
    used = [0, 0, 0]
    for dev in devs:
        *parts, n = collected[id(dev)]
        for total, part in zip(hist, parts, strict=True):  # its nonzero bins
            part.add_into(total)
        used = [max(u, part.size) for u, part in zip(used, parts, strict=True)]
        n_rec += n
    return Histograms(hist[0][:-1], hist[1][:-1], hist[2][:-1], n_rec,
                      launches=sum(d.st.launches for d in devs), seconds=seconds,
                      per_device=[d.be.info.selector for d in devs],
                      events=[e for d in devs for e in d.st.events],
                      shared=any(d.st.params["SHARE"] for d in devs),
                      symmetric=any(d.sym for d in devs),
                      overlapped=max(int(d.st.params.get("OVL", 0)) for d in devs),
                      used=(used[0], used[1], used[2]),
                      nonzero=dnr.nonzero_bins([collected[id(d)][:3] for d in devs], m.hlen),
                      device_tasks=[d.ranges for d in devs])


dnr.BAND_RUNNER = detect_bands
