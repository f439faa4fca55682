"""The kernel runtime: devices, code generation, build caching, backends.

Oracle: a float64 NumPy reference of the same embedded distances. Tolerance for
float32 kernels: |got - ref| <= 1e-5 * max|ref| + 1e-6 (one float32 rounding of
sums of E squared differences); float64 kernels: 1e-12 relative.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import CPU_DEVICE

import clkernels
from clkernels import get_backend
from clkernels.devices import DeviceSelectionError, list_devices, normalise_name, resolve_selector
from clkernels.templates import TemplateParameterError, declared_params, render, template_path
from pyedmcl.embedding import distance_matrix_reference, embed
from pyedmcl.kernels.distance import PAIRWISE_DISTANCE, pairwise_distances


def _series(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sin(np.arange(n) * 0.37) + 0.1 * rng.standard_normal(n)


def test_pocl_is_always_present():
    assert any(d.runtime == "pocl" for d in list_devices()), "pocl-binary-distribution must give a device"


def test_fingerprint_and_name_normalisation():
    assert normalise_name("pthread-Intel(R) Xeon(R) Processor") == "intel-xeon-processor"
    assert normalise_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert normalise_name("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz") == "intel-core-i7-8700"
    for d in list_devices():
        fp = d.fingerprint
        assert d.normalised_name in fp and d.driver_version in fp
        assert fp.endswith("fp64" if d.fp64 else "fp32")


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
@pytest.mark.parametrize("E,tau", [(1, 1), (3, 2), (7, 1), (20, 3)])
def test_pairwise_distance_matches_numpy(device, metric, E, tau):
    x = _series(257)
    got = pairwise_distances(x, E=E, tau=tau, metric=metric, squared=True, device=device)
    ref = distance_matrix_reference(x, x, E, tau, metric)
    assert got.shape == ref.shape == (257 - (E - 1) * tau,) * 2
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max() + 1e-6


def test_pairwise_distance_cross_and_sqrt(device):
    x, y = _series(200, 1), _series(150, 2)
    got = pairwise_distances(x, y, E=4, tau=2, device=device)
    ref = distance_matrix_reference(x, y, 4, 2, "euclidean", squared=False)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_pairwise_distance_float64(device):
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("device has no fp64")
    x = _series(120, 3)
    got = pairwise_distances(x, E=5, tau=2, dtype=np.float64, squared=True, device=device)
    np.testing.assert_allclose(got, distance_matrix_reference(x, x, 5, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("params", PAIRWISE_DISTANCE.space.candidates(list_devices()[0])[::17])
def test_every_tuning_candidate_is_correct(params):
    """Each configuration the tuner may pick computes the same distances (PoCL)."""
    x = _series(190, 4)
    got = pairwise_distances(x, E=6, tau=2, squared=True, device=CPU_DEVICE, params=params)
    ref = distance_matrix_reference(x, x, 6, 2)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max() + 1e-6


def test_program_built_once(device):
    be = get_backend(device)
    x = _series(100)
    pairwise_distances(x, E=2, tau=1, metric="manhattan", device=device)
    before = be.build_count
    for _ in range(3):
        pairwise_distances(x, E=2, tau=1, metric="manhattan", device=device)
    assert be.build_count == before
    assert get_backend(device) is be


def test_programs_belong_to_their_backends_context():
    """Backends created and dropped one after another (a new context may take a freed
    one's id()) each get programs of their own context: a program cache keyed by the
    context's id handed a later backend a program of a released context
    (INVALID_CONTEXT from Intel's runtime when its kernel was made)."""
    import gc

    import pyopencl as cl

    from clkernels.backends.pyopencl_backend import PyOpenCLBackend
    info = get_backend(CPU_DEVICE).info
    src = "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2.0f; }"
    for _ in range(12):  # CPython reuses a freed context's id() within a few rounds
        be = PyOpenCLBackend(info)
        k = be.kernel_from_source(src, "twice")
        prog = be._program(src, ())
        assert prog.get_info(cl.program_info.CONTEXT) == be.context
        x = be.to_device(np.arange(8, dtype=np.float32))
        be.launch(k, (8,), None, x.data)
        np.testing.assert_array_equal(be.to_host(x), 2 * np.arange(8, dtype=np.float32))
        del be, k, prog, x
        gc.collect()


def test_join_streams_orders_queue_zero_after_the_others(device):
    """Launches in the side queues, then join_streams, then a launch in queue 0 that reads
    their output: it sees every side launch's writes (no host wait in between). The side
    kernels spin long enough that an unordered read would see zeros."""
    be = get_backend(device)
    src = """
    __kernel void slow_fill(__global uint *out, uint value, uint spins) {
        uint acc = get_global_id(0);
        for (uint i = 0; i < spins; ++i) acc = acc * 1664525u + 1013904223u;
        out[get_global_id(0)] = value + (acc == 0xFFFFFFFFu);
    }
    __kernel void total(__global const uint *a, __global const uint *b, __global uint *out) {
        size_t i = get_global_id(0);
        out[i] = a[i] + b[i];
    }"""
    fill, total = be.kernel_from_source(src, "slow_fill"), be.kernel_from_source(src, "total")
    n = 64
    sides = [be.zeros(n, np.uint32) for _ in range(2)]
    out = be.zeros(n, np.uint32)
    be.finish()
    for q, buf in zip(range(1, min(3, be.streams)), sides, strict=False):
        be.launch(fill, (n,), None, buf, np.uint32(q), np.uint32(200_000), stream=q)
    be.join_streams()
    be.launch(total, (n,), None, *sides, out)
    want = sum(range(1, min(3, be.streams)))
    assert (be.to_host(out) == want).all()


def test_template_missing_parameter_is_named():
    with pytest.raises(TemplateParameterError, match="TAU"):
        render("distance/pairwise_distance.cl.mako", {"E": 2, "METRIC": "euclidean", "REAL": "float",
                                             "WG_X": 8, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0,
                                             "SQRT": 0})
    assert "TAU" in declared_params("distance/pairwise_distance.cl.mako")


def test_template_rejects_unknown_metric():
    with pytest.raises(ValueError, match="METRIC"):
        render("distance/pairwise_distance.cl.mako", {"E": 2, "TAU": 1, "METRIC": "cosine", "REAL": "float",
                                             "WG_X": 8, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0,
                                             "SQRT": 0})


def test_specialisation_is_compile_time():
    src = render("distance/pairwise_distance.cl.mako", {"E": 3, "TAU": 5, "METRIC": "euclidean",
                                               "REAL": "float", "WG_X": 32, "WG_Y": 2, "RPI": 2,
                                               "USE_LOCAL": 1, "SQRT": 0})
    assert "reqd_work_group_size(32, 2, 1)" in src
    assert "x[i + 10]" in src and "for (int k" not in src  # the E loop is unrolled, tau constant


def test_unknown_device_lists_available():
    with pytest.raises(DeviceSelectionError) as ei:
        resolve_selector("nosuchvendor")
    msg = str(ei.value)
    assert "available devices" in msg and "pocl" in msg


def test_selector_forms():
    devs = list_devices()
    pocl = resolve_selector("pocl")
    assert pocl.runtime == "pocl"
    assert resolve_selector(pocl.selector) == pocl
    assert resolve_selector(f"{pocl.platform_index}") == pocl
    assert resolve_selector("cpu").runtime == "pocl"
    with pytest.raises(DeviceSelectionError):
        resolve_selector("pocl:7")
    with pytest.raises(DeviceSelectionError):
        resolve_selector("99:0")
    assert len(devs) >= 1


def test_env_device_selection(monkeypatch):
    monkeypatch.setenv("PYEDMCL_DEVICE", "pocl")
    assert clkernels.select_device().runtime == "pocl"
    monkeypatch.setenv("PYEDMCL_DEVICE", "bogus")
    with pytest.raises(DeviceSelectionError):
        clkernels.select_device()


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="too short"):
        pairwise_distances(np.arange(5.0), E=4, tau=2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="NaN"):
        pairwise_distances(np.array([1.0, np.nan, 2.0, 3.0]), E=1, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="metric"):
        pairwise_distances(np.arange(10.0), E=1, metric="cosine", device=CPU_DEVICE)
    with pytest.raises(ValueError, match="E=0"):
        pairwise_distances(np.arange(10.0), E=0, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="2-D|1-D"):
        pairwise_distances(np.ones((4, 4)), E=1, device=CPU_DEVICE)


def test_embed_reference_convention():
    x = np.arange(10.0)
    m = embed(x, 3, 2)
    assert m.shape == (6, 3)
    np.testing.assert_array_equal(m[0], [4.0, 2.0, 0.0])  # (x_t, x_{t-tau}, x_{t-2tau}) at t=4


def test_oclgrind_clean_pairwise_distance():
    from conftest import run_under_oclgrind

    run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from pyedmcl.embedding import distance_matrix_reference
        x = np.sin(np.arange(47) * 0.3)
        for m in ("euclidean", "maximum", "manhattan"):
            for p in ({"WG_X": 8, "WG_Y": 2, "RPI": 2, "USE_LOCAL": 1},
                      {"WG_X": 16, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0}):
                d = pe.pairwise_distances(x, E=3, tau=2, metric=m, squared=True, params=p)
                assert np.allclose(d, distance_matrix_reference(x, x, 3, 2, m), atol=1e-5)
        print("ok")
    """)


def test_oclgrind_checker_catches_out_of_bounds():
    """The Oclgrind harness must fail on a real bug, or its 'clean' verdicts mean nothing."""
    from conftest import HAS_OCLGRIND, run_under_oclgrind

    if not HAS_OCLGRIND:
        pytest.skip("Oclgrind not installed")
    with pytest.raises(AssertionError, match="Oclgrind reported errors"):
        run_under_oclgrind("""
            import numpy as np, clkernels
            be = clkernels.get_backend()
            k = be.kernel_from_source("__kernel void oob(__global float* a) { a[get_global_id(0) + 8] = 1.0f; }", "oob")
            a = be.to_device(np.zeros(8, np.float32))
            be.wait(be.launch(k, (8,), (8,), a))
            be.finish()
        """)


def test_sycl_backend_runs_same_source():
    pytest.importorskip("dpctl")
    try:
        be = get_backend("intel", backend="sycl")
    except Exception as exc:  # dpctl present but no OpenCL-backend SYCL device
        pytest.skip(f"no SYCL OpenCL device: {exc}")
    x = _series(150, 5)
    got = pairwise_distances(x, E=4, tau=3, metric="maximum", squared=True, device=be)
    np.testing.assert_allclose(got, distance_matrix_reference(x, x, 4, 3, "maximum"), atol=1e-6)
    assert be.name == "sycl"


REPO = Path(__file__).resolve().parents[1]
#: the package data the runtime reads: kernels, their parts, the shipped tuning database
PACKAGE_DATA = ("clkernels/templates/*.mako", "templates/**/*.mako", "tuning/*.json")
#: the repository root's data folders -> where the wheel puts them (pyproject's force-include)
WHEEL_DATA = {"templates/": "pyedmcl/_templates/", "tuning/": "pyedmcl/_tuning/"}
_FIND_DATA = ("import clkernels.templates as t, pyedmcl.kernels as k;"
              "from clkernels.tuning import shipped_entries;"
              "print(t.template_path('distance/pairwise_distance.cl.mako'));"
              "print(t.template_path('fill.cl.mako')); print(len(shipped_entries()));"
              "print(len(t.render('distance/pairwise_distance.cl.mako', {'E':2,'TAU':1,"
              "'METRIC':'euclidean','REAL':'float','WG_X':8,'WG_Y':1,'RPI':1,'USE_LOCAL':0,"
              "'SQRT':0}))); print(k.TUNING_DB)")


def _data_files() -> list[str]:
    return sorted(p.relative_to(REPO).as_posix() for pat in PACKAGE_DATA for p in REPO.glob(pat))


def _wheel_name(path: str) -> str:
    """Where the data file ``path`` of the checkout lies in the wheel."""
    for src, dst in WHEEL_DATA.items():
        if path.startswith(src):
            return dst + path[len(src):]
    return path


def _check_installed_copy(env: dict[str, str], cwd: Path) -> tuple[Path, Path, Path]:
    """Run :data:`_FIND_DATA` in a process outside the checkout; check what it found (a
    family template, clkernels' own, the shipped tuning entries, one kernel rendered) and
    return the paths of the family template, of clkernels' own and of the tuning folder."""
    out = subprocess.run([sys.executable, "-c", _FIND_DATA], cwd=cwd, env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    family, own, tuning = Path(out[0]), Path(out[1]), Path(out[4])
    assert family.parts[-4:-2] == ("pyedmcl", "_templates")
    assert own.parts[-3:-1] == ("clkernels", "templates")
    assert tuning.parts[-2:] == ("pyedmcl", "_tuning")
    assert int(out[2]) > 100 and int(out[3]) > 100
    assert family.read_text() == template_path("distance/pairwise_distance.cl.mako").read_text()
    return family, own, tuning


def test_templates_found_from_installed_copy(tmp_path):
    """Outside the source tree, each package finds its own data: clkernels its kernels,
    pyedmcl its family templates and shipped tuning database (package data, not a
    folder of the checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([sys.executable, "-c", "import pyedmcl"], cwd=tmp_path, env=env,
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("pyedmcl is not installed (run from a checkout via PYTHONPATH)")
    _check_installed_copy(env, tmp_path)


def test_package_data_ships_in_the_wheel_packages():
    """Every data file lies inside a package the wheel lists or a folder it force-includes
    where pyedmcl looks for it, and is not ignored by git (hatchling leaves VCS-ignored
    files out of a wheel)."""
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel = cfg["tool"]["hatch"]["build"]["targets"]["wheel"]
    forced = {src.rstrip("/") + "/": dst.rstrip("/") + "/"
              for src, dst in wheel["force-include"].items()}
    assert all(forced.get(src) == dst for src, dst in WHEEL_DATA.items())
    files = _data_files()
    assert len(files) > 10
    roots = [pkg.rstrip("/") + "/" for pkg in wheel["packages"]] + list(WHEEL_DATA)
    assert all(any(f.startswith(root) for root in roots) for f in files)
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *files], cwd=REPO,
                             capture_output=True, text=True)
    assert ignored.returncode in (0, 1), ignored.stderr
    assert ignored.stdout.split() == []


def test_wheel_holds_package_data(tmp_path):
    """A wheel built from this checkout holds every template and tuning file, and,
    unpacked as an installation would be, finds them from its own folders."""
    import importlib.util
    import zipfile

    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling is not installed (the wheel's build backend)")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dist)],
                   cwd=REPO, check=True, capture_output=True, timeout=120)
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        site = tmp_path / "site"
        z.extractall(site)
    assert [f for f in _data_files() if _wheel_name(f) not in names] == []
    env = {**os.environ, "PYTHONPATH": str(site)}
    family, own, tuning = _check_installed_copy(env, tmp_path)
    assert site in family.parents and site in own.parents and site in tuning.parents


def test_peak_kernels_run(device):
    """The roofline peaks are measured by our own kernels; they must run and be positive."""
    from clkernels.peak import measure_peaks, report

    p = measure_peaks(device, n_bytes=4 << 20, repeats=2)
    assert p.bandwidth_gbs > 0 and p.gflops > 0
    assert "GB/s" in report(1e9, 1e9, 1.0, p)


def test_memory_pool_reuses_buffers_and_keeps_results(monkeypatch):
    """GPUs allocate from a memory pool (PYEDMCL_MEMORY_POOL=1 forces it here on PoCL):
    freed buffers are held and reused, results are unchanged, the simulated device
    memory limit still applies, and Oclgrind never pools."""
    import pyedmcl as pe
    from clkernels.backends.pyopencl_backend import PyOpenCLBackend
    from clkernels.memory import DeviceMemoryError
    from pyedmcl.data import logistic_map
    monkeypatch.setenv("PYEDMCL_MEMORY_POOL", "1")
    be = PyOpenCLBackend(get_backend(CPU_DEVICE).info)
    assert be.allocator is not None
    x = logistic_map(400, r=3.9, x0=0.4, burn=0)
    for _ in range(2):  # the second call runs on reused buffers
        a = pe.simplex(x, E=4, device=be)
        np.testing.assert_array_equal(a.predicted, pe.simplex(x, E=4, device=CPU_DEVICE).predicted)
    buf = be.empty((4096,), np.float32)
    del buf
    assert be.allocator.held_blocks >= 1
    be.free_pooled()
    assert be.allocator.held_blocks == 0
    monkeypatch.setenv("PYEDMCL_DEVICE_MEMORY_LIMIT", "1k")
    with pytest.raises(DeviceMemoryError):
        be.empty((4096,), np.float32)
    monkeypatch.setenv("PYEDMCL_MEMORY_POOL", "0")
    assert PyOpenCLBackend(get_backend(CPU_DEVICE).info).allocator is None
    ocl = [d for d in list_devices() if d.runtime == "oclgrind"]
    if ocl:
        monkeypatch.setenv("PYEDMCL_MEMORY_POOL", "1")
        assert PyOpenCLBackend(ocl[0]).allocator is None


@pytest.mark.parametrize("pinned", [False, True], ids=["pageable", "pinned"])
def test_async_reads(pinned):
    """``to_host_async``: the read is queued behind the work and waited for later;
    into a caller's array (no copy) or a new one; through pinned staging buffers
    (GPUs; forced here on PoCL) that are reused; a wrong destination is refused."""
    import pyedmcl as pe
    from clkernels.backends.pyopencl_backend import PINNED_READ_BYTES, PyOpenCLBackend
    be = PyOpenCLBackend(get_backend(CPU_DEVICE).info)
    be.pinned_reads = pinned
    n = PINNED_READ_BYTES // 4 + 3  # a size above the staging threshold
    host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dev = be.to_device(host)
    into = np.zeros(n, np.float32)
    waits = [be.to_host_async(dev, into), be.to_host_async(dev)]
    got = [w() for w in waits]
    assert got[0] is into
    for g in got:
        np.testing.assert_array_equal(g, host)
    assert bool(be._staging_free) == pinned
    again = be.to_host_async(dev, np.zeros(n, np.float32))()  # a reused staging buffer
    np.testing.assert_array_equal(again, host)
    with pytest.raises(ValueError, match="C-contiguous float32"):
        be.to_host_async(dev, np.zeros(n, np.float64))
    # the first `count` values only (histograms up to their last used bin); staging
    # buffers come in power-of-two sizes, so reads of many sizes share a few
    for count in (n - 1, n - 2, 5, 0):
        np.testing.assert_array_equal(be.to_host_async(dev, count=count)(), host[:count])
    assert all(size & (size - 1) == 0 for size in be._staging_free)
    assert len(be._staging_free) <= 1
    with pytest.raises(ValueError, match="count must be in 0 .. "):
        be.to_host_async(dev, count=n + 1)
    X = np.random.default_rng(1).standard_normal((200, 40)).astype(np.float32)
    ref = pe.xmap(X, E=3, device=CPU_DEVICE)
    np.testing.assert_array_equal(pe.xmap(X, E=3, device=be, block_rows=7).rho, ref.rho)


def test_zero_batch_zeroes_at_the_end(device):
    """Arrays `zeros` returns inside `zero_batch` are zeroed when the block ends, after
    what was enqueued inside it (written over here with 7s first), in one launch per 8
    (the padded batch: one program for any count), nested blocks included; arrays of
    bytes that are not whole 32-bit words are filled at once."""
    be = get_backend(device)
    if be.info.runtime == "oclgrind":
        pytest.skip("Oclgrind's zeros are host uploads (see Backend.zeros)")
    sizes = [(1001, np.uint32), (77, np.uint64), (5, np.float32), (3000, np.uint64),
             (3, np.int32), (9, np.float64), (11, np.uint32), (13, np.uint32),
             (17, np.uint32), (2, np.uint8)]
    with be.zero_batch():
        arrs = [be.zeros(n, dt) for n, dt in sizes]
        with be.zero_batch():
            arrs.append(be.zeros(33, np.uint32))
        for a in arrs[:-2]:  # garbage the zeroing must overwrite (bytes: zeroed already)
            be.fill(a, 7)
    assert all(a.size == n for a, (n, _) in zip(arrs, sizes, strict=False))
    for a in arrs:
        assert not be.to_host(a).any(), a.dtype
    a = be.zeros(6, np.uint32)  # outside a block: zeroed at once
    assert not be.to_host(a).any()
    if hasattr(be, "_zero_words"):  # the batched kernel (GPUs' zero_batch) on every device
        for part in (sizes[:6], sizes[:-1]):  # a padded batch; a full one and a lone array
            arrs = [be.to_device(np.full(n, 7, dt)) for n, dt in part]
            be._zero_words(arrs)
            for a in arrs:
                assert not be.to_host(a).any(), a.dtype


def test_helper_processes_compile_into_the_cache(device, monkeypatch, tmp_path):
    """Where a runtime compiles one program at a time, `prebuild` hands shares of the
    programs it lacks to helper processes (clkernels.buildprocs), which compile them into
    PyOpenCL's binary cache; the kernels built here then come from that cache and run.
    NVIDIA: PyOpenCL caches no binaries there; a helper's build fills the driver's compute
    cache (a fresh one here), and this process knows its own builds by markers."""
    import pyopencl as cl

    from clkernels import buildprocs
    from clkernels.backends import pyopencl_backend
    from clkernels.buildcache import has_pyopencl_entry, pyopencl_cache_dir

    be = get_backend(device)
    if not isinstance(be, pyopencl_backend.PyOpenCLBackend) or be.info.runtime == "oclgrind":
        pytest.skip("helper processes serve the PyOpenCL backend's real devices")
    if be.info.runtime not in buildprocs.SERIAL_COMPILERS:
        # PoCL compiles in parallel and keeps its own binaries (PyOpenCL caches none there)
        pytest.skip(f"no helper processes on {be.info.runtime}: its compiler is not serial")
    nvidia = be.info.runtime == "nvidia"
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(tmp_path))  # an empty binary cache
    nv_cache = tmp_path / "nv"
    monkeypatch.setenv("CUDA_CACHE_PATH", str(nv_cache))  # the helpers' compute cache
    tag = tmp_path.name.replace("-", "_")  # sources no earlier test built
    src = "__kernel void k_{t}_{i}(__global int* a) {{ a[get_global_id(0)] = {i}; }}"
    programs = [(src.format(t=tag, i=i), ()) for i in range(6)]
    opts = list(be.build_options)
    cache = pyopencl_cache_dir()

    def cached(s: str) -> bool:
        if nvidia:  # built here (a marker), else unknown
            return be._known(s, (), cache)
        return has_pyopencl_entry(cl.Program(be.context, s), be.context, be.device, opts, cache)

    # one helper builds the first four into the cache, except program 1, which this
    # process claimed first (a queue: whoever claims a program builds it)
    queue = buildprocs.BuildQueue.create()
    try:
        assert queue.claim(1) and not queue.claim(1)
        started = buildprocs.start_helpers(be.info, [(s, opts) for s, _ in programs[:4]], cache,
                                           1, queue)
        while len(list(queue.folder.glob("*.done"))) < 3 and started[0].poll() is None:
            time.sleep(0.01)
        queue.done(1)
        assert started[0].wait(timeout=120) == 0  # nothing left to claim: it exits
        buildprocs.wait_helpers(started, queue)
        assert queue.claimed() == 4 and not queue.pending()
    finally:
        queue.remove()
    assert not queue.folder.exists()
    if nvidia:
        assert [cached(s) for s, _ in programs[:4]] == [False] * 4
        assert any(f.is_file() for f in nv_cache.rglob("*")), "no compute-cache entry"
    else:
        assert [cached(s) for s, _ in programs[:4]] == [True, False, True, True]
    # prebuild's path: helpers and this process share the programs neither built nor
    # cached (3 of 6 here; NVIDIA: all 6, the helpers' builds being unknown to this
    # process); how many each takes depends on the helper's start-up
    monkeypatch.setattr(pyopencl_backend, "helper_count", lambda runtime, n, mem: int(n >= 3))
    before = be.helper_builds
    be._build_programs(programs, 1)
    todo = 6 if nvidia else 3
    assert 0 <= be.helper_builds - before <= todo
    for i, (s, _) in enumerate(programs):
        assert cached(s)
        k = be.kernel_from_source(s, f"k_{tag}_{i}")
        out = be.zeros(4, np.int32)
        be.launch(k, (4,), None, out)
        assert (be.to_host(out) == i).all()


def test_helper_count_rules(monkeypatch):
    """Helpers only for serial compilers and four or more programs; the variable's bad
    values are refused with its name and the allowed range."""
    from clkernels import buildprocs

    monkeypatch.setattr(buildprocs.os, "sched_getaffinity", lambda pid: set(range(16)),
                        raising=False)
    monkeypatch.delenv("PYEDMCL_BUILD_PROCESSES", raising=False)
    assert buildprocs.helper_count("pocl", 20) == 0
    assert buildprocs.helper_count("nvidia", 3) == 0
    assert buildprocs.helper_count("nvidia", 21) == buildprocs.MAX_HELPERS
    assert buildprocs.helper_count("intel", 6) == 3  # the caller builds a share too
    assert buildprocs.helper_count("nvidia", 21, gpu_memory=6 << 30) == 3  # a context each
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "1")  # NVIDIA: helpers leave the compute cache
    assert buildprocs.helper_count("nvidia", 21) == 0
    assert buildprocs.helper_count("intel", 21) == buildprocs.MAX_HELPERS
    monkeypatch.delenv("CUDA_CACHE_DISABLE")
    monkeypatch.setenv("PYEDMCL_BUILD_PROCESSES", "0")
    assert buildprocs.helper_count("nvidia", 21) == 0
    for bad in ("-1", "two"):
        monkeypatch.setenv("PYEDMCL_BUILD_PROCESSES", bad)
        with pytest.raises(ValueError, match="PYEDMCL_BUILD_PROCESSES"):
            buildprocs.helper_count("nvidia", 21)
