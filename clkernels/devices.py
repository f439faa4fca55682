"""OpenCL devices as facts: enumeration, fingerprints, and selection.

A :class:`DeviceInfo` is a frozen record of what a device *is* (vendor, normalised
name, driver, limits). Its :attr:`DeviceInfo.fingerprint` keys every cache and
tuning entry. :func:`select_device` implements the selection order: an explicit
selector (argument or ``<PREFIX>_DEVICE``, see :mod:`clkernels.settings`), else the
fastest GPU, else a CPU runtime (PoCL first, then Intel), never Oclgrind unless asked for.

A device is chosen only if it can build: every selection asks :func:`usable`, which
compiles and runs a tiny probe kernel once per device and build setting (the verdict is
cached on disk, see :mod:`clkernels.probe`). The default skips a failing device with a
one-line note on stderr; an explicit selector naming one raises
:class:`DeviceUnusableError` listing the devices that work; when none works,
:class:`NoWorkingDeviceError` says what each runtime answered and how to fix it.
``<PREFIX>_NO_PROBE=1`` turns the probe off (every device counts as usable).
"""

from __future__ import annotations

import os
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from . import settings
from .cpuclass import HOST_RUNTIMES, CpuClass, cpu_class, host_cpu_facts
from .probe import Verdict, note
from .probe import probe as _probe
from .registration import register_platforms

register_platforms()
import pyopencl as cl  # noqa: E402  (must follow registration)

if not os.environ.get("PYOPENCL_COMPILER_OUTPUT"):
    # PoCL and Intel print build notes for every program (ours and PyOpenCL's own
    # elementwise kernels); they are not errors. PYOPENCL_COMPILER_OUTPUT=1 shows them.
    warnings.filterwarnings("ignore", category=cl.CompilerWarning)

#: Short runtime names understood by selectors, matched against the platform name.
RUNTIME_ALIASES = {
    "pocl": ("portable computing language", "pocl"),
    "intel": ("intel",),
    "nvidia": ("nvidia",),
    "amd": ("amd", "advanced micro devices"),
    "oclgrind": ("oclgrind",),
    "apple": ("apple",),
}
_CPU_PREFERENCE = ("pocl", "intel", "amd", "apple")


