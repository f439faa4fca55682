"""pe.xmap at lags 2 and 3 with the k-NN raw-value tile (SLIDE, decision 0141) and without it
(``SLIDE_SPAN_MAX = 0``: SLIDE only where the span is 0), same process, rho compared.

Run:  python bench/xmap_slide_tau.py 1000 1000   (N series, T points; an NVIDIA GPU)
"""
import sys
import time

import numpy as np

import pyedmcl as pe
import pyedmcl.kernels.knn as K

rng = np.random.default_rng(0)
N, T = int(sys.argv[1]), int(sys.argv[2])
X = np.cumsum(rng.standard_normal((T, N)), 0)
X += 0.3 * np.sin(np.arange(T) * 0.37)[:, None]
for tau in (2, 3):
    res = {}
    for name, span in (("slide", 48), ("no-slide", 0)):
        K.SLIDE_SPAN_MAX = span
        pe.xmap(X, E=5, tau=tau, device="nvidia")
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            r = pe.xmap(X, E=5, tau=tau, device="nvidia")
            ts.append(time.perf_counter() - t)
        res[name] = (min(ts), np.asarray(r.rho))
        print(f"N={N} T={T} E=5 tau={tau} {name}: best {min(ts)*1e3:.1f} ms", flush=True)
    print("  same rho:", np.array_equal(res["slide"][1], res["no-slide"][1], equal_nan=True))
