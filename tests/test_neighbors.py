"""Neighbour back-ends: exactness, recall, exclusion radius, EDM integration, bad input.

Oracle: a NumPy brute-force k-NN with the exact kernel's tie order (distance,
then |p - l|, then l). Tolerances: indices exact for exact back-ends; distances
rtol 1e-4 (float32 kernel vs float64 host); recall >= 0.9 for IVF/HNSW at
default settings (the issue's bound; measured values are ~0.99+).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.neighbors import BACKENDS, knn_search, neighbor_backend
from pyedmcl.neighbors.lorenz import lorenz63
from pyedmcl.neighbors.recall import recall

faiss = pytest.importorskip("faiss")
pytest.importorskip("scipy")


def brute_knn(x: np.ndarray, E: int, k: int, radius: int, qpts=None, lpts=None):
    """NumPy reference: kernel points, float64 distances, the kernel's tie order."""
    npts = x.size - (E - 1)
    W = np.stack([x[j:j + npts] for j in range(E)], axis=1).astype(np.float64)
    qpts = np.arange(npts) if qpts is None else np.asarray(qpts)
    lpts = np.arange(npts) if lpts is None else np.asarray(lpts)
    idx = np.full((qpts.size, k), -1)
    dist = np.full((qpts.size, k), np.inf)
    for i, p in enumerate(qpts):
        d = np.sqrt(((W[lpts] - W[p]) ** 2).sum(axis=1))
        ok = np.abs(lpts - p) > radius if radius >= 0 else np.ones(lpts.size, bool)
        cand = np.flatnonzero(ok)
        key = 2 * np.abs(lpts[cand] - p) + (lpts[cand] > p)
        order = cand[np.lexsort((key, d[cand]))][:k]
        idx[i, :order.size] = lpts[order]
        dist[i, :order.size] = d[order]
    return idx, dist


@pytest.mark.parametrize("E,radius", [(1, 0), (3, 0), (3, 4), (2, -1)])
@pytest.mark.parametrize("name", ["exact", "kdtree"])
def test_exact_backends_return_the_true_neighbours(device, name, E, radius):
    x = np.random.default_rng(E + 10 * abs(radius)).standard_normal(300).astype(np.float32)
    ref_i, ref_d = brute_knn(x.astype(np.float64), E, E + 1, radius)
    got = knn_search(x, E=E, exclusion_radius=radius, knn_method=name, device=device)
    np.testing.assert_array_equal(got.indices, ref_i)
    np.testing.assert_allclose(got.distances, ref_d, rtol=1e-4, atol=1e-5)
    assert got.info.backend == name and got.info.expected_recall == 1.0


