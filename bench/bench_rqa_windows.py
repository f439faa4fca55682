"""Windowed RQA benchmark: pyedmcl ``rqa(window=W, step=S)`` in one pass over the band
(``method="band"``) vs one D&R run per window (``method="windows"``) vs a pyunicorn loop
(one RecurrencePlot and its 12 measures per window), on the same float32-representable
logistic-map series (float64 unless ``--dtype float32``). Prints times, ratios and whether the rows agree exactly
(band vs per-window: every measure; pyunicorn: every window's recurrence count).

    python bench/bench_rqa_windows.py --device intel --n 100000 --peer-n 20000

pyunicorn runs on the first ``--peer-n`` points only (its loop takes ~0.1 s per window
of 1,000 points here; ``--peer-n 0``: all ``--n``); its time at ``--n`` is extrapolated
per window. Both pyedmcl methods run on all ``--n`` points.
"""

from __future__ import annotations

import time

import numpy as np
from _common import parser


def _same(a, b) -> bool:
    va, vb = a.to_numpy(float), b.to_numpy(float)
    return bool(((va == vb) | (np.isnan(va) & np.isnan(vb))).all())


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="points for pyedmcl")
    ap.add_argument("--peer-n", type=int, default=20_000,
                    help="points for the pyunicorn loop (0: all --n)")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--step", type=int, default=100)
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=1)
    ap.add_argument("--radius", type=float, default=0.1)
    ap.add_argument("--dtype", default="float64",
                    help="float32: windows prepared as rqa() prepares each (pyunicorn decides "
                         "in float64, so its counts may differ at the radius)")
    args = ap.parse_args()

    import pyedmcl as pe
    from pyedmcl.data import logistic_map
    from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
    from pyedmcl.rqa.core import _band_windows, rqa
    from pyedmcl.rqa.windowed import windowed_rqa

    x = logistic_map(args.n, r=3.9, x0=0.4, burn=0).astype(np.float32).astype(np.float64)
    kw = dict(E=args.E, tau=args.tau, radius=args.radius, window=args.window, step=args.step,
              dtype=args.dtype, device=args.device, w_min=1)
    for method in ("band", "windows"):  # kernel builds outside the timing
        windowed_rqa(rqa, x[: args.window * 3], method=method, band=_band_windows, **kw)
    times = {}
    res = {}
    for method in ("band", "windows"):
        t = time.perf_counter()
        res[method] = windowed_rqa(rqa, x, method=method, band=_band_windows, **kw)
        times[method] = time.perf_counter() - t
    band = res["band"]
    assert pe.rqa(x[: args.window * 3], **kw).attrs["method"] == "band"  # rqa()'s default

    print(f"windows: N={args.n} W={args.window} S={args.step} E={args.E} tau={args.tau} "
          f"r={args.radius} {args.dtype}, {len(band)} windows, device={args.device or 'default'}")
    print(f"one pass (band):       {times['band']:8.2f} s  ({1e3 * times['band'] / len(band):.2f} "
          f"ms per window)")
    print(f"one run per window:    {times['windows']:8.2f} s  -> band {times['windows'] / times['band']:.1f}x "
          f"faster; rows identical: {_same(band, res['windows'])}")
    try:
        import pyunicorn  # noqa: F401
    except ImportError:
        print("pyunicorn loop:        skipped (pyunicorn is not installed)")
        return
    peer_n = args.peer_n or args.n
    xp = x[:peer_n]
    span = (args.E - 1) * args.tau
    rows = band.loc[[ab for ab in band.index if ab[1] + span < peer_n]]
    t = time.perf_counter()
    counts = []
    for a, b in rows.index:
        rp = pyunicorn_rp(xp[a: b + 1 + span], E=args.E, tau=args.tau, radius=args.radius)
        pyunicorn_measures(rp, 2, 2, 1)
        counts.append(int(rp.R.sum()))
    t_uni = time.perf_counter() - t
    t_uni_full = t_uni / max(len(rows), 1) * len(band)
    note = "" if len(rows) == len(band) else f" (extrapolated from {len(rows)} windows, N={peer_n})"
    print(f"pyunicorn loop:        {t_uni_full:8.2f} s{note} -> band {t_uni_full / times['band']:.1f}x "
          f"faster; recurrence counts agree: {counts == list(rows['n_recurrences'])}")


if __name__ == "__main__":
    main()
