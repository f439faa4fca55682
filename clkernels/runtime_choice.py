"""The default CPU runtime per kernel family, by measured speed.

Where no GPU is present and more than one CPU runtime builds kernels (PoCL and Intel's,
say), the fixed preference order of :func:`clkernels.devices.default_device` picks the
same runtime for all work, although which one is faster depends on the kernel family
and the CPU. :func:`default_for` instead compares the timings that tuning measured on
each runtime of this machine (the user database and the shipped ``device``-level
entries: timings of this device, not of a class of devices) for the families that
dominate a piece of work, on every bucket both runtimes have a timing for (the
family's default buckets and any other a tuning run wrote), and returns the runtime
with the smaller geometric-mean time. With no common timings, with an explicit
device selector, or with a GPU as the default, it returns None and the caller keeps
the ordinary default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from . import settings
from .devices import DeviceInfo, default_device, list_devices, usable
from .tuning.database import UserDB, lookup, same_cpu, shipped_entries
from .tuning.family import TunableKernel

#: lookup sources that are timings of this very device (user tuning, shipped device level)
MEASURED_SOURCES = ("user", "shipped:device")

_cache: dict[tuple, DeviceInfo | None] = {}


def measured_time(kernel: TunableKernel, info: DeviceInfo, spec_bucket: str, size_bucket: str,
                  user_root: Path | None = None) -> float | None:
    """Seconds of the tuned parameters of ``kernel`` at this bucket on ``info``, when
    tuning measured them on this device (None: no such timing)."""
    choice = lookup(kernel, info, spec_bucket, size_bucket, user_root)
    if choice.source not in MEASURED_SOURCES or choice.entry is None:
        return None
    if choice.entry.get("size_bucket") != size_bucket or choice.entry.get("spec_bucket") != spec_bucket:
        return None  # a neighbouring bucket's timing: not comparable across runtimes
    t = choice.entry.get("time_s")
    return float(t) if isinstance(t, int | float) and t > 0 else None


def _buckets(kernel: TunableKernel, info: DeviceInfo) -> list[tuple[str, str]]:
    out = []
    for spec in kernel.default_specs():
        if not kernel.applies(spec, info):
            continue
        for size in kernel.default_sizes(info):
            b = (kernel.spec_bucket(spec), kernel.size_bucket(size))
            if b not in out:
                out.append(b)
    return out


def _timed_buckets(kernel: TunableKernel, info: DeviceInfo, user_root: Path | None
                   ) -> list[tuple[str, str]]:
    """Buckets of ``kernel`` that tuning timed on this very device: its user database and
    the shipped ``device``-level entries measured on this CPU (a quick tune, say, times
    other sizes than the family's default ones)."""
    ents = [e for e in UserDB(info, user_root).load().values() if isinstance(e, dict)]
    ents += [e for e in shipped_entries() if isinstance(e, dict) and e.get("level") == "device"
             and e.get("key") == info.device_key and same_cpu(e, info)]
    return [(str(e["spec_bucket"]), str(e["size_bucket"])) for e in ents
            if e.get("kernel") == kernel.name and "spec_bucket" in e and "size_bucket" in e]


def fastest(kernels: Sequence[TunableKernel], cpus: Sequence[DeviceInfo], *,
            timing: Callable[..., float | None] = measured_time,
            user_root: Path | None = None) -> DeviceInfo | None:
    """The device of ``cpus`` with the smallest geometric-mean measured time over the
    (family, spec bucket, size bucket) triples that every one of them has a timing for;
    None when they share none."""
    if len(cpus) < 2:
        return None
    logs = {i: 0.0 for i in range(len(cpus))}
    common = 0
    for kernel in kernels:
        buckets = list(dict.fromkeys(
            _buckets(kernel, cpus[0]) + [b for d in cpus for b in _timed_buckets(kernel, d, user_root)]))
        for sb, zb in buckets:
            ts = [timing(kernel, d, sb, zb, user_root) for d in cpus]
            if any(t is None for t in ts):
                continue
            common += 1
            for i, t in enumerate(ts):
                logs[i] += math.log(t)
    if not common:
        return None
    return cpus[min(logs, key=logs.get)]


def default_for(kernels: Sequence[TunableKernel], devs: Sequence[DeviceInfo] | None = None, *,
                user_root: Path | None = None) -> DeviceInfo | None:
    """The CPU runtime that runs ``kernels`` fastest on this machine, when the default
    would be a CPU and several CPU runtimes work; None: use the ordinary default
    (an explicit ``<PREFIX>_DEVICE`` / ``PYOPENCL_CTX`` selector, a GPU, one CPU
    runtime, or no timings both runtimes share). Cached per process."""
    if settings.env("DEVICE") or os.environ.get("PYOPENCL_CTX"):
        return None
    devs = list_devices() if devs is None else list(devs)
    key = (tuple(k.name for k in kernels), tuple(d.fingerprint for d in devs), str(user_root))
    if key in _cache:
        return _cache[key]
    first, _ = default_device(devs)
    choice = None
    if not first.is_gpu:
        cpus = [d for d in devs if d.device_type != "gpu" and d.runtime != "oclgrind"
                and usable(d).ok]
        choice = fastest(kernels, cpus, user_root=user_root)
    _cache[key] = choice
    return choice
