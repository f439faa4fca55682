"""pe.xmap with Tp a list of lags: each lag's matrix against pe.xmap at that one Tp
(same device, same dtype: bit-identical) and a few entries against pyEDM's CCM at that
Tp (float64 reference vs the float32 pipeline: 1e-5 on rho, as tests/test_xmap.py);
the result type; bad lags.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe

RHO_TOL = 1e-5
LAGS = [-3, -1, 0, 2]


def panel(L: int = 100, N: int = 5, seed: int = 3) -> np.ndarray:
    """(L, N) noisy oscillators, each driven by its neighbour one step late."""
    rng = np.random.default_rng(seed)
    t = np.arange(L)
    base = np.sin(t[:, None] * rng.uniform(0.15, 0.6, N)[None, :])
    drive = np.roll(np.roll(base, 1, axis=1), 1, axis=0) * 0.4
    return (base + drive + 0.2 * rng.standard_normal((L, N))).astype(np.float32)


@pytest.fixture(scope="module")
def lagged():
    X = panel()
    return X, pe.xmap(X, E=[2, 3, 2, 3, 2], Tp=LAGS, device=CPU_DEVICE)


def test_each_lag_is_the_single_tp_map(lagged):
    X, r = lagged
    assert r.rho.shape == (len(LAGS), 5, 5) and list(r.lags) == LAGS
    for a, lag in enumerate(LAGS):
        one = pe.xmap(X, E=[2, 3, 2, 3, 2], Tp=lag, device=CPU_DEVICE)
        np.testing.assert_array_equal(r.rho[a], np.asarray(one.rho))
        np.testing.assert_array_equal(r.at(lag), np.asarray(one.rho))


def test_auto_E_lags_equal_single_tp_maps():
    X = panel(L=80, N=3, seed=5)
    r = pe.xmap(X, Tp=range(-1, 2), max_E=4, device=CPU_DEVICE)
    for a, lag in enumerate(range(-1, 2)):
        one = pe.xmap(X, Tp=lag, max_E=4, device=CPU_DEVICE)
        np.testing.assert_array_equal(r.E, one.E)
        np.testing.assert_array_equal(r.rho[a], np.asarray(one.rho))


def test_entries_match_pyedm_ccm(lagged):
    pyEDM = pytest.importorskip("pyEDM")
    X, r = lagged
    L = X.shape[0]
    df = pd.DataFrame(X.astype(np.float64), columns=[f"x{i}" for i in range(X.shape[1])])
    df.insert(0, "time", np.arange(1, L + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, lag in enumerate(LAGS):
            for i, j in ((0, 1), (2, 0), (4, 3)):
                E = int(r.E[j])
                o = pyEDM.CCM(dataFrame=df, columns=f"x{i}", target=f"x{j}", E=E, tau=-1,
                              Tp=lag, libSizes=[L], sample=1, parallel=False)
                assert abs(r.rho[a, i, j] - o[f"x{i}:x{j}"].iloc[0]) < RHO_TOL, (lag, i, j)


def test_best_lag_and_frames(lagged):
    X, r = lagged
    best = r.best_lag
    assert best.shape == (5, 5)
    for i, j in ((0, 1), (3, 2)):
        col = r.rho[:, i, j]
        assert best[i, j] == LAGS[int(np.argmax(col))]
        assert r.best_rho[i, j] == col.max()
    df = r.as_dataframe()
    assert len(df) == len(LAGS) * 25
    row = df[(df.Tp == -1) & (df.library == "1") & (df.target == "4")]
    assert row.rho.iloc[0] == r.rho[1, 1, 4]
    pytest.importorskip("xarray")
    ds = r.as_xarray()
    assert list(ds.Tp.values) == LAGS
    np.testing.assert_array_equal(ds.rho.sel(Tp=2).values, r.rho[3])


@pytest.mark.parametrize("Tp, match", [([0, 100], r"Tp=100.*-99"), ([-100], r"Tp=-100"),
                                       ([], "Tp is empty"), ("0,1", "Tp must be an integer")])
def test_bad_lags_refused(Tp, match):
    X = panel()
    with pytest.raises((ValueError, TypeError), match=match):
        pe.xmap(X, E=2, Tp=Tp, device=CPU_DEVICE)


def test_lags_with_store_or_surrogates_refused(tmp_path):
    X = panel()
    with pytest.raises(ValueError, match="surrogates="):
        pe.xmap(X, E=2, Tp=[0, 1], surrogates=9, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="out="):
        pe.xmap(X, E=2, Tp=[0, 1], out=str(tmp_path / "m.zarr"), device=CPU_DEVICE)
    with pytest.raises(ValueError, match="method='simplex' only"):
        pe.xmap(X, E=2, Tp=[0, 1], method="smap", theta=2.0, device=CPU_DEVICE)
