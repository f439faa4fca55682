"""compat.pyedm's general path (multivariate, embedded, NaN, validLib, generateSteps,
Multiview, S-map solvers, CCM) against pyEDM on data and settings pyEDM's own tests
do not use.

Both run in float64 (compat's default) on the same frames. Tolerance 1e-9 absolute
on predictions, coefficients and rho: the same float64 arithmetic on distances
recomputed as pyEDM computes them. Distance ties (decided in scipy KDTree's order, as
pyEDM) are tested on quantised data in test_compat_ties.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyedmcl as pe
import pyedmcl.compat.pyedm as EDM

pyEDM = pytest.importorskip("pyEDM")
TOL = 1e-9


def _ref(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _same(a: pd.DataFrame, b: pd.DataFrame, cols):
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for c in cols:
        np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), atol=TOL,
                                   rtol=0, equal_nan=True, err_msg=c)


@pytest.fixture(scope="module")
def lorenz():
    return pyEDM.sampleData["Lorenz5D"].iloc[:400].copy()


def test_simplex_multivariate_and_nan(lorenz, device):
    d = lorenz.copy()
    d.iloc[[20, 21, 150], 2] = np.nan
    d.iloc[[90], 4] = np.nan
    kw = dict(columns="V2 V4", target="V3", lib="1 200", pred="201 390", E=3, Tp=2, tau=-2,
              exclusionRadius=3)
    _same(_ref(pyEDM.Simplex, d, **kw), _ref(EDM.Simplex, d, device=device, **kw),
          ["Time", "Observations", "Predictions", "Pred_Variance"])


def test_simplex_embedded_valid_lib_object(lorenz, device):
    valid = (lorenz["V1"] > -5).to_numpy()
    kw = dict(columns=["V1", "V3", "V5"], target="V2", lib=[1, 300], pred=[250, 390], knn=6,
              embedded=True, validLib=valid, returnObject=True)
    a, b = _ref(pyEDM.Simplex, lorenz, **kw), _ref(EDM.Simplex, lorenz, device=device, **kw)
    np.testing.assert_array_equal(a.knn_neighbors, b.knn_neighbors)
    np.testing.assert_allclose(a.knn_distances, b.knn_distances, atol=TOL, rtol=0)
    np.testing.assert_array_equal(a.pred_i, b.pred_i)
    assert a.libOverlap == b.libOverlap
    _same(a.Projection, b.Projection, ["Predictions", "Pred_Variance"])


@pytest.mark.parametrize("solver", [None, "Ridge"])
def test_smap_embedded_coefficients_and_solver(lorenz, solver, device):
    if solver is not None:
        sk = pytest.importorskip("sklearn.linear_model")
        solver = getattr(sk, solver)(alpha=0.05)
    kw = dict(columns="V1 V2 V4", target="V1", lib="1 250", pred="260 330", E=3, theta=2.5,
              embedded=True, solver=solver)
    a, b = _ref(pyEDM.SMap, lorenz, **kw), _ref(EDM.SMap, lorenz, device=device, **kw)
    _same(a["predictions"], b["predictions"], ["Observations", "Predictions"])
    _same(a["coefficients"], b["coefficients"], list(a["coefficients"].columns[1:]))


EMBEDDED_SMAP = [
    dict(columns="V1 V2 V3", target="V1", lib="1 200", pred="201 400"),
    dict(columns="V1 V2", target="V3", lib="1 400", pred="1 400"),
    dict(columns="V1 V2 V3", target="V2", lib="1 200", pred="150 400", Tp=2),
    dict(columns="V1 V2 V3", target="V1", lib="1 100 200 300", pred="90 220", knn=12),
    dict(columns="V1 V3", target="V1", lib="1 400", pred="1 400", exclusionRadius=3),
    dict(columns="V1 V2 V3", target="V1", lib="1 200", pred="201 400", Tp=0),
    dict(columns="V2", target="V1", lib="1 200", pred="201 400"),
]


@pytest.mark.parametrize("decimals", [None, 1], ids=["raw", "rounded"])
@pytest.mark.parametrize("case", range(len(EMBEDDED_SMAP)))
def test_embedded_smap_on_the_fused_path(lorenz, device, monkeypatch, case, decimals):
    """A plain ``embedded=True`` S-map (no NaN, validLib, solver, generateSteps or
    returnObject; Tp >= 0) runs pyedmcl's fused solver, the general path patched to fail:
    pyEDM's frames (the same columns and rows); normwise, predictions and variances within
    1e-9 of the frame's largest value (measured 2e-12 / 7e-12), coefficients within 1e-8
    of the largest coefficient (measured 3.4e-10), on raw data and rounded to one decimal (ties at the knn cut and the farthest
    point, decided by pyEDM's tree). Singular values are NaN there, as on the univariate
    fused path."""
    d = lorenz if decimals is None else lorenz.round(decimals)
    kw = dict(E=3, theta=2.0, embedded=True, **{"Tp": 1, **EMBEDDED_SMAP[case]})
    a = _ref(pyEDM.SMap, d, **kw)
    for name in ("_run",):
        monkeypatch.setattr(EDM, name, lambda *x, **k: pytest.fail("the general path ran"))
    b = _ref(EDM.SMap, d, device=device, **kw)
    for key, tol in (("predictions", 1e-9), ("coefficients", 1e-8)):
        assert list(a[key].columns) == list(b[key].columns) and len(a[key]) == len(b[key])
        np.testing.assert_array_equal(a[key]["Time"], b[key]["Time"])
        scale = np.nanmax(np.abs(a[key].iloc[:, 1:].to_numpy(float)))  # normwise
        for c in a[key].columns[1:]:
            x, y = a[key][c].to_numpy(float), b[key][c].to_numpy(float)
            np.testing.assert_allclose(y, x, atol=tol * scale, rtol=0, equal_nan=True,
                                       err_msg=f"{key}.{c}")
    assert b["singularValues"].iloc[:, 1:].isna().all().all()


def test_generate_steps_match(device):
    d = pyEDM.sampleData["circleNoise"]
    for fn, extra in ((pyEDM.Simplex, {}), (pyEDM.SMap, {"theta": 2.0})):
        kw = dict(columns="x", target="x", lib=[1, 150], pred=[1, 2], E=3, generateSteps=12,
                  generateConcat=False, **extra)
        a = _ref(fn, d, **kw)
        b = _ref(getattr(EDM, fn.__name__), d, device=device, **kw)
        a, b = (a, b) if fn is pyEDM.Simplex else (a["predictions"], b["predictions"])
        _same(a, b, ["Time", "Predictions", "Pred_Variance"])


def test_multiview_matches(lorenz, device):
    kw = dict(columns="V1 V3 V4", target="V3", lib=[1, 200], pred=[201, 320], D=3, E=2,
              Tp=1, trainLib=False, numProcess=1)
    a, b = _ref(pyEDM.Multiview, lorenz, **kw), _ref(EDM.Multiview, lorenz, device=device, **kw)
    assert list(a["View"]["Columns"]) == list(b["View"]["Columns"])
    _same(a["View"], b["View"], ["rho", "MAE", "RMSE"])
    _same(a["Predictions"], b["Predictions"], ["Observations", "Predictions"])


def test_multiview_exclude_target(lorenz, device):
    """``excludeTarget=True`` leaves the target's lags out of every view (pyEDM 2.5.7's
    test never matches, so its views keep them: a documented difference); each view still
    predicts the target, as pyEDM's Simplex on that view's embedded columns does."""
    kw = dict(columns="V1 V3 V4", target="V3", lib=[1, 200], pred=[201, 320], D=2, E=2,
              Tp=1, trainLib=False, numProcess=1, excludeTarget=True)
    obj = _ref(EDM.Multiview, lorenz, device=device, returnObject=True, **kw)
    views = list(obj.View["Columns"])
    assert views and all(len(v) == 2 and not any(c.startswith("V3(") for c in v) for v in views)
    emb = pyEDM.Embed(dataFrame=lorenz, E=2, tau=-1, columns="V1 V3 V4")
    emb.insert(0, "Time", lorenz["Time"].to_numpy())
    for view, proj in obj.topRankProjections.items():
        ref = _ref(pyEDM.Simplex, emb, columns=" ".join(view), target="V3(t-0)", lib=[1, 200],
                   pred=[201, 320], E=2, Tp=1, embedded=True)
        np.testing.assert_allclose(proj["Predictions"].to_numpy(float),
                                   ref["Predictions"].to_numpy(float), atol=TOL, equal_nan=True)
    with pytest.raises(ValueError, match="excludeTarget=True leaves no columns"):
        EDM.Multiview(dataFrame=lorenz, columns="V3", target="V3", lib=[1, 200], pred=[201, 320],
                      D=1, E=2, trainLib=False, excludeTarget=True, device=device)
    with pytest.warns(UserWarning, match="D set to 4"):  # 4 lags left of V1 and V4
        EDM.Multiview(dataFrame=lorenz, columns="V1 V3 V4", target="V3", lib=[1, 200],
                      pred=[201, 320], D=5, E=2, trainLib=False, excludeTarget=True, device=device)


def test_multiview_single_view(lorenz, device):
    """One view (pyEDM 2.5.7 fails there in pandas: "No axis named 1"): the average is
    that view's prediction."""
    kw = dict(columns="V1 V3", target="V3", lib=[1, 200], pred=[201, 320], D=2, E=1,
              trainLib=False, numProcess=1)
    obj = _ref(EDM.Multiview, lorenz, device=device, returnObject=True, **kw)
    (proj,) = obj.topRankProjections.values()
    np.testing.assert_array_equal(obj.Projection["Predictions"].to_numpy(float),
                                  proj["Predictions"].to_numpy(float))


