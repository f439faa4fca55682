"""compat.pyedm's general path decides distance ties as pyEDM does (scipy KDTree's order).

Data: a Lorenz-63 series rounded to 1 decimal (not one of pyEDM's test sets), so
neighbour distances tie exactly and often. Simplex, S-map and CCM through compat's
general path (NaN rows, multivariate or ``embedded`` state spaces) against pyEDM in
float64. Tolerance 1e-12 absolute: once the neighbour sets and their order are
pyEDM's, both run the same float64 host arithmetic on the same distances (computed
as pyEDM computes them), so agreement is to rounding, far below 1e-12 at these
magnitudes; a tie decided differently moves a prediction by ~1e-3 or more.

Each case first asserts that the ties are real: some query rows hold equal distances
among their nearest candidates, and on some of them scipy's KDTree and the device's
documented order (distance, |p - l|, l) disagree. With the device's order in place
of KDTree's, the S-map and CCM cases fail (measured: 1.8e-3, 1.6e-5); Simplex's
tie-break is that total order in pyEDM too, so its case checks the port of pyEDM's
tie-break (and ``knn_neighbors`` row for row).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyedmcl.compat.pyedm as EDM
from pyedmcl.compat._state_knn import host_distances, kdtree_candidates, state_neighbors, tied_rows

pyEDM = pytest.importorskip("pyEDM")
pytest.importorskip("scipy")
TOL = 1e-12


def _lorenz(n: int = 320, dt: float = 0.02) -> pd.DataFrame:
    """Lorenz-63 (sigma 10, rho 28, beta 8/3), RK4, every step kept, rounded to 1 decimal."""
    def f(s):
        x, y, z = s
        return np.array([10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z])

    s = np.array([1.0, 1.0, 1.0])
    out = np.empty((n + 200, 3))
    for i in range(n + 200):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out[i] = s
    v = np.round(out[200:], 1)  # transient dropped
    return pd.DataFrame({"Time": np.arange(1, n + 1), "x": v[:, 0], "y": v[:, 1], "z": v[:, 2]})


@pytest.fixture(scope="module")
def data():
    return _lorenz()


def _with_nan(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    d.loc[[30, 31, 140], "x"] = np.nan
    d.loc[[200], "y"] = np.nan
    return d


def _ref(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for c in a.columns:
        np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), atol=TOL, rtol=0,
                                   equal_nan=True, err_msg=c)


def _assert_ties_matter(emb: np.ndarray, k: int, leafsize, device) -> None:
    """Rows of ``emb`` (NaN rows left out) tie within their k+1 nearest others, and
    KDTree's order differs from the device's on some of them."""
    rows = np.flatnonzero(~np.isnan(emb).any(axis=1))
    nbr, _ = state_neighbors(emb, rows, rows, k + 1, -1, device=device)
    tied = tied_rows(host_distances(emb, rows, nbr))
    assert tied.sum() >= 5, "the data hold too few distance ties to test tie order"
    kd, _ = kdtree_candidates(emb, rows, rows, k + 1, leafsize, device=device)
    assert (kd != nbr).any(), "KDTree's and the device's tie orders agree everywhere here"


def _lags(df: pd.DataFrame, names: list[str], E: int) -> np.ndarray:
    return np.hstack([np.column_stack([df[c].shift(i).to_numpy(float) for i in range(E)])
                      for c in names])


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_simplex_ties_as_pyedm(data, nan, device):
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y", target="x", lib="1 200", pred="150 300", E=2, Tp=1,
              returnObject=True)
    _assert_ties_matter(_lags(d, ["x", "y"], 2), 5, 20, device)
    a, b = _ref(pyEDM.Simplex, d, **kw), _ref(EDM.Simplex, d, device=device, **kw)
    np.testing.assert_array_equal(a.knn_neighbors, b.knn_neighbors)
    _same(a.Projection, b.Projection)


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_smap_ties_as_pyedm(data, nan, device):
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y z", target="x", lib="1 250", pred="100 310", theta=3.0, knn=12,
              embedded=True, Tp=1)
    _assert_ties_matter(d[["x", "y", "z"]].to_numpy(float), 12, 20, device)
    a, b = _ref(pyEDM.SMap, d, **kw), _ref(EDM.SMap, d, device=device, **kw)
    for key in ("predictions", "coefficients"):
        _same(a[key], b[key])


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_ccm_ties_as_pyedm(data, nan, device):
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y", target="z", libSizes=[20, 300, 70], sample=4, E=2, Tp=0, seed=11,
              includeData=True)
    _assert_ties_matter(_lags(d, ["x", "y"], 2), 5, None, device)
    a = _ref(pyEDM.CCM, d, parallel=False, **kw)
    b = _ref(EDM.CCM, d, device=device, **kw)
    _same(a, b)
