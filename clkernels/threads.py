"""One host thread per device, for work that several devices share from one queue."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

D = TypeVar("D")


def run_per_device(work: Callable[[D, threading.Event], Any], devices: Sequence[D]) -> None:
    """Run ``work(device, stop)`` for every device at once and return when all are done.

    One device runs in the calling thread: some runtimes (Oclgrind) must not see a queue
    used from a thread other than the one that made it. Several run one thread each. The
    first exception sets ``stop`` (the others should check it between tasks and return)
    and is re-raised here once every thread has ended.
    """
    errors: list[BaseException] = []
    stop = threading.Event()

    def run(device: D) -> None:
        try:
            work(device, stop)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)
            stop.set()

    if len(devices) == 1:
        run(devices[0])
    else:
        threads = [threading.Thread(target=run, args=(d,), daemon=True) for d in devices]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
