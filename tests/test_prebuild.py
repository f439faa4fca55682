"""Building a job's kernels up front (``Backend.prebuild``) and the jobs that do it.

clkernels: prebuilt kernels are the objects later ``kernel`` calls return (no second
build: ``build_count``), requests rendering one source share one program, a failed
build raises and can be retried, the cache key of a single kernel is unchanged.
pyedmcl: a mixed-E cross map (fused scan and per-E paths), the optimal-E scan, the
fused E scan and the per-value scans (E, Tp, exclusion radius) launch nothing their
prebuild did not build, and the matrix is the same bit
for bit with and without the prebuild.
"""

from __future__ import annotations

import uuid
import weakref

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from clkernels import BuildError, get_backend, probe
from clkernels.backends.base import Backend, build_threads, kernel_key
from clkernels.templates import add_template_root

#: a tiny template: writes V to every element; W does not reach the source, so two
#: requests that differ only in W share one program
TEMPLATE = """## params: V, W, BAD
## version: 1
% if BAD:
this is not OpenCL C
% endif
__kernel void put_${V}(__global int* out) { out[get_global_id(0)] = ${V}; }
__kernel void put_twice_${V}(__global int* out) { out[get_global_id(0)] = 2 * ${V}; }
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("prebuild-templates")
    (root / "prebuild_test").mkdir()
    (root / "prebuild_test" / "put.cl.mako").write_text(TEMPLATE)
    add_template_root(root)
    return "prebuild_test/put.cl.mako"


def _put(be: Backend, k, n: int = 8) -> np.ndarray:
    out = be.empty((n,), np.int32)
    be.launch(k, (n,), None, out)
    return be.to_host(out)


@pytest.mark.parametrize("threads", [1, 3])
def test_prebuilt_kernels_are_the_ones_launched(template, threads):
    be = get_backend(CPU_DEVICE)
    vals = (11, 12, 13) if threads == 1 else (21, 22, 23)  # sources new to this process
    reqs = [(template, {"V": v, "W": 0, "BAD": 0}, f"put_{v}") for v in vals]
    reqs += [(template, {"V": vals[0], "W": 1, "BAD": 0}, f"put_{vals[0]}"),  # same source
             (template, {"V": vals[1], "W": 0, "BAD": 0}, f"put_twice_{vals[1]}"),  # same
             reqs[0]]  # a duplicate
    before = be.build_count
    kernels = be.prebuild(reqs, threads=threads)
    assert be.build_count - before == len(vals)  # one program per distinct source
    assert kernels[-1] is kernels[0] and len(kernels) == len(reqs)
    for req, k in zip(reqs, kernels, strict=True):
        assert be.kernel(*req) is k
    assert be.build_count - before == len(vals)  # launches build nothing
    assert list(_put(be, kernels[0])) == [vals[0]] * 8
    assert list(_put(be, kernels[4])) == [2 * vals[1]] * 8
    assert be.prebuild(reqs) == kernels and be.build_count - before == len(vals)


def test_failed_prebuild_raises_and_can_be_retried(template, monkeypatch, tmp_path):
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(tmp_path))  # failure logs land here
    be = get_backend(CPU_DEVICE)
    bad = (template, {"V": 31, "W": 0, "BAD": 1}, "put_31")
    good = (template, {"V": 32, "W": 0, "BAD": 0}, "put_32")
    for _ in range(2):  # the failure leaves no build marked as under way
        with pytest.raises(BuildError):
            be.prebuild([good, bad], threads=2)
    assert list(_put(be, be.kernel(*good))) == [32] * 8


def test_single_kernel_cache_key_unchanged(template):
    be = get_backend(CPU_DEVICE)
    params = {"W": 0, "V": 41, "BAD": 0}
    k = be.kernel(template, params, "put_41")
    old = (template, tuple(sorted((k_, repr(v)) for k_, v in params.items())), "put_41", ())
    assert kernel_key(template, params, "put_41") == old
    assert be._kernels[old] is k


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_bad_build_threads(monkeypatch, value):
    monkeypatch.setenv("PYEDMCL_BUILD_THREADS", value)
    with pytest.raises(ValueError, match="PYEDMCL_BUILD_THREADS"):
        build_threads(4)


def test_build_threads(monkeypatch):
    monkeypatch.delenv("PYEDMCL_BUILD_THREADS", raising=False)
    assert build_threads(1) == 1 and build_threads(3, parallel=False) == 1
    monkeypatch.setenv("PYEDMCL_BUILD_THREADS", "2")
    assert build_threads(5) == 2 and build_threads(1) == 1


def _record_prebuilds(be: Backend, monkeypatch) -> list[tuple[int, int]]:
    """Record ``be``'s build_count before and after each of its prebuilds."""
    marks: list[tuple[int, int]] = []
    orig = be.prebuild

    def prebuild(requests, **kw):
        start = be.build_count
        out = orig(requests, **kw)
        marks.append((start, be.build_count))
        return out

    monkeypatch.setattr(be, "prebuild", prebuild)
    return marks