@pytest.mark.parametrize("fn", ["Simplex", "SMap", "EmbedDimension"])
def test_ignore_nan_false_as_pyedm(device, fn):
    """``ignoreNan=False``: pyEDM refuses the first rows' partial lags in ``pred``, and
    compat does too (its fast path answered); rows past them give pyEDM's results."""
    x = np.sin(np.arange(100) * 0.7) + 0.2 * np.cos(np.arange(100) * 1.3)
    d = pd.DataFrame({"Time": np.arange(1, 101), "x": x})
    kw = dict(columns="x", target="x", lib="1 50", ignoreNan=False)
    kw.update({"Simplex": dict(E=3), "SMap": dict(E=3, theta=1.0),
               "EmbedDimension": dict(maxE=4, showPlot=False)}[fn])
    with pytest.raises(ValueError):
        _ref(getattr(pyEDM, fn), d, pred="1 90", **kw)
    with pytest.raises(ValueError, match="ignoreNan"):
        _ref(getattr(EDM, fn), d, pred="1 90", device=device, **kw)
    a = _ref(getattr(pyEDM, fn), d, pred="10 90", **kw)
    b = _ref(getattr(EDM, fn), d, pred="10 90", device=device, **kw)
    a, b = (a["predictions"], b["predictions"]) if fn == "SMap" else (a, b)
    _same(a, b, list(a.columns))


