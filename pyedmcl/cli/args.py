"""What the subcommands share: their common options, their input and output checks, and
the two error classes that mean "the user's input" (exit 2).

Imported by every command module (``pyedmcl/cli/*_cmd.py``) and by the entry point
(:mod:`pyedmcl.cli.main`); it imports no command and not the entry point, so the
registry imports the commands downward only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


class UsageError(ValueError):
    """Bad command-line usage (exit code 2)."""


class InputError(UsageError):
    """An argument or input file the command cannot use (exit 2), whatever error reading or
    checking it raised (see :func:`reading_input`)."""


def _short_path(p: Any, n: int = 80) -> str:
    s = os.fsdecode(p) if isinstance(p, bytes | os.PathLike) else str(p)
    return repr(s) if len(s) <= n else repr(s[:n - 25] + "..." + s[-20:]) + f" ({len(s)} characters)"


@contextlib.contextmanager
def reading_input(what: str) -> Iterator[None]:
    """Errors raised in the block (checking the argument ``what`` -- ``INPUT``, ``--out``
    -- or loading it) are the user's input's: a :class:`InputError` (exit 2) naming
    ``what``, whatever their type (``OSError`` such as ENAMETOOLONG, EISDIR, EACCES;
    ``UnicodeError``; a reader's own exception). ``ValueError``/``TypeError``/
    ``KeyError`` pass unchanged (already exit 2, with their own message). Not the
    input's: a missing optional module, running out of memory, an interrupt."""
    try:
        yield
    except UnicodeError as exc:  # a ValueError, but one that names no file
        raise InputError(f"{what}: not valid text ({exc})") from exc
    except (ModuleNotFoundError, MemoryError, ValueError, TypeError, KeyError):
        raise
    except OSError as exc:
        name = "" if exc.filename is None else f" {_short_path(exc.filename)}"
        why = exc.strerror or f"{type(exc).__name__}: {exc}"
        raise InputError(f"{what}{name}: {why}") from exc
    except Exception as exc:  # noqa: BLE001 - e.g. a reader's own error class
        raise InputError(f"{what}: {type(exc).__name__}: {exc}") from exc


def add_device_args(p: argparse.ArgumentParser) -> None:
    """Options every compute subcommand shares."""
    p.add_argument("--device", default=None, help="device selector: pocl, intel, nvidia:0, gpu, cpu, p:d")
    p.add_argument("--backend", default=None, choices=("pyopencl", "sycl"), help="kernel backend")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines on stderr (drawn only when stderr is a terminal; "
                        "results and errors still print)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def add_workers_arg(p: argparse.ArgumentParser) -> None:
    """``--n-workers`` (the API's ``n_workers``); ``--workers``, its former spelling,
    still parses (hidden)."""
    from ..validation import int_arg

    p.add_argument("--n-workers", type=int_arg, default=2, help="LocalCluster worker processes")
    p.add_argument("--workers", dest="n_workers", type=int_arg, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


def add_input_args(p: argparse.ArgumentParser) -> None:
    """``--time-column NAME`` / ``--no-time``: which CSV column is the time axis."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--time-column", default=None, metavar="NAME",
                   help="CSV column holding the time (default: the first column when it is "
                        "named like a time - time, t, year, date, datetime, index, ... - or "
                        "holds dates)")
    g.add_argument("--no-time", action="store_true",
                   help="no time column: every CSV column is a series")


def time_column(args: argparse.Namespace) -> str | bool | None:
    """The ``time_column`` argument of :func:`pyedmcl.io.read_table` for these options."""
    if getattr(args, "no_time", False):
        return False
    return getattr(args, "time_column", None)


def check_output(path: str, allowed: tuple[str, ...], what: str = "--out") -> str:
    """``path`` if its extension is one this command writes, else a ValueError saying which.

    Formats follow the file name; nothing is written in a format the name does not say.
    """
    from pathlib import Path

    ext = Path(path.rstrip("/")).suffix.lower()
    if ext not in allowed:
        raise ValueError(f"{what} {path!r}: this command writes {' or '.join(allowed)} "
                         f"(the format follows the extension), not {ext or 'a name without one'!r}")
    return path


def check_new_file(path: str, overwrite: bool, inputs: tuple[Any, ...] = (),
                   what: str = "--out") -> str:
    """``path`` if writing a file there loses nothing: never one of ``inputs`` (the data
    being read), and an existing file only with ``overwrite`` (pyedmcl cannot tell a
    file it wrote from the user's own). A ValueError says why otherwise."""
    from pathlib import Path

    with reading_input(what):  # e.g. a path too long for the file system: exit 2
        _check_new_file(Path(path), overwrite, inputs, what)
        check_writable(path, what)
    return path


def _check_new_file(out: Any, overwrite: bool, inputs: tuple[Any, ...], what: str) -> None:
    path = str(out)
    for src in inputs:
        if src in (None, "-"):
            continue
        try:
            same = out.exists() and out.samefile(src)
        except OSError:
            same = False
        if same:
            raise ValueError(f"{what} {path!r} is the input file {str(src)!r}; write the "
                             "result to another path")
    if out.exists() and not out.is_dir() and not overwrite:
        raise ValueError(f"{what} {path!r} exists; pass --overwrite to replace it, or choose "
                         "another path")


def check_writable(path: str, what: str = "--out") -> None:
    """A ValueError, before any work, where ``path`` cannot be written: its nearest
    existing folder is a file or not writable (missing folders are created on writing)."""
    import os
    from pathlib import Path

    with reading_input(what):
        full = Path(path).absolute()
        folder = full.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise ValueError(f"{what} {path!r}: {str(folder)!r} is a file, not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"{what} {path!r}: no permission to write in {str(folder)!r}")
        _check_name_lengths(full, folder)


def _check_name_lengths(full: Any, folder: Any) -> None:
    """``OSError(ENAMETOOLONG)`` where a name still to be created under the existing
    ``folder`` (or the whole path) is longer than its file system allows: found now, not
    after the work when the file is written."""
    import errno

    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
        path_max = os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):  # a platform without pathconf: the write will tell
        return
    too_long = len(os.fsencode(full)) >= path_max or any(
        len(os.fsencode(part)) > name_max for part in full.relative_to(folder).parts)
    if too_long:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), str(full))


def show_progress(args: argparse.Namespace) -> bool:
    """Progress lines on stderr: when it is a terminal and ``-q`` is not given (a log file
    or a pipe gets results and errors only)."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def print_json(obj: Any) -> None:
    """``obj`` as valid JSON on stdout: NaN/inf -> null, NumPy values -> numbers/lists."""
    from .._outputs import dumps_json

    sys.stdout.write(dumps_json(obj, indent=1) + "\n")