def _only_prebuilt(be: Backend, marks: list[tuple[int, int]]) -> bool:
    """Nothing was built between two prebuilds nor after the last."""
    ends = [m[1] for m in marks]
    return bool(marks) and all(m[0] == e for m, e in zip(marks[1:], ends, strict=False)) \
        and be.build_count == ends[-1]


def _panel(L: int = 90, N: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = np.cumsum(rng.standard_normal((L, N)), axis=0).astype(np.float32)
    return X, np.resize([2, 3, 4], N)  # E-groups of test_xmap (kernels shared)


@pytest.mark.parametrize("knn_kernel", ["scan", "batched"])
def test_mixed_E_map_launches_only_prebuilt_kernels(device, knn_kernel, monkeypatch):
    be = get_backend(device)
    X, E = _panel()
    marks = _record_prebuilds(be, monkeypatch)
    got = pe.xmap(X, E=E, device=device, knn_method=knn_kernel).rho
    assert _only_prebuilt(be, marks)
    monkeypatch.setattr(be, "prebuild", lambda requests, **kw: [])  # kernels built lazily
    ref = pe.xmap(X, E=E, device=device, knn_method=knn_kernel).rho
    np.testing.assert_array_equal(got, ref)
    if knn_kernel == "scan":  # and against the per-E path (same tables)
        np.testing.assert_array_equal(
            got, pe.xmap(X, E=E, device=device, knn_method="batched").rho)


def test_optimal_E_and_embedding_scans_launch_only_prebuilt_kernels(device, monkeypatch):
    be = get_backend(device)
    X, _ = _panel(N=3)
    marks = _record_prebuilds(be, monkeypatch)
    pe.xmap(X, E="auto", max_E=4, device=device)  # the E scan's prebuild, then the map's
    assert len(marks) >= 2 and _only_prebuilt(be, marks)
    marks.clear()
    from pyedmcl.primitives import scan_fused
    monkeypatch.setattr(scan_fused, "_PREBUILT", weakref.WeakKeyDictionary())  # forget
    pe.embed_dimension(X[:, 0], max_E=4, device=device)
    assert len(marks) == 1 and _only_prebuilt(be, marks)


def test_per_value_scans_launch_only_prebuilt_kernels(device, monkeypatch):
    """The generic scans (E without the fused scan, Tp, exclusion radius) build every
    value's k-NN, lookup and skill in one prebuild and launch nothing else, with the
    skills of the lazy builds."""
    from pyedmcl.edm import scans

    be = get_backend(device)
    x = _panel(L=120, N=1)[0][:, 0]
    monkeypatch.setattr(scans, "_PREBUILT", weakref.WeakKeyDictionary())  # none prebuilt yet
    calls = [lambda: pe.embed_dimension(x, max_E=5, tau=-1, device=device),  # future lags
             lambda: pe.predict_interval(x, E=3, max_Tp=4, device=device),
             lambda: pe.predict_exclusion_radius(x, E=2, radii=[0, 3, 7], device=device)]
    got = []
    marks = _record_prebuilds(be, monkeypatch)
    for call in calls:
        marks.clear()
        got.append(call().rho)
        assert len(marks) == 1 and _only_prebuilt(be, marks)
        call()  # again: its kernels known, no second prebuild
        assert len(marks) == 1
    monkeypatch.setattr(be, "prebuild", lambda requests, **kw: [])  # kernels built lazily
    for call, rho in zip(calls, got, strict=True):
        np.testing.assert_array_equal(call().rho, rho)


def test_parallel_builds_say_one_line(template, monkeypatch, capfd):
    """Builds running at once print the build notice once and no compiler output."""
    from clkernels import probe

    monkeypatch.delenv("PYEDMCL_QUIET", raising=False)
    monkeypatch.delenv("PYOPENCL_COMPILER_OUTPUT", raising=False)
    monkeypatch.setenv("PYEDMCL_BUILD_NOTICE_S", "0")  # said as each build starts
    monkeypatch.setattr(probe, "_noticed", set())
    be = get_backend(CPU_DEVICE)
    capfd.readouterr()
    be.prebuild([(template, {"V": v, "W": 0, "BAD": 0}, f"put_{v}") for v in (51, 52, 53)],
                threads=3)
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "building kernels for" in err, err


def test_optimal_E_scan_fused_equals_per_E(device, monkeypatch):
    """The optimal-E scan through the fused multi-E scan (one k-NN program for every E)
    gives the per-E kernels' skills bit for bit (tau 2: lagged coordinates)."""
    from pyedmcl.kernels.knn_scan import KNN_SCAN
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(device)
    X, _ = _panel(L=80, N=5)
    calls = []
    orig = KNN_SCAN.launch
    monkeypatch.setattr(KNN_SCAN, "launch", lambda *a, **k: calls.append(1) or orig(*a, **k))
    got = XmapEngine(be, X.T, None, tau=2).edim_block(0, 5, 6)
    assert calls  # the fused path ran
    ref = XmapEngine(be, X.T, None, tau=2, knn_kernel="batched").edim_block(0, 5, 6)
    assert not np.isnan(ref).any()
    np.testing.assert_array_equal(got, ref)


def test_build_behind_leaves_programs_for_later_jobs(template, monkeypatch, tmp_path):
    """``build_behind`` hands the programs of requests that are not ``known`` to helper
    processes while this process goes on; once they are built (here: waited for) and it
    is ended, they are known and a prebuild takes them from the cache (counted as helper
    builds). Ended at once, it drops what no helper began and returns; a second end does
    nothing. With nothing to build, or on runtimes without helpers, it returns None."""
    import threading
    import time

    from clkernels import buildprocs
    from clkernels.backends import pyopencl_backend

    be = get_backend(CPU_DEVICE)
    if not isinstance(be, pyopencl_backend.PyOpenCLBackend) or \
            be.info.runtime not in buildprocs.SERIAL_COMPILERS:
        assert be.build_behind([(template, {"V": 40, "W": 0, "BAD": 0}, "put_40")]) is None
        pytest.skip(f"no helper processes on {be.info.runtime}")
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(tmp_path))  # an empty binary cache
    monkeypatch.setattr(pyopencl_backend, "helper_count", lambda runtime, n, mem: 1)
    reqs = [(template, {"V": v, "W": 0, "BAD": 0}, f"put_{v}") for v in (71, 72, 73)]  # new here
    assert not any(be.known([r]) for r in reqs)
    before = be.helper_builds
    end = be.build_behind(reqs)
    deadline = time.monotonic() + 120
    while not be.known(reqs) and time.monotonic() < deadline:  # the binary cache fills
        time.sleep(0.05)
    end(wait=True)
    end()  # (idempotent)
    assert be.known(reqs) and be.helper_builds - before == 3
    built = be.build_count
    kernels = be.prebuild(reqs)
    assert list(_put(be, kernels[1])) == [72] * 8
    assert be.build_count - built == 3  # loaded from the cache
    # ended at once: what no helper began is dropped, the call returns
    late = [(template, {"V": v, "W": 0, "BAD": 0}, f"put_{v}") for v in range(81, 89)]
    assert be.build_behind(reqs) is None  # nothing left to build
    # the end's wait for the builds under way held until released: end() returns with
    # that wait still pending in its thread; end(wait=True) joins it
    gate, waits = threading.Event(), []
    real_wait = pyopencl_backend.wait_helpers

    def held(started, queue):
        waits.append(1)
        gate.wait()
        real_wait(started, queue)

    monkeypatch.setattr(pyopencl_backend, "wait_helpers", held)
    end = be.build_behind(late)
    end()
    behind = [t for t in threading.enumerate() if t.name == "clkernels-build-behind"]
    assert behind and all(t.is_alive() for t in behind) and not gate.is_set()
    gate.set()
    end(wait=True)
    assert not any(t.is_alive() for t in behind) and waits == [1]
    assert list(_put(be, be.prebuild(late)[0])) == [81] * 8


