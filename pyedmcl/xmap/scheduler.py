"""Row blocks over all chosen devices of one node, dynamically scheduled.

One thread per device (the calling thread when there is one), each with its own backend (context, queue, compiled
kernels) and :class:`~pyedmcl.xmap.engine.XmapEngine` (data uploaded once);
a device takes the next block from a shared queue as soon as it is free, so
fast and slow devices (a GPU next to a CPU) share the work by their speed.
Block results are handed to ``sink(block, rows)`` (the Zarr store, or an
in-memory matrix) from the worker thread, as they finish.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from clkernels import get_backend
from clkernels.threads import run_per_device

from ..progress import Progress as _Progress
from .engine import XmapEngine
from .job import EngineSpec


class Progress(_Progress):
    """A bar over row blocks with rate and ETA (:class:`pyedmcl.progress.Progress`)."""

    def __init__(self, total: int, desc: str, enabled: bool):
        super().__init__(total, desc, enabled, unit="block")


class _Latch:
    """Calls ``fn`` once, when each of ``n`` devices has arrived (:meth:`arrive`)."""

    def __init__(self, n: int, fn: Callable[[], None] | None):
        self._left, self._fn = set(range(n)), fn
        self._lock = threading.Lock()

    def arrive(self, i: int) -> None:
        """Device ``i`` has its first block queued, or none to take (idempotent)."""
        with self._lock:
            if i not in self._left:
                return
            self._left.discard(i)
            now = not self._left
        if now and self._fn is not None:
            self._fn()


def run_local(X: np.ndarray, blocks: Sequence[tuple[int, int, int]], task: str,
              sink: Callable[[int, np.ndarray], None], *, devices: Sequence[Any],
              spec: EngineSpec, E: np.ndarray | None = None, E_max: int = 0,
              backend: str | None = None, progress: bool = False,
              dest: Callable[[int], np.ndarray] | None = None,
              uploaded: Sequence[Any] | None = None,
              engines: Sequence[XmapEngine | None] | None = None,
              claimed: Sequence[Sequence[tuple[int, int, int]]] | None = None,
              on_started: Callable[[], None] | None = None) -> dict[str, int]:
    """Run ``blocks`` = [(block id, r0, r1), ...] of ``task`` ("xmap" or "edim"), each
    device's engine made by ``spec``.

    ``dest(block id)``: the host array an "xmap" block is read into (rows of the
    caller's matrix: no copy); the sink then gets that array. ``uploaded``: per device
    of ``devices``, ``X`` already on it (:class:`XmapEngine`'s ``x_dev``) or None.
    ``engines``: per device, its engine made already (a map's head start,
    :class:`~pyedmcl.xmap.head_start.HeadStart`) or None; ``claimed``: per device, the
    blocks of ``blocks`` that it computes itself, first (their tables are on it), before
    it takes from the shared queue. ``on_started``: called once, when every device has
    its first block queued (or has none): host work beside the map that would slow the
    devices' start (e.g. a gated float32 merge check) starts there. Returns how many
    blocks each device computed.
    """
    devices = list(devices)
    own = [list(c) for c in claimed] if claimed is not None else [[] for _ in devices]
    taken = {b[0] for c in own for b in c}
    todo: queue.Queue = queue.Queue()
    for b in blocks:
        if b[0] not in taken:
            todo.put(b)
    counts: dict[str, int] = {}
    bar = Progress(len(blocks), "xmap" if task == "xmap" else "optimal E", progress)
    latch = _Latch(len(devices), on_started)

    def worker(i_dev: tuple[int, Any], stop: threading.Event) -> None:
        i, dev = i_dev
        be = get_backend(dev, backend)
        eng = engines[i] if engines is not None else None
        if eng is None:
            x_dev = None if uploaded is None else uploaded[i]
            # a first-use map may run on generic programs while its own build behind it
            eng = spec.engine(be, X, E, x_dev=x_dev, specialise_later=task == "xmap")
        try:
            work(eng, be, own[i], stop, lambda: latch.arrive(i))
        finally:
            latch.arrive(i)
            eng.finish_builds()

    def work(eng: XmapEngine, be: Any, mine: list, stop: threading.Event,
             queued: Callable[[], None]) -> None:
        name = f"{be.info.runtime}:{be.info.name}"
        counts.setdefault(name, 0)

        def next_block() -> tuple[int, int, int] | None:
            if mine:
                return mine.pop(0)
            try:
                return todo.get_nowait()
            except queue.Empty:
                return None

        def done(b: int, fetch: Callable[[], np.ndarray]) -> None:
            sink(b, fetch())
            counts[name] += 1
            bar.update()

        pending = None  # (block id, fetch) of the matrix block in flight
        while not stop.is_set():
            blk = next_block()
            if blk is None:
                break
            b, r0, r1 = blk
            if task == "xmap":  # the next block is enqueued before this one is read
                nxt = (b, eng.block_async(r0, r1, None if dest is None else dest(b)))
                queued()
                if pending is not None:
                    done(*pending)
                pending = nxt
            else:
                rows = eng.edim_block(r0, r1, E_max)
                queued()
                sink(b, rows)
                counts[name] += 1
                bar.update()
        if pending is not None and not stop.is_set():
            done(*pending)

    try:
        run_per_device(worker, list(enumerate(devices)))
    finally:
        bar.close()
    return counts
