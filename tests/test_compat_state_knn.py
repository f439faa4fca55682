"""compat's state-space neighbour search (device k-NN on a row-major layout) against a
NumPy reference: exact row sets and order, ties (quantized data) by distance, then
|p - l|, then l; exclusion radius in rows; NaN rows that are neither library nor query.
float64 distances: 1e-12 relative (summation order may differ)."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl.compat._state_knn import _host, state_neighbors


def _reference(emb, lib, pred, k, radius):
    nbr = np.full((pred.size, k), -1)
    dist = np.full((pred.size, k), np.inf)
    for r, p in enumerate(pred):
        d = np.sqrt(((emb[lib] - emb[p]) ** 2).sum(axis=1))
        prox = np.abs(p - lib)
        if radius >= 0:
            d = np.where(prox <= radius, np.inf, d)
        o = np.lexsort((lib, prox, d))[:k]
        ok = np.isfinite(d[o])
        nbr[r, :ok.sum()], dist[r, :ok.sum()] = lib[o[ok]], d[o[ok]]
    return nbr, dist


@pytest.mark.parametrize("D,k,radius", [(1, 4, 0), (3, 7, -1), (4, 12, 5), (2, 80, 0)])
def test_state_neighbors_match_numpy(D, k, radius, device):
    rng = np.random.default_rng(D * 100 + k)
    emb = np.round(rng.random((160, D)) * 4) / 4  # quantized: many exact ties
    emb[[3, 50]] = np.nan  # rows left out of lib and pred, as RemoveNan does
    lib = np.setdiff1d(np.arange(5, 120), [50])
    pred = np.arange(90, 160)
    ref = _reference(emb, lib, pred, k, radius)
    got = state_neighbors(emb, lib, pred, k, radius, device=device)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    host = _host(emb, lib, pred, k, radius)
    np.testing.assert_array_equal(host[0], ref[0])


def test_nan_in_a_used_row_is_an_error(device):
    emb = np.arange(20.0).reshape(10, 2)
    emb[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        state_neighbors(emb, np.arange(8), np.array([4]), 2, 0, device=device)
