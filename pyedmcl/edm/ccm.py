"""Convergent Cross Mapping (Sugihara et al. 2012) with pyEDM 2.5's semantics.

For each library size L and each of ``sample`` random libraries (L of the M
valid rows, without replacement by default), every valid row is cross-mapped
from its k nearest library neighbours (self and rows within
``exclusion_radius`` excluded) and Pearson rho is taken over all M rows; the
curve is the mean rho per L, in both directions.

RNG (documented so results are reproducible and comparable with pyEDM): for
every (direction, L) a fresh ``numpy.random.default_rng(SeedSequence(e))`` is
made, where ``e = SeedSequence(seed).entropy``, and each sample draws
``rng.choice(M, size=L, replace=replacement)`` (sorted). This is exactly what
pyEDM 2.5 does, so with the same ``seed`` both libraries draw the same samples
and the curves agree to float precision, not only within sampling error.

All samples of one L run as one batched k-NN launch (one library per batch
index), then one lookup and one on-device rho reduction; only S numbers per L
come back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import get_backend

from ..neighbors import resolve_backend
from ..validation import as_series, check_dtype, check_int
from .knn import hold, knn_device
from .lookup import lookup_device, skill_device
from .ranges import MAX_KNN, ccm_valid_times, check_tau, point_offset
from .results import CCMResult

#: cap on k-NN table entries per batched launch (bounds device memory)
MAX_TABLE_ENTRIES = 1 << 25


def parse_lib_sizes(lib_sizes: Any, n: int, E: int) -> np.ndarray:
    """pyEDM's libSizes: a list, or ``"start stop increment"`` (3 values, increment < stop)."""
    if isinstance(lib_sizes, str):
        vals = [int(v) for v in lib_sizes.replace(",", " ").split()]
    else:
        vals = [int(v) for v in np.atleast_1d(np.asarray(lib_sizes)).reshape(-1)]
    if not vals:
        raise ValueError("lib_sizes is empty; give library sizes, e.g. [20, 50, 100]")
    if len(vals) == 3 and vals[2] < vals[1]:
        start, stop, inc = vals
        if inc < 1 or start > stop:
            raise ValueError(f"lib_sizes 'start stop increment' = {vals} is invalid; "
                             "allowed: increment >= 1 and start <= stop")
        vals = list(range(start, stop + 1, inc))
    arr = np.asarray(vals, dtype=np.int64)
    if arr.min() < E + 2 or arr.max() > n:
        raise ValueError(f"lib_sizes={vals} out of range; allowed: {E + 2} <= L <= {n} "
                         f"(E + 2 .. series length)")
    return arr


