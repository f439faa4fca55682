"""clkernels — a vendor-neutral OpenCL kernel runtime.

Devices (enumeration, fingerprints, selection), code generation from Mako
templates, build-once program caches, backends (PyOpenCL, SYCL via dpctl) and the
autotuner with its tuning database. It knows nothing of the science it runs.

An application calls :func:`configure` first (its name and environment-variable
prefix, see :mod:`clkernels.settings`); ``import clkernels`` itself loads nothing
else. :func:`configure`, and the first import of a submodule that imports PyOpenCL,
register pip-installed OpenCL runtimes (Intel's CPU runtime) with the ICD loader
before PyOpenCL loads (:mod:`clkernels.registration`): code that imports pyopencl
itself calls :func:`configure` (or :func:`register_platforms`) first.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from . import settings as _settings
from .settings import Settings, env, env_name

#: public name -> submodule that defines it (imported on first use)
_LAZY = {
    "Backend": "backends",
    "BuildError": "backends",
    "Kernel": "backends",
    "Local": "backends",
    "get_backend": "backends",
    "round_up": "backends",
    "DeviceInfo": "devices",
    "DeviceSelectionError": "devices",
    "default_device": "devices",
    "list_devices": "devices",
    "normalise_name": "devices",
    "select_device": "devices",
    "DeviceMemoryError": "memory",
    "run_blocked": "memory",
    "register_platforms": "registration",
    "TemplateParameterError": "templates",
    "render": "templates",
}


def configure(app_name: str = "clkernels", env_prefix: str = "CLKERNELS", *,
              help_hint: str = "", extras_of: str | None = None) -> Settings:
    """Set the application's settings (:func:`clkernels.settings.configure`) and register
    pip-installed OpenCL runtimes under them; call once, before importing PyOpenCL."""
    new = _settings.configure(app_name, env_prefix, help_hint=help_hint, extras_of=extras_of)
    from .registration import register_platforms

    register_platforms()
    return new


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'clkernels' has no attribute {name!r}")
    value = getattr(import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "Backend",
    "BuildError",
    "DeviceInfo",
    "DeviceMemoryError",
    "DeviceSelectionError",
    "Kernel",
    "Local",
    "Settings",
    "TemplateParameterError",
    "configure",
    "default_device",
    "env",
    "env_name",
    "get_backend",
    "list_devices",
    "normalise_name",
    "register_platforms",
    "render",
    "round_up",
    "run_blocked",
    "select_device",
]