@pytest.mark.parametrize("fn, extra", [
    ("PredictInterval", dict(E=2, maxTp=6)), ("EmbedDimension", dict(maxE=4, Tp=4)),
    ("PredictExclusionRadius", dict(E=2, Tp=4)), ("PredictNonlinear", dict(E=2, Tp=4, theta="1 2"))])
def test_scans_rho_nan_below_five_pairs(device, fn, extra):
    """A scan value whose table holds fewer than 5 observed predictions has rho NaN, as
    pyEDM's ComputeError gives (the fused scans returned a rho from 2-4 pairs)."""
    x = np.empty(100)
    x[0] = 0.3
    for i in range(1, 100):
        x[i] = 3.9 * x[i - 1] * (1 - x[i - 1])
    d = pd.DataFrame({"Time": np.arange(1, 101), "x": x})
    kw = dict(columns="x", target="x", lib="1 90", pred="93 99", **extra)
    a = _ref(getattr(pyEDM, fn), d, showPlot=False, numProcess=1, **kw)["rho"].to_numpy(float)
    b = _ref(getattr(EDM, fn), d, device=device, **kw)["rho"].to_numpy(float)
    assert np.isnan(a).any()
    np.testing.assert_allclose(b, a, atol=1.01e-6, rtol=0, equal_nan=True)