def test_build_behind_leaves_an_alike_devices_programs_to_it(template, monkeypatch):
    """Two backends of alike devices (one fingerprint: a job's two GPUs of one model) share
    binaries: a program that one builds behind its job is not handed to helpers of the
    other, whose end function then ends nothing; once the first ends, the programs are
    free to build again (here nothing was built: the helpers are stand-ins)."""
    from clkernels import buildprocs
    from clkernels.backends import pyopencl_backend

    be = get_backend(CPU_DEVICE)
    if not isinstance(be, pyopencl_backend.PyOpenCLBackend) or \
            be.info.runtime not in buildprocs.SERIAL_COMPILERS:
        pytest.skip(f"no helper processes on {be.info.runtime}")
    other = type(be)(be.info)  # a second context on the same device
    handed = []
    monkeypatch.setattr(pyopencl_backend, "helper_count", lambda runtime, n, mem: 1)
    monkeypatch.setattr(pyopencl_backend, "start_helpers",
                        lambda info, jobs, *a, **k: handed.append(len(jobs)) or [object()])
    monkeypatch.setattr(pyopencl_backend, "wait_helpers", lambda started, queue: None)
    monkeypatch.setattr(pyopencl_backend, "stop_helpers", lambda started: None)
    reqs = [(template, {"V": v, "W": 0, "BAD": 0}, f"put_{v}") for v in (91, 92, 93)]
    end = be.build_behind(reqs)
    assert handed == [3]
    end_other = other.build_behind(reqs)
    assert handed == [3] and end_other is not None  # left to the first: runtime-K meanwhile
    end_other(wait=True)
    more = other.build_behind([*reqs, (template, {"V": 94, "W": 0, "BAD": 0}, "put_94")])
    assert handed == [3, 1]  # only the program nobody builds
    more(wait=True)
    end(wait=True)
    again = other.build_behind(reqs)
    assert handed == [3, 1, 3]
    again(wait=True)


