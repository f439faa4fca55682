"""``pyedmcl simplex|smap|ccm|edim``: EDM from .csv (named columns) or .npy files.

Series are chosen with ``--column``/``--target`` (a CSV column name, or a column
index of a 2-D .npy; a 1-D .npy is the series itself). A CSV's time column (guessed,
or ``--time-column``/``--no-time``) is not a series; ``-o/--out`` CSV files carry its
values. ``tau`` follows pyedmcl's sign (> 0: lags into the past). ``--json`` prints
the result as JSON.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ..validation import int_arg


def load_series(path: str, name: str | None) -> tuple[np.ndarray, str]:
    """One series from any supported file (by column name or index; default: the first series)."""
    from ..io import read_series

    return read_series(path, name)


def _common(p: argparse.ArgumentParser, E: bool = True) -> None:
    from .args import add_device_args, add_input_args
    p.add_argument("path", help="input .csv (named columns), .npy, .h5, .zarr, or - (CSV on stdin)")
    p.add_argument("-c", "--column", default=None, help="library series (CSV name or .npy index)")
    p.add_argument("-t", "--target", default=None, help="target series (default: --column)")
    if E:
        p.add_argument("-E", "--E", dest="E", type=int_arg, required=True,
                       help="embedding dimension")
    p.add_argument("--tau", type=int_arg, default=1, help="lag (> 0: into the past)")
    p.add_argument("--exclusion-radius", type=int_arg, default=0,
                   help="neighbours within this many rows of the prediction are excluded")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("-o", "--out", default=None, help="write the result table as CSV (.csv)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file (never the input)")
    add_input_args(p)
    add_device_args(p)


def add_commands(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (("simplex", "Simplex projection (pyEDM semantics)"),
                           ("smap", "S-map (pyEDM semantics)")):
        p = sub.add_parser(name, help=helptext)
        _common(p)
        p.add_argument("--Tp", type=int_arg, default=1, help="prediction interval (rows ahead)")
        p.add_argument("--knn", type=int_arg, default=None)
        _rows_args(p)
        p.add_argument("--predictions", action="store_true",
                       help="include predictions in --json output")
        if name == "smap":
            p.add_argument("--theta", type=float, required=True,
                           help="localisation (0: a global linear map; larger: more local)")
        p.set_defaults(func=run_predict, kind=name)
    p = sub.add_parser("ccm", help="convergent cross mapping, both directions")
    _common(p)
    p.add_argument("--Tp", type=int_arg, default=0, help="cross-map prediction interval")
    p.add_argument("--knn", type=int_arg, default=None)
    p.add_argument("--lib-sizes", required=True, nargs="+", metavar="SIZE",
                   help="pyEDM's libSizes, quoted or not: 10 100 10 (start stop step, the "
                        "third below the second) or 20 50 80 (the sizes)")
    p.add_argument("--sample", type=int_arg, default=100)
    p.add_argument("--seed", type=int_arg, default=None)
    p.add_argument("--replacement", action="store_true")
    p.add_argument("--surrogates", type=int_arg, default=0,
                   help="surrogate drivers per direction: p-values, null bands and the "
                        "convergence test (0: none)")
    p.add_argument("--surrogate-method", default="ebisuzaki",
                   choices=("ebisuzaki", "random_shuffle", "seasonal", "twin"))
    p.set_defaults(func=run_ccm)
    p = sub.add_parser("edim", help="Simplex skill for E = 1..max-E (embedding dimension)")
    _common(p, E=False)
    p.add_argument("--max-E", type=int_arg, default=10)
    p.add_argument("--Tp", type=int_arg, default=1)
    p.add_argument("--knn", type=int_arg, default=None, help="neighbours (default: E + 1 per E)")
    _rows_args(p)
    p.set_defaults(func=run_edim)


def _xy(args) -> tuple[np.ndarray, np.ndarray, str, str]:
    x, y, xn, yn, _ = _xyt(args)
    return x, y, xn, yn


def _xyt(args) -> tuple[np.ndarray, np.ndarray, str, str, Any]:
    """Library and target series, their names and the table (for its time values)."""
    from ..io import read_table
    from .args import check_new_file, check_output, reading_input, time_column

    if getattr(args, "out", None):
        check_output(args.out, (".csv",))  # before any work
        check_new_file(args.out, args.overwrite, (args.path,))
    with reading_input("INPUT"):  # once: stdin cannot be re-read
        t = read_table(args.path, time_column=time_column(args))
    i = 0 if args.column is None else t.index(args.column)
    x, xn = t.data[:, i].copy(), t.names[i]
    if args.target is None:
        return x, x, xn, xn, t
    j = t.index(args.target)
    return x, t.data[:, j].copy(), xn, t.names[j], t


def _rows_args(p: argparse.ArgumentParser) -> None:
    """--lib / --pred: pyEDM's 1-based row pairs, quoted or not."""
    for flag in ("--lib", "--pred"):
        p.add_argument(flag, default=None, nargs="+", metavar="ROW",
                       help="1-based start stop [start stop ...] (pyEDM's format)")


