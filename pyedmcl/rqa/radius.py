"""Fixed recurrence rate: the radius that gives a target recurrence rate.

pyunicorn's definition is used: sort all ``n_rows * n_cols`` distances and take
``threshold = sorted[int(rate * (n_cells - 1))]``; recurrence is then
``d < threshold``, so exactly ``k = int(rate * (n_cells - 1))`` cells recur unless the
k-th smallest distance is tied with the one below it (then the cells tied at the
threshold are left out, as pyunicorn does; the achieved RR is reported). The distances
are the float64 kernels' (squared for Euclidean, coordinates summed in order, no fma)
of the series as given, whatever the working dtype: the radius and the float64
threshold ``thr64`` handed on (:func:`pyedmcl.rqa.threshold.kernel_threshold` of the
radius; ``threshold_rule="squared"``: the squared order statistic) are the float64
path's bit for bit in float32 too, so ``thr64`` admits exactly the cells below the
order statistic (no cell at it slips in through the rounding of ``r * r``), and the
float32 kernels' own threshold ``thr`` is that of the same radius in float32 (their
cells near it are redone against ``thr64``, :mod:`pyedmcl.rqa.exact`).

For ``n_cells <= EXACT_CELLS`` the order statistic is exact: float64 computes every
distance on the device; float32 computes the float32 matrix of the centred series on
the device and decides the cells whose float64 distance could be the order statistic
in float64 on the host (:mod:`pyedmcl.rqa.select`: a rounding bound, a count of the
cells certainly below, the few in between recomputed): a few percent of the search's
time. Above that, the quantile is estimated from ``SAMPLES`` random pairs
(deterministic: pair ``s`` drawn by a counter hash of the seed and ``s``, the same on
the device, which computes them where it has fp64, and on the host's threads) whose
distances are computed in float64 from the series as given in either dtype, so the achieved rate is within about ``1/sqrt(SAMPLES)`` (relative) of
the target; the result reports the exact achieved RR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels.select import kth_smallest as kth_smallest_on

from .._bands import map_pieces
from ..kernels.distance import hash_key, hashed_pairs, sampled_distances, takes_sampled_distances
from .distances import sampled_dist

EXACT_CELLS = 16_000_000
SAMPLES = 4_000_000
#: pairs of one piece of the sample (each drawn from its own stream: part of the sample's
#: definition, :func:`sample_pairs`)
PAIRS_PIECE = 1 << 19


def _too_low(rate: float, d: np.ndarray, n_cells: int, shape: tuple[int, int], auto: bool,
              sampled: bool = False) -> None:
    """Raise the error for a rate no radius can give, with the smallest rate that can be had.

    Recurrence is ``d < threshold`` with the threshold the ``int(rate * (n_cells - 1))``-th
    smallest distance (0-based), so the fewest recurrences any rate gives are the ``c``
    cells at the smallest distance (distance 0 where there are any): the threshold is then
    the next larger distance, reached from ``rate >= c / (n_cells - 1)``, and RR is
    ``c / n_cells``. In auto-RQA the main diagonal alone is ``N`` zero cells (d(i, i) = 0),
    so the smallest rate is about ``1/N``: the Theiler window does not change that, it
    removes diagonals from the line histograms (and with ``theiler_scope="matrix"`` from
    RR's count), not from the distances the rate is taken over. ``d``: the distances
    (``sampled``: a random sample of them, so the rates are estimates).
    """
    pos = d[d > 0]
    if pos.size == 0:
        raise ValueError(f"recurrence_rate={rate}: every distance is 0 (a constant series); "
                         "no radius separates the points, use a fixed radius")
    share = np.count_nonzero(d == d.min()) / d.size  # the cells at the smallest distance
    c = max(1, round(share * n_cells))
    least = _least_rate(c, n_cells) if n_cells > 1 else 1.0
    zeros = np.count_nonzero(d == 0) / d.size
    why = (f"the main diagonal (d(i,i) = 0 always recurs: {shape[0]} cells) and repeated "
           f"points give {zeros:.3g} of the cells distance 0" if auto else
           "recurrence is d < radius and the closest pairs set the floor")
    est = "about " if sampled else ""
    raise ValueError(
        f"recurrence_rate={rate} is below the smallest rate this input allows: {why}, so the "
        f"smallest non-zero rate is {est}{c}/{n_cells} = {c / n_cells:.3g} for the "
        f"{shape[0]} x {shape[1]} recurrence matrix (whatever the Theiler window); "
        + (f"use recurrence_rate >= {least:.3g} or a fixed radius" if least < 1 else
           "no rate below 1 reaches it: use a fixed radius"))


def _least_rate(c: int, n_cells: int) -> float:
    """The smallest rate with 3 significant digits whose threshold index
    ``int(rate * (n_cells - 1))`` reaches ``c`` (the rate the error suggests is accepted)."""
    x = c / (n_cells - 1)
    step = 10.0 ** (int(np.floor(np.log10(x))) - 2)
    r = float(f"{np.floor(x / step) * step:.3g}")
    while int(r * (n_cells - 1)) < c:
        r = float(f"{r + step:.3g}")
    return r


@dataclass(frozen=True)
class RateThreshold:
    """A fixed rate's radius and thresholds: ``radius`` (the float64 path's, whatever the
    working dtype), ``thr`` the value the kernels of the working dtype compare with (exact
    in it), ``thr64`` the float64 path's (what float32 kernels redo near cells against)."""

    radius: float
    thr: float
    thr64: float


