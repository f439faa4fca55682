"""The first call in a fresh process with a warm program cache, on FastCCM's shapes: one
process per shape and run (the first run of each shape fills the cache; the runs after
it are "warm"), timing the import of pyedmcl and the first call separately.

Run:  python bench/first_call_warm_cache.py --device nvidia --runs 3
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser  # noqa: E402

SHAPES = {
    "xmap 100x100 T=1000": "pe.xmap(rng.standard_normal((1000, 100)), E=5, Tp=0, device=dev)",
    "xmap 800x800 T=500": "pe.xmap(rng.standard_normal((500, 800)), E=5, Tp=0, device=dev)",
    "xmap 100x100 T=8000": "pe.xmap(rng.standard_normal((8000, 100)), E=5, Tp=0, device=dev)",
    "simplex T=8000 E=20": "pe.simplex(rng.standard_normal(8000), E=20, Tp=1, "
                           "exclusion_radius=10, device=dev)",
    "smap T=8000 E=20": "pe.smap(rng.standard_normal(8000), E=20, Tp=1, theta=1.0, "
                        "exclusion_radius=10, device=dev)",
}

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import pyedmcl as pe
t1 = time.perf_counter()
rng = np.random.default_rng(0)
dev = {dev!r}
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
{call}
t4 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "first": t3 - t2, "second": t4 - t3}}))
"""


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=3, help="processes per shape (the first fills the cache)")
    a = ap.parse_args()
    print(f"{'shape':24s} run  import s  first call s  second call s")
    for name, call in SHAPES.items():
        for run in range(a.runs):
            out = subprocess.run([sys.executable, "-c", CHILD.format(dev=a.device, call=call)],
                                 capture_output=True, text=True, check=True)
            t = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{name:24s} {run:3d} {t['import']:9.3f} {t['first']:12.3f} {t['second']:14.4f}")


if __name__ == "__main__":
    main()
