"""pyEDM 2.5's CCM for the cases pyedmcl's core ``ccm`` does not take (compat path).

Multivariate ``columns`` / ``target`` (each direction's state space is the stack
of every variable's ``E`` lags), ``embedded=True``, NaN rows and ``validLib``,
following pyEDM's ``CCM.Embed`` / ``_ccm_for_libsize``: the same seeded random
libraries (``SeedSequence(seed).spawn``, ``rng.choice(M, L, replace=False)``), the
same candidate filter (self-match, exclusion radius in data rows) and weights. The
neighbour candidates of each sample come from the device; rows whose candidates tie
take scipy KDTree's order, as pyEDM (:func:`._state_knn.kdtree_candidates`; without
scipy the device's order decides ties).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ._state_knn import kdtree_candidates


def _embedding(df: pd.DataFrame, names: list[str], E: int, tau: int) -> np.ndarray:
    shifts = np.arange(E) * tau
    n = df.shape[0]
    parts = []
    for name in names:
        v = df[name].to_numpy(dtype=np.float64)
        emb = np.full((n, E), np.nan)
        for d, s in enumerate(shifts):
            if s <= 0:
                emb[-s:, d] = v[:n + s]
            else:
                emb[:n - s, d] = v[s:]
        parts.append(emb)
    return np.hstack(parts)


def _tp_valid(n: int, v: np.ndarray, Tp: int) -> np.ndarray:
    shifted = np.arange(n) + Tp
    inside = (shifted >= 0) & (shifted < n)
    return inside & ~np.isnan(v[np.clip(shifted, 0, n - 1)])


def _pearson(p: np.ndarray, a: np.ndarray) -> float:
    ok = ~(np.isnan(p) | np.isnan(a))
    if ok.sum() < 3:
        return np.nan
    pm, am = p[ok] - p[ok].mean(), a[ok] - a[ok].mean()
    den = np.sqrt(np.dot(pm, pm) * np.dot(am, am))
    return 0.0 if den == 0.0 else float(np.dot(pm, am) / den)


def _libsize(emb, vals, times, L, S, k, R, rng, device) -> np.ndarray:
    M = emb.shape[0]
    L = min(L, M)
    k = min(k, L - 1)
    if k < 1:
        return np.full(S, np.nan)
    kq = min(k + 1 + (2 * R if R > 0 else 0), L)
    rhos = np.empty(S)
    rows = np.arange(M)[:, None]
    for s in range(S):
        lib = np.sort(rng.choice(M, size=L, replace=False))
        # pyEDM: KDTree(emb[lib]).query(emb, k=kq), scipy's default tree
        nbr, dist = kdtree_candidates(emb, lib, np.arange(M), kq, None, device=device)
        mask = nbr == rows
        if R > 0:
            mask |= np.abs(times[:, None] - times[nbr]) <= R
        valid = ~mask
        cs = np.cumsum(valid, axis=1)
        first = valid & (cs <= k)
        short = cs[:, -1] < k
        if short.all():
            rhos[s] = np.nan
            continue
        first[short] = False
        cols = np.zeros((M, k), dtype=np.intp)
        if (~short).any():
            cols[~short] = np.nonzero(first)[1].reshape(int((~short).sum()), k)
        d, g = dist[rows, cols], nbr[rows, cols]
        dmin = d[:, :1]
        w = np.exp(-d / np.where(dmin > 0.0, dmin, 1.0))
        zero = dmin == 0.0
        if zero.any():
            w = np.where(zero, np.where(d == 0.0, 1.0, 0.0), w)
        wsum = w.sum(axis=1, keepdims=True)
        w /= np.where(wsum > 0.0, wsum, 1.0)
        pred = np.sum(w * vals[g], axis=1)
        pred[short] = np.nan
        rhos[s] = _pearson(pred, vals)
    return rhos


def ccm_general(df: pd.DataFrame, columns: list[str], target: list[str], lib_sizes: list[int],
                sample: int, E: int, Tp: int, knn: int, tau: int, R: int, seed: Any,
                embedded: bool, valid_lib: Any, include_data: bool, device: Any) -> pd.DataFrame:
    """pyEDM's CCM frame (``LibSize``, ``col:tgt``, ``tgt:col`` [, ``*_var``])."""
    n = df.shape[0]
    if embedded:
        E = len(columns)
    k = knn if knn >= 1 else E + 1
    tgt_vec = df[target[0]].to_numpy(dtype=np.float64)
    col_vec = df[columns[0]].to_numpy(dtype=np.float64)
    if embedded:
        emb_c = df[columns].to_numpy(dtype=np.float64)
        emb_t = df[target].to_numpy(dtype=np.float64)
    else:
        emb_c, emb_t = _embedding(df, columns, E, tau), _embedding(df, target, E, tau)
    ok_c = ~np.isnan(emb_c).any(axis=1)
    ok_t = ~np.isnan(emb_t).any(axis=1)
    if valid_lib is not None and len(valid_lib):
        vl = np.asarray(valid_lib, dtype=bool)
        if vl.size != n:
            raise ValueError(f"validLib must be as long as the data ({n}), got {vl.size}")
        ok_c, ok_t = ok_c & vl, ok_t & vl
    ok_c &= _tp_valid(n, tgt_vec, Tp) & ~np.isnan(col_vec)
    ok_t &= _tp_valid(n, col_vec, Tp) & ~np.isnan(tgt_vec)
    idx_c, idx_t = np.flatnonzero(ok_c), np.flatnonzero(ok_t)
    for name, idx in (("forward", idx_c), ("reverse", idx_t)):
        if idx.size < k + 1:
            raise ValueError(f"Insufficient valid points for {name} direction: {idx.size} valid, "
                             f"need at least {k + 1}.")
    fwd = (emb_c[idx_c], tgt_vec[idx_c + Tp], idx_c)
    rev = (emb_t[idx_t], col_vec[idx_t + Tp], idx_t)
    children = np.random.SeedSequence(seed).spawn(2 * len(lib_sizes))
    means, variances = [], []
    for i, L in enumerate(lib_sizes):
        for j, (emb, vals, times) in enumerate((fwd, rev)):
            rng = np.random.default_rng(np.random.SeedSequence(children[2 * i + j].entropy))
            rhos = _libsize(emb, vals, times, int(L), sample, k, R, rng, device)
            m = np.nanmean(rhos) if np.isfinite(rhos).any() else np.nan
            means.append(m)
            variances.append(np.nanvar(rhos) if np.isfinite(rhos).any() else np.nan)
    a, b = f"{columns[0]}:{target[0]}", f"{target[0]}:{columns[0]}"
    out = pd.DataFrame({"LibSize": list(lib_sizes), a: means[0::2], b: means[1::2]})
    if include_data:
        out[f"{a}_var"], out[f"{b}_var"] = variances[0::2], variances[1::2]
    return out
