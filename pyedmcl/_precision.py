"""float32 you can trust: standardise each series before it becomes a float32 kernel input.

Why. float32 has a 24-bit significand: a series sitting at 1e6 with a spread of 1
keeps about 4 significant bits of its *variation*, and the squared distances the
k-NN kernels take cancel the rest (CCM on a coupled-logistic pair: rho 0.976;
the same data + 1e6: rho 0.306). Every EDM quantity we compute is invariant to an
affine change of each series (neighbours and their weights depend on distance
*ratios*; Pearson rho is affine-invariant; predictions are weighted averages or
local linear fits of the target, so they transform with it), so the float32 path
computes on ``z = (x - mean) / std`` (mean and std in float64) and maps the
answers back:

* predictions and observed values: ``p * std_y + mean_y``; MAE, RMSE: ``* std_y``;
  prediction variances ``* std_y**2``;
* S-map coefficients of ``y = C0 + sum_k C_k x_k``: ``C_k = C'_k * std_y / std_x``
  and ``C0 = mean_y + std_y * C'_0 - mean_x * sum_k C_k`` (derivation in
  :func:`pyedmcl.edm.smap.smap_core`); a ridge penalty becomes ``ridge / std_x**2``;
* RQA (a radius is in data units): centre only, ``z = x - mean``, so every
  distance, and so every recurrence decision, is the float64 one up to float32
  rounding of centred values (cross-RQA centres both series by one common mean).
* Simplex (predictions, scans, generation, the cross map and its E scan): centre only
  too. pyEDM floors the nearest distance at 1e-6 in data units (``exp(-d / max(d_min,
  1e-6))``), so Simplex is not scale-invariant where neighbours are closer than that;
  scaling by a power of two would move the floor (a series at 1e-5 of its units: rho
  3.5e-4 off pyEDM and float64). Dividing by a power of two is exact, so it changed
  nothing else; a spread below :data:`FLOAT32_MIN_SPREAD` (squared distances would
  underflow) runs in float64, as data beyond :data:`FLOAT32_MAX_INPUT` do.

float64 is never transformed: its results are exactly those of the plain path.

When float32 still cannot hold the data. Centring in float64 removes the
"spread tiny against magnitude" problem (``std/|mean| < 1e-6`` leaves ~1e-10 of
relative precision in float64, plenty for float32 after centring). What remains is
a series whose values are distinct in float64 but merge once standardised and cast
to float32 (clusters far apart with tiny spread inside each, or extreme outliers):
new ties change neighbour sets. When more than :data:`MAX_MERGED_FRACTION` of the
distinct values merge, the call switches to float64 with one
:class:`PrecisionWarning` (where the device has fp64), or is refused with the
remedy (where it has not). Below that fraction merges are float32's ordinary
rounding (about 1e-7 of the spread): a random series of 10^6 values merges ~1% of
its values by chance, 10^5 values ~0.1%.

Rows float32 cannot hold. Even with no merged value, Simplex's weights
``exp(-d_i / d_min)`` amplify float32's distance error where neighbours are far closer
than the data's magnitude (states that nearly repeat, dense libraries at E = 1): a
prediction can then be off by percents of the target's spread while rho moves by 1e-7.
float32 Simplex therefore bounds each prediction's error on the device and recomputes the
predictions beyond 1e-5 of the target's standard deviation in float64
(:mod:`pyedmcl.edm.row_check`, the lookup template's CHECK).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._bands import (
    THREADS,
    cast_rows,
    largest_magnitude,
    map_row_chunks,
    map_slices,
    row_bands,
    rowwise,
)

#: largest |value| a float32 kernel input may hold: squares of differences of E such
#: values stay finite in float32 (max 3.4e38)
FLOAT32_MAX_INPUT = 1e18
#: the least spread (std) a centred-only (not scaled) float32 input may have: squared
#: distances between close points must stay above float32's smallest normal, 1.2e-38
FLOAT32_MIN_SPREAD = 1e-12

#: largest fraction of a series' distinct values that may merge in the float32 cast
MAX_MERGED_FRACTION = 0.05


class PrecisionWarning(UserWarning):
    """float32 could not hold a series after standardising it: the call ran in float64."""

_warned_no_fp64 = [False]


def warn_no_fp64(device: str) -> None:
    """Once per process: a device without fp64 runs float32 RQA unchecked (the exact redo
    of cells near the radius needs double; :mod:`pyedmcl.rqa.exact`)."""
    if _warned_no_fp64[0]:
        return
    _warned_no_fp64[0] = True
    warnings.warn(f"{device} has no fp64: float32 RQA there decides cells within float32 "
                  "rounding of the radius in float32 (ties on quantized data may differ "
                  "from dtype='float64')", PrecisionWarning, stacklevel=3)



@dataclass(frozen=True)
class Affine:
    """``x = z * scale + shift`` per series (row): how a kernel input maps back to data units.

    ``shift``/``scale`` are float64 arrays of shape ``(rows,)`` (one row for a 1-D series).
    The identity (``shift`` 0, ``scale`` 1) is what float64 calls get.
    """

    shift: np.ndarray
    scale: np.ndarray
    #: each row's std in data units where :func:`_affine` measured it (None otherwise):
    #: the spread check of :func:`prepare` reads it instead of a second pass over the data
    spread: np.ndarray | None = field(default=None, compare=False, repr=False)

    @classmethod
    def identity(cls, rows: int = 1) -> Affine:
        return cls(np.zeros(rows), np.ones(rows))

    @property
    def is_identity(self) -> bool:
        return bool(np.all(self.shift == 0) and np.all(self.scale == 1))

    def _col(self, a: np.ndarray, v: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return v[0] if a.ndim <= 1 and v.size == 1 else v.reshape((-1,) + (1,) * (a.ndim - 1))

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Data units -> the standardised values (float64)."""
        if self.is_identity:
            return x
        z = x - self._col(x, self.shift)
        if not np.all(self.scale == 1):  # centred only (RQA, Simplex): no pass dividing by 1
            z /= self._col(x, self.scale)  # in place: one panel-sized temporary, not two
        return z

    def back(self, z: np.ndarray) -> np.ndarray:
        """Standardised values (predictions) -> data units (float64)."""
        if self.is_identity:
            return z
        return z * self._col(z, self.scale) + self._col(z, self.shift)

    def back_spread(self, s: Any, power: int = 1) -> Any:
        """A spread (MAE, RMSE: power 1; a variance: power 2) back to data units."""
        if self.is_identity:
            return s
        return s * self._col(np.asarray(s), self.scale) ** power

    def back_in_place(self, z: np.ndarray) -> np.ndarray:
        """:meth:`back` written into ``z`` (a float64 array of the caller's own) and
        returned: each value's product and sum as there, without the two temporaries of
        the array's size. A scale of 1 (centred only) is not multiplied by: ``z * 1`` is
        ``z`` in IEEE arithmetic."""
        if self.is_identity:
            return z
        if not np.all(self.scale == 1):
            np.multiply(z, self._col(z, self.scale), out=z)
        return np.add(z, self._col(z, self.shift), out=z)

    def back_from(self, z: np.ndarray) -> np.ndarray:
        """:meth:`back_in_place` of ``z.astype(np.float64)`` (``z``: the kernels' float32
        predictions ``(rows, m)``), the same values: a float32 value is exact in float64,
        so the cast goes inside the first operation instead of a pass of its own, and a
        large panel goes by bands of rows on threads."""
        z2 = z.reshape(1, -1) if z.ndim == 1 else z
        out = np.empty(z2.shape, np.float64)
        scaled = not self.is_identity and not np.all(self.scale == 1)

        def band(sl: slice) -> None:
            part, o = z2[sl], out[sl]
            if self.is_identity:
                o[...] = part
                return
            if scaled:
                np.multiply(part, self._col(part, self.scale[sl]), out=o)
                np.add(o, self._col(o, self.shift[sl]), out=o)
            else:  # centred only: no pass multiplying by 1
                np.add(part, self._col(part, self.shift[sl]), out=o)

        map_slices(band, z2)
        return out.reshape(z.shape)

    def back_spread_in_place(self, s: np.ndarray, power: int = 1) -> np.ndarray:
        """:meth:`back_spread` written into ``s`` (a float64 array of the caller's own)
        and returned; nothing to do where every scale is 1."""
        if self.is_identity or np.all(self.scale == 1):
            return s
        return np.multiply(s, self._col(s, self.scale) ** power, out=s)


