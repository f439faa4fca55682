"""Device memory: recognise out-of-memory, fall back to smaller blocks, fail clearly.

A computation whose device memory grows with the problem (a table per query, an
N x N block) is written as ``fn(start, stop)`` over a range of items and run by
:func:`run_blocked`: it first tries the whole range (or a given block), and on a
device out-of-memory halves the block and retries the failed block, keeping the
smaller size for the rest. Below ``minimum`` it raises :class:`DeviceMemoryError`
(a ``MemoryError``) naming the device, its memory, the bytes asked and the
parameter the user can lower. Each fallback is logged on the
``clkernels.memory`` logger (INFO) and counted in :data:`FALLBACKS`.

Allocations are pre-checked by every backend (:func:`check_alloc`): a single
buffer above the device's ``max_alloc_bytes`` (or above its global memory)
fails here instead of in the driver. For tests, ``<PREFIX>_DEVICE_MEMORY_LIMIT``
(bytes; also ``Backend.memory_limit``) simulates a device whose largest single
allocation is that many bytes, so the fallbacks can be exercised on PoCL
(``<PREFIX>``: :mod:`clkernels.settings`). Nothing here knows about EDM or RQA.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import settings

log = logging.getLogger("clkernels.memory")

#: OpenCL status codes that mean "out of device memory": MEM_OBJECT_ALLOCATION_FAILURE,
#: OUT_OF_RESOURCES, OUT_OF_HOST_MEMORY
OOM_CODES = (-4, -5, -6)
_OOM_NAMES = ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY",
              "OUT_OF_DEVICE_MEMORY", "out of memory", "UR_RESULT_ERROR_OUT_OF")

#: number of block halvings done by :func:`run_blocked` in this process (tests read it)
FALLBACKS = 0


class DeviceMemoryError(MemoryError):
    """Even the smallest block did not fit in device memory.

    Attributes: ``device`` (name), ``global_mem_bytes``, ``max_alloc_bytes``,
    ``requested_bytes`` (the failing allocation, or an estimate; 0 if unknown),
    ``parameter`` (what a user can lower), ``limit`` (simulated limit or None).
    """

    final = True

    def __init__(self, message: str, *, device: str = "", global_mem_bytes: int = 0,
                 max_alloc_bytes: int = 0, requested_bytes: int = 0, parameter: str = "",
                 limit: int | None = None):
        super().__init__(message)
        self.device, self.global_mem_bytes, self.max_alloc_bytes = device, global_mem_bytes, max_alloc_bytes
        self.requested_bytes, self.parameter, self.limit = requested_bytes, parameter, limit


class DeviceOutOfMemory(DeviceMemoryError):
    """One allocation refused before the driver saw it (device limits or the simulated
    limit). Inside :func:`run_blocked` it triggers a smaller block; outside it is final."""

    final = False

    @property
    def nbytes(self) -> int:
        return self.requested_bytes


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is a device (or host) out-of-memory from any backend."""
    if isinstance(exc, DeviceMemoryError):
        return not exc.final  # a final one (from a nested blocked run) is not retried
    if isinstance(exc, MemoryError):
        return True
    mod = type(exc).__module__ or ""
    if type(exc).__name__ == "MemoryError" and mod.startswith("pyopencl"):
        return True  # pyopencl.MemoryError is a pyopencl.Error, not a builtin MemoryError
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            code = code()
        except Exception:  # noqa: BLE001
            code = None
    if isinstance(code, int) and code in OOM_CODES:
        return True
    if mod.startswith(("pyopencl", "dpctl")) or isinstance(exc, RuntimeError):
        text = str(exc)
        return any(name in text for name in _OOM_NAMES)
    return False


def memory_limit(be: Any) -> int | None:
    """The simulated per-allocation limit in bytes: ``be.memory_limit`` if set, else
    ``<PREFIX>_DEVICE_MEMORY_LIMIT`` (an integer; suffixes k/M/G allowed), else None."""
    lim = getattr(be, "memory_limit", None)
    if lim is not None:
        return int(lim)
    env = (settings.env("DEVICE_MEMORY_LIMIT") or "").strip()
    if not env:
        return None
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(env[-1].lower(), 1)
    try:
        return int(float(env[:-1] if mult > 1 else env) * mult)
    except ValueError as exc:
        raise ValueError(f"{_limit_var()}={env!r} is not a byte count "
                         "(e.g. 1000000, 512k, 2G)") from exc


