""":func:`pyedmcl.rqa_batch` in blocks of series: a Zarr store that resumes, several
devices of this node, or Dask workers (one per device), each row still equal to
``pe.rqa`` of its series bit for bit.

The series are cut into blocks of ``block_series`` consecutive series (positions in the
batch's order). A block is one task: :func:`block_rows` runs :func:`rqa_batch` on the
block's series alone (the very rows the whole batch gives them: every row depends on its
own series only) on the task's device, and returns the block's rows as two arrays, the
floats and the integer counts (with a flag per constant series). The process that called
``rqa_batch`` receives every block -- a few hundred bytes per series -- and writes it
(``out=``: :class:`pyedmcl.rqa.batch_store.BatchStore`, one writer under the output lock,
block by block as they finish) or keeps it in memory.

Where the blocks run:

* one device (``device=``): one after the other in this thread;
* ``devices=`` without ``scheduler``: one thread per device, each taking the next block
  when it is free (a GPU next to a CPU share by their speed); this thread writes;
* ``scheduler=`` (``"local"``: a LocalCluster of ``n_workers`` processes, a scheduler
  address, or a ``distributed.Client``): blocks as Dask tasks; worker ``i`` uses device
  ``devices[i % len(devices)]`` through its own context
  (:class:`pyedmcl.rqa.dask_rqa.RQAWorkerPlugin`). At most a few blocks per worker are
  in flight, so the input crosses the network a few blocks at a time.

A dask array, or a DataArray backed by one (``xr.open_zarr(...)``, ``da.chunk(...)``),
always runs in blocks, read one block at a time: on a cluster the workers load their block themselves (the client never
holds the cube), so a cube larger than a node's memory runs. Its values are checked per
block (a NaN before a series' last value is refused, naming the series, when its block
runs), its constant series noted at the end; its checksum for resuming is dask's token
of the array (its graph: the same files and chunks), not of the values.

Interrupting a job (Ctrl-C, a killed process) leaves every finished block in the store;
the same call computes the others (blocks failing their checksum too).
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..constant_series import RQA_WHY, note_text
from ..validation import (
    ConstantSeriesWarning,
    check_dtype,
    check_embedding,
    check_int,
    check_metric,
)
from .batch_inputs import (
    METHODS,
    Columns,
    as_columns,
    check_threshold_choice,
    dataarray_layout,
    is_lazy,
    per_series,
)
from .batch_result import EXTRA, blocks_quiet, constant_note, result_of
from .batch_store import FLOATS, INTS, BatchStore, normalised, rows_of_frame

#: series per block, at most (a block is one task and one chunk of the store)
BLOCK_SERIES = 1024
#: blocks per worker in flight on a Dask cluster
IN_FLIGHT = 2


class Source:
    """The series of a batch: their count, labels, the layout of the result and the
    values of a block (``(T, k)`` float64, NaN-padded at the end)."""

    def __init__(self, X: Any, name: str, allow_irregular: bool) -> None:
        from ..labels import is_dataarray

        self.lazy = None  # a dask array (T, n): blocks loaded one at a time
        if is_dataarray(X) and is_lazy(X):
            lay = dataarray_layout(X, name, allow_irregular)
            da = lay.names[0]
            self.cols = Columns.layout([], lay.dims, lay.shape, lay.coords)
            self.lazy = da.data.reshape(da.sizes["time"], -1)
        elif is_lazy(X):  # a dask array, time down the rows
            if X.ndim not in (1, 2) or np.dtype(X.dtype).kind not in "biuf" or not X.size:
                raise ValueError(f"{name} is a dask array of shape {X.shape} and dtype "
                                 f"{X.dtype}; allowed: (T,) or (T, N) real numbers, time "
                                 "down the rows, at least one series")
            self.cols = Columns.layout()
            self.lazy = X if X.ndim == 2 else X[:, None]
        else:
            self.cols = as_columns(X, name, allow_irregular)
        self.n = len(self.cols.names) if self.lazy is None else int(self.lazy.shape[1])
        shape = self.cols.shape
        named = self.cols.dims is None and self.lazy is None \
            and self.cols.names != list(range(self.n))
        self.layout = {"dims": None if self.cols.dims is None else list(self.cols.dims),
                       "shape": None if shape is None else list(shape),
                       "coords": {d: np.asarray(v).tolist()
                                  for d, v in (self.cols.coords or {}).items()},
                       "names": list(self.cols.names) if named else None}

    def label(self, j: int) -> Any:
        """The label of series ``j`` (its column name or position, or its index in a
        DataArray)."""
        if self.cols.dims is not None:
            return tuple(int(i) for i in np.unravel_index(j, self.cols.shape or ()))
        return self.cols.names[j] if self.cols.names else j

    def labels(self, s0: int, s1: int) -> list[Any]:
        return [self.label(j) for j in range(s0, s1)]

    def values(self, s0: int, s1: int) -> np.ndarray:
        """Series ``s0 .. s1 - 1`` as columns (trailing NaN padding)."""
        if self.lazy is not None:
            return np.asarray(self.lazy[:, s0:s1].compute(), dtype=np.float64)
        t = int(self.cols.lengths[s0:s1].max())  # the panel's rows: NaN past each length
        return self.cols.panel[s0:s1, :t].T

    def checksum(self) -> str:
        """sha256 of the values (lengths included); for a lazy array, of dask's token."""
        h = hashlib.sha256(b"pyedmcl-rqa-batch-data\0")
        if self.lazy is not None:
            from dask.base import tokenize

            h.update(b"dask:" + tokenize(self.lazy).encode())
        else:
            for s in self.cols.series:
                h.update(np.int64(s.size).tobytes())
                h.update(memoryview(np.ascontiguousarray(s, np.float64)).cast("B"))
        return h.hexdigest()


