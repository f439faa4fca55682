"""clkernels.threads.pull_tasks, the node's tile scheduler (cross-map row blocks, RQA
bands): every task once, a slot's own tasks first and on it, one task of look-ahead
(a task is settled after the next is enqueued), a slow slot takes fewer, the fairness
rule, the first error raised and the others stopped. Plain Python slots: no device."""

from __future__ import annotations

import threading
import time

import pytest

from clkernels.threads import pull_tasks


def _record(slots, tasks, delay=None, **kw):
    log, lock = [], threading.Lock()

    def run(ctx, task):
        if delay:
            time.sleep(delay(ctx, task))
        with lock:
            log.append(("run", ctx, task))
        return task

    def settle(ctx, handle):
        with lock:
            log.append(("settle", ctx, handle))

    closed = []
    pull_tasks(slots, tasks, open_slot=lambda i, s: s, run=run, settle=settle,
               close_slot=lambda ctx, failed, stopped: closed.append((ctx, failed, stopped)),
               **kw)
    return log, closed


def test_every_task_once_and_settled_after_the_next_is_enqueued():
    log, closed = _record(["a", "b"], list(range(20)))
    runs = [t for kind, _, t in log if kind == "run"]
    settles = [t for kind, _, t in log if kind == "settle"]
    assert sorted(runs) == list(range(20)) and sorted(settles) == list(range(20))
    for slot in "ab":
        mine = [(kind, t) for kind, s, t in log if s == slot]
        ran = [t for kind, t in mine if kind == "run"]
        # each settle follows the run of the slot's next task (or ends its list)
        for i, t in enumerate(ran[:-1]):
            assert mine.index(("settle", t)) > mine.index(("run", ran[i + 1]))
    assert sorted(closed) == [("a", False, False), ("b", False, False)]


def test_own_tasks_first_and_on_their_slot():
    log, _ = _record(["a", "b"], [3, 4, 5], own=[[0, 1], [2]])
    first = {}
    for kind, slot, t in log:
        if kind == "run":
            first.setdefault(slot, []).append(t)
    assert first["a"][:2] == [0, 1] and first["b"][0] == 2
    assert sorted(t for k, _, t in log if k == "run") == [0, 1, 2, 3, 4, 5]


def test_a_slow_slot_takes_fewer():
    log, _ = _record(["fast", "slow"], list(range(30)),
                     delay=lambda ctx, task: 0.03 if ctx == "slow" else 0.001)
    n = {s: sum(1 for k, c, _ in log if k == "run" and c == s) for s in ("fast", "slow")}
    assert n["fast"] > n["slow"], n


@pytest.mark.parametrize("fair", [True, False])
def test_leave_one_each_gives_a_late_slot_its_task(fair):
    """A slot that opens late still gets one of two tasks with the rule; without it the
    early slot takes both (what RQA's row ranges must not do)."""
    ran = []

    def open_slot(i, s):
        if s == "late":
            time.sleep(0.2)
        return s

    pull_tasks(["early", "late"], [0, 1], open_slot=open_slot,
               run=lambda ctx, t: ran.append(ctx), settle=lambda ctx, h: None,
               leave_one_each=fair)
    assert sorted(ran) == (["early", "late"] if fair else ["early", "early"])


def test_all_started_once_and_errors_reach_the_caller():
    called = []
    _record(["a", "b", "c"], list(range(5)), all_started=lambda: called.append(1))
    assert called == [1]

    def run(ctx, task):
        if ctx == "bad":
            raise ValueError("broken device")
        time.sleep(0.01)
        return task

    closed = []
    with pytest.raises(ValueError, match="broken device"):
        pull_tasks(["bad", "good"], list(range(50)), open_slot=lambda i, s: s, run=run,
                   settle=lambda ctx, h: None,
                   close_slot=lambda ctx, failed, stopped: closed.append((ctx, failed)))
    assert ("bad", True) in closed and ("good", False) in closed


def test_short_switches_restores_the_interval():
    """Device threads switch at least every SWITCH_INTERVAL while they run; the setting
    before comes back after (also after an error), and a shorter one is left alone."""
    import sys

    from clkernels import threads

    before = sys.getswitchinterval()
    seen = []
    try:
        sys.setswitchinterval(0.005)
        threads.run_per_device(lambda d, stop: seen.append(sys.getswitchinterval()), [1, 2])
        assert seen == [pytest.approx(threads.SWITCH_INTERVAL)] * 2
        assert sys.getswitchinterval() == 0.005
        with pytest.raises(ValueError), threads.short_switches():
            raise ValueError
        assert sys.getswitchinterval() == 0.005
        sys.setswitchinterval(0.0001)
        shorter = sys.getswitchinterval()  # (stored in microseconds)
        with threads.short_switches():
            assert sys.getswitchinterval() == shorter
    finally:
        sys.setswitchinterval(before)