def _limit_var() -> str:
    return settings.env_name("DEVICE_MEMORY_LIMIT")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def check_alloc(be: Any, nbytes: int) -> None:
    """Refuse an allocation that cannot succeed on ``be``'s device (or exceeds the
    simulated limit) with :class:`DeviceOutOfMemory`, before the driver sees it."""
    info = be.info
    cap = min(int(info.max_alloc_bytes or 0) or (1 << 62), int(info.global_mem_bytes or 0) or (1 << 62))
    lim = memory_limit(be)
    if lim is not None:
        cap = min(cap, lim)
    if nbytes > cap:
        sim = lim is not None and lim == cap
        raise DeviceOutOfMemory(
            f"device allocation of {nbytes} bytes ({_mib(nbytes)}) exceeds the "
            f"{f'simulated limit ({_limit_var()})' if sim else 'largest allocation'} "
            f"of {cap} bytes on {info.name} ({info.runtime}; {info.global_mem_bytes} bytes global "
            f"memory, {info.max_alloc_bytes} bytes per allocation). Lower the problem size "
            "(series length, number of rows or targets), or use a device with more memory",
            device=info.name, global_mem_bytes=int(info.global_mem_bytes),
            max_alloc_bytes=int(info.max_alloc_bytes), requested_bytes=int(nbytes),
            parameter="the problem size", limit=lim)


def describe(be: Any, requested: int, parameter: str, what: str,
             cause: BaseException | None = None) -> DeviceMemoryError:
    """The final, user-facing error for ``what`` not fitting even at its smallest block."""
    info = be.info
    lim = memory_limit(be)
    sim = f"; simulated limit {lim} bytes ({_limit_var()})" if lim is not None else ""
    asked = f"{requested} bytes ({_mib(requested)})" if requested else "an unknown amount"
    msg = (f"{what} does not fit in device memory even at its smallest block: asked {asked} "
           f"on {info.name} ({info.runtime}) with {info.global_mem_bytes} bytes "
           f"({_mib(info.global_mem_bytes)}) global memory and {info.max_alloc_bytes} bytes "
           f"({_mib(info.max_alloc_bytes)}) per allocation{sim}. Lower {parameter}, "
           "or use a device with more memory")
    if cause is not None and not isinstance(cause, DeviceOutOfMemory):
        msg += f" (driver: {type(cause).__name__}: {cause})"  # e.g. OUT_OF_RESOURCES
    return DeviceMemoryError(msg, device=info.name, global_mem_bytes=int(info.global_mem_bytes),
                             max_alloc_bytes=int(info.max_alloc_bytes), requested_bytes=int(requested),
                             parameter=parameter, limit=lim)


def run_blocked(be: Any, fn: Callable[[int, int], Any], total: int, *, block: int | None = None,
                minimum: int = 1, parameter: str, what: str,
                nbytes: Callable[[int], int] | None = None) -> list[Any]:
    """``[fn(s0, e0), fn(s1, e1), ...]`` over consecutive blocks covering ``range(total)``.

    Starts with ``block`` items (default: all); when ``fn`` raises a device
    out-of-memory (:func:`is_oom`), halves the block (not below ``minimum``) and
    retries from the same start. If a block of ``minimum`` items fails, raises
    :class:`DeviceMemoryError`; ``nbytes(items)`` estimates the bytes a block asks,
    for that message when the driver does not say. ``fn`` must be safe to re-run.
    """
    global FALLBACKS
    total = int(total)
    if total <= 0:
        return [fn(0, 0)]
    minimum = max(1, min(int(minimum), max(total, 1)))
    b = max(minimum, total if block is None else min(int(block), total))
    out: list[Any] = []
    s = 0
    while s < total:
        e = min(total, s + b)
        try:
            out.append(fn(s, e))
        except Exception as exc:
            if not is_oom(exc):
                raise
            if e - s <= minimum:
                asked = getattr(exc, "nbytes", 0) or (nbytes(e - s) if nbytes else 0)
                raise describe(be, asked, parameter, what, exc) from exc
            b = max(minimum, (e - s) // 2)
            FALLBACKS += 1
            log.info("%s: device out of memory for %d items (%s); retrying in blocks of %d",
                     what, e - s, exc, b)
            continue
        s = e
    return out
