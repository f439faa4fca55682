"""The k-th smallest value of a device array of doubles, selected on the device.

Radix selection on the values' order keys (``templates/select.cl.mako``): each pass
counts one 12-bit digit of the keys that match the digits chosen so far, the host reads
the 4,096 counts and picks the bin that holds the k-th; once that bin holds at most
:data:`GATHER_CAP` values they are copied back and partitioned on the host. Typical
data take two counting passes and one gather: a few small reads instead of reading the
whole array (4 x 10^6 doubles: 32 MB) and partitioning it on the host. The value is
``np.partition(a, k)[k]`` exactly. Nothing here knows about EDM or RQA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backends.base import Backend

#: bits of the key each counting pass decides (2^DIGIT bins in local memory)
DIGIT = 12
#: values of the chosen bin copied back and partitioned on the host, at most
GATHER_CAP = 1 << 16
_SIGN = np.uint64(1 << 63)


@dataclass(frozen=True)
class Selection:
    """The k-th smallest value of an array and its smallest."""

    value: float
    least: float


def order_keys(a: np.ndarray) -> np.ndarray:
    """The uint64 keys that order as the doubles ``a`` do (the kernels' ``order_key``)."""
    b = np.ascontiguousarray(a, np.float64).view(np.uint64)
    return np.where(b >> np.uint64(63) != 0, ~b, b | _SIGN)


def value_of_key(key: int) -> float:
    """The double whose order key is ``key``."""
    k = np.uint64(key)
    bits = k & ~_SIGN if k & _SIGN else ~k
    return float(np.array([bits], np.uint64).view(np.float64)[0])


def _work_group(be: Backend) -> int:
    wg = 1 << (min(256, be.info.max_work_group_size).bit_length() - 1)
    return max(1, wg)


def kth_smallest(be: Backend, a: Any, k: int, n: int | None = None) -> Selection:
    """The ``k``-th smallest (0-based) of the first ``n`` (default all) doubles of the
    device array ``a`` (no NaN) and the smallest of them, selected on ``be``; equal to
    NumPy's ``np.partition(a, k)[k]`` and ``a.min()`` of the same values."""
    n = int(a.size if n is None else n)
    if not 0 <= k < n:
        raise ValueError(f"k={k} is out of range for {n} values (allowed: 0 <= k < n)")
    if n >= 2**31 - 1:
        raise ValueError(f"{n} values are too many (limit 2**31 - 2)")
    wg = _work_group(be)
    groups = max(1, min(-(-n // wg), 8 * max(1, be.info.compute_units)))
    params = {"WG": wg, "DIGIT": DIGIT}
    hk = be.kernel("select.cl.mako", params, "select_histogram")
    gk = be.kernel("select.cl.mako", params, "select_gather")
    gmin = be.empty(groups, np.uint64)
    prefix, mask, below, left = 0, 0, 0, 64
    least: float | None = None
    while True:
        d = min(DIGIT, left)
        shift = left - d
        hist = be.zeros(1 << DIGIT, np.uint32)
        be.launch(hk, (groups * wg,), (wg,), a, np.int32(n), np.uint64(prefix),
                  np.uint64(mask), np.int32(shift), np.uint32((1 << d) - 1),
                  np.int32(least is None), hist, gmin)
        h = be.to_host(hist)[:1 << d].astype(np.int64)
        if least is None:
            least = value_of_key(int(be.to_host(gmin).min()))
        cum = np.cumsum(h)
        b = int(np.searchsorted(cum, k - below, side="right"))
        below += int(cum[b - 1]) if b else 0
        prefix |= b << shift
        mask |= ((1 << d) - 1) << shift
        left = shift
        count = int(h[b])
        if left == 0:  # every bit decided: the bin holds equal values
            return Selection(value_of_key(prefix), least)
        if count <= GATHER_CAP:
            out = be.empty(count, np.float64)
            seen = be.zeros(1, np.uint32)
            be.launch(gk, (groups * wg,), (wg,), a, np.int32(n), np.uint64(prefix),
                      np.uint64(mask), np.uint32(count), seen, out)
            vals = be.to_host(out)
            return Selection(float(np.partition(vals, k - below)[k - below]), least)
