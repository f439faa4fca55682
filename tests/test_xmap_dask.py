"""pe.xmap on a real Dask LocalCluster of 2 worker processes (each its own OpenCL
context, built by the worker plugin): same matrix as one device, bit for bit,
also when one worker is SIGKILLed mid-job (the scheduler reruns its blocks)."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
from conftest import wait_for_done_blocks
from test_xmap import mixed_E, panel

import pyedmcl as pe

distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")


def _slow_blocks(delay: float) -> None:
    """Run on each worker: make every block take ``delay`` s longer."""
    import time as _t

    from pyedmcl.xmap.engine import XmapEngine
    if getattr(XmapEngine, "_slowed", False):
        return
    blk = XmapEngine.block

    def slow(self, r0, r1):
        _t.sleep(delay)
        return blk(self, r0, r1)
    XmapEngine.block = slow
    XmapEngine._slowed = True


def test_local_cluster_bit_identical_and_worker_killed(tmp_path):
    X = panel(L=70, N=20, seed=11)
    E = mixed_E(20)
    ref = pe.xmap(X, E=E).rho

    # scheduler="local": pe.xmap starts (and closes) its own LocalCluster of 2 processes
    r = pe.xmap(X, E="auto", max_E=3, out=tmp_path / "a.zarr", scheduler="local", n_workers=2,
                block_rows=4)
    own = pe.xmap(X, E="auto", max_E=3)
    np.testing.assert_array_equal(r.E, own.E)
    np.testing.assert_array_equal(r.rho[:], own.rho)
    assert len(r.blocks_per_device) == 2  # both workers took blocks

    # joining an existing cluster; one worker is killed mid-job
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_slow_blocks, 0.5)
        out = tmp_path / "k.zarr"
        res: dict = {}

        def job():
            try:
                res["r"] = pe.xmap(X, E=E, out=out, scheduler=cluster.scheduler_address,
                                   block_rows=2)
            except BaseException as exc:  # noqa: BLE001
                res["exc"] = exc

        th = threading.Thread(target=job)
        th.start()
        done = wait_for_done_blocks(out, 2, th.is_alive)
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]
        os.kill(pids[victim], signal.SIGKILL)
        th.join(180)
        assert not th.is_alive()
        assert "exc" not in res, res.get("exc")
        assert 2 <= done < 10, f"kill did not land mid-job (done={done})"
        np.testing.assert_array_equal(res["r"].rho[:], ref)


def test_local_cluster_surrogates_bit_identical(tmp_path):
    """xmap with surrogates on 2 worker processes: the row blocks of the extended panel
    are reduced on the workers; rho, p-values and null summaries equal one device's."""
    X = panel(L=60, N=6, seed=4)
    ref = pe.xmap(X, E=2, surrogates=19, seed=5)
    r = pe.xmap(X, E=2, surrogates=19, seed=5, out=tmp_path / "s.zarr", scheduler="local",
                n_workers=2, block_rows=2)
    for k in ("rho", "p_value", "null_mean", "null_q95"):
        np.testing.assert_array_equal(np.asarray(getattr(r, k)[:]), np.asarray(getattr(ref, k)))
    assert pe.xmap_verify(tmp_path / "s.zarr").ok
