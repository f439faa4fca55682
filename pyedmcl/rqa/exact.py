"""float32 RQA that decides every cell as the float64 path does.

The float32 line kernels decide a cell by ``acc32 < thr32``: ``acc32`` is the distance
(squared for Euclidean) summed in float32 from the *centred* float32 inputs ``z``
(:mod:`pyedmcl._precision`), ``thr32`` the float32 threshold. The float64 path decides
``d64 < thr64`` from the raw float64 series. The two can differ only in cells whose
float32 distance is within a few float32 roundings of the threshold -- on quantized data
(a 0.1 grid, the radius a grid multiple) many cells sit exactly on the threshold. With
``EXACT=1`` (template/common/_exact.mako) a float32 kernel also gets the raw float64
series, ``thr64`` and the bound ``B`` of :func:`error_bound`, and every cell with
``|fl32(acc32 - thr32)| <= B`` is recomputed in double exactly as the float64 kernel
computes it (same coordinate order, FMA flag, no contraction) and decided by
``d64 < thr64``. Only those cells are redone: one subtract and two compares per cell.

Derivation of B (u = 2^-24, v = 2^-53 the unit roundoffs, ``gamma_n(w) = n w / (1 - n w)``).
Let ``x`` be the raw series, ``m`` the centring shift, ``z_i = fl32(fl64(x_i - m))`` the
float32 kernel input and ``A = max |z_i|`` over the series of the pair (rows and
columns). Then ``z_i = x_i - m + eps_i`` with ``|eps_i| <= (u + v + uv) |x_i - m| <=
u (1 + 2^-20) A``. For a cell let ``delta_m = x_a - x_b`` (exact reals, coordinate m of
E), ``D`` the exact distance of the deltas (sum of squares, max or sum of magnitudes).

(a)+(b) float32: the kernel rounds ``Delta_m = fl32(z_a - z_b) = (delta_m + eps_a -
  eps_b)(1 + theta)``, ``|theta| <= u``, so ``e_m = Delta_m - delta_m`` has
  ``|e_m| <= a + u |delta_m|`` with ``a = 2^-23 (1 + 2^-19) A``.
  Euclidean: ``||e||_2 <= sqrt(E) a + u ||delta||_2``, hence for ``S = sum Delta_m^2``,
  ``|S - D| <= 2 sqrt(D) ||e|| + ||e||^2``; the float32 sum (E roundings per term, with
  or without fma) gives ``|acc32 - S| <= gamma_E(u) S``, ``S <= (sqrt(D) + ||e||)^2``.
  Maximum: ``|acc32 - D| <= max |e_m| <= a + u D`` (max and |.| are exact).
  Manhattan: ``|S - D| <= E a + u D``, ``|acc32 - S| <= gamma_{E-1}(u) S``.
(c) float64: ``|d64 - D| <= gamma_{E+2}(v) D`` (Euclidean: a rounded difference, its
  square and E - 1 sums), ``v D`` (maximum), ``gamma_E(v) D`` (Manhattan).
(d) ``|thr32 - thr64|``, computed exactly on the host.

Near cells, ``D <= 2 thr64``: every bound above is increasing in D, so with D = 2 thr64
they give ``Err >= |(acc32 - thr32) - (d64 - thr64)|``. With ``B = 2 Err`` (a safety
factor of 2, rounded up to a float32): ``acc32 - thr32 > B`` gives ``d64 - thr64 >
B / 2 > 0`` (neither path recurrent) and ``acc32 - thr32 < -B`` gives ``d64 < thr64``
(both recurrent). The kernel tests the rounded ``fl32(acc32 - thr32)``; rounding is
monotone and B is a float32, so ``|fl32(acc32 - thr32)| > B`` implies ``|acc32 - thr32|
> B``.
Far cells, ``D > 2 thr64``: B includes ``2 sqrt(2 thr) sqrt(E) a`` (Euclidean), ``a``
(maximum) or ``E a`` (Manhattan), so ``B <= thr64 / 8`` (else B is infinite: every cell
redone, correct and slow, a radius float32 cannot resolve at the data's magnitude)
bounds the absolute error far below thr; then ``acc32 >= 1.8 thr64 > thr32 + B``
(not near, not recurrent) and ``d64 > thr64`` (not recurrent): the paths agree.
Hence a cell that is not near decides alike in both paths, and near cells are decided
by the float64 computation itself: float32 histograms equal float64 ones bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._bands import largest_magnitude
from .._precision import PrecisionWarning, warn_no_fp64  # noqa: F401 (the RQA paths call it)

U32 = 2.0 ** -24
U64 = 2.0 ** -53
#: the safety factor applied to the summed error terms
SAFETY = 2.0


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u)


def error_bound(A: float, thr64: Any, thr32: Any, metric: str, E: int) -> np.ndarray:
    """The bound B (float32, per threshold) of the module docstring: a float32 cell whose
    ``|fl32(acc32 - thr32)| > B`` decides as the float64 path does. ``A``: the largest
    magnitude of the pair's float32 kernel inputs; ``thr64``/``thr32``: the thresholds
    (scalars or arrays, squared for Euclidean); ``E``: coordinates per point."""
    return error_bounds(np.float64(float(A)), thr64, thr32, metric, E)


def error_bounds(A: Any, thr64: Any, thr32: Any, metric: str, E: int) -> np.ndarray:
    """:func:`error_bound` of many pairs at once: ``A``, ``thr64``, ``thr32`` arrays (or
    scalars) broadcast together; each element is the bound of its pair bit for bit (the
    same IEEE operations, element by element)."""
    t64 = np.asarray(thr64, dtype=np.float64)
    t32 = np.asarray(thr32, dtype=np.float32).astype(np.float64)
    a = 2.0 ** -23 * (1 + 2.0 ** -19) * np.asarray(A, dtype=np.float64)
    D = 2.0 * t64
    if metric == "euclidean":
        rD = np.sqrt(D)
        ne = np.sqrt(E) * a + U32 * rD
        err = 2 * rD * ne + ne * ne
        err = err + _gamma(E, U32) * (rD + ne) ** 2 + _gamma(E + 2, U64) * D
    elif metric == "maximum":
        err = a + U32 * D + U64 * D
    elif metric == "manhattan":
        s_err = E * a + U32 * D
        err = s_err + _gamma(max(E - 1, 0), U32) * (D + s_err) + _gamma(E, U64) * D
    else:
        raise ValueError(f"unknown metric {metric!r}: use euclidean, maximum or manhattan")
    with np.errstate(invalid="ignore", over="ignore"):
        b = SAFETY * (err + np.abs(t32 - t64))
    b = np.where(np.isfinite(b), b, np.inf)  # an infinite threshold: every cell redone
    b32 = b.astype(np.float32)
    b32 = np.where(b32.astype(np.float64) < b, np.nextafter(b32, np.float32(np.inf)), b32)
    with np.errstate(invalid="ignore"):
        return np.where(b <= t64 / 8, b32, np.float32(np.inf)).astype(np.float32)


def largest(*series: np.ndarray) -> float:
    """A = the largest magnitude of the float32 kernel inputs (0 for none; NaN values,
    which no cell decides, skipped): each distinct array once (auto-RQA passes its series
    as rows and columns), by :func:`~pyedmcl._bands.largest_magnitude`."""
    tops = [largest_magnitude(s) for s in {id(s): s for s in series}.values() if s.size]
    return max([t for t in tops if not np.isnan(t)] or [0.0])  # (all-NaN: nothing decided)


@dataclass
class Exact:
    """What an EXACT float32 run adds to the kernel inputs: the raw float64 series the
    float64 path would get (rows, columns; JOINT: the second pair), the float64
    thresholds and the bounds (float32; PERCOL: per column, ``tcol64`` / ``bcol``)."""

    x: np.ndarray
    y: np.ndarray
    thr64: float
    b: float
    x2: np.ndarray | None = None
    y2: np.ndarray | None = None
    thr264: float = 0.0
    b2: float = 0.0
    tcol64: np.ndarray | None = None
    bcol: np.ndarray | None = None

    def __repr__(self) -> str:  # a job key (Dask) must tell the arrays apart
        import hashlib

        h = hashlib.blake2b(digest_size=8)
        for a in (self.x, self.y, self.x2, self.y2, self.tcol64, self.bcol):
            h.update(b"-" if a is None else np.ascontiguousarray(a).tobytes())
        return (f"Exact(thr64={self.thr64!r}, b={self.b!r}, thr264={self.thr264!r}, "
                f"b2={self.b2!r}, arrays={h.hexdigest()})")


def exact_pair(raw_x: np.ndarray, raw_y: np.ndarray, zx: np.ndarray, zy: np.ndarray,
               thr64: float, thr32: float, metric: str, E: int) -> tuple[np.ndarray,
                                                                          np.ndarray, float]:
    """One pair's raw float64 series and its float32 bound (see :func:`error_bound`)."""
    b = float(error_bound(largest(zx, zy), thr64, thr32, metric, E))
    return (np.ascontiguousarray(raw_x, dtype=np.float64),
            np.ascontiguousarray(raw_y, dtype=np.float64), b)


