"""RQA on several devices or a Dask cluster: the band runner of
:func:`pyedmcl.rqa.dnr.detect_lines` (set there when this module is imported).

Lane bands (:mod:`pyedmcl.rqa.bands`) run on one host thread per device, or as Dask
tasks (:mod:`pyedmcl.rqa.dask_rqa`); the histograms are recombined as integer sums.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from clkernels import Backend
from clkernels.tuning import Params

from . import dnr
from .bands import BandDevice, default_width, fold_bins, plan_bands, run_threads
from .dnr import Histograms, _Matrix


def detect_bands(backends: list[Backend], m: _Matrix, x: np.ndarray, y: np.ndarray,
                 x2: np.ndarray | None, y2: np.ndarray | None, params: Params | None,
                 edge: int | None, tcol: np.ndarray | None, vertical: bool,
                 diag_ranges: list[tuple[int, int]], scheduler: Any, n_workers: int,
                 band: int | None) -> Histograms:
    """Lane bands of ``band`` lanes (None or 0: :func:`~pyedmcl.rqa.bands.default_width`)
    as tasks over ``backends`` (one thread each) or, with ``scheduler``, Dask workers."""
    n_dev = n_workers if scheduler is not None else len(backends)
    width = default_width(m, n_dev, vertical, diag_ranges) if not band else int(band)
    bands = plan_bands(m, vertical, diag_ranges, width)
    if scheduler is not None:
        from .dask_rqa import run_dask  # distributed: an optional dependency

        return run_dask(scheduler, n_workers, [be.info.selector for be in backends],
                        backends[0].name, m, (x, y, x2, y2, tcol), params, edge, bands)
    n_fold = fold_bins(m, bands)
    devs = [BandDevice(be, m, x, y, x2, y2, params, edge, tcol, n_fold) for be in backends]
    for dev in devs:
        dev.build()
    t0 = time.perf_counter()
    run_threads(devs, bands)
    h = dnr._recombine([d.st for d in devs], m, time.perf_counter() - t0)
    h.device_tasks = [d.bands for d in devs]
    return h


dnr.BAND_RUNNER = detect_bands
