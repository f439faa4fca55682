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
  ``.pyedmcl-owned`` JSON file; for a Zarr store (xmap, rqa_batch) the group attribute
  ``pyedmcl_owned``) and a **manifest** (``.pyedmcl-manifest.json``, :class:`Manifest`):
  every file pyedmcl writes there, by its path inside the folder. A file is added to
  the manifest (rewritten atomically) *before* it is written, so a job killed at any
  point leaves a manifest that lists every file it wrote. :func:`check_replaceable`
  allows replacing a folder only when it carries pyedmcl's marker of the same kind and
  every entry inside it, at any depth, is a file of its manifest (or a temporary of
  pyedmcl's or Zarr's atomic writes of such a file); a symlink inside is never
  followed and always counts as foreign. Folders written by a pyedmcl without
  manifests are recognised only by pyedmcl's exact layout (:func:`_legacy_entry`);
  anything else inside is refused. A plain file, a symlink, a foreign folder, the
  current directory or one of its parents are refused with a ``ValueError`` that
  says why. Nothing is deleted before that check passes, and deletion
  (:func:`remove_owned`) unlinks only the files the check allowed and removes folders
  only once empty.
- **Plain files** (the CLI's CSV and PNG outputs): an existing file is replaced only
  with ``--overwrite`` and an input file never (:func:`pyedmcl.cli.args.check_new_file`):
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
import functools
import itertools
import json
import math
import os
import re
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
MANIFEST = ".pyedmcl-manifest.json"
XMAP_STORE = "xmap-store"
RQA_BATCH_STORE = "rqa-batch-store"
DEMO_REPORT = "demo-report"

#: the arrays an xmap store holds (its layout before manifests: see :func:`_legacy_entry`)
XMAP_ARRAYS = ("rho", "done", "E", "edim_rho", "block_sha256", "p_value", "null_mean",
               "null_q95")
KIND_NAMES = {XMAP_STORE: "xmap store", RQA_BATCH_STORE: "rqa_batch store",
              DEMO_REPORT: "demo report folder"}

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

    Recognised: the ``.pyedmcl-owned`` marker file; the manifest (a folder cut off
    right after its manifest was written, before anything else); a Zarr group whose attributes hold
    ``pyedmcl_owned`` (or ``pyedmcl_xmap``: an xmap store of an earlier version); a
    report folder of an earlier version (``results.json`` with pyedmcl's sections).
    """
    p = Path(path)
    if not p.is_dir() or p.is_symlink():
        return None
    for f in (MARKER, MANIFEST):
        m = _read_json(p / f)
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


# -- manifests ----------------------------------------------------------------------------------
def read_manifest(folder: str | os.PathLike[str]) -> set[str] | None:
    """The files listed in ``folder``'s manifest (paths relative to it, ``/``-separated),
    or None when it has none (or an unreadable one: the folder is then judged by its
    layout, as one written before manifests)."""
    m = _read_json(Path(folder) / MANIFEST)
    if not isinstance(m, dict) or not isinstance(m.get("files"), list):
        return None
    return {f for f in m["files"] if isinstance(f, str)}


class Manifest:
    """The manifest of a folder output: the files pyedmcl wrote (or is about to write) there.

    :meth:`add` lists files *before* they are written and rewrites the manifest
    atomically (only when something is new), so whenever the job stops, every file it
    wrote is listed. Listing a file that is then never written is harmless; a file
    written without being listed would make the folder irreplaceable (never unsafe).
    One process writes a folder's manifest (the job's output lock); workers that only
    write files already listed never touch it.
    """

    def __init__(self, folder: str | os.PathLike[str], kind: str):
        self.folder = Path(folder)
        self.kind = kind
        self.files: set[str] = read_manifest(self.folder) or set()

    def add(self, *files: str) -> None:
        """List ``files`` (paths relative to the folder, ``/``-separated) before writing them."""
        new = set(files) - self.files
        if new or not (self.folder / MANIFEST).is_file():
            self.files |= new
            self._write()

    def _write(self) -> None:
        from ._version import __version__
        write_text_atomic(self.folder / MANIFEST, json.dumps(
            {"kind": self.kind, "pyedmcl": __version__, "files": sorted(self.files)},
            indent=0) + "\n", what="manifest")

    @classmethod
    def adopt(cls, folder: str | os.PathLike[str], kind: str) -> Manifest:
        """The manifest of ``folder``; a folder written before manifests gets one listing
        the files that fit pyedmcl's layout of ``kind`` (anything else stays unlisted,
        hence foreign)."""
        man = cls(folder, kind)
        if read_manifest(folder) is None:
            man.add(*(rel for rel, is_dir in _walk(Path(folder))
                      if not is_dir and _legacy_entry(kind, rel, False)))
        return man


def array_files(name: str, shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[str]:
    """The files Zarr v3 writes for array ``name`` of a group (default chunk keys
    ``c/i/j``): its metadata and every chunk of its grid, listed in the manifest before
    they exist."""
    grid = [-(-s // c) for s, c in zip(shape, chunks, strict=True)]
    keys = [()] if not grid else [tuple(k) for k in itertools.product(*map(range, grid))]
    return [f"{name}/zarr.json"] + [f"{name}/c/" + "/".join(map(str, k)) for k in keys]


def _walk(root: Path, rel: str = "") -> Iterator[tuple[str, bool | None]]:
    """(relative path, is a real folder) for everything under ``root``, depth first in
    name order, never following a symlink (a symlink or special file: ``None``)."""
    with os.scandir(root / rel if rel else root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        r = f"{rel}/{e.name}" if rel else e.name
        if e.is_symlink():
            yield r, None
        elif e.is_dir(follow_symlinks=False):
            yield r, True
            yield from _walk(root, r)
        elif e.is_file(follow_symlinks=False):
            yield r, False
        else:
            yield r, None


_ARR = "|".join(XMAP_ARRAYS)
#: an xmap store's layout before manifests: group metadata (Zarr v2 or v3), the marker,
#: and per array its metadata and integer chunk keys (v2 ``0.1`` or ``0/1``, v3 ``c/0/1``)
_LEGACY_FILES = {
    XMAP_STORE: re.compile(rf"(zarr\.json|\.zgroup|\.zattrs|\.zmetadata|{re.escape(MARKER)}"
                           rf"|({_ARR})/(zarr\.json|\.zarray|\.zattrs|\d+([./]\d+)*"
                           rf"|c(/\d+)+))"),
    DEMO_REPORT: re.compile(rf"(index\.html|results\.json|[^/]+\.png|{re.escape(MARKER)})"),
}
_LEGACY_DIRS = {XMAP_STORE: re.compile(rf"({_ARR})(/c)?(/\d+)*"),
                DEMO_REPORT: re.compile(r"(?!)")}
_PYEDMCL_TEMP = re.compile(r"\.(?P<name>.+)\.[^./]+\.tmp[^/]*")  # atomic_file's temporaries
_ZARR_TEMP = re.compile(r"(?P<stem>.+)\.[0-9a-f]{32}\.partial")  # Zarr's LocalStore's


def _legacy_entry(kind: str, rel: str, is_dir: bool) -> bool:
    """Whether ``rel`` fits pyedmcl's layout of ``kind`` (folders written before manifests)."""
    pat = (_LEGACY_DIRS if is_dir else _LEGACY_FILES).get(kind)
    return bool(pat and pat.fullmatch(rel))


