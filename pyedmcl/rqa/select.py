"""The float64 path's order statistic of the distances, found by a float32 search.

A fixed recurrence rate takes the ``k``-th smallest distance (squared for Euclidean) of
the recurrence matrix; ``dtype="float64"`` computes every distance in float64 from the
raw series (the kernels' arithmetic: differences, squares summed coordinate by
coordinate, no fma). float32 finds the same value, bit for bit, without a float64
matrix: it computes the float32 matrix of the series centred in float64 (on the device,
as fast as before), takes its order statistic ``v32``, and then decides the few cells
whose float64 distance could be the ``k``-th exactly:

* every cell's float32 distance ``d32`` is within ``beta`` of its float64 distance
  ``d64`` (below the cap ``S_cap``, see :func:`error_coefficients` and
  :func:`search_window`), so the cells with ``d32 < lo = v32 - 2 beta`` have ``d64 <
  v32 - beta`` and those with ``d32 > hi = v32 + 2 beta`` have ``d64 > v32 + beta``;
* the ``n_lo`` cells below ``lo`` are counted, the cells in ``[lo, hi]`` recomputed in
  float64 on the host from the raw series (the kernels' order of operations), and the
  ``(k - n_lo)``-th of those is the answer ``w``, provided ``v32 - beta <= w <= v32 +
  beta`` (then every cell below ``lo`` is below ``w`` and every cell above ``hi`` above
  it, so ``w`` is the ``k``-th of all). That is checked; where it fails (it cannot while
  the bound holds) every distance is computed in float64 on the host.

On ordinary data a handful of cells lie in ``[lo, hi]``; on quantized data (a 0.1 grid)
the cells tied with the order statistic do, often a few percent of the matrix, all
recomputed at ``O(E)`` host work each.

Error bound (``u``: the working unit roundoff, 2^-24 for float32, 2^-53 for float64;
``gamma_n = n u / (1 - n u)``). The float32 inputs are ``z_i = fl32(fl64(x_i - c))``
with a common shift ``c``; ``eta = max |z_i - (x_i - c)| <= max |z_i - fl64(x_i - c)| +
2^-53 max |fl64(x_i - c)|`` (the first difference exact by Sterbenz's lemma). For a cell
with exact coordinate differences ``D_m`` and exact distance ``D`` (Euclidean:
``sum D_m^2``), each rounded difference is ``D_m + e_m``, ``|e_m| <= u |D_m| + a`` with
``a = 2 eta (1 + u)``:

* Euclidean: ``|sum (D_m + e_m)^2 - D| <= 2 sum |e_m||D_m| + sum e_m^2 <= (2u + 2u^2) D
  + 2 a sqrt(E D) + 2 E a^2``, and the float sum of ``E`` rounded squares adds
  ``gamma_E`` of its value;
* maximum: ``u D + a`` (max and ``|.|`` are exact);
* Manhattan: ``u D + E a``, then ``gamma_{E-1}`` of the sum.

The float64 path is the same with ``a = 0`` and ``u = 2^-53``; each bound is ``c1 D +
c2 sqrt(D) + c3``. Underflow: ``2E + 1`` operations each off by at most the smallest
normal float32 (a device may flush float32 subnormals to zero; float64 keeps them: its
smallest subnormal), and ``a`` grows by three of them (two inputs and their difference
flushed). The sum of both bounds, doubled (floating-point slack), is ``beta(D)``,
increasing in ``D``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

U32 = 2.0 ** -24
U64 = 2.0 ** -53
#: the factor on the summed error bounds (slack for the host's own float64 arithmetic)
SAFETY = 2.0
#: the largest error of a float32 operation whose result (or operand) is subnormal: a
#: device may flush float32 subnormals to zero (OpenCL makes their support optional)
FLUSH32 = 2.0 ** -126
#: cells per block of the candidate scan (a block's mask stays in the caches)
SCAN_CELLS = 1 << 20


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u) if n > 0 else 0.0


def _one_path(metric: str, E: int, a: float, u: float, tiny: float) -> np.ndarray:
    """``(c1, c2, c3)`` of one path: ``|d - D| <= c1 D + c2 sqrt(D) + c3`` (module
    docstring) for inputs within ``a / 2`` of exact, unit roundoff ``u``."""
    if metric == "euclidean":
        g = _gamma(E, u)
        c = np.array([(2 * u + 2 * u * u) * (1 + g) + g, 2 * a * np.sqrt(E) * (1 + g),
                      2 * E * a * a * (1 + g)])
    elif metric == "maximum":
        c = np.array([u, 0.0, a])
    elif metric == "manhattan":
        g = _gamma(E - 1, u)
        c = np.array([u + g * (1 + u), 0.0, E * a * (1 + g)])
    else:
        raise ValueError(f"unknown metric {metric!r}: use euclidean, maximum or manhattan")
    c[2] += (2 * E + 1) * tiny
    return c


def error_coefficients(metric: str, E: int, eta: float) -> np.ndarray:
    """``(c1, c2, c3)`` with ``|d32 - d64| <= beta(D) = c1 D + c2 sqrt(D) + c3`` for every
    cell of exact distance ``D`` (Euclidean: squared), float32 inputs within ``eta`` of
    the exactly centred values (module docstring; :data:`SAFETY` included)."""
    a = 2.0 * eta * (1 + U32) + 3 * FLUSH32
    c = _one_path(metric, E, a, U32, FLUSH32) + _one_path(metric, E, 0.0, U64, 2.0 ** -1074)
    return SAFETY * c


def search_window(v32: float, c: np.ndarray) -> float:
    """``beta`` for the order statistic ``v32``: the bound at a cap ``S_cap`` above which
    every cell's float32 and float64 distances exceed ``hi = v32 + 2 beta``.

    With ``c1 < 1/4`` and ``S_cap = 3 hi + 4 (c2 / (1 - c1))^2 + 4 c3``, ``S - beta(S)`` is
    increasing from ``S_cap`` on and exceeds ``hi`` there, so a cell with ``D > S_cap`` has
    ``d32, d64 > hi``; below it ``|d32 - d64| <= beta(S_cap)``. ``hi`` and ``beta`` are
    found together by a few fixed-point steps (``inf`` where the bound cannot close: the
    caller then computes every distance in float64)."""
    c1, c2, c3 = (float(v) for v in c)
    if not c1 < 0.25:
        return float("inf")
    hi = float(v32)
    for _ in range(60):
        cap = 3.0 * hi + 4.0 * (c2 / (1.0 - c1)) ** 2 + 4.0 * c3
        beta = c1 * cap + c2 * np.sqrt(cap) + c3
        if v32 + 2.0 * beta <= hi:
            return float(beta)
        hi = (v32 + 2.0 * beta) * (1 + 1e-3) + 1e-300
    return float("inf")


def centred_f32(rows: np.ndarray, cols: np.ndarray | None) -> tuple[np.ndarray,
                                                                    np.ndarray | None, float]:
    """The float32 search inputs of raw float64 series (one common shift: a distance
    between the two series survives only that) and ``eta`` (module docstring). The shift
    is the mean rounded to a power of two at or below the spread, so integers stay
    integers (exact: ``eta`` then holds only the cast of large values)."""
    from .._precision import _round_shift

    pool = rows if cols is None else np.concatenate([rows, cols])
    sd = float(pool.std())
    ok = np.array([np.isfinite(sd) and sd > 0])
    c = float(_round_shift(np.array([pool.mean()]), np.array([sd if ok[0] else 1.0]), ok)[0])
    out, eta = [], 0.0
    for s in (rows, cols):
        if s is None:
            out.append(None)
            continue
        zc = s - c
        z = zc.astype(np.float32)
        if zc.size:
            cast = float(np.max(np.abs(z.astype(np.float64) - zc)))
            eta = max(eta, cast + U64 * (1 + U64) * float(np.max(np.abs(zc))))
        out.append(z)
    return out[0], out[1], eta * (1 + 2 * U64)


def _f32_down(v: float) -> np.float32:
    t = np.float32(v)
    return np.nextafter(t, np.float32(-np.inf)) if float(t) > v else t


def _f32_up(v: float) -> np.float32:
    t = np.float32(v)
    return np.nextafter(t, np.float32(np.inf)) if float(t) < v else t


def candidates(flat: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Flat indices of the cells with ``lo <= flat <= hi`` (float32 bounds rounded
    outwards), by blocks of :data:`SCAN_CELLS`."""
    lo32, hi32 = _f32_down(lo), _f32_up(hi)
    parts = []
    for o in range(0, flat.size, SCAN_CELLS):
        blk = flat[o: o + SCAN_CELLS]
        m = blk >= lo32
        m &= blk <= hi32
        idx = np.flatnonzero(m)
        if idx.size:
            parts.append(idx + o)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def host_distances(rows: np.ndarray, cols: np.ndarray | None, E: int, tau: int,
                   metric: str) -> np.ndarray:
    """Every float64 distance (Euclidean: squared) as the float64 kernels compute it, on
    the host in row blocks: the fall-back, and the full matrix an error message reads."""
    from .distances import BLOCK_CELLS, kernel_distances
    from .distances import points as _points

    a = _points(np.asarray(rows, np.float64), E, tau)
    b = a if cols is None else _points(np.asarray(cols, np.float64), E, tau)
    step = max(1, BLOCK_CELLS // max(1, b.shape[0]))
    return np.concatenate([kernel_distances(a[r: r + step], b, metric)
                           for r in range(0, a.shape[0], step)]).ravel()


def exact_kth(flat: np.ndarray, k: int, rows: np.ndarray, cols: np.ndarray | None,
              nc: int, E: int, tau: int, metric: str, eta: float,
              dist64: Any) -> tuple[float, dict[str, Any]]:
    """The float64 path's ``k``-th smallest distance (0-based), given the float32 matrix
    ``flat`` (row-major, ``nc`` columns) of inputs within ``eta`` of exact, and the raw
    series; ``dist64(i, j)``: float64 distances of the cells (row ``i``, column ``j``) as the
    float64 kernels compute them. Also returns what the caller's checks read: ``lo``/
    ``hi`` and ``beta``, the cells below ``lo`` (``n_lo``), and the candidates' float64
    distances ``d64`` (``None`` where everything was computed: ``full``, all distances)."""
    part = np.partition(flat, k)
    v32 = float(part[k])
    beta = search_window(v32, error_coefficients(metric, E, eta))
    if np.isfinite(beta):
        lo, hi = _f32_down(v32 - 2.0 * beta), _f32_up(v32 + 2.0 * beta)
        idx = candidates(flat, float(lo), float(hi))
        n_lo = int(np.count_nonzero(part[:k] < lo))  # every cell below lo <= v32 is there
        del part
        d64 = dist64(idx // nc, idx % nc)
        w = float(np.partition(d64, k - n_lo)[k - n_lo])
        if float(lo) + beta <= w <= float(hi) - beta:
            return w, dict(lo=float(lo), beta=beta, n_lo=n_lo, d64=d64, full=None)
    full = host_distances(rows, cols, E, tau, metric)
    return float(np.partition(full, k)[k]), dict(d64=None, full=full)


def any_below(thr64: float, info: dict[str, Any], rows: np.ndarray, cols: np.ndarray | None,
              E: int, tau: int, metric: str) -> tuple[bool, np.ndarray | None]:
    """Whether some cell's float64 distance is below ``thr64`` (at most the order
    statistic ``w`` of :func:`exact_kth`, whose ``info`` this reads): a candidate below it,
    or a cell below ``lo`` where every such cell is (their ``d64 < lo + beta``); no cell
    above ``hi`` is (``d64 > w``). Else every distance in float64 decides; they are
    returned (or ``None``) for an error message to read."""
    full = info["full"]
    if full is None:
        if np.any(info["d64"] < thr64):
            return True, None
        if info["n_lo"] == 0:
            return False, None
        if thr64 >= info["lo"] + info["beta"]:
            return True, None
        full = host_distances(rows, cols, E, tau, metric)
    return bool(np.any(full < thr64)), full


def search_windows(v32: np.ndarray, c: np.ndarray) -> np.ndarray:
    """:func:`search_window` for each order statistic of ``v32`` (float64 array)."""
    c1, c2, c3 = (float(v) for v in c)
    v32 = np.asarray(v32, np.float64)
    if not c1 < 0.25:
        return np.full(v32.shape, np.inf)
    hi = v32.copy()
    beta = np.full(v32.shape, np.inf)
    todo = np.ones(v32.shape, bool)
    for _ in range(60):
        cap = 3.0 * hi[todo] + 4.0 * (c2 / (1.0 - c1)) ** 2 + 4.0 * c3
        b = c1 * cap + c2 * np.sqrt(cap) + c3
        ok = v32[todo] + 2.0 * b <= hi[todo]
        idx = np.flatnonzero(todo)
        beta[idx[ok]] = b[ok]
        hi[idx[~ok]] = (v32[idx[~ok]] + 2.0 * b[~ok]) * (1 + 1e-3) + 1e-300
        todo[idx[ok]] = False
        if not todo.any():
            break
    return beta


def _down32(v: np.ndarray) -> np.ndarray:
    t = v.astype(np.float32)
    return np.where(t.astype(np.float64) > v, np.nextafter(t, np.float32(-np.inf)), t)


def _up32(v: np.ndarray) -> np.ndarray:
    t = v.astype(np.float32)
    return np.where(t.astype(np.float64) < v, np.nextafter(t, np.float32(np.inf)), t)


def column_kth(d32: np.ndarray, k: int, eta: float, metric: str, E: int, dist64: Any,
               exact64: Any) -> np.ndarray:
    """Per column of the float32 block ``d32`` (rows: all points; inputs within ``eta`` of
    exact): the float64 path's ``k``-th smallest distance, as :func:`exact_kth` finds it
    for one matrix. ``dist64(i, j)``: float64 distances of the cells (row ``i``, column
    ``j`` of the block); ``exact64(cols)``: the block's float64 columns ``cols`` (those
    whose check fails, computed whole)."""
    part = np.partition(d32, k, axis=0)
    v32 = part[k].astype(np.float64)
    beta = search_windows(v32, error_coefficients(metric, E, eta))
    lo, hi = _down32(v32 - 2.0 * beta), _up32(v32 + 2.0 * beta)
    n_lo = np.count_nonzero(part[:k] < lo[None, :], axis=0)  # cells below lo are there
    del part
    mask = d32 >= lo[None, :]
    mask &= d32 <= hi[None, :]
    ii, jj = np.divmod(np.flatnonzero(mask), d32.shape[1])  # (2-D nonzero: 5x slower)
    d64 = dist64(ii, jj)
    order = np.lexsort((d64, jj))
    counts = np.bincount(jj, minlength=d32.shape[1])
    starts = np.cumsum(counts) - counts
    pick = starts + (k - n_lo)
    fine = np.isfinite(beta) & (k - n_lo < counts)
    w = np.full(d32.shape[1], np.nan)
    w[fine] = d64[order[pick[fine]]]
    fine &= (lo.astype(np.float64) + beta <= w) & (w <= hi.astype(np.float64) - beta)
    bad = np.flatnonzero(~fine)
    if bad.size:
        w[bad] = np.partition(exact64(bad), k, axis=0)[k]
    return w