@pytest.mark.parametrize("decimals", [None, 1], ids=["untied", "tied"])
@pytest.mark.parametrize("fn", ["Simplex", "SMap"])
def test_lib_and_pred_required_as_pyedm(device, fn, decimals):
    """pyEDM refuses a Simplex or S-map call without ``lib`` (or ``pred``); compat did only
    on tied data (pyEDM's bookkeeping) and took the whole series on the fused path."""
    v = np.sin(np.arange(200) * 0.37)
    d = pd.DataFrame({"Time": np.arange(1, 201), "x": v if decimals is None else np.round(v, 1)})
    kw = dict(columns="x", target="x", E=3, **({"theta": 2.0} if fn == "SMap" else {}))
    for missing, given in (("lib", dict(pred="101 190")), ("pred", dict(lib="1 100"))):
        with pytest.raises(ValueError, match=f"{missing} required"):
            _ref(getattr(pyEDM, fn), d, **kw, **given)
        with pytest.raises(ValueError, match=f"{missing} required"):
            _ref(getattr(EDM, fn), d, device=device, **kw, **given)


def test_no_prediction_rows_as_pyedm(device):
    """``pred`` in the last rows with pyEDM's ``tau > 0`` (future lags): no row has a full
    embedding for E = 4. pyEDM answers an empty table, and NaN skill for those E in a scan;
    compat did not answer (the fused path's message also said "first rows")."""
    x = np.sin(np.arange(100) * 0.37) + 0.3 * np.sin(np.arange(100) * 1.3)
    d = pd.DataFrame({"Time": np.arange(1, 101), "x": x})
    kw = dict(columns="x", target="x", lib="1 80", pred="95 100", tau=2, Tp=0)
    a = _ref(pyEDM.Simplex, d, E=4, **kw)
    b = _ref(EDM.Simplex, d, E=4, device=device, **kw)
    assert len(a) == len(b) == 0 and list(a.columns) == list(b.columns)
    a = _ref(pyEDM.EmbedDimension, d, maxE=4, showPlot=False, numProcess=1, **kw)
    b = _ref(EDM.EmbedDimension, d, maxE=4, device=device, **kw)
    assert np.isnan(a["rho"].to_numpy(float)[1:]).all()
    _same(a, b, ["E", "rho"])
    from pyedmcl.primitives.ranges import NoPredictionRows
    with pytest.raises(NoPredictionRows, match="the last 6 rows"):
        pe.simplex(x, E=4, tau=-2, Tp=0, lib=[1, 80], pred=[95, 100], device=device)


def test_ccm_multivariate_matches(lorenz, device):
    kw = dict(columns="V2 V4", target="V1", libSizes=[30, 150, 300], sample=6, E=2, Tp=1,
              tau=-2, seed=5)
    a = _ref(pyEDM.CCM, lorenz, parallel=False, **kw)
    b = _ref(EDM.CCM, lorenz, device=device, **kw)
    _same(a, b, list(a.columns))


def test_scans_on_the_general_path(lorenz, device):
    d = lorenz.copy()
    d.iloc[[30, 31, 222], 1] = np.nan
    valid = (lorenz["V2"] > -4).to_numpy()
    common = dict(lib="1 200", pred="201 380", showPlot=False, numProcess=1)
    cases = [
        ("EmbedDimension", dict(columns="V1", target="V2", maxE=4)),
        ("PredictInterval", dict(columns="V1 V4", target="V2", maxTp=3, E=2, validLib=valid)),
        ("PredictExclusionRadius", dict(columns="V1 V3", target="V2", E=2,
                                        exclusionRadius=[0, 4, 12])),
        ("PredictNonlinear", dict(columns="V1 V3", target="V1", theta=[0.5, 3], E=2,
                                  embedded=True)),
    ]
    for name, kw in cases:
        ref = _ref(getattr(pyEDM, name), d, **common, **kw)
        got = _ref(getattr(EDM, name), d, device=device, **common, **kw)
        _same(ref, got, list(ref.columns))


