"""Device time of the float64 redo's k-NN (128 slots over a whole library) at several
work-group splits and library chunk counts (:func:`pyedmcl.primitives.knn.knn_device_chunked`),
each table checked equal to the single launch's.

Run:  python bench/redo_knn_params.py --device nvidia --L 50000 --E 12 --tau 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--L", type=int, default=50_000)
    ap.add_argument("--E", type=int, default=12)
    ap.add_argument("--tau", type=int, default=3)
    ap.add_argument("--slots", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()

    from _common import SameAsFirst, best_time
    from bench_row_check import mackey_glass

    import pyedmcl  # noqa: F401  (configures clkernels first)
    from clkernels import get_backend
    from pyedmcl.edm.row_redo import redo_params
    from pyedmcl.primitives.knn import knn_device, knn_device_chunked

    be = get_backend(a.device)
    x = mackey_glass(a.L)
    npts = a.L - (a.E - 1) * a.tau
    lib = np.arange(npts, dtype=np.int32)
    q = np.linspace(0, npts - 1, a.slots).astype(np.int32)
    k = a.E + 1
    xd, qd, ld = be.to_device(x), be.to_device(q), be.to_device(lib)
    print(f"device: {be.info.name}; L={a.L} E={a.E} tau={a.tau} k={k} slots={a.slots}")
    same_table = SameAsFirst()
    for split in (256, 128, 64, 32):
        base = redo_params(a.E, k, split, 1 << 30)
        for chunks in (1, 4, 8, 16, 32, 64):
            tables: list = []

            def run(chunks=chunks, base=base, tables=tables):
                if chunks == 1:
                    t = knn_device(be, xd, x.size, E=a.E, tau=a.tau, k=k, qpts=q, lpts=lib,
                                   radius=0, real="double", params=base, q_dev=qd, l_dev=ld)
                else:
                    t = knn_device_chunked(be, xd, x.size, E=a.E, tau=a.tau, k=k, q_dev=qd,
                                           nq=q.size, l_dev=ld, nl=lib.size, radius=0,
                                           chunks=chunks, params=base, real="double")
                be.finish()  # launch to finish
                tables.append(t)

            be.finish()
            best = best_time(run, a.repeat, warmup=1)
            t = tables[-1]
            same = same_table(be.to_host(t.idx))
            print(f"  SPLIT {split:4d} chunks {chunks:3d}: best {best * 1e3:7.3f} ms "
                  f"(wall, launch to finish)  same table {same}")


if __name__ == "__main__":
    main()
