"""Can this device build and run a kernel? Asked once, remembered on disk; quiet builds.

:func:`probe` compiles a tiny kernel on one device (its source made unique so no
compiler cache answers for the compiler), runs it on four work-items and checks the
result. The verdict is kept on disk (``<cache>/probe/<key>.json``, written atomically;
an unreadable file is ignored and rewritten) under a key made of the device
fingerprint, the build options and every environment variable that changes a build
(``POCL_*`` but the cache folder, ``<PREFIX>_BUILD_OPTIONS``, ``PYOPENCL_BUILD_OPTIONS``,
``CL_CONFIG_*``), so a forced failure is never hidden by a cached success, nor the
reverse. A cached verdict costs one small file read; a cold probe one small build
(tens of milliseconds, see docs/devices.md).

The probe runs in the calling process: its only crash risks are damaged compiler
caches, which :func:`clkernels.buildcache.check_pocl_cache` clears first, and a
subprocess would cost a Python start and a platform enumeration (~0.5 s) per probe.

:func:`quiet_build` runs a build with file descriptor 2 redirected to a temporary file:
PoCL's clang writes "N warnings generated." there, below Python. It is re-entrant
across threads (the first build in redirects, the last out restores) and restores on
exceptions; the captured text goes with failure logs, or to stderr when
``PYOPENCL_COMPILER_OUTPUT=1``. A build that runs longer than a second prints, once per
device and process (in a log, where stderr is no terminal: once in all), "building kernels
for <device>; they are cached, so later runs of the same work skip this…" (never with
``<PREFIX>_QUIET=1``; ``<PREFIX>``: :mod:`clkernels.settings`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from . import settings
from .userdirs import atomic_write_text, private_dir

#: bump when the probe kernel, its checks or the verdict format change
PROBE_VERSION = 2
#: LLVM CPU names whose code may use AVX-512 (LLVM 14-20)
_AVX512_CPUS = frozenset((
    "knl", "knm", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake",
    "icelake-client", "icelake-server", "rocketlake", "tigerlake", "sapphirerapids",
    "graniterapids", "graniterapids-d", "emeraldrapids", "diamondrapids", "znver4", "znver5",
    "x86-64-v4"))
_ENV_PREFIXES = ("POCL_", "CL_CONFIG_")
_ENV_NAMES = ("PYOPENCL_BUILD_OPTIONS",)
_ENV_IGNORED = ("POCL_CACHE_DIR",)


@dataclass(frozen=True)
class Verdict:
    """A probe's outcome: ``ok``, and if not, the first line of the failure."""

    ok: bool
    reason: str = ""
    seconds: float = 0.0
    cached: bool = False


#: :func:`build_env`'s last answer and what it was taken from: (the names asked for, the
#: environment's raw items, the answer)
_env_memo: tuple[tuple[str, ...], tuple, dict[str, str]] | None = None


def build_env() -> dict[str, str]:
    """The environment variables that can change how a kernel builds (the names picked
    first, so only their values are read: every call that selects a device asks).
    Remembered while the environment stays the same: a snapshot of its raw items is one
    C-level copy, where picking the names decodes every variable (most of a device
    selection's time)."""
    global _env_memo
    names = (*_ENV_NAMES, settings.env_name("BUILD_OPTIONS"))
    raw = getattr(os.environ, "_data", None)  # CPython's encoded mapping behind os.environ
    snap = tuple(raw.items()) if isinstance(raw, dict) else None
    memo = _env_memo
    if snap is not None and memo is not None and memo[0] == names and memo[1] == snap:
        return dict(memo[2])
    env = os.environ
    got = {k: env[k] for k in sorted(k for k in env
                                     if (k.startswith(_ENV_PREFIXES) or k in names)
                                     and k not in _ENV_IGNORED)}
    if snap is not None:
        _env_memo = (names, snap, got)
    return dict(got)


#: probe keys by their inputs (the build environment's items among them)
_keys: dict[tuple, str] = {}


def probe_key(fingerprint: str, platform_name: str, options: tuple[str, ...]) -> str:
    """The verdict's cache key: device, build options, build environment."""
    import pyopencl

    env = build_env()
    memo = (fingerprint, platform_name, tuple(options), tuple(env.items()))
    key = _keys.get(memo)
    if key is None:
        blob = json.dumps([PROBE_VERSION, fingerprint, platform_name, list(options), env,
                           pyopencl.VERSION_TEXT])
        key = _keys[memo] = hashlib.sha256(blob.encode()).hexdigest()[:32]
    return key


_verdicts: dict[str, Verdict] = {}
_probe_lock = threading.Lock()


def _read_verdict(path: Any) -> Verdict | None:
    try:
        d = json.loads(path.read_text())
        if isinstance(d, dict) and isinstance(d.get("ok"), bool) and isinstance(d.get("reason"), str):
            return Verdict(ok=d["ok"], reason=d["reason"], seconds=float(d.get("seconds", 0.0)),
                           cached=True)
    except (OSError, ValueError, TypeError):
        pass
    return None  # missing or corrupt: probe again and rewrite


