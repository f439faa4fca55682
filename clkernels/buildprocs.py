"""Compile programs in helper processes, for runtimes that compile one program at a time.

NVIDIA's and Intel's OpenCL compilers build one program at a time per process, whatever
the number of threads asking (:meth:`clkernels.Backend.prebuild`'s thread pool gains
little there: H100, the 21 programs of a mixed-E map took 8.5 s on one thread and 6.8 s
on sixteen, their summed build times 80 s). Separate processes compile in parallel.

:func:`start_helpers` starts fresh interpreters (``python -c``, never
``multiprocessing``: a spawned child would re-run the user's main module, and a forked
one cannot use a GPU context its parent opened), each of which opens a context on the
same device and builds programs into PyOpenCL's binary cache, the folder the backend
builds through (NVIDIA: into the driver's compute cache, as PyOpenCL caches no binaries
there). The programs are a queue (:class:`BuildQueue`, a file per claim in a private
folder): the caller and every helper take the next unclaimed one until none is left, so
the caller, which needs no start-up, builds the first programs while the helpers still
open their contexts (about 1.1-1.4 s each on an H200, longer when eight start at once),
and a fast helper takes more than a slow one. The caller then waits for the programs
the helpers claimed (:func:`wait_helpers`, not for helpers still starting, which it
stops) and builds every program as usual, loading the helpers' binaries from that
cache. Helpers only save time: whatever fails in them (start-up, a build error, a
timeout) leaves the program to the caller's own build, which reports errors as always.
``<PREFIX>_BUILD_PROCESSES``: the most helpers (0: none).
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import settings

#: runtimes whose compiler builds one program at a time per process
SERIAL_COMPILERS = ("nvidia", "intel")

#: fewer programs than this are not worth a helper's start-up (~0.5-1 s: an interpreter,
#: PyOpenCL, a context)
MIN_PROGRAMS = 4

#: the most helpers by default (each holds a context and a compiler)
MAX_HELPERS = 8

#: seconds a helper may take per program before it is stopped (the caller then builds)
SECONDS_PER_PROGRAM = 60.0

_HELPER = r"""
import pickle, sys
import clkernels
clkernels.configure(sys.argv[1], sys.argv[2])  # before the job's DeviceInfo imports PyOpenCL
with open(sys.argv[3], "rb") as f:
    job = pickle.load(f)
if job.get("nice"):  # behind a job: its own work comes first
    import os
    try:
        os.nice(10)
    except (AttributeError, OSError):
        pass
import pyopencl as cl
from clkernels.buildprocs import BuildQueue
from clkernels.devices import cl_device
ctx = cl.Context([cl_device(job["info"])])
queue = BuildQueue(job["queue"])
for i, (source, options) in enumerate(job["programs"]):
    if not queue.claim(i):
        continue
    try:
        cl.Program(ctx, source).build(options=options, cache_dir=job["cache_dir"])
        queue.built(i)
    except Exception:
        pass  # the caller builds it and reports the error
    finally:
        queue.done(i)
