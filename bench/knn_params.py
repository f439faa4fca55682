"""Device time of the fused k-NN kernel at several launch parameters, for one shape.

The tuning database holds entries for size and spec buckets; a shape between them takes
the nearest entry's parameters. This times the chosen parameters against a few others on
the same data (Mackey-Glass, leave-one-out: every point a query, the whole series the
library) and checks that every choice gives the same table.

Run:  python bench/knn_params.py --device nvidia --L 100000 --E 7 --tau 2 --k 10 --near 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SameAsFirst  # noqa: E402

CANDIDATES = [
    {"VARIANT": "vec", "QB": 8, "WG": 128, "TILE": 256, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "vec", "QB": 8, "WG": 64, "TILE": 256, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "vec", "QB": 8, "WG": 128, "TILE": 256, "EA": 0, "CB": 0, "QQ": 2},
    {"VARIANT": "vec", "QB": 4, "WG": 128, "TILE": 256, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "vec", "QB": 8, "WG": 128, "TILE": 512, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "vec", "QB": 8, "WG": 128, "TILE": 256, "EA": 0, "CB": 4, "QQ": 1},
    {"VARIANT": "vec", "QB": 16, "WG": 128, "TILE": 256, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "rows", "QB": 1, "WG": 128, "TILE": 256, "EA": 0, "CB": 0, "QQ": 1},
    {"VARIANT": "rows", "QB": 1, "WG": 64, "TILE": 256, "EA": 4, "CB": 0, "QQ": 1},
    {"VARIANT": "rows", "QB": 1, "WG": 32, "TILE": 128, "EA": 8, "CB": 0, "QQ": 1},
]

#: the rows variant's raw-value tile (a contiguous library, window span <= 48)
SLIDE_CANDIDATES = [
    {"VARIANT": "rows", "QB": 1, "WG": wg, "TILE": tile, "EA": ea, "CB": 0, "QQ": 1, "SLIDE": u,
     "SPLIT": sp}
    for (wg, tile, ea, u, sp) in [(32, 256, 2, 16, 1), (64, 256, 2, 16, 1), (128, 256, 2, 16, 1),
                                  (64, 512, 2, 16, 1), (64, 256, 4, 16, 1), (64, 256, 2, 8, 1),
                                  (64, 256, 2, 32, 1), (128, 512, 4, 16, 1), (32, 256, 4, 8, 1),
                                  (64, 256, 0, 16, 1), (32, 256, 2, 16, 2), (32, 256, 2, 16, 4),
                                  (64, 256, 2, 8, 2), (64, 256, 2, 8, 4)]
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--L", type=int, default=100_000)
    ap.add_argument("--E", type=int, default=7)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--k", type=int, default=None, help="neighbours (default E + 2: the checked table)")
    ap.add_argument("--near", type=int, default=0,
                    help="the table's last NEAR entries as near-ties only (knn.cl.mako)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    from bench_row_check import mackey_glass

    import pyedmcl  # noqa: F401  (configures clkernels first)
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    from pyedmcl.primitives.knn import _knn_launch
    from pyedmcl.primitives.ranges import resolve

    be = get_backend(a.device)
    x = mackey_glass(a.L)
    x = (x - x.mean()).astype(np.float32)
    k = a.k or a.E + 2
    plan = resolve(a.L, E=a.E, tau=a.tau, Tp=1, knn=None, exclusion_radius=0, lib=None,
                   pred=None)
    lp = np.ascontiguousarray(np.atleast_2d(plan.lib_points), np.int32)
    qp = np.ascontiguousarray(plan.pred_points, np.int32)
    spec, chosen, _ = _knn_launch(be, a.E, a.tau, k, qp.size, lp, "euclidean", "float", 1,
                                  None)
    if a.near:
        spec = {**spec, "NEAR": a.near}
    xd, qd, ld = be.to_device(x), be.to_device(qp), be.to_device(lp)
    base = {"SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0, "INS": "reg", "FLAG": 1}
    print(f"device: {be.info.name}; L={a.L} E={a.E} tau={a.tau} k={k}; spec {spec}")
    same_table = SameAsFirst()
    for i, cand in enumerate([chosen] + CANDIDATES + SLIDE_CANDIDATES):
        p = {**base, **cand}
        idx = be.empty((1, qp.size, k), np.int32)
        dist = be.empty((1, qp.size, k), np.float32)
        try:
            times = []
            for _ in range(a.repeat + 1):
                ev = KNN.launch(be, p, spec, xd, qd, qp.size, ld, lp.shape[1], 1, 0, idx, dist)
                times.append(be.event_seconds(ev))
        except Exception as e:  # a candidate the device cannot run
            print(f"  {'chosen' if i == 0 else i:>6} {json.dumps(cand)}: {type(e).__name__} {e}"[:200])
            continue
        same = same_table(be.to_host(idx))
        print(f"  {'chosen' if i == 0 else i:>6} best {min(times[1:]) * 1e3:8.3f} ms  "
              f"same table {same}  {json.dumps(p, sort_keys=True)}")


if __name__ == "__main__":
    main()
