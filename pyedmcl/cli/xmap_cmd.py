"""``pyedmcl xmap INPUT -o OUT.zarr``: the all-to-all cross-map matrix to Zarr."""

from __future__ import annotations

import argparse

from ..validation import int_arg


def add_commands(sub: argparse._SubParsersAction) -> None:
    from .args import add_device_args, add_input_args, add_workers_arg

    p = sub.add_parser("xmap", help="all-to-all cross mapping (pairwise CCM) to Zarr, resumable",
                       description="rho[i, j] = library series i cross-maps target series j "
                                   "(CCM 'i:j' at full library size, E = E[j]). Rerunning the "
                                   "same command resumes an interrupted job (blocks that fail their "
                                   "checksum are recomputed). 'pyedmcl xmap --verify OUT.zarr' "
                                   "checks a finished store.")
    p.add_argument("input", nargs="?", help="series as columns: .npy, .csv, .h5/.hdf5 or .zarr")
    p.add_argument("-o", "--out", default=None, help="output .zarr directory")
    p.add_argument("--verify", metavar="STORE", default=None,
                   help="verify the finished store STORE against its checksums and report "
                        "bad blocks by index (exit 1 if any), instead of computing")
    p.add_argument("--dataset", default=None, help="dataset/array name inside .h5 or .zarr")
    p.add_argument("-E", "--E", dest="E", default="auto",
                   help="'auto' (optimal E per series) or an int")
    p.add_argument("--max-E", type=int_arg, default=20, help="largest E tried by --E auto")
    p.add_argument("--E-max", dest="max_E", type=int_arg, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)  # the former spelling, kept as an alias
    p.add_argument("--tau", type=int_arg, default=1, help="lag (> 0: into the past)")
    p.add_argument("--Tp", type=int_arg, default=0, help="cross-map prediction interval")
    p.add_argument("--method", default="simplex", choices=("simplex", "smap"),
                   help="cross map: simplex (default, CCM's) or smap (pyEDM's SMap of every "
                        "pair, localisation --theta)")
    p.add_argument("--theta", type=float, default=None,
                   help="S-map localisation (>= 0; required by and only valid with --method smap)")
    p.add_argument("--exclusion-radius", type=int_arg, default=0,
                   help="rows around each prediction row left out of its library (--method smap)")
    p.add_argument("--devices", default=None,
                   help="comma-separated devices used at once, e.g. pocl,intel or nvidia:0,nvidia:1")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address to join, or 'local' to start a LocalCluster")
    add_workers_arg(p)
    p.add_argument("--block-rows", type=int_arg, default=None, help="rows per block (Zarr chunk)")
    p.add_argument("--fma", action=argparse.BooleanOptionalAction, default=None,
                   help="fuse the distance's multiply-adds with fma() on every device (default: "
                        "when every device is a GPU; off on a Dask cluster; kept when resuming)")
    p.add_argument("--dtype", default=None, choices=("float32", "float64"),
                   help="float32 (default; series centred first) or float64 "
                        "(needs fp64 on every device); kept when resuming")
    p.add_argument("--surrogates", type=int_arg, default=0, metavar="N",
                   help="also cross-map N surrogates of every target: per pair the p-value "
                        "and the null's mean and 95%% quantile are stored beside rho")
    p.add_argument("--surrogate-method", default="ebisuzaki",
                   choices=("ebisuzaki", "random_shuffle", "seasonal", "twin"),
                   help="surrogate method (default ebisuzaki)")
    p.add_argument("--seed", type=int_arg, default=None,
                   help="seed of the surrogates (default: fresh, stored; kept when resuming)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output written with other parameters (only a "
                        "store pyedmcl wrote; other folders and files are never deleted)")
    add_input_args(p)
    add_device_args(p)
    p.set_defaults(func=run)


def run_verify(args: argparse.Namespace) -> int:
    """``--verify STORE``: 0 when every block and the E vector verify, else 1 (bad blocks named)."""
    import sys

    from ..xmap.store import xmap_verify
    from .args import print_json, reading_input

    if args.input is not None or args.out is not None:
        raise ValueError("--verify STORE takes no INPUT nor -o/--out")
    with reading_input("--verify"):  # the store is this command's input
        chk = xmap_verify(args.verify)
    if args.json:
        print_json(chk.as_dict())
    elif chk.ok:
        print(chk.summary())
    if not chk.ok:
        print(f"pyedmcl xmap: {chk.summary()}", file=sys.stderr)
    return 0 if chk.ok else 1


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..io import read_table
    from ..xmap.core import xmap
    from .args import check_output, check_writable, reading_input, show_progress, time_column

    if args.verify is not None:
        return run_verify(args)
    if args.input is None or args.out is None:
        raise ValueError("xmap needs INPUT and -o/--out OUT.zarr (or --verify OUT.zarr)")
    from pathlib import Path

    with reading_input("-o/--out"):
        if not Path(args.out).exists():  # an existing store (resumed, or refused by the core) keeps its name
            check_output(args.out, (".zarr",), "-o/--out")
        check_writable(args.out, "-o/--out")
    with reading_input("INPUT"):
        X = read_table(args.input, dataset=args.dataset, time_column=time_column(args)).frame()
    if args.E != "auto" and not args.E.isdigit():
        raise ValueError(f"-E/--E must be 'auto' or a positive integer, got {args.E!r}")
    E = args.E if args.E == "auto" else int(args.E)
    devices = args.devices if args.devices else ([args.device] if args.device else None)
    res = xmap(X, E=E, tau=args.tau, Tp=args.Tp, max_E=args.max_E, out=args.out,
               block_rows=args.block_rows, devices=devices, backend=args.backend,
               scheduler=args.scheduler, n_workers=args.n_workers, overwrite=args.overwrite,
               fma=args.fma, dtype=args.dtype, progress=show_progress(args),
               surrogates=args.surrogates, surrogate_method=args.surrogate_method,
               seed=args.seed, method=args.method, theta=args.theta,
               exclusion_radius=args.exclusion_radius)
    summary = {"out": args.out, "N": int(len(res.E)), "E": res.E,
               "blocks_per_device": res.blocks_per_device}
    edges = None
    if res.surrogates:
        from ..significance.network import causal_network
        edges = len(causal_network(res))
        summary.update({"surrogates": res.surrogates, "fdr_edges_at_0.05": edges})
    if args.json:
        from .args import print_json
        print_json(summary)
    else:
        E_u, E_c = np.unique(res.E, return_counts=True)
        print(f"wrote {args.out}: {len(res.E)} x {len(res.E)} rho; E groups "
              + ", ".join(f"E={e}: {c}" for e, c in zip(E_u, E_c, strict=True))
              + f"; blocks per device {res.blocks_per_device}"
              + ("" if edges is None else f"; {res.surrogates} surrogates per target, "
                 f"{edges} edges at FDR 0.05 (pyedmcl.causal_network)"))
    return 0
