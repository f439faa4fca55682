"""float32 Simplex of one library series and S targets (FastCCM's "1 source x S targets":
noise, E=5, Tp=0, exclusion 5, a 2-D target) and of one series (E=20, Tp=1, exclusion
10), timed here or against another checkout: with ``--base`` each round runs both
checkouts in turn (one fresh process each, warmed up, then ``--repeat`` calls), so that
both see the same load of a shared machine; best and median per shape and checkout.

Run:  python bench/simplex_targets.py --device nvidia
      python bench/simplex_targets.py --device intel --base /tmp/base --rounds 4
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import call_times, parser  # noqa: E402


def calls(a) -> dict:
    """The timed calls by name: each targets count of ``--targets``, then each 1-D
    length of ``--T1``."""
    import pyedmcl as pe

    rng = np.random.default_rng(0)
    out = {}
    for s in a.targets:  # (0: none)
        if not s:
            continue
        X = rng.standard_normal((a.T, s + 1))
        tg = np.ascontiguousarray(X[:, 1:].T)
        out[f"{s} targets, T={a.T}"] = (lambda X=X, tg=tg: pe.simplex(
            X[:, 0], target=tg, E=5, Tp=0, exclusion_radius=5, device=a.device))
    for t in a.T1:
        x = rng.standard_normal(t)
        out[f"1-D, T={t}"] = (lambda x=x: pe.simplex(x, E=20, Tp=1, exclusion_radius=10,
                                                     device=a.device))
    return out


def worker(a) -> None:
    """One process: every call's times, as JSON on stdout."""
    got = {name: call_times(fn, a.repeat, warmup=1) for name, fn in calls(a).items()}
    print(json.dumps(got))


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--T", type=int, default=1000, help="points of each series (targets)")
    ap.add_argument("--T1", type=int, nargs="+", default=[2000],
                    help="points of each 1-D series timed")
    ap.add_argument("--targets", type=int, nargs="+", default=[20000])
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per process")
    ap.add_argument("--rounds", type=int, default=3, help="processes per checkout")
    ap.add_argument("--base", default=None, help="another checkout to time in turn")
    ap.add_argument("--worker", action="store_true", help=argparse_hidden())
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return
    here = str(Path(__file__).resolve().parents[1])
    trees = {"this": here} | ({"base": a.base} if a.base else {})
    times: dict = {t: {} for t in trees}
    args = [a2 for a2 in sys.argv[1:]]
    for _ in range(a.rounds):
        for tag, root in trees.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
            out = subprocess.run([sys.executable, __file__, *args, "--worker"], env=env,
                                 check=True, capture_output=True, text=True).stdout
            for name, ts in json.loads(out.splitlines()[-1]).items():
                times[tag].setdefault(name, []).extend(ts)
    for name in times["this"]:
        row = [f"{name:>24}:"]
        for tag in trees:
            ts = times[tag][name]
            row.append(f"{tag} best {min(ts) * 1e3:8.2f} ms, median "
                       f"{statistics.median(ts) * 1e3:8.2f} ms ({len(ts)} calls)")
        print("  ".join(row))


def argparse_hidden() -> str:
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
