"""State spaces of several columns, missing data and valid_lib, against pyEDM 2.5.7 (live).

Data: pyedmcl.data.lorenz63 (x, y, z), which pyEDM's own tests do not use; small L.
Tolerances (stated, not tuned to pass), normwise: ``max|ours - pyEDM| / max|pyEDM|``
* float64 (``dtype="float64"``): 1e-9 for predictions, variances, coefficients and rho
  (the same arithmetic up to summation order; measured <= 1e-13).
* float32 storage: predictions 1e-5 (columns centred in float64, distances in float32:
  a few ulp of the data, measured <= 5e-8); S-map coefficients 1e-3 (normal equations
  square the local condition number, as in tests/test_edm_smap.py; measured <= 2e-5);
  CCM rho 1e-5 absolute (measured <= 5e-7).
* Kernel variants with NC > 1 columns against NumPy: k-NN tables exact (integer data,
  the total order decides ties); S-map coefficients 1e-7 relative in float64 (normal
  equations against SVD least squares, as in tests/test_edm_smap.py).
* pyEDM's EmbedDimension rounds rho to 6 decimals: 5.1e-7 there.
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


@pytest.mark.parametrize("tau,names,ref_lib", [
    (1, ["x(t-0)", "y(t-0)", "x(t-1)", "y(t-1)"], [1, 180]),
    # future lags: pyEDM's embedded library keeps the rows whose vectors reach past the
    # lib end, its non-embedded one (ours) does not: the same rows need lib [1, 178]
    (-2, ["x(t+0)", "y(t+0)", "x(t+2)", "y(t+2)"], [1, 178])])
def test_smap_lags_of_columns(device, tau, names, ref_lib):
    """E lags of two columns (pyEDM only takes these pre-embedded: the same state)."""
    df = frame(250)
    emb = pyEDM.Embed(dataFrame=df, E=2, tau=-tau, columns="x y")
    emb.insert(0, "Time", df["Time"])
    emb["z"] = df["z"]
    ref = quiet(pyEDM.SMap, dataFrame=emb, columns=list(emb.columns[1:5]), target="z",
                lib=ref_lib, pred=[181, 245], E=4, theta=1.5, embedded=True)
    res = pe.smap(df, target="z", columns="x y", E=2, tau=tau, lib=[1, 180], pred=[181, 245],
                  theta=1.5, dtype="float64", device=device)
    P, C = ref["predictions"], ref["coefficients"]
    close(*on_times(res, P, "Predictions"), 1e-9)
    assert list(emb.columns[1:5]) == names  # pyEDM's order: lag-major
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
    df = frame(100)
    with pytest.raises(ValueError, match="target 'w' is not a column"):
        pe.simplex(df, target="w", columns="x y", E=2)
    with pytest.raises(ValueError, match="columns index 7 is out of range; allowed: 0..3"):
        pe.smap(df.to_numpy(), columns=[0, 7], E=2, theta=1.0)
    with pytest.raises(ValueError, match="no library rows left"):
        pe.simplex(df, columns="x y", E=2, valid_lib=np.zeros(100, bool))
    with pytest.raises(ValueError, match="knn=90 is out of range"):
        pe.simplex(df, columns="x y", E=2, knn=90, lib=[1, 50])
    with pytest.raises(TypeError, match="x must hold real numbers"):
        pe.simplex(df.assign(s="a"), columns="x s", E=2)
    with pytest.raises(ValueError, match="S-map takes one target"):
        pe.smap(df, target=["x", "y"], columns="x y", E=2, theta=1.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("E,knn,lib,pred", [(3, 150, [1, 300], [301, 399]),  # disjoint
                                            (2, 120, [1, 399], [1, 399]),   # leave-one-out
                                            (66, 0, [1, 300], [301, 399])])  # default E + 1
def test_simplex_knn_beyond_fused_kernel(device, dtype, E, knn, lib, pred):
    """knn above the fused kernel's 64: full sorted distance rows, pyEDM's results."""
    df = frame(400)
    ref = quiet(pyEDM.Simplex, dataFrame=df, columns="x", target="x", lib=lib, pred=pred, E=E,
                knn=knn)
    res = pe.simplex(df["x"].to_numpy(), E=E, knn=knn or None, lib=lib, pred=pred, dtype=dtype,
                     device=device, variance=True)
    assert res.knn == (knn or E + 1) > 64
    close(*on_times(res, ref, "Predictions"), TOL[dtype])
    close(*on_times(res, ref, "Pred_Variance", res.variance), 10 * TOL[dtype])


def test_knn_table_beyond_fused_kernel(device, monkeypatch):
    """knn_table above 64 neighbours: the total order (distance, |p - l|, l) by NumPy.
    The reference sums squares unfused, so the job does too (GPU-only jobs fuse them by
    default, which moves exact ties: docs/decisions/0005)."""
    monkeypatch.setenv("PYEDMCL_FMA", "0")
    x = np.round(lorenz63(150)[:, 0], 1)  # quantised: many exact ties
    idx, dist = pe.knn_table(x, E=2, knn=100, exclusion_radius=3, dtype="float64", device=device)
    P = np.stack([x[:-1], x[1:]], axis=1)
    n = P.shape[0]
    for p in (0, 37, n - 1):
        d = np.sqrt(((P - P[p]) ** 2).sum(1))
        lib = [lv for lv in range(n) if abs(p - lv) > 3]
        want = sorted(lib, key=lambda lv: (d[lv], abs(p - lv), lv))[:100]
        np.testing.assert_array_equal(idx[p], want)
        np.testing.assert_allclose(dist[p], d[want], rtol=1e-15)


def test_embed_dimension_beyond_the_fused_knn():
    """max_E beyond the fused kernels' knn: E 1..32 from the fused scan, E 33..63 from
    one k-NN + lookup + skill pipeline per E, E > 63 one Simplex each (pyEDM prints rho to 6 decimals: the tolerance). Which E take which path
    is host logic; its ~130 programs (two per K = E + 1) took 173 s to build on PoCL and
    67 s on Intel's runtime (36 s on two cores since the scan prebuilds them in parallel;
    PoCL compiles one at a time), so it runs on the CPU runtime that builds fastest (the fused
    scan and the k-NN beyond it run on every platform in their own tests). max_E 70: each
    E above 63 builds its own programs, the same code with another compile-time E."""
    from conftest import FAST_BUILD_CPU

    device = FAST_BUILD_CPU
    x = frame(260)["x"].to_numpy()
    df = pd.DataFrame({"Time": np.arange(1, 261), "x": x})
    ref = quiet(pyEDM.EmbedDimension, dataFrame=df, columns="x", target="x", maxE=70,
                lib=[1, 230], pred=[231, 259], numProcess=1, showPlot=False)
    res = pe.embed_dimension(x, max_E=70, lib=[1, 230], pred=[231, 259], dtype="float64",
                             device=device)
    np.testing.assert_array_equal(res.values, np.arange(1, 71))
    np.testing.assert_allclose(res.rho, ref["rho"], rtol=0, atol=5.1e-7)


KNN_VARIANTS = [
    {"VARIANT": "rows", "WG": 32, "TILE": 64, "QB": 1, "EA": 0, "INS": "reg", "FLAG": 1},
    {"VARIANT": "rows", "WG": 32, "TILE": 64, "QB": 1, "EA": 2, "INS": "reg", "FLAG": 1,
     "SPLIT": 4},
    {"VARIANT": "cols", "WG": 16, "TILE": 32, "QB": 4, "EA": 0, "INS": "reg", "FLAG": 1},
    {"VARIANT": "vec", "WG": 16, "TILE": 64, "QB": 8, "EA": 0, "INS": "reg", "FLAG": 1},
    {"VARIANT": "vec", "WG": 16, "TILE": 64, "QB": 4, "EA": 0, "INS": "reg", "FLAG": 1, "QQ": 2},
]


@pytest.mark.parametrize("real", ["double", "float"])
@pytest.mark.parametrize("params", KNN_VARIANTS, ids=lambda p: f"{p['VARIANT']}-ea{p['EA']}")
def test_knn_variants_read_columns(device, params, real):
    """Every knn variant with NC = 3 columns x 2 lags gives NumPy's table (total order)."""
    from clkernels import get_backend
    from pyedmcl.primitives.knn import knn_device

    be = get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64")
    X = np.round(lorenz63(180), 0)  # integers: exact distances, many ties
    dt = np.float64 if real == "double" else np.float32
    xd = be.to_device(np.ascontiguousarray(X, dtype=dt))
    pts = np.arange(X.shape[0] - 2, dtype=np.int32)  # window p: rows p, p + 2 (tau 2)
    t = knn_device(be, xd, X.shape[0], E=2, tau=2, k=7, qpts=pts, lpts=pts, radius=1, real=real,
                   params={"SPLIT": 1, "QQ": 1, "CB": 0, **params}, nc=3)
    idx = be.to_host(t.idx)[0]
    S = np.concatenate([X[:-2], X[2:]], axis=1)
    for p in range(0, pts.size, 13):
        d = np.sqrt(((S - S[p]) ** 2).sum(1))
        want = sorted((lv for lv in pts if abs(p - lv) > 1), key=lambda lv: (d[lv], abs(p - lv), lv))
        np.testing.assert_array_equal(idx[p], want[:7])


