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


@pytest.mark.parametrize("D,k,leafsize", [(1, 4, None), (3, 7, 20), (2, 80, 20)])
def test_kdtree_candidates_are_scipys(D, k, leafsize, device, monkeypatch):
    """pyEDM's candidate list: scipy KDTree's rows (its tie order) and distances, row for
    row, on quantized data; without scipy, the device's documented order."""
    KDTree = pytest.importorskip("scipy.spatial").KDTree
    from pyedmcl.compat import _state_knn

    rng = np.random.default_rng(D * 7 + k)
    emb = np.round(rng.random((150, D)) * 4) / 4  # quantized: many exact ties
    lib = np.arange(0, 120)
    pred = np.arange(60, 150)
    tree = (KDTree(emb[lib]) if leafsize is None else
            KDTree(emb[lib], leafsize=leafsize, compact_nodes=True, balanced_tree=True))
    d, i = tree.query(emb[pred], k=k, eps=0, p=2)
    d, i = d.reshape(pred.size, k), i.reshape(pred.size, k)
    rows, dist = _state_knn.kdtree_candidates(emb, lib, pred, k, leafsize, device=device)
    np.testing.assert_array_equal(rows, lib[i])
    np.testing.assert_array_equal(dist, d)
    device_order = state_neighbors(emb, lib, pred, k, -1, device=device)[0]
    assert (device_order != rows).any()  # the ties are real: the orders differ
    monkeypatch.setattr(_state_knn, "scipy_available", lambda: False)
    rows, _ = _state_knn.kdtree_candidates(emb, lib, pred, k, leafsize, device=device)
    np.testing.assert_array_equal(rows, device_order)
