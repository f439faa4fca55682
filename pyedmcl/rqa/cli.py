"""``pyedmcl rqa | crqa | rp``: RQA measures (``--json``) and recurrence-plot images."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ..validation import int_arg


def _load(path: str, column: str | None, args: argparse.Namespace | None = None) -> np.ndarray:
    """A series from any supported file (column by name or 0-based index; default the first).

    ``--column`` names a CSV column; a file holding a single series ignores it, so
    ``crqa x.npy y.csv --column value`` works. A CSV's time column is not a series
    (``--time-column``/``--no-time``).
    """
    from ..cli.main import time_column
    from ..io import read_table

    t = read_table(path, time_column=time_column(args) if args is not None else None)
    if len(t.names) == 1:
        return t.data[:, 0].copy()
    return t.column(0 if column is None else column).copy()


def _common(p: argparse.ArgumentParser) -> None:
    from ..cli.main import add_device_args, add_input_args

    p.add_argument("-E", "--E", dest="E", type=int_arg, default=1, help="embedding dimension")
    p.add_argument("--tau", type=int_arg, default=1, help="embedding delay")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-r", "--radius", type=float, help="fixed radius")
    g.add_argument("--rr", "--recurrence-rate", dest="rr", type=float, help="fixed recurrence rate")
    p.add_argument("--metric", default="euclidean", help="euclidean | maximum | manhattan")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("-c", "--column", default=None, help="CSV column (name or index)")
    add_input_args(p)
    add_device_args(p)


def _line_opts(p: argparse.ArgumentParser, theiler: int) -> None:
    p.add_argument("--theiler", type=int_arg, default=theiler, help="Theiler window w")
    p.add_argument("--l-min", type=int_arg, default=2)
    p.add_argument("--v-min", type=int_arg, default=2)
    p.add_argument("--w-min", type=int_arg, default=2)
    p.add_argument("--edge", type=int_arg, default=None, help="sub-matrix edge length")
    p.add_argument("--devices", default=None, help="comma-separated devices to split over")
    p.add_argument("--histograms", action="store_true", help="include histograms in --json")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rqa", help="recurrence quantification analysis of one series")
    p.add_argument("input", help=".npy or CSV file")
    _common(p)
    _line_opts(p, 1)
    p.add_argument("--theiler-scope", default="lines", choices=("lines", "matrix"))
    p.set_defaults(func=run_rqa)

    p = sub.add_parser("crqa", help="cross recurrence quantification analysis of two series")
    p.add_argument("input_x")
    p.add_argument("input_y")
    _common(p)
    _line_opts(p, 0)
    p.add_argument("--column-y", default=None, help="column of input_y (default: --column)")
    p.set_defaults(func=run_crqa)

    p = sub.add_parser("rp", help="recurrence plot image (PNG), any N")
    p.add_argument("input")
    p.add_argument("output", help="image path (.png)")
    p.add_argument("--cross", default=None, help="second series for a cross recurrence plot")
    p.add_argument("--size", type=int_arg, default=1024, help="image edge (block density above)")
    _common(p)
    p.add_argument("--column-y", default=None, help="column of --cross (default: --column)")
    p.set_defaults(func=run_rp)


def _report(res: Any, args: argparse.Namespace) -> int:
    from ..cli.main import print_json

    if args.json:
        print_json(res.as_dict(histograms=args.histograms))
        return 0
    for k, v in res.measures.items():
        print(f"{k:<8} {v:.10g}")
    print(f"radius   {res.radius}")
    return 0


def run_rqa(args: argparse.Namespace) -> int:
    from .core import rqa

    x = _load(args.input, args.column, args)
    res = rqa(x, E=args.E, tau=args.tau, radius=args.radius, recurrence_rate=args.rr,
              metric=args.metric, theiler=args.theiler, l_min=args.l_min, v_min=args.v_min,
              w_min=args.w_min, dtype=args.dtype, theiler_scope=args.theiler_scope,
              device=args.device, devices=args.devices, backend=args.backend, edge=args.edge)
    return _report(res, args)


def run_crqa(args: argparse.Namespace) -> int:
    from .core import cross_rqa

    x = _load(args.input_x, args.column, args)
    y = _load(args.input_y, args.column_y or args.column, args)
    res = cross_rqa(x, y, E=args.E, tau=args.tau, radius=args.radius, recurrence_rate=args.rr,
                    metric=args.metric, theiler=args.theiler, l_min=args.l_min,
                    v_min=args.v_min, w_min=args.w_min, dtype=args.dtype, device=args.device,
                    devices=args.devices, backend=args.backend, edge=args.edge)
    return _report(res, args)


def run_rp(args: argparse.Namespace) -> int:
    from ..cli.main import check_output, print_json
    from .plot import recurrence_plot

    check_output(args.output, (".png",), "OUTPUT")
    x = _load(args.input, args.column, args)
    y = _load(args.cross, args.column_y or args.column, args) if args.cross else None
    img = recurrence_plot(x, y, E=args.E, tau=args.tau, radius=args.radius,
                          recurrence_rate=args.rr, metric=args.metric, size=args.size,
                          path=args.output, dtype=args.dtype, device=args.device,
                          backend=args.backend)
    info = {"path": args.output, "shape": list(img.shape), "mean": float(img.mean())}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {args.output} ({img.shape[1]}x{img.shape[0]})")
    return 0