_ENABLED = [True]


@contextmanager
def unstandardised():
    """Within this block float32 inputs reach the kernels as given (no centring or
    scaling, no merge check): the plain path, e.g. the reference that device-array inputs
    (always used as given) are compared with in the tests."""
    _ENABLED.append(False)
    try:
        yield
    finally:
        _ENABLED.pop()


@dataclass
class Prepared:
    """The outcome of :func:`prepare`: the dtype to run in, the kernel inputs (float64
    values, standardised when ``dtype`` is float32), and the map back per input."""

    dtype: np.dtype
    series: list[np.ndarray]
    affine: list[Affine]
    #: the series already cast to ``dtype`` (``prepare(cast=True)``), else None
    cast: list[np.ndarray] | None = field(default=None, repr=False, compare=False)
    #: a deferred merge check: (its future, fp64, what), see :meth:`float32_holds`
    _verdict: Any = field(default=None, repr=False, compare=False)
    #: a gated check not yet started: (the check, fp64, what), see :meth:`start_check`
    _gated: Any = field(default=None, repr=False, compare=False)
    _gate_lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)
    #: the values a gated check sorts (:data:`INLINE_CHECK_VALUES`)
    _check_values: int = field(default=0, repr=False, compare=False)

    @property
    def real(self) -> str:
        return "double" if self.dtype == np.float64 else "float"

    def kernel_input(self, i: int = 0) -> np.ndarray:
        """Series ``i`` as a C-contiguous ``dtype`` array: the cast :func:`prepare` made
        beside the standardisation, else a cast now."""
        if self.cast is not None:
            return self.cast[i]
        return cast_rows(self.series[i], self.dtype)

    def start_check(self, inline_values: int = 0) -> None:
        """Start a gated merge check (``prepare(deferred="gated")``) in the background now;
        idempotent, and a no-op for other checks. A caller gates it where the check's
        threads would slow host work that its devices wait for: an all-to-all map opens
        it once every device has its first row block queued (the check beside the map's
        start delays the devices' first launches). A check of at most
        :data:`INLINE_CHECK_VALUES` values, or ``inline_values`` where the caller gives
        more, runs here, now, on the calling thread."""
        with self._gate_lock:
            if self._gated is None:
                return
            check, fp64, what = self._gated
            self._gated = None
            if self._check_values <= max(INLINE_CHECK_VALUES, inline_values):  # here, now
                done: Future = Future()
                done.set_result(check())
                self._verdict = (done, fp64, what)
            else:
                self._verdict = (_check_pool().submit(check), fp64, what)

    def speculation(self) -> Speculation | None:
        """The deferred merge check as seen by work that runs before its verdict (None:
        no check was deferred): :class:`Speculation`."""
        self.start_check()
        return None if self._verdict is None else Speculation(self._verdict[0])

    def float32_holds(self) -> bool:
        """The deferred merge check's verdict (waits for it): True when the inputs hold
        in float32 (or no check was deferred); False after warning that the call runs
        in float64 (the caller runs it again so); raises where the device lacks fp64.
        A gated check not started yet starts now."""
        self.start_check()
        if self._verdict is None:
            return True
        future, fp64, what = self._verdict
        why = future.result()
        if why is None:
            return True
        _fall_back(why, fp64, what)
        return False


