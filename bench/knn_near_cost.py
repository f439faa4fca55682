"""What the row check's wider k-NN table costs: the fused k-NN kernel at k, at k + 2 in
full and at k + 2 as a NEAR table (the extra entries near-ties only, knn.cl.mako), each
with the launch parameters of the k table, on the Mackey-Glass shapes of the Simplex
row-check benchmark (leave-one-out: every point a query, the whole series the library).

Run:  python bench/knn_near_cost.py --device nvidia
      python bench/knn_near_cost.py --device nvidia --cases 100000:7:2 --repeat 8
Times are wall seconds from launch to finish (best and median of --repeat), so they
include the launch (~0.2-0.3 ms on a GPU); compare them within one run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser  # noqa: E402


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--cases", default="100000:7:2,50000:12:3", help="L:E:tau, comma separated")
    ap.add_argument("--repeat", type=int, default=8)
    a = ap.parse_args()

    from bench_row_check import mackey_glass

    import pyedmcl  # noqa: F401  (configures clkernels first)
    from clkernels import get_backend
    from pyedmcl.primitives.knn import knn_device, widened_params
    from pyedmcl.primitives.ranges import resolve

    be = get_backend(a.device)
    print(f"device: {be.info.name}")
    for case in a.cases.split(","):
        L, E, tau = (int(v) for v in case.split(":"))
        x = mackey_glass(L)
        x = (x - x.mean()).astype(np.float32)
        plan = resolve(L, E=E, tau=tau, Tp=1, knn=None, exclusion_radius=0, lib=None, pred=None)
        xd, k0 = be.to_device(x), plan.knn
        kw = dict(E=E, tau=tau, qpts=plan.pred_points, lpts=plan.lib_points)
        params = widened_params(be, **kw, k=k0, base_k=k0)  # the k table's (None: CPUs)
        print(f"L={L} E={E} tau={tau}: launch parameters {params or 'the tuning of each table'}")
        for k, near in ((k0, 0), (k0 + 2, 0), (k0 + 2, 2)):
            times = []
            for _ in range(a.repeat):
                be.finish()
                t = time.perf_counter()
                knn_device(be, xd, L, **kw, k=k, radius=0, params=params, near=near)
                be.finish()
                times.append(time.perf_counter() - t)
            what = "full" if k == k0 or not near else f"NEAR {near}"
            print(f"  k={k:3d} {what:7s} best {min(times) * 1e3:8.3f} ms  median "
                  f"{np.median(times) * 1e3:8.3f} ms", flush=True)


if __name__ == "__main__":
    main()
