"""BLAS on one thread while host code runs many small factorisations.

numpy's lstsq, solve and Cholesky on matrices of a few dozen columns (S-map's rows) run
slower on BLAS's own threads than on one: a 1,000 x 21 lstsq took 3.3 ms with OpenBLAS's
two threads on two busy cores, 0.33 ms on one. threadpoolctl's limit is process-global
state, set on entering and restored on leaving: two limits entered and left by different
threads interleave (the first to leave restores BLAS's threads while the other still
runs, and the last to leave can leave BLAS on one thread for good). :func:`one_blas_thread`
counts its users instead: the limit is set when the first enters and restored when the
last leaves, whatever the threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_users = 0
_limit: Any = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS libraries on one thread inside (every thread's work), as long as any caller
    is inside."""
    global _users, _limit
    with _lock:
        if _users == 0:
            from threadpoolctl import threadpool_limits

            _limit = threadpool_limits(limits=1, user_api="blas")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                _limit.restore_original_limits()
                _limit = None


def active() -> bool:
    """Whether some caller is inside :func:`one_blas_thread` now."""
    return _users > 0
