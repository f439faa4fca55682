"""Build caches that repair themselves.

Two on-disk caches sit under every build:

* PoCL's kernel cache (``POCL_CACHE_DIR``; clkernels points it at a folder of its own
  unless the user set one, see :func:`clkernels.registration.own_pocl_cache`). PoCL
  trusts its entries: a truncated ``program.bc`` gives a program with no kernels and
  an abort when the process exits ("still have references to IRs"); a damaged
  work-group ``.so`` aborts the process at the first launch. Neither can be caught, so
  :func:`check_pocl_cache` checks entries *before* PoCL reads them (LLVM bitcode: the
  block lengths must add up to the file's size; ELF: the header tables must fit in
  the file) and deletes the damaged ones, which PoCL then rebuilds. Only files written
  since the last check are read, so a warm start costs a directory walk. A cache folder
  the user chose is left alone (clkernels deletes only in folders it made).
* PyOpenCL's binary cache (used for runtimes without their own, e.g. Intel's): a
  damaged binary makes PyOpenCL 2026.1 raise ``KeyError('PYOPENCL_CACHE_FAILURE_FATAL')``
  (exit 2 in the CLI). clkernels gives it a folder of its own
  (:func:`pyopencl_cache_dir`), sets that variable so the real error surfaces, and the
  backend drops the entry and rebuilds (:func:`drop_pyopencl_entry`).
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from pathlib import Path

from . import settings
from .userdirs import cache_root, private_dir

# PyOpenCL reads os.environ["PYOPENCL_CACHE_FAILURE_FATAL"] without a default; "1"
# makes it raise the cache's real error (which the backend repairs) instead of KeyError.
os.environ.setdefault("PYOPENCL_CACHE_FAILURE_FATAL", "1")

_lock = threading.Lock()
_checked: set[str] = set()


def bitcode_ok(path: Path) -> bool:
    """Whether an LLVM bitcode file is whole: magic right and top-level blocks exactly
    fill the file (each block states its length in 32-bit words)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(20)
            start, end = 0, size
            if head[:4] == b"\xde\xc0\x17\x0b":  # bitcode wrapper header
                _, _, off, n = struct.unpack("<4I", head[:16])
                start, end = off, off + n
                if end > size:
                    return False
            f.seek(start)
            if f.read(4) != b"BC\xc0\xde":
                return False
            pos = start + 4
            while pos < end:
                f.seek(pos)
                chunk = f.read(16)
                if not any(chunk[:4]):  # zero padding after the last block
                    return not any(chunk + f.read(end - pos))
                if len(chunk) < 8:
                    return False
                bits = int.from_bytes(chunk, "little")
                if bits & 3 != 1:  # the top level holds only ENTER_SUBBLOCK records
                    return False
                b = 2
                for width in (8, 4):  # block id (vbr8), new abbreviation width (vbr4)
                    while True:
                        piece = (bits >> b) & ((1 << width) - 1)
                        b += width
                        if not piece >> (width - 1):
                            break
                        if b > 64:
                            return False
                b = (b + 31) // 32 * 32
                nwords = (bits >> b) & 0xFFFFFFFF
                pos += b // 8 + 4 + nwords * 4
            return pos == end
    except (OSError, struct.error):
        return False


