"""CPU classes: which measured CPU an unseen CPU should borrow tuning entries from.

A tuning entry measured on one CPU is a better start on a similar CPU than the
global default: the same OpenCL runtime generates the same kind of code, and the
same SIMD width and a similar core count shape the best work-group and tile sizes.
:func:`cpu_class` computes a CPU's class from the facts OpenCL and the OS give
(a :meth:`DeviceInfo.as_dict` mapping, or the ``device`` header of a tuning file):

- ``runtime``: the OpenCL runtime (``pocl``, ``intel``, ...);
- ``vendor``: the CPU's vendor (``amd``, ``intel``, ``arm``, ``apple``) from
  ``/proc/cpuinfo`` where the device was described, else from the device name;
- ``family``: the microarchitecture family where known (``zen5``, ``x86-f6-m143``,
  ``arm-0x41-0xd0c``), else ``""``;
- ``simd_bits``: the vector width the runtime generates code for (native float
  vector width x 32), else the widest SIMD of the CPU's flags (AVX-512: 512), else 0;
- ``cores``: the device's compute units;
- ``cache_kib``: the per-core cache ``/proc/cpuinfo`` states (``cache size``: L2 on
  AMD, L3 on most Intel parts), in KiB, else 0.

The same function serves writing (the tuner stores the class in each entry) and
reading (shipped entries without a stored class get it from their file's header),
so both sides agree by construction.

*Nearest* (:meth:`CpuClass.distance`): a candidate must have the same runtime and
vendor, and the same SIMD width where both widths are known; among those, a known
equal width beats an unknown one, then an equal family beats an unknown one beats a
different one, then the closest core count (|log2 of the ratio|), then the closest
cache size (|log2 of the ratio|; unknown sizes last) wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

#: CPU vendors recognised in ``/proc/cpuinfo`` ``vendor_id`` and in device names
_VENDOR_IDS = {"authenticamd": "amd", "hygongenuine": "amd", "genuineintel": "intel"}
_NAME_VENDORS = ("amd", "intel", "apple", "arm", "ampere", "neoverse", "cortex")
#: runtimes that run on the host CPU (their CPU is the one /proc/cpuinfo describes)
HOST_RUNTIMES = ("pocl", "intel", "amd", "apple")


@dataclass(frozen=True)
class CpuClass:
    """The class of a CPU device; see the module docstring for each field."""

    runtime: str
    vendor: str
    family: str = ""
    simd_bits: int = 0
    cores: int = 0
    cache_kib: int = 0

    @property
    def key(self) -> str:
        """Readable key, e.g. ``intel|amd|zen5|v512|c2`` (``?`` for unknown facts; the
        cache size, ``|k1024``, only where known)."""
        return "|".join([self.runtime, self.vendor or "?", self.family or "?",
                         f"v{self.simd_bits or '?'}", f"c{self.cores or '?'}"]
                        + ([f"k{self.cache_kib}"] if self.cache_kib else []))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> CpuClass:
        """The class stored in an entry; ValueError naming the field if it is malformed."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a cpu_class must be an object, got {type(d).__name__}")
        out = {}
        for name, typ in (("runtime", str), ("vendor", str), ("family", str),
                          ("simd_bits", int), ("cores", int), ("cache_kib", int)):
            v = d.get(name, "" if typ is str else 0)
            if not isinstance(v, typ) or isinstance(v, bool) or (typ is int and v < 0):
                raise ValueError(f"cpu_class field {name!r} must be a "
                                 f"{'string' if typ is str else 'non-negative integer'}, got {v!r}")
            out[name] = v
        if not out["runtime"]:
            raise ValueError("cpu_class field 'runtime' is empty")
        return cls(**out)

    def distance(self, other: CpuClass) -> tuple[int, int, float, float] | None:
        """How far ``other`` is from this class (smaller is nearer), None if unrelated.

        Unrelated: another runtime, another or unknown vendor, or another SIMD width
        where both are known.
        """
        if other.runtime != self.runtime or not self.vendor or other.vendor != self.vendor:
            return None
        if self.simd_bits and other.simd_bits and self.simd_bits != other.simd_bits:
            return None
        width = 0 if (self.simd_bits and self.simd_bits == other.simd_bits) else 1
        if self.family and self.family == other.family:
            fam = 0
        elif not self.family or not other.family:
            fam = 1
        else:
            fam = 2
        if self.cores and other.cores:
            cores = abs(math.log2(self.cores / other.cores))
        else:
            cores = math.inf
        if self.cache_kib and other.cache_kib:
            cache = abs(math.log2(self.cache_kib / other.cache_kib))
        else:
            cache = math.inf
        return (width, fam, cores, cache)


