"""Device-array input validation vs a host round trip (issue #8), one device, one process.

For a float64 series already on the device: on-device check (NaN/inf) + float32
conversion (``clkernels.arrays.convert_check``) against the host path it
replaces (read back, ``np.isfinite``, convert, upload). Prints times, the ratio
and the achieved GB/s of the device path against bytes moved (8 read + 4 written
per element). Also Simplex from a device array vs from numpy (end to end).

    python bench/bench_interop.py --device pocl --n 100000 10000000
    python bench/bench_interop.py --device nvidia --n 10000000 100000000 --simplex-n 20000
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import median_time


def _median(f, repeat: int) -> float:
    return median_time(f, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 10_000_000])
    ap.add_argument("--simplex-n", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    import pyedmcl as pe
    from clkernels import get_backend
    from clkernels.arrays import convert_check

    be = get_backend(args.device)
    print(f"device: {be.info.name} ({be.info.runtime})")
    for n in args.n:
        x = np.random.default_rng(0).standard_normal(n)
        xd = be.to_device(x)

        def device_path(xd=xd):
            convert_check(be, xd, np.float32)
            be.finish()

        def host_path(xd=xd):
            h = be.to_host(xd)
            assert np.isfinite(h).all()
            be.to_device(h.astype(np.float32))
            be.finish()

        device_path()
        host_path()
        td, th = _median(device_path, args.repeat), _median(host_path, args.repeat)
        print(f"validate+convert n={n:>11,}: device {td * 1e3:9.3f} ms ({12 * n / td / 1e9:6.1f} GB/s)"
              f"  host round trip {th * 1e3:9.3f} ms  ratio host/device {th / td:6.2f}")
    n = args.simplex_n
    x = np.sin(np.arange(n) * 0.3) + 0.01 * np.random.default_rng(1).standard_normal(n)
    xd = be.to_device(x)
    pe.simplex(x, E=3, device=be)
    pe.simplex(xd, E=3, device=be, return_device=True)
    th = _median(lambda: pe.simplex(x, E=3, device=be), 3)
    td = _median(lambda: (pe.simplex(xd, E=3, device=be, return_device=True), be.finish()), 3)
    print(f"simplex n={n:,} E=3: numpy in/out {th * 1e3:.2f} ms  device in/out {td * 1e3:.2f} ms"
          f"  ratio {th / td:.2f}")


if __name__ == "__main__":
    main()
