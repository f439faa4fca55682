"""``pyedmcl sample NAME -o FILE.csv``: write a bundled sample data set as CSV.

The data come from the documented models of :mod:`pyedmcl.data` (known causal
direction, known attractor), so a first command-line session needs no data of its own.
"""

from __future__ import annotations

import argparse

from ..validation import int_arg

#: name -> (generator, column names, what it is)
SAMPLES = {
    "coupled_logistic": (("x", "y"), "two coupled logistic maps, x drives y (Sugihara et al. 2012)"),
    "lorenz63": (("x", "y", "z"), "the Lorenz (1963) attractor, sampled every 0.05 time units"),
    "logistic_map": (("x",), "the logistic map at r = 4 (chaotic)"),
    "logistic_network": (None, "8 logistic maps coupled along a random directed graph"),
}


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="write a bundled sample data set as CSV",
                       description="Sample data sets: " + "; ".join(
                           f"{k}: {v[1]}" for k, v in SAMPLES.items()))
    p.add_argument("name", choices=sorted(SAMPLES), help="which data set")
    p.add_argument("-o", "--out", required=True, help="output .csv")
    p.add_argument("-n", "--length", type=int_arg, default=1000, help="time steps (rows)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=run)


def frame(name: str, n: int):
    """The sample ``name`` as a DataFrame: a ``time`` column (0..n-1), then the series."""
    import numpy as np
    import pandas as pd

    from .. import data

    if n < 10:
        raise ValueError(f"-n/--length must be at least 10, got {n}")
    cols, _ = SAMPLES[name]
    if name == "logistic_network":
        X, _A = data.logistic_network(8, n)
        cols = tuple(f"s{i}" for i in range(X.shape[1]))
    else:
        X = np.asarray(getattr(data, name)(n)).reshape(n, -1)
    df = pd.DataFrame(X, columns=list(cols))
    df.insert(0, "time", np.arange(n))
    return df


def run(args: argparse.Namespace) -> int:
    from .._outputs import atomic_file
    from .args import check_new_file, check_output

    check_output(args.out, (".csv",))
    check_new_file(args.out, args.overwrite)
    df = frame(args.name, args.length)
    with atomic_file(args.out, what="--out") as tmp:
        df.to_csv(tmp, index=False)
    print(f"wrote {args.out}: {args.name}, {len(df)} rows, columns {', '.join(df.columns)}")
    return 0
