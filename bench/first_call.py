"""The first pyedmcl call in a fresh process, with the program cache warm: FastCCM's
benchmark shapes (``bench_fastccm.py``), each in a new interpreter. One process runs every
shape first (it builds or loads every program); then each shape's process reports the
import of pyedmcl, its first call (device selection, context, programs loaded from the
cache, the work) and its second call (the warm time).

Run:  python bench/first_call.py --device nvidia
      python bench/first_call.py --device nvidia --shapes m100x100_T1000,single_T2000 --methods simplex
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SHAPES = ("m100x100_T1000,m200x200_T1000,m800x800_T500,m100x100_T8000,"
                  "flat1x20000_T1000,single_T2000,single_T8000")

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import pyedmcl as pe
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import bench_fastccm as B
from types import SimpleNamespace
args = SimpleNamespace(device=sys.argv[2] or None, theta=1.0)
out = []
for name, method in json.loads(sys.argv[3]):
    shape = B.parse_shape(name)
    X = B.shape_data(shape)
    call = B.pyedmcl_call(shape, method, X, args)
    a = time.perf_counter(); call(); b = time.perf_counter(); call(); c = time.perf_counter()
    out.append((name, method, b - a, c - b))
print(json.dumps({"import": t1 - t0, "calls": out}))
"""


def main() -> None:
    sys.path.insert(0, str(HERE))
    from _common import parser

    ap = parser(__doc__)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--methods", default="simplex,smap")
    a = ap.parse_args()
    dev = a.device or ""
    jobs = []
    for name in a.shapes.split(","):
        for m in a.methods.split(","):
            if name.startswith("flat") and m == "smap":
                continue  # (FastCCM's flat shapes: simplex only)
            jobs.append((name, m))

    def child(todo: list) -> dict:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(HERE), dev, json.dumps(todo)],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])

    child(jobs)  # every program built or loaded into the cache
    print(f"device {dev or 'default'}; each shape in a fresh process, the program cache warm")
    print(f"{'shape':22s} {'method':8s} {'import s':>9s} {'first call s':>13s} {'second s':>9s}")
    for job in jobs:
        r = child([job])
        name, m, first, second = r["calls"][0]
        print(f"{name:22s} {m:8s} {r['import']:9.3f} {first:13.3f} {second:9.3f}", flush=True)


if __name__ == "__main__":
    main()