@dataclass(frozen=True)
class Speculation:
    """A deferred merge check, asked without waiting by work that runs in float32 before
    its verdict (e.g. RQA's launches): ``pending()`` while it runs, ``failed()`` once it
    has found that float32 cannot hold the inputs (the work may stop then: the caller
    runs again in float64 after :meth:`Prepared.float32_holds`)."""

    future: Any

    def pending(self) -> bool:
        return not self.future.done()

    def failed(self) -> bool:
        return self.future.done() and self.future.result() is not None


_PKG = os.path.dirname(os.path.abspath(__file__))


def _user_level() -> int:
    """The ``stacklevel`` of the first caller outside pyedmcl (the warning points there)."""
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG):
        f, level = f.f_back, level + 1
    return level


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(1, -1) if a.ndim == 1 else a


#: values per slab of rows checked at once (bounds the check's temporaries to ~0.3 MB)
_CHECK_VALUES = 1 << 14


def _merged_slab(part: np.ndarray) -> np.ndarray:
    """Per row of a slab: the fraction of distinct values its float32 cast merges. One
    sort: rounding to float32 is monotone, so the cast of the sorted row is sorted."""
    s = np.sort(part, axis=1)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, a difference (as NaNs count)
        u0 = 1 + np.count_nonzero(np.diff(s, axis=1), axis=1)
        u32 = 1 + np.count_nonzero(np.diff(s.astype(np.float32), axis=1), axis=1)
    return (u0 - u32) / u0


#: threads of a large panel's merge check (:func:`merged_fraction`)
CHECK_THREADS = 4

#: values from which one row is checked in value buckets on several threads
_BUCKETED_VALUES = 1 << 18


