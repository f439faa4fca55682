"""``pyedmcl simplex|smap|ccm|edim``: EDM from .csv (named columns) or .npy files.

Series are chosen with ``--column``/``--target`` (a CSV column name, or a column
index of a 2-D .npy; a 1-D .npy is the series itself). ``tau`` follows pyedmcl's
sign (> 0: lags into the past). ``--json`` prints the result as JSON.
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


def _common(p: argparse.ArgumentParser) -> None:
    from ..cli.main import add_device_args
    p.add_argument("path", help="input .csv (named columns), .npy, .h5, .zarr, or - (CSV on stdin)")
    p.add_argument("--column", "-c", default=None, help="library series (CSV name or .npy index)")
    p.add_argument("--target", "-t", default=None, help="target series (default: --column)")
    p.add_argument("--tau", type=int_arg, default=1, help="lag (> 0: into the past)")
    p.add_argument("--exclusion-radius", type=int_arg, default=0)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    add_device_args(p)


def add_commands(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (("simplex", "Simplex projection (pyEDM semantics)"),
                           ("smap", "S-map (pyEDM semantics)")):
        p = sub.add_parser(name, help=helptext)
        _common(p)
        p.add_argument("-E", type=int_arg, required=True)
        p.add_argument("--Tp", type=int_arg, default=1)
        p.add_argument("--knn", type=int_arg, default=None)
        p.add_argument("--lib", default=None, help="1-based 'start stop [start stop ...]'")
        p.add_argument("--pred", default=None, help="1-based 'start stop [start stop ...]'")
        p.add_argument("--predictions", action="store_true",
                       help="include predictions in --json output")
        p.add_argument("--out", default=None, help="write time/observed/predicted as CSV")
        if name == "smap":
            p.add_argument("--theta", type=float, required=True)
        p.set_defaults(func=run_predict, kind=name)
    p = sub.add_parser("ccm", help="convergent cross mapping, both directions")
    _common(p)
    p.add_argument("-E", type=int_arg, required=True)
    p.add_argument("--Tp", type=int_arg, default=0)
    p.add_argument("--knn", type=int_arg, default=None)
    p.add_argument("--lib-sizes", required=True, help="e.g. '10 100 10' (start stop step) or '20 50 80'")
    p.add_argument("--sample", type=int_arg, default=100)
    p.add_argument("--seed", type=int_arg, default=None)
    p.add_argument("--replacement", action="store_true")
    p.set_defaults(func=run_ccm)
    p = sub.add_parser("edim", help="Simplex skill for E = 1..max-E (embedding dimension)")
    _common(p)
    p.add_argument("--max-E", type=int_arg, default=10)
    p.add_argument("--Tp", type=int_arg, default=1)
    p.add_argument("--knn", type=int_arg, default=None, help="neighbours (default: E + 1 per E)")
    p.add_argument("--lib", default=None)
    p.add_argument("--pred", default=None)
    p.set_defaults(func=run_edim)


def _xy(args) -> tuple[np.ndarray, np.ndarray, str, str]:
    from ..io import read_table

    t = read_table(args.path)  # once: stdin ("-") cannot be read twice
    i = 0 if args.column is None else t.index(args.column)
    x, xn = t.data[:, i].copy(), t.names[i]
    if args.target is None:
        return x, x, xn, xn
    j = t.index(args.target)
    return x, t.data[:, j].copy(), xn, t.names[j]


def _dev(args) -> dict[str, Any]:
    return {"device": args.device, "backend": args.backend, "dtype": args.dtype}


def run_predict(args: argparse.Namespace) -> int:
    from ..cli.main import print_json
    x, y, xn, yn = _xy(args)
    kw = dict(E=args.E, tau=args.tau, Tp=args.Tp, knn=args.knn,
              exclusion_radius=args.exclusion_radius, lib=args.lib, pred=args.pred, **_dev(args))
    if args.kind == "smap":
        from .smap import smap
        r = smap(x, y, theta=args.theta, **kw)
    else:
        from .simplex import simplex
        r = simplex(x, y, **kw)
    if args.out:
        from .._outputs import atomic_file
        with atomic_file(args.out, what="--out") as tmp:  # never a half-written CSV
            r.as_dataframe().to_csv(tmp, index=False)
    out = {"command": args.kind, "column": xn, "target": yn, "E": args.E, "tau": args.tau,
           "Tp": args.Tp, "rho": float(r.rho), "mae": float(r.mae), "rmse": float(r.rmse),
           "n_predictions": int(np.size(r.predicted))}
    if args.predictions:
        out.update(times=r.times, predicted=r.predicted, observed=r.observed)
    if args.json:
        print_json(out)
    else:
        print(f"{args.kind} {xn} -> {yn}  E={args.E} tau={args.tau} Tp={args.Tp}: "
              f"rho={r.rho:.6f} MAE={r.mae:.6g} RMSE={r.rmse:.6g} ({out['n_predictions']} predictions)")
    return 0


def run_ccm(args: argparse.Namespace) -> int:
    from ..cli.main import print_json
    from .ccm import ccm
    x, y, xn, yn = _xy(args)
    if args.target is None:
        raise ValueError("ccm needs --column and --target (two different series)")
    r = ccm(x, y, E=args.E, tau=args.tau, Tp=args.Tp, knn=args.knn, lib_sizes=args.lib_sizes,
            sample=args.sample, seed=args.seed, exclusion_radius=args.exclusion_radius,
            replacement=args.replacement, **_dev(args))
    if args.json:
        print_json({"command": "ccm", "lib_sizes": r.lib_sizes, f"{xn}:{yn}": r.rho_xy,
                    f"{yn}:{xn}": r.rho_yx})
    else:
        print(r.as_dataframe(xn, yn).to_string(index=False))
    return 0


def run_edim(args: argparse.Namespace) -> int:
    from ..cli.main import print_json
    from .scans import embed_dimension
    x, y, xn, yn = _xy(args)
    s = embed_dimension(x, y, max_E=args.max_E, tau=args.tau, Tp=args.Tp, knn=args.knn,
                        exclusion_radius=args.exclusion_radius, lib=args.lib, pred=args.pred,
                        **_dev(args))
    if args.json:
        print_json({"command": "edim", "E": s.values, "rho": s.rho, "mae": s.mae, "rmse": s.rmse,
                    "best_E": int(s.best)})
    else:
        print(s.as_dataframe().to_string(index=False))
        print(f"best E = {s.best}")
    return 0
