"""Measured device peaks (memory bandwidth, FMA throughput) for roofline reports.

Benchmarks print achieved GB/s and GFLOP/s *against these*, measured by our own
small kernels on the same device in the same process, rather than against
datasheet numbers that a given runtime may never reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backends import Backend, get_backend, round_up


@dataclass(frozen=True)
class Peaks:
    device: str
    bandwidth_gbs: float  # streaming triad, bytes moved / s
    gflops: float  # float32 FMA throughput (2 flops per FMA)

    def ridge(self) -> float:
        """Arithmetic intensity (flop/byte) where a kernel stops being memory bound."""
        return self.gflops / self.bandwidth_gbs


_cache: dict[str, Peaks] = {}


def measure_peaks(device=None, *, n_bytes: int | None = None, repeats: int = 5) -> Peaks:
    """Best-of-``repeats`` triad bandwidth and FMA rate of a device (cached per process)."""
    be: Backend = get_backend(device)
    key = be.info.fingerprint + be.name
    if key in _cache:
        return _cache[key]
    vec = 4
    if n_bytes is None:
        n_bytes = (256 << 20) if be.info.is_gpu else (64 << 20)
    n_bytes = min(n_bytes, be.info.max_alloc_bytes // 2)
    n = n_bytes // (4 * vec)
    wg = min(256, be.info.max_work_group_size)
    tri = be.kernel("peak.cl.mako", {"REAL": "float", "VEC": vec, "FMA_CHAIN": 64}, "triad")
    a, b, c = (be.zeros(n * vec, np.float32) for _ in range(3))
    gs = round_up(n, wg)
    be.wait(be.launch(tri, (gs,), (wg,), a, b, c, np.float32(0.5), np.int32(n)))
    t = min(be.event_seconds(be.launch(tri, (gs,), (wg,), a, b, c, np.float32(0.5), np.int32(n)))
            for _ in range(repeats))
    bandwidth = 3 * n * vec * 4 / t / 1e9
    fk = be.kernel("peak.cl.mako", {"REAL": "float", "VEC": vec, "FMA_CHAIN": 64}, "fma_chain")
    items = be.info.compute_units * wg * (64 if be.info.is_gpu else 16)
    items = round_up(items, wg)
    out = be.empty(items, np.float32)
    be.wait(be.launch(fk, (items,), (wg,), out, np.float32(1.0)))
    t = min(be.event_seconds(be.launch(fk, (items,), (wg,), out, np.float32(1.0)))
            for _ in range(repeats))
    gflops = items * 64 * 4 * vec * 2 / t / 1e9
    p = Peaks(be.info.name, bandwidth, gflops)
    _cache[key] = p
    return p


def report(achieved_bytes: float, achieved_flops: float, seconds: float, peaks: Peaks) -> str:
    """One line: achieved GB/s and GFLOP/s, as fractions of the measured peaks."""
    gbs = achieved_bytes / seconds / 1e9
    gf = achieved_flops / seconds / 1e9
    return (f"{gbs:8.1f} GB/s ({100 * gbs / peaks.bandwidth_gbs:5.1f}% of {peaks.bandwidth_gbs:.0f}), "
            f"{gf:8.1f} GFLOP/s ({100 * gf / peaks.gflops:5.1f}% of {peaks.gflops:.0f})")