"""


class BuildQueue:
    """Programs 0 .. n-1 claimed one at a time by the caller and the helpers: the first to
    create ``<i>.claim`` in the folder (exclusively) builds program i and then creates
    ``<i>.done``."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    @classmethod
    def create(cls) -> BuildQueue:
        """A queue in a new private temporary folder (:meth:`remove` deletes it)."""
        return cls(tempfile.mkdtemp(prefix="clkernels-build-queue-"))

    def claim(self, i: int) -> bool:
        """Whether this process takes program ``i`` (nobody had)."""
        try:
            os.close(os.open(self.folder / f"{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                             0o600))
            return True
        except FileExistsError:
            return False

    def built(self, i: int) -> None:
        """Program ``i`` built (a helper's: :meth:`done` follows failures too)."""
        try:
            os.close(os.open(self.folder / f"{i}.built", os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass

    def was_built(self, i: int) -> bool:
        return (self.folder / f"{i}.built").exists()

    def close(self, n: int) -> None:
        """Claim programs 0 .. n-1 that nobody has, as done without building them: the
        helpers find nothing more to take, and only builds under way are pending."""
        for i in range(n):
            if self.claim(i):
                self.done(i)

    def done(self, i: int) -> None:
        """Program ``i`` built (or failed: the caller builds it again and reports why)."""
        try:
            os.close(os.open(self.folder / f"{i}.done", os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass  # the caller stops waiting at its deadline and builds it itself

    def pending(self) -> list[float]:
        """Claim times (mtime) of the programs claimed and not done."""
        out = []
        for c in self.folder.glob("*.claim"):
            if not c.with_suffix(".done").exists():
                try:
                    out.append(c.stat().st_mtime)
                except OSError:
                    continue
        return out

    def claimed(self) -> int:
        """How many programs were claimed."""
        return sum(1 for _ in self.folder.glob("*.claim"))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


#: device memory per helper on a GPU (each opens a context there, ~0.3-0.5 GB on NVIDIA)
GPU_BYTES_PER_HELPER = 2 << 30


def helper_count(runtime: str, programs: int, gpu_memory: int = 0) -> int:
    """Helpers worth starting for ``programs`` builds on ``runtime`` (0: build in-process).

    NVIDIA: PyOpenCL keeps no binaries there; what a helper leaves is the driver's compute
    cache (the PTX's machine code, most of a build), so none with ``CUDA_CACHE_DISABLE=1``.
    ``gpu_memory``: the GPU's bytes (0: not a GPU); one helper per
    :data:`GPU_BYTES_PER_HELPER` of it at most."""
    if runtime not in SERIAL_COMPILERS or programs < MIN_PROGRAMS or getattr(sys, "frozen", False):
        return 0  # (a frozen application's executable is not a Python interpreter)
    if runtime == "nvidia" and os.environ.get("CUDA_CACHE_DISABLE", "") == "1":
        return 0
    most = settings.env_int("BUILD_PROCESSES", 0)
    if most is None:
        most = MAX_HELPERS
    from .backends.base import cpus

    if gpu_memory:
        most = min(most, max(1, gpu_memory // GPU_BYTES_PER_HELPER))
    # the caller builds a share too, so one helper already halves the wait
    return max(0, min(most, cpus() - 1, programs // 2))


def start_helpers(info: Any, programs: list[tuple[str, list[str]]], cache_dir: str,
                  helpers: int, queue: BuildQueue, nice: bool = False) -> list[subprocess.Popen]:
    """Start ``helpers`` processes, each taking programs from ``queue`` (every helper gets
    the whole list; the queue decides who builds what); returns the processes.
    ``nice``: at a lower CPU priority (builds behind a job that runs meanwhile)."""
    cfg = settings.current()
    # the caller's import path (a script may have added clkernels' folder itself)
    env = dict(os.environ, PYOPENCL_COMPILER_OUTPUT="0",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    job = queue.folder / "job.pickle"  # a file: a pipe would block each start on the last
    try:
        job.write_bytes(pickle.dumps({"info": info, "cache_dir": cache_dir, "nice": nice,
                                      "programs": programs, "queue": str(queue.folder)}))
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return []  # no helpers: the caller builds everything itself
    started = []
    for _ in range(helpers):
        try:
            started.append(subprocess.Popen(
                [sys.executable, "-c", _HELPER, cfg.app_name, cfg.env_prefix, str(job)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env))
        except OSError:
            break
    return started


def build_claimed(queue: BuildQueue, programs: list[Any], build) -> int:
    """The caller's part: ``build(program)`` for every program of ``programs`` it claims
    from ``queue`` in order (the helpers take the others); returns how many it built."""
    mine = 0
    for i, prog in enumerate(programs):
        if queue.claim(i):
            try:
                build(prog)
            finally:
                queue.done(i)
            mine += 1
    return mine


def wait_helpers(started: list[subprocess.Popen], queue: BuildQueue) -> None:
    """Wait until every program the helpers claimed is done (at most
    :data:`SECONDS_PER_PROGRAM` after its claim, or until no helper runs), then stop the
    helpers: those left are starting up or finding nothing to claim."""
    while any(p.poll() is None for p in started):
        pending = queue.pending()
        if not pending or time.time() - min(pending) > SECONDS_PER_PROGRAM:
            break
        time.sleep(0.005)
    stop_helpers(started)


def stop_helpers(started: list[subprocess.Popen]) -> None:
    """Stop the helpers still running (starting up, or finding nothing left to claim).
    Their exits are awaited in a thread: a process that held a GPU context takes ~0.2 s to
    end (H200, eight helpers), which the caller, whose programs are built by then, need not
    wait for."""
    for p in started:
        if p.poll() is None:
            p.kill()
    left = [p for p in started if p.returncode is None]
    if left:
        threading.Thread(target=_reap, args=(left,), name="clkernels-build-reap",
                         daemon=True).start()


def _reap(started: list[subprocess.Popen]) -> None:
    for p in started:
        p.wait()
