"""Core ``generate`` (iterated forecasts) and ``multiview`` against pyEDM.

Data pyEDM's own tests do not use for these functions: 'circleNoise' for
generateSteps, the first 400 rows of 'Lorenz5D' (columns V1 V3 V4) for Multiview.
float64 on both sides: 1e-9 absolute (same arithmetic; distances from the kernel
may differ from scipy's by an ulp). float32: 1e-4 relative to the data's spread
(the kernels' float32 distances and weights).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyedmcl as pe

pyEDM = pytest.importorskip("pyEDM")


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


@pytest.mark.parametrize("method", ["simplex", "smap"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_generate_matches_pyedm(method, dtype, device):
    d = pyEDM.sampleData["circleNoise"]
    kw = dict(columns="x", target="x", lib=[1, 150], pred=[1, 2], E=3, generateSteps=10)
    if method == "smap":
        ref = _quiet(pyEDM.SMap, d, theta=2.0, **kw)["predictions"]
    else:
        ref = _quiet(pyEDM.Simplex, d, **kw)
    got = pe.generate(d["x"], E=3, steps=10, lib=[1, 150], method=method,
                      theta=2.0 if method == "smap" else None, dtype=dtype, device=device)
    spread = float(np.ptp(d["x"]))
    tol = 1e-9 if dtype == "float64" else 1e-4 * spread
    np.testing.assert_allclose(got.predicted, ref["Predictions"].to_numpy(), atol=tol, rtol=0)
    np.testing.assert_array_equal(got.times + 1, ref["Time"].to_numpy())  # 0-based vs Time
    np.testing.assert_array_equal(got.series[-10:], got.predicted)


def test_multiview_matches_pyedm(device):
    d = pyEDM.sampleData["Lorenz5D"].iloc[:400]
    ref = _quiet(pyEDM.Multiview, d, columns="V1 V3 V4", target="V3", lib=[1, 200],
                 pred=[201, 320], D=3, E=2, Tp=1, trainLib=False, numProcess=1)
    got = pe.multiview(d, "V3", columns="V1 V3 V4", E=2, D=3, lib=[1, 200], pred=[201, 320],
                       train_lib=False, dtype="float64", device=device)
    n = len(ref["View"])
    assert got.views[:n] == [tuple(c) for c in ref["View"]["Columns"]]
    np.testing.assert_allclose(got.rho[:n], ref["View"]["rho"].to_numpy(), atol=1e-6)  # pyEDM rounds
    # pyEDM's frame has Tp extra leading row (the observation before the first prediction)
    np.testing.assert_allclose(got.predicted, ref["Predictions"]["Predictions"].to_numpy()[1:],
                               atol=1e-9, rtol=0)
    assert got.n_combinations == 20


def test_bad_arguments_name_the_parameter():
    x = np.sin(np.arange(100) / 3)
    with pytest.raises(ValueError, match="steps"):
        pe.generate(x, E=2, steps=0)
    with pytest.raises(ValueError, match="theta"):
        pe.generate(x, E=2, steps=3, method="smap")
    with pytest.raises(ValueError, match="method"):
        pe.generate(x, E=2, steps=3, method="ccm")
    with pytest.raises(ValueError, match="not found"):
        pe.multiview(np.c_[x, x], "y", E=2)
