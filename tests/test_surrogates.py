"""Surrogate series: each method keeps the property it promises (pyedmcl.surrogates).

Oracles: the data itself (sorted values, the FFT amplitude spectrum, the spline's
residuals), pyunicorn's twin finder (the same recurrence rule), and pyEDM's
SurrogateData for the compat layout. Tolerances: FFT round trips lose ~1e-15 of the
largest amplitude per operation; we allow 1e-12 of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pyedmcl as pe
from pyedmcl.data import coupled_logistic, logistic_map
from pyedmcl.primitives.surrogates import (
    find_twins,
    recurrence_matrix,
    seasonal_trend,
    twin_states,
)

X = coupled_logistic(240)[:, 0]


@pytest.mark.parametrize("method", ["random_shuffle", "ebisuzaki", "seasonal", "twin"])
def test_reproducible_by_seed(method):
    a = pe.surrogates(X, method, 7, seed=3)
    assert a.shape == (7, X.size)
    assert np.array_equal(a, pe.surrogates(X, method, 7, seed=3))
    assert not np.array_equal(a, pe.surrogates(X, method, 7, seed=4))
    assert not np.array_equal(a[0], a[1])  # n different surrogates


def test_shuffle_keeps_the_values():
    s = pe.surrogates(X, "random_shuffle", 20, seed=1)
    assert np.array_equal(np.sort(s, axis=1), np.broadcast_to(np.sort(X), s.shape))
    assert not np.array_equal(s[0], X)


@pytest.mark.parametrize("L", [240, 239])  # even (a Nyquist term) and odd lengths
def test_ebisuzaki_keeps_the_amplitude_spectrum(L):
    x = X[:L]
    s = pe.surrogates(x, "ebisuzaki", 20, seed=2)
    amp = np.abs(np.fft.rfft(x))
    got = np.abs(np.fft.rfft(s, axis=1))
    assert np.abs(got - amp).max() <= 1e-12 * amp.max()
    assert np.allclose(s.mean(axis=1), x.mean(), rtol=0, atol=1e-12)
    # the phases are new: far from the data
    assert np.corrcoef(s[0], x)[0, 1] < 0.5


def test_seasonal_keeps_the_cycle_and_shuffles_the_residuals():
    t = np.arange(300)
    x = np.sin(2 * np.pi * t / 50) + 0.3 * np.random.default_rng(0).standard_normal(300)
    trend = seasonal_trend(x, 0.8)
    from scipy.interpolate import UnivariateSpline  # pyEDM's two calls, the oracle
    sp = UnivariateSpline(t.astype(float), x)
    sp.set_smoothing_factor(0.8)
    assert np.array_equal(trend, sp(t.astype(float)))
    # without noise: trend + a permutation of the residuals, exactly
    s = pe.surrogates(x, "seasonal", 10, seed=5, alpha=0)
    assert np.allclose(np.sort(s - trend, axis=1), np.sort(x - trend)[None, :], atol=1e-12)
    # with pyEDM's default noise (range / 5): the mean over surrogates at each time is the
    # trend plus the residuals' mean, within 5 standard errors (fixed seed)
    n = 4000
    s = pe.surrogates(x, "seasonal", n, seed=6)
    resid = x - trend
    se = np.sqrt(resid.var() + (np.ptp(x) / 5) ** 2) / np.sqrt(n)
    assert np.abs(s.mean(axis=0) - (trend + resid.mean())).max() < 5 * se
    assert abs(s.std(axis=0).mean() - np.sqrt(resid.var() + (np.ptp(x) / 5) ** 2)) < 0.05


def test_seasonal_smoothing_keeps_the_seasonal_means():
    """A smoother spline (larger smoothing factor) is the seasonal cycle: the surrogates'
    mean per season is the spline's (plus the residuals' mean) within 5 standard errors
    (noise sd 0.2, 10 cycles of 40 steps, 500 surrogates)."""
    t = np.arange(400)
    x = np.sin(2 * np.pi * t / 40) + 0.2 * np.random.default_rng(1).standard_normal(400)
    smooth, n = 400 * 0.04, 500
    s = pe.surrogates(x, "seasonal", n, seed=2, smooth=smooth, alpha=0.1)
    trend = seasonal_trend(x, smooth)
    phase = t % 40

    def by_season(a):
        return np.array([a[..., phase == p].mean() for p in range(40)])

    se = np.sqrt((x - trend).var() + 0.1 ** 2) / np.sqrt(n * 10)
    assert np.abs(by_season(s) - by_season(trend) - (x - trend).mean()).max() < 5 * se


def test_twin_values_come_from_the_data():
    x = logistic_map(300)
    s = pe.surrogates(x, "twin", 10, seed=1, E=2, threshold=0.05)
    assert np.isin(s, x).all()
    assert not np.array_equal(s[0], x)


def test_twins_match_pyunicorn():
    surr = pytest.importorskip("pyunicorn.timeseries").Surrogates
    x = logistic_map(300)
    thr = float(np.float32(0.0625))  # pyunicorn compares in float32: a value exact in both
    for E, min_dist in ((2, 7), (3, 3)):
        start, flat = find_twins(recurrence_matrix(twin_states(x, E, 1), thr), min_dist)
        S = surr(x[None, :], silence_level=3)
        S.embedding = S.embed_time_series_array(x[None, :], E, 1)
        ref = S.twins(thr, min_dist)[0]
        mine = [flat[start[i]:start[i + 1]].tolist() for i in range(len(ref))]
        assert mine == [list(t) for t in ref]
        assert sum(map(len, ref)) > 0  # the case has twins


def test_twin_without_twins_follows_the_data():
    """No twins (radius 0: every state recurs only with itself): each step is the data's
    next value, except restarts where the data ends."""
    x = logistic_map(200)
    s = pe.surrogates(x, "twin", 5, seed=3, E=2, threshold=0.0)
    pos = {v: i for i, v in enumerate(x)}
    for row in s:
        idx = np.array([pos[v] for v in row])
        jumps = np.flatnonzero(np.diff(idx) != 1)
        assert (idx[jumps] == x.size - 2).all()  # only after the last state (E=2)


@pytest.mark.parametrize("call,match", [
    (lambda: pe.surrogates(X, "phase", 3), "method='phase' is invalid"),
    (lambda: pe.surrogates(X, "ebisuzaki", 0), "n=0 is out of range"),
    (lambda: pe.surrogates(X, "ebisuzaki", 3, seed=-1), "seed=-1"),
    (lambda: pe.surrogates([1.0, np.nan, 2.0], "ebisuzaki", 3), "NaN"),
    (lambda: pe.surrogates([1.0, 2.0], "ebisuzaki", 3), "at least 3"),
    (lambda: pe.surrogates(X, "seasonal", 3, alpha=-1), "alpha=-1"),
    (lambda: pe.surrogates(X, "seasonal", 3, smooth=np.inf), "smooth=inf"),
    (lambda: pe.surrogates(X[:5], "twin", 3, E=5), "too short"),
    (lambda: pe.surrogates(X, "twin", 3, recurrence_rate=0), "recurrence_rate=0"),
    (lambda: pe.surrogates(np.ones((3, 4)), "twin", 3), "1-D"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_constant_series():
    c = np.full(50, 2.5)
    for m in ("random_shuffle", "ebisuzaki", "twin"):
        assert np.allclose(pe.surrogates(c, m, 3, seed=0), 2.5)


def test_compat_surrogate_data_layout():
    from pyedmcl.compat import pyedm as EDM
    df = pd.DataFrame({"Time": np.arange(1, 101), "V": X[:100]})
    for method in ("ebisuzaki", "random_shuffle", "seasonal"):
        out = EDM.SurrogateData(df, "V", method=method, numSurrogates=4)
        assert list(out.columns) == ["Time", "V_1", "V_2", "V_3", "V_4"]
        assert np.array_equal(out["Time"].to_numpy(), df["Time"].to_numpy())
        assert out.shape == (100, 5)
    pyEDM = pytest.importorskip("pyEDM")
    ref = pyEDM.SurrogateData(df, "V", method="random_shuffle", numSurrogates=4)
    assert list(ref.columns) == list(out.columns)
    out = EDM.SurrogateData(df, "V", method="random_shuffle", numSurrogates=4)
    assert np.array_equal(np.sort(out["V_1"]), np.sort(ref["V_1"]))  # both the data's values
    with pytest.raises(ValueError, match="column"):
        EDM.SurrogateData(df, "W")
