"""``pyedmcl rqa --all-columns`` (every column of the file, :func:`pyedmcl.rqa_batch`) and
comma lists ``--radius 0.1,0.2 --E 2,3,4`` (every combination, :func:`pyedmcl.rqa_grid`):
one row per series or combination, as CSV on stdout (``--json``: JSON records) or into
``--out FILE`` (.csv or .json, written atomically at the end). ``--all-columns --out
OUT.zarr`` streams the rows into a Zarr store in blocks of series (``--block-series``),
over ``--devices`` or a Dask ``--scheduler`` as ``xmap`` does; rerunning the same command
resumes an interrupted job (Ctrl-C, a killed process): finished blocks are kept."""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from ..validation import ConstantSeriesWarning, int_arg

#: the rqa options that take comma lists (attribute, flag)
SWEPT = (("E", "--E"), ("tau", "--tau"), ("radius", "--radius"), ("rr", "--rr"),
         ("theiler", "--theiler"), ("l_min", "--l-min"), ("v_min", "--v-min"),
         ("w_min", "--w-min"))


def _items(text: str, one: Any) -> Any:
    parts = [t.strip() for t in text.split(",")]
    if any(not t for t in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty item in a comma list")
    vals = [one(t) for t in parts]
    return vals[0] if len(vals) == 1 else vals


def int_list(text: str) -> Any:
    """An integer, or a comma list of integers (a grid)."""
    return _items(text, int_arg)


def float_list(text: str) -> Any:
    """A number, or a comma list of numbers (a grid)."""
    def one(t: str) -> float:
        try:
            return float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{t!r} is not a number") from None
    return _items(text, one)


def add_many_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all-columns", action="store_true",
                   help="RQA of every column of INPUT (one row per column; NaN padding at "
                        "the end: series of different lengths)")
    p.add_argument("--out", default=None,
                   help="with --all-columns or a grid: write the rows to this .csv or .json "
                        "file (default: CSV on stdout, --json: JSON); with --all-columns also "
                        "a .zarr store, written block by block: rerunning the same command "
                        "resumes it")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file, or a .zarr store of other "
                        "parameters (only a store pyedmcl wrote)")
    p.add_argument("--block-series", type=int_arg, default=None,
                   help="with --all-columns: series per block (a task of --devices or "
                        "--scheduler, a chunk of a .zarr store; default: up to 1024)")
    p.add_argument("--method", default=None, choices=("batched", "series", "packed"),
                   help="with --all-columns: every series in two launches (default), one D&R "
                        "run per series, or series of one length packed end to end in one "
                        "band pass (one fixed radius); the same rows")
    p.add_argument("--max-combinations", type=int_arg, default=1000,
                   help="largest grid run (default 1000)")


def _lists(args: argparse.Namespace) -> list[str]:
    return [flag for attr, flag in SWEPT if isinstance(getattr(args, attr, None), list)]


def is_many(args: argparse.Namespace) -> bool:
    """Whether ``rqa`` runs a batch (``--all-columns``) or a grid (a comma list); for one
    series, the options of those are refused (not silently ignored)."""
    many = bool(args.all_columns or _lists(args))
    if not many:
        for flag, given, what in (
                ("--out", args.out is not None, "--all-columns or a grid (comma lists)"),
                ("--method", args.method is not None, "--all-columns"),
                ("--overwrite", args.overwrite, "--all-columns or a grid (comma lists)"),
                ("--block-series", args.block_series is not None, "--all-columns")):
            if given:
                raise ValueError(f"{flag} is for {what}; one series prints its measures "
                                 "(--json: JSON)")
    return many


def _refuse(args: argparse.Namespace, what: str, flags: tuple[tuple[str, str], ...]) -> None:
    for attr, flag in flags:
        if getattr(args, attr, None) not in (None, False):
            raise ValueError(f"{flag} is not supported with {what}")


