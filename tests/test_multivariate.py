"""State spaces of several columns, missing data and valid_lib, against pyEDM 2.5.7 (live).

Data: pyedmcl.data.lorenz63 (x, y, z), which pyEDM's own tests do not use; small L.
Tolerances (stated, not tuned to pass), normwise: ``max|ours - pyEDM| / max|pyEDM|``
* float64 (``dtype="float64"``): 1e-9 for predictions, variances, coefficients and rho
  (the same arithmetic up to summation order; measured <= 1e-13).
* float32 storage: predictions 1e-5 (columns centred in float64, distances in float32:
  a few ulp of the data, measured <= 5e-8); S-map coefficients 1e-3 (normal equations
  square the local condition number, as in tests/test_edm_smap.py; measured <= 2e-5);
  CCM rho 1e-5 absolute (measured <= 5e-7).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pyEDM = pytest.importorskip("pyEDM")

import pyedmcl as pe  # noqa: E402
from pyedmcl.data import lorenz63  # noqa: E402

TOL = {"float64": 1e-9, "float32": 1e-5}
COEF_TOL = {"float64": 1e-9, "float32": 1e-3}


def frame(n: int = 300, nan: dict | None = None) -> pd.DataFrame:
    X = lorenz63(n)
    df = pd.DataFrame({"Time": np.arange(1, n + 1), "x": X[:, 0], "y": X[:, 1], "z": X[:, 2]})
    for col, rows in (nan or {}).items():
        df.loc[rows, col] = np.nan
    return df


def on_times(res, ref: pd.DataFrame, col: str, values=None) -> tuple[np.ndarray, np.ndarray]:
    """(ours, pyEDM's) ``col`` on pyEDM's Time rows (1-based) that we predict."""
    ours = res.predicted if values is None else values
    at = {int(t): i for i, t in enumerate(res.times)}
    t = ref["Time"].to_numpy().astype(int) - 1
    keep = [j for j, tt in enumerate(t) if tt in at]
    assert len(keep) >= len(t) - 1  # pyEDM adds one row past the data for Tp = 1
    return ours[[at[t[j]] for j in keep]], ref[col].to_numpy()[keep]


def close(got: np.ndarray, ref: np.ndarray, tol: float) -> None:
    """Normwise agreement with NaN in the same places."""
    got, ref = np.asarray(got, float), np.asarray(ref, float)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    scale = max(np.max(np.abs(ref[ok])), 1e-300)
    assert np.max(np.abs(got[ok] - ref[ok])) / scale <= tol


def quiet(f, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(**kw)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("embedded,cols,E", [(False, "x y", 2), (True, "x y z", 3)])
def test_simplex_multivariate(device, dtype, embedded, cols, E):
    df = frame()
    ref = quiet(pyEDM.Simplex, dataFrame=df, columns=cols, target="z", lib=[1, 200],
                pred=[201, 299], E=E, embedded=embedded)
    res = pe.simplex(df, target="z", columns=cols, E=E, lib=[1, 200], pred=[201, 299],
                     embedded=embedded, dtype=dtype, device=device, variance=True)
    close(*on_times(res, ref, "Predictions"), TOL[dtype])
    close(*on_times(res, ref, "Pred_Variance", res.variance), 10 * TOL[dtype])
    assert res.knn == (3 if embedded else E) + 1  # pyEDM's default


def test_simplex_numpy_columns_match_frame(device):
    """A numpy (L, m) array with integer columns and a 1-D target equals the frame call."""
    df = frame(200)
    a = pe.simplex(df, target="z", columns=["x", "y"], E=2, device=device, dtype="float64")
    b = pe.simplex(df[["x", "y", "z"]].to_numpy(), target=df["z"].to_numpy(), columns=[0, 1],
                   E=2, device=device, dtype="float64")
    np.testing.assert_array_equal(a.predicted, b.predicted)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("knn", [0, 25])
def test_smap_multivariate_coefficients(device, dtype, knn):
    df = frame()
    ref = quiet(pyEDM.SMap, dataFrame=df, columns="x y z", target="x", lib=[1, 200],
                pred=[201, 299], E=3, theta=2.0, embedded=True, knn=knn)
    res = pe.smap(df, target="x", columns="x y z", lib=[1, 200], pred=[201, 299], theta=2.0,
                  embedded=True, knn=knn or None, dtype=dtype, device=device)
    P, C = ref["predictions"], ref["coefficients"]
    close(*on_times(res, P, "Predictions"), TOL[dtype])
    for j, name in enumerate(C.columns[1:]):  # C0, ∂x/∂x, ∂x/∂y, ∂x/∂z
        close(*on_times(res, C, name, res.coefficients[:, j]), COEF_TOL[dtype])


def test_smap_lags_of_columns(device):
    """E lags of two columns (pyEDM only takes these pre-embedded: the same state)."""
    df = frame(250)
    emb = pyEDM.Embed(dataFrame=df, E=2, tau=-1, columns="x y")
    emb.insert(0, "Time", df["Time"])
    emb["z"] = df["z"]
    ref = quiet(pyEDM.SMap, dataFrame=emb, columns=list(emb.columns[1:5]), target="z",
                lib=[1, 180], pred=[181, 249], E=4, theta=1.5, embedded=True)
    res = pe.smap(df, target="z", columns="x y", E=2, lib=[1, 180], pred=[181, 249],
                  theta=1.5, dtype="float64", device=device)
    P, C = ref["predictions"], ref["coefficients"]
    close(*on_times(res, P, "Predictions"), 1e-9)
    assert list(emb.columns[1:5]) == ["x(t-0)", "y(t-0)", "x(t-1)", "y(t-1)"]  # pyEDM's order
    for j, name in enumerate(C.columns[1:]):
        close(*on_times(res, C, name, res.coefficients[:, j]), 1e-9)


@pytest.mark.parametrize("embedded", [False, True])
def test_ccm_multivariate(device, embedded):
    df = frame(400)
    ref = pyEDM.CCM(dataFrame=df, columns="x y", target="z", E=2, libSizes=[50, 150, 300],
                    sample=10, seed=7, embedded=embedded, parallel=False)
    for dtype, tol in (("float64", 1e-9), ("float32", 1e-5)):
        res = pe.ccm(df, columns="x y", target="z", E=2, lib_sizes=[50, 150, 300], sample=10,
                     seed=7, embedded=embedded, dtype=dtype, device=device)
        np.testing.assert_allclose(res.rho_xy, ref["x:z"], rtol=0, atol=tol)
        np.testing.assert_allclose(res.rho_yx, ref["z:x"], rtol=0, atol=tol)


NAN_ROWS = {"x": [40, 120, 230], "z": [77, 150, 260]}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_simplex_nan(device, dtype):
    """NaN in a state column (rows out of the library, NaN predictions) and in the
    target (a neighbour with a NaN target makes the prediction NaN), as pyEDM."""
    df = frame(nan=NAN_ROWS)
    ref = quiet(pyEDM.Simplex, dataFrame=df, columns="x y", target="z", lib=[1, 200],
                pred=[201, 299], E=2)
    res = pe.simplex(df, target="z", columns="x y", E=2, lib=[1, 200], pred=[201, 299],
                     dtype=dtype, device=device)
    got, want = on_times(res, ref, "Predictions")
    assert np.isnan(want).sum() >= 2
    close(got, want, TOL[dtype])
    ok = np.isfinite(got) & np.isfinite(on_times(res, ref, "Observations", res.observed)[1])
    o = on_times(res, ref, "Observations", res.observed)[1]
    assert res.rho == pytest.approx(np.corrcoef(o[ok], got[ok])[0, 1], abs=1e-12)


def test_simplex_nan_series(device):
    """A 1-D series with gaps: the same rule on one column."""
    df = frame(nan={"x": [30, 31, 150]})
    ref = quiet(pyEDM.Simplex, dataFrame=df, columns="x", target="x", lib=[1, 200],
                pred=[201, 299], E=3)
    res = pe.simplex(df["x"].to_numpy(), E=3, lib=[1, 200], pred=[201, 299], dtype="float64",
                     device=device)
    close(*on_times(res, ref, "Predictions"), 1e-9)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_smap_nan(device, dtype):
    df = frame(nan=NAN_ROWS)
    ref = quiet(pyEDM.SMap, dataFrame=df, columns="x y z", target="z", lib=[1, 200],
                pred=[201, 299], E=3, theta=2.0, embedded=True)
    res = pe.smap(df, target="z", columns="x y z", lib=[1, 200], pred=[201, 299], theta=2.0,
                  embedded=True, dtype=dtype, device=device)
    close(*on_times(res, ref["predictions"], "Predictions"), TOL[dtype])
    C = ref["coefficients"]
    for j, name in enumerate(C.columns[1:]):
        close(*on_times(res, C, name, res.coefficients[:, j]), COEF_TOL[dtype])


def test_valid_lib(device):
    df = frame()
    mask = np.ones(len(df), dtype=bool)
    mask[50:90] = False
    mask[::7] = False
    ref = quiet(pyEDM.Simplex, dataFrame=df, columns="x y", target="z", lib=[1, 200],
                pred=[150, 299], E=2, validLib=mask)
    res = pe.simplex(df, target="z", columns="x y", E=2, lib=[1, 200], pred=[150, 299],
                     valid_lib=mask, dtype="float64", device=device)
    close(*on_times(res, ref, "Predictions"), 1e-9)
    # pyEDM's S-map needs an explicit knn with validLib (its default counts the whole lib)
    ref = quiet(pyEDM.SMap, dataFrame=df, columns="x", target="x", lib=[1, 200],
                pred=[150, 299], E=3, theta=3.0, validLib=mask, knn=60)
    res = pe.smap(df["x"].to_numpy(), E=3, lib=[1, 200], pred=[150, 299], theta=3.0,
                  valid_lib=mask, knn=60, dtype="float64", device=device)
    close(*on_times(res, ref["predictions"], "Predictions"), 1e-9)


def test_bad_input_named():
    df = frame(100)
    with pytest.raises(ValueError, match="columns 'w' is not a column"):
        pe.simplex(df, columns="x w", E=2)
    with pytest.raises(ValueError, match="valid_lib must be a boolean array of length 100"):
        pe.simplex(df, columns="x y", E=2, valid_lib=np.ones(99, bool))
    df.loc[10, "y"] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        pe.simplex(df, columns="x y", E=2)
    with pytest.raises(ValueError, match="E is required"):
        pe.simplex(frame(100), columns="x y")