def make_exact(raw_x: np.ndarray, raw_y: np.ndarray, zx: np.ndarray, zy: np.ndarray,
               thr64: float, thr32: float, metric: str, E: int, *,
               pair2: tuple | None = None, tcol: tuple[np.ndarray, np.ndarray] | None = None
               ) -> Exact:
    """An :class:`Exact` for float32 kernel inputs ``zx``/``zy`` (rows / columns) whose
    float64 path reads ``raw_x``/``raw_y`` with ``thr64``. ``pair2``: JOINT's second pair,
    ``(raw_x2, raw_y2, zx2, zy2, thr264, thr232)``; ``tcol``: PERCOL's per-column
    thresholds ``(tcol64, tcol32)``."""
    x, y, b = exact_pair(raw_x, raw_y, zx, zy, thr64, thr32, metric, E)
    ex = Exact(x, y, float(thr64), b)
    if pair2 is not None:
        rx2, ry2, zx2, zy2, t264, t232 = pair2
        ex.x2, ex.y2, ex.b2 = exact_pair(rx2, ry2, zx2, zy2, t264, t232, metric, E)
        ex.thr264 = float(t264)
    if tcol is not None:
        t64, t32 = tcol
        ex.tcol64 = np.ascontiguousarray(t64, dtype=np.float64)
        ex.bcol = error_bound(largest(zx, zy), ex.tcol64, t32, metric, E)
    return ex