def run_many(args: argparse.Namespace, load: Any) -> int:
    """Run the batch or the grid and write its rows; ``load(path, column, args)`` reads
    the grid's one series (the ``rqa`` command's reader)."""
    from .args import check_new_file, check_output, check_writable, reading_input

    lists = _lists(args)
    what = "--all-columns" if args.all_columns else f"a grid ({', '.join(lists)})"
    _refuse(args, what, (("knn", "--knn"), ("threshold_std", "--threshold-std"),
                         ("threshold_max", "--threshold-max"), ("edge", "--edge")))
    zarr = args.out is not None and _is_zarr(args.out)
    if not args.all_columns:
        _refuse(args, what, (("devices", "--devices"), ("scheduler", "--scheduler"),
                             ("block_series", "--block-series")))
        if zarr:
            raise ValueError(f"--out {args.out!r}: a .zarr store is for --all-columns; a grid "
                             "writes .csv or .json")
    if zarr:
        from pathlib import Path

        with reading_input("--out"):
            if not Path(args.out).exists():  # an existing store: resumed, or refused by the core
                check_output(args.out, (".zarr",), "--out")
            check_writable(args.out, "--out")
    elif args.out is not None:
        check_output(args.out, (".csv", ".json", ".zarr"), "--out")
        check_new_file(args.out, args.overwrite, (args.input,), "--out")
    common = dict(metric=args.metric, dtype=args.dtype, theiler_scope=args.theiler_scope,
                  device=args.device, backend=args.backend,
                  threshold_rule=args.threshold_rule)
    if args.all_columns:
        if lists:
            raise ValueError(f"--all-columns takes one value per option, got comma lists for "
                             f"{', '.join(lists)}; run one grid per column instead")
        if args.column is not None:
            raise ValueError("--column picks one series; --all-columns takes every column")
        df = _batch(args, common, zarr)
        if zarr:
            return _summary(df, args)
        df = df.reset_index()
    else:
        _refuse(args, what, (("window", "--window"), ("step", "--step")))
        if args.method is not None:
            raise ValueError("--method is for --all-columns")
        from ..rqa.grid import rqa_grid

        x = load(args.input, args.column, args)
        try:
            df = rqa_grid(x, E=args.E, tau=args.tau, radius=args.radius,
                          recurrence_rate=args.rr, theiler=args.theiler, l_min=args.l_min,
                          v_min=args.v_min, w_min=args.w_min,
                          max_combinations=args.max_combinations, **common)
        except ValueError as exc:  # named by its flag here
            raise ValueError(str(exc).replace("max_combinations=", "--max-combinations ")
                             .replace("raise max_combinations", "raise --max-combinations")
                             ) from None
    _write(df, args)
    return 0


def _is_zarr(path: str) -> bool:
    from pathlib import Path

    return Path(path.rstrip("/")).suffix.lower() == ".zarr"


def _batch(args: argparse.Namespace, common: dict[str, Any], zarr: bool) -> Any:
    """The batch's rows (a .zarr ``--out``: streamed into the store, resumed)."""
    import pandas as pd

    from ..io import read_table
    from ..rqa.batch import rqa_batch
    from .args import reading_input, show_progress, time_column

    with reading_input("INPUT"):
        t = read_table(args.input, time_column=time_column(args))
    frame = pd.DataFrame(t.data, columns=t.names)
    blocks: dict[str, Any] = {}
    if zarr or args.devices or args.scheduler or args.block_series is not None:
        blocks = dict(out=args.out if zarr else None, block_series=args.block_series,
                      overwrite=args.overwrite, progress=show_progress(args),
                      scheduler=args.scheduler, n_workers=args.n_workers,
                      devices=args.devices or None)
    with warnings.catch_warnings():  # a constant column is noted on stderr, not fatal
        warnings.simplefilter("always", ConstantSeriesWarning)
        return rqa_batch(frame, E=args.E, tau=args.tau, radius=args.radius,
                         recurrence_rate=args.rr, theiler=args.theiler, l_min=args.l_min,
                         v_min=args.v_min, w_min=args.w_min, window=args.window,
                         step=args.step, method=args.method or "batched", **common, **blocks)


def _summary(df: Any, args: argparse.Namespace) -> int:
    """What a .zarr ``--out`` holds, on stdout (the rows stay in the store)."""
    from .args import print_json

    info = {"out": args.out, "n_series": len(df), "columns": list(df.columns),
            "read_with": f"pyedmcl.rqa_batch_open({args.out!r})"}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {args.out}: {len(df)} series x {len(df.columns)} columns; read it with "
              f"{info['read_with']}")
    return 0


def _write(df: Any, args: argparse.Namespace) -> None:
    from .._outputs import dumps_json, write_text_atomic
    from .args import print_json

    records = df.to_dict(orient="records")
    if args.out is None:
        if args.json:
            print_json(records)
        else:
            print(df.to_csv(index=False), end="")
        return
    text = (dumps_json(records, indent=1) + "\n" if args.out.lower().endswith(".json")
            else df.to_csv(index=False))
    write_text_atomic(args.out, text, what="--out")