@pytest.mark.parametrize("method", ["random_shuffle", "ebisuzaki", "seasonal"])
def test_surrogate_data_properties(method):
    """Random draws (pyEDM's are unseeded): same frame layout as pyEDM, the properties
    each method promises (a permutation; the amplitude spectrum up to one common scale,
    1e-6, and the standard deviation, 1e-7; a trend plus noise of about the
    data's spread), and reproducible with ``seed``."""
    if method == "seasonal":
        pytest.importorskip("scipy")
    d = pyEDM.sampleData["circleNoise"]
    got = EDM.SurrogateData(d, "x", method=method, numSurrogates=3, seed=4)
    ref = _ref(pyEDM.SurrogateData, d, "x", method=method, numSurrogates=3)
    assert list(got.columns) == list(ref.columns) and got.shape == ref.shape
    pd.testing.assert_frame_equal(got, EDM.SurrogateData(d, "x", method=method,
                                                         numSurrogates=3, seed=4))
    x = d["x"].to_numpy()
    s = got["x_1"].to_numpy()
    if method == "random_shuffle":
        np.testing.assert_array_equal(np.sort(s), np.sort(x))
    elif method == "ebisuzaki":
        np.testing.assert_allclose(np.std(s), np.std(x), rtol=1e-7)
        # frequencies 2..98: pyEDM redraws the last FFT term (index n-1, the partner of
        # frequency 1) instead of the Nyquist term; compat keeps pyEDM's surrogates
        amp_s, amp_x = np.abs(np.fft.fft(s))[2:99], np.abs(np.fft.fft(x))[2:99]
        ratio = amp_s / amp_x
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-6)  # one common scale
    else:
        assert 0.5 < np.std(s) / np.std(x) < 3
    with pytest.raises(RuntimeError, match="Embed"):
        EDM.MakeBlock(d, E=2)


def test_crossmap_matrix_matches_pyedm(lorenz, device):
    """pyEDM's CrossMap_Matrix is N*N pyEDM Simplex calls + ComputeError (its code, run
    here without its process pool); compat's rows are one device Simplex each."""
    d = lorenz[["Time", "V1", "V2", "V4"]].iloc[:250]
    cols = ["V1", "V2", "V4"]
    Es = [2, 3, 2]
    ref = np.full((3, 3), np.nan)
    for j, c in enumerate(cols):
        for i, t in enumerate(cols):
            if i != j:
                df = _ref(pyEDM.Simplex, d, columns=c, target=t, lib=[1, 250], pred=[1, 250],
                          E=Es[i], Tp=1, tau=-1)
                ref[j, i] = pyEDM.ComputeError(df["Observations"], df["Predictions"])["rho"]
    got = EDM.CrossMap_Matrix(d, E=Es, device=device)
    np.testing.assert_allclose(got, ref, atol=1.01e-6, equal_nan=True)  # both 6-digit rho


@pytest.mark.parametrize("firstMax", [False, True])
def test_embeddim_columns_matches_pyedm(lorenz, firstMax, device):
    from pyEDM.apps.EmbedDim_Columns import _ColumnSweep

    d = lorenz[["Time", "V1", "V3"]].iloc[:300]
    params = dict(minE=1, maxE=5, lib=[1, 300], pred=[1, 300], Tp=1, tau=-1,
                  exclusionRadius=0, validLib=[], noTime=False, ignoreNan=True,
                  firstMax=firstMax)
    ref = [_ref(_ColumnSweep, (i, c, c, d[["Time", c]], params))[1:]
           for i, c in enumerate(["V1", "V3"])]  # pyEDM's per-column worker, no pool
    got = EDM.EmbedDim_Columns(d, maxE=5, firstMax=firstMax, device=device)
    assert [tuple(r) for r in got[["column", "target", "E"]].to_numpy()] == [r[:3] for r in ref]
    np.testing.assert_allclose(got["rho"].to_numpy(float), [r[3] for r in ref], atol=1e-6)


def test_simplex_knn_beyond_the_fused_kernel(lorenz, device):
    kw = dict(columns="V1", target="V1", lib="1 250", pred="251 380", E=3, knn=100)
    _same(_ref(pyEDM.Simplex, lorenz, **kw), _ref(EDM.Simplex, lorenz, device=device, **kw),
          ["Time", "Observations", "Predictions", "Pred_Variance"])


def _frame(n: int) -> pd.DataFrame:
    d = pyEDM.sampleData["Lorenz5D"].iloc[:n].copy().reset_index(drop=True)
    d["Time"] = np.arange(1, n + 1)
    return d


@pytest.mark.parametrize("n, kw", [
    (182, dict(columns="V1", target="V2", E=6, tau=-2, Tp=0, exclusionRadius=3, lib="61 108",
               pred="25 178", knn=7, theta=0.5)),  # knn = E + 1: a square system
    (540, dict(columns="V3", target="V2", E=3, tau=-1, Tp=0, exclusionRadius=3, lib="13 88",
               pred="128 523", knn=3, theta=0.5)),  # knn < E + 1: minimum norm
], ids=["square", "underdetermined"])
def test_smap_few_neighbours_as_pyedm(device, n, kw):
    """S-map rows with no more neighbours than coefficients take pyEDM's SVD answer: the
    device's normal equations passed their pivot test on some of them and gave another
    (predictions 73 and 2.8 off in these cases, found by random settings)."""
    d = _frame(n)
    a, b = _ref(pyEDM.SMap, d, **kw), _ref(EDM.SMap, d, device=device, **kw)
    _same(a["predictions"], b["predictions"], ["Time", "Observations", "Predictions"])


