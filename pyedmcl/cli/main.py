"""``pyedmcl`` entry point: collects subcommands and maps errors to exit codes.

Exit codes: 0 ok, 2 bad usage or bad input (a clear message on stderr; a constant
series, whose skill or recurrence means nothing, is bad input here), 1 a
runtime failure (a build or device error, a device that cannot build kernels or no
working device at all, or any unexpected exception). What decides between 2 and 1 is
*where* an error arises, not only its type: every error while a command checks its
arguments and loads its inputs (:func:`reading_input`: a path too long, a folder given
as a file, no permission to read, text that is not valid UTF-8, ...) is the input's
(2); an ``OSError`` during the computation or while writing results is a runtime
failure (1). Each command module exposes ``add_commands(subparsers)``;
modules of families not installed/built yet are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from importlib import import_module
from typing import Any

COMMAND_MODULES = (
    "pyedmcl.cli.devices_cmd",
    "pyedmcl.cli.tune_cmd",
    "pyedmcl.cli.bench_cmd",
    "pyedmcl.cli.sample_cmd",
    "pyedmcl.edm.cli",
    "pyedmcl.rqa.cli",
    "pyedmcl.xmap.cli",
    "pyedmcl.network.cli",
    "pyedmcl.report.cli",
)


#: commands that warn of a constant series and go on (an all-to-all map of many series);
#: every other command refuses one (exit 2): its one answer would mean nothing
CONSTANT_WARNED = frozenset({"xmap"})

#: commands that draw their own counted progress bar (rate and ETA)
OWN_PROGRESS = frozenset({"xmap", "demo", "tune", "bench", "devices", "sample"})


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


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (exit 2): the usage block is what ``--help`` is for."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = _Parser(prog="pyedmcl", description="EDM and RQA on any OpenCL device.")
    p.add_argument("--version", action="version", version=f"pyedmcl {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in COMMAND_MODULES:
        try:
            m = import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                continue
            raise
        m.add_commands(sub)
    return p


def add_device_args(p: argparse.ArgumentParser) -> None:
    """Options every compute subcommand shares."""
    p.add_argument("--device", default=None, help="device selector: pocl, intel, nvidia:0, gpu, cpu, p:d")
    p.add_argument("--backend", default=None, choices=("pyopencl", "sycl"), help="kernel backend")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines on stderr (drawn only when stderr is a terminal; "
                        "results and errors still print)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    quiet_before = os.environ.get("PYEDMCL_QUIET")
    if getattr(args, "quiet", False):
        os.environ["PYEDMCL_QUIET"] = "1"  # no "compiling kernels ..." line either
    try:
        return _run(args)
    finally:  # an in-process caller's environment is left as it was
        if quiet_before is None:
            os.environ.pop("PYEDMCL_QUIET", None)
        else:
            os.environ["PYEDMCL_QUIET"] = quiet_before


def _one_line_warning(command: str, message: Any, category: type, filename: str,
                      lineno: int, file: Any = None, line: str | None = None) -> None:
    """A warning as one line on stderr, as the errors are (Python's default adds the
    source file and the line of code: noise on a terminal)."""
    kind = "" if category is UserWarning else f" ({category.__name__})"
    print(f"pyedmcl {command}: warning{kind}: {message}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    """The command, its errors mapped to exit codes (2 bad input, 1 runtime failure)."""
    from clkernels import BuildError, DeviceSelectionError, TemplateParameterError
    from clkernels.devices import DeviceUnusableError

    from ..progress import activity
    from ..validation import ConstantSeriesWarning, SelfMapWarning
    from .tune_offer import NO_OFFER, offer_quick_tune

    # one elapsed-time line on stderr for any job past 1 s; commands with counted steps
    # (xmap blocks, demo sections, tuning candidates) draw their own bar instead
    own_bar = args.command in OWN_PROGRESS or not hasattr(args, "quiet")
    if hasattr(args, "quiet") and show_progress(args) and args.command not in NO_OFFER:
        offer_quick_tune(getattr(args, "device", None), getattr(args, "backend", None))
    try:
        with warnings.catch_warnings(), \
                activity(f"pyedmcl {args.command}", not own_bar and show_progress(args)):
            warnings.showwarning = functools.partial(_one_line_warning, args.command)
            if args.command not in CONSTANT_WARNED:
                warnings.simplefilter("error", ConstantSeriesWarning)
                warnings.simplefilter("error", SelfMapWarning)
            rc = args.func(args)
        return int(rc or 0)
    except KeyboardInterrupt:
        print("pyedmcl: interrupted", file=sys.stderr)
        return 130
    except DeviceUnusableError as exc:  # the machine's runtimes, not the command line
        print(f"pyedmcl {args.command}: failed: {exc}", file=sys.stderr)
        return 1
    except SelfMapWarning as exc:  # the same: a trivial rho near 1
        print(f"pyedmcl {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ConstantSeriesWarning as exc:  # a number printed here would read as an answer
        chosen = ", ".join(f"--{k.replace('_', '-')} {getattr(args, k)}"
                           for k in ("column", "target", "column_y")
                           if isinstance(getattr(args, k, None), str))
        given = f" (read as {chosen})" if chosen else ""
        print(f"pyedmcl {args.command}: error: {exc}{given}; choose a series that varies",
              file=sys.stderr)
        return 2
    except (DeviceSelectionError, TemplateParameterError, UsageError, ValueError, TypeError,
            FileNotFoundError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"pyedmcl {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional extra not installed: say which
        print(f"pyedmcl {args.command}: failed: {exc}", file=sys.stderr)
        return 1
    except (BuildError, RuntimeError, OSError, MemoryError) as exc:
        print(f"pyedmcl {args.command}: failed: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a device runtime error (pyopencl.Error is no
        # RuntimeError subclass, nor are dpctl's) or a bug: a runtime failure, exit 1
        print(f"pyedmcl {args.command}: failed: {type(exc).__module__}.{type(exc).__name__}: {exc}",
              file=sys.stderr)
        if os.environ.get("PYEDMCL_DEBUG"):
            traceback.print_exc()
        else:
            print("(set PYEDMCL_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
