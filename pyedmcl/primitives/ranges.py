"""Resolve pyEDM-style parameters (lib/pred ranges, E, tau, Tp, knn, exclusion radius).

Everything here is host-side bookkeeping shared by Simplex, S-map, CCM and the
scans: which data rows are library vectors, which rows predictions are made
from, where their targets lie, and the mapping from data rows ("times", 0-based)
to *kernel points* (the index ``j`` of the raw-series window
``(s[j], s[j+|tau|], ..., s[j+(E-1)|tau|])`` that kernels read).

Semantics follow pyEDM 2.5 (``EDM.CreateIndices``, ``EDM.RemoveNan``,
``Neighbors.FindNeighbors``):

* ``lib`` / ``pred`` are 1-based inclusive ``start stop`` pairs, several pairs
  allowed (``"1 100 201 300"``, ``[1, 100, 201, 300]`` or ``[(1, 100), (201, 300)]``).
* Sign of tau: here ``tau > 0`` means lags into the past (the vector at time t is
  ``(x_t, x_{t-tau}, ...)``), as in kEDM; pyEDM's ``tau=-1`` is our ``tau=1``.
  Negative tau (lags into the future, pyEDM's ``tau > 0``) is accepted too.
* Library rows: per segment, the first ``(E-1)|tau|`` rows (past lags; the last
  ones for future lags) are dropped because their vector leaves the segment; for
  ``Tp > 0`` the last ``Tp`` rows of the *last* segment are dropped (their target
  lies beyond the library); for ``Tp < 0`` pyEDM drops ``|Tp| - 1`` leading rows
  per segment. Rows whose target ``t + Tp`` falls outside the data are always
  dropped (pyEDM would index its target vector out of range there).
* Prediction rows: every row of ``pred`` whose vector exists (rows without a
  full embedding are dropped, as pyEDM's RemoveNan does). The prediction made
  from row ``p`` is for time ``p + Tp``; its observation is ``y[p + Tp]`` where
  that lies inside the data, NaN otherwise; as in pyEDM's output table, the ``Tp``
  times past a pred segment's last row are observed all or none (a segment ending
  within ``Tp`` rows of the data's end has none of them: pyEDM's skill leaves them out).
* Neighbours: a library row ``l`` is a candidate for prediction row ``p`` unless
  ``|p - l| <= exclusion_radius``; with radius 0 this is exactly pyEDM's
  leave-one-out (the self-match is dropped when lib and pred overlap; when they
  do not, no row can match itself, so the rule is harmless).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..validation import as_integer, check_int

#: largest k the fused k-NN kernel keeps per query (a compile-time register array)
MAX_KNN = 64


def parse_ranges(spec: Any, name: str, n: int) -> list[tuple[int, int]]:
    """``start stop`` pairs (1-based, inclusive) from a string, flat list or list of pairs.

    ``None`` means the whole series ``[(1, n)]``. Errors name ``name`` and the
    allowed range ``1..n``.
    """
    if spec is None:
        return [(1, n)]
    if isinstance(spec, str):
        try:
            vals = [int(float(v)) for v in spec.replace(",", " ").split()]
        except ValueError as exc:
            raise ValueError(f"{name}={spec!r} must be whitespace-separated integers "
                             f"'start stop [start stop ...]' (1-based, inclusive)") from exc
    else:
        arr = np.asarray(spec)
        if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not np.all(arr == np.round(arr))):
            raise ValueError(f"{name}={spec!r} must hold integers (1-based start/stop pairs)")
        vals = [int(v) for v in arr.reshape(-1)]
    if len(vals) == 0:
        raise ValueError(f"{name} is empty; give 'start stop' pairs with 1 <= start <= stop <= {n}")
    if len(vals) % 2:
        raise ValueError(f"{name}={vals} must have an even number of values "
                         f"(start stop pairs, 1-based, inclusive, within 1..{n})")
    pairs = [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
    for a, b in pairs:
        if a < 1 or b > n or a > b:
            raise ValueError(f"{name} pair ({a}, {b}) is out of range; allowed: "
                             f"1 <= start <= stop <= {n} (1-based, inclusive, n = series length)")
    return pairs


def check_tau(tau: Any) -> int:
    """Non-zero integer tau (> 0: past lags, our default convention)."""
    tau = as_integer(tau, "tau", "any non-zero integer")
    if tau == 0:
        raise ValueError("tau=0 is out of range; allowed: any non-zero integer "
                         "(tau > 0 lags into the past, tau < 0 into the future)")
    return tau


def check_tp(Tp: Any, n: int) -> int:
    """Integer Tp with |Tp| < n; a too-short series is named as such, not only as a bad Tp."""
    Tp = check_int(Tp, "Tp", -(10**9), 10**9)
    if abs(Tp) > n - 1:
        raise ValueError(f"Tp={Tp} is out of range for a series of {n} values (too short for "
                         f"this Tp); allowed: |Tp| <= n-1 = {n - 1}")
    return Tp


def point_offset(E: int, tau: int) -> int:
    """Time of kernel point 0: kernel point ``j`` is data row ``j + offset``."""
    return (E - 1) * tau if tau > 0 else 0


def observed(segments: list[np.ndarray], Tp: int, n: int) -> np.ndarray:
    """Which predictions from the rows of ``segments`` (pred segments, in order) have an
    observation: the target time ``p + Tp`` inside ``0..n-1``, and for ``Tp > 0`` pyEDM's
    rule for the times past a segment's last row: all observed where all lie inside the
    data, else none (pyEDM's output table, from which its skill is computed)."""
    rows = np.concatenate(segments) if segments else np.zeros(0, np.int64)
    t = rows + Tp
    ok = (t >= 0) & (t < n)
    if Tp > 0:
        i = 0
        for seg in segments:
            if seg.size and seg[-1] + Tp >= n:
                ok[i:i + seg.size] &= t[i:i + seg.size] <= seg[-1]
            i += seg.size
    return ok


class NoPredictionRows(ValueError):
    """``pred`` holds no row with a full embedding (pyEDM's compat answers an empty
    table there, as pyEDM does)."""


@dataclass(frozen=True)
class Plan:
    """Resolved rows for one (series length, E, tau, Tp, knn, lib, pred, radius).

    ``lib_times`` / ``pred_times`` are 0-based data rows; ``*_points`` the same rows
    as kernel point indices. ``pred_segments`` keeps pyEDM's per-pair grouping of
    the prediction rows (used to lay out pyEDM-style output tables).
    """

    n: int
    E: int
    tau: int
    Tp: int
    knn: int
    exclusion_radius: int
    lib_times: np.ndarray
    pred_times: np.ndarray
    pred_segments: list[np.ndarray] = field(default_factory=list)

    @property
    def span(self) -> int:
        return (self.E - 1) * abs(self.tau)

    @property
    def offset(self) -> int:
        return point_offset(self.E, self.tau)

    @property
    def n_points(self) -> int:
        return self.n - self.span

    # derived arrays: computed once per plan (a plan is immutable and is reused across
    # calls; at L = 32,768 recomputing them cost ~0.3 ms per Simplex call), read-only

    @cached_property
    def lib_points(self) -> np.ndarray:
        return _frozen(_shifted32(self.lib_times, -self.offset))

    @cached_property
    def pred_points(self) -> np.ndarray:
        return _frozen(_shifted32(self.pred_times, -self.offset))

    @cached_property
    def target_times(self) -> np.ndarray:
        """Time each prediction is for (``p + Tp``), possibly outside ``0..n-1``."""
        return _frozen(self.pred_times + self.Tp)

    @cached_property
    def observed_mask(self) -> np.ndarray:
        """Predictions with an observation: the target time inside the data, and for
        ``Tp > 0`` pyEDM's rule for the rows predicted past a pred segment's last row:
        all of them observed where all lie inside the data, else none."""
        return _frozen(observed(self.pred_segments, self.Tp, self.n))

    @cached_property
    def observed_rows(self) -> np.ndarray:
        """int32 target row of each prediction, -1 where it lies outside the series."""
        rows = _shifted32(self.pred_times, self.Tp)
        rows[~self.observed_mask] = -1
        return _frozen(rows)

    @cached_property
    def leave_one_out(self) -> bool:
        return _overlap(self.lib_times, self.pred_times, self.n)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _shifted32(rows: np.ndarray, shift: int) -> np.ndarray:
    """``rows + shift`` as int32 in one pass (rows and shift are within the series)."""
    return np.add(rows, shift, dtype=np.int32, casting="unsafe")


def _overlap(a: np.ndarray, b: np.ndarray, n: int) -> bool:
    """Whether rows ``a`` and ``b`` (each in [0, n)) share one: a table lookup, O(n)
    (np.intersect1d hashes both: ~15 ms at n = 32,768, more than the GPU k-NN)."""
    seen = np.zeros(n, dtype=bool)
    seen[a] = True
    return bool(seen[b].any())


def _lib_intervals(pairs: list[tuple[int, int]], n: int, E: int, tau: int,
                   Tp: int) -> list[tuple[int, int]]:
    """Library rows as half-open 0-based intervals, one per pair (maybe empty): the
    pair's rows, less the embedding span and the Tp rows (see the module docstring),
    intersected with the rows whose target is in the series and whose vector is."""
    span = (E - 1) * abs(tau)
    e0, e1 = _embeddable_bounds(n, span, tau)
    out = []
    for r, (start, stop) in enumerate(pairs):
        if tau > 0:
            start = start + span
        else:
            stop = stop - span
        if Tp < 0:
            start = max(start, start + abs(Tp) - 1)
        elif r == len(pairs) - 1:
            stop = stop - Tp
        out.append((max(start - 1, -Tp, e0), min(stop, n - Tp, e1)))
    return out


def _rows(intervals: list[tuple[int, int]]) -> np.ndarray:
    """The int64 rows of half-open intervals, in order (empty ones skipped)."""
    parts = [np.arange(a, b, dtype=np.int64) for a, b in intervals if b > a]
    if not parts:
        return np.zeros(0, np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _lib_rows(pairs: list[tuple[int, int]], n: int, E: int, tau: int, Tp: int) -> np.ndarray:
    return _rows(_lib_intervals(pairs, n, E, tau, Tp))


def _embeddable_bounds(n: int, span: int, tau: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` whose embedding vector lies inside the series."""
    return (span, n) if tau > 0 else (0, n - span)


def _embeddable(rows: np.ndarray, n: int, span: int, tau: int) -> np.ndarray:
    lo, hi = _embeddable_bounds(n, span, tau)
    return (rows >= lo) & (rows < hi)


def _intervals_overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    """Whether two lists of half-open intervals share a row."""
    return any(max(a0, b0) < min(a1, b1) for a0, a1 in a for b0, b1 in b)


#: resolved plans kept per process (a plan is immutable): repeated calls with the same
#: series length and parameters (E / Tp sweeps, bootstraps, benchmarks) skip the work
PLAN_CACHE_SIZE = 64
_plans: OrderedDict[tuple, Plan] = OrderedDict()
_plans_lock = threading.Lock()  # devices of one job resolve from their own threads


def _int_key(v: Any) -> Any:
    """``v`` as a hashable cache key part, or ``_NOKEY`` when it is not a plain int/None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        return _NOKEY
    return int(v)


def _ranges_key(spec: Any) -> Any:
    """A lib/pred spec as a hashable key (None, a string, or flat ints), or ``_NOKEY``."""
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, np.ndarray):
        if spec.dtype.kind not in "iu" or spec.size > 256:
            return _NOKEY
        return ("ints",) + tuple(spec.ravel().tolist())
    if isinstance(spec, list | tuple) and len(spec) <= 256:
        keys = []  # the structure is kept: a key stands for exactly one spelling
        for item in spec:
            k = (tuple(_int_key(v) for v in item) if isinstance(item, list | tuple)
                 else _int_key(item))
            if k is _NOKEY or k is None or (isinstance(k, tuple)
                                            and any(v is _NOKEY or v is None for v in k)):
                return _NOKEY
            keys.append(k)
        return ("seq",) + tuple(keys)
    return _NOKEY


_NOKEY = object()


def resolve(n: int, *, E: Any, tau: Any = 1, Tp: Any = 1, knn: Any = None,
            exclusion_radius: Any = 0, lib: Any = None, pred: Any = None,
            max_knn: int | None = MAX_KNN) -> Plan:
    """Validate parameters for a series of length ``n`` and resolve the rows.

    ``knn=None`` (or 0, pyEDM's default) means ``E + 1``. Raises ValueError that
    names the offending parameter and its allowed range. Plans are cached per
    process for plain int parameters (see ``PLAN_CACHE_SIZE``); an error is not.
    """
    parts = (n, E, tau, Tp, knn, exclusion_radius, max_knn)
    key = tuple(_int_key(v) for v in parts) + (_ranges_key(lib), _ranges_key(pred))
    if any(k is _NOKEY for k in key):
        return _resolve(n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                        lib=lib, pred=pred, max_knn=max_knn)
    with _plans_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    plan = _resolve(n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                    lib=lib, pred=pred, max_knn=max_knn)
    with _plans_lock:
        _plans[key] = plan
        if len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def _resolve(n: int, *, E: Any, tau: Any, Tp: Any, knn: Any, exclusion_radius: Any, lib: Any,
             pred: Any, max_knn: int | None) -> Plan:
    E = check_int(E, "E", 1, 512)
    tau = check_tau(tau)
    span = (E - 1) * abs(tau)
    if n <= span:
        raise ValueError(f"series has {n} values, too short for E={E}, tau={tau}: "
                         f"needs more than (E-1)*|tau| = {span}")
    Tp = check_tp(Tp, n)
    knn = E + 1 if knn is None or (not isinstance(knn, bool) and isinstance(knn, int | np.integer)
                                   and int(knn) == 0) else knn
    knn = check_int(knn, "knn", 1, max_knn)
    exclusion_radius = check_int(exclusion_radius, "exclusion_radius", 0, n)
    need = span + abs(Tp) + knn + 1
    if n < need:
        raise ValueError(f"series has {n} values, too short for E={E}, tau={tau}, Tp={Tp}, "
                         f"knn={knn}: needs at least (E-1)*|tau|+|Tp|+knn+1 = {need}")
    lib_pairs = parse_ranges(lib, "lib", n)
    pred_pairs = parse_ranges(pred, "pred", n)
    lib_iv = _lib_intervals(lib_pairs, n, E, tau, Tp)
    lib_times = _frozen(_rows(lib_iv))
    e0, e1 = _embeddable_bounds(n, span, tau)
    pred_iv = [(max(a - 1, e0), min(b, e1)) for a, b in pred_pairs]
    segs = [_frozen(np.arange(a, b, dtype=np.int64)) for a, b in pred_iv]
    pred_times = _frozen(segs[0] if len(segs) == 1 else np.concatenate(segs))
    if pred_times.size == 0:
        raise NoPredictionRows(
            f"pred={pred!r} leaves no prediction rows for E={E}, tau={tau}: the "
            f"{'first' if tau > 0 else 'last'} {span} rows have no full embedding; widen pred")
    # interval arithmetic for few pairs; the O(n) table for many
    loo = (_intervals_overlap(lib_iv, pred_iv) if len(lib_iv) * len(pred_iv) <= 4096
           else _overlap(lib_times, pred_times, n))
    avail = lib_times.size - (1 if loo else 0)
    if avail < knn:
        raise ValueError(f"knn={knn} is out of range for this library: lib={lib!r} gives "
                         f"{lib_times.size} library vectors for E={E}, tau={tau}, Tp={Tp}"
                         f"{' (one excluded for leave-one-out)' if loo else ''}; "
                         f"allowed: 1 <= knn <= {max(avail, 0)}; widen lib or lower knn/E")
    return Plan(n=n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                lib_times=lib_times, pred_times=pred_times, pred_segments=segs)


def ccm_valid_times(n: int, E: int, tau: int, Tp: int) -> np.ndarray:
    """Rows usable by CCM (pyEDM 2.5 ``CCM.Embed``): full embedding and target in range."""
    span = (E - 1) * abs(tau)
    rows = np.arange(n, dtype=np.int64)
    ok = _embeddable(rows, n, span, tau) & (rows + Tp >= 0) & (rows + Tp < n)
    return rows[ok]


def check_lags(lags: Any, n: int, name: str = "lags") -> np.ndarray:
    """``lags`` (a list, range or 1-D array of integers, negative allowed) as a sorted,
    de-duplicated int64 array; each lag within ``-(n - 1) .. n - 1`` for a series of
    ``n`` values, else a ValueError naming ``name``."""
    if isinstance(lags, str | bytes):
        raise TypeError(f"{name}={lags!r} must be a list of integers, e.g. range(-5, 6)")
    vals = np.atleast_1d(np.asarray(list(lags) if isinstance(lags, range) else lags,
                                    dtype=object)).reshape(-1)
    if vals.size == 0:
        raise ValueError(f"{name} is empty; give lags, e.g. range(-5, 6)")
    out = np.array([check_int(v.item() if isinstance(v, np.generic) else v, name,
                              -(n - 1), n - 1) for v in vals], dtype=np.int64)
    return np.unique(out)


def warn_short_lags(n: int, E: int, tau: int, lags: Any, sizes: np.ndarray,
                    name: str = "Tp") -> None:
    """RuntimeWarning when a scanned lag leaves fewer usable rows (:func:`ccm_valid_times`)
    than the smallest library size while lag 0 leaves enough: every library at that lag is
    then capped at those rows, so its skill neither converges nor rests on many
    predictions. The warning names ``name`` and the lags that leave enough rows. Library
    sizes above the rows of lag 0 itself are capped silently, as pyEDM does."""
    need = int(np.min(sizes))

    def enough(d: int) -> bool:
        return min(ccm_valid_times(n, E, tau, d).size, ccm_valid_times(n, E, tau, -d).size) >= need

    short = [int(v) for v in np.atleast_1d(lags) if ccm_valid_times(n, E, tau, int(v)).size < need]
    if not short or not enough(0):
        return
    lo, hi = 0, n  # rows fall as |lag| grows: the widest symmetric span, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if enough(mid) else (lo, mid)
    span = f"-{lo}..{lo}"
    worst = max(short, key=abs)
    warnings.warn(f"{name}={worst} leaves {ccm_valid_times(n, E, tau, worst).size} usable rows of "
                  f"{n} (E={E}, tau={tau}), fewer than the smallest library size {need}: every "
                  f"library at that lag is capped there; {name} within {span} leaves enough "
                  f"rows for lib_sizes >= {need}", RuntimeWarning, stacklevel=3)
