"""``pyedmcl network FILE``: the direct causal links among a file's series."""

from __future__ import annotations

import argparse

from ..validation import int_arg


def add_commands(sub: argparse._SubParsersAction) -> None:
    from .args import add_device_args, add_input_args

    p = sub.add_parser("network", help="direct causal links among series (pairwise maps, "
                                       "lag scans, convergence, partial cross maps)",
                       description="pyedmcl.causal_network on a data file: pairwise cross "
                                   "maps with surrogates and FDR, then edges whose skill peaks "
                                   "at a positive cross-map lag (reverse/synchrony), edges "
                                   "whose skill does not rise with the library size "
                                   "(nonconvergent) and edges explained by an intermediate "
                                   "(partial cross mapping) are pruned. Prints the direct edges (and the pruned ones with "
                                   "why); -o writes them all to CSV with a 'status' column "
                                   "(direct, reverse, nonconvergent, indirect).")
    p.add_argument("input", help="series as columns: .npy, .csv, .h5/.hdf5 or .zarr")
    p.add_argument("-o", "--out", default=None, help="output .csv of every candidate edge")
    p.add_argument("--dataset", default=None, help="dataset/array name inside .h5 or .zarr")
    p.add_argument("-E", "--E", dest="E", default="auto",
                   help="'auto' (optimal E per series) or an int")
    p.add_argument("--tau", type=int_arg, default=1, help="lag (> 0: into the past)")
    p.add_argument("--surrogates", type=int_arg, default=199, metavar="N",
                   help="surrogates per series (default 199; 1/(N+1) must not exceed --alpha)")
    p.add_argument("--surrogate-method", default="ebisuzaki",
                   choices=("ebisuzaki", "random_shuffle", "seasonal", "twin"),
                   help="surrogate method (default ebisuzaki)")
    p.add_argument("--seed", type=int_arg, default=None, help="seed of the surrogates")
    p.add_argument("--alpha", type=float, default=0.05, help="FDR level (default 0.05)")
    p.add_argument("--method", default="bh", choices=("bh", "bonferroni", "none"),
                   help="multiple-testing correction (default bh)")
    p.add_argument("--lags", default="-5:5", metavar="LO:HI",
                   help="cross-map lags scanned, inclusive (default -5:5; write --lags=-3:3)")
    p.add_argument("--no-convergence", dest="convergence", action="store_false",
                   default=True,
                   help="keep edges whose skill does not rise with the library size")
    p.add_argument("--convergence", dest="convergence", choices=("fisher", "kendall"),
                   help="the convergence rule (default fisher: Fisher's z of the small "
                        "library's skill vs the full one; kendall: Kendall's tau of skill "
                        "over a ladder of library sizes)")
    p.add_argument("--min-library", type=int_arg, default=None, metavar="ROWS",
                   help="rows of the small libraries of the convergence test (default: a "
                        "twentieth of the rows)")
    p.add_argument("--no-partial", dest="partial", action="store_false", default=None,
                   help="no partial cross maps (no indirect-edge pruning)")
    p.add_argument("--partial-ratio", type=float, default=0.7,
                   help="share of the cross map a direct link keeps when conditioned "
                        "(default 0.7)")
    p.add_argument("--dtype", default=None, choices=("float32", "float64"),
                   help="float32 (default) or float64")
    p.add_argument("--store", default=None, metavar="NET.zarr",
                   help="Zarr store of the pairwise map and its surrogate null (for many "
                        "series): rerunning the same command resumes it, with its stored seed")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a --store written with other parameters (only a store "
                        "pyedmcl wrote; other folders and files are never deleted)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address to join, or 'local' to start a LocalCluster "
                        "(needs --store)")
    p.add_argument("--workers", type=int_arg, default=2, help="LocalCluster worker processes")
    add_input_args(p)
    add_device_args(p)
    p.set_defaults(func=run)


def _lags(text: str) -> range:
    try:
        lo, hi = (int(v) for v in text.split(":"))
    except ValueError as exc:
        raise ValueError(f"--lags {text!r} must be LO:HI, e.g. -5:5") from exc
    if lo > hi:
        raise ValueError(f"--lags {text!r}: LO must not exceed HI")
    return range(lo, hi + 1)


def run(args: argparse.Namespace) -> int:
    from ..io import read_table
    from ..network.pipeline import causal_network
    from .args import check_output, reading_input, time_column

    if args.out is not None:
        with reading_input("-o/--out"):
            check_output(args.out, (".csv",), "-o/--out")
    with reading_input("INPUT"):
        X = read_table(args.input, dataset=args.dataset, time_column=time_column(args)).frame()
    if args.E != "auto" and not args.E.isdigit():
        raise ValueError(f"-E/--E must be 'auto' or a positive integer, got {args.E!r}")
    E = args.E if args.E == "auto" else int(args.E)
    net = causal_network(X, E=E, tau=args.tau, surrogates=args.surrogates,
                         surrogate_method=args.surrogate_method, seed=args.seed,
                         alpha=args.alpha, method=args.method, lags=_lags(args.lags),
                         convergence=args.convergence, min_library=args.min_library,
                         partial=args.partial, partial_ratio=args.partial_ratio,
                         dtype=args.dtype, device=args.device, backend=args.backend,
                         out=args.store, overwrite=args.overwrite, scheduler=args.scheduler,
                         n_workers=args.workers)
    import pandas as pd
    allrows = pd.concat([net.edges.assign(status="direct"),
                         net.pruned.rename(columns={"reason": "status"})], ignore_index=True)
    if args.out is not None:
        from .._outputs import atomic_file
        with atomic_file(args.out, what="--out") as tmp:  # never a half-written CSV
            allrows.to_csv(tmp, index=False)
    if args.json:
        from .args import print_json
        print_json({"direct": net.edges.to_dict("records"),
                    "pruned": net.pruned.to_dict("records"), "out": args.out})
    else:
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            print(f"{len(net.edges)} direct edges:")
            print(net.edges.to_string(index=False) if len(net.edges) else "  (none)")
            print(f"{len(net.pruned)} pruned:")
            print(net.pruned.to_string(index=False) if len(net.pruned) else "  (none)")
    return 0