def probe(info: Any, device: Any, options: tuple[str, ...] = ()) -> Verdict:
    """Whether ``device`` (a ``pyopencl.Device`` described by ``info``) builds and runs a
    kernel with ``options``; from memory, then disk, else by building one."""
    key = probe_key(info.fingerprint, info.platform_name, options)
    with _probe_lock:
        v = _verdicts.get(key)
        if v is not None:
            return v
        try:
            path = private_dir("probe") / f"{key}.json"
        except OSError:
            path = None
        v = _read_verdict(path) if path is not None else None
        if v is None:
            v = _run_probe(info, device, options)
            if path is not None:
                try:
                    atomic_write_text(path, json.dumps({**asdict(v), "device": info.fingerprint,
                                                        "options": list(options),
                                                        "env": build_env()}))
                except OSError:
                    pass
        _verdicts[key] = v
        return v


_PROBE_SRC = """__constant int clkernels_probe_{token} = 1;
__kernel void clkernels_probe(__global float* a) {{
    int i = get_global_id(0);
    a[i] = 2.0f * (float)i + (float)clkernels_probe_{token};
}}
"""


def pocl_target_mismatch(version: str, native_float_width: int) -> str:
    """Why a PoCL CPU device compiles for a CPU other than the one it runs on ("" if it
    does not).

    PoCL names the LLVM CPU it generates code for at the end of its device version
    (``HSTR: pthread-x86_64-unknown-linux-gnu-znver3``) and picks its built-in kernel
    library from the host's features (AVX-512: a native float vector width of 16). An
    LLVM older than the CPU takes a newer CPU for an older one: PoCL 3.0's LLVM 14 takes
    an AMD Zen 4 (AVX-512) for ``znver3`` (no AVX-512) and links the AVX-512 library into
    it. Tiny kernels still build and run, larger ones are lost (measured on a 2-core
    Zen 4 EPYC: the fused k-NN scan aborts the process in the compiler with
    ``std::bad_alloc`` after taking 13 GB, other programs build without their kernels,
    ``INVALID_KERNEL_NAME``), so such a device must not count as usable."""
    if "HSTR:" not in version or native_float_width < 16:
        return ""
    # <device>-<arch>-<vendor>-<os>-<env>-<cpu>; LLVM CPU names may hold hyphens
    cpu = "-".join(version.split("HSTR:", 1)[1].split()[0].split("-")[5:])
    if not cpu or cpu in _AVX512_CPUS:
        return ""
    return (f"PoCL compiles for LLVM CPU '{cpu}' (no AVX-512) on a CPU with AVX-512: its LLVM "
            "does not know this CPU and large kernels fail to build or abort the process; "
            "a newer PoCL (5 or later) or Intel's CPU runtime works")