def normalise_name(name: str) -> str:
    """One normalisation for device names, used when writing *and* reading keys.

    ``"pthread-Intel(R) Xeon(R) Processor"`` -> ``"intel-xeon-processor"``;
    ``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``.
    """
    s = name.lower()
    s = re.sub(r"\((r|tm|c)\)", " ", s)
    s = re.sub(r"^(pthread|cpu|basic)-", "", s)
    s = re.sub(r"\bcpu @.*$", "", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s


def runtime_of(platform_name: str) -> str:
    """Short runtime name (``pocl``, ``intel``, ``nvidia``, ...) of a platform."""
    low = platform_name.lower()
    for short, needles in RUNTIME_ALIASES.items():
        if any(n in low for n in needles):
            # Oclgrind's platform name contains no vendor; check it before "intel".
            return short
    return normalise_name(platform_name).split("-")[0] or "unknown"


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is: the facts that key caches and tuning entries."""

    platform_index: int
    device_index: int
    platform_name: str
    runtime: str
    vendor: str
    name: str
    normalised_name: str
    driver_version: str
    device_type: str
    compute_units: int
    clock_mhz: int
    local_mem_bytes: int
    global_mem_bytes: int
    max_alloc_bytes: int
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    fp64: bool
    opencl_c_version: str
    extensions: tuple[str, ...] = field(repr=False, default=())
    #: CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: the device can build with
    #: -cl-fp32-correctly-rounded-divide-sqrt (backends then always do)
    correct_div_sqrt: bool = False
    #: CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: the SIMD width the runtime generates for
    native_vector_width_float: int = 0
    #: the host CPU's vendor, microarchitecture family and widest SIMD (bits) from the OS,
    #: for CPU devices of host runtimes (:mod:`clkernels.cpuclass`); empty/0 if unknown
    cpu_vendor: str = ""
    cpu_family: str = ""
    cpu_simd_bits: int = 0
    #: the per-core cache size /proc/cpuinfo states (KiB), 0 if unknown
    cpu_cache_kib: int = 0

    @property
    def selector(self) -> str:
        """PyOpenCL-style ``p:d`` selector of this device in this process."""
        return f"{self.platform_index}:{self.device_index}"

    @cached_property
    def device_key(self) -> str:
        """Exact-device tuning key (runtime + normalised name), driver kept apart."""
        return f"{self.runtime}|{self.normalised_name}"

    @property
    def arch_key(self) -> str:
        """Architecture tuning key: runtime + type + family (first name tokens)."""
        family = "-".join(self.normalised_name.split("-")[:2])
        return f"{self.runtime}|{self.device_type}|{family}"

    @property
    def cpu_class(self) -> CpuClass | None:
        """The CPU class tuning entries transfer by (None for a device that is no CPU)."""
        return cpu_class(self.as_dict())

    @property
    def vendor_type_key(self) -> str:
        """Vendor+type tuning key (e.g. ``pocl|cpu``, ``nvidia|gpu``)."""
        return f"{self.runtime}|{self.device_type}"

    @cached_property  # (the fields are frozen; every launch's caches ask)
    def fingerprint(self) -> str:
        """Key for program caches: everything that can change generated code or timings."""
        return "|".join(
            [
                self.runtime,
                self.normalised_name,
                self.driver_version,
                f"cu{self.compute_units}",
                f"lm{self.local_mem_bytes}",
                f"wg{self.max_work_group_size}",
                "fp64" if self.fp64 else "fp32",
            ]
        )

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "gpu"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extensions")
        d["fingerprint"] = self.fingerprint
        return d


def _type_name(t: int) -> str:
    if t & cl.device_type.GPU:
        return "gpu"
    if t & cl.device_type.CPU:
        return "cpu"
    if t & cl.device_type.ACCELERATOR:
        return "accelerator"
    return "other"


def _describe(pi: int, di: int, platform: cl.Platform, dev: cl.Device) -> DeviceInfo:
    exts = tuple(dev.extensions.split())
    fp64 = "cl_khr_fp64" in exts or bool(getattr(dev, "double_fp_config", 0))
    try:
        c_version = dev.opencl_c_version
    except cl.Error:  # pragma: no cover - OpenCL 1.0 devices
        c_version = "OpenCL C 1.0"
    runtime = runtime_of(platform.name)
    dtype = _type_name(dev.type)
    host = host_cpu_facts() if dtype == "cpu" and runtime in HOST_RUNTIMES else {}
    try:
        native_float = int(dev.native_vector_width_float)
    except cl.Error:  # pragma: no cover - a runtime that does not answer
        native_float = 0
    return DeviceInfo(
        platform_index=pi,
        device_index=di,
        platform_name=platform.name.strip(),
        runtime=runtime,
        vendor=dev.vendor.strip(),
        name=dev.name.strip(),
        normalised_name=normalise_name(dev.name),
        driver_version=dev.driver_version.strip(),
        device_type=dtype,
        compute_units=int(dev.max_compute_units),
        clock_mhz=int(dev.max_clock_frequency),
        local_mem_bytes=int(dev.local_mem_size),
        global_mem_bytes=int(dev.global_mem_size),
        max_alloc_bytes=int(dev.max_mem_alloc_size),
        max_work_group_size=int(dev.max_work_group_size),
        max_work_item_sizes=tuple(int(x) for x in dev.max_work_item_sizes),
        fp64=fp64,
        opencl_c_version=c_version,
        extensions=exts,
        correct_div_sqrt=bool(dev.single_fp_config
                              & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
        native_vector_width_float=native_float,
        cpu_vendor=host.get("cpu_vendor", ""),
        cpu_family=host.get("cpu_family", ""),
        cpu_simd_bits=host.get("cpu_simd_bits", 0),
        cpu_cache_kib=host.get("cpu_cache_kib", 0),
    )


_cache: list[tuple[DeviceInfo, cl.Device]] | None = None

#: ``clGetPlatformIDs``' answer when no runtime is installed (the ICD loader finds none)
PLATFORM_NOT_FOUND_KHR = -1001
#: pauses (s) between the attempts at enumerating platforms: a runtime under load can
#: fail once (out of host memory or resources) and answer the next call
ENUM_RETRY_DELAYS = (0.1, 0.3, 0.9)


class PlatformEnumerationError(RuntimeError):
    """Enumerating OpenCL platforms failed with an OpenCL error other than "no platform"
    (the runtime is there but did not answer); names the error's code and name."""


def cl_error_text(exc: BaseException) -> str:
    """``OUT_OF_HOST_MEMORY (-6)``: the name and code of an OpenCL error (else its text)."""
    code = getattr(exc, "code", None)
    if not isinstance(code, int):
        return f"{type(exc).__name__}: {exc}"
    try:
        name = cl.status_code.to_string(code)
    except ValueError:
        name = "unknown OpenCL error"
    return f"{name} ({code})"


def _platforms() -> list[Any]:
    """``cl.get_platforms()``, retried with backoff on OpenCL errors; [] when no runtime is
    installed (``PLATFORM_NOT_FOUND_KHR``); :class:`PlatformEnumerationError` naming the
    error when every attempt fails (never mistaken for "no runtime")."""
    for attempt, pause in enumerate((*ENUM_RETRY_DELAYS, None)):
        try:
            return list(cl.get_platforms())
        except cl.Error as exc:
            if getattr(exc, "code", None) == PLATFORM_NOT_FOUND_KHR:
                return []
            if pause is None:
                raise PlatformEnumerationError(
                    f"enumerating OpenCL platforms failed: {cl_error_text(exc)} from "
                    f"{getattr(exc, 'routine', None) or 'clGetPlatformIDs'} on {attempt + 1} "
                    "attempts; an OpenCL runtime is installed but did not answer (often "
                    "transient, under load or low memory): run the command again") from exc
            time.sleep(pause)
    raise AssertionError("unreachable")  # pragma: no cover


def _enumerate() -> list[tuple[DeviceInfo, cl.Device]]:
    global _cache
    if _cache is None:
        found = []
        platforms = _platforms()  # an error is raised, not cached as "no platform"
        for pi, p in enumerate(platforms):
            try:
                devs = p.get_devices()
            except cl.Error:
                continue
            for di, d in enumerate(devs):
                found.append((_describe(pi, di, p, d), d))
        _cache = found
    return _cache


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device of every platform the ICD loader can see."""
    return [info for info, _ in _enumerate()]


def cl_device(info: DeviceInfo) -> cl.Device:
    """The PyOpenCL device object behind a :class:`DeviceInfo`."""
    found = _enumerate()
    for i, d in found:
        if i is info:  # (the usual case: the listed object itself)
            return d
    for i, d in found:
        if i == info:
            return d
    raise KeyError(info.selector)


def _speed_score(d: DeviceInfo) -> float:
    return d.compute_units * max(d.clock_mhz, 1)


class DeviceSelectionError(ValueError):
    """An unknown or unavailable device selector; the message lists what exists."""


class DeviceUnusableError(DeviceSelectionError):
    """The device selected cannot build kernels (its probe failed); says why."""

    #: the latest one made in this process (test harnesses skip on it; see tests/conftest.py)
    last: DeviceUnusableError | None = None

    def __init__(self, *args: object):
        super().__init__(*args)
        DeviceUnusableError.last = self


class NoWorkingDeviceError(DeviceUnusableError):
    """No OpenCL device can build kernels: each runtime's failure and the fix."""


def fix_hint() -> str:
    """Printed under "nothing works": the commands that give a working device."""
    s = settings.current()
    extra = f"   (or: pip install '{s.extras_of}[intel]')" if s.extras_of else ""
    see = f"{s.help_hint}; " if s.help_hint else ""
    return (
        "to fix, install a runtime that builds for this machine:\n"
        f"  CPU (x86-64 Linux): pip install intel-opencl-rt intel-cmplr-lib-rt{extra}\n"
        "  NVIDIA GPU: the NVIDIA driver (its OpenCL ICD, libnvidia-opencl)\n"
        "  AMD GPU: ROCm's OpenCL runtime (apt install rocm-opencl-runtime)\n"
        "  Intel GPU: Intel's compute runtime (apt install intel-opencl-icd)\n"
        f"{see}{settings.env_name('NO_PROBE')}=1 skips this check"
    )


def build_options(info: DeviceInfo) -> tuple[str, ...]:
    """Options of every build on ``info``: correctly rounded float32 ``/`` and ``sqrt``
    where the device offers them, ``-D CLKERNELS_OCLGRIND`` on Oclgrind (its interpreter
    lacks some LLVM intrinsics, e.g. the funnel shift clang makes of
    ``(a << 1) | (b >> 31)``: a kernel can take another form there), then
    ``<PREFIX>_BUILD_OPTIONS``."""
    opts = ("-cl-fp32-correctly-rounded-divide-sqrt",) if info.correct_div_sqrt else ()
    if info.runtime == "oclgrind":
        opts += ("-D", "CLKERNELS_OCLGRIND")
    return opts + tuple((settings.env("BUILD_OPTIONS") or "").split())


def inline_vector_ops(info: DeviceInfo) -> bool:
    """Whether kernels on ``info`` take the inline forms of OpenCL's vector built-ins
    (the ``INL`` value of ``templates/_vecops.mako``): on PoCL, which calls its kernel
    library's select / any / max / shuffle2 / vloadN out of line."""
    return info.runtime == "pocl"


def explicit_vectors_only(info: DeviceInfo) -> bool:
    """Whether kernels written in explicit lane vectors should carry ``vec_type_hint`` of
    their vector type, so that the compiler does not vectorize them across work-items
    too: on Intel's CPU runtime for an x86 CPU without AVX-512. There its implicit
    vectorizer (runtime 2026.2, AVX2 target, e.g. AMD Zen 3) crashes compiling RQA's
    line kernels, or emits code that segfaults; the kernels' own vectors already fill
    the SIMD lanes (decision 0171)."""
    return info.runtime == "intel" and not info.is_gpu and 0 < info.cpu_simd_bits < 512


def fuses_despite_pragma(info: DeviceInfo) -> bool:
    """Whether the compiler may fuse a product into the sum that takes it (one rounding
    instead of two) although the source says ``#pragma OPENCL FP_CONTRACT OFF``: Intel's
    CPU runtime (2026.2) for an x86 CPU without AVX-512 does so in scalar reductions
    such as ``s += a * b`` in a loop, even split into two statements (AMD Zen 3: CCM's
    float32 predictions 2-7 ulp off PoCL's and the unoptimised build's at K = 16;
    ``#pragma clang fp contract(off)`` does not stop it). Kernels whose sums must round
    alike on every runtime round such a product through a ``volatile`` there."""
    return info.runtime == "intel" and not info.is_gpu and 0 < info.cpu_simd_bits < 512


def usable(info: DeviceInfo) -> Verdict:
    """Whether ``info`` builds and runs a probe kernel (cached; see :mod:`clkernels.probe`)."""
    if settings.flag("NO_PROBE"):
        return Verdict(True, f"probe off ({settings.env_name('NO_PROBE')})")
    return _probe(info, cl_device(info), build_options(info))


def _label(d: DeviceInfo) -> str:
    return f"{d.runtime} {d.name}"


def _working_text(devs: list[DeviceInfo]) -> str:
    ok = [d for d in devs if usable(d).ok]
    if not ok:
        return "no device builds kernels"
    return "devices that work: " + ", ".join(f"{d.selector} ({_label(d)})" for d in ok)


def _check_usable(d: DeviceInfo, selector: str, devs: list[DeviceInfo]) -> DeviceInfo:
    v = usable(d)
    if not v.ok:
        raise DeviceUnusableError(
            f"device {selector!r} ({d.selector} {_label(d)}) cannot build kernels: {v.reason}; "
            + _working_text(devs))
    return d


def _nothing_works(devs: list[DeviceInfo]) -> NoWorkingDeviceError:
    if not devs:
        lines = ["no OpenCL platform is visible (PoCL from pocl-binary-distribution, "
                 "Intel's from intel-opencl-rt, a GPU driver's ICD)"]
    else:
        lines = [f"  {d.selector} {_label(d)}: {usable(d).reason}" for d in devs]
        lines.insert(0, "no OpenCL device can build kernels; tried:")
    return NoWorkingDeviceError("\n".join(lines) + "\n" + fix_hint())


def _available_text(devs: list[DeviceInfo]) -> str:
    if not devs:
        return "no OpenCL devices are visible (is pocl-binary-distribution installed?)"
    lines = [f"  {d.selector}  {d.runtime:<9} {d.device_type:<4} {d.name}" for d in devs]
    return (
        f"available devices (select with {settings.env_name('DEVICE')}"
        "=<runtime>[:i] | cpu | gpu | p:d):\n"
        + "\n".join(lines)
    )


def resolve_selector(selector: str, devs: list[DeviceInfo] | None = None, *,
                     probe: bool = True) -> DeviceInfo:
    """Resolve ``pocl``, ``intel:0``, ``nvidia``, ``gpu``, ``cpu:1``, ``0:1`` to one device.

    With ``probe`` (the default), a device type (``gpu``, ``cpu:1``) counts only the
    devices that build kernels, and a named device that cannot raises
    :class:`DeviceUnusableError` saying why and listing those that can.
    """
    devs = list_devices() if devs is None else devs
    sel = selector.strip().lower()
    m = re.fullmatch(r"(\d+)(?::(\d+))?", sel)
    if m:  # PyOpenCL's PYOPENCL_CTX form "p" or "p:d"
        pi, di = int(m.group(1)), int(m.group(2) or 0)
        for d in devs:
            if d.platform_index == pi and d.device_index == di:
                return _check_usable(d, selector, devs) if probe else d
        raise DeviceSelectionError(f"device {selector!r} does not exist; " + _available_text(devs))
    name, _, idx = sel.partition(":")
    if idx and not idx.isdigit():
        raise DeviceSelectionError(
            f"device index in {selector!r} must be an integer; " + _available_text(devs)
        )
    index = int(idx) if idx else 0
    if name in ("gpu", "cpu", "accelerator"):
        matches = [d for d in devs if d.device_type == name and d.runtime != "oclgrind"]
        if name == "cpu":
            matches.sort(key=_cpu_rank)
        else:
            matches.sort(key=_speed_score, reverse=True)
        if probe and matches:
            working = [d for d in matches if usable(d).ok]
            if index >= len(working):
                raise DeviceUnusableError(
                    f"no {name} device that builds kernels matches {selector!r}; "
                    + "; ".join(f"{_label(d)}: {usable(d).reason}" for d in matches
                                if not usable(d).ok) + "; " + _working_text(devs))
            return working[index]
    else:
        matches = [d for d in devs if d.runtime == name]
        if not matches:  # substring of the device name, e.g. "h100"
            matches = [d for d in devs if name in d.normalised_name]
    if index >= len(matches):
        raise DeviceSelectionError(
            f"no device matches {settings.env_name('DEVICE')}/device={selector!r}; "
            + _available_text(devs)
        )
    return _check_usable(matches[index], selector, devs) if probe else matches[index]


def _cpu_rank(d: DeviceInfo) -> int:
    try:
        return _CPU_PREFERENCE.index(d.runtime)
    except ValueError:
        return len(_CPU_PREFERENCE)


#: :func:`_candidates`' last answer and the device objects it was for
_candidates_memo: tuple[tuple[DeviceInfo, ...], list[tuple[DeviceInfo, str]]] | None = None


def _candidates(devs: list[DeviceInfo]) -> list[tuple[DeviceInfo, str]]:
    """Devices in default order with the reason each would be chosen (remembered for the
    same device objects: every call that takes the default device asks)."""
    global _candidates_memo
    memo = _candidates_memo
    if (memo is not None and len(memo[0]) == len(devs)
            and all(a is b for a, b in zip(memo[0], devs, strict=True))):
        return list(memo[1])
    got = _rank(devs)
    _candidates_memo = (tuple(devs), got)
    return list(got)


def _rank(devs: list[DeviceInfo]) -> list[tuple[DeviceInfo, str]]:
    """:func:`_candidates` computed."""
    gpus = sorted((d for d in devs if d.device_type == "gpu" and d.runtime != "oclgrind"),
                  key=_speed_score, reverse=True)
    cpus = sorted((d for d in devs if d.runtime != "oclgrind" and d.device_type != "gpu"),
                  key=_cpu_rank)
    rest = [d for d in devs if d not in gpus and d not in cpus]
    return ([(d, "fastest GPU (compute units x clock)") for d in gpus]
            + [(d, f"no GPU; CPU runtime preference {'>'.join(_CPU_PREFERENCE)}") for d in cpus]
            + [(d, "only device present") for d in rest[:1] if not gpus and not cpus])


def default_device(devs: list[DeviceInfo] | None = None, *,
                   probe: bool = True) -> tuple[DeviceInfo, str]:
    """The default device and why it was chosen (fastest GPU, else a CPU runtime).

    With ``probe``, devices that cannot build kernels are skipped (one line on stderr
    each where its probe ran in this process: the device, its compiler's first error
    line, what was chosen instead; a verdict read from the probe cache skips it quietly,
    so the line comes on the first run only, as the compile notice does); if none can,
    :class:`NoWorkingDeviceError`.
    """
    devs = list_devices() if devs is None else devs
    cands = _candidates(devs)
    if not cands:
        raise _nothing_works([]) if probe else DeviceSelectionError(_available_text(devs))
    if not probe:
        return cands[0]
    skipped: list[tuple[DeviceInfo, str, bool]] = []
    for d, why in cands:
        v = usable(d)
        if not v.ok:
            skipped.append((d, v.reason, v.cached))
            continue
        for s, reason, cached in skipped:
            if not cached:
                note(f"skipping {_label(s)}: it cannot build kernels ({reason}); using "
                     f"{_label(d)} instead")
        if skipped:
            why += f" ({', '.join(s.runtime for s, _, _ in skipped)} skipped: probe failed)"
        return d, why
    raise _nothing_works(devs)


def select_device(device: str | DeviceInfo | None = None) -> DeviceInfo:
    """Pick a device: explicit argument, else ``<PREFIX>_DEVICE``/``PYOPENCL_CTX``, else default."""
    if isinstance(device, DeviceInfo):
        return device
    sel = device or settings.env("DEVICE") or os.environ.get("PYOPENCL_CTX")
    if sel:
        return resolve_selector(sel)
    return default_device()[0]
