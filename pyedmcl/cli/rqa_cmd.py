"""``pyedmcl rqa | crqa | jrqa | rn | rp``: RQA measures (``--json``) and recurrence-plot images."""

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
    from ..io import read_table
    from .args import reading_input, time_column

    with reading_input("INPUT"):
        t = read_table(path, time_column=time_column(args) if args is not None else None)
    if len(t.names) == 1:
        return t.data[:, 0].copy()
    return t.column(0 if column is None else column).copy()


def _common(p: argparse.ArgumentParser, lists: bool = False) -> None:
    """The options of every RQA command; ``lists``: E, tau, radius and rate take comma
    lists (``rqa``: a grid of every combination, :mod:`pyedmcl.cli.rqa_many`)."""
    from .args import add_device_args, add_input_args
    from .rqa_many import float_list, int_list

    ints, floats = (int_list, float_list) if lists else (int_arg, float)
    more = " (comma list: a grid)" if lists else ""
    p.add_argument("-E", "--E", dest="E", type=ints, default=1,
                   help="embedding dimension" + more)
    p.add_argument("--tau", type=ints, default=1, help="embedding delay" + more)
    g = p.add_mutually_exclusive_group()
    g.add_argument("-r", "--radius", type=floats, help="fixed radius" + more)
    g.add_argument("--rr", "--recurrence-rate", dest="rr", type=floats,
                   help="fixed recurrence rate" + more)
    p.add_argument("--metric", default="euclidean", help="euclidean | maximum | manhattan")
    p.add_argument("--threshold-rule", default="distance", choices=("distance", "squared"),
                   help="ties at the radius: sqrt(d2) < r (pyunicorn) or d2 < r*r (PyRQA)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("-c", "--column", default=None, help="CSV column (name or index)")
    add_input_args(p)
    add_device_args(p)


def _line_opts(p: argparse.ArgumentParser, theiler: int, lists: bool = False) -> None:
    from .rqa_many import int_list

    ints = int_list if lists else int_arg
    more = " (comma list: a grid)" if lists else ""
    p.add_argument("--theiler", type=ints, default=theiler, help="Theiler window w" + more)
    p.add_argument("--l-min", type=ints, default=2, help="shortest diagonal line" + more)
    p.add_argument("--v-min", type=ints, default=2, help="shortest vertical line" + more)
    p.add_argument("--w-min", type=ints, default=2, help="shortest white line" + more)
    p.add_argument("--edge", type=int_arg, default=None, help="sub-matrix edge length")
    blocks = "; --all-columns: blocks of series" if lists else ""
    p.add_argument("--devices", default=None,
                   help="comma-separated devices used at once, e.g. nvidia:0,nvidia:1 (the "
                        f"matrix's row ranges or lane bands balanced over them{blocks})")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address to join, or 'local' to start a LocalCluster "
                        f"(row ranges or lane bands as tasks{blocks}; worker i uses device i "
                        "of --devices)")
    from .args import add_workers_arg

    add_workers_arg(p)
    p.add_argument("--histograms", action="store_true", help="include histograms in --json")


