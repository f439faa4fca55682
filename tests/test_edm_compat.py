"""pyedmcl.compat.pyedm against pyEDM, called with identical arguments (pyEDM's tau sign).

Tolerances as in test_edm_simplex: rho 1e-5, predictions 1e-4 relative with an
absolute floor of 1e-6 * max|target| (float32 data).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyedmcl.compat.pyedm as EDM

pyEDM = pytest.importorskip("pyEDM")


def _frame_close(ref: pd.DataFrame, got: pd.DataFrame, cols, scale=1.0):
    assert list(got.columns)[:len(ref.columns)] == list(ref.columns)
    assert len(got) == len(ref)
    for c in cols:
        np.testing.assert_allclose(got[c].to_numpy(float), ref[c].to_numpy(float), rtol=1e-4,
                                   atol=1e-6 * scale, equal_nan=True, err_msg=c)


SIMPLEX_CASES = [
    dict(data="block_3sp", columns="x_t", target="y_t", lib="1 100", pred="101 195", E=3),
    dict(data="block_3sp", columns="x_t", target="x_t", lib="1 100", pred="150 198", E=3, Tp=3),
    dict(data="circle", columns="x", target="y", lib="1 100", pred="101 198", E=2, tau=-2),
    dict(data="TentMap", columns="TentMap", target="TentMap", lib="1 100 201 300",
         pred="120 180 350 400", E=2, Tp=2),
    dict(data="Lorenz5D", columns="V1", target="V1", lib="1 500", pred="501 990", E=4, Tp=-2),
    dict(data="Lorenz5D", columns="V1", target="V2", lib="1 500", pred="501 990", E=3, tau=2),
    dict(data="sardine_anchovy_sst", columns="anchovy", target="np_sst", lib="1 78",
         pred="1 78", E=3, exclusionRadius=2),
]


@pytest.mark.parametrize("case", SIMPLEX_CASES, ids=[f"{c['data']}-{i}" for i, c in enumerate(SIMPLEX_CASES)])
def test_simplex_frames_match(case, device):
    kw = dict(case)
    df = pyEDM.sampleData[kw.pop("data")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyEDM.Simplex(dataFrame=df, **kw)
    got = EDM.Simplex(dataFrame=df, device=device, **kw)
    _frame_close(ref, got, ["Time", "Observations", "Predictions", "Pred_Variance"],
                 scale=float(np.abs(df[kw["target"]]).max() ** 2))
    e1 = pyEDM.AuxFunc.ComputeError(ref["Observations"], ref["Predictions"])
    e2 = EDM.ComputeError(got["Observations"], got["Predictions"])
    assert abs(e1["rho"] - e2["rho"]) < 1e-5


def test_ccm_frames_match(device):
    df = pyEDM.sampleData["sardine_anchovy_sst"]
    kw = dict(dataFrame=df, columns="anchovy", target="np_sst", libSizes="10 70 10", sample=25,
              E=3, Tp=0, seed=11, includeData=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyEDM.CCM(parallel=False, **kw)
    got = EDM.CCM(device=device, **kw)
    assert list(got.columns) == list(ref.columns)
    for c in ref.columns:
        np.testing.assert_allclose(got[c], ref[c], atol=1e-5, err_msg=c)


def test_scans_frames_match(device):
    df = pyEDM.sampleData["block_3sp"]
    base = dict(dataFrame=df, columns="x_t", target="x_t", lib="1 100", pred="101 198",
                showPlot=False, numProcess=1)
    for fn, extra in (("EmbedDimension", dict(maxE=6)), ("PredictInterval", dict(maxTp=4, E=3)),
                      ("PredictExclusionRadius", dict(E=3, exclusionRadius=[0, 2, 5]))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = getattr(pyEDM, fn)(**base, **extra)
        got = getattr(EDM, fn)(**base, **extra, device=device)
        assert list(got.columns) == list(ref.columns)
        np.testing.assert_allclose(got.iloc[:, 0], ref.iloc[:, 0])
        np.testing.assert_allclose(got["rho"], ref["rho"], atol=1e-5, err_msg=fn)


def test_embed_matches():
    df = pyEDM.sampleData["circle"]
    for tau in (-1, -2, 2):
        ref = pyEDM.Embed(dataFrame=df, E=3, tau=tau, columns="x y")
        got = EDM.Embed(dataFrame=df, E=3, tau=tau, columns="x y")
        assert sorted(got.columns) == sorted(ref.columns)
        pd.testing.assert_frame_equal(got[ref.columns], ref, check_dtype=False)


def test_bad_columns_are_named():
    df = pyEDM.sampleData["block_3sp"]
    with pytest.raises(ValueError, match="columns required"):
        EDM.Multiview(dataFrame=df)
    with pytest.raises(ValueError, match="not found"):
        EDM.Simplex(dataFrame=df, columns="x_t nope", target="x_t", lib="1 100", pred="101 190", E=2)
    with pytest.raises(ValueError, match="not found"):
        EDM.Simplex(dataFrame=df, columns="nope", target="x_t", lib="1 100", pred="101 190", E=2)


def test_smap_and_predict_nonlinear_frames_match(device):
    pytest.importorskip("pyedmcl.edm.smap")
    df = pyEDM.sampleData["circle"]
    kw = dict(dataFrame=df, columns="x", target="x", lib="1 100", pred="101 198", E=2, theta=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyEDM.SMap(**kw)
        ref_nl = pyEDM.PredictNonlinear(dataFrame=df, columns="x", target="x", lib="1 100",
                                        pred="101 198", E=2, theta=[0.5, 2, 4], showPlot=False,
                                        numProcess=1)
    got = EDM.SMap(device=device, **kw)
    _frame_close(ref["predictions"], got["predictions"], ["Time", "Observations", "Predictions"])
    got_nl = EDM.PredictNonlinear(dataFrame=df, columns="x", target="x", lib="1 100",
                                  pred="101 198", E=2, theta=[0.5, 2, 4], device=device)
    assert list(got_nl.columns) == list(ref_nl.columns)
    np.testing.assert_allclose(got_nl["rho"], ref_nl["rho"], atol=1e-5)


def test_every_pyedm_public_name_is_provided_or_explained():
    import pyedmcl.compat.pyedm as compat
    public = [n for n in dir(pyEDM) if not n.startswith("_") and n[0].isupper() or n == "sampleData"]
    missing = []
    for name in public:
        if not callable(getattr(pyEDM, name)) and name != "sampleData":
            continue
        try:
            getattr(compat, name)
        except AttributeError as exc:
            assert "pyEDM" in str(exc) or "pyedmcl" in str(exc), name
            missing.append(name)
    assert set(missing) <= {"CCM_Matrix", "Examples"}, missing
