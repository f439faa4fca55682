"""Safe outputs: every file and folder pyedmcl writes is atomic, owned and single-writer.

Why: ``--overwrite`` must never delete what pyedmcl did not write (``xmap -o .``
once deleted the working directory), an interrupted run must never leave a
half-written file under the final name, two jobs must never interleave their writes
into one output, and JSON output must parse everywhere.

- **Atomic files** (:func:`atomic_file`, :func:`write_text_atomic`): the content goes
  to a hidden temporary file in the destination's directory, is flushed to disk
  (``fsync``) and renamed over the destination (``os.replace``: readers see the old
  file or the new one, never a mix).
- **Owned folders**: a folder pyedmcl creates carries a marker saying what it is (a
  ``.pyedmcl-owned`` JSON file; for an xmap Zarr store the group attribute
  ``pyedmcl_owned``). :func:`check_replaceable` allows replacing a path only when it
  carries pyedmcl's marker of the same kind and holds nothing else than what
  pyedmcl writes there (an empty folder is fine too); a plain file, a symlink, a
  foreign folder, the current directory or one of its parents are refused with a
  ``ValueError`` that says why.
- **Plain files** (the CLI's CSV and PNG outputs): an existing file is replaced only
  with ``--overwrite`` and an input file never (:func:`pyedmcl.cli.main.check_new_file`):
  a file carries no marker, so pyedmcl cannot tell its own from the user's.
- **Atomic folders** (:func:`atomic_dir`): a report is built in a hidden sibling
  folder and renamed into place once complete; an owned old folder is swapped out
  only then.
- **One writer** (:func:`output_lock`, :func:`locks_output`): an OS file lock
  (``filelock``) next to the output; the holder's pid, host, start time and command
  go to a sidecar file so a refused job can say who holds it. The OS drops the lock
  when its process dies, so a killed job's stale lock is taken over.
- **Valid JSON** (:func:`dumps_json`): NaN and inf become ``null``; NumPy values
  become plain numbers and lists.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import math
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

MARKER = ".pyedmcl-owned"
XMAP_STORE = "xmap-store"
DEMO_REPORT = "demo-report"

#: top-level entries each kind of folder may hold (what pyedmcl itself writes there)
KIND_ENTRIES: dict[str, tuple[str, ...]] = {
    XMAP_STORE: ("zarr.json", ".zgroup", ".zattrs", ".zmetadata", "rho", "done", "E",
                 "edim_rho", "block_sha256"),
    DEMO_REPORT: ("index.html", "results.json", "*.png"),
}
#: temporaries of pyedmcl's and Zarr's atomic writes, allowed in every kind
_TEMP_ENTRIES = (MARKER, ".*.tmp*", "*.partial")
KIND_NAMES = {XMAP_STORE: "xmap store", DEMO_REPORT: "demo report folder"}

_UMASK = os.umask(0)
os.umask(_UMASK)


# -- atomic files -------------------------------------------------------------------------------
def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be fsynced
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], *, what: str = "output") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically.

    Missing parent folders are created (as for folder outputs).

    The temporary keeps ``path``'s suffix (writers that pick a format from it, such as
    matplotlib, still do), is fsynced, and is renamed over ``path``; on an exception it
    is removed and ``path`` is left as it was. The new file gets the permissions a
    plain ``open(path, "w")`` would give it.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a directory; give a file path")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)  # as folder outputs do (atomic_dir)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=parent)
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, what: str = "output"
                       ) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`)."""
    with atomic_file(path, what=what) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str, *, what: str = "output",
                      encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_file`)."""
    return write_bytes_atomic(path, text.encode(encoding), what=what)


# -- valid JSON ---------------------------------------------------------------------------------
def json_safe(obj: Any) -> Any:
    """``obj`` with NaN/inf -> None, NumPy scalars/arrays -> numbers/lists, tuples -> lists,
    and anything else JSON cannot hold -> its ``str``."""
    if obj is None or isinstance(obj, str | bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {_json_key(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # NumPy array or scalar
        return json_safe(obj.tolist())
    return str(obj)


def _json_key(k: Any) -> Any:
    if isinstance(k, str | bool | int) or k is None:
        return k
    if hasattr(k, "item") and hasattr(k, "dtype"):
        k = k.item()
    return k if isinstance(k, int | str) else str(k)


def dumps_json(obj: Any, **kw: Any) -> str:
    """Valid JSON for ``obj`` (RFC 8259: no bare NaN/Infinity; see :func:`json_safe`)."""
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


# -- ownership ----------------------------------------------------------------------------------
def is_cwd_or_parent(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the current working directory or one of its parents."""
    try:
        p, cwd = Path(path).resolve(), Path.cwd().resolve()
    except OSError:
        return False
    return cwd == p or p in cwd.parents


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def owned_kind(path: str | os.PathLike[str]) -> str | None:
    """The kind of pyedmcl output the folder ``path`` is (its marker), else None.

    Recognised: the ``.pyedmcl-owned`` marker file; a Zarr group whose attributes hold
    ``pyedmcl_owned`` (or ``pyedmcl_xmap``: an xmap store of an earlier version); a
    report folder of an earlier version (``results.json`` with pyedmcl's sections).
    """
    p = Path(path)
    if not p.is_dir() or p.is_symlink():
        return None
    m = _read_json(p / MARKER)
    if isinstance(m, dict) and isinstance(m.get("kind"), str):
        return m["kind"]
    meta = _read_json(p / "zarr.json")
    attrs = meta.get("attributes") if isinstance(meta, dict) else _read_json(p / ".zattrs")
    if isinstance(attrs, dict):
        own = attrs.get("pyedmcl_owned")
        if isinstance(own, dict) and isinstance(own.get("kind"), str):
            return own["kind"]
        if "pyedmcl_xmap" in attrs:
            return XMAP_STORE
    res = _read_json(p / "results.json")
    if isinstance(res, dict) and {"sections", "versions", "figures"} <= set(res):
        return DEMO_REPORT
    return None


def foreign_entries(path: str | os.PathLike[str], kind: str) -> list[str]:
    """Top-level entries of folder ``path`` that pyedmcl does not write into a ``kind``."""
    pats = KIND_ENTRIES.get(kind, ()) + _TEMP_ENTRIES
    return sorted(e for e in os.listdir(path)
                  if not any(fnmatch.fnmatchcase(e, pat) for pat in pats))


def check_replaceable(path: str | os.PathLike[str], kind: str, *, param: str = "out") -> None:
    """Raise ``ValueError`` unless pyedmcl may delete or replace ``path`` for a ``kind`` output.

    Allowed: a path that does not exist, an empty folder, or a folder carrying
    pyedmcl's marker of this kind that holds only what pyedmcl writes there. Never the
    current directory or one of its parents, a plain file, or a symlink.
    """
    p = Path(path)
    name = KIND_NAMES.get(kind, kind)
    if is_cwd_or_parent(p):
        raise ValueError(f"{param}={str(path)!r} is the current directory or one of its "
                         "parents; pyedmcl never replaces it: give a new path such as out.zarr")
    if p.is_symlink():
        raise ValueError(f"{param}={str(path)!r} is a symbolic link; pyedmcl only replaces "
                         f"a {name} it wrote itself: give another path")
    if not p.exists():
        return
    if not p.is_dir():
        raise ValueError(f"{param}={str(path)!r} is a file, not a {name}; pyedmcl only "
                         "replaces folders it wrote itself: remove it yourself or give "
                         "another path")
    if not os.listdir(p):
        return
    found = owned_kind(p)
    if found != kind:
        why = ("it carries no pyedmcl marker" if found is None
               else f"it is a pyedmcl {KIND_NAMES.get(found, found)}")
        raise ValueError(f"{param}={str(path)!r} exists and is not a pyedmcl {name} ({why}); "
                         "pyedmcl only replaces what it wrote itself: remove it yourself or "
                         "give another path")
    extra = foreign_entries(p, kind)
    if extra:
        raise ValueError(f"{param}={str(path)!r} is a pyedmcl {name} but also holds files "
                         f"pyedmcl did not write ({', '.join(extra[:5])}"
                         f"{' ...' if len(extra) > 5 else ''}); it is left alone: move "
                         "those files out or give another path")


def remove_owned(path: str | os.PathLike[str], kind: str, *, param: str = "out") -> None:
    """Delete ``path`` after :func:`check_replaceable` allowed it."""
    check_replaceable(path, kind, param=param)
    p = Path(path)
    if p.is_dir():
        shutil.rmtree(p)


def marker_info(kind: str) -> dict[str, Any]:
    """The marker's content: kind, pyedmcl version, creation time."""
    from . import __version__
    return {"kind": kind, "pyedmcl": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def write_marker(folder: str | os.PathLike[str], kind: str) -> None:
    """Mark ``folder`` as a pyedmcl output of ``kind`` (the ``.pyedmcl-owned`` file)."""
    write_text_atomic(Path(folder) / MARKER, json.dumps(marker_info(kind)) + "\n")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], kind: str, *, param: str = "out"
               ) -> Iterator[Path]:
    """Build a folder output in a hidden sibling; rename it to ``path`` when complete.

    Refused up front (``ValueError``) when ``path`` may not be replaced
    (:func:`check_replaceable`). The yielded folder already carries the marker. On
    success an existing owned ``path`` is swapped out and deleted only after the new
    folder is complete; on an exception the partial folder is removed and ``path`` is
    untouched. Leftovers of killed runs (marked hidden siblings) are cleaned up.
    Hold :func:`output_lock` around it when two jobs may target the same path.
    """
    final = Path(path).absolute()
    check_replaceable(final, kind, param=param)
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(f".{final.name}.*.tmp-dir"):  # a killed run's partial build
        if owned_kind(old) == kind:
            shutil.rmtree(old, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp-dir", dir=parent))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)
        write_marker(tmp, kind)
        yield tmp
        if final.exists() or final.is_symlink():
            check_replaceable(final, kind, param=param)  # again: it may have changed since
            old = parent / f".{final.name}.{uuid.uuid4().hex[:8]}.tmp-dir"
            os.replace(final, old)
        os.replace(tmp, final)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# -- one writer ---------------------------------------------------------------------------------
class OutputBusyError(RuntimeError):
    """Another running job holds the lock of the output (its pid and start time are named)."""


def lock_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The lock file and its holder sidecar for output ``path`` (hidden siblings of it)."""
    p = Path(path).absolute()
    return (p.parent / f".{p.name}.pyedmcl-lock", p.parent / f".{p.name}.pyedmcl-lock.json")


def _holder(info: Path) -> str:
    for _ in range(20):  # the holder writes its sidecar just after taking the lock
        h = _read_json(info)
        if isinstance(h, dict):
            return (f"pid {h.get('pid')} on {h.get('host')}, started {h.get('started')}, "
                    f"command: {h.get('command')}")
        time.sleep(0.05)
    return "holder unknown"


class _Busy(Exception):
    """The lock is held by another job (internal to :func:`_held`)."""


@contextlib.contextmanager
def _held(lockf: Path) -> Iterator[None]:
    """An exclusive OS lock on ``lockf`` for the block; the file is removed when the block
    ends. POSIX: ``flock`` on the open file; after taking it, the path must still name the
    file locked (a job that released in between unlinked it: take the new one), and the
    holder unlinks the path *before* it unlocks, so a job that opened the old file then
    sees it gone and retries. No file is left behind, and a killed holder's lock dies with
    it (its file stays, and is reused). Elsewhere: ``filelock``, whose file stays."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        from filelock import FileLock, Timeout

        lock = FileLock(str(lockf), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise _Busy from None
        try:
            yield
        finally:
            lock.release()
        return
    while True:
        fd = os.open(lockf, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _Busy from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lockf))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # released and removed meanwhile: take the path's current file
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lockf)
        os.close(fd)  # closing the descriptor drops the lock


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str], *, what: str = "output") -> Iterator[None]:
    """Hold the single-writer lock of output ``path`` for the duration of the block.

    Raises :class:`OutputBusyError` at once (no waiting) when another job, in this
    process or another, holds it, naming the holder's pid, host, start time and
    command. The lock is an OS file lock next to the output (so jobs on other hosts
    sharing the file system see it where its locks work): it vanishes with a killed
    process, so a stale lock never blocks the next run, and its files are removed when
    the job ends. The current directory or a parent of it is refused as an output
    (``ValueError``).
    """
    if is_cwd_or_parent(path):
        raise ValueError(f"{what} {str(path)!r} is the current directory or one of its "
                         "parents; pyedmcl never writes its outputs there: give a new path "
                         "such as out.zarr")
    lockf, info = lock_paths(path)
    lockf.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _held(lockf):
            try:
                write_text_atomic(info, json.dumps({
                    "pid": os.getpid(), "host": socket.gethostname(),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S%z"),
                    "command": " ".join(sys.argv)[:300]}) + "\n")
                yield
            finally:
                info.unlink(missing_ok=True)
    except _Busy:
        raise OutputBusyError(
            f"{what} {str(path)!r} is being written by another pyedmcl job ({_holder(info)}); "
            "wait for it to finish or stop it (a killed job's lock is released with it)"
        ) from None


F = TypeVar("F", bound=Callable[..., Any])


def locks_output(param: str, *, what: str = "output") -> Callable[[F], F]:
    """Decorator: hold :func:`output_lock` on keyword argument ``param`` (when not None)
    while the function runs."""
    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = kwargs.get(param)
            if out is None:
                return fn(*args, **kwargs)
            with output_lock(out, what=what):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return deco