def _is_temp_of(rel: str, listed: Callable[[str], bool]) -> bool:
    """Whether file ``rel`` is a temporary of an atomic write of a listed file."""
    d, _, name = rel.rpartition("/")
    pre = f"{d}/" if d else ""
    m = _PYEDMCL_TEMP.fullmatch(name)
    if m and listed(pre + m["name"]):
        return True
    m = _ZARR_TEMP.fullmatch(name)
    if m:  # Zarr's temporary replaces the last suffix of the name (c/0/1 -> 1.<hex>.partial)
        return any(listed(pre + m["stem"] + sfx) for sfx in ("", ".json", ".zarray",
                                                             ".zattrs", ".zgroup"))
    return False


def _allowed(kind: str, files: set[str] | None) -> Callable[[str, bool | None], bool]:
    """The test an entry (relative path, is a folder) must pass to be pyedmcl's."""
    if files is None:  # written before manifests: pyedmcl's exact layout only
        def listed(rel: str) -> bool:
            return rel == MANIFEST or _legacy_entry(kind, rel, False)
        dirs: Callable[[str], bool] = lambda rel: _legacy_entry(kind, rel, True)  # noqa: E731
    else:
        parents = {f.rsplit("/", i)[0] for f in files for i in range(1, f.count("/") + 1)}

        def listed(rel: str) -> bool:
            return rel in files or rel in (MANIFEST, MARKER)
        dirs = parents.__contains__

    def ok(rel: str, is_dir: bool | None) -> bool:
        if is_dir is None:  # a symlink (never followed) or a special file: never ours
            return False
        if is_dir:
            return dirs(rel)
        return listed(rel) or _is_temp_of(rel, listed)
    return ok


