"""Jobs that launch kernels from Python without full garbage-collector pauses.

A job that feeds a device from Python (host threads preparing data, a launch every
millisecond or so) allocates enough containers to trigger CPython's cyclic collector,
and every call or two that includes a full (oldest-generation) collection, which walks
every tracked object of the process while no other Python thread runs. On an H100 host
that walk took 23-32 ms in the middle of an all-to-all map (about 50,000 objects, the
memory bus busy with the map's host pass) and found nothing to free: the device ran
dry meanwhile (N = 5,000 x 3,780 and 10,000 x 1,000: gaps of 22 and 21 ms).

:func:`collector_quiet` defers full collections while a job runs (the collector's third
threshold raised, the first two kept): young collections go on, and free the cycles a
job makes and drops; a full collection comes at Python's next trigger after the job.
Nested and concurrent jobs share one deferral (the last to end restores the
thresholds); a process whose collector is off (``gc.disable()`` or a first threshold of
0) is left as it is, and so are thresholds changed by someone else meanwhile.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

#: the oldest generation's threshold while a job runs (gen-1 collections before a full one)
DEFERRED = 1 << 30

_lock = threading.Lock()
_active = 0  # jobs inside collector_quiet
_saved: tuple[int, int, int] | None = None  # the thresholds to restore (None: none changed)

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def collector_quiet() -> Iterator[None]:
    """Within: no full collection of the cyclic garbage collector starts."""
    global _active, _saved
    with _lock:
        if _active == 0:
            th = gc.get_threshold()
            _saved = None
            if gc.isenabled() and th[0] > 0 and th[2] < DEFERRED:
                _saved = th
                gc.set_threshold(th[0], th[1], DEFERRED)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                if gc.get_threshold() == (_saved[0], _saved[1], DEFERRED):
                    gc.set_threshold(*_saved)
                _saved = None


def quiet_collector(fn: F) -> F:
    """``fn`` run inside :func:`collector_quiet` (a decorator for job entry points)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with collector_quiet():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]