def radius_for_rate(rows: np.ndarray, cols: np.ndarray | None, rate: float, *, E: int, tau: int,
                    metric: str, dtype: Any = np.float64, backend: Any = None,
                    seed: int = 12345) -> float:
    """The radius whose recurrence rate is ``rate`` (exact order statistic for small inputs)."""
    return threshold_for_rate(rows, cols, rate, E=E, tau=tau, metric=metric, dtype=dtype,
                              backend=backend, seed=seed)[0]


def threshold_for_rate(rows: np.ndarray, cols: np.ndarray | None, rate: float, *, E: int,
                       tau: int, metric: str, dtype: Any = np.float64, backend: Any = None,
                       seed: int = 12345, rule: str = "distance") -> tuple[float, float]:
    """``(radius, thr)`` of :func:`rate_threshold`."""
    t = rate_threshold(rows, cols, rate, E=E, tau=tau, metric=metric, dtype=dtype,
                       backend=backend, seed=seed, rule=rule)
    return t.radius, t.thr


def working_threshold(v: float, r: float, metric: str, dt: np.dtype, rule: str) -> float:
    """The kernels' threshold in ``dt`` for the order statistic ``v`` (float64; squared for
    Euclidean) and its radius ``r``: ``rule="distance"`` :func:`kernel_threshold` of ``r``;
    ``"squared"`` the smallest ``dt`` value ``>= v`` (``d < thr`` iff ``d < v``)."""
    from .threshold import kernel_threshold

    if rule != "squared":
        return kernel_threshold(r, metric, dt, rule)
    t = dt.type(v)
    return float(np.nextafter(t, dt.type(np.inf)) if float(t) < v else t)


def rate_threshold(rows: np.ndarray, cols: np.ndarray | None, rate: float, *, E: int,
                   tau: int, metric: str, dtype: Any = np.float64, backend: Any = None,
                   seed: int = 12345, rule: str = "distance") -> RateThreshold:
    """The radius for ``rate`` (pyunicorn's order statistic of the float64 distances of
    ``rows`` x ``cols``, the raw series: float64 sqrt of the squared one for Euclidean) and
    the thresholds under ``rule`` (:mod:`pyedmcl.rqa.threshold`): ``thr64`` admits exactly
    the cells whose float64 distance is below the order statistic (``rule="squared"``:
    the squared order statistic itself, so ``d2 < thr64``); ``thr`` is the working
    dtype's. In float32 the device computes float32 distances of the centred series and
    :mod:`pyedmcl.rqa.select` decides the cells near their order statistic in float64:
    the radius and ``thr64`` are the float64 path's bit for bit."""
    return rate_thresholds(rows, cols, [rate], E=E, tau=tau, metric=metric, dtype=dtype,
                           backend=backend, seed=seed, rule=rule)[0]


def rate_thresholds(rows: np.ndarray, cols: np.ndarray | None, rates: list[float], *,
                    E: int, tau: int, metric: str, dtype: Any = np.float64,
                    backend: Any = None, seed: int = 12345, rule: str = "distance"
                    ) -> list[RateThreshold]:
    """:func:`rate_threshold` of each rate of ``rates``, the distances (every cell's, or
    the random sample's) computed once for all: the same values."""
    src = _Distances(rows, cols, E, tau, metric, dtype, backend, seed)
    return [src.threshold(q, rule) for q in rates]


