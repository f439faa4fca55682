"""The backend interface every kernel caller uses (buffers, launches, timing)."""

from __future__ import annotations

import abc
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import settings
from ..devices import DeviceInfo, build_options
from ..templates import render, source_hash
from ..userdirs import atomic_write_text, private_dir


def round_up(n: int, multiple: int) -> int:
    """Smallest multiple of ``multiple`` that is >= n (global sizes must divide by the WG)."""
    return max(multiple, ((int(n) + multiple - 1) // multiple) * multiple)


class Bound:
    """A kernel with its arguments converted once (:meth:`Backend.bind`): a caller that
    launches one kernel many times with mostly the same arguments passes only the ones
    that change (:meth:`Backend.launch_bound`)."""

    __slots__ = ("kernel", "args", "dtypes")

    def __init__(self, kernel: Kernel, args: list[Any], dtypes: tuple[Any, ...] | None = None):
        self.kernel = kernel
        self.args = args
        #: the scalar types a backend declared for these arguments (None: none declared)
        self.dtypes = dtypes


@dataclass(frozen=True)
class Local:
    """A ``__local`` buffer argument of ``nbytes`` bytes."""

    nbytes: int


class BuildError(RuntimeError):
    """A program failed to build; the message holds the log and the rendered source's path."""


#: one kernel a job will launch: ``(template, params, kernel_name)`` or
#: ``(template, params, kernel_name, options)``, the arguments of :meth:`Backend.kernel`
KernelRequest = Sequence[Any]


def kernel_key(template: str, params: dict[str, Any], kernel_name: str,
               options: tuple[str, ...] = ()) -> tuple:
    """The backend's cache key of a kernel: template, parameter values (by ``repr``,
    sorted), kernel name and build options."""
    return (template, tuple(sorted((k, repr(v)) for k, v in params.items())), kernel_name,
            tuple(options))


def build_threads(programs: int, parallel: bool = True) -> int:
    """Threads for building ``programs`` distinct programs at once: ``<PREFIX>_BUILD_THREADS``
    if set (1: one after the other), else one per program up to the CPUs this process may
    use (1 where the backend cannot build in parallel)."""
    want = settings.env_int("BUILD_THREADS", 1)
    if want is None:
        want = cpus() if parallel else 1
    return max(1, min(programs, want))


def cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Kernel:
    """A built kernel plus the facts a launcher needs (name, source hash)."""

    def __init__(self, handle: Any, name: str, source_hash: str):
        self.handle = handle
        self.name = name
        self.source_hash = source_hash
        #: per argument, the NumPy dtype of a scalar (None: a buffer or local memory), as
        #: declared to the runtime's kernel object (a backend may use it to set arguments
        #: faster; see PyOpenCLBackend.launch)
        self.arg_dtypes: tuple[Any, ...] | None = None

    def __repr__(self) -> str:
        return f"Kernel({self.name}, {self.source_hash})"


def save_failed_source(source: str, log: str, fingerprint: str, captured: str = "") -> Path:
    """Keep a failed build's source, log and compiler output for the user to read.

    Written to ``<user cache>/build-failures`` (private, 0o700, never through a symlink:
    :func:`clkernels.userdirs.private_dir`); a new private temporary folder if that fails.
    """
    try:
        d = private_dir("build-failures")
    except OSError:
        d = Path(tempfile.mkdtemp(prefix=f"{settings.app_name()}-build-failure-"))
    p = d / f"{source_hash(source)}.cl"
    note = log + (("\ncompiler output:\n" + captured) if captured.strip() else "")
    atomic_write_text(p, source + "\n/* device: " + fingerprint + "\n"
                      + note.replace("*/", "* /") + "\n*/\n")
    return p


class Backend(abc.ABC):
    """Buffers, kernel builds (cached), launches and profiling for one device."""

    name: str = "abstract"
    #: simulated per-allocation limit in bytes (tests; see :mod:`clkernels.memory`)
    memory_limit: int | None = None

    def __init__(self, info: DeviceInfo):
        self.info = info
        self._kernels: dict[tuple, Kernel] = {}
        self.build_count = 0  # how many programs this backend compiled (tests check reuse)
        self._zero_local = threading.local()  # .pending: the arrays zero_batch zeroes at its end

    # --- programs -------------------------------------------------------------
    def kernel(self, template: str, params: dict[str, Any], kernel_name: str,
               options: tuple[str, ...] = ()) -> Kernel:
        """Render ``template`` with ``params``, build once, and return ``kernel_name``.

        Rendering and building are cached per (template, params, options) in this
        backend and per (device fingerprint, source hash) across backends of the process.
        """
        key = kernel_key(template, params, kernel_name, options)
        k = self._kernels.get(key)
        if k is None:
            src = render(template, params)
            k = self._kernels.setdefault(key, self.kernel_from_source(src, kernel_name, options))
        return k

    #: whether this backend's programs may be built from several threads at once
    parallel_builds: bool = False

    def prebuild(self, requests: Iterable[KernelRequest], *, threads: int | None = None
                 ) -> list[Kernel]:
        """Build every kernel a job will launch now, before its first launch, and return them
        (in the order of ``requests``: ``(template, params, kernel_name[, options])``).

        A job that launches one specialisation per parameter value (one per embedding
        dimension, say) would otherwise build them one at a time as it reaches them.
        Here the distinct programs (requests that render the same source share one) are
        built at once, ``threads`` of them in parallel (None: :func:`build_threads`), so
        the job waits about as long as its slowest build where the compiler runs in
        parallel. The kernels go into the caches :meth:`kernel` reads, under the same
        keys: the job's later :meth:`kernel` calls return these objects and build
        nothing. Requests already built cost nothing.
        """
        items = []
        for req in requests:
            template, params, name, *rest = req
            options = tuple(rest[0]) if rest else ()
            items.append((kernel_key(template, params, name, options), template, params, name,
                          options))
        todo: dict[tuple, tuple] = {}
        programs: dict[tuple, None] = {}  # (source, options), first-use order
        for key, template, params, name, options in items:
            if key in self._kernels or key in todo:
                continue
            src = render(template, params)  # rendering stays in this thread
            todo[key] = (src, name, options)
            programs.setdefault((src, options), None)
        if programs:
            n = build_threads(len(programs), self.parallel_builds) if threads is None else threads
            self._build_programs(list(programs), max(1, int(n)))
        for key, (src, name, options) in todo.items():
            self._kernels.setdefault(key, self.kernel_from_source(src, name, options))
        return [self._kernels[it[0]] for it in items]

    def _programs_of(self, requests: Iterable[KernelRequest]) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct programs (source, options) of ``requests``, in first-use order."""
        programs: dict[tuple[str, tuple[str, ...]], None] = {}
        for req in requests:
            template, params, _name, *rest = req
            programs.setdefault((render(template, params), tuple(rest[0]) if rest else ()), None)
        return list(programs)

    def known(self, requests: Iterable[KernelRequest]) -> bool:
        """Whether every program of ``requests`` is built in this process or cheap to load
        (a binary cache entry; NVIDIA: built on this device before), so that building them
        costs the job little. Base: built in this process."""
        return all(self._known_program(src, opts) for src, opts in self._programs_of(requests))

    def _known_program(self, source: str, options: tuple[str, ...]) -> bool:
        h = source_hash(source)
        return any(k.source_hash == h for k in self._kernels.values())

    def build_behind(self, requests: Iterable[KernelRequest]) -> Callable[..., None] | None:
        """Start building the programs of ``requests`` that are not :meth:`known` in
        helper processes, while this process runs a job on other programs (a job that
        can run on a few generic programs now and on specialised ones later); returns
        the function that ends it, ``end(wait=False)``: those not begun are dropped, the
        builds under way finish behind the caller (``wait``: before it returns), and what
        was built is known to later jobs. None where nothing is built behind (no helper
        processes for this runtime, or nothing to build): a caller that would otherwise
        never build those programs builds them itself. Base: None."""
        return None

    def _build_programs(self, programs: list[tuple[str, tuple[str, ...]]], threads: int) -> None:
        """Build ``programs`` (source, options) into the program cache, ``threads`` at once."""
        from ..probe import build_batch, built_one

        def build(p: tuple[str, tuple[str, ...]]) -> None:
            self._program(*p)
            built_one()

        with build_batch(len(programs)):
            if threads <= 1 or len(programs) <= 1:
                for p in programs:
                    build(p)
                return
            with ThreadPoolExecutor(threads, thread_name_prefix="kernel-build") as pool:
                for _ in pool.map(build, programs):
                    pass

    def kernel_from_source(self, source: str, kernel_name: str,
                           options: tuple[str, ...] = ()) -> Kernel:
        prog = self._program(source, options)
        return Kernel(self._get_kernel(prog, kernel_name), kernel_name, source_hash(source))

    @abc.abstractmethod
    def _program(self, source: str, options: tuple[str, ...]) -> Any: ...

    @abc.abstractmethod
    def _get_kernel(self, program: Any, name: str) -> Any: ...

    # --- memory ---------------------------------------------------------------
    def check_alloc(self, shape: int | tuple[int, ...], dtype: Any) -> None:
        """Refuse an allocation that cannot fit (device limits or simulated limit)."""
        from ..memory import check_alloc

        n = shape if isinstance(shape, int | np.integer) else math.prod(shape)  # not np.prod:
        check_alloc(self, int(n) * np.dtype(dtype).itemsize)  # ~20 us a call, 7 per Simplex

    @abc.abstractmethod
    def to_device(self, array: np.ndarray, *, copy: bool = True) -> Any:
        """Copy a host array to a new device array. ``copy`` False: a backend whose
        upload returns before the transfer is done may transfer from ``array`` itself
        (no private copy first); the caller gives the array up (a temporary it never
        changes again)."""

    def to_device_aside(self, array: np.ndarray, *, copy: bool = True) -> Any:
        """:meth:`to_device` for an upload enqueued while a long kernel runs: where a
        runtime would hold the host at the upload until the queue drains, a backend
        copies through another queue instead (the PyOpenCL backend); here the same as
        :meth:`to_device`. ``copy`` False: a backend may transfer from ``array`` itself
        (no private copy first); the caller leaves it unchanged until the queue has
        passed the upload."""
        return self.to_device(array)

    @abc.abstractmethod
    def empty(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised device array."""

    def scratch(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """A device array that kernels write before they read it: :meth:`empty`, except on
        Oclgrind, whose uninitialised-value plugin can give a new buffer the shadow of a
        released one at its address and then report those reads (false reports): there
        zeros uploaded from the host."""
        if self.info.runtime == "oclgrind":
            return self.to_device(np.zeros(shape, dtype))
        return self.empty(shape, dtype)

    def zeros(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """A zeroed device array, filled on the device (the host does not wait). Oclgrind:
        uploaded from the host instead, since its uninitialised-value plugin does not see a
        kernel's writes into reused memory as initialising it (false reports on reads).
        Inside :meth:`zero_batch` the zeroing is enqueued when the block ends."""
        if self.info.runtime == "oclgrind":
            return self.to_device(np.zeros(shape, dtype))
        arr = self.empty(shape, dtype)
        pending = getattr(self._zero_local, "pending", None)
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if pending is not None and nbytes % 4 == 0 and nbytes:
            pending.append(arr)
        else:
            self.fill(arr, 0)
        return arr

    @contextmanager
    def zero_batch(self) -> Iterator[None]:
        """Zero the arrays :meth:`zeros` returns inside the block (in this thread) together,
        when it ends, in as few launches as the backend can (:meth:`_zero_all`): a setup
        that allocates many zeroed buffers pays one launch, not one per buffer. Nothing
        inside the block may read those arrays on the device (they are zeroed after it);
        blocks nest (the outermost one zeroes)."""
        local = self._zero_local
        if getattr(local, "pending", None) is not None:
            yield
            return
        local.pending = []
        try:
            yield
        finally:
            pending, local.pending = local.pending, None
            if pending:
                self._zero_all(pending)

    def _zero_all(self, arrays: list[Any]) -> None:
        """Zero ``arrays`` (device arrays of whole 32-bit words); one fill each here."""
        for a in arrays:
            self.fill(a, 0)

    @abc.abstractmethod
    def fill(self, array: Any, value: float) -> None: ...

    @abc.abstractmethod
    def to_host(self, array: Any) -> np.ndarray:
        """Copy a device array back (blocking)."""

    def copy_within(self, dst: Any, dst_index: int, src: Any, src_index: int, count: int) -> None:
        """Enqueue a copy of ``count`` elements of ``src`` (from flat index ``src_index``)
        into ``dst`` (from ``dst_index``), device to device, behind the queued work: a
        result fed back into a later launch's input without a host round trip."""
        raise NotImplementedError(f"{type(self).__name__} has no device-to-device copy")

    #: whether :meth:`write_async` copies into device arrays behind the queue
    writes_async: bool = False

    def write_async(self, dst: Any, host: np.ndarray, offset: int = 0) -> Any:
        """Enqueue the copy of ``host`` (C-contiguous, ``dst``'s dtype) into the flat
        device array ``dst`` from element ``offset`` on; later commands of the queue see
        it. A caller that fills a large input band by band uploads each band as it is
        ready, not the whole after the last. Returns the copy's handle: ``host`` must
        stay unchanged while it is held (dropping it waits for the copy). Thread-safe.
        Only where :attr:`writes_async`."""
        h = np.asarray(host).reshape(-1)
        if not host.flags.c_contiguous or h.dtype != dst.dtype \
                or not 0 <= offset <= offset + h.size <= dst.size:
            raise ValueError(f"write_async: {h.size} {h.dtype} values at {offset} (C-contiguous:"
                             f" {host.flags.c_contiguous}) do not fit the {dst.size} "
                             f"{dst.dtype} values of the device array")
        return self._write(dst, h, offset)

    def _write(self, dst: Any, host: np.ndarray, offset: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no writes into device arrays")

    def to_host_async(self, array: Any, out: np.ndarray | None = None,
                      count: int | None = None) -> Callable[[], np.ndarray]:
        """Enqueue the copy of ``array`` into ``out`` (a C-contiguous host array of its
        size and dtype; None: a new one) behind the queued work; returns the function
        that waits for it and returns ``out``. ``count``: only the first ``count``
        elements of the flat ``array`` (``out`` of that size). Backends without
        asynchronous reads copy when that function is called."""
        def wait() -> np.ndarray:
            host = self.to_host(array)
            if count is not None:
                host = host.reshape(-1)[:count].copy()
            if out is None:
                return host
            out.reshape(-1)[...] = host.reshape(-1)
            return out
        return wait

    def is_device_array(self, obj: Any) -> bool:
        return False

    # --- launches -------------------------------------------------------------
    #: in-order queues of the device a caller may spread launches over (``stream=``) so
    #: that independent launches overlap on the device; 1: everything runs in one queue
    streams: int = 1

    @abc.abstractmethod
    def launch(self, kernel: Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               *args: Any, stream: int = 0, wait_for: list[Any] | None = None) -> Any:
        """Enqueue ``kernel``; global sizes must be multiples of the local sizes. Returns an
        event. ``stream`` (below :attr:`streams`) picks the queue; ``wait_for``: events of
        other queues this launch must follow (a queue keeps its own order). :meth:`finish`
        waits for every queue."""

    def bind(self, kernel: Kernel, *args: Any) -> Bound:
        """``kernel`` with the arguments of :meth:`launch`, kept for
        :meth:`launch_bound` (a backend converts them once here)."""
        return Bound(kernel, list(args))

    def launch_bound(self, bound: Bound, global_size: tuple[int, ...],
                     local_size: tuple[int, ...] | None, changes: dict[int, Any] | None = None,
                     *, stream: int = 0, wait_for: list[Any] | None = None) -> Any:
        """:meth:`launch` of a bound kernel, argument ``i`` replaced by ``changes[i]``
        (a scalar of the bound one's dtype, or a buffer) for this launch only."""
        args = list(bound.args)
        for i, a in (changes or {}).items():
            args[i] = a
        return self.launch(bound.kernel, global_size, local_size, *args, stream=stream,
                           wait_for=wait_for)

    @abc.abstractmethod
    def wait(self, event: Any) -> None: ...

    @abc.abstractmethod
    def event_seconds(self, event: Any) -> float:
        """Device execution time of a finished event (profiling), in seconds."""

    @abc.abstractmethod
    def finish(self) -> None: ...

    def flush(self) -> None:
        """Hand the commands enqueued so far to the device without waiting for them
        (``clFlush``): OpenCL lets a runtime hold enqueued commands back until a flush or
        a blocking call, so work enqueued ahead while the host is busy with something
        else might not start. Nothing to do where commands go out as they are enqueued."""
        return None

    def join_streams(self) -> None:
        """Order queue 0's later commands after everything enqueued so far in every queue,
        without a host wait: work that follows launches spread over :attr:`streams` (and
        reads their results) may then go to queue 0 alone. Here by :meth:`finish` (a
        backend with queue-to-queue barriers does without it); one queue: nothing to do."""
        if self.streams > 1:
            self.finish()

    # --- helpers --------------------------------------------------------------
    @staticmethod
    def check_launch(global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
        if local_size is None:
            return
        for g, loc in zip(global_size, local_size, strict=True):
            if g % loc:
                raise ValueError(f"global size {global_size} is not a multiple of local size {local_size}")

    @property
    def build_options(self) -> tuple[str, ...]:
        """Options of every build: correctly rounded float32 ``/`` and ``sqrt`` where the
        device offers them (NVIDIA's defaults are 1-3 ulp off, so its k-NN distances,
        weights and rho would differ in the last bits from a CPU's; with the option an
        H100 reproduces PoCL's cross-map matrix bit for bit), then
        ``<PREFIX>_BUILD_OPTIONS`` (:func:`clkernels.devices.build_options`, which the
        device probe builds with too)."""
        return build_options(self.info)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.runtime}:{self.info.name})"
