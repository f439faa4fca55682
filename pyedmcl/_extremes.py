"""A call's host series reduced to their least and largest values once.

Several checks of one public call need the same two reductions of a series: whether it
is constant (:mod:`pyedmcl.constant_series`), whether it holds a NaN (the state-space
path, :mod:`pyedmcl.edm.statespace`), whether it is finite and within range
(:func:`pyedmcl.validation.as_series`), and how far float32 must reach after centring
(:func:`pyedmcl._precision.prepare`). Each took two passes over the series of its own.

:func:`call_memo` (entered by a checked public function for its call) opens a memo in a
context variable (per thread and task): :func:`extremes` of an array it has seen returns
the values it computed then. Entries are keyed by the array object and hold it, so an id
is not reused while the call runs; the memo ends with the call. pyedmcl never changes an
input in place, so the values stay the array's own. Outside a memo nothing is kept.

The values are those of ``a.min()`` and ``a.max()`` (NaN where the array holds one: both
reductions propagate it), so every check decides as it did with its own passes.
:func:`row_extremes` does the same for each row of a panel (2-D targets: 20,000 series
of 10^3 values were reduced three times over, by the constant-series check, the NaN
test and the targets' validation), and :func:`extremes` of a panel whose rows it
reduced takes the least and largest of theirs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

_MEMO: ContextVar[dict[int, tuple[np.ndarray, tuple[float, float]]] | None] = ContextVar(
    "pyedmcl_extremes", default=None)


@contextmanager
def call_memo() -> Iterator[None]:
    """A memo of :func:`extremes` for the block (a call); inside another, that one."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def extremes(a: np.ndarray) -> tuple[float, float]:
    """``(min, max)`` of the non-empty real array ``a`` as floats (NaN where ``a`` holds
    a NaN), from the call's memo where the call computed them already (or its rows'
    extremes: the least of the rows' least values is the array's, NaN alike)."""
    memo = _MEMO.get()
    if memo is not None:
        hit = memo.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        rows = memo.get(("rows", id(a)))
        if rows is not None and rows[0] is a and rows[1][0].size:
            lo, hi = rows[1]
            got = (float(lo.min()), float(hi.max()))
            memo[id(a)] = (a, got)
            return got
    got = (float(a.min()), float(a.max()))
    if memo is not None:
        memo[id(a)] = (a, got)
    return got


def same_values(copy: np.ndarray, of: np.ndarray) -> np.ndarray:
    """``copy`` (a copy of ``of``: the same values), whose :func:`extremes` are ``of``'s
    where the call has them: a contiguous copy of a strided input is not reduced again."""
    memo = _MEMO.get()
    if memo is not None:
        hit = memo.get(id(of))
        if hit is not None and hit[0] is of:
            memo[id(copy)] = (copy, hit[1])
    return copy


def row_extremes(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a.min(axis=1), a.max(axis=1))`` of the 2-D real array ``a`` (NaN in a row
    that holds one), from the call's memo where the call computed them already; a large
    panel by bands of rows on threads (the same values)."""
    from ._bands import map_bands

    memo = _MEMO.get()
    key = ("rows", id(a))
    if memo is not None:
        hit = memo.get(key)
        if hit is not None and hit[0] is a:
            return hit[1]
    parts = map_bands(lambda b: (b.min(axis=1), b.max(axis=1)), a)
    got = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    if memo is not None:
        memo[key] = (a, got)
    return got


def has_nan(a: np.ndarray) -> bool:
    """Whether the real array ``a`` holds a NaN (its least value is NaN then)."""
    return a.dtype.kind == "f" and a.size > 0 and math.isnan(extremes(a)[0])
