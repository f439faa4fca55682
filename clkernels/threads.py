"""One host thread per device, for work that several devices share from one queue
(:func:`pull_tasks`: the tile scheduler the cross map's row blocks and RQA's bands use)."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

D = TypeVar("D")

#: the interpreter's thread switch interval (seconds) while several device threads run:
#: each enqueues its launches from Python, and under the default interval (5 ms) a
#: thread that wants the interpreter lock can wait that long behind another, delaying
#: its device's launches (decision 0169)
SWITCH_INTERVAL = 0.0005


@contextmanager
def short_switches() -> Iterator[None]:
    """Within the block, the interpreter switches threads at least every
    :data:`SWITCH_INTERVAL` (the setting before is restored after; a shorter one is left
    as it is)."""
    before = sys.getswitchinterval()
    if before <= SWITCH_INTERVAL:
        yield
        return
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_per_device(work: Callable[[D, threading.Event], Any], devices: Sequence[D]) -> None:
    """Run ``work(device, stop)`` for every device at once and return when all are done.

    One device runs in the calling thread: some runtimes (Oclgrind) must not see a queue
    used from a thread other than the one that made it. Several run one thread each. The
    first exception sets ``stop`` (the others should check it between tasks and return)
    and is re-raised here once every thread has ended. Several threads run under
    :func:`short_switches`.
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
        with short_switches():
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    if errors:
        raise errors[0]


S = TypeVar("S")
C = TypeVar("C")
T = TypeVar("T")


def pull_tasks(slots: Sequence[S], tasks: Sequence[T], *,
               open_slot: Callable[[int, S], C],
               run: Callable[[C, T], Any],
               settle: Callable[[C, Any], None],
               close_slot: Callable[[C, bool, bool], None] | None = None,
               own: Sequence[Sequence[T]] | None = None,
               leave_one_each: bool = False,
               all_started: Callable[[], None] | None = None) -> None:
    """Tasks over devices, dynamically balanced: the tile scheduler of one node.

    Each slot (a device) gets a thread (:func:`run_per_device`) that makes its context
    there (``open_slot(i, slot)``, in that thread: some runtimes tie a queue to the
    thread that made it), then takes tasks: its own first (``own[i]``), then the next of
    the shared queue. ``run(ctx, task)`` enqueues a task and returns a handle;
    ``settle(ctx, handle)`` of the task before follows, so the device works on the new
    task while the host waits for (or reads) the one before: one task of look-ahead, and
    a fast device takes more tasks than a slow one. The last handle is settled when the
    queue is empty (unless stopped), then ``close_slot(ctx, failed, stopped)`` runs in the
    thread: ``failed``, this slot raised (its error is the one reported); ``stopped``,
    another slot's error ended the run early.

    ``leave_one_each``: a thread takes a task beyond its first only while more are left
    than threads yet to take one (with one task per device, each device runs its own
    however late its thread starts). ``all_started()``: once, when every slot has
    enqueued its first task or found none. The first error stops the others and is
    raised here once every thread has ended.
    """
    todo = deque(tasks)
    mine = [deque(o) for o in own] if own is not None else [deque() for _ in slots]
    lock = threading.Lock()
    waiting = [len(slots)]  # threads that have taken no shared task yet
    left = set(range(len(slots)))

    def started(i: int) -> None:
        with lock:
            if i not in left:
                return
            left.discard(i)
            now = not left
        if now and all_started is not None:
            all_started()

    def take(i: int, first: bool) -> T | None:
        with lock:
            if mine[i]:
                return mine[i].popleft()
            if not todo or (leave_one_each and not first and len(todo) <= waiting[0]):
                return None
            if first:
                waiting[0] -= 1
            return todo.popleft()

    def worker(i_slot: tuple[int, S], stop: threading.Event) -> None:
        i, slot = i_slot
        failed = True
        ctx = None
        try:
            ctx = open_slot(i, slot)
            pending, has_pending, first = None, False, True
            while not stop.is_set():
                task = take(i, first)
                if task is None:
                    break
                first = False
                handle = run(ctx, task)
                started(i)
                if has_pending:
                    settle(ctx, pending)
                pending, has_pending = handle, True
            if has_pending and not stop.is_set():
                settle(ctx, pending)
            failed = False
        finally:
            started(i)
            if close_slot is not None and ctx is not None:
                close_slot(ctx, failed, stop.is_set())

    run_per_device(worker, list(enumerate(slots)))
