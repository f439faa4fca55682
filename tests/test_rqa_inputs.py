"""RQA inputs: state vectors (``embedded=True``) and ``threshold_std`` against pyunicorn's
RecurrencePlot (recurrence matrix counts and histograms exactly, float64, quantized
float32-representable data), integral floats for E and tau."""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe


def _states(n: int = 300, d: int = 3) -> np.ndarray:
    X = np.round(np.random.default_rng(1).standard_normal((n, d)) * 3) / 10
    return X.astype(np.float32).astype(np.float64)


def test_embedded_state_vectors_pyunicorn(device):
    from pyunicorn.timeseries import RecurrencePlot

    X = _states()
    for metric, um in (("euclidean", "euclidean"), ("maximum", "supremum")):
        rp = RecurrencePlot(X, metric=um, threshold=0.5, silence_level=3)
        r = pe.rqa(X, embedded=True, radius=0.5, metric=metric, dtype="float64", device=device)
        assert r.n_recurrences == int(rp.R.sum()), metric
        d = np.trim_zeros(r.diagonal_hist.astype(np.int64), "b")
        assert np.array_equal(d, np.trim_zeros(rp.diagline_dist().astype(np.int64), "b"))
    # a delay embedding given as state vectors is the same analysis
    x = X[:, 0]
    V = np.stack([x[:-2], x[1:-1], x[2:]], axis=1)
    a = pe.rqa(V, embedded=True, radius=0.4, dtype="float64", device=device)
    b = pe.rqa(x, E=3, radius=0.4, dtype="float64", device=device)
    assert a.n_recurrences == b.n_recurrences
    assert np.array_equal(a.vertical_hist, b.vertical_hist)


def test_threshold_std_pyunicorn(device):
    from pyunicorn.timeseries import RecurrencePlot

    x = _states()[:, 0]
    rp = RecurrencePlot(x, metric="euclidean", threshold_std=0.4, dim=2, tau=1, silence_level=3)
    r = pe.rqa(x, E=2, threshold_std=0.4, dtype="float64", device=device)
    assert r.n_recurrences == int(rp.R.sum())
    assert r.radius == pytest.approx(0.4 * x.std(), rel=1e-15)


def test_threshold_max_numpy(device):
    x = _states()[:, 0]
    a = np.stack([x[:-1], x[1:]], axis=1)
    dmax = np.sqrt(((a[:, None, :] - a[None, :, :]) ** 2).sum(-1).max())
    r = pe.rqa(x, E=2, threshold_max=0.1, dtype="float64", device=device)
    assert r.radius == pytest.approx(0.1 * dmax, rel=1e-15)
    assert r.n_recurrences == pe.rqa(x, E=2, radius=r.radius, dtype="float64",
                                     device=device).n_recurrences
    # windows take the whole series' diameter: one radius, rows as rqa() per window
    df = pe.rqa(x, E=2, threshold_max=0.1, window=40, step=30, dtype="float64", device=device)
    assert (df["radius"] == r.radius).all()
    for (a, b), row in df.iterrows():
        one = pe.rqa(x[a:b + 2], E=2, radius=r.radius, dtype="float64", device=device)
        assert row["n_recurrences"] == one.n_recurrences and row["DET"] == one.DET


def test_integral_floats_and_bad_values():
    x = _states()[:, 0]
    assert pe.rqa(x, E=2.0, tau=1.0, radius=0.5).n_recurrences == \
        pe.rqa(x, E=2, tau=1, radius=0.5).n_recurrences
    with pytest.raises(ValueError, match="E must be an integer"):
        pe.rqa(x, E=1.5, radius=0.5)
    with pytest.raises(ValueError, match="leave E=1"):
        pe.rqa(_states(), embedded=True, E=2, radius=0.5)
    with pytest.raises(ValueError, match="2-D"):
        pe.rqa(np.zeros((2, 2, 2)), embedded=True, radius=0.5)
    with pytest.raises(ValueError, match="threshold_std"):
        pe.rqa(x, threshold_std=0.5, radius=0.5)
    with pytest.raises(ValueError, match="threshold_max"):
        pe.rqa(x, threshold_max=0.1, threshold_std=0.5)
    with pytest.raises(ValueError, match="threshold_std"):
        pe.rqa(x, threshold_std=-1)