def cpu_class(facts: Mapping[str, Any]) -> CpuClass | None:
    """The class of the device ``facts`` describe, None for a device that is no CPU.

    ``facts``: :meth:`DeviceInfo.as_dict` or a tuning file's ``device`` header (older
    headers lack ``cpu_*`` and vector-width facts: those read as unknown).
    ValueError if a fact has the wrong type.
    """
    if not isinstance(facts, Mapping):
        raise ValueError(f"device facts must be an object, got {type(facts).__name__}")
    if facts.get("device_type") != "cpu":
        return None
    runtime = facts.get("runtime")
    if not isinstance(runtime, str) or not runtime:
        raise ValueError(f"device fact 'runtime' must be a non-empty string, got {runtime!r}")

    def _int(name: str) -> int:
        v = facts.get(name, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"device fact {name!r} must be a non-negative integer, got {v!r}")
        return v

    def _str(name: str) -> str:
        v = facts.get(name, "")
        if not isinstance(v, str):
            raise ValueError(f"device fact {name!r} must be a string, got {v!r}")
        return v

    vendor = _str("cpu_vendor") or _vendor_from_name(_str("normalised_name") or _str("name"))
    native = _int("native_vector_width_float")
    simd = native * 32 if native > 1 else _int("cpu_simd_bits")
    return CpuClass(runtime=runtime, vendor=vendor, family=_str("cpu_family"), simd_bits=simd,
                    cores=_int("compute_units"), cache_kib=_int("cpu_cache_kib"))


def _vendor_from_name(name: str) -> str:
    tokens = re.split(r"[^a-z0-9]+", name.lower())
    for t in tokens:
        if t in _NAME_VENDORS:
            return "arm" if t in ("ampere", "neoverse", "cortex") else t
    return ""


def host_cpu_facts() -> dict[str, Any]:
    """``cpu_vendor``, ``cpu_family``, ``cpu_simd_bits`` and ``cpu_cache_kib`` of this
    machine's CPU from ``/proc/cpuinfo`` (empty values where the OS does not say, e.g.
    off Linux)."""
    return dict(_host_cpu_facts())


@cache
def _host_cpu_facts() -> tuple[tuple[str, Any], ...]:
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read(200_000)
    except OSError:
        text = ""
    return tuple(parse_cpuinfo(text).items())


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Vendor, microarchitecture family, widest SIMD and cache size of the first CPU in
    ``text``."""
    first: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        k, _, v = line.partition(":")
        first.setdefault(k.strip().lower(), v.strip())
    vendor = _VENDOR_IDS.get(first.get("vendor_id", "").lower(), "")
    family = ""
    try:
        fam = int(first.get("cpu family", ""), 0)
        model = int(first.get("model", ""), 0)
    except ValueError:
        fam = model = -1
    if vendor == "amd" and fam >= 0:
        family = _amd_family(fam, model)
    elif vendor and fam >= 0:
        family = f"x86-f{fam}-m{model}"
    elif "cpu implementer" in first:
        vendor = vendor or "arm"
        family = f"arm-{first['cpu implementer']}-{first.get('cpu part', '?')}"
    flags = set((first.get("flags") or first.get("features") or "").split())
    if "avx512f" in flags:
        simd = 512
    elif "avx2" in flags or "avx" in flags:
        simd = 256
    elif flags & {"sse2", "asimd", "neon"}:
        simd = 128
    else:
        simd = 0
    m = re.fullmatch(r"(\d+)\s*([KMG]?)B?", first.get("cache size", "").strip(), re.I)
    cache = int(m.group(1)) * {"": 1, "K": 1, "M": 1024, "G": 1 << 20}[m.group(2).upper()] if m else 0
    return {"cpu_vendor": vendor, "cpu_family": family, "cpu_simd_bits": simd,
            "cpu_cache_kib": cache}


def _amd_family(fam: int, model: int) -> str:
    """AMD's family/model numbers as Zen generations (AMD's published ranges)."""
    if fam == 0x17:
        return "zen2" if model >= 0x30 else "zen1"
    if fam == 0x19:
        return "zen4" if (0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F
                          or 0xA0 <= model <= 0xAF) else "zen3"
    if fam == 0x1A:
        return "zen5"
    return f"amd-f{fam}"
