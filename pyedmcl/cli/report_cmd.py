"""``pyedmcl demo``: the README's main job."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    from .args import add_device_args

    p = sub.add_parser("demo", help="run every analysis on bundled sample data and write a report")
    p.add_argument("-o", "--out", default="pyedmcl-demo", help="report folder (default: pyedmcl-demo)")
    p.add_argument("--dtype", default=None, choices=("float32", "float64"),
                   help="precision of every analysis (default float32)")
    add_device_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._outputs import DEMO_REPORT, check_replaceable
    from ..report.demo import run_demo
    from .args import check_writable, print_json, reading_input, show_progress

    with reading_input("-o/--out"):  # before any work
        check_replaceable(args.out, DEMO_REPORT)
        check_writable(args.out, "-o/--out")
    res = run_demo(args.out, device=args.device, backend=args.backend, quiet=args.quiet or args.json,
                   dtype=args.dtype, progress=show_progress(args))
    if args.json:
        print_json(res)
    return 0
