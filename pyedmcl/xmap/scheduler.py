"""Row blocks over all chosen devices of one node, dynamically scheduled.

One thread per device (the calling thread when there is one), each with its own backend (context, queue, compiled
kernels) and :class:`~pyedmcl.xmap.engine.XmapEngine` (data uploaded once);
a device takes the next block from a shared queue as soon as it is free, so
fast and slow devices (a GPU next to a CPU) share the work by their speed
(:func:`clkernels.threads.pull_tasks`, the tile scheduler RQA's bands use too).
Block results are handed to ``sink(block, rows)`` (the Zarr store, or an
in-memory matrix) from the worker thread, as they finish.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from clkernels import get_backend
from clkernels.threads import pull_tasks

from ..progress import Progress as _Progress
from .engine import XmapEngine
from .job import EngineSpec


class Progress(_Progress):
    """A bar over row blocks with rate and ETA (:class:`pyedmcl.progress.Progress`)."""

    def __init__(self, total: int, desc: str, enabled: bool):
        super().__init__(total, desc, enabled, unit="block")


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
    counts: dict[str, int] = {}
    bar = Progress(len(blocks), "xmap" if task == "xmap" else "optimal E", progress)

    def open_slot(i: int, dev: Any) -> tuple[XmapEngine, str]:
        be = get_backend(dev, backend)
        eng = engines[i] if engines is not None else None
        if eng is None:
            x_dev = None if uploaded is None else uploaded[i]
            # a first-use map may run on generic programs while its own build behind it
            eng = spec.engine(be, X, E, x_dev=x_dev, specialise_later=task == "xmap")
        name = f"{be.info.runtime}:{be.info.name}"
        counts.setdefault(name, 0)
        return eng, name

    def finished(name: str, b: int, rows: np.ndarray) -> None:
        sink(b, rows)
        counts[name] += 1
        bar.update()

    def run(slot: tuple[XmapEngine, str], blk: tuple[int, int, int]) -> Any:
        (eng, name), (b, r0, r1) = slot, blk
        if task == "xmap":  # enqueued here, read once the next block is enqueued
            return b, eng.block_async(r0, r1, None if dest is None else dest(b))
        finished(name, b, eng.edim_block(r0, r1, E_max))
        return None

    def settle(slot: tuple[XmapEngine, str], pending: Any) -> None:
        if pending is not None:
            finished(slot[1], pending[0], pending[1]())

    taken = {b[0] for c in claimed or () for b in c}  # (theirs alone: not in the queue)
    shared = [b for b in blocks if b[0] not in taken]
    try:
        pull_tasks(devices, shared, open_slot=open_slot, run=run, settle=settle,
                   close_slot=lambda slot, failed, stopped: slot[0].finish_builds(),
                   own=claimed, all_started=on_started)
    finally:
        bar.close()
    return counts
