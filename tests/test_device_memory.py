"""Device out-of-memory fallbacks (clkernels.memory) on a simulated small device.

``Backend.memory_limit`` (same as ``PYEDMCL_DEVICE_MEMORY_LIMIT``) makes every single
allocation above the limit fail like a driver out-of-memory; each computation must
then fall back to smaller blocks (counted in ``clkernels.memory.FALLBACKS``) and give
results identical (bit for bit: every block computes the same per-row arithmetic) to
the unlimited run, or fail with a clear DeviceMemoryError below its smallest block.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_DEVICE

import clkernels
from clkernels import memory


@pytest.fixture
def be(monkeypatch):
    b = clkernels.get_backend(CPU_DEVICE)
    monkeypatch.delenv("PYEDMCL_DEVICE_MEMORY_LIMIT", raising=False)
    return b


def limited(be, monkeypatch, nbytes):
    """Simulate a device whose largest allocation is ``nbytes``; returns a fallback counter."""
    monkeypatch.setattr(be, "memory_limit", nbytes, raising=False)
    start = memory.FALLBACKS
    return lambda: memory.FALLBACKS - start


def series(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = 0.4
    for i in range(1, n):  # logistic map + a little noise: a deterministic-ish system
        x[i] = 3.8 * x[i - 1] * (1 - x[i - 1])
    return x + 1e-3 * rng.standard_normal(n)


# ----------------------------------------------------------------------------- generic


def test_run_blocked_halves_and_keeps_order(be, monkeypatch):
    calls = []

    def fn(s, e):
        calls.append((s, e))
        if e - s > 3:
            raise MemoryError("too big")
        return list(range(s, e))

    fallbacks = limited(be, monkeypatch, None)
    out = memory.run_blocked(be, fn, 10, parameter="n", what="demo")
    assert [v for blk in out for v in blk] == list(range(10))
    assert all(e - s <= 3 for s, e in calls[-len(out):])
    assert fallbacks() == 2  # 10 -> 5 -> 2


def test_minimum_block_failure_is_clear(be, monkeypatch):
    limited(be, monkeypatch, 1000)
    with pytest.raises(clkernels.DeviceMemoryError) as ei:
        memory.run_blocked(be, lambda s, e: be.empty((e - s) * 1000, np.float32), 8,
                           parameter="the series length", what="demo table")
    msg = str(ei.value)
    for part in ("demo table", "asked 4000 bytes", be.info.name, "global memory",
                 "per allocation", "Lower the series length", "simulated limit 1000"):
        assert part in msg
    assert isinstance(ei.value, MemoryError) and ei.value.requested_bytes == 4000


def test_driver_error_is_named(be):
    """A real driver OOM (e.g. OUT_OF_RESOURCES at launch) is quoted in the final error."""
    import pyopencl as cl

    def fn(s, e):
        raise cl.MemoryError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES")

    with pytest.raises(clkernels.DeviceMemoryError, match="driver: .*OUT_OF_RESOURCES") as ei:
        memory.run_blocked(be, fn, 4, parameter="n", what="demo",
                           nbytes=lambda m: m * 10)
    assert "asked 10 bytes" in str(ei.value)


def test_is_oom_recognises_backend_errors():
    import pyopencl as cl

    assert memory.is_oom(cl.MemoryError("clEnqueueNDRangeKernel failed: MEM_OBJECT_ALLOCATION_FAILURE"))
    assert memory.is_oom(RuntimeError("SyclKernelSubmitError: UR_RESULT_ERROR_OUT_OF_RESOURCES"))
    assert memory.is_oom(MemoryError())
    assert not memory.is_oom(ValueError("x"))
    assert not memory.is_oom(RuntimeError("build failed"))
    assert not memory.is_oom(clkernels.DeviceMemoryError("final"))


def test_precheck_against_max_alloc(be, monkeypatch):
    with pytest.raises(memory.DeviceOutOfMemory):
        be.empty(be.info.max_alloc_bytes // 4 + 1, np.float32)
    monkeypatch.setenv("PYEDMCL_DEVICE_MEMORY_LIMIT", "1k")
    with pytest.raises(memory.DeviceOutOfMemory):
        be.to_device(np.zeros(257, np.float32))
    be.to_device(np.zeros(256, np.float32))
    monkeypatch.setenv("PYEDMCL_DEVICE_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="PYEDMCL_DEVICE_MEMORY_LIMIT='lots'"):
        be.empty(4, np.float32)


# ----------------------------------------------------------------------------- kernels


def test_pairwise_distances_row_blocks(be, monkeypatch):
    from pyedmcl.kernels.distance import pairwise_distances

    x = series(300)
    ref = pairwise_distances(x, E=3, device=be)
    fallbacks = limited(be, monkeypatch, 300 * 298 * 4 // 5)
    got = pairwise_distances(x, E=3, device=be)
    assert fallbacks() >= 1
    np.testing.assert_array_equal(got, ref)
    limited(be, monkeypatch, 100)
    with pytest.raises(clkernels.DeviceMemoryError, match="Lower"):  # even x does not fit
        pairwise_distances(x, E=3, device=be)


def test_recurrence_plot_row_blocks(be, monkeypatch):
    from pyedmcl.rqa.plot import recurrence_plot

    x = series(400)
    ref = recurrence_plot(x, E=2, radius=0.1, size=200, device=be)
    fallbacks = limited(be, monkeypatch, ref.nbytes // 3)
    got = recurrence_plot(x, E=2, radius=0.1, size=200, device=be)
    assert fallbacks() >= 1
    np.testing.assert_array_equal(got, ref)


# ----------------------------------------------------------------------------- EDM


def test_knn_table_query_blocks(be, monkeypatch):
    from pyedmcl.primitives.knn import knn_table

    x = series(400, 1)
    ref = knn_table(x, E=3, knn=5, device=be)
    fallbacks = limited(be, monkeypatch, 3000)
    got = knn_table(x, E=3, knn=5, device=be)
    assert fallbacks() >= 1
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


def test_simplex_query_blocks(be, monkeypatch):
    from pyedmcl.edm.simplex import simplex

    x = series(400, 1)
    y = np.stack([x, np.roll(x, 3)])
    ref = simplex(x, y, E=3, device=be, variance=True)
    # the k-NN table (400 queries x 4 x (int32 + float32) = 12800 bytes per array pair)
    # does not fit, the series (1600 bytes) and predictions (3200 bytes) do
    fallbacks = limited(be, monkeypatch, 3200)
    got = simplex(x, y, E=3, device=be, variance=True)
    assert fallbacks() >= 1
    for a in ("predicted", "variance", "rho", "mae", "rmse"):
        np.testing.assert_array_equal(getattr(got, a), getattr(ref, a), err_msg=a)
    # one query's table row (4 x 4 bytes) is below 17 bytes but the series is not
    limited(be, monkeypatch, 17)
    with pytest.raises(clkernels.DeviceMemoryError, match="Lower"):
        simplex(x, y, E=3, device=be)


def test_ccm_sorted_rows_and_batches(be, monkeypatch):
    from pyedmcl.edm import ccm as ccm_mod

    x = series(60, 2)
    y = np.roll(x, 1) + 0.1 * series(60, 3)
    kw = dict(E=2, lib_sizes=[10, 30, 50], sample=20, seed=5, device=be)
    ref = ccm_mod.ccm(x, y, **kw)
    M = 59  # usable rows (E=2, Tp=0)
    # sorted M x M rows fit (M*M*4 bytes), predictions for 60 libraries x M do not
    fallbacks = limited(be, monkeypatch, M * M * 4)
    got = ccm_mod.ccm(x, y, **kw)
    assert fallbacks() >= 1
    np.testing.assert_array_equal(got.rho_xy_samples, ref.rho_xy_samples)
    np.testing.assert_array_equal(got.rho_yx_samples, ref.rho_yx_samples)

    # batched k-NN path (no sorted rows): library batches are halved
    monkeypatch.setattr(be, "memory_limit", None)
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 0)
    ref_b = ccm_mod.ccm(x, y, **kw)
    fallbacks = limited(be, monkeypatch, 5 * M * 3 * 4)
    got_b = ccm_mod.ccm(x, y, **kw)
    assert fallbacks() >= 1
    np.testing.assert_array_equal(got_b.rho_xy_samples, ref_b.rho_xy_samples)
    np.testing.assert_array_equal(got_b.rho_yx_samples, ref_b.rho_yx_samples)


def test_ccm_sorted_rows_fall_back_when_too_big(be, monkeypatch, caplog):
    from pyedmcl.edm import ccm as ccm_mod

    x = series(60, 2)
    y = np.roll(x, 1) + 0.1 * series(60, 3)
    kw = dict(E=2, lib_sizes=[10, 30], sample=5, seed=5, device=be)
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 0)
    ref = ccm_mod.ccm(x, y, **kw)  # the batched path, unlimited
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 1 << 25)
    limited(be, monkeypatch, 59 * 59 * 4 - 1)  # the sorted M x M rows do not fit
    with caplog.at_level("INFO", logger="pyedmcl.edm.ccm"):
        got = ccm_mod.ccm(x, y, **kw)
    assert "do not fit" in caplog.text
    np.testing.assert_array_equal(got.rho_xy_samples, ref.rho_xy_samples)


@pytest.mark.parametrize("knn", [None, 6])
def test_smap_row_blocks(be, monkeypatch, knn):
    from pyedmcl.edm.smap import smap

    x = series(300, 4)
    ref = smap(x, E=3, theta=2.0, knn=knn, device=be)
    # the (E+1) coefficients per row (~300 x 4 x 8 bytes) do not fit, the series does
    fallbacks = limited(be, monkeypatch, 4000)
    got = smap(x, E=3, theta=2.0, knn=knn, device=be)
    assert fallbacks() >= 1
    for a in ("predicted", "coefficients", "variance", "rho"):
        np.testing.assert_array_equal(getattr(got, a), getattr(ref, a), err_msg=a)


# ----------------------------------------------------------------------------- CLI


def test_cli_env_limit(tmp_path, monkeypatch, capsys):
    """PYEDMCL_DEVICE_MEMORY_LIMIT: a small limit still completes (blocks), a tiny one is
    a runtime failure (exit code 1) with the clear message."""
    from pyedmcl.cli.main import main

    x = series(400, 1)
    np.save(tmp_path / "x.npy", x)
    argv = ["simplex", str(tmp_path / "x.npy"), "-E", "3", "--device", CPU_DEVICE]
    assert main(argv) == 0
    ref = capsys.readouterr().out
    assert "rho=" in ref
    monkeypatch.setenv("PYEDMCL_DEVICE_MEMORY_LIMIT", "3200")
    start = memory.FALLBACKS
    assert main(argv) == 0
    assert memory.FALLBACKS > start
    assert capsys.readouterr().out == ref
    monkeypatch.setenv("PYEDMCL_DEVICE_MEMORY_LIMIT", "100")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "pyedmcl simplex: failed:" in err and "PYEDMCL_DEVICE_MEMORY_LIMIT" in err
    assert "Lower" in err and "global memory" in err


def test_blocked_launches_clean_under_oclgrind():
    """Row-block launches (row offsets > 0, block edges) stay in bounds."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np
        import clkernels
        from pyedmcl.kernels.distance import pairwise_distances
        from pyedmcl.rqa.plot import recurrence_plot
        be = clkernels.get_backend("oclgrind")
        x = np.sin(np.arange(40) * 0.7)
        ref_d = pairwise_distances(x, E=2, device=be)
        ref_p = recurrence_plot(x, E=2, radius=0.3, size=16, device=be)
        be.memory_limit = 39 * 39 * 4 // 3
        np.testing.assert_array_equal(pairwise_distances(x, E=2, device=be), ref_d)
        be.memory_limit = 40 * 8  # the float64 series of the exact redo fits; image blocks
        np.testing.assert_array_equal(recurrence_plot(x, E=2, radius=0.3, size=16, device=be), ref_p)
        print("ok")
    """)
    assert "ok" in out


def test_scans_fall_back(be, monkeypatch, caplog):
    """embed_dimension: the fused all-E tables fall back to per-E Simplex, whose tables
    fall back to query blocks; same skill as the unlimited per-E path."""
    import pyedmcl as pe

    x = series(300, 6)
    ref = pe.embed_dimension(x, max_E=4, device=be, fused=False)
    fallbacks = limited(be, monkeypatch, 2400)
    with caplog.at_level("INFO"):
        got = pe.embed_dimension(x, max_E=4, device=be)
    assert "running per E" in caplog.text and fallbacks() >= 1
    np.testing.assert_array_equal(got.rho, ref.rho)
    np.testing.assert_array_equal(got.rmse, ref.rmse)
    with pytest.raises(clkernels.DeviceMemoryError, match="fused embed_dimension"):
        pe.embed_dimension(x, max_E=4, device=be, fused=True)


def test_sycl_backend_limit(monkeypatch):
    """The SYCL backend refuses over-limit allocations the same way (row blocks follow)."""
    pytest.importorskip("dpctl")
    from pyedmcl.kernels.distance import pairwise_distances

    try:
        sb = clkernels.get_backend("intel", backend="sycl")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no OpenCL-backend SYCL device: {exc}")
    x = series(200)
    ref = pairwise_distances(x, E=2, device=sb)
    fallbacks = limited(sb, monkeypatch, ref.nbytes // 4)
    np.testing.assert_array_equal(pairwise_distances(x, E=2, device=sb), ref)
    assert fallbacks() >= 1


# ----------------------------------------------------------------------------- xmap


def test_xmap_library_batches(be, monkeypatch):
    """All-to-all cross map (E scan + matrix): library batches halve to fit."""
    import pyedmcl as pe

    rng = np.random.default_rng(8)
    X = np.stack([series(120, s) for s in range(4)] * 4, axis=1)
    X = X + 0.01 * rng.standard_normal(X.shape)  # (120 steps, 16 series)
    ref = pe.xmap(X, E="auto", max_E=4, device=be)
    # the series (16 x 120 float32) fit; a batch of 2+ libraries' tables does not
    fallbacks = limited(be, monkeypatch, X.size * 4)
    got = pe.xmap(X, E="auto", max_E=4, device=be)
    assert fallbacks() >= 2  # the E scan and the matrix
    np.testing.assert_array_equal(got.E, ref.E)
    np.testing.assert_array_equal(got.rho, ref.rho)


@pytest.mark.parametrize("runtime", ["intel", "pocl"])
def test_xmap_time_major_panel_too_large_reads_row_major(runtime, monkeypatch):
    """A skill layout that reads its targets time-major (VEC=2, each E-group's targets
    padded to a 32-target row) whose panel exceeds the device's largest allocation: the
    skill reads the targets where they lie (the scalar layout), the same rho."""
    from conftest import TEST_DEVICES

    import pyedmcl as pe
    from pyedmcl.kernels import xmap as xk

    if runtime not in TEST_DEVICES:
        pytest.skip(f"{runtime} does not build here")
    b = clkernels.get_backend(runtime)
    X = np.stack([series(120, s) for s in range(16)], axis=1)   # (120 steps, 16 series)
    E = [2, 3] * 8
    ref = pe.xmap(X, E=E, device=b)
    monkeypatch.setattr(xk, "FEW_TARGETS", 0)   # the given layout, whatever the group size
    monkeypatch.setattr(xk.XMAP_SKILL, "params_for",
                        lambda be_, spec, size: dict(xk.SCALAR_LAYOUT, TJ=4, VEC=2))
    assert xk.reads_time_major(dict(xk.SCALAR_LAYOUT, TJ=4, VEC=2))
    limited(b, monkeypatch, X.size * 4)   # the series fit; 8 targets x 32-row pitch do not
    got = pe.xmap(X, E=E, device=b)
    np.testing.assert_array_equal(got.rho, ref.rho)


# ----------------------------------------------------------------------------- RQA


def test_rqa_shared_bits_fall_back(be, monkeypatch, caplog):
    """D&R RQA: memory is O(N) except the shared column bits (EDGE x N bits); when they
    do not fit, the unshared path gives the same (exact integer) histograms."""
    import pyedmcl as pe

    x = series(600, 9)
    p = {"VEC": 4, "WG": 4, "EDGE": 256, "BITS": 2, "PH": 32, "SHARE": 1, "SYM": 1}
    ref = pe.rqa(x, E=2, radius=0.1, device=be, params=p)
    limited(be, monkeypatch, 8000)  # O(N) buffers (64-bit histograms: 4.8 kB) fit, 4 x 736 words not
    with caplog.at_level("INFO", logger="pyedmcl.rqa.dnr"):
        got = pe.rqa(x, E=2, radius=0.1, device=be, params=p)
    assert "do not fit" in caplog.text
    for key in ("diagonal_hist", "vertical_hist", "white_hist", "n_recurrences"):
        np.testing.assert_array_equal(getattr(got, key), getattr(ref, key), err_msg=key)


def _check_upload(device, upload: str, shape, dtype, **kw) -> None:
    """``upload`` (a Backend method, keywords ``kw``) holds the values with the shape and
    dtype given, a change to the host array afterwards does not reach it (unless
    ``copy=False``: then the array is left as it is), and a kernel queued right after
    reads it (a gather of every element)."""
    from clkernels import get_backend
    from clkernels.arrays import gather

    be = get_backend(device)
    a = np.array(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + 1)
    want = a.copy()
    d = getattr(be, upload)(a, **kw)
    if kw.get("copy", True):
        a[...] = -1
    assert d.shape == shape and d.dtype == np.dtype(dtype)
    if a.size:
        idx = be.to_device(np.arange(a.size, dtype=np.int32))
        got = gather(be, d.reshape(-1) if d.ndim != 1 else d, 0, 1, idx, a.size, 0)
        np.testing.assert_array_equal(got.get().reshape(shape), want)
    np.testing.assert_array_equal(be.to_host(d), want)


@pytest.mark.parametrize("shape, dtype", [((), np.float64), ((0,), np.int32), ((7,), np.int32),
                                          ((3, 5), np.float32), ((16384,), np.float32),
                                          ((16385,), np.float32), ((300000,), np.int32)])
def test_uploads_are_copies_the_device_sees(device, shape, dtype):
    """``to_device`` at every size path (made with the buffer up to CREATE_UPLOAD_BYTES,
    queued up to ASYNC_UPLOAD_BYTES, waited for beyond)."""
    _check_upload(device, "to_device", shape, dtype)


@pytest.mark.parametrize("shape, dtype", [((0,), np.int32), ((1,), np.int32),
                                          ((3, 5), np.float32), ((300000,), np.float64)])
def test_uploads_aside_are_copies_the_device_sees(device, shape, dtype):
    """``to_device_aside`` (on GPUs through another queue, queue 0 waiting with a barrier)."""
    _check_upload(device, "to_device_aside", shape, dtype)


@pytest.mark.parametrize("shape, dtype", [((0,), np.int32), ((3, 5), np.float32),
                                          ((300000,), np.float64)])
@pytest.mark.parametrize("own_queue", [False, True])
def test_uploads_aside_without_a_copy_the_device_sees(device, shape, dtype, own_queue,
                                                      monkeypatch):
    """``to_device_aside(copy=False)``: the transfer reads the caller's array itself,
    through the queue of its own (``own_queue``: on any device) or as ``to_device``."""
    from clkernels.backends import pyopencl_backend as P

    if own_queue:
        monkeypatch.setattr(P, "UPLOAD_ASIDE_ON", ("gpu", "cpu"))
    _check_upload(device, "to_device_aside", shape, dtype, copy=False)