def elf_ok(path: Path) -> bool:
    """Whether an ELF shared object is whole: magic right and its program and section
    header tables lie inside the file (the section table is at its end)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            h = f.read(64)
        if len(h) < 52 or h[:4] != b"\x7fELF":
            return False
        end = "<" if h[5] == 1 else ">"
        if h[4] == 2:
            phoff, shoff = struct.unpack(end + "QQ", h[32:48])
            phentsize, phnum, shentsize, shnum = struct.unpack(end + "HHHH", h[54:62])
        elif h[4] == 1:
            phoff, shoff = struct.unpack(end + "II", h[28:36])
            phentsize, phnum, shentsize, shnum = struct.unpack(end + "HHHH", h[42:50])
        else:
            return False
        return phoff + phentsize * phnum <= size and shoff + shentsize * shnum <= size
    except (OSError, struct.error):
        return False


def pocl_cache_dir() -> Path | None:
    """PoCL's kernel cache if it is clkernels' own folder, else None.

    A ``POCL_CACHE_DIR`` the user chose is never checked nor pruned: clkernels deletes
    only in folders it made (the user's may hold anything, if misconfigured)."""
    d = os.environ.get("POCL_CACHE_DIR")
    if not d:
        return None
    try:
        own = (cache_root() / "pocl-kcache").resolve()
        return own if Path(d).resolve() == own else None
    except OSError:
        return None


def check_pocl_cache(cache: Path | None = None) -> list[Path]:
    """Delete PoCL cache entries with a damaged ``program.bc`` or ``.so``; return them.

    Once per folder and process; files older than the last check are not read again.
    """
    cache = cache or pocl_cache_dir()
    if cache is None or not cache.is_dir():
        return []
    with _lock:
        if str(cache) in _checked:
            return []
        _checked.add(str(cache))
        stamp = cache / f".{settings.app_name()}-checked"
        try:
            since = stamp.stat().st_mtime - 2.0
        except OSError:
            since = 0.0
        started = time.time()
        dropped: list[Path] = []
        for shard in _scandirs(cache):
            for entry in _scandirs(shard):
                if _entry_damaged(entry, since):
                    shutil.rmtree(entry, ignore_errors=True)
                    dropped.append(entry)
        try:
            stamp.touch()
            os.utime(stamp, (started, started))
        except OSError:
            pass
        return dropped


def _scandirs(d: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _entry_damaged(entry: Path, since: float) -> bool:
    for root, _dirs, files in os.walk(entry):
        for name in files:
            p = Path(root) / name
            if not (name == "program.bc" or name.endswith(".so")):
                continue
            try:
                if p.stat().st_mtime < since:
                    continue
            except OSError:
                continue
            if not (bitcode_ok(p) if name == "program.bc" else elf_ok(p)):
                return True
    return False


def pyopencl_cache_dir() -> str | None:
    """PyOpenCL's binary cache folder for clkernels' builds (a private per-user folder),
    or None (PyOpenCL's default) if that folder cannot be made safely. A stale lock in it
    is removed first (:func:`drop_stale_lock`)."""
    try:
        folder = private_dir("pyopencl-cache")
    except OSError:
        return None
    drop_stale_lock(folder)
    return str(folder)


#: seconds after which PyOpenCL's cache lock is taken for one a dead process left
STALE_LOCK_SECONDS = 20.0


def drop_stale_lock(folder: Path, now: float | None = None) -> bool:
    """Delete PyOpenCL's cache lock (``folder/lock``) if it is older than
    :data:`STALE_LOCK_SECONDS`. PyOpenCL holds it only while it reads or writes one cache
    entry (milliseconds), records no owner, and on finding it waits a minute and then
    raises on every build: a process that died holding it (a segfault in a runtime's
    compiler, a kill) would otherwise stop every later build in this folder until
    someone deletes the file by hand. Returns whether it deleted the lock."""
    lock = folder / "lock"
    try:
        age = (time.time() if now is None else now) - lock.stat().st_mtime
    except OSError:  # no lock: the usual case
        return False
    if age < STALE_LOCK_SECONDS:
        return False
    try:
        lock.unlink()
    except OSError:
        return False
    return True


def _pyopencl_entry(program: object, context: object, device: object, options: list[str],
                    cache_dir: str | None) -> Path | None:
    """The folder of PyOpenCL's cache entry that a build of ``program`` reads or writes."""
    if cache_dir is None:
        return None
    try:
        from pyopencl.cache import get_cache_key

        options_bytes = program._process_build_options(context, options)[0]  # type: ignore[attr-defined]
        key = get_cache_key(device, options_bytes, program._source)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - PyOpenCL internals moved: no entry known
        return None
    return Path(cache_dir) / key


def drop_pyopencl_entry(program: object, context: object, device: object,
                        options: list[str], cache_dir: str | None) -> bool:
    """Delete the PyOpenCL cache entry that a build of ``program`` would read."""
    entry = _pyopencl_entry(program, context, device, options, cache_dir)
    if entry is not None and entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
        return True
    return False


def has_pyopencl_entry(program: object, context: object, device: object,
                       options: list[str], cache_dir: str | None) -> bool:
    """Whether a build of ``program`` would load a binary from PyOpenCL's cache (an entry
    exists; unknown is False)."""
    entry = _pyopencl_entry(program, context, device, options, cache_dir)
    return entry is not None and entry.is_dir()
