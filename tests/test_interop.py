"""Device arrays in and out (issue #8): same results as numpy, no host round trip.

Oracles: the same function called with numpy input (its own host path, itself
checked against pyEDM/pyunicorn elsewhere) and NumPy for the generic kernels.
Predictions computed from the same float32 device series must be identical
(same kernels, same inputs), so those comparisons are exact; ``observed`` on the
device path is gathered from the float32 device copy, so it matches the float64
host values to float32 rounding (rtol 1e-7 relative to the series' scale).
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest
from conftest import run_under_oclgrind

import pyedmcl as pe
from clkernels import get_backend
from clkernels.arrays import convert_check, gather
from pyedmcl.edm.row_check import unchecked

RNG = np.random.default_rng(3)
X = np.sin(np.arange(240) * 0.37) + 0.05 * RNG.standard_normal(240)
Y = np.cos(np.arange(240) * 0.21) + 0.05 * RNG.standard_normal(240)


@pytest.fixture
def be(device):
    return get_backend(device)


def _host_msg(fn, *a, **k) -> str:
    with pytest.raises(ValueError) as err:
        fn(*a, **k)
    return str(err.value)


# --------------------------------------------------------------- generic kernels


@pytest.fixture(autouse=True)
def _plain_float32():
    """Device arrays are used as given (no float32 centring/scaling, which needs the
    series on the host: pyedmcl._precision), so host inputs are compared with them on the
    plain path; tests/test_float32_precision.py covers the standardised host path."""
    from pyedmcl._precision import unstandardised

    with unstandardised():
        yield


@pytest.mark.parametrize("src", [np.float32, np.float64, np.int32])
def test_convert_check_matches_numpy(be, src):
    a = (RNG.standard_normal(5000) * 100).astype(src)
    if np.dtype(src).kind == "f":
        a[[4000, 1234, 4999]] = [np.inf, np.nan, np.nan]
    d = be.to_device(a)
    out, bad = convert_check(be, d, np.float32)
    ref = np.flatnonzero(~np.isfinite(a.astype(np.float64)))
    assert bad == (int(ref[0]) if ref.size else -1)
    np.testing.assert_array_equal(be.to_host(out), a.astype(np.float32))
    same, bad2 = convert_check(be, d)  # no conversion: shares the memory
    assert same is d and bad2 == bad


def test_convert_check_compacts_offset_views(be):
    d = be.to_device(X)
    view = d[7:100]
    out, bad = convert_check(be, view, np.float64)
    assert bad == -1 and out is not view
    np.testing.assert_array_equal(be.to_host(out), X[7:100])


def test_gather_matches_numpy(be):
    a = RNG.standard_normal((3, 50)).astype(np.float32)
    idx = np.array([0, 49, -1, 7, 7], np.int32)
    out = be.to_host(gather(be, be.to_device(a), 50, 3, be.to_device(idx), idx.size, np.nan))
    ref = np.where(idx >= 0, a[:, np.clip(idx, 0, None)], np.nan)
    np.testing.assert_array_equal(out, ref)


# --------------------------------------------------------------- inputs


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_simplex_device_input_equals_numpy(be, dtype):
    with unchecked():  # device inputs are used as given: no float64 redo of any row
        ref = pe.simplex(X.astype(dtype), E=3, Tp=2, device=be, variance=True)
    got = pe.simplex(be.to_device(X.astype(dtype)), E=3, Tp=2, variance=True)  # device inferred
    np.testing.assert_array_equal(got.predicted, ref.predicted)
    np.testing.assert_array_equal(got.variance, ref.variance)
    np.testing.assert_allclose(got.observed, ref.observed, rtol=1e-7, atol=1e-7)
    assert got.rho == ref.rho and got.mae == ref.mae and got.rmse == ref.rmse


def test_simplex_device_targets_and_mixed_inputs(be):
    T = np.stack([Y, X * 2.0])
    with unchecked():  # a device input is used as given: no float64 redo of any row
        ref = pe.simplex(X, T, E=2, device=be)
    for x, t in ((be.to_device(X), be.to_device(T)), (X, be.to_device(T)), (be.to_device(X), T)):
        got = pe.simplex(x, t, E=2, device=be)
        np.testing.assert_array_equal(got.predicted, ref.predicted)
        np.testing.assert_array_equal(got.rho, ref.rho)
    one = pe.simplex(be.to_device(X), be.to_device(Y), E=2, device=be)
    np.testing.assert_array_equal(one.predicted, ref.predicted[0])


def test_simplex_int_and_offset_device_inputs(be):
    xi = np.round(X * 1000).astype(np.int32)
    ref = pe.simplex(xi, E=3, device=be)
    np.testing.assert_array_equal(pe.simplex(be.to_device(xi), E=3).predicted, ref.predicted)
    big = be.to_device(X)
    ref2 = pe.simplex(X[20:200], E=3, device=be)
    np.testing.assert_array_equal(pe.simplex(big[20:200], E=3).predicted, ref2.predicted)


def test_simplex_device_input_makes_no_host_copy(be, monkeypatch):
    """The series is neither read back, nor revalidated on the host, nor re-uploaded."""
    xd = be.to_device(X)
    n = X.size
    copies = []
    real_get = cla.Array.get

    def get(self, *a, **k):
        if self.dtype.kind == "f" and self.size >= n // 2:
            copies.append(self.shape)
            raise AssertionError(f"host copy of a series-sized device array {self.shape}")
        return real_get(self, *a, **k)

    real_up = be.to_device

    def to_device(a):
        if np.asarray(a).dtype.kind == "f" and np.asarray(a).size >= n // 2:
            raise AssertionError("series re-uploaded from the host")
        return real_up(a)

    def no_host_validation(*a, **k):
        raise AssertionError("host validator called")

    monkeypatch.setattr(cla.Array, "get", get)
    monkeypatch.setattr(be, "to_device", to_device)
    monkeypatch.setattr("pyedmcl.edm.simplex.as_series", no_host_validation)
    monkeypatch.setattr("pyedmcl.edm.simplex.as_targets", no_host_validation)
    r = pe.simplex(xd, E=3, device=be, return_device=True)
    assert copies == [] and isinstance(r.predicted, cla.Array)
    monkeypatch.undo()
    ref = pe.simplex(X, E=3, device=be)
    np.testing.assert_array_equal(r.predicted.get(), ref.predicted.astype(np.float32))


def test_device_nan_gives_the_host_error(be):
    for bad, at in ((-np.inf, 17), (np.inf, 200)):
        xn = X.copy()
        xn[at] = bad
        xn[at + 5] = np.inf
        msg = _host_msg(pe.simplex, xn, E=3, device=be)
        assert msg == _host_msg(pe.simplex, be.to_device(xn), E=3, device=be)
        assert f"index {at}" in msg
    # NaN: missing data in a host series (pyEDM's rules); device arrays must be finite
    xn = X.copy()
    xn[17] = np.nan
    assert np.isnan(pe.simplex(xn, E=3, device=be).predicted).any()
    assert "index 17" in _host_msg(pe.simplex, be.to_device(xn), E=3, device=be)
    T = np.stack([Y, X])
    T[1, 33] = np.nan
    with pytest.raises(ValueError, match=r"target\[1\] contains NaN or inf \(first at index 33\)"):
        pe.simplex(be.to_device(X), be.to_device(T), E=3, device=be)
    xn = X.copy()
    xn[9] = np.nan
    assert (_host_msg(pe.recurrence_plot, xn, E=2, radius=0.3, size=64, device=be)
            == _host_msg(pe.recurrence_plot, be.to_device(xn), E=2, radius=0.3, size=64))


def test_device_input_shape_and_dtype_errors(be):
    with pytest.raises(ValueError, match="x must be 1-D"):
        pe.simplex(be.to_device(np.zeros((4, 60))), E=2, device=be)
    with pytest.raises(ValueError, match="x is empty"):
        pe.simplex(be.to_device(np.zeros(0)), E=2, device=be)
    with pytest.raises(TypeError, match="x must hold real numbers"):
        pe.simplex(be.to_device(np.zeros(50, np.complex64)), E=2, device=be)
    with pytest.raises(ValueError, match="target has 100 values but x has 240"):
        pe.simplex(be.to_device(X), be.to_device(Y[:100]), E=2, device=be)


def test_foreign_context_is_refused(be):
    ctx = cl.Context([be.device])
    foreign = cla.to_device(cl.CommandQueue(ctx), X)
    with pytest.raises(ValueError, match="another context"):
        pe.simplex(foreign, E=3, device=be)
    with pytest.raises(ValueError, match="context pyedmcl did not create"):
        pe.simplex(foreign, E=3)


# --------------------------------------------------------------- outputs


def test_returned_device_arrays_equal_host_results(be):
    xd = be.to_device(X)
    ref = pe.simplex(X, E=3, device=be)
    r = pe.simplex(X, E=3, device=be, return_device=True)
    assert isinstance(r.predicted, cla.Array) and r.predicted.shape == ref.predicted.shape
    np.testing.assert_array_equal(r.predicted.get(), ref.predicted.astype(np.float32))
    np.testing.assert_allclose(r.observed.get(), ref.observed, rtol=1e-7, atol=1e-7)

    sm = pe.smap(X, E=3, theta=2.0, device=be)
    smd = pe.smap(xd, E=3, theta=2.0, return_device=True)
    assert isinstance(smd.predicted, cla.Array)
    np.testing.assert_array_equal(smd.predicted.get(), sm.predicted.astype(np.float32))

    img = pe.recurrence_plot(X, E=2, radius=0.4, size=64, device=be)
    imgd = pe.recurrence_plot(xd, E=2, radius=0.4, size=64, return_device=True)
    assert isinstance(imgd, cla.Array)
    np.testing.assert_array_equal(imgd.get(), img)
    cimg = pe.recurrence_plot(X, Y, E=2, size=64, device=be)
    np.testing.assert_array_equal(pe.recurrence_plot(xd, be.to_device(Y), E=2, size=64), cimg)

    dm = pe.pairwise_distances(X[:80], E=3, device=be)
    dmd = pe.pairwise_distances(xd[:80], E=3, return_device=True)
    assert isinstance(dmd, cla.Array) and dmd.shape == dm.shape
    np.testing.assert_array_equal(dmd.get(), dm)


def test_device_inputs_on_host_copy_paths_agree(be):
    """CCM and RQA take device arrays with one documented host copy."""
    xd, yd = be.to_device(X), be.to_device(Y)
    a = pe.ccm(xd, yd, E=2, lib_sizes=[50, 100], sample=5, seed=1, device=be)
    b = pe.ccm(X, Y, E=2, lib_sizes=[50, 100], sample=5, seed=1, device=be)
    np.testing.assert_array_equal(a.rho_xy, b.rho_xy)
    assert pe.rqa(xd, E=2, radius=0.3, device=be).DET == pe.rqa(X, E=2, radius=0.3, device=be).DET


# --------------------------------------------------------------- SYCL


@pytest.fixture(scope="module")
def sycl():
    pytest.importorskip("dpctl")
    try:
        return get_backend("intel", backend="sycl")
    except Exception as exc:
        pytest.skip(f"no OpenCL-backend SYCL device: {exc}")


def test_sycl_usm_arrays_in_and_out(sycl):
    ref = pe.simplex(X, E=3, device=sycl)
    xd = sycl.to_device(X)  # the backend's UsmArray
    got = pe.simplex(xd, E=3)
    np.testing.assert_array_equal(got.predicted, ref.predicted)
    r = pe.simplex(xd, E=3, return_device=True)
    assert hasattr(r.predicted, "shape") and not isinstance(r.predicted, np.ndarray)
    np.testing.assert_array_equal(sycl.to_host(r.predicted) if hasattr(r.predicted, "mem")
                                  else np.asarray(r.predicted.usm_data.copy_to_host()).view(np.float32),
                                  ref.predicted.astype(np.float32))
    xn = X.copy()
    xn[5] = np.inf
    assert _host_msg(pe.simplex, sycl.to_device(xn), E=3) == _host_msg(pe.simplex, xn, E=3, device=sycl)
    img = pe.recurrence_plot(X, E=2, radius=0.4, size=32, device=sycl)
    np.testing.assert_array_equal(pe.recurrence_plot(xd, E=2, radius=0.4, size=32), img)


def test_sycl_dpctl_tensor_input(sycl):
    dpt = pytest.importorskip("dpctl.tensor")
    xt = dpt.asarray(X, sycl_queue=sycl.queue)
    ref = pe.simplex(X, E=3, device=sycl)
    np.testing.assert_array_equal(pe.simplex(xt, E=3).predicted, ref.predicted)
    r = pe.simplex(xt, E=3, return_device=True)
    assert isinstance(r.predicted, dpt.usm_ndarray)
    np.testing.assert_array_equal(dpt.asnumpy(r.predicted), ref.predicted.astype(np.float32))


# --------------------------------------------------------------- Oclgrind


def test_interop_kernels_clean_under_oclgrind():
    run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from clkernels import get_backend
        from clkernels.arrays import convert_check, gather
        be = get_backend("oclgrind")
        x = np.sin(np.arange(40) * 0.4)
        x[[30, 11]] = np.nan
        d = be.to_device(x)
        out, bad = convert_check(be, d, np.float32)
        assert bad == 11, bad
        view = be.to_device(np.arange(50, dtype=np.float32))[3:20]
        out2, bad2 = convert_check(be, view)
        assert bad2 == -1 and np.array_equal(be.to_host(out2), np.arange(3, 20, dtype=np.float32))
        idx = be.to_device(np.array([1, -1, 5], np.int32))
        g = be.to_host(gather(be, out2, 17, 1, idx, 3, -1.0))
        assert np.array_equal(g, [[4, -1, 8]]), g
        r = pe.simplex(be.to_device(np.sin(np.arange(30) * 0.5)), E=2, return_device=True)
        print(r.predicted.get().sum())
    """)
