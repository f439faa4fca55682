"""``pyedmcl bench``: run every benchmark against its peers on one device (bench/run_all.py)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def bench_dir() -> Path:
    """bench/ of a checkout, or the copy shipped in the wheel (``pyedmcl/_bench``)."""
    here = Path(__file__).resolve().parents[1]
    for d in (here / "_bench", here.parent / "bench"):
        if (d / "run_all.py").is_file():
            return d
    raise FileNotFoundError("bench/run_all.py not found (neither installed nor in a checkout)")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run every benchmark against its peers; markdown + plots")
    p.add_argument("--device", default=None)
    p.add_argument("--out", default=None, help="results folder")
    p.add_argument("--only", nargs="+", default=None, help="edm smap xmap rqa knn_backends")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cmd = [sys.executable, str(bench_dir() / "run_all.py"), "--timeout", str(args.timeout)]
    if args.device:
        cmd += ["--device", args.device]
    if args.out:
        cmd += ["--out", args.out]
    if args.only:
        cmd += ["--only", *args.only]
    rc = subprocess.call(cmd)
    # the CLI's exit codes: 0 ok, 2 bad usage (run_all's own), anything else a runtime failure
    return rc if rc in (0, 2) else 1