def _direction(be, real, x: np.ndarray, y: np.ndarray, *, E: int, tau: int, Tp: int, k: int,
               radius: int, sizes: np.ndarray, sample: int, entropy: int, random: bool,
               replacement: bool, neighbors=None) -> np.ndarray:
    """rho samples ``(len(sizes), sample)`` for x's embedding cross-mapping y."""
    n = x.size
    dt = np.float64 if real == "double" else np.float32
    times = ccm_valid_times(n, E, tau, Tp)
    M = times.size
    off = point_offset(E, tau)
    pts = (times - off).astype(np.int32)
    x_dev = be.to_device(x.astype(dt))
    y_dev = be.to_device(y.astype(dt))
    q_dev = be.to_device(pts)
    obs_dev = be.to_device((times + Tp).astype(np.int32))
    hold(be, x_dev, y_dev, q_dev, obs_dev)
    out = np.full((sizes.size, sample), np.nan)
    for i, L0 in enumerate(sizes):
        L = int(min(L0, M))
        kk = min(k, L - 1)
        if kk < 1:
            continue
        rng = np.random.default_rng(np.random.SeedSequence(entropy))
        if random:
            libs = np.stack([np.sort(rng.choice(M, size=L, replace=replacement))
                             for _ in range(sample)])
        else:
            libs = np.arange(L)[None, :]
        ns = libs.shape[0]
        per = max(1, MAX_TABLE_ENTRIES // max(1, M * kk))
        rhos = []
        for c in range(0, ns, per):
            chunk = pts[libs[c:c + per]]
            search = knn_device if neighbors is None else neighbors.device_table
            table = search(be, x_dev, n, E=E, tau=tau, k=kk, qpts=pts, lpts=chunk,
                           radius=radius, real=real, q_dev=q_dev)
            pred, _ = lookup_device(be, table, y_dev, n, 1, off + Tp, weight="ccm", real=real)
            sk = skill_device(be, pred, table.nbatch, M, y_dev, n, 1, obs_dev, real=real)
            r = sk[:, 0].copy()
            r[sk[:, 3] < 3] = np.nan
            r[(sk[:, 3] >= 3) & np.isnan(r)] = 0.0  # zero variance: pyEDM reports 0
            rhos.append(r)
        out[i, :ns] = np.concatenate(rhos)
    return out


def ccm(x, y, *, E: int, tau: int = 1, Tp: int = 0, lib_sizes: Any, sample: int = 100,
        seed: int | None = None, knn: int | None = None, exclusion_radius: int = 0,
        random: bool = True, replacement: bool = False, dtype: Any = None, device: Any = None,
        backend: str | None = None, knn_backend: str = "exact",
        knn_options: dict | None = None) -> CCMResult:
    """CCM curves in both directions.

    ``rho_xy`` (pyEDM column ``x:y``): x's embedding cross-maps y; ``rho_yx``:
    y's embedding cross-maps x. ``lib_sizes`` as in pyEDM (list, or
    ``"start stop increment"``); ``sample`` random libraries per size (one
    contiguous library of the first L rows if ``random=False``); ``seed`` makes
    the draw reproducible (see module docstring for the exact RNG). ``tau > 0``
    lags into the past.
    """
    be = get_backend(device, backend)
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    real = "double" if dt == np.float64 else "float"
    xs, ys = as_series(x, "x"), as_series(y, "y")
    if xs.size != ys.size:
        raise ValueError(f"x and y must be equally long, got {xs.size} and {ys.size}")
    n = xs.size
    E = check_int(E, "E", 1, 512)
    tau = check_tau(tau)
    Tp = check_int(Tp, "Tp", -(n - 1), n - 1)
    knn = E + 1 if knn is None or knn == 0 else check_int(knn, "knn", 1, MAX_KNN)
    sample = check_int(sample, "sample", 1)
    exclusion_radius = check_int(exclusion_radius, "exclusion_radius", 0, n)
    sizes = parse_lib_sizes(lib_sizes, n, E)
    M = ccm_valid_times(n, E, tau, Tp).size
    if M < knn + 1:
        raise ValueError(f"series of {n} values leaves {M} usable rows for E={E}, tau={tau}, "
                         f"Tp={Tp}; needs at least knn+1 = {knn + 1}")
    if seed is not None:
        seed = check_int(seed, "seed", 0)
    entropy = np.random.SeedSequence(seed).entropy
    if not random:
        sample = 1
    kw = dict(E=E, tau=tau, Tp=Tp, k=knn, radius=exclusion_radius, sizes=sizes, sample=sample,
              entropy=entropy, random=random, replacement=replacement,
              neighbors=resolve_backend(knn_backend, be, L=int(min(sizes.max(), M)), E=E, nq=M,
                                        k=knn, options=knn_options))
    s_xy = _direction(be, real, xs, ys, **kw)
    s_yx = _direction(be, real, ys, xs, **kw)
    return CCMResult(lib_sizes=sizes, rho_xy=np.nanmean(s_xy, axis=1),
                     rho_yx=np.nanmean(s_yx, axis=1), rho_xy_samples=s_xy, rho_yx_samples=s_yx,
                     neighbors=kw["neighbors"].info)