class _Distances:
    """What the rate search reads, computed once for any number of rates: every cell's
    float64 distance (float64 on a device with fp64), the float32 matrix of the centred
    series (float32, :mod:`pyedmcl.rqa.select`), or the float64 distances of
    :data:`SAMPLES` random pairs (above :data:`EXACT_CELLS` cells, either dtype)."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray | None, E: int, tau: int,
                 metric: str, dtype: Any, backend: Any, seed: int) -> None:
        from ..kernels.distance import pairwise_distances

        self.rows = np.asarray(rows, np.float64)
        self.cols = None if cols is None else np.asarray(cols, np.float64)
        cols_ = self.rows if cols is None else self.cols
        self.E, self.tau, self.metric = E, tau, metric
        self.nr = self.rows.size - (E - 1) * tau
        self.nc = cols_.size - (E - 1) * tau
        self.n_cells = self.nr * self.nc
        self.dt = np.dtype(np.float64 if np.dtype(dtype) == np.float64 and
                           (backend is None or backend.info.fp64) else np.float32)
        self.sampled, self.eta = False, 0.0
        if self.n_cells <= EXACT_CELLS and self.dt == np.float64:
            self.flat = pairwise_distances(self.rows, self.cols, E=E, tau=tau, metric=metric,
                                           squared=True, dtype=self.dt,
                                           device=backend).ravel()
        elif self.n_cells <= EXACT_CELLS:
            self.flat, self.eta = _float32_matrix(self.rows, self.cols, E, tau, metric,
                                                  backend)
        else:  # the same random pairs, in float64 from the raw series, whatever the dtype
            self.sample = sample_distances(self.rows, cols_, self.nr, self.nc, E, tau,
                                           metric, seed, backend)
            self.sampled = True

    def threshold(self, rate: float, rule: str) -> RateThreshold:
        """:func:`rate_threshold` of ``rate`` from these distances."""
        rows, cols, E, tau, metric = self.rows, self.cols, self.E, self.tau, self.metric
        info = None
        if self.sampled:
            flat, k = None, int(rate * (SAMPLES - 1))
            v = self.sample.kth(k)
        elif self.dt == np.float64:
            flat, k = self.flat, int(rate * (self.n_cells - 1))
            v = float(np.partition(flat, k)[k])
        else:
            from .select import exact_kth

            cols_ = rows if cols is None else cols
            k = int(rate * (self.n_cells - 1))
            v, info = exact_kth(self.flat, k, rows, cols, self.nc, E, tau, metric, self.eta,
                                lambda i, j: sampled_dist(rows, cols_, i, j, E, tau, metric))
            flat = info["full"]
        r = float(np.sqrt(v)) if metric == "euclidean" else v
        thr64 = working_threshold(v, r, metric, np.dtype(np.float64), rule)
        if self.sampled:
            some = self.sample.least < thr64  # (any sampled distance below it)
        elif info is None:
            some = bool(np.any(flat < thr64))
        else:
            from .select import any_below

            some, flat = any_below(thr64, info, rows, cols, E, tau, metric)
        if not some:  # recurrence is d < thr: not one cell would recur
            if self.sampled:
                flat = self.sample.host()
            elif flat is None or flat.dtype != np.float64:
                from .select import host_distances

                flat = host_distances(rows, cols, E, tau, metric)
            _too_low(rate, flat, self.n_cells, (self.nr, self.nc), cols is None,
                     sampled=self.sampled)
        if not r > 0:
            raise ValueError(f"recurrence_rate={rate} gives radius {r} (too many identical "
                             "points); choose a larger rate or a fixed radius")
        thr = thr64 if self.dt == np.float64 else working_threshold(v, r, metric, self.dt, rule)
        return RateThreshold(r, thr, thr64)


def _float32_matrix(rows: np.ndarray, cols: np.ndarray | None, E: int, tau: int, metric: str,
                    backend: Any) -> tuple[np.ndarray, float]:
    """The device's float32 distances of the centred series (row-major) and ``eta``, the
    inputs' distance from exact (:mod:`pyedmcl.rqa.select`: its order statistics are
    decided in float64 from these)."""
    from clkernels import get_backend

    from ..kernels.distance import pairwise_distances
    from .select import centred_f32

    z, zc, eta = centred_f32(rows, cols)
    be = get_backend(backend) if backend is None else backend
    # device arrays are used as given: centred here, the inputs' cast is part of eta
    zd = be.to_device(z)
    flat = pairwise_distances(zd, None if zc is None else be.to_device(zc), E=E, tau=tau,
                              metric=metric, squared=True, dtype=np.float32,
                              device=be).ravel()
    return flat, eta


def sample_pairs(seed: int, piece: int, nr: int, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """The random pairs (row point, column point) of piece ``piece`` of the rate search's
    sample: :data:`PAIRS_PIECE` pairs (fewer in the last piece of :data:`SAMPLES`), pair
    ``s`` drawn by a counter hash of ``seed`` and ``s``
    (:func:`pyedmcl.kernels.distance.hashed_pairs`), so that the pieces are drawn on
    threads, a device draws the same pairs, and the sample does not depend on either."""
    a = piece * PAIRS_PIECE
    return hashed_pairs(hash_key(seed), a, min(PAIRS_PIECE, SAMPLES - a), nr, nc)


class Sample:
    """The float64 distances of the rate search's :data:`SAMPLES` random pairs
    (:func:`sample_distances`): on the host, or left on a GPU that computed them, whose
    k-th values are then selected there (:func:`clkernels.select.kth_smallest`: a few
    small reads instead of reading the 32 MB back and partitioning it on the host).
    ``least``: the smallest distance."""

    def __init__(self, host: np.ndarray | None, device: Any = None, backend: Any = None,
                 least: float | None = None) -> None:
        self._host, self._device, self._be = host, device, backend
        self._least = least

    @property
    def least(self) -> float:
        """The smallest distance (on a GPU: found with the first k-th value's passes)."""
        if self._least is None:
            self._least = (float(self._host.min()) if self._host is not None
                           else kth_smallest_on(self._be, self._device, 0).least)
        return self._least

    def kth(self, k: int) -> float:
        """The ``k``-th smallest distance (0-based): ``np.partition(d, k)[k]``."""
        if self._host is not None:
            return kth_smallest(self._host, k)
        sel = kth_smallest_on(self._be, self._device, k)
        self._least = sel.least
        return sel.value

    def host(self) -> np.ndarray:
        """The distances on the host (read back once where the device holds them)."""
        if self._host is None:
            self._host = self._be.to_host(self._device)
        return self._host


def keeps_sample(be: Any) -> bool:
    """Whether the sample stays on ``be`` for its k-th values (:class:`Sample`): on GPUs.
    A CPU runtime's reads are copies in the same memory, and there the host's selection
    (:func:`kth_smallest`, on threads) is the faster one (decision 0170)."""
    return bool(be.info.is_gpu)


def sample_distances(rows: np.ndarray, cols: np.ndarray, nr: int, nc: int, E: int, tau: int,
                     metric: str, seed: int, backend: Any = None) -> Sample:
    """The float64 distances of the :data:`SAMPLES` random pairs (:func:`sample_pairs`):
    on ``backend`` where it takes them
    (:func:`~pyedmcl.kernels.distance.takes_sampled_distances`; a GPU keeps them, see
    :class:`Sample`), else piece after piece on the host's threads; the same values
    either way."""
    if takes_sampled_distances(backend):
        keep = keeps_sample(backend)
        d = sampled_distances(backend, rows, cols, hash_key(seed), SAMPLES, E, tau, metric,
                              on_device=keep)
        return Sample(None, d, backend) if keep else Sample(d)
    flat = np.empty(SAMPLES)
    starts = list(range(0, SAMPLES, PAIRS_PIECE))

    def piece(p: int) -> float:
        i, j = sample_pairs(seed, p, nr, nc)
        a = starts[p]
        out = flat[a:a + i.size]
        out[...] = sampled_dist(rows, cols, i, j, E, tau, metric)
        return float(out.min())

    return Sample(flat, least=min(map_pieces(piece, list(range(len(starts))))))


def kth_smallest(a: np.ndarray, k: int) -> float:
    """``np.partition(a, k)[k]`` (``a`` without NaN), the same value: a bracket of values
    around it from a strided subsample, the values below the bracket counted and those
    inside gathered by pieces on threads, and only those partitioned (the full partition
    where the bracket misses, which a subsample of this size makes very rare)."""
    n = a.size
    if n < 1 << 20:
        return float(np.partition(a, k)[k])
    sub = a[::KTH_STRIDE].copy()
    m = sub.size
    at = k / max(n - 1, 1) * (m - 1)
    margin = 8.0 * np.sqrt(m) + 16
    lo_i, hi_i = max(0, int(at - margin)), min(m - 1, int(at + margin) + 1)
    part = np.partition(sub, (lo_i, hi_i))
    lo, hi = part[lo_i], part[hi_i]
    edges = list(range(0, n, KTH_PIECE))

    def piece(a0: int) -> tuple[int, np.ndarray]:
        b = a[a0:a0 + KTH_PIECE]
        return int(np.count_nonzero(b < lo)), b[(b >= lo) & (b <= hi)]

    got = map_pieces(piece, edges)
    below = sum(g[0] for g in got)
    mid = np.concatenate([g[1] for g in got])
    if below <= k < below + mid.size:
        return float(np.partition(mid, k - below)[k - below])
    return float(np.partition(a, k)[k])


#: :func:`kth_smallest`'s subsample stride and values per piece
KTH_STRIDE = 64
KTH_PIECE = 1 << 19
