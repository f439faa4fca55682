"""Enumerating OpenCL platforms: an OpenCL error is reported as that error (its name and
code), after a few retries for a transient one; only PLATFORM_NOT_FOUND_KHR (-1001)
means "no runtime installed". ``cl.get_platforms`` is monkeypatched (no runtime is
harmed); the enumeration cache is reset around each test."""

from __future__ import annotations

import pyopencl as cl
import pytest

import clkernels.devices as devices
from pyedmcl.cli.main import main as cli_main


def _cl_error(code: int) -> cl.Error:
    return cl.RuntimeError(cl._cl._ErrorRecord("clGetPlatformIDs", code, "injected"))


@pytest.fixture
def fresh(monkeypatch):
    """A fresh enumeration (restored after the test), no pauses between attempts."""
    real = cl.get_platforms
    monkeypatch.setattr(devices, "_cache", None)
    monkeypatch.setattr(devices, "ENUM_RETRY_DELAYS", (0.0, 0.0, 0.0))
    return real


def _failing(monkeypatch, real, code: int, n_fail: int) -> list[int]:
    calls: list[int] = []

    def get_platforms():
        calls.append(1)
        if len(calls) <= n_fail:
            raise _cl_error(code)
        return real()
    monkeypatch.setattr(cl, "get_platforms", get_platforms)
    return calls


def test_transient_error_is_retried(fresh, monkeypatch):
    want = [d.selector for d in devices.list_devices()]
    monkeypatch.setattr(devices, "_cache", None)
    calls = _failing(monkeypatch, fresh, cl.status_code.OUT_OF_HOST_MEMORY, 2)
    assert [d.selector for d in devices.list_devices()] == want and want
    assert len(calls) == 3


def test_persistent_error_named_not_no_runtime(fresh, monkeypatch, capsys):
    calls = _failing(monkeypatch, fresh, cl.status_code.OUT_OF_RESOURCES, 99)
    with pytest.raises(devices.PlatformEnumerationError,
                       match=r"OUT_OF_RESOURCES \(-5\) from clGetPlatformIDs on 4 attempts"):
        devices.list_devices()
    assert len(calls) == 4 and devices._cache is None  # never cached as "no platform"
    assert cli_main(["devices"]) == 1
    err = capsys.readouterr().err
    assert "OUT_OF_RESOURCES (-5)" in err and "no OpenCL platform" not in err
    monkeypatch.setattr(cl, "get_platforms", fresh)  # the runtime answers again
    assert devices.list_devices()


def test_platform_not_found_means_no_runtime(fresh, monkeypatch):
    calls = _failing(monkeypatch, fresh, devices.PLATFORM_NOT_FOUND_KHR, 99)
    assert devices.list_devices() == [] and len(calls) == 1  # no retry: it is an answer
    with pytest.raises(devices.NoWorkingDeviceError, match="no OpenCL platform is visible"):
        devices.select_device()


def test_cl_error_text_unknown_code():
    assert devices.cl_error_text(_cl_error(-6)) == "OUT_OF_HOST_MEMORY (-6)"
    assert devices.cl_error_text(_cl_error(-12345)) == "unknown OpenCL error (-12345)"