def first_foreign(path: str | os.PathLike[str], kind: str) -> str | None:
    """The first entry inside folder ``path`` (any depth, name order) that pyedmcl did not
    write into this ``kind`` of output, else None (see :func:`check_replaceable`)."""
    p = Path(path)
    ok = _allowed(kind, read_manifest(p))
    folder = None  # a foreign folder is named only when no foreign file is found in it
    for rel, is_dir in _walk(p):
        if not ok(rel, is_dir):
            if not is_dir:
                return rel
            folder = folder or rel + "/"
    return folder


def foreign_entries(path: str | os.PathLike[str], kind: str) -> list[str]:
    """Entries of folder ``path`` pyedmcl did not write (at most the first, see
    :func:`first_foreign`)."""
    bad = first_foreign(path, kind)
    return [] if bad is None else [bad]


def check_replaceable(path: str | os.PathLike[str], kind: str, *, param: str = "out") -> None:
    """Raise ``ValueError`` unless pyedmcl may delete or replace ``path`` for a ``kind`` output.

    Allowed: a path that does not exist, an empty folder, or a folder carrying
    pyedmcl's marker of this kind in which every entry, at any depth, is pyedmcl's
    (listed in its manifest, or fitting pyedmcl's layout for a folder written before
    manifests). Never the current directory or one of its parents, a plain file, a
    symlink, or a folder holding a symlink or a file pyedmcl did not write (the first
    such entry is named).
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
    bad = first_foreign(p, kind)
    if bad is not None:
        how = ("not in its manifest" if read_manifest(p) is not None
               else "it has no manifest and this is not pyedmcl's layout")
        what = ("a folder" if bad.endswith("/") else "a symbolic link or special file"
                if _is_link_or_special(p / bad) else "a file")
        raise ValueError(f"{param}={str(path)!r} is a pyedmcl {name} but also holds files "
                         f"pyedmcl did not write ({bad}: {what}, {how}); nothing was "
                         "deleted: move it out of the folder (or delete the folder yourself) "
                         "or give another path")


def _is_link_or_special(p: Path) -> bool:
    return p.is_symlink() or not (p.is_dir() or p.is_file())


def _delete_checked(p: Path, kind: str) -> None:
    """Unlink the files of folder ``p`` that pyedmcl wrote, then its folders once empty.

    Each entry is judged again as it is deleted (a file added since the check is left,
    and the folder holding it is kept: ``OSError``); symlinks are never followed.
    """
    ok = _allowed(kind, read_manifest(p))
    entries = list(_walk(p))
    for rel, is_dir in entries:
        if is_dir is False and rel != MANIFEST:
            if not ok(rel, is_dir):
                raise ValueError(f"{str(p)!r}: {rel} appeared while it was being replaced; "
                                 "it is left alone with the folder holding it")
            (p / rel).unlink(missing_ok=True)
    for rel, is_dir in reversed(entries):
        if is_dir:
            os.rmdir(p / rel)
    (p / MANIFEST).unlink(missing_ok=True)  # last: a folder cut off here is still judged
    os.rmdir(p)


def remove_owned(path: str | os.PathLike[str], kind: str, *, param: str = "out") -> None:
    """Delete ``path`` after :func:`check_replaceable` allowed it (only pyedmcl's files)."""
    check_replaceable(path, kind, param=param)
    p = Path(path)
    if p.is_dir():
        _delete_checked(p, kind)


def marker_info(kind: str) -> dict[str, Any]:
    """The marker's content: kind, pyedmcl version, creation time."""
    from ._version import __version__
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
    (:func:`check_replaceable`). The yielded folder already carries the marker; its
    manifest lists every file in it when the build completes (the folder appears
    only then). On success an existing owned ``path`` is swapped out and deleted only after the new
    folder is complete; on an exception the partial folder is removed and ``path`` is
    untouched. Leftovers of killed runs (marked hidden siblings) are cleaned up.
    Hold :func:`output_lock` around it when two jobs may target the same path.
    """
    final = Path(path).absolute()
    check_replaceable(final, kind, param=param)
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(f".{final.name}.*.tmp-dir"):  # a killed run's partial build
        with contextlib.suppress(OSError, ValueError):  # one holding foreign files stays
            if owned_kind(old) == kind and first_foreign(old, kind) is None:
                _delete_checked(old, kind)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp-dir", dir=parent))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)
        write_marker(tmp, kind)
        yield tmp
        Manifest(tmp, kind).add(*(rel for rel, is_dir in _walk(tmp) if is_dir is False))
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
        with contextlib.suppress(OSError, ValueError):  # a file added meanwhile: kept
            _delete_checked(old, kind)


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


def zarr_module() -> Any:
    """The zarr package, or a clear error naming the extra that installs it."""
    try:
        import zarr
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on extras
        raise ModuleNotFoundError("Zarr output needs zarr: pip install 'pyedmcl[io]'") from exc
    return zarr


def open_store_group(path: str | os.PathLike[str], kind: str, attr: str, mode: str
                     ) -> tuple[Any, dict[str, Any]]:
    """The Zarr group of a pyedmcl store of ``kind`` ("xmap", "rqa_batch") at ``path`` and
    its parameters (the group attribute ``attr``); ``ValueError`` naming the path where it
    is not a folder or not such a store (any unreadable group)."""
    zarr = zarr_module()
    if not Path(path).is_dir():
        raise ValueError(f"{str(path)!r} is not a pyedmcl {kind} store (not a folder)")
    try:
        g = zarr.open_group(str(path), mode=mode)
        params = dict(g.attrs)[attr]
    except Exception as exc:  # noqa: BLE001 - any unreadable group
        raise ValueError(f"{str(path)!r} is not a pyedmcl {kind} store "
                         f"({type(exc).__name__}: {exc})") from None
    return g, params


def stored_params(path: str | os.PathLike[str], kind: str, attr: str) -> tuple[bool, Any]:
    """Whether ``path`` is a store of ``kind`` that pyedmcl wrote (its manifest), and
    the parameters it holds (group attribute ``attr``; None where the group cannot be
    read: a damaged store, which only ``overwrite`` replaces)."""
    if owned_kind(path) != kind:
        return False, None
    try:
        return True, dict(zarr_module().open_group(str(path), mode="r").attrs).get(attr)
    except Exception:  # noqa: BLE001 - an unreadable group: treated as damaged
        return True, None
