"""Who is using clkernels: the application's name and environment-variable prefix.

clkernels serves any application; it never names one. The application calls
:func:`configure` once, first thing on import (before any submodule of clkernels that
imports PyOpenCL, and before PyOpenCL itself), and every setting clkernels reads from
the environment is then ``<PREFIX>_<NAME>``: with ``configure(app_name="myapp", env_prefix="MYAPP")``,
``env("DEVICE")`` reads ``MYAPP_DEVICE``. Without a call, the prefix is ``CLKERNELS``
and per-user folders are platformdirs' folders for ``clkernels``.

Settings read as ``<PREFIX>_<NAME>`` (see each module): DEVICE, BACKEND, NO_PROBE,
QUIET, BUILD_OPTIONS, BUILD_NOTICE_S, BUILD_THREADS, CACHE_DIR, TUNING_DIR, TEMPLATE_DIR,
DEVICE_MEMORY_LIMIT, MEMORY_POOL, NO_REGISTER, ICD_DIR; clkernels sets OWNS_POCL_CACHE.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """The application clkernels works for."""

    #: names the per-user cache and data folders and starts notes on stderr
    app_name: str = "clkernels"
    #: environment variables are ``<env_prefix>_<NAME>``
    env_prefix: str = "CLKERNELS"
    #: where to read more, ending the "no device builds kernels" message
    help_hint: str = ""
    #: the pip distribution whose extras ``intel`` and ``sycl`` install the optional
    #: runtimes; messages then name ``pip install '<extras_of>[sycl]'``
    extras_of: str | None = None


_settings = Settings()
#: the settings in force when pip-installed runtimes were registered (None: not yet)
_registered_with: Settings | None = None


def configure(app_name: str = "clkernels", env_prefix: str = "CLKERNELS", *,
              help_hint: str = "", extras_of: str | None = None) -> Settings:
    """Set the application's settings (:func:`clkernels.configure` also registers
    pip-installed OpenCL runtimes with them); call once, before using clkernels or
    importing PyOpenCL.

    Registration reads ``<PREFIX>_NO_REGISTER``, ``<PREFIX>_ICD_DIR`` and
    ``<PREFIX>_CACHE_DIR`` once per process (it also runs at the first import of a
    clkernels submodule that imports PyOpenCL); configuring later with other settings
    warns, as those were read under the earlier prefix. Every other setting is read
    when used.
    """
    global _settings
    new = Settings(app_name=app_name, env_prefix=env_prefix.rstrip("_"),
                   help_hint=help_hint, extras_of=extras_of)
    if _registered_with is not None and _registered_with != new:
        warnings.warn(
            f"clkernels was configured for {new.app_name!r} after OpenCL runtimes were "
            f"registered under {_registered_with.env_prefix}_*; configure it before "
            "importing its submodules", RuntimeWarning, stacklevel=2)
    _settings = new
    return new


def current() -> Settings:
    """The settings in force."""
    return _settings


def env_name(name: str) -> str:
    """The environment variable holding setting ``name``: ``env_name("DEVICE")`` ->
    ``"CLKERNELS_DEVICE"`` (or the configured application's prefix)."""
    return f"{_settings.env_prefix}_{name}"


def env(name: str, default: str | None = None) -> str | None:
    """The value of setting ``name`` from the environment (``default`` if unset)."""
    return os.environ.get(env_name(name), default)


def env_int(name: str, minimum: int) -> int | None:
    """Setting ``name`` as an integer >= ``minimum`` (None if unset or empty); any other
    value is refused with the variable's name and the allowed range."""
    raw = (env(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"{env_name(name)}={raw!r} is invalid; allowed: an integer >= {minimum}")
    return value


def flag(name: str) -> bool:
    """Whether setting ``name`` is set to something other than empty or ``0``."""
    return (env(name) or "").strip() not in ("", "0")


def app_name() -> str:
    """The application's name (per-user folders, notes on stderr)."""
    return _settings.app_name


def mark_registered() -> None:
    """Record the settings under which runtimes were registered (registration only)."""
    global _registered_with
    _registered_with = _settings
