"""clkernels.collector: full garbage collections deferred while a job runs, the
collector's state restored after it; the in-memory map and RQA run inside."""

import gc
import threading

import numpy as np
import pytest
from conftest import CPU_DEVICE

from clkernels import collector
from clkernels.collector import DEFERRED, collector_quiet, quiet_collector


@pytest.fixture
def thresholds():
    """The test's collector thresholds (700, 10, 10), restored after it."""
    saved, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield (700, 10, 10)
    gc.set_threshold(*saved)
    (gc.enable if enabled else gc.disable)()


def test_full_collections_deferred_and_restored(thresholds):
    """Inside: the first two thresholds kept, the third DEFERRED; after, the thresholds
    before, also where the job raised; nested jobs restore once, at the outer end."""
    with collector_quiet():
        assert gc.get_threshold() == (700, 10, DEFERRED)
        with collector_quiet():
            assert gc.get_threshold() == (700, 10, DEFERRED)
        assert gc.get_threshold() == (700, 10, DEFERRED)
    assert gc.get_threshold() == thresholds

    @quiet_collector
    def job(fail: bool) -> tuple[int, ...]:
        if fail:
            raise RuntimeError("job failed")
        return gc.get_threshold()

    assert job(False) == (700, 10, DEFERRED) and job.__name__ == "job"
    with pytest.raises(RuntimeError, match="job failed"):
        job(True)
    assert gc.get_threshold() == thresholds and collector._active == 0


def test_concurrent_jobs_share_one_deferral(thresholds):
    """Two jobs in threads: the first to end leaves the deferral to the other, the last
    restores the thresholds."""
    inside, release_a, done_a = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with collector_quiet():
            inside.set()
            release_a.wait(10)
        done_a.set()

    t = threading.Thread(target=a)
    t.start()
    assert inside.wait(10)
    with collector_quiet():
        release_a.set()
        assert done_a.wait(10)
        seen["after a"] = gc.get_threshold()
    t.join(10)
    assert seen["after a"] == (700, 10, DEFERRED)
    assert gc.get_threshold() == thresholds


def test_collector_left_alone_where_off_or_changed(thresholds):
    """A disabled collector (gc.disable, or a first threshold of 0) is left as it is;
    thresholds set by someone else during the job are not overwritten at its end."""
    gc.disable()
    with collector_quiet():
        assert gc.get_threshold() == thresholds
    gc.enable()
    gc.set_threshold(0, 10, 10)
    with collector_quiet():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(*thresholds)
    with collector_quiet():
        gc.set_threshold(500, 5, 5)
    assert gc.get_threshold() == (500, 5, 5)


def test_map_and_rqa_run_inside(thresholds, monkeypatch, tmp_path):
    """The in-memory map and RQA run with full collections deferred; a map into a store
    (a job of hours) leaves the collector alone; the thresholds are back after each."""
    import pyedmcl as pe
    from pyedmcl.rqa import core as rqa_core
    from pyedmcl.xmap import core as xmap_core

    seen = []
    inner, series = xmap_core._xmap, rqa_core.as_series

    def spy_xmap(X, heads, job):
        seen.append(("xmap", job.out is not None, gc.get_threshold()[2]))
        return inner(X, heads, job)

    def spy_series(*a, **k):
        seen.append(("rqa", False, gc.get_threshold()[2]))
        return series(*a, **k)

    monkeypatch.setattr(xmap_core, "_xmap", spy_xmap)
    monkeypatch.setattr(rqa_core, "as_series", spy_series)
    X = np.random.default_rng(0).standard_normal((60, 3))
    pe.xmap(X, E=2, device=CPU_DEVICE)
    pe.xmap(X, E=2, device=CPU_DEVICE, out=tmp_path / "m.zarr")
    pe.rqa(X[:, 0], E=2, radius=0.5, device=CPU_DEVICE)
    assert seen == [("xmap", False, DEFERRED), ("xmap", True, 10), ("rqa", False, DEFERRED)]
    assert gc.get_threshold() == thresholds
