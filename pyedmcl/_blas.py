"""BLAS on one thread while host code runs many small factorisations.

numpy's lstsq, solve and Cholesky on matrices of a few dozen columns (S-map's rows) run
slower on BLAS's own threads than on one: a 1,000 x 21 lstsq took 3.3 ms with OpenBLAS's
two threads on two busy cores, 0.33 ms on one.

threadpoolctl's limit is process-global, and OpenBLAS (0.3.31, numpy 2.4's) takes it from
the main thread only: once BLAS has run on several threads, a thread count set or
restored from another thread is ignored (measured: set there, BLAS kept two threads; a
limit set in the main thread and restored from another stayed at one for good).
:func:`one_blas_thread` therefore sets and restores the limit in the main thread alone,
once for nested uses; entered from another thread it changes nothing (BLAS keeps its
threads there: slower, the same answers). Whether threads started inside the guard run
BLAS on one thread too depends on the build (OpenBLAS 0.3.31 showed both: the limit is
per thread once BLAS has run on several); the answers are the same either way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_depth = 0  # the main thread's nested entries
_limit: Any = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS libraries on one thread inside, when entered from the main thread; elsewhere
    nothing changes (module docstring)."""
    global _depth, _limit
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        from threadpoolctl import threadpool_limits

        _limit = threadpool_limits(limits=1, user_api="blas")
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _limit.restore_original_limits()
            _limit = None


def active() -> bool:
    """Whether the main thread holds the limit now."""
    return _depth > 0