@pytest.mark.parametrize("pred, Tp", [("31 35 36 40", 1), ("31 35 37 40", 2)],
                         ids=["touching", "gap_below_tp"])
def test_smap_coefficients_of_adjacent_prediction_segments(device, pred, Tp):
    """Two prediction segments whose output windows touch (or overlap with a gap below
    Tp) repeat a time; the later segment's first row is padding (NaN), coefficients too,
    as in pyEDM (they took the earlier segment's last coefficients)."""
    x = np.sin(np.arange(60) * 0.7) + 0.3 * np.sin(np.arange(60) * 1.9)
    d = pd.DataFrame({"Time": np.arange(1, 61), "x": x})
    kw = dict(columns="x", target="x", lib="1 30", pred=pred, E=2, Tp=Tp, theta=2)
    a, b = _ref(pyEDM.SMap, d, **kw), _ref(EDM.SMap, d, device=device, **kw)
    _same(a["predictions"], b["predictions"], ["Time", "Observations", "Predictions"])
    _same(a["coefficients"], b["coefficients"], list(a["coefficients"].columns))
    assert a["coefficients"].iloc[:, 1:].isna().any(axis=1).sum() >= 2


def test_simplex_observations_past_the_end_as_pyedm(device):
    """pyEDM shows the Tp rows after a pred segment's end observed only if all of them are
    in the data: pred ending 1 row before the end with Tp = 3 leaves all three NaN."""
    d = _frame(433)
    for pred, Tp in (("411 432", 3), ("411 430", 3), ("10 40", -3)):
        kw = dict(columns="V1", target="V4", E=3, tau=-1, Tp=Tp, lib="89 262", pred=pred)
        _same(_ref(pyEDM.Simplex, d, **kw), _ref(EDM.Simplex, d, device=device, **kw),
              ["Time", "Observations", "Predictions", "Pred_Variance"])


def test_library_too_short_for_the_embedding_refused_as_pyedm(device):
    """An embedding span |tau| (E - 1) + Tp longer than the library rows left: pyEDM
    refuses (CreateIndices), and so does the fast path now, with pyEDM's message."""
    d = _frame(491)
    kw = dict(columns="V3", target="V1", E=6, tau=-2, Tp=3, exclusionRadius=2, lib="96 121",
              pred="464 482", knn=1)
    for fn in ("Simplex", "SMap"):
        extra = {"theta": 1.0} if fn == "SMap" else {}
        with pytest.raises(ValueError, match="is invalid for the library") as ref:
            _ref(getattr(pyEDM, fn), d, **kw, **extra)
        with pytest.raises(ValueError) as got:
            _ref(getattr(EDM, fn), d, device=device, **kw, **extra)
        assert str(got.value) == str(ref.value)


def test_scans_on_the_fast_path_as_pyedm(device):
    """The fast path's scans give pyEDM's frames to 1e-9: rho rounded to 6 decimals as
    pyEDM's ComputeError does, and with a pred segment ending within Tp rows of the
    data's end its last Tp predictions left out of the skill (pyEDM shows them without
    observations): the core's skill follows that rule too (pyedmcl.primitives.ranges.observed)."""
    d = _frame(249)
    common = dict(lib="1 124", pred="125 248", tau=-2, showPlot=False, numProcess=1)
    cases = [("EmbedDimension", dict(columns="V3", target="V1", maxE=7, Tp=2)),
             ("PredictInterval", dict(columns="V1", target="V2", maxTp=4, E=1)),
             ("PredictNonlinear", dict(columns="V3", target="V2", E=4, Tp=2))]
    for name, kw in cases:
        ref = _ref(getattr(pyEDM, name), d, **common, **kw)
        got = _ref(getattr(EDM, name), d, device=device, **common, **kw)
        _same(ref, got, list(ref.columns))


