"""Per-user cache folders that are safe to write: private, never a planted symlink.

Everything clkernels keeps on disk between runs (probe verdicts, build-failure logs,
the PoCL kernel cache it owns, ICD files) lives under one root: ``<PREFIX>_CACHE_DIR``
if set, else platformdirs' user cache dir for the application
(:mod:`clkernels.settings`). Folders are created with
mode 0o700; a path component that is a symlink or belongs to another user is refused
(a fixed path under /tmp could be planted by anyone). Files are written atomically
(a temporary file in the same folder, then ``os.replace``), so a reader sees the old
content or the new one, never half of it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from . import settings


class UnsafeCacheDirError(OSError):
    """A cache folder is a symlink or is owned by another user."""


def cache_root() -> Path:
    """The root of clkernels' per-user cache (``<PREFIX>_CACHE_DIR`` overrides)."""
    env = settings.env("CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir(settings.app_name(), appauthor=False))


def _check(p: Path) -> None:
    st = os.lstat(p)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeCacheDirError(f"refusing cache folder {p}: it is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheDirError(f"refusing cache folder {p}: not a folder")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafeCacheDirError(f"refusing cache folder {p}: owned by uid {st.st_uid}, "
                                  f"not by this user ({os.getuid()})")


def private_dir(*parts: str) -> Path:
    """``cache_root()/parts...``, created 0o700; the root and every part are checked.

    Raises :class:`UnsafeCacheDirError` if one of them is a symlink or another user's.
    """
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check(root)
    d = root
    for part in parts:
        d = d / part
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        _check(d)
    return d


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new one, never
    half: a uniquely named temporary in the same folder (two threads never share it),
    flushed to disk, then renamed over ``path`` (``os.replace`` is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
