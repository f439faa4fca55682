"""OpenCL's ``fma(a, b, c)`` (``a * b + c`` rounded once) on NumPy arrays, in float32 or
float64, bit for bit.

NumPy has no fused multiply-add. The line and network kernels sum the squares of a
Euclidean distance by ``fma()`` under ``threshold_rule="squared"`` (PyRQA's contracted
sums), so the host's references and the host network path need the same rounding.
Boldo and Melquiond's emulation ("Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008): the exact product
``uh + ul`` (Dekker's product with Veltkamp's split), the exact sum ``th + tl = c + uh``
(Knuth's TwoSum), ``v = RO(tl + ul)`` rounded to odd, then ``RN(th + v)`` is the correctly
rounded ``a * b + c``. Valid without overflow or underflow of the intermediate terms
(distances of finite data in a sane range; subnormal squares are not emulated).
"""

from __future__ import annotations

import numpy as np

_INT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
_SPLIT = {np.dtype(np.float32): 4097.0, np.dtype(np.float64): 134217729.0}  # 2^ceil(p/2) + 1


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = a * a.dtype.type(_SPLIT[a.dtype])
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` rounded to odd: exact if representable, else the neighbour whose last
    significand bit is 1."""
    s, e = _two_sum(a, b)
    even = (np.ascontiguousarray(s).view(_INT[s.dtype]) & 1) == 0
    fix = (e != 0) & even
    if not np.any(fix):
        return s
    toward = np.where(e > 0, s.dtype.type(np.inf), s.dtype.type(-np.inf))
    return np.where(fix, np.nextafter(s, toward), s)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to the arrays' dtype (float32 or float64), as OpenCL's
    ``fma()``; the arrays broadcast."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v) for v in (a, b, c)))
    dt = np.result_type(a, b, c)
    if dt not in _INT:
        raise TypeError(f"fma emulation needs float32 or float64 arrays, got {dt}")
    a, b, c = (np.asarray(v, dtype=dt) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        uh, ul = _two_prod(a, b)
        th, tl = _two_sum(c, uh)
        out = th + _round_odd_sum(tl, ul)
    return out
