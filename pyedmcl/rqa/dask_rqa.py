"""Lane bands of an RQA job as Dask tasks (one worker per device).

The lane bands of :mod:`pyedmcl.rqa.bands` and the row ranges of
:mod:`pyedmcl.rqa.ranges` are independent, so each is one task: a
:class:`RQAWorkerPlugin` gives every worker its own device context and keeps the
job's device state (series uploaded once per worker, kernels built once); a task
runs one band or range to completion and returns its line histograms (non-zero bins
only) plus the runs its carryovers left open. The client adds them up: integer sums, in
any order, so the result equals the one-device run bit for bit, whichever worker
ran which band, and a band lost with a dead worker is simply rerun elsewhere.

``scheduler`` is a ``distributed.Client``, a scheduler address (for example one
started by dask-jobqueue on SLURM/PBS), or ``"local"`` to start a LocalCluster of
``n_workers`` processes. Worker ``i`` (LocalCluster workers are named 0, 1, ...)
uses device ``devices[i % len(devices)]``; workers with other names use the first.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from distributed import WorkerPlugin

from ..dask_local import connect, disconnect, register_plugin, run_tasks
from .bands import Band, BandDevice, fold_bins
from .dnr import Counts, Histograms, _Matrix
from .ranges import RangeDevice, RowRange

log = logging.getLogger("pyedmcl.rqa.dask")

PLUGIN = "pyedmcl-rqa"
#: private backends of this process's workers: (backend, device, selector, worker name)
_PRIVATE: dict[tuple, Any] = {}


def _worker_index(worker: Any) -> int:
    try:
        return int(getattr(worker, "name", 0))
    except (TypeError, ValueError):
        return 0


class RQAWorkerPlugin(WorkerPlugin):
    """Per-worker state: a private backend of the worker's device and one job's
    :class:`~pyedmcl.rqa.bands.BandDevice`."""

    name = PLUGIN

    def __init__(self, devices: list[Any] | None = None, backend: str | None = None):
        self.devices = list(devices) if devices else [None]
        self.backend = backend
        self.be = None
        self.key: str | None = None
        self.dev: BandDevice | None = None

    def setup(self, worker: Any = None) -> None:
        from clkernels import get_backend

        be = get_backend(self.devices[_worker_index(worker) % len(self.devices)], self.backend)
        # a context of its own: workers of one process (processes=False) never share a
        # queue or a kernel object (kernel arguments are set per call). Kept for the
        # process's life and reused when the plugin is registered again, so a second job
        # on the worker builds nothing (programs are cached per backend).
        key = (be.name, be.info.fingerprint, be.info.selector, getattr(worker, "name", None))
        self.be = _PRIVATE.get(key)
        if self.be is None:
            self.be = _PRIVATE[key] = type(be)(be.info)

    def teardown(self, worker: Any = None) -> None:
        self.dev = None

    def device(self, key: str, job: dict[str, Any], data: tuple) -> BandDevice:
        """The job's device state, made (and its kernels built) on first use."""
        if self.key != key or self.dev is None:
            self.dev = None  # one job's buffers per worker at a time
            if job["split"] == "rows":
                self.dev = RangeDevice(self.be, job["m"], *data[:4], job["params"],
                                       job["edge"], data[4], job["vertical"],
                                       job["diag_ranges"], job["n_fold"],
                                       symmetric=job.get("symmetric", False))
            else:
                self.dev = BandDevice(self.be, job["m"], *data[:4], job["params"],
                                      job["edge"], data[4], job["n_fold"])
            self.dev.build()
            self.key = key
        return self.dev


def _sparse(h: Counts) -> tuple[np.ndarray, np.ndarray]:
    return h.bins.astype(np.int64, copy=False), h.counts


def _band_task(key: str, job: dict[str, Any], data: tuple, band: Band | RowRange
               ) -> dict[str, Any]:
    """One task: a lane band or a row range, run to completion on this worker's device."""
    from distributed import get_worker

    worker = get_worker()
    dev = worker.plugins[PLUGIN].device(key, job, data)
    task, _ = dev.run(band)
    d, v, w, n = dev.take() if job["split"] == "rows" else dev.take(task)
    return {"d": _sparse(d), "v": _sparse(v), "w": _sparse(w), "n": n,
            "who": f"{worker.address}:{dev.be.info.selector}",
            "sym": bool(getattr(dev, "sym", False))}


def run_dask(scheduler: Any, n_workers: int, devices: list[Any], backend: str | None,
             m: _Matrix, data: tuple, params: dict[str, Any] | None, edge: int | None,
             bands: list[Band] | list[RowRange], vertical: bool = True,
             diag_ranges: list[tuple[int, int]] | None = None, symmetric: bool = False
             ) -> Histograms:
    """Run ``bands`` (lane bands, or row ranges over ``vertical`` columns and
    ``diag_ranges``) as Dask tasks and recombine the histograms (largest first).
    ``symmetric`` (row ranges): each worker's device takes SYM where its parameters do
    (:mod:`pyedmcl.rqa.ranges`); a job whose ranges did not all take it is run again
    without (the two walks of one matrix must not be mixed)."""
    from dask.base import tokenize

    client, cluster, own = connect(scheduler, n_workers)
    try:
        register_plugin(client, RQAWorkerPlugin(devices, None if backend == "pyopencl"
                                                else backend), PLUGIN)
        rows = bool(bands) and isinstance(bands[0], RowRange)
        job = {"m": m, "params": None if params is None else dict(params), "edge": edge,
               "n_fold": fold_bins(m, vertical, list(diag_ranges or [])),
               "split": "rows" if rows else "lanes",
               "vertical": vertical, "diag_ranges": list(diag_ranges or []),
               "symmetric": bool(symmetric and rows)}
        key = tokenize(*(a for a in data if a is not None), repr(job))
        t0 = time.perf_counter()
        sent: dict[int, Any] = {}  # auto-RQA: x is y, sent once
        for a in data:
            if a is not None and id(a) not in sent:
                # hash=False: a fresh key, so that releasing an earlier job's copy of
                # equal data (same content hash) cannot delete this job's input
                sent[id(a)] = client.scatter(a, broadcast=True, hash=False)
        data_f = [None if a is None else sent[id(a)] for a in data]
        hist = {k: np.zeros(m.hlen, np.uint64) for k in ("d", "v", "w")}
        n_rec = 0
        counts: dict[str, int] = {}
        syms = set()

        def add(_i: int, out: dict[str, Any]) -> None:
            nonlocal n_rec
            for k in hist:
                idx, val = out[k]
                hist[k][idx] += val
            n_rec += out["n"]
            counts[out["who"]] = counts.get(out["who"], 0) + 1
            syms.add(out.get("sym", False))
        run_tasks(client, _band_task, ((i, (key, job, data_f, b)) for i, b in enumerate(bands)),
                  key=f"pyedmcl-rqa-{key}", on_result=add)
        seconds = time.perf_counter() - t0
        if len(syms) > 1:  # some workers walked the upper triangle, some the whole matrix
            log.info("RQA on Dask: not every worker took SYM; run again without it")
            return run_dask(client, n_workers, devices, backend, m, data, params, edge, bands,
                            vertical, diag_ranges, symmetric=False)
    finally:
        disconnect(client, cluster, own)
    return Histograms(hist["d"][:-1], hist["v"][:-1], hist["w"][:-1], n_rec,
                      launches=0, seconds=seconds, per_device=list(counts),
                      device_tasks=list(counts.values()), symmetric=syms == {True})
