"""``pyedmcl`` entry point: collects subcommands and maps errors to exit codes.

Exit codes: 0 ok, 2 bad usage or bad input (a clear message on stderr; a constant
series, whose skill or recurrence means nothing, is bad input here), 1 a
runtime failure (a build or device error, a device that cannot build kernels or no
working device at all, or any unexpected exception). What decides between 2 and 1 is
*where* an error arises, not only its type: every error while a command checks its
arguments and loads its inputs (:func:`pyedmcl.cli.args.reading_input`: a path too
long, a folder given as a file, no permission to read, text that is not valid UTF-8,
...) is the input's (2); an ``OSError`` during the computation or while writing results is a
runtime failure (1). Each command module (``pyedmcl/cli/*_cmd.py``) exposes
``add_commands(subparsers)``; modules of families not installed/built yet are skipped.
The command modules import their shared options and checks from :mod:`.args`, never
this module.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import traceback
import warnings
from importlib import import_module
from typing import Any

from .args import UsageError, show_progress

COMMAND_MODULES = (
    "pyedmcl.cli.devices_cmd",
    "pyedmcl.cli.tune_cmd",
    "pyedmcl.cli.bench_cmd",
    "pyedmcl.cli.sample_cmd",
    "pyedmcl.cli.edm_cmd",
    "pyedmcl.cli.rqa_cmd",
    "pyedmcl.cli.xmap_cmd",
    "pyedmcl.cli.network_cmd",
    "pyedmcl.cli.report_cmd",
)


#: commands that warn of a constant series and go on (an all-to-all map of many series);
#: every other command refuses one (exit 2): its one answer would mean nothing
CONSTANT_WARNED = frozenset({"xmap"})

#: commands that draw their own counted progress bar (rate and ETA)
OWN_PROGRESS = frozenset({"xmap", "demo", "tune", "bench", "devices", "sample"})


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