def test_exact_backends_subsets_and_metrics(device):
    x = np.random.default_rng(3).standard_normal(250)
    lp = np.arange(0, 240, 3)
    qp = np.arange(5, 240, 7)
    ref_i, _ = brute_knn(x.astype(np.float32).astype(np.float64), 4, 6, 2, qp, lp)
    for name in ("exact", "kdtree"):
        got = knn_search(x, E=4, knn=6, lib_points=lp, query_points=qp, exclusion_radius=2,
                         knn_method=name, device=device)
        np.testing.assert_array_equal(got.indices, ref_i)
    # non-Euclidean metrics: the k-d tree agrees with the exact kernel
    for metric in ("maximum", "manhattan"):
        a = knn_search(x, E=3, metric=metric, knn_method="exact", device=device)
        b = knn_search(x, E=3, metric=metric, knn_method="kdtree", device=device)
        assert recall(b.indices, a.indices) == 1.0
        np.testing.assert_allclose(b.distances, a.distances, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("E", [1, 20])
@pytest.mark.parametrize("name", ["ivf", "hnsw"])
def test_ann_recall_on_lorenz(name, E):
    x = lorenz63(4096 + E)
    q = np.sort(np.random.default_rng(1).choice(4096, 300, replace=False))
    ref_i, _ = brute_knn(x.astype(np.float32).astype(np.float64), E, E + 1, 0, qpts=q)
    got = knn_search(x, E=E, query_points=q, knn_method=name, device=CPU_DEVICE)
    assert recall(got.indices, ref_i) >= 0.9
    assert got.info.backend == name


@pytest.mark.parametrize("name", [*BACKENDS, "auto"])
@pytest.mark.parametrize("radius", [0, 9])
def test_exclusion_radius_honoured(name, radius):
    x = lorenz63(1200)
    got = knn_search(x, E=3, knn=5, exclusion_radius=radius, knn_method=name, device=CPU_DEVICE)
    p = np.arange(got.indices.shape[0])[:, None]
    assert (got.indices >= 0).all()  # every row found k admissible neighbours
    assert (np.abs(got.indices - p) > radius).all()
    if name in ("exact", "kdtree"):
        ref_i, _ = brute_knn(x.astype(np.float32).astype(np.float64), 3, 5, radius,
                             qpts=np.arange(0, 1198, 37))
        np.testing.assert_array_equal(got.indices[::37], ref_i)


def test_simplex_and_ccm_accept_knn_method():
    x = lorenz63(1500)
    ex = pe.simplex(x, E=3, device=CPU_DEVICE)
    kd = pe.simplex(x, E=3, knn_method="kdtree", device=CPU_DEVICE)
    np.testing.assert_allclose(kd.predicted, ex.predicted, rtol=1e-5, atol=1e-5)
    assert kd.neighbors.backend == "kdtree" and ex.neighbors.backend == "exact"
    for name in ("ivf", "hnsw"):
        r = pe.simplex(x, E=3, knn_method=name, device=CPU_DEVICE)
        assert abs(r.rho - ex.rho) < 1e-3
    au = pe.simplex(x, E=3, knn_method="auto", device=CPU_DEVICE)
    assert au.neighbors.requested == "auto" and au.neighbors.backend in BACKENDS
    y = lorenz63(400, component="x")
    kw = dict(E=2, lib_sizes=[10, 50, 200], sample=4, seed=3, device=CPU_DEVICE)
    a = pe.ccm(x[:400], y, **kw)
    b = pe.ccm(x[:400], y, knn_method="kdtree", **kw)
    np.testing.assert_allclose(b.rho_xy_samples, a.rho_xy_samples, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.rho_yx_samples, a.rho_yx_samples, rtol=1e-4, atol=1e-5)
    assert b.neighbors.backend == "kdtree"


def test_bad_input():
    x = lorenz63(200)
    for name in BACKENDS:
        with pytest.raises(ValueError, match="knn=50 is larger than the library"):
            knn_search(x, E=2, knn=50, lib_points=np.arange(20), knn_method=name, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="knn_method='bogus'.*allowed: exact, kdtree, ivf, hnsw, auto"):
        knn_search(x, E=2, knn_method="bogus", device=CPU_DEVICE)
    with pytest.raises(ValueError, match="metric='maximum' is not supported by knn_method='hnsw'"):
        knn_search(x, E=2, metric="maximum", knn_method="hnsw", device=CPU_DEVICE)
    with pytest.raises(ValueError, match="nprob.*not options of knn_method='ivf'"):
        neighbor_backend("ivf", nprob=3)
    with pytest.raises(ValueError, match="knn_method"):
        pe.simplex(x, E=2, knn_method="annoy", device=CPU_DEVICE)


def test_missing_faiss_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss -> ImportError
    for name in ("ivf", "hnsw"):
        with pytest.raises(ImportError, match=r'pip install "pyedmcl\[ann\]"'):
            neighbor_backend(name)


def test_recall_metric():
    exact = np.array([[1, 2, 3], [4, 5, -1]])
    approx = np.array([[3, 9, 1], [5, 4, 7]])
    # row 0: 2 of 3 true found; row 1: both valid true ones found
    assert recall(approx, exact) == pytest.approx((2 / 3 + 1.0) / 2)
    assert recall(exact, exact) == 1.0