def _window_opts(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument("--window", type=int_arg, default=None,
                   help=f"windowed analysis: embedded points per window{note} (one row per "
                        "window)")
    p.add_argument("--step", type=int_arg, default=None,
                   help="windowed analysis: points between window starts (default: --window)")


def _two_series(sub: argparse._SubParsersAction, name: str, kind: str,
                theiler: int) -> argparse.ArgumentParser:
    """The parser of a two-series command (``crqa``, ``jrqa``): both inputs, the common
    and line options (``theiler`` its default) and ``--column-y``."""
    p = sub.add_parser(name, help=f"{kind} recurrence quantification analysis of two series")
    p.add_argument("input_x")
    p.add_argument("input_y")
    _common(p)
    _line_opts(p, theiler)
    p.add_argument("--column-y", default=None, help="column of input_y (default: --column)")
    return p


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rqa", help="recurrence quantification analysis of one series (or "
                       "of every column, or over a grid of parameters)")
    p.add_argument("input", help=".npy or CSV file")
    _common(p, lists=True)
    _line_opts(p, 1, lists=True)
    from .rqa_many import add_many_args

    add_many_args(p)
    p.add_argument("--theiler-scope", default="lines", choices=("lines", "matrix"))
    _window_opts(p)
    p.add_argument("--knn", type=int_arg, default=None,
                   help="FAN: each column's KNN nearest points (itself included), no radius")
    p.add_argument("--threshold-std", type=float, default=None,
                   help="radius in units of the series' standard deviation")
    p.add_argument("--threshold-max", type=float, default=None,
                   help="radius as a fraction of the largest distance")
    p.set_defaults(func=run_rqa)

    p = sub.add_parser("rn", help="recurrence network measures of one series")
    p.add_argument("input", help=".npy or CSV file")
    _common(p)
    p.add_argument("--no-paths", action="store_true",
                   help="skip the average path length (device: O(N^3 / 32) word operations)")
    p.add_argument("--method", default="device", choices=("device", "host"),
                   help="device: bit-packed adjacency and counts on the OpenCL device "
                        "(default); host: the scipy reference")
    p.set_defaults(func=run_rn)

    p = _two_series(sub, "crqa", "cross", theiler=0)
    _window_opts(p, " of x and y (one length)")
    p.set_defaults(func=run_crqa)

    p = _two_series(sub, "jrqa", "joint", theiler=1)
    p.add_argument("--theiler-scope", default="lines", choices=("lines", "matrix"))
    p.add_argument("--radius-y", type=float, default=None,
                   help="radius of y (default: --radius, the radius of x)")
    p.add_argument("--rr-y", type=float, default=None,
                   help="recurrence rate of y (default: --rr, the rate of x)")
    _window_opts(p)
    p.set_defaults(func=run_jrqa)

    p = sub.add_parser("rp", help="recurrence plot image (PNG), any N")
    p.add_argument("input")
    p.add_argument("output", help="image path (.png)")
    p.add_argument("--cross", default=None, help="second series for a cross recurrence plot")
    p.add_argument("--size", type=int_arg, default=1024, help="image edge (block density above)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing OUTPUT file (never an input)")
    _common(p)
    p.add_argument("--column-y", default=None, help="column of --cross (default: --column)")
    p.set_defaults(func=run_rp)


def _radius_text(res: Any) -> str:
    """The radius line's value: one number; a pair (joint RQA: ``x y``); FAN: one radius
    per column, summarised by its range."""
    r = np.asarray(res.radius, dtype=float)
    if r.ndim == 0:
        return f"{float(r):.10g}"
    if res.settings.get("neighbourhood") == "fan":
        return f"per column (FAN), {r.min():.10g} .. {r.max():.10g}"
    return " ".join(f"{v:.10g}" for v in r.ravel())


def _report(res: Any, args: argparse.Namespace) -> int:
    from .args import print_json

    if args.json:
        print_json(res.as_dict(histograms=args.histograms))
        return 0
    for k, v in res.measures.items():
        print(f"{k:<8} {v:.10g}")
    print(f"radius   {_radius_text(res)}")
    return 0


def run_rqa(args: argparse.Namespace) -> int:
    from ..rqa.core import _band_windows, rqa
    from .rqa_many import is_many, run_many

    if is_many(args):
        return run_many(args, _load)
    x = _load(args.input, args.column, args)
    kw = dict(E=args.E, tau=args.tau, radius=args.radius, recurrence_rate=args.rr,
              metric=args.metric, theiler=args.theiler, l_min=args.l_min, v_min=args.v_min,
              w_min=args.w_min, dtype=args.dtype, theiler_scope=args.theiler_scope,
              device=args.device, devices=args.devices, backend=args.backend, edge=args.edge,
              threshold_rule=args.threshold_rule,
              **({"scheduler": args.scheduler, "n_workers": args.n_workers}
                 if args.scheduler is not None else {}), threshold_std=args.threshold_std,
              threshold_max=args.threshold_max,
              **({"neighbourhood": "fan", "knn": args.knn} if args.knn is not None else {}))
    if args.window is None and args.step is None:
        return _report(rqa(x, **kw), args)
    from ..rqa.windowed import windowed_rqa
    from .args import show_progress

    if args.window is None:
        raise ValueError("--step needs --window (embedded points per window)")
    if args.scheduler is not None:
        raise ValueError("--scheduler runs one recurrence matrix on a Dask cluster; it is not "
                         "supported with --window/--step")
    df = windowed_rqa(rqa, x, band=_band_windows, window=args.window, step=args.step,
                      progress=show_progress(args), **kw)
    return _report_windows(df, args)


def _report_windows(df: Any, args: argparse.Namespace) -> int:
    """A windowed analysis's rows: CSV on stdout, or JSON records (``--json``)."""
    from .args import print_json

    if args.json:
        print_json(df.reset_index().to_dict(orient="records"))
    else:
        print(df.to_csv(), end="")
    return 0


def _windowed(args: argparse.Namespace) -> dict[str, Any]:
    """``window``/``step`` for crqa and jrqa (empty: one analysis of the whole series)."""
    if args.window is None and args.step is None:
        return {}
    if args.window is None:
        raise ValueError("--step needs --window (embedded points per window)")
    if args.scheduler is not None:
        raise ValueError("--scheduler runs one recurrence matrix on a Dask cluster; it is not "
                         "supported with --window/--step")
    return {"window": args.window, "step": args.step}


def run_crqa(args: argparse.Namespace) -> int:
    from ..rqa.core import cross_rqa

    x = _load(args.input_x, args.column, args)
    y = _load(args.input_y, args.column_y or args.column, args)
    res = cross_rqa(x, y, E=args.E, tau=args.tau, radius=args.radius, recurrence_rate=args.rr,
                    metric=args.metric, theiler=args.theiler, l_min=args.l_min,
                    v_min=args.v_min, w_min=args.w_min, dtype=args.dtype, device=args.device,
                    devices=args.devices, backend=args.backend, edge=args.edge,
                    threshold_rule=args.threshold_rule, scheduler=args.scheduler,
                    n_workers=args.n_workers, **_windowed(args))
    return _report_windows(res, args) if args.window is not None else _report(res, args)


def run_jrqa(args: argparse.Namespace) -> int:
    from ..rqa.core import joint_rqa

    x = _load(args.input_x, args.column, args)
    y = _load(args.input_y, args.column_y or args.column, args)
    radius = None if args.radius is None else (
        args.radius, args.radius if args.radius_y is None else args.radius_y)
    rate = None if args.rr is None else (args.rr, args.rr if args.rr_y is None else args.rr_y)
    if (args.radius_y is not None and radius is None) or (args.rr_y is not None and rate is None):
        raise ValueError("--radius-y needs --radius, --rr-y needs --rr (the values for x)")
    from ..rqa.core import check_radius, check_rate

    for flag, value, check in (("--radius", args.radius, check_radius),
                               ("--radius-y", args.radius_y, check_radius),
                               ("--rr", args.rr, check_rate), ("--rr-y", args.rr_y, check_rate)):
        if value is not None:  # the error names the flag, not joint_rqa's parameter
            check(value, flag)
    res = joint_rqa(x, y, E=args.E, tau=args.tau, radius=radius, recurrence_rate=rate,
                    metric=args.metric, theiler=args.theiler, l_min=args.l_min,
                    v_min=args.v_min, w_min=args.w_min, dtype=args.dtype,
                    theiler_scope=args.theiler_scope, device=args.device,
                    devices=args.devices, backend=args.backend, edge=args.edge,
                    threshold_rule=args.threshold_rule, scheduler=args.scheduler,
                    n_workers=args.n_workers, **_windowed(args))
    return _report_windows(res, args) if args.window is not None else _report(res, args)


def run_rp(args: argparse.Namespace) -> int:
    from ..rqa.plot import recurrence_plot
    from .args import check_new_file, check_output, print_json

    check_output(args.output, (".png",), "OUTPUT")
    check_new_file(args.output, args.overwrite, (args.input, args.cross), "OUTPUT")
    x = _load(args.input, args.column, args)
    y = _load(args.cross, args.column_y or args.column, args) if args.cross else None
    img = recurrence_plot(x, y, E=args.E, tau=args.tau, radius=args.radius,
                          recurrence_rate=args.rr, metric=args.metric, size=args.size,
                          path=args.output, dtype=args.dtype, device=args.device,
                          backend=args.backend, threshold_rule=args.threshold_rule)
    info = {"path": args.output, "shape": list(img.shape), "mean": float(img.mean())}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {args.output} ({img.shape[1]}x{img.shape[0]})")
    return 0


def run_rn(args: argparse.Namespace) -> int:
    from ..rqa.network import recurrence_network
    from .args import print_json

    x = _load(args.input, args.column, args)
    net = recurrence_network(x, E=args.E, tau=args.tau, radius=args.radius,
                             recurrence_rate=args.rr, metric=args.metric, dtype=args.dtype,
                             device=args.device, backend=args.backend,
                             threshold_rule=args.threshold_rule,
                             path_lengths=False if args.no_paths else None,
                             method=args.method)
    out = net.as_dict()
    if args.json:
        print_json(out)
    else:
        for k, v in out.items():
            if k != "settings":
                print(f"{k:<20} {v:.10g}" if isinstance(v, float) else f"{k:<20} {v}")
    return 0
