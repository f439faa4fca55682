"""Backends: one small interface for buffers, launches and timing.

Kernel-calling code is written once against :class:`~clkernels.backends.base.Backend`;
:func:`get_backend` returns the PyOpenCL backend by default or the SYCL (dpctl)
backend when ``backend="sycl"`` or ``<PREFIX>_BACKEND=sycl`` (:mod:`clkernels.settings`). Backends are cached
per (backend name, device), so contexts, queues and built programs are made once.
"""

from __future__ import annotations

from .. import settings
from ..devices import DeviceInfo, select_device
from .base import Backend, BuildError, Kernel, Local, round_up

__all__ = ["Backend", "BuildError", "Kernel", "Local", "backend_of", "get_backend", "round_up"]

_backends: dict[tuple[str, str], Backend] = {}
BACKEND_NAMES = ("pyopencl", "sycl")


def get_backend(device: str | DeviceInfo | Backend | None = None, backend: str | None = None) -> Backend:
    """The (cached) backend for a device selector, :class:`DeviceInfo` or existing backend."""
    if isinstance(device, Backend):
        return device
    name = (backend or settings.env("BACKEND") or "pyopencl").lower()
    if name in ("opencl", "cl"):
        name = "pyopencl"
    if name not in BACKEND_NAMES:
        raise ValueError(f"backend={name!r} is not one of {', '.join(BACKEND_NAMES)}")
    info = select_device(device)
    key = (name, info.fingerprint + "|" + info.selector)
    be = _backends.get(key)
    if be is None:
        if name == "sycl":
            from .sycl_backend import SyclBackend

            be = SyclBackend(info)
        else:
            from .pyopencl_backend import PyOpenCLBackend

            be = PyOpenCLBackend(info)
        _backends[key] = be
    return be


def backend_of(array: object) -> Backend | None:
    """The cached backend whose context holds device array ``array`` (None if none does).

    Lets a caller run where the data already is: arrays made on a backend's queue
    (``pyopencl.array.to_device(be.queue, x)``, ``be.to_device(x)``) map back to it.
    """
    from ..arrays import on_backend

    for be in _backends.values():
        if on_backend(be, array):
            return be
    return None
