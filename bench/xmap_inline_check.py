"""A small cross map's float32 merge check on the calling thread or on a thread beside
the host's enqueueing (:data:`pyedmcl.xmap.core.MAP_INLINE_CHECK`), alternating in one
process: median and best wall time of ``pe.xmap`` on FastCCM's noise panels (E=5).

Run:  python bench/xmap_inline_check.py --device nvidia
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser  # noqa: E402

INLINE = 1 << 19  # every panel below inline


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.xmap import core

    for N, T in ((100, 1000), (200, 1000), (800, 500), (400, 1000)):
        X = np.random.default_rng(0).standard_normal((T, N))
        res: dict[int, list[float]] = {0: [], INLINE: []}
        for i in range(a.rounds):
            v = (0, INLINE)[i % 2]
            core.MAP_INLINE_CHECK = v
            t = time.perf_counter()
            pe.xmap(X, E=5, tau=1, Tp=0, device=a.device)
            if i >= 4:
                res[v].append(time.perf_counter() - t)
        th, il = res[0], res[INLINE]
        print(f"N={N} T={T}: thread {np.median(th) * 1e3:.2f} ms (best {min(th) * 1e3:.2f}), "
              f"inline {np.median(il) * 1e3:.2f} ms (best {min(il) * 1e3:.2f})")


if __name__ == "__main__":
    main()
