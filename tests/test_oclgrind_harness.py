"""The Oclgrind harness of the tests (:func:`conftest.run_under_oclgrind`) fails on what
Oclgrind reports, in the words Oclgrind uses."""

from __future__ import annotations

import pytest
from conftest import run_under_oclgrind


def test_harness_fails_on_a_local_memory_race():
    """A work-item reads a neighbour's local slot without a barrier: Oclgrind reports a
    "Read-write data race", and the harness fails the test (it matched only "Data race",
    which Oclgrind never prints, and so let every race pass)."""
    with pytest.raises(AssertionError, match="data race"):
        run_under_oclgrind("""
            import pyedmcl  # noqa: F401  (registers the pip runtimes)
            import pyopencl as cl
            from clkernels import get_backend
            be = get_backend("oclgrind")
            src = '''__kernel void race(__global int* o) {
                __local int t[4];
                const int l = get_local_id(0);
                t[l] = l;
                o[l] = t[(l + 1) % 4];   /* no barrier between the write and the read */
            }'''
            prg = cl.Program(be.context, src).build()
            buf = cl.Buffer(be.context, cl.mem_flags.WRITE_ONLY, 16)
            prg.race(be.queue, (4,), (4,), buf)
            be.queue.finish()
        """, ignore_uninitialized=True)  # the early reads are uninitialised too: the race alone


def test_harness_fails_on_an_out_of_bounds_write():
    """A work-item writes one element past its buffer: Oclgrind reports an "Invalid
    write", and the harness fails the test."""
    with pytest.raises(AssertionError, match="Invalid write"):
        run_under_oclgrind("""
            import pyedmcl  # noqa: F401  (registers the pip runtimes)
            import pyopencl as cl
            from clkernels import get_backend
            be = get_backend("oclgrind")
            src = '''__kernel void past(__global int* o) {
                o[get_global_id(0) + 1] = 1;   /* the last work-item writes o[4] of 4 */
            }'''
            prg = cl.Program(be.context, src).build()
            buf = cl.Buffer(be.context, cl.mem_flags.WRITE_ONLY, 16)
            prg.past(be.queue, (4,), (4,), buf)
            be.queue.finish()
        """)