def _relabel(msg: str, labels: list[Any]) -> str:
    """A block's error naming its series by their labels in the whole batch."""
    m = re.match(r"X column (\d+)(.*)", msg, re.S)
    if m and int(m[1]) < len(labels):
        return f"X column {labels[int(m[1])]!r}{m[2]}"
    return msg


def _one(vals: list[Any]) -> Any:
    """One value for every series of a block where they agree, else the list."""
    return vals[0] if all(v == vals[0] for v in vals) else list(vals)


def block_rows(run: Callable[..., Any], values: np.ndarray, labels: list[Any], radius: Any,
               rate: Any, kw: dict[str, Any], device: Any) -> tuple[np.ndarray, np.ndarray]:
    """One block's rows (the store's floats and counts, with the constant flags):
    ``run`` (:func:`pyedmcl.rqa_batch`, in one call) of its series on ``device``."""
    with blocks_quiet():  # the batch notes its constant series once
        try:
            df = run(values, radius=radius, recurrence_rate=rate, device=device, **kw)
        except ValueError as exc:
            raise ValueError(_relabel(str(exc), labels)) from None
    constant = np.nanmin(values, axis=0) == np.nanmax(values, axis=0)
    return rows_of_frame(df, constant)


def _dask_block(run: Callable[..., Any], values: np.ndarray, labels: list[Any], radius: Any,
                rate: Any, kw: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """One Dask task: a block on the worker's own device context."""
    from distributed import get_worker

    from .dask_rqa import PLUGIN

    return block_rows(run, values, labels, radius, rate, kw, get_worker().plugins[PLUGIN].be)


def _job_value(vals: list[Any]) -> Any:
    """A per-series option as the job's parameters keep it: one value, or the checksum of
    the values (a list of 10**5 radii is not an attribute)."""
    if all(v == vals[0] for v in vals):
        return None if vals[0] is None else float(vals[0])
    a = np.asarray(vals, np.float64)
    return {"n": int(a.size), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


def _check_options(src: Source, kw: dict[str, Any]) -> None:
    """What the blocks would refuse, refused before any block runs (or a store is made):
    the options, and each series' length against E, tau and the minima (for a lazy
    input the lengths are known only once a block is read: checked then)."""
    from .core import _check_common
    from .threshold import check_threshold_rule

    check_metric(kw["metric"])
    check_threshold_rule(kw["threshold_rule"])
    check_dtype(kw["dtype"], None)
    if src.lazy is not None:  # (the minima against each length: when its block runs)
        _check_common(kw["l_min"], kw["v_min"], kw["w_min"], kw["theiler"],
                      kw["theiler_scope"], "row", None, 2**62)
        return
    seen: set[int] = set()
    for j, s in enumerate(src.cols.series):
        if s.size in seen:
            continue
        seen.add(s.size)
        try:
            n = check_embedding(s.size, kw["E"], kw["tau"], "x")
            _check_common(kw["l_min"], kw["v_min"], kw["w_min"], kw["theiler"],
                          kw["theiler_scope"], "row", None, n)
        except ValueError as exc:
            raise ValueError(f"X column {src.label(j)!r}: {exc}") from None


def _block_size(block_series: Any, stored: dict[str, Any], n: int, workers: int) -> int:
    """Series per block: given; a store's when resuming; else enough blocks for every
    worker (a few each) and at most :data:`BLOCK_SERIES`."""
    if block_series is not None:
        return check_int(block_series, "block_series", 1)
    if stored.get("n_series") == n and stored.get("block_series"):
        return int(stored["block_series"])
    return max(1, min(BLOCK_SERIES, -(-n // (4 * max(1, workers)))))


def _stored(out: Any) -> dict[str, Any]:
    from pathlib import Path

    if out is None or not Path(out).is_dir():
        return {}
    try:
        return dict(BatchStore.open_existing(out).params)
    except ValueError:  # not a store of ours: BatchStore.open says why
        return {}


def rqa_batch_blocks(run: Callable[..., Any], X: Any, *, radius: Any, recurrence_rate: Any, out: Any,
                     block_series: Any, overwrite: bool, progress: Any, scheduler: Any,
                     n_workers: Any, devices: Any, device: Any, backend: str | None,
                     allow_irregular: bool, window: Any, step: Any, **kw: Any) -> Any:
    """:func:`pyedmcl.rqa_batch` in blocks (see the module docstring): ``run`` is
    ``rqa_batch`` itself, called on each block's series; ``kw``: the options every block
    passes on (E, tau, metric, minima, dtype, method, ...)."""
    from ..progress import Progress, resolve
    from .core import _check_E_tau, check_radius, check_rate

    if window is not None or step is not None:
        raise ValueError("window=/step= run in one process: not with out=, block_series=, "
                         "devices= or scheduler= (give whole series)")
    n_workers = check_int(n_workers, "n_workers", 1)
    if scheduler is not None and not isinstance(scheduler, str) \
            and type(scheduler).__name__ != "Client":
        raise ValueError(f"scheduler={scheduler!r} is not supported; allowed: a Dask "
                         "scheduler address, 'local' (a LocalCluster) or a distributed.Client")
    if scheduler == "local":  # before any output is made
        from ..dask_local import check_main_guard

        check_main_guard()
    show = resolve(progress)
    src = Source(X, "X", bool(allow_irregular))
    check_threshold_choice(radius, recurrence_rate)
    radii = per_series(radius, src.n, "radius", check_radius)
    rates = per_series(recurrence_rate, src.n, "recurrence_rate", check_rate)
    kw["E"], kw["tau"] = _check_E_tau(kw["E"], kw["tau"])
    if kw["method"] not in METHODS:
        raise ValueError(f"method={kw['method']!r} is not supported; allowed: "
                         f"{', '.join(map(repr, METHODS))}")
    _check_options(src, kw)
    bes = _devices(devices, device, backend, scheduler)
    for be in bes:  # float64 on a device without it: refused before a store is made
        check_dtype(kw["dtype"], be.info)
    workers = n_workers if scheduler is not None else len(bes)
    stored = _stored(out)
    bs = _block_size(block_series, stored, src.n, workers)
    params = normalised({  # (the data's checksum: only for a store, which resumes by it)
        "n_series": src.n, "block_series": bs,
        "data_sha256": None if out is None else src.checksum(),
        "radius": _job_value(radii), "recurrence_rate": _job_value(rates),
        **{k: kw[k] for k in ("E", "tau", "metric", "theiler", "l_min", "v_min", "w_min",
                              "theiler_scope", "white_border", "threshold_rule")},
        "dtype": str(np.dtype(kw["dtype"])), "layout": src.layout})
    store = None if out is None else BatchStore.open(out, params, overwrite=overwrite)
    blocks = [(b, b * bs, min(src.n, (b + 1) * bs)) for b in range(-(-src.n // bs))]
    todo = blocks if store is None else [blocks[b] for b in store.pending()]
    if src.lazy is None and src.n:  # in memory: warned of up front, as the whole batch does
        constant_note(src.cols)
    floats = np.full((src.n, len(FLOATS)), np.nan) if store is None else None
    ints = np.zeros((src.n, len(INTS)), np.int64) if store is None else None
    bar = Progress(len(todo), "rqa_batch", show, unit="block")

    def sink(blk: tuple[int, int, int], rows: tuple[np.ndarray, np.ndarray]) -> None:
        b, s0, s1 = blk
        if store is not None:
            store.write_block(b, *rows)
        else:
            floats[s0:s1], ints[s0:s1] = rows
        bar.update()

    job = dict(kw, backend=backend)
    try:
        if scheduler is not None and todo:  # (a finished store: no cluster started)
            _run_dask(run, src, todo, radii, rates, job, sink, scheduler=scheduler,
                      n_workers=n_workers, devices=devices, backend=backend)
        else:
            def compute(blk: tuple[int, int, int], be: Any) -> tuple[np.ndarray, np.ndarray]:
                _, s0, s1 = blk
                return block_rows(run, src.values(s0, s1), src.labels(s0, s1),
                                  _one(radii[s0:s1]), _one(rates[s0:s1]), job, be)

            _run_local(bes, todo, compute, sink)
    finally:
        bar.close()
    return _finish(src, store, floats, ints)


def _finish(src: Source, store: BatchStore | None, floats: np.ndarray | None,
            ints: np.ndarray | None) -> Any:
    """The batch's result from the store (or the rows kept in memory)."""
    import pandas as pd

    from .measures import MEASURES

    if store is not None:
        df, constant = store.frame()
    else:
        assert floats is not None and ints is not None
        cols = {**{k: floats[:, j] for j, k in enumerate(FLOATS)},
                **{k: ints[:, j] for j, k in enumerate(INTS)}}
        df = pd.DataFrame({k: cols[k] for k in (*MEASURES, *EXTRA)})
        constant = ints[:, -1] != 0
    if src.lazy is not None and constant.any():  # known once the blocks ran
        labels = [str(src.label(j)) for j in np.flatnonzero(constant)]
        warnings.warn(note_text("rqa_batch", labels, RQA_WHY), ConstantSeriesWarning,
                      stacklevel=4)
    cols_in = None if src.lazy is not None else src.cols
    return result_of(df, src.layout, constant, cols=cols_in)


def _devices(devices: Any, device: Any, backend: str | None, scheduler: Any) -> list[Any]:
    """The backends the blocks of this process run on (one per device, duplicates
    dropped); with a scheduler, none (the workers choose theirs)."""
    from .core import _backends

    if scheduler is not None:
        return []
    bes: list[Any] = []
    for be in _backends(device, devices, backend):
        if not any(be is b for b in bes):
            bes.append(be)
    return bes


def _run_local(bes: list[Any], todo: list[tuple[int, int, int]],
               compute: Callable[[tuple[int, int, int], Any], Any],
               sink: Callable[[tuple[int, int, int], Any], None]) -> None:
    """Blocks on this node's devices: one device in this thread; several, one thread each
    taking the next block when free, their rows handed to this thread, which writes them.
    An exception (or Ctrl-C) stops the threads after their current block."""
    if len(bes) == 1:
        for blk in todo:
            sink(blk, compute(blk, bes[0]))
        return
    work: queue.Queue = queue.Queue()
    for blk in todo:
        work.put(blk)
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def run(be: Any) -> None:
        try:
            while not stop.is_set():
                try:
                    blk = work.get_nowait()
                except queue.Empty:
                    return
                done.put((blk, compute(blk, be)))
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
            done.put((None, exc))
        finally:
            done.put((None, None))

    threads = [threading.Thread(target=run, args=(be,), name="pyedmcl-rqa-batch",
                                daemon=True) for be in bes]
    for t in threads:
        t.start()
    try:
        ended = 0
        while ended < len(threads):
            try:
                blk, got = done.get(timeout=0.5)
            except queue.Empty:
                continue
            if blk is None:
                if got is not None:
                    raise got
                ended += 1
                continue
            sink(blk, got)
    finally:
        stop.set()
        for t in threads:
            t.join()


def _run_dask(run: Callable[..., Any], src: Source, todo: list[tuple[int, int, int]], radii: list[Any],
              rates: list[Any], job: dict[str, Any], sink: Callable[..., None], *,
              scheduler: Any, n_workers: int, devices: Any, backend: str | None) -> None:
    """Blocks as Dask tasks, at most :data:`IN_FLIGHT` per worker at a time (a block's
    series sent when its task is); their rows written here as they come. Tasks still
    queued when this stops are cancelled."""
    from ..dask_local import connect, disconnect, register_plugin, run_tasks
    from .dask_rqa import PLUGIN, RQAWorkerPlugin

    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d]
    client, cluster, own = connect(scheduler, n_workers)
    try:
        register_plugin(client, RQAWorkerPlugin(devices, None if backend == "pyopencl"
                                                else backend), PLUGIN)
        workers = max(1, len(client.scheduler_info().get("workers", {})),
                      n_workers if scheduler == "local" else 1)
        blocks = {b: (b, s0, s1) for b, s0, s1 in todo}

        def tasks():
            for b, s0, s1 in todo:
                data = (client.compute(src.lazy[:, s0:s1]) if src.lazy is not None
                        else client.scatter(src.values(s0, s1), hash=False))
                yield b, (run, data, src.labels(s0, s1), _one(radii[s0:s1]),
                          _one(rates[s0:s1]), job)

        run_tasks(client, _dask_block, tasks(),
                  key=f"pyedmcl-rqa-batch-{uuid.uuid4().hex}",  # never another call's results
                  on_result=lambda b, rows: sink(blocks[b], rows),
                  in_flight=IN_FLIGHT * workers)
    finally:
        disconnect(client, cluster, own)
