"""Bound launches (``Backend.bind`` / ``Backend.launch_bound``), recorded ones
(:class:`clkernels.recording.Recorder`) and RQA's use of them.

A bound kernel launched with some arguments changed runs exactly as ``launch`` with the
full argument list; the change holds for that launch only. RQA's D&R runner binds each
task's launches once: its histograms equal those of a launch-by-launch run on every
platform, and a runner that takes many bands (a Dask worker) keeps no bound launches of
bands it has finished (they hold device buffers).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from clkernels import get_backend
from clkernels.arrays import gather_request
from clkernels.backends.base import Backend

dnr = importlib.import_module("pyedmcl.rqa.dnr")


def test_bound_launch_equals_launch(device):
    be = get_backend(device)
    a = be.to_device(np.arange(40, dtype=np.float32))
    idx = be.to_device(np.array([3, -1, 7, 0], np.int32))
    k = be.kernel(*gather_request(np.float32))
    outs = [be.empty((2, 4), np.float32) for _ in range(3)]
    bound = be.bind(k, a, np.uint32(10), idx, np.uint32(4), np.float32(-5.0), outs[0])
    be.launch_bound(bound, (4, 2), (1, 1))
    be.launch_bound(bound, (4, 2), (1, 1), {1: np.uint32(20), 5: outs[1]})  # this launch only
    be.launch_bound(bound, (4, 2), (1, 1), {4: np.float32(9.0), 5: outs[2]})
    got = [be.to_host(o) for o in outs]
    ref = []
    for lda, fill in ((10, -5.0), (20, -5.0), (10, 9.0)):
        o = be.empty((2, 4), np.float32)
        be.launch(k, (4, 2), (1, 1), a, np.uint32(lda), idx, np.uint32(4), np.float32(fill), o)
        ref.append(be.to_host(o))
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_array_equal(ref[1][1], [23, -5, 27, 20])  # row 1 of lda 20


def test_bound_launch_after_another_declaration(device):
    """A plain launch of the same kernel with other scalar types in between (PyOpenCL
    re-declares the kernel's scalar types) does not change what a bound launch passes."""
    be = get_backend(device)
    a = be.to_device(np.arange(40, dtype=np.float32))
    idx = be.to_device(np.array([3, -1, 7, 0], np.int32))
    k = be.kernel(*gather_request(np.float32))
    out, other = be.empty((2, 4), np.float32), be.empty((2, 4), np.float32)
    bound = be.bind(k, a, np.uint32(10), idx, np.uint32(4), np.float32(-5.0), out)
    be.launch(k, (4, 2), (1, 1), a, np.int32(20), idx, np.int32(4), np.float32(1.0), other)
    be.launch_bound(bound, (4, 2), (1, 1))
    if bound.dtypes is not None:
        assert k.arg_dtypes == bound.dtypes
    np.testing.assert_array_equal(be.to_host(out), [[3, -5, 7, 0], [13, -5, 17, 10]])
    np.testing.assert_array_equal(be.to_host(other), [[3, 1, 7, 0], [23, 1, 27, 20]])


def test_base_bound_launch_passes_the_arguments():
    """The interface's default (backends without their own) launches the full list."""
    seen = []

    def launch(kernel, global_size, local_size, *args, stream=0, wait_for=None):
        seen.append((kernel, global_size, args, stream, wait_for))

    be = SimpleNamespace(launch=launch)
    bound = Backend.bind(be, "k", 1, 2, 3)
    Backend.launch_bound(be, bound, (8,), (4,), {1: 5}, stream=1, wait_for=["e"])
    Backend.launch_bound(be, bound, (8,), (4,))
    assert seen == [("k", (8,), (1, 5, 3), 1, ["e"]), ("k", (8,), (1, 2, 3), 0, None)]


def test_recorded_launches_run_at_replay_in_order(device):
    """A :class:`~clkernels.recording.Recorder` enqueues nothing while it records (the
    buffer is still as uploaded), then its launches in their order (the second writes
    over the first); reads are refused while recording; other calls are the backend's."""
    from clkernels.recording import Recorder

    be = get_backend(device)
    a = be.to_device(np.arange(40, dtype=np.float32))
    idx = be.to_device(np.array([3, -1, 7, 0], np.int32))
    out = be.to_device(np.zeros((2, 4), np.float32))
    rec = Recorder(be)
    k = rec.kernel(*gather_request(np.float32))
    rec.launch(k, (4, 2), (1, 1), a, np.uint32(10), idx, np.uint32(4), np.float32(-5.0), out)
    rec.launch(k, (4, 1), (1, 1), a, np.uint32(20), idx, np.uint32(4), np.float32(9.0), out)
    with pytest.raises(RuntimeError, match="replay"):
        rec.to_host(out)
    assert len(rec) == 2 and rec.info is be.info
    np.testing.assert_array_equal(be.to_host(out), np.zeros((2, 4)))
    assert len(rec.replay()) == 2 and len(rec) == 0
    np.testing.assert_array_equal(be.to_host(out), [[3, 9, 7, 0], [13, -5, 17, 10]])


def _series(n: int = 700) -> np.ndarray:
    t = np.arange(n)
    return np.sin(0.21 * t) + 0.3 * np.sin(0.047 * t) \
        + 0.05 * np.random.default_rng(5).standard_normal(n)


def test_rqa_bound_launches_equal_unbound(device, monkeypatch):
    x = _series()
    kw = dict(E=3, tau=2, radius=0.35, device=device, edge=256)
    got = pe.rqa(x, **kw)
    # every launch bound afresh and used once: the launch-by-launch path
    monkeypatch.setattr(dnr, "_launcher", lambda st, task, mode, odd, hist, m: dnr.RQA_LINES.
                        launcher(st.be, st.params, m.spec, mode, series=st.series, thr=m.thr,
                                 thr2=m.thr2, n_rows=m.n_rows, n_cols=m.n_cols, w=m.w,
                                 carry0=task.lo,
                                 carry=() if mode == "horizontal" and st.hrec is not None
                                 else task.bufs, hist=hist,
                                 **(st.shared_odd if odd else st.shared), hrec=st.hrec))
    ref = pe.rqa(x, **kw)
    for name in ("diagonal_hist", "vertical_hist", "white_hist"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
    assert got.n_recurrences == ref.n_recurrences and got.DET == ref.DET


def test_rqa_bands_keep_no_finished_band_launchers(monkeypatch):
    """Lane bands run one after another on each device state: the bound launches of a
    finished band go with it (they hold its carryover buffers)."""
    from test_rqa_bands import two_backends

    from pyedmcl.rqa import bands as bands_mod
    from pyedmcl.rqa import multi

    monkeypatch.setattr(multi, "SPLIT", "lanes")
    monkeypatch.setattr(bands_mod, "MIN_BAND", 1)
    monkeypatch.setattr(bands_mod, "BANDS_PER_DEVICE", 5)
    held = []
    orig = dnr._launcher

    def noting(st, task, mode, odd, hist, m):
        out = orig(st, task, mode, odd, hist, m)
        held.append({id(t) for t, _ in st.launchers.values()} - {id(t) for t in st.tasks})
        return out

    monkeypatch.setattr(dnr, "_launcher", noting)
    x = _series(900)
    bes = two_backends(CPU_DEVICE)
    one = pe.rqa(x, E=2, tau=3, radius=0.3, device=bes[0], edge=128)
    held.clear()
    banded = pe.rqa(x, E=2, tau=3, radius=0.3, devices=bes, edge=128)
    assert sum(banded.settings["device_tasks"]) > 4 and held and not any(held)
    for name in ("diagonal_hist", "vertical_hist", "white_hist"):
        np.testing.assert_array_equal(getattr(one, name), getattr(banded, name))
