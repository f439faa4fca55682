"""Compile programs in helper processes, for runtimes that compile one program at a time.

NVIDIA's and Intel's OpenCL compilers build one program at a time per process, whatever
the number of threads asking (:meth:`clkernels.Backend.prebuild`'s thread pool gains
little there: H100, the 21 programs of a mixed-E map took 8.5 s on one thread and 6.8 s
on sixteen, their summed build times 80 s). Separate processes compile in parallel.

:func:`start_helpers` starts fresh interpreters (``python -c``, never
``multiprocessing``: a spawned child would re-run the user's main module, and a forked
one cannot use a GPU context its parent opened), each of which opens a context on the
same device and builds its share of the programs into PyOpenCL's binary cache, the
folder the backend builds through (NVIDIA: into the driver's compute cache, as PyOpenCL
caches no binaries there). The caller builds its own share meanwhile, waits
(:func:`wait_helpers`), then builds every program as usual, loading the helpers'
binaries from that cache. Helpers only save time: whatever fails in them (start-up, a
build error, a timeout) leaves the program to the caller's own build, which reports
errors as always. ``<PREFIX>_BUILD_PROCESSES``: the most helpers (0: none).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
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
job = pickle.load(sys.stdin.buffer)
import pyopencl as cl
from clkernels.devices import cl_device
ctx = cl.Context([cl_device(job["info"])])
for source, options in job["programs"]:
    try:
        cl.Program(ctx, source).build(options=options, cache_dir=job["cache_dir"])
    except Exception:
        pass  # the caller builds it and reports the error
"""


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
                  helpers: int) -> list[tuple[subprocess.Popen, int]]:
    """Start ``helpers`` processes, each building every ``helpers + 1``-th program (the
    caller keeps the first share); returns (process, programs it builds) pairs."""
    cfg = settings.current()
    # the caller's import path (a script may have added clkernels' folder itself)
    env = dict(os.environ, PYOPENCL_COMPILER_OUTPUT="0",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    started = []
    for h in range(helpers):
        share = programs[h + 1::helpers + 1]
        if not share:
            continue
        try:
            payload = pickle.dumps({"info": info, "cache_dir": cache_dir, "programs": share})
            p = subprocess.Popen([sys.executable, "-c", _HELPER, cfg.app_name, cfg.env_prefix],
                                 stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            return started  # no helpers: the caller builds these itself
        try:
            assert p.stdin is not None
            p.stdin.write(payload)
            p.stdin.close()
        except OSError:  # the helper died at start: its share is the caller's
            p.kill()
            p.wait()
            continue
        started.append((p, len(share)))
    return started


def wait_helpers(started: list[tuple[subprocess.Popen, int]]) -> None:
    """Wait for the helpers (stopping any that overrun :data:`SECONDS_PER_PROGRAM` per
    program)."""
    for p, n in started:
        try:
            p.wait(timeout=SECONDS_PER_PROGRAM * n)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
