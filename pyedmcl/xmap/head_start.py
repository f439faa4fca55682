"""A map's head start: k-NN tables on the GPUs while the host still prepares the panel.

The in-memory map's host pass (the transposing copy, the centring, the float32 cast) hands
each band of rows to the job's GPUs as it is made (decision 0101); the skill needs every
target, so it waits for the whole pass, but a block's k-NN tables need only the block's
own rows. :class:`HeadStart` gives each GPU an :class:`~pyedmcl.xmap.engine.XmapEngine`
at the first band, and the pass's threads enqueue the tables of each GPU's share of the
blocks (:meth:`XmapEngine.tables_ahead`) as soon as their rows are on it. The pass and the
k-NN then overlap (the first band is ready early in the pass); the map's blocks take the tables made ahead, the same tables bit for bit. Where a
library's k-NN is light the enqueueing costs the pass more than it hides, and the engine
declines (:data:`~pyedmcl.xmap.engine.AHEAD_MIN_TERMS`; decision 0105).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .engine import XmapEngine
from .job import EngineSpec


class HeadStart:
    """Tables of the first blocks of each device, enqueued while the panel is uploaded.

    ``engines``: per device of the job, the function that makes its engine or None (a
    device that the head start leaves alone, e.g. a CPU, whose engine uploads the
    finished panel). Device ``d`` of ``D`` takes blocks ``d, d + D, d + 2D, ...`` (the
    blocks are even, :func:`~pyedmcl.xmap.core.even_blocks`) in order. The threads of
    the pass feed the devices: :meth:`written` (called by the thread that wrote the rows)
    enqueues the tables of every block whose rows are now all there, on a device no
    other thread is feeding at that moment (no thread of its own: a feeder thread beside
    the pass measured the same). :meth:`close` ends the head start just before the map;
    the blocks not taken by then are computed as usual."""

    def __init__(self, engines: Sequence[Callable[[], XmapEngine] | None],
                 blocks: Sequence[tuple[int, int, int]], N: int):
        self._written = np.zeros(N, bool)
        self._lock = threading.Lock()  # guards _written, _closed and _todo
        self._closed = False
        self._makers = list(engines)
        D = len(engines)
        self._todo = [list(blocks[d::D]) if make is not None else [] for d, make in
                      enumerate(engines)]
        self._feeding = [threading.Lock() for _ in engines]
        self.engines: list[XmapEngine | None] = [None] * D
        #: per device, the blocks whose tables it enqueued (its own to compute)
        self.claimed: list[list[tuple[int, int, int]]] = [[] for _ in engines]
        self._errors: list[BaseException] = []

    def written(self, rows: slice) -> None:
        """Rows ``rows`` of the panel are on every device (their writes enqueued): the
        calling thread enqueues the blocks that became ready."""
        with self._lock:
            self._written[rows] = True
        for d in range(len(self._todo)):
            self._feed(d)

    def _next(self, d: int) -> tuple[int, int, int] | None:
        with self._lock:
            todo = self._todo[d]
            if self._closed or not todo or not self._written[todo[0][1]:todo[0][2]].all():
                return None
            return todo[0]

    def _feed(self, d: int) -> None:
        """Enqueue device ``d``'s ready blocks, unless another thread is at it (that one
        looks again once it lets go, so a block that became ready meanwhile is taken)."""
        while self._next(d) is not None:
            if not self._feeding[d].acquire(blocking=False):
                return
            try:
                while (blk := self._next(d)) is not None:
                    if self.engines[d] is None:
                        self.engines[d] = self._makers[d]()
                    taken = self.engines[d].tables_ahead(blk[1], blk[2])
                    with self._lock:
                        if not taken:
                            self._todo[d].clear()
                            return
                        self._todo[d].pop(0)
                        self.claimed[d].append(blk)
            except BaseException as exc:  # noqa: BLE001 - re-raised by close()
                self._errors.append(exc)
                with self._lock:
                    self._todo[d].clear()
                return
            finally:
                self._feeding[d].release()

    def close(self) -> None:
        """Stop feeding (a thread at it ends its block first) and hand the engines to the
        map, which computes the blocks left as usual. Re-raises a feeder's error.
        Idempotent."""
        with self._lock:
            self._closed = True
        for lock in self._feeding:
            with lock:
                pass
        if self._errors:
            raise self._errors[0]

    def release(self) -> None:
        """Stop feeding and drop the engines and their tables, whether or not the map
        took them (it has ended, or runs another way, e.g. in float64). Idempotent."""
        try:
            self.close()
        finally:
            for eng in self.engines:
                if eng is not None:
                    eng.be.finish()  # (launches still queued read the tables)
                    eng.finish_builds()
            self.engines = [None] * len(self.engines)
            self.claimed = [[] for _ in self.engines]


def engine_maker(be: Any, X: np.ndarray, E: np.ndarray, x_dev: Any,
                 spec: EngineSpec) -> Callable[[], XmapEngine]:
    """The function that makes device ``be``'s engine of a head start (as
    :func:`~pyedmcl.xmap.scheduler.run_local` would make it)."""
    return lambda: spec.engine(be, X, E, x_dev=x_dev, specialise_later=True)