@pytest.mark.parametrize("params", [{"VARIANT": "item", "WG": 2, "PV": 4},
                                    {"VARIANT": "group", "WG": 32, "PV": 1},
                                    {"VARIANT": "group", "WG": 64, "PV": 1, "RB": 3},
                                    {"VARIANT": "gemm", "WG": 32, "PV": 1}],
                         ids=["item", "group", "group-rb3", "gemm"])
@pytest.mark.parametrize("knn", [None, 30])
def test_smap_variants_read_columns(device, params, knn):
    """Every S-map variant with lags of 2 columns (pyEDM's Embed order) gives the NumPy
    least-squares fit of every row (gemm with a neighbour table runs the group variant)."""
    from pyedmcl.edm import smap as S

    X = lorenz63(160)[:, :2]
    lib_t, pred_t = np.arange(2, 120), np.arange(120, 158)
    r = S.smap_core(X, X[:, 0], lib_t, pred_t, E=2, tau=2, Tp=1, thetas=np.array([1.5]),
                    knn=knn, exclusion_radius=0, ridge=0.0, dtype=np.float64, device=device,
                    backend=None, params=params)[0]
    emb = lambda t: np.stack([X[t, 0], X[t, 1], X[t - 2, 0], X[t - 2, 1]], axis=-1)  # noqa: E731
    L = emb(lib_t)
    for i, tp in enumerate(pred_t):
        d = np.sqrt(((L - emb(tp)) ** 2).sum(1))
        nb = np.argsort(d, kind="stable")[:(lib_t.size - 1 if knn is None else knn)]
        w = np.exp(-1.5 * d[nb] / d[nb].mean())
        A = np.column_stack([w, w[:, None] * L[nb]])
        C = np.linalg.lstsq(A, w * X[lib_t[nb] + 1, 0], rcond=None)[0]
        np.testing.assert_allclose(r.coefficients[i], C, rtol=1e-7, atol=1e-9)
        assert r.predicted[i] == pytest.approx(C[0] + C[1:] @ emb(tp), rel=1e-10)