def _joined(v: list[str] | None) -> str | None:
    """Values given as several arguments (or one quoted) as pyEDM's one string."""
    return None if v is None else " ".join(v)


def _write_csv(frame, path: str) -> None:
    from .._outputs import atomic_file
    with atomic_file(path, what="--out") as tmp:  # never a half-written CSV
        frame.to_csv(tmp, index=False)


def _dev(args) -> dict[str, Any]:
    return {"device": args.device, "backend": args.backend, "dtype": args.dtype}


def run_predict(args: argparse.Namespace) -> int:
    from .args import print_json
    x, y, xn, yn, table = _xyt(args)
    kw = dict(E=args.E, tau=args.tau, Tp=args.Tp, knn=args.knn,
              exclusion_radius=args.exclusion_radius, lib=_joined(args.lib),
              pred=_joined(args.pred), **_dev(args))
    if args.kind == "smap":
        from ..edm.smap import smap
        r = smap(x, y, theta=args.theta, **kw)
    else:
        from ..edm.simplex import simplex
        r = simplex(x, y, **kw)
    times = table.times_at(r.times)  # the file's time values (rows past the data extrapolated)
    if args.out:
        df = r.as_dataframe()
        df["time"] = times
        _write_csv(df.rename(columns={"time": table.time_name or "time"}), args.out)
    out = {"command": args.kind, "column": xn, "target": yn, "E": args.E, "tau": args.tau,
           "Tp": args.Tp, "rho": float(r.rho), "mae": float(r.mae), "rmse": float(r.rmse),
           "n_predictions": int(np.size(r.predicted))}
    if args.predictions:
        out.update(times=times, predicted=r.predicted, observed=r.observed)
    if args.json:
        print_json(out)
    else:
        print(f"{args.kind} {xn} -> {yn}  E={args.E} tau={args.tau} Tp={args.Tp}: "
              f"rho={r.rho:.6f} MAE={r.mae:.6g} RMSE={r.rmse:.6g} ({out['n_predictions']} predictions)")
    return 0


def run_ccm(args: argparse.Namespace) -> int:
    from ..edm.ccm import ccm
    from .args import print_json
    x, y, xn, yn = _xy(args)
    if args.target is None:
        raise ValueError("ccm needs --column and --target (two different series)")
    if xn == yn:
        raise ValueError(f"ccm: --column and --target both name {xn!r}: a series cross-maps "
                         "itself trivially (rho near 1); name two different series")
    r = ccm(x, y, E=args.E, tau=args.tau, Tp=args.Tp, knn=args.knn,
            lib_sizes=_joined(args.lib_sizes), sample=args.sample, seed=args.seed,
            exclusion_radius=args.exclusion_radius, replacement=args.replacement,
            surrogates=args.surrogates, surrogate_method=args.surrogate_method, **_dev(args))
    if args.out:
        _write_csv(r.as_dataframe(xn, yn), args.out)
    conv = r.convergence.as_dataframe(xn, yn)
    if args.json:
        out = {"command": "ccm", "lib_sizes": r.lib_sizes, f"{xn}:{yn}": r.rho_xy,
               f"{yn}:{xn}": r.rho_yx, "convergence": conv.to_dict(orient="records")}
        if r.significance is not None:
            out.update({f"{xn}:{yn} p": r.significance.p_xy, f"{yn}:{xn} p": r.significance.p_yx,
                        "surrogates": args.surrogates,
                        "surrogate_method": args.surrogate_method})
        print_json(out)
    else:
        print(r.as_dataframe(xn, yn).to_string(index=False))
        print(conv.to_string(index=False))
    return 0


def run_edim(args: argparse.Namespace) -> int:
    from ..edm.scans import embed_dimension
    from .args import print_json
    x, y, xn, yn = _xy(args)
    s = embed_dimension(x, y, max_E=args.max_E, tau=args.tau, Tp=args.Tp, knn=args.knn,
                        exclusion_radius=args.exclusion_radius, lib=_joined(args.lib),
                        pred=_joined(args.pred), **_dev(args))
    if args.out:
        _write_csv(s.as_dataframe(), args.out)
    if args.json:
        print_json({"command": "edim", "E": s.values, "rho": s.rho, "mae": s.mae, "rmse": s.rmse,
                    "best_E": int(s.best)})
    else:
        print(s.as_dataframe().to_string(index=False))
        print(f"best E = {s.best}")
    return 0