def near_cells(zx: np.ndarray, zy: np.ndarray, E: int, tau: int, metric: str,
               thr32: Any, b: Any, fma: bool = False) -> np.ndarray:
    """Reference (tests): the float32 matrix's cells the kernels redo, ``|fl32(acc32 -
    thr32)| <= B``, from the float32 inputs as the kernels sum them (rows ``zx``)."""
    from .distances import kernel_distances

    n_r, n_c = len(zx) - (E - 1) * tau, len(zy) - (E - 1) * tau
    px = np.stack([zx[m * tau:m * tau + n_r] for m in range(E)], axis=1).astype(np.float32)
    py = np.stack([zy[m * tau:m * tau + n_c] for m in range(E)], axis=1).astype(np.float32)
    acc = kernel_distances(px, py, metric, fma)
    dd = (acc - np.asarray(thr32, dtype=np.float32)).astype(np.float32)
    return np.abs(dd) <= np.asarray(b, dtype=np.float32)


#: EXACT on for float32 runs (see :func:`unchecked`)
_ENABLED: list[bool] = [True]


class unchecked:
    """Within this block float32 RQA runs without the exact redo (EXACT=0: benchmarks of
    its cost, tests of the unchecked kernels)."""

    def __enter__(self) -> None:
        _ENABLED.append(False)

    def __exit__(self, *exc: Any) -> None:
        _ENABLED.pop()


def wanted(dt: Any) -> bool:
    """Whether a run in ``dt`` redoes its near cells: float32 (and not :class:`unchecked`)."""
    return np.dtype(dt) == np.float32 and _ENABLED[-1]


def for_runs(dt: Any, raw: tuple[np.ndarray, np.ndarray], z: tuple[np.ndarray, np.ndarray],
             metric: str, E: int, thr32: Sequence[float], thr64: Sequence[float]
             ) -> list[Exact | None]:
    """:func:`for_run` of several thresholds of one pair at once (each given as its
    float32 and float64 threshold, as a grid's pass holds them): the inputs' largest
    magnitude taken once and the bounds by :func:`error_bounds`, element by element as
    :func:`error_bound` computes each, so every :class:`Exact` is :func:`for_run`'s."""
    if not wanted(dt):
        return [None] * len(thr32)
    if not len(thr32):
        return []
    t64 = np.asarray(thr64, dtype=np.float64)
    b = error_bounds(np.float64(largest(*z)), t64, np.asarray(thr32, dtype=np.float32),
                     metric, E)
    x = np.ascontiguousarray(raw[0], dtype=np.float64)
    y = np.ascontiguousarray(raw[1], dtype=np.float64)
    return [Exact(x, y, float(t), float(bb)) for t, bb in zip(t64, b, strict=True)]


def for_run(dt: Any, raw: tuple[np.ndarray, np.ndarray], z: tuple[np.ndarray, np.ndarray],
            radius: float, metric: str, rule: str, E: int, thr32: float | None = None, *,
            pair2: tuple | None = None, thr64: float | None = None,
            thr264: float | None = None) -> Exact | None:
    """The :class:`Exact` of a float32 run whose kernels read ``z`` (rows, columns: float32)
    with threshold ``thr32`` (default: ``radius``'s) and whose float64 path would read
    ``raw`` (float64) with ``radius`` under ``rule``; None in float64 (or
    :class:`unchecked`). ``pair2``: JOINT's ``(raw2, z2, radius2, thr232)``. ``thr64`` /
    ``thr264``: the float64 path's thresholds where the caller has them (a fixed rate's,
    :class:`~pyedmcl.rqa.radius.RateThreshold`; default: the radius's)."""
    if not wanted(dt):
        return None
    from .threshold import kernel_threshold

    def thr(r: float) -> tuple[float, float]:
        return (kernel_threshold(r, metric, np.float64, rule),
                kernel_threshold(r, metric, np.float32, rule))

    t64, t32 = thr(radius)
    t32 = t32 if thr32 is None else thr32
    t64 = t64 if thr64 is None else thr64
    p2 = None
    if pair2 is not None:
        (rx2, ry2), (zx2, zy2), r2, t232 = pair2
        t264, t232_ = thr(r2)
        t264 = t264 if thr264 is None else thr264
        p2 = (rx2, ry2, zx2, zy2, t264, t232_ if t232 is None else t232)
    return make_exact(raw[0], raw[1], z[0], z[1], t64, t32, metric, E, pair2=p2)