def test_ccm_knn_beyond_fused_kernel(device):
    """CCM with knn above 64 runs through the sorted full-library rows."""
    df = frame(300)
    ref = pyEDM.CCM(dataFrame=df, columns="x y", target="z", E=2, knn=90, libSizes=[120, 250],
                    sample=4, seed=3, parallel=False)
    res = pe.ccm(df, columns="x y", target="z", E=2, knn=90, lib_sizes=[120, 250], sample=4,
                 seed=3, dtype="float64", device=device)
    np.testing.assert_allclose(res.rho_xy, ref["x:z"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.rho_yx, ref["z:x"], rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="knn=400 is out of range"):
        pe.ccm(df["x"].to_numpy(), df["z"].to_numpy(), E=2, knn=400, lib_sizes=[120], device=device)


def test_scans_of_state_spaces(device):
    """EmbedDimension / PredictInterval / PredictNonlinear with several columns (pyEDM
    rounds rho to 6 decimals: 5.1e-7)."""
    df = frame(260)
    kw = dict(lib=[1, 180], pred=[181, 250], numProcess=1, showPlot=False)
    ref = quiet(pyEDM.EmbedDimension, dataFrame=df, columns="x y", target="z", maxE=4, **kw)
    r = pe.embed_dimension(df, "z", columns="x y", max_E=4, lib=[1, 180], pred=[181, 250],
                           dtype="float64", device=device)
    np.testing.assert_allclose(r.rho, ref["rho"], rtol=0, atol=5.1e-7)
    ref = quiet(pyEDM.PredictInterval, dataFrame=df, columns="x y", target="z", E=2, maxTp=4,
                **kw)
    r = pe.predict_interval(df, "z", columns="x y", E=2, max_Tp=4, lib=[1, 180],
                            pred=[181, 250], dtype="float64", device=device)
    np.testing.assert_allclose(r.rho, ref["rho"], rtol=0, atol=5.1e-7)
    ref = quiet(pyEDM.PredictNonlinear, dataFrame=df, columns="x y z", target="x", E=3,
                embedded=True, theta=[0.5, 2.0, 4.0], **kw)
    r = pe.predict_nonlinear(df, "x", columns="x y z", embedded=True, thetas=[0.5, 2.0, 4.0],
                             lib=[1, 180], pred=[181, 250], dtype="float64", device=device)
    np.testing.assert_allclose(r.rho, ref["rho"], rtol=0, atol=5.1e-7)


def test_oclgrind_clean():
    """The NC > 1 kernels (every knn variant, the sorted rows, both S-map variants) make
    no invalid access, race or uninitialised read (tiny sizes)."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from clkernels import get_backend
        from pyedmcl.edm import smap as S
        from pyedmcl.primitives.knn import knn_device, knn_rows_sorted
        be = get_backend()
        t = np.arange(50)
        X = np.stack([np.sin(t * 0.7), np.cos(t * 1.3), np.sin(t * 0.3 + 1)], axis=1)
        xd = be.to_device(np.ascontiguousarray(X, dtype=np.float32))
        pts = np.arange(46, dtype=np.int32)
        for params in (dict(VARIANT="rows", WG=8, TILE=16, QB=1, EA=2, INS="reg", FLAG=1, SPLIT=2),
                       dict(VARIANT="cols", WG=8, TILE=16, QB=4, EA=2, INS="local", FLAG=0),
                       dict(VARIANT="vec", WG=8, TILE=16, QB=4, EA=0, INS="reg", FLAG=1, QQ=2)):
            tb = knn_device(be, xd, 50, E=3, tau=2, k=3, qpts=pts, lpts=pts, radius=0,
                            params={"SPLIT": 1, "QQ": 1, "CB": 0, **params}, nc=3)
            print(params["VARIANT"], be.to_host(tb.idx)[0, :2].tolist())
        print("sorted", knn_rows_sorted(be, xd, 50, E=3, tau=2, k=70, qpts=pts[:5], lpts=pts,
                                        radius=0, nc=3)[0][:, :3].tolist())
        for params in ({"VARIANT": "item", "WG": 2, "PV": 2}, {"VARIANT": "group", "WG": 32, "PV": 1}):
            r = S.smap_core(X[:, :2], X[:, 2], np.arange(2, 35), np.arange(35, 48), E=2, tau=1,
                            Tp=1, thetas=np.array([2.0]), knn=None, exclusion_radius=0,
                            ridge=0.0, dtype=np.float32, device=be, backend=None, params=params)[0]
            print("smap", params["VARIANT"], r.coefficients.shape)
    """)
    assert out.count("smap") == 2 and "sorted" in out
