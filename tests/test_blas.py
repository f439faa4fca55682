"""pyedmcl._blas: BLAS on one thread while any caller is inside, whatever the threads."""

from __future__ import annotations

import threading

import numpy as np  # noqa: F401  (numpy's BLAS loaded, as in every caller)
from threadpoolctl import threadpool_info

from pyedmcl import _blas


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_limits_held_until_the_last_caller_leaves():
    """Two callers in two threads, the first leaving while the second is inside: BLAS stays
    on one thread until the second leaves, then BLAS's own threads are back (with
    threadpoolctl's limit entered in each thread, the first to leave restored them under
    the second, and the last to leave kept one thread for good)."""
    before = _blas_threads()
    a_in, b_in, a_out, b_go = (threading.Event() for _ in range(4))
    seen = {}

    def a() -> None:
        with _blas.one_blas_thread():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b() -> None:
        a_in.wait(10)
        with _blas.one_blas_thread():
            b_in.set()
            a_out.wait(10)
            seen["b inside, a gone"] = (_blas.active(), _blas_threads())
            b_go.wait(10)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    a_out.wait(10)
    b_go.set()
    ta.join(10)
    tb.join(10)
    active, threads = seen["b inside, a gone"]
    assert active and set(threads) == {1}
    assert not _blas.active()
    assert _blas_threads() == before