def _merged_row_bucketed(row: np.ndarray, threads: int, limit: float | None = None) -> float:
    """:func:`_merged_slab` of one long row, its sort split over ``threads``: the values
    go to buckets by their float32 cast (splitters from a strided sample), so equal
    values, and values whose casts are equal, share a bucket; bucket by bucket the
    distinct counts then add up to the whole row's exactly (NaNs, in no bucket, count
    one each, as the whole sort counts them).
    ``limit``: the bound of :func:`_merged_bound_slab` first, from the buckets' float32
    sorts alone, returned where it is within ``limit`` (the exact float64 sorts only
    where it is not, or where the splitters' sample already repeats beyond it)."""
    from concurrent.futures import ThreadPoolExecutor

    r32 = row.astype(np.float32)
    sample = np.sort(r32[:: max(1, row.size // 4096)])
    sample = sample[~np.isnan(sample)]
    nb = 2 * threads
    cuts = np.unique(sample[(np.arange(1, nb) * sample.size) // nb]) if sample.size else []
    bounds = [None, *cuts, None]

    def keep(i: int) -> np.ndarray:
        lo, hi = bounds[i], bounds[i + 1]
        if lo is None and hi is None:
            return ~np.isnan(r32)
        if lo is None:
            return r32 < hi
        if hi is None:
            return r32 >= lo
        return (r32 >= lo) & (r32 < hi)

    def distinct(part: np.ndarray) -> int:
        with np.errstate(invalid="ignore"):  # (as in _merged_slab)
            return 1 + int(np.count_nonzero(np.diff(part))) if part.size else 0

    def bucket32(i: int) -> int:
        return distinct(np.sort(r32[keep(i)]))

    def bucket(i: int) -> tuple[int, int]:
        part = np.sort(row[keep(i)])
        return distinct(part), distinct(part.astype(np.float32))

    nan = int(np.count_nonzero(np.isnan(r32)))
    # a sample whose casts repeat beyond the limit (quantized data): the bound would not
    # clear the row, so straight to the exact sorts (not sorted twice)
    hopeful = sample.size == 0 or (sample.size - distinct(sample)) / sample.size <= (limit or 0)
    with ThreadPoolExecutor(threads) as ex:
        if limit is not None and row.size and hopeful:
            bound = (row.size - sum(ex.map(bucket32, range(len(bounds) - 1))) - nan) / row.size
            if bound <= limit:
                return bound
        counts = list(ex.map(bucket, range(len(bounds) - 1)))
    u0 = sum(c[0] for c in counts) + nan
    u32 = sum(c[1] for c in counts) + nan
    return (u0 - u32) / u0 if u0 else 0.0


def merged_fraction(original: np.ndarray) -> np.ndarray:
    """Per row: the fraction of ``original``'s distinct values lost in its float32 cast.

    Rows are checked in slabs so that the sorted copies stay small whatever the size of
    the panel (xmap streams N x N results within a bounded host memory); small slabs also
    sort faster than whole panels (they stay in cache). A large panel's slabs run by
    bands of rows on threads (:mod:`pyedmcl._bands`: the check runs beside the map,
    which waits for it at its end).
    A long row is sorted in value buckets on several threads
    (:func:`_merged_row_bucketed`)."""
    rows = _rows(original)
    threads = min(THREADS, os.cpu_count() or 1)
    if rows.shape[1] >= _BUCKETED_VALUES and threads >= 2:
        return np.array([_merged_row_bucketed(r, threads) for r in rows])
    step = max(1, _CHECK_VALUES // max(rows.shape[1], 1))

    def slabs(band: np.ndarray) -> np.ndarray:
        parts = [_merged_slab(band[i:i + step]) for i in range(0, band.shape[0], step)]
        return np.concatenate(parts) if parts else np.zeros(0)

    # a large panel by bands of slabs on a few threads: the check runs beside the map,
    # whose own host threads need cores too (a two-GPU map is faster with 4 threads here
    # than with 8)
    return rowwise(slabs, rows, CHECK_THREADS)


def _merged_bound_slab(part: np.ndarray | Callable[[np.ndarray], np.ndarray],
                       part32: np.ndarray, limit: float) -> tuple[np.ndarray, bool]:
    """Per row of a slab: at most ``limit`` where the float32 cast ``part32`` has so few
    equal values that no more than ``limit`` of the distinct values can have merged, else
    the exact fraction (:func:`_merged_slab`). A row of n values whose cast has u32
    distinct ones merged u0 - u32 <= n - u32 of its u0 <= n distinct values, a fraction
    <= (n - u32) / n: that bound needs only the sort of the float32 cast (half the bytes of
    the float64 sort).
    Also returns whether some row needed the exact fraction. ``part`` may be a function
    of a row mask giving those rows (the float64 slab need not exist)."""
    n = part32.shape[1]
    if n == 0:
        return np.zeros(part32.shape[0]), False
    s32 = np.sort(part32, axis=1)
    with np.errstate(invalid="ignore"):  # (as in _merged_slab)
        bound = (n - 1 - np.count_nonzero(np.diff(s32, axis=1), axis=1)) / n
    over = bound > limit
    if over.any():
        bound[over] = _merged_slab(part(over) if callable(part) else part[over])
    return bound, bool(over.any())


def merged_beyond(original: np.ndarray, limit: float,
                  cast: np.ndarray | None = None) -> np.ndarray:
    """Per row: :func:`merged_fraction` wherever it exceeds ``limit`` (exactly), a value
    <= ``limit`` elsewhere; the rows beyond ``limit`` are those of
    :func:`merged_fraction`. ``cast``: ``original``'s float32 cast where the caller made it
    (the kernels' input), else cast slab by slab. Where a slab needed the exact fraction
    for some row, the band's next slab takes it directly (quantized data: no sort twice).
    By bands of slabs on :data:`CHECK_THREADS` threads, as :func:`merged_fraction`."""
    rows = _rows(original)
    threads = min(THREADS, os.cpu_count() or 1)
    if rows.shape[1] >= _BUCKETED_VALUES and threads >= 2:  # long rows: buckets on threads
        return np.array([_merged_row_bucketed(r, threads, limit) for r in rows])
    c32 = None if cast is None else _rows(cast)
    step = max(1, _CHECK_VALUES // max(rows.shape[1], 1))

    def band(sl: slice) -> np.ndarray:
        lo, hi, _ = sl.indices(rows.shape[0])
        parts, exact = [], False
        for i in range(lo, hi, step):
            part = rows[i:min(i + step, hi)]
            if exact:
                parts.append(_merged_slab(part))
                continue
            part32 = part.astype(np.float32) if c32 is None else c32[i:min(i + step, hi)]
            got, exact = _merged_bound_slab(part, part32, limit)
            parts.append(got)
        return np.concatenate(parts) if parts else np.zeros(0)

    return np.concatenate(map_slices(band, rows, CHECK_THREADS))


def _round_shift(m: np.ndarray, sd: np.ndarray, ok: np.ndarray) -> np.ndarray:
    q = np.exp2(np.floor(np.log2(sd)))
    return np.where(ok, np.round(m / q) * q, m)


def _mean_std(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``mean(axis=1)`` and ``std(axis=1)``, bit for bit numpy's, from one sum:
    numpy's std takes the mean by the same sum and division, then sums the squared
    deviations, so ``mean`` costs no pass of its own over the rows (float64 rows; others
    through numpy's own two calls)."""
    if rows.dtype != np.float64 or rows.shape[1] == 0:
        return rows.mean(axis=1), rows.std(axis=1)
    n = rows.shape[1]
    mean = np.add.reduce(rows, axis=1) / n
    dev = rows - mean[:, None]
    np.multiply(dev, dev, out=dev)
    return mean, np.sqrt(np.add.reduce(dev, axis=1) / n)


#: values of one chunk of rows :func:`row_spread` takes through every reduction before
#: the next (its deviations' temporary stays in cache)
_SPREAD_CHUNK_VALUES = 1 << 16


def row_spread(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's ``std``, ``min`` and ``max`` (``axis=1``) of the float64 panel ``rows``,
    bit for bit numpy's (:func:`_mean_std`; NaN in a row that holds one): by chunks of
    rows, each through the three reductions while it is in cache, and bands of chunks on
    threads; a row's reductions are its own, so the values do not depend on either. One
    pass over the panel for the row check's tolerances and spans (a panel of 20,000
    targets, not seven passes and two temporaries of its size)."""
    nr, n = rows.shape
    std, lo, hi = np.empty(nr), np.empty(nr), np.empty(nr)

    def chunk(c: slice) -> None:
        part = rows[c]
        std[c] = _mean_std(part)[1]
        np.minimum.reduce(part, axis=1, out=lo[c])
        np.maximum.reduce(part, axis=1, out=hi[c])

    if not n:  # (numpy's answers: a NaN std, min and max refused)
        return rows.std(axis=1), rows.min(axis=1), rows.max(axis=1)
    map_row_chunks(chunk, rows, _SPREAD_CHUNK_VALUES)
    return std, lo, hi


def _affine(a: np.ndarray, scale: bool, shift: np.ndarray | None) -> Affine:
    """The shift is the mean rounded to a multiple of ``q``, the power of two at or below
    the std, and the scale the power of two nearest the std: both exact in binary, so
    integer data stay integers (exact distance ties survive, as in float64) and scaling
    adds no rounding; the standardised std lies in [0.7, 1.4]."""
    rows = _rows(a)
    mean, spread = _mean_std(rows)
    ok = (spread > 0) & np.isfinite(spread)
    sd = np.where(ok, spread, 1.0)  # a constant series: shift only
    if shift is None:
        m = _round_shift(mean, sd, ok)
    else:  # a common shift (already rounded)
        m = np.broadcast_to(shift, rows.shape[:1]).astype(float)
    s = np.exp2(np.round(np.log2(sd))) if scale else np.ones(rows.shape[0])
    return Affine(np.asarray(m, dtype=np.float64), np.asarray(s, dtype=np.float64), spread)


#: values of one chunk of rows that :func:`_standardise` takes through every step (the
#: statistics, the subtraction, the cast) before the next: 8 MiB of float64 bound the
#: temporaries of numpy's std (a copy of its input); smaller chunks, each a dozen numpy
#: calls under the GIL, were slower on many threads (2^20 is within a few percent of
#: one chunk a band)
_CHUNK_VALUES = 1 << 20


class RowStandardiser:
    """Rows of a float64 panel through :func:`_affine` and the shift (and scale), band by
    band, into a float64 copy and, with ``cast``, its cast to that dtype: whatever pass
    produces the rows (the map's transposing copy, :func:`pyedmcl.xmap.core.series_major_f32`)
    hands each band over while it is still in cache instead of a pass of its own. Each
    band goes by chunks of rows (:data:`_CHUNK_VALUES`), each through the statistics, the
    subtraction and the cast before the next. Every row's statistics and values are
    computed alone, so the result does not depend on the bands; bands may come from
    several threads at once."""

    def __init__(self, shape: tuple[int, int], scale: bool, shift: np.ndarray | None = None,
                 cast: Any = None, out: np.ndarray | None = None):
        """``out``: the float64 ``shape`` array the standardised rows go to (default a new
        one); it may be the array whose rows are handed over (in place: a chunk's
        statistics are taken before its values change)."""
        self.scale, self.shift = scale, shift
        self.out = np.empty(shape, np.float64) if out is None else out
        self.out_c = None if cast is None else np.empty(shape, cast)
        self.step = max(1, _CHUNK_VALUES // max(shape[1], 1))
        self._parts: dict[int, list[Affine]] = {}

    def __call__(self, rows: np.ndarray, sl: slice) -> None:
        """Standardise ``rows``, the panel's rows ``sl`` (a step-1 slice). Rows that
        are not finite, or leave float32's range, pass quietly: the callers refuse or
        fall back on them (the map's copy hands over rows before its NaN check)."""
        lo, hi, _ = sl.indices(self.out.shape[0])
        parts = []
        with np.errstate(invalid="ignore", over="ignore"):
            self._chunks(rows, lo, hi, parts)
        self._parts[lo] = parts

    def _chunks(self, rows: np.ndarray, lo: int, hi: int, parts: list[Affine]) -> None:
        for i in range(lo, hi, self.step):
            c, src = slice(i, min(i + self.step, hi)), rows[i - lo:i - lo + self.step]
            f = _affine(src, self.scale, self.shift)
            np.subtract(src, f.shift[:, None], out=self.out[c])
            if self.scale:  # centred only: no pass dividing by 1
                self.out[c] /= f.scale[:, None]
            if self.out_c is not None:
                self.out_c[c] = self.out[c]
            parts.append(f)

    def result(self) -> tuple[Affine, np.ndarray, np.ndarray | None]:
        """The affine maps of every row, the standardised rows and their cast (or None),
        once every band has been handed over."""
        fs = [f for lo in sorted(self._parts) for f in self._parts[lo]]
        if sum(f.shift.size for f in fs) != self.out.shape[0]:
            raise RuntimeError("RowStandardiser.result before every row was standardised")
        return (Affine(np.concatenate([f.shift for f in fs]),
                       np.concatenate([f.scale for f in fs]),
                       np.concatenate([f.spread for f in fs])), self.out, self.out_c)


def _standardise(a: np.ndarray, scale: bool, shift: np.ndarray | None,
                 cast: Any = None) -> tuple[Affine, np.ndarray, np.ndarray | None]:
    """:func:`_affine` of ``a``, ``a`` through it (float64) and, with ``cast``, that
    cast to the ``cast`` dtype (else None). A panel (2-D) goes through a
    :class:`RowStandardiser`, a large one in bands of rows on a few threads (numpy
    releases the GIL); the result is the same bit for bit. The cast is made here, not in
    a pass of its own: one read of the panel less before the map's first kernel."""
    if a.ndim != 2 or not a.size:
        f = _affine(a, scale, shift)
        z = f.forward(a)
        return f, z, None if cast is None else z.astype(cast)
    std = RowStandardiser(a.shape, scale, shift, cast)
    bands, threads = row_bands(a)
    if threads == 1:
        std(a, slice(0, a.shape[0]))
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda sl: std(a[sl], sl), bands))
    return std.result()


def standardises(dtype: Any) -> bool:
    """Whether :func:`prepare` standardises inputs run in ``dtype`` (float32, unless
    :func:`unstandardised` is in force)."""
    return np.dtype(dtype) != np.float64 and _ENABLED[-1]


def _largest_standardised(extremes: tuple[np.ndarray, np.ndarray], aff: Affine,
                          scale: bool) -> float:
    """max |z| of a series standardised by ``aff``, from its rows' raw ``(largest,
    smallest)`` values: the same value as :func:`largest_magnitude` of z."""
    hi, lo = (np.asarray(v, dtype=np.float64).reshape(-1) for v in extremes)
    zh, zl = hi - aff.shift, lo - aff.shift
    if scale:
        zh, zl = zh / aff.scale, zl / aff.scale
    return float(max(np.fmax.reduce(zh), -np.fmin.reduce(zl)))


def prepare(series: Sequence[np.ndarray], dtype: np.dtype, fp64: bool, *,
            names: Sequence[str], scale: bool = True, common_shift: bool = False,
            what: str = "this call", deferred: bool | str = False,
            extremes: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
            cast: bool = False,
            standardised: Sequence[tuple[Affine, np.ndarray, np.ndarray | None]] | None = None,
            raw: Callable[[], list[np.ndarray]] | None = None,
            row_labels: Sequence[Sequence[str] | None] | None = None,
            merge_checked: Sequence[bool] | None = None) -> Prepared:
    """Kernel inputs for validated float64 host ``series`` (1-D, or 2-D = one series per row).

    float64: returned as given (identity maps). float32: each series (row) centred by
    its mean and, with ``scale``, divided by its standard deviation, both in float64;
    ``common_shift`` centres every series by the mean of all of them (cross-RQA: the
    distances between two series survive a common shift only). If the float32 cast of
    a standardised series merges more than :data:`MAX_MERGED_FRACTION` of its distinct
    values, the whole call runs in float64 with one :class:`PrecisionWarning` (``fp64``)
    or is refused with a ``ValueError`` naming the series and the remedy.
    ``deferred``: the float32 inputs come back at once and the merge check runs in a
    background thread (it sorts every series: ~0.1 s for 10^7 values); the caller
    computes meanwhile and asks :meth:`Prepared.float32_holds` before it returns
    anything (False: the warning is out, run again in float64). ``deferred="gated"``: as
    ``True``, but the check starts only at :meth:`Prepared.start_check` (or when its
    verdict is first asked for).
    ``extremes``: per series, each row's largest and smallest value (finite data), where
    the caller has them: the largest magnitude after centring then comes from them (the
    rounding of x - m, and of its division by a positive scale, keeps the order of the
    values, so the largest and smallest standardised values are those of the largest and
    smallest raw ones), not from a pass over the standardised series.
    ``cast``: each chunk of rows is also cast to float32 right after it is standardised
    (:meth:`Prepared.kernel_input`), not in a pass of its own; otherwise callers cast
    ``Prepared.series`` to ``Prepared.dtype`` themselves.
    ``standardised``: per series, :meth:`RowStandardiser.result` of a standardisation the
    caller ran already (with the same ``scale``, no common shift, and the cast where
    ``cast``); used where float32 is standardised (:func:`standardises`), else ignored.
    ``raw``: where that standardisation overwrote ``series`` (given standardised), the
    raw series again for a fall-back to float64.
    ``row_labels``: per series, a label of each of its rows (e.g. the input's column
    names), which the message adds to the row it names.
    ``merge_checked``: per series, whether the merge check covers it (default: all). A
    series whose values decide nothing (Simplex's targets: only averaged with weights
    the library's distances set, their float32 rounding bounded by the row check) need
    not be sorted; a merge there moves a prediction by float32's rounding, as any value.
    """
    dt = np.dtype(dtype)
    arrs = [np.asarray(a, dtype=np.float64) for a in series]
    if not standardises(dt):
        return Prepared(dt, arrs, [Affine.identity(_rows(a).shape[0]) for a in arrs])
    shift = None
    if common_shift:
        pool = np.concatenate([a.reshape(-1) for a in arrs])
        sd = np.array([pool.std()])
        ok = (sd > 0) & np.isfinite(sd)
        shift = _round_shift(np.array([pool.mean()]), np.where(ok, sd, 1.0), ok)
    parts = list(standardised) if standardised is not None and not common_shift else \
        [_standardise(a, scale, shift, dt if cast else None) for a in arrs]
    affs, out = [f for f, _, _ in parts], [z for _, z, _ in parts]
    for i, (z, aff, name) in enumerate(zip(out, affs, names, strict=True)):
        if not z.size:
            top = 0.0
        elif extremes is not None:
            top = _largest_standardised(extremes[i], aff, scale)
        else:
            top = largest_magnitude(z)
        if top > FLOAT32_MAX_INPUT:  # centred only (RQA, Simplex) and far from zero
            _fall_back(f"{name}: values up to {top:.3g} after centring are beyond float32's "
                       f"range for squared distances (|value| <= {FLOAT32_MAX_INPUT:.0e})",
                       fp64, what)
            return prepare(arrs if raw is None else raw(), np.float64, fp64, names=names)
        sds = (aff.spread if aff.spread is not None else _rows(z).std(axis=1)) \
            if z.size and not scale else np.ones(1)
        pos = sds[sds > 0]  # (no NaN: nanmin's answer is min's)
        spread = float(pos.min()) if pos.size else 1.0
        if spread < FLOAT32_MIN_SPREAD:  # centred only and tiny (any series): squared distances
            _fall_back(f"{name}: values spread over {spread:.3g} (std), below "  # underflow
                       f"float32's range for squared distances (std >= "
                       f"{FLOAT32_MIN_SPREAD:.0e})", fp64, what)
            return prepare(arrs if raw is None else raw(), np.float64, fp64, names=names)

    # the float32 casts made beside the standardisation (the check's bound sorts them)
    casts = [c if c is not None and c.dtype == np.float32 else None for _, _, c in parts]
    wanted = list(merge_checked) if merge_checked is not None else [True] * len(arrs)

    def check() -> str | None:
        """Why float32 cannot hold the data, or None."""
        labels = row_labels if row_labels is not None else [None] * len(arrs)
        for a, z, c, name, rows, want in zip(arrs, out, casts, names, labels, wanted,
                                             strict=True):
            if not want:
                continue
            lost = merged_beyond(z, MAX_MERGED_FRACTION, c)
            worst = int(np.argmax(lost))
            if lost[worst] > MAX_MERGED_FRACTION:
                label = name if a.ndim == 1 or a.shape[0] == 1 else f"{name}[{worst}]"
                if rows is not None:
                    label += f" ({rows[worst]})"
                return (f"{label}: {lost[worst]:.0%} of its distinct values become equal in "
                        "float32 even after centring (values closer than float32 resolves: "
                        "near repeats, clusters far apart, or extreme outliers)")
        return None

    prep = Prepared(dt, out, affs, [c for _, _, c in parts] if cast else None)
    if deferred not in (False, True, "gated"):
        raise ValueError(f"deferred={deferred!r} is invalid; allowed: False, True, 'gated'")
    if deferred == "gated":
        prep._gated = (check, fp64, what)
        prep._check_values = sum(int(z.size) for z, want in zip(out, wanted, strict=True) if want)
        return prep
    if deferred:
        prep._verdict = (_check_pool().submit(check), fp64, what)
        return prep
    why = check()
    if why is None:
        return prep
    _fall_back(why, fp64, what)
    return prepare(arrs if raw is None else raw(), np.float64, fp64, names=names)


#: values up to which a gated merge check runs on the calling thread when started: its
#: sort takes tens of microseconds there, while a thread's hand-off and its contention
#: for the interpreter with the host work it should overlap cost more (a small float32
#: Simplex call's host work beside its k-NN kernel)
INLINE_CHECK_VALUES = 1 << 15

_pool: tuple[int, Any] | None = None  # (pid, executor) of the deferred checks
_pool_lock = threading.Lock()


def _check_pool() -> Any:
    """The threads that run deferred merge checks, started once per process (a new
    executor per call cost ~0.15-0.3 ms, a tenth of an RQA of 10^5 points on a GPU); a
    forked child, which inherits the executor but not its threads, starts its own."""
    global _pool
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="pyedmcl-float32-check"))
        return _pool[1]


def _fall_back(why: str, fp64: bool, what: str) -> None:
    """float32 cannot hold the data: warn that the call runs in float64, or refuse."""
    if not fp64:
        raise ValueError(f"{why}; this device lacks fp64, so {what} cannot run "
                         "faithfully: rescale or detrend the data, or use a device with "
                         "fp64 and dtype='float64'")
    warnings.warn(f"{why}; {what} runs in float64 instead (pass dtype='float64' to "
                  "silence this)", PrecisionWarning, stacklevel=_user_level())