def test_negative_tp_before_the_data_start_keeps_each_prediction_at_its_time(device):
    """One of two places compat does not copy pyEDM: a negative Tp whose first prediction
    lies before the data's first row (pred_i[0] + Tp < 0). pyEDM 2.5.7 then shifts its
    predictions against its Time and Observations by pred_i[0] rows (here E = 3: the
    prediction made at Time 3 for Time 0 stands at Time 2), so its skill pairs each
    prediction with another time's observation. compat keeps every prediction at time
    p + Tp, as every other Tp: the same prediction values, two rows more."""
    n = 60
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"Time": np.arange(1, n + 1),
                      "x": np.sin(np.arange(n) * 0.4) + 0.1 * rng.standard_normal(n)})
    kw = dict(columns="x", target="x", lib="1 60", pred="1 30", E=3, Tp=-3)
    ref, got = _ref(pyEDM.Simplex, d, **kw), _ref(EDM.Simplex, d, device=device, **kw)
    pred_ref = ref["Predictions"].to_numpy(float)
    pred_got = got["Predictions"].to_numpy(float)
    np.testing.assert_allclose(pred_got[~np.isnan(pred_got)], pred_ref[~np.isnan(pred_ref)],
                               atol=TOL, rtol=0)
    assert ref["Time"].iloc[0] == 2 and got["Time"].iloc[0] == 0  # pyEDM's shift
    # compat: the prediction made from Time t (rows 3 .. 30) stands at Time t - 3, and each
    # row's observation is the data at its time
    times = got["Time"].to_numpy()
    made = np.flatnonzero(~np.isnan(pred_got))
    assert times[made].tolist() == list(range(0, 28))
    inside = (times >= 1) & (times <= 30)
    np.testing.assert_array_equal(got["Observations"].to_numpy(float)[inside],
                                  d["x"].to_numpy()[times[inside].astype(int) - 1])
    assert np.isnan(got["Observations"].to_numpy(float)[~inside]).all()


def test_negative_tp_library_targets_before_the_data_left_out(device):
    """The other place compat does not copy pyEDM 2.5.7: with a negative Tp and no lag
    before the first row (E = 1, or pyEDM's tau > 0), pyEDM's library keeps row
    |Tp| - 1, whose target lies before the first row, and reads the series' last value
    there (a negative index wraps around). compat leaves the row out: its table is
    pyEDM's for the library without it (lib starting at 2)."""
    n = 95
    rng = np.random.default_rng(2)
    for Tp in (-1, -2, -3):
        d = pd.DataFrame({"Time": np.arange(1, n + 1), "x": rng.standard_normal(n).cumsum(),
                          "y": rng.standard_normal(n)})
        d.loc[n - 1, "y"] = 50.0  # what pyEDM's wrapped index reads
        wrapped_row = -Tp - 1  # made the nearest neighbour of pred row 30
        d.loc[wrapped_row, "x"] = d.loc[30, "x"] + 1e-6
        kw = dict(columns="x", target="y", E=1, tau=-1, Tp=Tp, pred="15 63")
        got = _ref(EDM.Simplex, d, device=device, lib="1 92", **kw)
        _same(_ref(pyEDM.Simplex, d, lib="2 92", **kw), got,
              ["Time", "Observations", "Predictions", "Pred_Variance"])
        assert got["Predictions"].max() < 49.0
        assert _ref(pyEDM.Simplex, d, lib="1 92", **kw)["Predictions"].max() > 49.0
        # future lags (pyEDM's tau > 0) leave the first rows in the library too
        kw.update(E=3, tau=1)
        _same(_ref(pyEDM.Simplex, d, lib="2 92", **kw),
              _ref(EDM.Simplex, d, device=device, lib="1 92", **kw),
              ["Time", "Observations", "Predictions", "Pred_Variance"])
    # the scans' skill comes from such tables: pyEDM's for the library one row later
    kw = dict(columns="x", target="y", maxE=4, tau=1, Tp=-1, pred="40 90")
    ref = _ref(pyEDM.EmbedDimension, d, lib="2 60", showPlot=False, numProcess=1, **kw)
    got = _ref(EDM.EmbedDimension, d, lib="1 60", device=device, **kw)
    np.testing.assert_allclose(got["rho"], ref["rho"], atol=1e-6, rtol=0)
    wrapped = _ref(pyEDM.EmbedDimension, d, lib="1 60", showPlot=False, numProcess=1, **kw)
    assert np.abs(wrapped["rho"].to_numpy() - got["rho"].to_numpy()).max() > 1e-3