def _run_probe(info: Any, device: Any, options: tuple[str, ...]) -> Verdict:
    import numpy as np
    import pyopencl as cl

    from .buildcache import check_pocl_cache

    if info.runtime == "pocl":
        why = pocl_target_mismatch(str(device.version), int(device.native_vector_width_float))
        if why:
            return Verdict(False, why)
        check_pocl_cache()
    t0 = time.perf_counter()
    captured = Captured()
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx)
        src = _PROBE_SRC.format(token=uuid.uuid4().hex)
        with quiet_build(info, captured):
            prg = cl.Program(ctx, src).build(options=list(options), cache_dir=False)
        k = cl.Kernel(prg, "clkernels_probe")
        out = np.zeros(4, np.float32)
        buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
        k(queue, (4,), None, buf)
        cl.enqueue_copy(queue, out, buf)
        queue.finish()
        if not np.array_equal(out, np.array([1, 3, 5, 7], np.float32)):
            return Verdict(False, f"probe kernel computed {out.tolist()}, not [1, 3, 5, 7]",
                           time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable", with its reason
        return Verdict(False, first_error_line(str(exc), captured.text), time.perf_counter() - t0)
    return Verdict(True, "", time.perf_counter() - t0)


def first_error_line(message: str, captured: str = "") -> str:
    """The line of a build failure a person needs: the compiler's first diagnostic
    (``error: unknown target CPU 'generic'``), after the status code."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    status = lines[0].split(" - ")[0] if lines else type(message).__name__
    skip = ("Build on <", "(options:", "(source saved", "clBuildProgram failed", "=====")
    body = [ln for ln in lines[1:] if not ln.startswith(skip)]
    errors = [ln for ln in body if "error" in ln.lower()]
    extra = [ln.strip() for ln in captured.splitlines() if "error" in ln.lower()]
    detail = (errors or extra or body or [""])[0]
    return f"{status}: {detail}" if detail else status


# --- quiet builds ------------------------------------------------------------------

class Captured:
    """What a build wrote to file descriptor 2 (filled when :func:`quiet_build` ends)."""

    text: str = ""


_cap_lock = threading.Lock()
_cap_depth = 0
_cap_saved: int | None = None
_cap_file: Any = None
_noticed: set[str] = set()


def _quiet() -> bool:
    return settings.flag("QUIET")


#: a progress display's hook: returns what to write before a message so that the message
#: starts on a clean line (its own line is redrawn on its next refresh); None: nothing
_line_prefix: Any = None


def set_line_prefix(fn: Any) -> Any:
    """Install ``fn() -> str`` (or None) as the display hook; returns the previous one."""
    global _line_prefix
    prev, _line_prefix = _line_prefix, fn
    return prev


def building() -> bool:
    """Whether a kernel build is running now (descriptor 2 captured): a progress display
    can say so instead of looking stalled."""
    return _cap_depth > 0


#: programs built and to build in the batches running now (:func:`build_batch`)
_batch = [0, 0]


@contextmanager
def build_batch(total: int) -> Iterator[None]:
    """Count a batch of ``total`` program builds (a backend's prebuild) for
    :func:`build_status`; the backend calls :func:`built_one` after each. Batches running
    at once (several devices) add up."""
    with _cap_lock:
        _batch[1] += int(total)
    try:
        yield
    finally:
        with _cap_lock:
            _batch[1] -= int(total)
            _batch[0] = 0 if _batch[1] <= 0 else _batch[0]


def built_one() -> None:
    """One program of a :func:`build_batch` is built."""
    with _cap_lock:
        _batch[0] += 1


def build_status() -> str:
    """What a progress line says about builds now: ``"building 12 of 37 kernels"`` during a
    counted batch, ``"building kernels"`` during another build, else ``""``."""
    with _cap_lock:
        done, total = _batch
    if total > 0:
        return f"building {min(done + 1, total)} of {total} kernels"
    return "building kernels" if _cap_depth > 0 else ""


def to_terminal(text: str) -> None:
    """Write ``text`` to the real stderr, also while a build captures descriptor 2."""
    hook = _line_prefix
    if hook is not None:
        text = hook() + text
    with _cap_lock:
        if _cap_saved is not None:
            try:
                os.write(_cap_saved, text.encode(errors="replace"))
            except OSError:
                pass
            return
    sys.stderr.write(text)
    sys.stderr.flush()


@contextmanager
def quiet_build(info: Any, captured: Captured | None = None) -> Iterator[Captured]:
    """Redirect descriptor 2 during a build; announce a slow first build on a device."""
    global _cap_depth, _cap_saved, _cap_file
    captured = captured if captured is not None else Captured()
    with _cap_lock:
        if _cap_depth == 0:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            f = tempfile.TemporaryFile()
            saved = os.dup(2)
            os.dup2(f.fileno(), 2)
            _cap_file, _cap_saved = f, saved
        _cap_depth += 1
        start = os.fstat(_cap_file.fileno()).st_size
        f = _cap_file
    timer = _notice_timer(info)
    try:
        yield captured
    finally:
        if timer is not None:
            timer.cancel()
        with _cap_lock:
            end = os.fstat(f.fileno()).st_size
            captured.text = os.pread(f.fileno(), end - start, start).decode(errors="replace")
            _cap_depth -= 1
            if _cap_depth == 0:
                os.dup2(_cap_saved, 2)
                os.close(_cap_saved)
                _cap_file.close()
                _cap_file, _cap_saved = None, None
        if captured.text and os.environ.get("PYOPENCL_COMPILER_OUTPUT", "") not in ("", "0"):
            to_terminal(captured.text)


def _stderr_is_terminal() -> bool:
    """Whether the process's stderr is a terminal (descriptor 2 as it was before a build
    captured it)."""
    fd = _cap_saved if _cap_saved is not None else 2
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _notice_timer(info: Any) -> threading.Timer | None:
    if info is None or _quiet():
        return None
    name = f"{info.name} ({info.runtime})"
    with _cap_lock:
        if name in _noticed:
            return None
    try:
        after = float(settings.env("BUILD_NOTICE_S", "1.0"))
    except ValueError:
        after = 1.0

    def say() -> None:
        with _cap_lock:
            # a terminal: once per device; a log (stderr not a terminal): once in all
            if name in _noticed or (_noticed and not _stderr_is_terminal()):
                return
            _noticed.add(name)
        to_terminal(f"{settings.app_name()}: building kernels for {name}; they are cached, so "
                    "later runs of the same work skip this…\n")

    if after <= 0:  # said at once (a timer could lose the race with a fast build)
        say()
        return None
    t = threading.Timer(after, say)
    t.daemon = True
    t.start()
    return t


_said: set[str] = set()


def note(message: str) -> None:
    """One line on stderr, once per process for each distinct message (none with
    ``<PREFIX>_QUIET=1``: a quiet run prints results and errors only)."""
    if _quiet():
        return
    with _probe_lock:
        if message in _said:
            return
        _said.add(message)
    to_terminal(f"{settings.app_name()}: {message}\n")
