"""Row-wise work on a large 2-D panel in bands of rows, on a few threads.

numpy releases the GIL in its loops, so bands of rows run in parallel. Every row's
result is computed alone either way (a reduction along axis 1 reduces each row by
itself; a cast or copy is elementwise), so the result is the same bit for bit as one
call on the whole panel. Small panels, or a machine of one core, take one call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

#: panels from this many values are split into bands
PARALLEL_VALUES = 1 << 22
#: at most this many threads
THREADS = 8


def row_bands(a: np.ndarray, max_threads: int | None = None) -> tuple[list[slice], int]:
    """The bands of rows of ``a`` (four per thread) and the threads (at most
    ``max_threads``, else :data:`THREADS`) to run them on; one band of all rows where
    splitting does not pay."""
    rows = a.shape[0] if a.ndim else 1
    threads = min(max_threads or THREADS, os.cpu_count() or 1, rows // 8)
    if a.ndim != 2 or a.size < PARALLEL_VALUES or threads < 2:
        return [slice(0, rows)], 1
    step = -(-rows // (4 * threads))
    return [slice(i, i + step) for i in range(0, rows, step)], threads


def map_bands(fn: Callable[[np.ndarray], Any], a: np.ndarray,
              max_threads: int | None = None) -> list[Any]:
    """``fn`` of each band of rows of ``a``, in row order (one call on ``a`` where it is
    small)."""
    bands, threads = row_bands(a, max_threads)
    if threads == 1:
        return [fn(a)]
    return _on_threads(lambda sl: fn(a[sl]), bands, threads)


def map_slices(fn: Callable[[slice], Any], a: np.ndarray, max_threads: int | None = None,
               ) -> list[Any]:
    """``fn`` of the row slice of each band of ``a`` (2-D), in row order: for work that
    reads the same rows of several arrays of ``a``'s shape."""
    bands, threads = row_bands(a, max_threads)
    return [fn(bands[0])] if threads == 1 else _on_threads(fn, bands, threads)


def _on_threads(fn: Callable[[slice], Any], bands: list[slice], threads: int) -> list[Any]:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as ex:
        return list(ex.map(fn, bands))


def map_row_chunks(fn: Callable[[slice], Any], a: np.ndarray, chunk_values: int) -> None:
    """``fn`` of each chunk of rows of ``a`` (2-D; a slice of about ``chunk_values``
    values, at least one row), chunk after chunk within bands of rows on threads
    (:func:`map_slices`): for row-wise work that takes a chunk through several steps
    while it is in cache."""
    rows, cols = a.shape
    step = max(1, chunk_values // max(cols, 1))

    def band(sl: slice) -> None:
        lo, hi, _ = sl.indices(rows)
        for i in range(lo, hi, step):
            fn(slice(i, min(i + step, hi)))

    map_slices(band, a)


_POOL: list[Any] = []
_POOL_LOCK = threading.Lock()
_POOL_NAME = "pyedmcl-pieces"


def map_pieces(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` of each item, in order, on one pool of threads kept for the process (no
    threads started and joined per call: a batch's host work calls this once per device
    launch, and a forked child makes its own); in the calling thread where there is one
    item, one core, or the caller is itself one of the pool's threads (no pool waits on
    itself)."""
    threads = min(THREADS, os.cpu_count() or 1)
    if len(items) < 2 or threads < 2 or \
            threading.current_thread().name.startswith(_POOL_NAME):
        return [fn(x) for x in items]
    with _POOL_LOCK:
        if not _POOL or _POOL[0][0] != os.getpid():  # a forked child starts its own
            from concurrent.futures import ThreadPoolExecutor
            _POOL[:] = [(os.getpid(), ThreadPoolExecutor(threads, thread_name_prefix=_POOL_NAME))]
    return list(_POOL[0][1].map(fn, items))


def rowwise(fn: Callable[[np.ndarray], np.ndarray], a: np.ndarray,
            max_threads: int | None = None) -> np.ndarray:
    """A per-row result ``fn(a)`` (``fn`` reduces along axis 1) computed by bands."""
    return np.concatenate(map_bands(fn, a, max_threads))


def cast_rows(a: np.ndarray, dtype: Any) -> np.ndarray:
    """``a`` as a C-contiguous ``dtype`` array (a copy where the dtype differs), cast by
    bands."""
    dt = np.dtype(dtype)
    if a.dtype == dt and a.flags.c_contiguous:
        return a
    out = np.empty(a.shape, dt)
    bands, threads = row_bands(a)
    if threads == 1:
        out[...] = a
        return out

    def band(sl: slice) -> None:
        out[sl] = a[sl]

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(band, bands))
    return out


def largest_magnitude(a: np.ndarray) -> float:
    """max |a| without an |a| temporary: fmax / fmin reductions, which skip NaNs (NaN
    where every value is one) without nanmax's all-NaN warning, by bands of rows for a
    large panel; the same value as one pass."""
    parts = map_bands(lambda b: (np.fmax.reduce(b, axis=None), np.fmin.reduce(b, axis=None)), a)
    hi = np.fmax.reduce(np.array([p[0] for p in parts]))
    lo = np.fmin.reduce(np.array([p[1] for p in parts]))
    return float(max(hi, -lo))
