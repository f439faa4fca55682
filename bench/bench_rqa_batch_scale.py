"""``pe.rqa_batch`` in blocks of series against the one call, in one process: the cost of
blocks in memory, of a Zarr store (``out=``), of several devices (``--devices``: one
thread each) and of a Dask LocalCluster (``--workers`` in-process workers, one device
context each; ``--worker-devices`` maps them to devices). Prints times (medians of
--repeat, runs interleaved) and their ratio to the one call; every result is checked
equal to the one call's rows bit for bit.

    python bench/bench_rqa_batch_scale.py                          # 300 series x 800, CPU
    python bench/bench_rqa_batch_scale.py --device nvidia --series 100000 --points 1000 \\
        --devices nvidia:0,nvidia:1 --worker-devices nvidia:0,nvidia:1 --workers 2

The store is written to a temporary folder (removed at the end), a fresh one per run:
its time includes creating it, writing every block and reading the rows back.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from _common import random_walk_panel


def _median_time(fn, repeat: int) -> tuple[float, object]:
    out, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--points", type=int, default=800)
    ap.add_argument("--E", type=int, default=3)
    ap.add_argument("--tau", type=int, default=2)
    ap.add_argument("--radius", type=float, default=0.2)
    ap.add_argument("--block-series", type=int, default=None)
    ap.add_argument("--devices", default=None, help="several devices, one thread each")
    ap.add_argument("--workers", type=int, default=2, help="Dask in-process workers (0: none)")
    ap.add_argument("--worker-devices", default=None, help="devices of the Dask workers")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend

    X = random_walk_panel(a.points, a.series)
    kw = dict(E=a.E, tau=a.tau, radius=a.radius)
    be = get_backend(a.device) if a.device else None
    print(f"device: {be.info.selector if be else 'default'}; {a.series} series x {a.points} "
          f"points, E={a.E} tau={a.tau} radius={a.radius} float32; median of {a.repeat}")
    ref = pe.rqa_batch(X, device=a.device, **kw)  # programs built before timing
    tmp = Path(tempfile.mkdtemp(prefix="bench-rqa-batch-"))
    runs = {
        "one call": lambda: pe.rqa_batch(X, device=a.device, **kw),
        "blocks in memory": lambda: pe.rqa_batch(X, device=a.device,
                                                 block_series=a.block_series or 64, **kw),
        "blocks to a store": lambda: pe.rqa_batch(
            X, device=a.device, block_series=a.block_series, **kw,
            out=tmp / f"{uuid.uuid4().hex}.zarr"),
    }
    if a.devices:
        runs["devices " + a.devices] = lambda: pe.rqa_batch(
            X, devices=a.devices, block_series=a.block_series, **kw)
    cluster = client = None
    if a.workers:
        import distributed

        cluster = distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1,
                                           processes=False, dashboard_address=None)
        client = distributed.Client(cluster)
        devs = a.worker_devices.split(",") if a.worker_devices else (
            [a.device] if a.device else None)
        runs[f"Dask, {a.workers} workers"] = lambda: pe.rqa_batch(
            X, scheduler=client, devices=devs, block_series=a.block_series, **kw)
        runs[f"Dask, {a.workers} workers"]()  # the workers' programs built before timing
    runs["blocks to a store"]()  # zarr imported before timing
    times: dict[str, list[float]] = {k: [] for k in runs}
    try:
        for _ in range(a.repeat):  # interleaved
            for name, fn in runs.items():
                t, res = _median_time(fn, 1)
                assert res.equals(ref), name
                times[name].append(t)
    finally:
        if client is not None:
            client.close()
            cluster.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["one call"])
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:<28} {t * 1e3:9.1f} ms  {t / a.series * 1e6:8.1f} us/series  "
              f"x{t / base:5.2f} of one call")
    print("every result equal to the one call's rows: yes")


if __name__ == "__main__":
    main()
