"""Launches prepared now, enqueued later in one burst: the host work of a chain of short
kernels done while an earlier, long kernel runs.

Why. A launcher does host work before each launch (parameters, allocations, uploads,
the kernel's lookup, its arguments' conversion). Where a chain of short kernels follows
a long one, that work done between the short ones leaves the device idle (a GPU runs
each in microseconds); done while the long kernel runs, it costs nothing.

What. :class:`Recorder` stands in for a backend while a chain is prepared: every
launch's arguments are converted (:meth:`~clkernels.backends.base.Backend.bind`) and
kept, nothing is enqueued; everything else (allocations, uploads, kernel builds) goes
to the backend at once. :meth:`Recorder.replay` then enqueues the launches in their
order, each at the cost of the runtime's call alone. The queue sees the same commands
in the same order as without the recorder, except that the uploads made while
recording come before the first recorded launch, not between the launches: only data
the recorded launches read may be uploaded while recording. Reads and waits are
refused while recording (their data would not be computed yet).
"""

from __future__ import annotations

from typing import Any

from .backends.base import Backend

#: backend methods a recorder refuses: they read or wait for results not enqueued yet
_REFUSED = frozenset({"to_host", "to_host_async", "finish", "wait", "event_seconds",
                      "join_streams", "copy_within", "launch_bound"})


class Recorder:
    """A stand-in for ``be`` whose :meth:`launch` records; every other attribute is
    ``be``'s (its own methods that launch, e.g. ``fill``, launch at once: use them only
    for buffers that the recorded launches alone use)."""

    def __init__(self, be: Backend):
        self._be = be
        self._launches: list[tuple] = []

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED:
            raise RuntimeError(f"{name} while launches are recorded: replay them first")
        return getattr(self._be, name)

    def launch(self, kernel: Any, global_size: tuple[int, ...],
               local_size: tuple[int, ...] | None, *args: Any, stream: int = 0,
               wait_for: list[Any] | None = None) -> None:
        """Record one launch (:meth:`Backend.launch`'s arguments); returns no event."""
        self._be.check_launch(global_size, local_size)
        self._launches.append((self._be.bind(kernel, *args), tuple(global_size),
                               None if local_size is None else tuple(local_size), stream,
                               wait_for))

    def __len__(self) -> int:
        return len(self._launches)

    def replay(self) -> list[Any]:
        """Enqueue the recorded launches in their order (once); their events."""
        launches, self._launches = self._launches, []
        return [self._be.launch_bound(b, g, loc, stream=s, wait_for=w)
                for b, g, loc, s, w in launches]
