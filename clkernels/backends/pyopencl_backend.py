"""The default backend: PyOpenCL contexts, queues (profiling on) and pyopencl.array buffers."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import mmap
import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .. import settings
from ..registration import register_platforms

register_platforms()
import pyopencl as cl  # noqa: E402  (must follow registration)
import pyopencl.array as cla  # noqa: E402

from ..buildcache import (  # noqa: E402
    check_pocl_cache,
    drop_pyopencl_entry,
    has_pyopencl_entry,
    pyopencl_cache_dir,
)
from ..buildprocs import (  # noqa: E402
    BuildQueue,
    build_claimed,
    helper_count,
    start_helpers,
    stop_helpers,
    wait_helpers,
)
from ..devices import DeviceInfo, cl_device  # noqa: E402
from ..probe import Captured, first_error_line, quiet_build  # noqa: E402
from ..userdirs import private_dir  # noqa: E402
from .base import (  # noqa: E402
    Backend,
    Bound,
    BuildError,
    KernelRequest,
    Local,
    round_up,
    save_failed_source,
)

_warn_lock = threading.Lock()
_warn_depth = 0
_warn_saved: Any = None


@contextmanager
def _no_compiler_warnings():
    """PyOpenCL's CompilerWarning (compiler chatter, not an error) ignored while any build
    runs. ``warnings.catch_warnings`` saves and restores the process-wide filter list, so
    entered by overlapping builds in several threads it could restore another thread's
    state; here the filter is installed by the first build and removed by the last."""
    global _warn_depth, _warn_saved
    with _warn_lock:
        if _warn_depth == 0:
            _warn_saved = warnings.catch_warnings()
            _warn_saved.__enter__()
            warnings.simplefilter("ignore", cl.CompilerWarning)
        _warn_depth += 1
    try:
        yield
    finally:
        with _warn_lock:
            _warn_depth -= 1
            if _warn_depth == 0:
                _warn_saved.__exit__(None, None, None)
                _warn_saved = None


def _is_compile_error(exc: cl.Error) -> bool:
    """A failure of the compiler itself (the source or the options), not of a cache."""
    return getattr(exc, "code", None) in (cl.status_code.BUILD_PROGRAM_FAILURE, cl.status_code.INVALID_BUILD_OPTIONS,
                    cl.status_code.COMPILER_NOT_AVAILABLE, cl.status_code.INVALID_COMPILER_OPTIONS)


#: uploads up to this size return before the transfer is done (no host-device sync)
ASYNC_UPLOAD_BYTES = 1 << 20
#: uploads up to this size are copied into a new buffer as the runtime creates it (no
#: queue command: two H200s, 512 ints 12 us instead of 42 us, 105 us with a second
#: device's thread beside; a kernel that runs meanwhile keeps running)
CREATE_UPLOAD_BYTES = 64 << 10
#: asynchronous reads from this size on go through pinned staging memory on GPUs
PINNED_READ_BYTES = 64 << 10
#: device kinds ("gpu", "cpu") whose uploads beside a running kernel go through a queue
#: of their own (:meth:`PyOpenCLBackend.to_device_aside`). Not CPUs: there queue 0's
#: barrier on the other queue's copy keeps the host thread out of the kernels' work at
#: its next blocking read (Intel's CPU runtime, 2-core EPYC: the calling thread
#: otherwise runs half of a Simplex call's work items; without it the call took 1.5-2x
#: the wall time on a loaded machine, the same CPU time), and a CPU's upload does not
#: wait for the queue anyway
UPLOAD_ASIDE_ON: tuple[str, ...] = ("gpu",)


#: the most helpers that build behind a job (:meth:`PyOpenCLBackend.build_behind`): each
#: opens a context and a compiler beside the job's own work (H100, a mixed-E map's first
#: run with eight: 3.6-4.0 s, against 3.3 s with none)
BEHIND_HELPERS = 4

#: programs that helpers build behind a job now, per device fingerprint: backends of alike
#: devices (a job's two GPUs of one model) share the binaries, so a program one of them
#: builds behind is not built a second time for the other
_behind_lock = threading.Lock()
_behind: dict[str, set[tuple[str, tuple[str, ...]]]] = {}


def _map_pages(a: np.ndarray) -> None:
    """Write a zero byte into every page of the C-contiguous array ``a``: a fresh array's
    memory is mapped by the OS at its first write, so a copy into it later (a read's
    staging copy after the wait) takes no page faults."""
    if a.nbytes:
        a.reshape(-1).view(np.uint8)[::mmap.PAGESIZE] = 0


def _use_pool(info: DeviceInfo) -> bool:
    env = (settings.env("MEMORY_POOL") or "").strip().lower()
    if env in ("0", "1"):
        return env == "1" and info.runtime != "oclgrind"
    return info.is_gpu and info.runtime != "oclgrind"


_same_builds: dict[tuple, list] = {}  # key -> [lock, holders]
_same_builds_lock = threading.Lock()


@contextmanager
def _same_build_lock(fingerprint: str, source: str, opts: list[str]):
    """Held while this process builds ``source`` with ``opts`` for a device of
    ``fingerprint`` in any context: a second context's build of the same program waits,
    then loads the first one's binary from the cache instead of compiling it again
    beside it (two Dask workers in one process doubled each build's time). Entries
    live while someone holds or waits for them."""
    key = (fingerprint, hashlib.sha256(source.encode()).digest(), tuple(opts))
    with _same_builds_lock:
        entry = _same_builds.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    try:
        with entry[0]:
            yield
    finally:
        with _same_builds_lock:
            entry[1] -= 1
            if not entry[1]:
                del _same_builds[key]


class PyOpenCLBackend(Backend):
    name = "pyopencl"
    #: clBuildProgram runs without the GIL (PyOpenCL releases it), so programs build in
    #: parallel where the runtime's compiler does (not on Oclgrind: see __init__)
    parallel_builds = True

    def __init__(self, info: DeviceInfo):
        super().__init__(info)
        self.device = cl_device(info)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(
            self.context, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        #: buffers come from a memory pool on GPUs: a freed buffer is reused by the next
        #: request of its size class instead of a new driver allocation (NVIDIA: 0.3-1.2 ms
        #: per Simplex call at L=32,768-65,536). Allocation is immediate, so an
        #: out-of-memory surfaces at the request (the pool frees what it holds and retries
        #: first). Not on CPUs (allocation is a malloc there) nor on Oclgrind (its
        #: uninitialised-value checks need fresh buffers). <PREFIX>_MEMORY_POOL=0/1 forces.
        #: asynchronous reads of GPU results through pinned staging buffers (see
        #: ``to_host_async``); a few per size are kept
        self.pinned_reads = info.is_gpu and info.runtime != "oclgrind"
        # (Oclgrind must not see its queue used from another thread than its maker's)
        self.writes_async = info.runtime != "oclgrind"
        self._staging_free: dict[int, list[tuple[cl.Buffer, np.ndarray]]] = {}
        self._sides: dict[int, cl.CommandQueue] = {}  # streams 1 .. (see _queue)
        self._upload_queue: cl.CommandQueue | None = None  # to_device_aside's
        self._aside: list = []  # its copies' events, held until they end
        self.helper_builds = 0  # programs handed to helper processes (clkernels.buildprocs)
        self.allocator = None
        #: built programs of this backend's context, by (source, options). Per backend, not
        #: per process: a program belongs to the context it was built in, and a key holding
        #: a context's id() would hand a later context (same id, the first one freed) a
        #: program of a context that no longer exists.
        self._programs: dict[tuple, cl.Program] = {}
        #: builds under way (same keys): a second thread asking for one waits for it, so a
        #: program is built once however many threads ask (prebuild builds several at once)
        self._building: dict[tuple, Future] = {}
        self._programs_lock = threading.Lock()
        if info.runtime == "oclgrind":  # a simulator: keep its builds on one thread
            self.parallel_builds = False
        if _use_pool(info):
            import pyopencl.tools as clt
            self.allocator = clt.MemoryPool(clt.ImmediateAllocator(self.queue))

    def _program(self, source: str, options: tuple[str, ...]) -> cl.Program:
        opts = tuple(options) + self.build_options
        key = (source, opts)
        with self._programs_lock:
            prog = self._programs.get(key)
            if prog is not None:
                return prog
            fut = self._building.get(key)
            owner = fut is None
            if owner:
                fut = self._building[key] = Future()
        if not owner:
            return fut.result()  # another thread builds it (its error is raised here too)
        try:
            prog = self._build(source, list(opts))
        except BaseException as exc:
            with self._programs_lock:
                del self._building[key]
            fut.set_exception(exc)
            raise
        with self._programs_lock:
            self._programs[key] = prog
            del self._building[key]
            self.build_count += 1
        fut.set_result(prog)
        if self.info.runtime == "nvidia":  # see _known
            marker = self._marker(source, opts)
            if marker is not None:
                with contextlib.suppress(OSError):
                    marker.touch()
        return prog

    def _build(self, source: str, opts: list[str]) -> cl.Program:
        """Build quietly (compiler output captured), through a private binary cache that
        is repaired on a damaged entry (:mod:`clkernels.buildcache`). Contexts of one
        device kind (Dask's in-process workers, backends of one device on threads) that
        ask for the same program at once build it once: the others wait and take the
        binary it left in the cache."""
        with _same_build_lock(self.info.fingerprint, source, opts):
            return self._build_quietly(source, opts)

    def _build_quietly(self, source: str, opts: list[str]) -> cl.Program:
        if self.info.runtime == "pocl":
            check_pocl_cache()  # once per process: damaged PoCL entries abort the process
        cache_dir = pyopencl_cache_dir()
        cap = Captured()
        try:
            try:
                with _no_compiler_warnings():
                    # Compiler chatter (PoCL/NVIDIA notes) is not an error; set
                    # PYOPENCL_COMPILER_OUTPUT=1 to see it.
                    with quiet_build(self.info, cap):
                        return cl.Program(self.context, source).build(options=opts,
                                                                      cache_dir=cache_dir)
            except cl.Error as exc:
                if _is_compile_error(exc):
                    raise
                # A damaged cache entry (PyOpenCL raises the load's error, see buildcache):
                # drop it and build from source, which stores a good entry again.
                prog = cl.Program(self.context, source)
                drop_pyopencl_entry(prog, self.context, self.device, opts, cache_dir)
                with quiet_build(self.info, cap):
                    return prog.build(options=opts, cache_dir=cache_dir)
        except cl.Error as exc:
            path = save_failed_source(source, str(exc), self.info.fingerprint, cap.text)
            raise BuildError(
                f"OpenCL build failed on {self.info.name} ({self.info.runtime}): "
                f"{first_error_line(str(exc), cap.text)}\n"
                f"rendered source and full log saved to {path}\n{exc}"
            ) from exc

    def _build_programs(self, programs: list[tuple[str, tuple[str, ...]]], threads: int) -> None:
        """As the base class; where the runtime compiles one program at a time per process
        (:mod:`clkernels.buildprocs`) and several programs are neither built nor in the
        binary cache, helper processes and this process take them from one queue, the
        helpers compiling into the cache, then every program is built here (the
        helpers' from the cache)."""
        gpu_memory = self.info.global_mem_bytes if self.info.is_gpu else 0
        # (the cache is looked at only where helpers could start at all)
        cache_dir = pyopencl_cache_dir() if helper_count(self.info.runtime, len(programs),
                                                         gpu_memory) else None
        todo = [(src, opts) for src, opts in programs
                if cache_dir and not self._known(src, opts, cache_dir)]
        helpers = helper_count(self.info.runtime, len(todo), gpu_memory) if todo else 0
        if helpers:
            jobs = [(src, list(tuple(opts) + self.build_options)) for src, opts in todo]
            queue = BuildQueue.create()
            started = []
            try:
                started = start_helpers(self.info, jobs, cache_dir, helpers, queue)
                if started:
                    # one at a time here: the compiler is serial in this process, and a
                    # thread waiting for it would hold a claim a helper could take
                    mine = build_claimed(queue, todo, lambda p: self._program(*p))
                    wait_helpers(started, queue)
                    self.helper_builds += len(todo) - mine
            finally:  # (a build error here: no helper outlives the call)
                stop_helpers(started)
                queue.remove()
        super()._build_programs(programs, threads)

    def _known_program(self, source: str, options: tuple[str, ...]) -> bool:
        return self._known(source, options, pyopencl_cache_dir)

    def build_behind(self, requests: Iterable[KernelRequest]) -> Callable[..., None] | None:
        """As the base class, where the runtime compiles one program at a time per process
        (:mod:`clkernels.buildprocs`): helpers take the programs from one queue, this
        process none; ending claims what no helper took, waits for the builds under way
        (at most one per helper) in a thread and marks what was built (NVIDIA: the
        driver's compute cache holds it, :meth:`_known`), so the job returns at once; a
        process that exits before stops them. Programs that another backend of an alike
        device (the same fingerprint) builds behind its job now are left to it: where
        that leaves nothing, the returned function ends nothing."""
        cache_dir = pyopencl_cache_dir()
        todo = [(src, opts) for src, opts in self._programs_of(requests)
                if not self._known(src, opts, cache_dir)]
        with _behind_lock:
            mine = _behind.setdefault(self.info.fingerprint, set())
            others = [p for p in todo if p in mine]
            todo = [p for p in todo if p not in mine]
            mine.update(todo)  # (claimed now: an alike device's engine starting beside)

        def release() -> None:
            with _behind_lock:
                _behind[self.info.fingerprint].difference_update(todo)
        gpu_memory = self.info.global_mem_bytes if self.info.is_gpu else 0
        # (no share of this process: as many helpers as build_programs would start for
        # twice the programs)
        helpers = helper_count(self.info.runtime, 2 * len(todo), gpu_memory) if todo else 0
        helpers = min(helpers, BEHIND_HELPERS)
        if not helpers:
            release()
            return (lambda wait=False: None) if others else None
        jobs = [(src, list(tuple(opts) + self.build_options)) for src, opts in todo]
        queue = BuildQueue.create()
        try:
            started = start_helpers(self.info, jobs, cache_dir, helpers, queue, nice=True)
        except BaseException:
            release()
            queue.remove()
            raise
        if not started:
            release()
            queue.remove()
            return (lambda wait=False: None) if others else None
        lock = threading.Lock()
        state = {"ended": False, "cleaned": False}

        def clean() -> None:
            """Stop the helpers and remove the queue (once)."""
            with lock:
                if state["cleaned"]:
                    return
                state["cleaned"] = True
            stop_helpers(started)
            queue.remove()
            release()
            atexit.unregister(clean)

        def finish() -> None:
            """Wait for the builds under way, then mark what was built."""
            try:
                wait_helpers(started, queue)
                built = [i for i in range(len(todo)) if queue.was_built(i)]
                for i in built:
                    if self.info.runtime == "nvidia":
                        src, opts = todo[i]
                        marker = self._marker(src, tuple(opts) + self.build_options)
                        if marker is not None:
                            with contextlib.suppress(OSError):
                                marker.touch()
                self.helper_builds += len(built)
            finally:
                clean()

        threads: list[threading.Thread] = []

        def end(wait: bool = False) -> None:
            with lock:
                first = not state["ended"]
                state["ended"] = True
            if first:
                queue.close(len(todo))  # nothing more is begun
                # the builds under way end behind the caller too (a helper's build is ~0.5
                # s); a process that exits first stops them (they are built next time)
                threads.append(threading.Thread(target=finish, name="clkernels-build-behind",
                                                daemon=True))
                threads[0].start()
            if wait and threads:
                threads[0].join()

        atexit.register(clean)
        return end

    def _known(self, source: str, options: tuple[str, ...],
               cache_dir: str | None | Callable[[], str | None]) -> bool:
        """Built in this process, or a binary in PyOpenCL's cache (loading it is cheap), or
        (NVIDIA, where PyOpenCL caches nothing) built on this device before (a marker).
        ``cache_dir`` may be the function that finds it: asked only for a program not
        built in this process (making and checking the folder took ~0.1 ms a program on a
        GPU host, 2-3 ms of each mixed-E map's start)."""
        opts = tuple(options) + self.build_options
        with self._programs_lock:
            if (source, opts) in self._programs:
                return True
        if callable(cache_dir):
            cache_dir = cache_dir()
        if self.info.runtime == "nvidia":
            marker = self._marker(source, opts)
            return marker is not None and marker.exists()
        return has_pyopencl_entry(cl.Program(self.context, source), self.context, self.device,
                                  list(opts), cache_dir)

    def _marker(self, source: str, opts: tuple[str, ...]) -> Path | None:
        """The empty file that says this program was built on this device (NVIDIA: the
        driver's compute cache then holds its machine code)."""
        try:
            d = private_dir("built")
        except OSError:
            return None
        text = "\0".join((self.info.fingerprint, " ".join(opts), source))
        return d / hashlib.sha256(text.encode()).hexdigest()[:32]

    def _get_kernel(self, program: cl.Program, name: str) -> cl.Kernel:
        # A fresh cl.Kernel per (backend-level) cache entry: the program may be shared by
        # several entries whose parameters render the same source.
        return cl.Kernel(program, name)

    def to_device(self, array: np.ndarray, *, copy: bool = True) -> cla.Array:
        return self._upload(array, copy)

    def _upload(self, array: np.ndarray, copy: bool = True) -> cla.Array:
        """:meth:`to_device`'s copy (also :meth:`to_device_aside`'s where it takes no
        queue of its own; ``copy``: as there)."""
        a = np.asarray(array)
        self.check_alloc(a.shape, a.dtype)
        if 0 < a.nbytes <= CREATE_UPLOAD_BYTES:
            # small ones (point lists, a group's targets, parameters): the buffer is made
            # with the data (CL_MEM_COPY_HOST_PTR copies at creation); later commands of
            # any queue see it
            buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                            hostbuf=np.ascontiguousarray(a))
            return cla.Array(self.queue, a.shape, a.dtype, data=buf)
        if a.nbytes <= ASYNC_UPLOAD_BYTES:
            # small uploads (point lists, parameters) do not wait for the queue: the
            # transfer reads a private copy (the caller may reuse its array at once),
            # which pyopencl's transfer event keeps alive until the copy is done; later
            # commands of this in-order queue see the data
            return cla.to_device(self.queue, np.array(a, order="C", copy=True) if copy
                                 else np.ascontiguousarray(a),
                                 allocator=self.allocator, async_=True)
        return cla.to_device(self.queue, np.ascontiguousarray(a), allocator=self.allocator)

    def to_device_aside(self, array: np.ndarray, *, copy: bool = True) -> cla.Array:
        """:meth:`to_device` through a queue of its own, queue 0 waiting for the copy
        with a barrier: while a kernel runs, NVIDIA's runtime holds the host at any
        upload to it (a queued write from pageable memory, a buffer made with its data
        or that buffer's first launch) until the kernels queued before have ended, so
        the work behind a long kernel is enqueued only after it; through the other
        queue the copy runs beside the kernel and the host goes on (decision 0129).
        Only on the device kinds of :data:`UPLOAD_ASIDE_ON`; elsewhere :meth:`to_device`
        (see there). ``copy`` False: the transfer reads ``array`` itself, not a private
        copy made first, and the caller leaves it unchanged until the queue has passed
        the upload (a call that waits for results computed from it)."""
        if ("gpu" if self.info.is_gpu else "cpu") not in UPLOAD_ASIDE_ON:
            return self._upload(array, copy)
        # the transfer reads a private array (the caller's own where ``copy`` is False)
        a = np.array(array, order="C", copy=True) if copy else np.ascontiguousarray(array)
        self.check_alloc(a.shape, a.dtype)
        out = cla.empty(self.queue, a.shape, a.dtype, allocator=self.allocator)
        if a.nbytes:
            if self._upload_queue is None:
                self._upload_queue = cl.CommandQueue(self.context)
            ev = cl.enqueue_copy(self._upload_queue, out.data, a, is_blocking=False)
            self._upload_queue.flush()
            cl.enqueue_barrier(self.queue, wait_for=[ev])
            self._aside.append(ev)  # the event holds the host array until it ends
            if len(self._aside) > 64:
                self._aside = [e for e in self._aside
                               if e.command_execution_status != cl.command_execution_status.COMPLETE]
        return out

    def empty(self, shape, dtype) -> cla.Array:
        self.check_alloc(shape, dtype)
        return cla.empty(self.queue, shape, dtype, allocator=self.allocator)

    def free_pooled(self) -> None:
        """Return the buffers the memory pool holds to the driver (no-op without a pool)."""
        if self.allocator is not None:
            self.allocator.free_held()

    _CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
               np.dtype(np.int32): "int", np.dtype(np.uint32): "uint",
               np.dtype(np.int64): "long", np.dtype(np.uint64): "ulong",
               np.dtype(np.uint8): "uchar", np.dtype(np.int8): "char",
               np.dtype(np.uint16): "ushort", np.dtype(np.int16): "short"}

    def fill(self, array: cla.Array, value: float) -> None:
        ctype = self._CTYPES.get(array.dtype)
        if ctype is None or array.size == 0 or not array.flags.forc:
            array.fill(value)
            return
        k = self.kernel("fill.cl.mako", {"CTYPE": ctype}, "fill")
        wg = min(256, self.info.max_work_group_size)
        self.launch(k, (round_up(array.size, wg),), (wg,), array, array.dtype.type(value),
                    np.uint64(array.size))

    #: buffers one zeroing launch takes (kernel arguments: a pointer and an end each)
    ZERO_BATCH = 8

    def _zero_all(self, arrays: list[cla.Array]) -> None:
        """GPUs: :meth:`_zero_words` (one launch per :data:`ZERO_BATCH` arrays, a launch's
        host time saved per array). CPUs: one fill each, as the base class: a fill is a
        short launch there, and the batched kernel's chain of per-word branches runs ten
        times slower on Intel's CPU runtime (11 arrays of 10^6 words: 266 ms against 20 ms
        in fills)."""
        if not self.info.is_gpu:
            super()._zero_all(arrays)
            return
        self._zero_words(arrays)

    def _zero_words(self, arrays: list[cla.Array]) -> None:
        """One ``zero_words`` launch per :data:`ZERO_BATCH` arrays (their 32-bit words end
        to end); a shorter batch repeats its first array with no words, so one program
        serves every count. A lone array takes the plain fill."""
        wg = min(256, self.info.max_work_group_size)
        k = None
        for i in range(0, len(arrays), self.ZERO_BATCH):
            part = arrays[i:i + self.ZERO_BATCH]
            if len(part) == 1:
                self.fill(part[0], 0)
                continue
            ends = np.cumsum([a.nbytes // 4 for a in part]).astype(np.uint64)
            pad = self.ZERO_BATCH - len(part)
            if k is None:
                k = self.kernel("zero.cl.mako", {"NB": self.ZERO_BATCH}, "zero_words")
            self.launch(k, (round_up(int(ends[-1]), wg),), (wg,), *part, *[part[0]] * pad,
                        *ends, *[ends[-1]] * pad)

    def copy_within(self, dst: cla.Array, dst_index: int, src: cla.Array, src_index: int,
                    count: int) -> None:
        if src.dtype != dst.dtype:
            raise ValueError(f"copy_within needs one dtype, got {src.dtype} -> {dst.dtype}")
        if (min(dst_index, src_index, count) < 0 or dst_index + count > dst.size
                or src_index + count > src.size):
            raise ValueError(f"copy_within: {count} elements from {src_index} (of {src.size}) "
                             f"to {dst_index} (of {dst.size}) leave the arrays")
        if count:
            item = dst.dtype.itemsize
            cl.enqueue_copy(self.queue, dst.data, src.data, byte_count=count * item,
                            src_offset=src_index * item, dst_offset=dst_index * item)

    def _write(self, dst: cla.Array, host: np.ndarray, offset: int) -> Any:
        if not host.size:
            return None
        # pyopencl's event keeps ``host`` alive and waits for the copy when dropped
        return cl.enqueue_copy(self.queue, dst.data, host, dst_offset=offset * host.itemsize,
                               is_blocking=False)

    def to_host(self, array: Any) -> np.ndarray:
        if isinstance(array, cla.Array):
            return array.get()
        return np.asarray(array)

    def to_host_async(self, array: Any, out: np.ndarray | None = None,
                      count: int | None = None):
        """A non-blocking read: the host may enqueue the next work while this copy
        waits for the queued kernels, and the copy runs as soon as they end (the
        next kernels behind it), so a row-block pipeline leaves no device gap.
        ``count``: the first ``count`` elements of the flat array only."""
        if not isinstance(array, cla.Array):
            return super().to_host_async(array, out, count)
        size = array.size if count is None else count
        if not 0 <= size <= array.size:
            raise ValueError(f"count must be in 0 .. {array.size}, got {count}")
        if out is None:
            out = np.empty(array.shape if count is None else (size,), array.dtype)
        if out.size != size or out.dtype != array.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {array.dtype} array of {size} "
                             f"values, got {out.dtype} {out.shape}")
        if out.nbytes == 0:
            return lambda: out
        if not (self.pinned_reads and out.nbytes >= PINNED_READ_BYTES):
            ev = cl.enqueue_copy(self.queue, out, array.data, is_blocking=False)

            def wait() -> np.ndarray:
                ev.wait()
                return out
            return wait
        # through pinned (page-locked) staging memory: a read into pageable memory
        # may hold the host until the queue reaches it (then no next work is queued)
        buf, host = self._staging(out.nbytes)
        part = host[:out.nbytes]
        ev = cl.enqueue_copy(self.queue, part, array.data, is_blocking=False)
        _map_pages(out)  # now, beside the queued kernels: the copy after the wait faults none

        def wait_pinned() -> np.ndarray:
            ev.wait()
            np.copyto(out.reshape(-1).view(np.uint8), part)
            self._staging_free.setdefault(host.nbytes, []).append((buf, host))
            return out
        return wait_pinned

    def _staging(self, nbytes: int) -> tuple[cl.Buffer, np.ndarray]:
        """A pinned host buffer of at least ``nbytes`` (mapped once; reused after each
        read): sizes are powers of two, so reads of varying sizes (histograms read up to
        their last used bin) share a few buffers instead of pinning one per size."""
        nbytes = 1 << max(0, nbytes - 1).bit_length()
        free = self._staging_free.get(nbytes)
        if free:
            return free.pop()
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR,
                        nbytes)
        host, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                        0, (nbytes,), np.uint8, is_blocking=True)
        return buf, host

    def is_device_array(self, obj: Any) -> bool:
        return isinstance(obj, cla.Array) and obj.context == self.context

    @staticmethod
    def _arg(a: Any) -> Any:
        if isinstance(a, cla.Array):
            return a.data
        if isinstance(a, Local):
            return cl.LocalMemory(a.nbytes)
        return a

    #: more in-order queues of the same context (created on first use): launches that
    #: do not depend on each other run side by side, as CUDA streams do on NVIDIA
    streams = 3

    def _queue(self, stream: int) -> cl.CommandQueue:
        if stream == 0:
            return self.queue
        if not 0 < stream < self.streams:
            raise ValueError(f"stream={stream} is not supported; allowed: 0 .. "
                             f"{self.streams - 1}")
        side = self._sides.get(stream)
        if side is None:
            side = self._sides[stream] = cl.CommandQueue(
                self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        return side

    @staticmethod
    def _args(args: tuple[Any, ...]) -> tuple[list[Any], tuple[Any, ...]]:
        """The arguments as PyOpenCL takes them (:meth:`_arg`) and their scalar types
        (None: not a scalar), in one pass: a mixed-E map makes ~3,000 launches of ~18
        arguments, and the two passes had cost ~7.5 us a launch (3.4 us in one)."""
        cargs, dtypes = [], []
        for a in args:
            if isinstance(a, cla.Array):
                cargs.append(a.data)
                dtypes.append(None)
            elif isinstance(a, np.generic):
                cargs.append(a)
                dtypes.append(a.dtype)
            elif isinstance(a, Local):
                cargs.append(cl.LocalMemory(a.nbytes))
                dtypes.append(None)
            else:
                cargs.append(a)
                dtypes.append(None)
        return cargs, tuple(dtypes)

    @staticmethod
    def _declare(kernel, dtypes: tuple[Any, ...]) -> tuple[Any, ...]:
        """Scalar argument types (:meth:`_args`) declared once per kernel: PyOpenCL then
        packs the scalars itself (~0.5 us a launch) instead of one buffer-protocol
        set_arg per scalar (~6 us each: 70 us for RQA's 12 scalars on a 2-core EPYC, most
        of a small launch). Returns the types."""
        if kernel.arg_dtypes != dtypes:
            kernel.handle.set_scalar_arg_dtypes(list(dtypes))
            kernel.arg_dtypes = dtypes
        return dtypes

    def launch(self, kernel, global_size, local_size, *args, stream: int = 0,
               wait_for: list[cl.Event] | None = None) -> cl.Event:
        self.check_launch(global_size, local_size)
        cargs, dtypes = self._args(args)
        self._declare(kernel, dtypes)
        return kernel.handle(self._queue(stream), tuple(global_size),
                             None if local_size is None else tuple(local_size), *cargs,
                             wait_for=wait_for)

    def bind(self, kernel, *args) -> Bound:
        """The arguments as PyOpenCL takes them, and their scalar types declared, once: a
        launch through :meth:`launch_bound` then costs PyOpenCL's call alone (RQA's ~100
        launches at N = 10^5 were paced by the host's ~30 us of argument handling each)."""
        cargs, dtypes = self._args(args)
        return Bound(kernel, cargs, self._declare(kernel, dtypes))

    def launch_bound(self, bound, global_size, local_size, changes=None, *, stream: int = 0,
                     wait_for: list[cl.Event] | None = None) -> cl.Event:
        self.check_launch(global_size, local_size)
        args = bound.args
        if changes:
            args = list(args)
            for i, a in changes.items():
                args[i] = self._arg(a)
        kernel = bound.kernel
        if kernel.arg_dtypes != bound.dtypes:  # another launch of the kernel re-declared them
            kernel.handle.set_scalar_arg_dtypes(list(bound.dtypes))
            kernel.arg_dtypes = bound.dtypes
        return kernel.handle(self._queue(stream), tuple(global_size),
                             None if local_size is None else tuple(local_size), *args,
                             wait_for=wait_for)

    def wait(self, event: cl.Event) -> None:
        event.wait()

    def event_seconds(self, event: cl.Event) -> float:
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9

    def finish(self) -> None:
        for side in self._sides.values():
            side.finish()
        self.queue.finish()

    def flush(self) -> None:
        for side in self._sides.values():
            side.flush()
        self.queue.flush()

    def join_streams(self) -> None:
        """A marker in each side queue and a barrier on them in queue 0 (OpenCL 1.2's
        wait-list barrier): the device runs what follows right after the side queues'
        last launches, instead of after a host round trip (the end of an RQA of 10^5
        points on the H100 waited ~0.5 ms for the host to see the queues finished)."""
        marks = [cl.enqueue_marker(side) for side in self._sides.values()]
        if marks:
            cl.enqueue_barrier(self.queue, wait_for=marks)
