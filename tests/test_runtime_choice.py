"""The default CPU runtime per kernel family follows the timings tuning measured on
each runtime of this machine (clkernels.runtime_choice). PoCL cannot build on every
CPU (Zen 5 with PoCL 3.0), so the runtimes here are fakes: two DeviceInfo records of
one CPU that differ in runtime, with user-database timings written for each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import CPU_DEVICE

from clkernels import get_backend
from clkernels import runtime_choice as rc
from clkernels.probe import Verdict
from clkernels.tuning.database import UserDB, entry_key, make_entry
from pyedmcl.kernels.rqa_lines import RQA_LINES
from pyedmcl.kernels.xmap import XMAP_SKILL


def _fake(runtime: str):
    info = get_backend(CPU_DEVICE).info
    return dataclasses.replace(info, runtime=runtime, normalised_name="test-cpu",
                               name="Test CPU", driver_version="1",
                               platform_name=f"{runtime} platform", device_type="cpu")


def _time(root, kernel, info, seconds: float) -> None:
    """User-database timings of ``kernel`` at every default bucket on ``info``."""
    db = UserDB(info, root)
    p = kernel.space.default(info)
    for sb, zb in rc._buckets(kernel, info):
        db.put(entry_key(kernel.name, sb, zb),
               make_entry(kernel, info, sb, zb, p, seconds, p, seconds))


@pytest.fixture
def cpus(tmp_path, monkeypatch):
    """Fake PoCL and Intel runtimes of one CPU; PoCL faster at the skill, Intel at RQA."""
    monkeypatch.delenv("PYEDMCL_DEVICE", raising=False)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    rc._cache.clear()
    pocl, intel = _fake("pocl"), _fake("intel")
    _time(tmp_path, XMAP_SKILL, pocl, 0.001)
    _time(tmp_path, XMAP_SKILL, intel, 0.002)
    _time(tmp_path, RQA_LINES, pocl, 0.004)
    _time(tmp_path, RQA_LINES, intel, 0.003)
    monkeypatch.setattr(rc, "usable", lambda d: Verdict(True, ""))
    monkeypatch.setattr(rc, "default_device", lambda devs: (devs[0], "fake"))
    yield pocl, intel, tmp_path
    rc._cache.clear()


def test_measured_time_reads_this_devices_timing(cpus):
    pocl, intel, root = cpus
    sb, zb = rc._buckets(XMAP_SKILL, pocl)[0]
    assert rc.measured_time(XMAP_SKILL, pocl, sb, zb, root) == pytest.approx(0.001)
    assert rc.measured_time(XMAP_SKILL, intel, sb, zb, root) == pytest.approx(0.002)
    # a bucket nobody timed: no measurement (the heuristic's params are no timing)
    assert rc.measured_time(XMAP_SKILL, intel, sb, "n999999999", root) is None


def test_default_per_family_follows_measured_speed(cpus):
    pocl, intel, root = cpus
    assert rc.default_for((XMAP_SKILL,), [intel, pocl], user_root=root) is pocl
    assert rc.default_for((RQA_LINES,), [pocl, intel], user_root=root) is intel
    # both families: the smaller geometric mean over every shared bucket
    n_skill, n_rqa = len(rc._buckets(XMAP_SKILL, pocl)), len(rc._buckets(RQA_LINES, pocl))
    log_pocl = n_skill * np.log(0.001) + n_rqa * np.log(0.004)
    log_intel = n_skill * np.log(0.002) + n_rqa * np.log(0.003)
    want = pocl if log_pocl < log_intel else intel
    assert rc.default_for((XMAP_SKILL, RQA_LINES), [intel, pocl], user_root=root) is want


def test_no_choice_without_two_timed_runtimes(cpus, tmp_path, monkeypatch):
    pocl, intel, root = cpus
    # PoCL forced off (it cannot build): the ordinary default, whatever the timings
    monkeypatch.setattr(rc, "usable", lambda d: Verdict(d.runtime != "pocl", "no target"))
    assert rc.default_for((XMAP_SKILL,), [intel, pocl], user_root=root) is None
    rc._cache.clear()
    monkeypatch.setattr(rc, "usable", lambda d: Verdict(True, ""))
    # no timing of one runtime: no comparison
    empty = tmp_path / "none"
    assert rc.default_for((XMAP_SKILL,), [intel, pocl], user_root=empty) is None
    # an explicit selector wins
    monkeypatch.setenv("PYEDMCL_DEVICE", "intel")
    assert rc.default_for((XMAP_SKILL,), [intel, pocl], user_root=root) is None
    monkeypatch.delenv("PYEDMCL_DEVICE")
    # a GPU as the default: never a CPU
    gpu = dataclasses.replace(intel, device_type="gpu", runtime="nvidia")
    monkeypatch.setattr(rc, "default_device", lambda devs: (gpu, "fake"))
    assert rc.default_for((XMAP_SKILL,), [gpu, intel, pocl], user_root=root) is None


def test_algorithms_run_on_the_chosen_runtime(monkeypatch):
    """xmap and rqa with no device run on what default_for returns."""
    import pyedmcl as pe
    real = get_backend(CPU_DEVICE).info
    seen = []

    def fake(kernels, devs=None, **kw):
        seen.append(tuple(k.name for k in kernels))
        return real
    monkeypatch.setattr(rc, "default_for", fake)
    x = np.sin(np.arange(120) * 0.3)
    r = pe.xmap(np.stack([x, np.cos(np.arange(120) * 0.2)], 1), E=2)
    assert r.rho.shape == (2, 2)
    pe.rqa(x, E=2, radius=0.3)
    assert seen == [("xmap_knn", "xmap_scan", "xmap_skill"), ("rqa_lines",)]


def test_timings_at_other_buckets_count(cpus, tmp_path):
    """A quick tune times other sizes than the family's default buckets (RQA: n4096, the
    default n8192): those timings decide too, where both runtimes have them."""
    pocl, intel, _ = cpus
    root = tmp_path / "quick"
    sb = rc._buckets(RQA_LINES, pocl)[0][0]
    for info, seconds in ((pocl, 0.004), (intel, 0.0025)):
        db = UserDB(info, root)
        p = RQA_LINES.space.default(info)
        db.put(entry_key(RQA_LINES.name, sb, "n4096"),
               make_entry(RQA_LINES, info, sb, "n4096", p, seconds, p, seconds))
    assert rc.measured_time(RQA_LINES, intel, sb, rc._buckets(RQA_LINES, intel)[0][1], root) is None
    assert rc.default_for((RQA_LINES,), [pocl, intel], user_root=root) is intel
    rc._cache.clear()
    # one runtime alone timed there: no shared timing, the ordinary default
    (root / UserDB(intel, root).path.name).unlink()
    assert rc.default_for((RQA_LINES,), [pocl, intel], user_root=root) is None


def test_embed_dimension_runs_where_the_fused_scan_is_fastest(monkeypatch):
    """Without ``device=``, embed_dimension's fused scan asks the runtime choice for the
    knn_scan family (as the map and RQA ask for theirs); an explicit device is kept."""
    from clkernels import runtime_choice
    from pyedmcl.edm import scans
    from pyedmcl.kernels.knn_scan import KNN_SCAN

    info = get_backend(CPU_DEVICE).info
    asked, seen = [], []
    monkeypatch.setattr(runtime_choice, "default_for",
                        lambda kernels, *a, **k: asked.append(kernels) or info)
    real_inputs = scans._inputs
    monkeypatch.setattr(scans, "_inputs", lambda x, t, dt, device, *a: seen.append(device)
                        or real_inputs(x, t, dt, device, *a))
    x = np.sin(np.arange(300) * 0.3)
    scans.embed_dimension(x, max_E=4)
    assert asked == [(KNN_SCAN,)] and seen == [info]
    scans.embed_dimension(x, max_E=4, device=CPU_DEVICE)
    assert seen[-1] == CPU_DEVICE and len(asked) == 1