def test_build_notice_once_per_device_on_a_terminal_once_in_a_log(monkeypatch, capfd):
    """The first-build notice: once per device and process on a terminal; where stderr is
    a log (no terminal), one line in all."""
    from types import SimpleNamespace

    monkeypatch.delenv("PYEDMCL_QUIET", raising=False)
    monkeypatch.setenv("PYEDMCL_BUILD_NOTICE_S", "0")
    devs = [SimpleNamespace(name=f"dev{i}", runtime="pocl") for i in range(2)]
    for tty, lines in ((True, 2), (False, 1)):
        monkeypatch.setattr(probe, "_noticed", set())
        monkeypatch.setattr(probe, "_stderr_is_terminal", lambda tty=tty: tty)
        capfd.readouterr()
        for d in devs + devs:
            probe._notice_timer(d)
        err = capfd.readouterr().err
        assert err.count("building kernels for dev") == lines, err


def test_build_status_counts_a_prebuild(monkeypatch):
    """During a prebuild the progress line reads "building k of n kernels" (k: the one
    being built), and nothing once the batch is done."""
    be = get_backend(CPU_DEVICE)
    seen: list[str] = []
    real = type(be)._program

    def program(self, src, options):
        seen.append(probe.build_status())
        return real(self, src, options)

    monkeypatch.setattr(type(be), "_program", program)
    tag = uuid.uuid4().hex[:8]
    src = [f"__kernel void k(__global float* a) {{ a[0] = {v}; /* {tag} */ }}" for v in range(3)]
    be._build_programs([(s, ()) for s in src], 1)
    assert seen == [f"building {i} of 3 kernels" for i in (1, 2, 3)]
    assert probe.build_status() == ""


def test_contexts_of_one_device_build_a_program_once(monkeypatch):
    """Two contexts of one device (as Dask's in-process workers hold) asking for the same
    program at once: one builds it, the other waits and then takes it (no overlap of the
    two builds: the second is the cache's binary); different programs still build side
    by side (each waits for the other inside its build)."""
    import threading
    import time

    from clkernels.backends import pyopencl_backend as P
    from clkernels.devices import select_device

    info = select_device(CPU_DEVICE)
    if info.runtime not in ("pocl", "intel"):
        pytest.skip("needs a CPU runtime")
    bes = [P.PyOpenCLBackend(info), P.PyOpenCLBackend(info)]
    events: list[tuple[str, str]] = []
    meet = threading.Barrier(2, timeout=20)
    orig = P.PyOpenCLBackend._build_quietly

    def spy(self, source, opts):
        events.append(("start", source))
        if "different" in source:
            meet.wait()  # both different programs inside their builds at once
        else:
            time.sleep(0.2)  # a wide window for the other thread's build to overlap
        try:
            return orig(self, source, opts)
        finally:
            events.append(("end", source))

    monkeypatch.setattr(P.PyOpenCLBackend, "_build_quietly", spy)
    tag = uuid.uuid4().hex  # a program no cache holds
    same = f"__kernel void k(__global int* a) {{ a[0] = 0x{tag[:6]}; }}"
    others = [f"// different {i}\n__kernel void k(__global int* a) {{ a[0] = {i}; }} // {tag}"
              for i in (1, 2)]
    for sources in ([same, same], others):
        events.clear()
        threads = [threading.Thread(target=be._program, args=(src, ())) for be, src
                   in zip(bes, sources, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(events) == 4
        if sources[0] == sources[1]:
            assert [e for e, _ in events] == ["start", "end", "start", "end"]
        else:
            assert [e for e, _ in events[:2]] == ["start", "start"]
    assert not P._same_builds
