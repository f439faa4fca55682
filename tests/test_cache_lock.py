"""PyOpenCL's cache lock left by a process that died holding it is taken for stale and
removed, so that later builds do not wait a minute and fail (clkernels.buildcache)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from conftest import TEST_DEVICES

from clkernels.backends import get_backend
from clkernels.buildcache import STALE_LOCK_SECONDS, drop_stale_lock, pyopencl_cache_dir


def test_old_lock_dropped_fresh_lock_kept(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("")
    assert not drop_stale_lock(tmp_path)  # a live holder's lock: kept
    assert lock.exists()
    old = time.time() - STALE_LOCK_SECONDS - 5
    os.utime(lock, (old, old))
    assert drop_stale_lock(tmp_path)
    assert not lock.exists()
    assert not drop_stale_lock(tmp_path)  # no lock: nothing to do


@pytest.mark.parametrize("device", [d for d in TEST_DEVICES if d.startswith("intel")] or
                         [pytest.param("intel", marks=pytest.mark.skip("no Intel runtime"))])
def test_build_after_a_dead_holder(device, monkeypatch, tmp_path):
    """A build through PyOpenCL's cache (Intel's runtime keeps no binaries of its own)
    with a lock a crashed process left: it builds at once, no minute's wait, no error."""
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(tmp_path))
    folder = pyopencl_cache_dir()
    assert folder is not None and folder.startswith(str(tmp_path))
    lock = os.path.join(folder, "lock")
    with open(lock, "w"):
        pass
    old = time.time() - STALE_LOCK_SECONDS - 5
    os.utime(lock, (old, old))
    be = get_backend(device)
    tag = tmp_path.name.replace("-", "_")  # a source no earlier test built
    k = be.kernel_from_source(
        f"__kernel void lock_{tag}(__global int* a) {{ a[get_global_id(0)] = 7; }}",
        f"lock_{tag}")
    a = be.zeros(4, np.int32)
    be.launch(k, (4,), None, a)  # PyOpenCL would wait a minute here, then raise
    assert (be.to_host(a) == 7).all()
    assert not os.path.exists(lock)
