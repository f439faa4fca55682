"""float32's fixed-rate radius and FAN's per-column thresholds are the float64 path's, bit
for bit (:mod:`pyedmcl.rqa.select`): on grid data (0.1 and 0.01 grids, integers, mixed
scales, an offset far from zero), where float32 rounding ties and unties many cells at the
order statistic. Compared with ``dtype="float64"`` itself (the oracle: its distances on the
device in float64 from the raw series), exact and sampled modes, rqa, cross_rqa,
joint_rqa and windows; the error bound the selection rests on against the full float32 and
float64 matrices.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST_BUILD_CPU
from hypothesis import given, settings
from hypothesis import strategies as st

import pyedmcl as pe
from pyedmcl.rqa import radius, select
from pyedmcl.rqa.distances import kernel_distances, sampled_dist
from pyedmcl.rqa.fan import fan_thresholds, working_thresholds
from pyedmcl.rqa.threshold import kernel_threshold

DEV = FAST_BUILD_CPU
METRICS = ("euclidean", "maximum", "manhattan")


def grid_series(n: int, kind: int, seed: int) -> np.ndarray:
    """A random walk on a grid: 0.1, 0.01, integers, or a 0.1 grid with bursts of a
    larger scale; offset (1000 + a grid multiple) so centring rounds."""
    g = np.random.default_rng(seed)
    w = np.cumsum(g.standard_normal(n))
    if kind == 0:
        return np.round(w * 3) / 10 + 1000.3
    if kind == 1:
        return np.round(w * 30) / 100 - 52.17
    if kind == 2:
        return np.round(w * 2) + 7.0
    scale = np.where(g.random(n) < 0.2, 40.0, 1.0)
    return np.round(w * 3 * scale) / 10 + 12.5


def both(rows, cols, rate, E, tau, metric, rule="distance"):
    """float32's and float64's :func:`rate_threshold`, or each one's error message (a rate
    below the input's floor: the same message, from the same float64 distances)."""
    kw = dict(E=E, tau=tau, metric=metric, backend=_be(), rule=rule)
    out = []
    for dt in (np.float32, np.float64):
        try:
            out.append(radius.rate_threshold(rows, cols, rate, dtype=dt, **kw))
        except ValueError as exc:
            out.append(str(exc))
    return out


def _be():
    from clkernels import get_backend

    return get_backend(DEV)


def _no_fallback(monkeypatch):
    """The selection must close without computing every distance in float64."""
    def refuse(*a, **k):
        raise AssertionError("the float32 selection fell back to every float64 distance")

    monkeypatch.setattr(select, "host_distances", refuse)


@settings(max_examples=15, deadline=None)
@given(kind=st.integers(0, 3), seed=st.integers(0, 10 ** 6), n=st.integers(150, 500),
       metric=st.sampled_from(METRICS), rate=st.sampled_from([0.01, 0.05, 0.137, 0.4]),
       cross=st.booleans())
def test_rate_threshold_float32_is_float64(kind, seed, n, metric, rate, cross):
    """rqa (auto) and cross_rqa's threshold search: radius and thr64 equal bit for bit (or
    the same error, a rate below the floor); float32's own threshold is that of the
    float64 radius."""
    rows = grid_series(n, kind, seed)
    cols = grid_series(n - 37, (kind + 1) % 4, seed + 1) if cross else None
    a, b = both(rows, cols, rate, 2, 1, metric)  # E = 2 throughout: each shape built once
    if isinstance(b, str):
        assert a == b
        return
    assert a.radius == b.radius and a.thr64 == b.thr64 == b.thr
    assert a.thr == kernel_threshold(b.radius, metric, np.float32, "distance")


def test_rate_threshold_rules_and_tau(monkeypatch):
    """``threshold_rule="squared"`` (thr64 the order statistic itself) and tau > 1, with
    no fall-back; joint's two series each their own."""
    _no_fallback(monkeypatch)
    x, y = grid_series(400, 0, 5), grid_series(400, 1, 6)
    for metric in METRICS:
        for rule in ("squared", "distance"):
            a, b = both(x, None, 0.07, 2, 2 if metric == "euclidean" else 1, metric, rule)
            assert (a.radius, a.thr64) == (b.radius, b.thr64), (metric, rule)
            if rule == "squared":
                below = float(np.nextafter(np.float32(a.thr), np.float32(0)))
                assert a.thr >= b.thr64 > below
    r32 = pe.joint_rqa(x, y, E=2, recurrence_rate=(0.1, 0.05), device=DEV).radius
    r64 = pe.joint_rqa(x, y, E=2, recurrence_rate=(0.1, 0.05), device=DEV,
                       dtype="float64").radius
    assert tuple(r32) == tuple(r64)


@pytest.mark.parametrize("metric", METRICS)
def test_sampled_mode_float32_is_float64(metric, monkeypatch):
    """Above ``EXACT_CELLS``: the same pairs' float64 distances from the raw series in both
    dtypes (float32 used to sample the centred series and round them to float32)."""
    monkeypatch.setattr(radius, "EXACT_CELLS", 1000)
    monkeypatch.setattr(radius, "SAMPLES", 20_000)
    x, y = grid_series(600, 3, 9), grid_series(500, 0, 10)
    for cols in (None, y):
        a, b = both(x, cols, 0.05, 3, 1, metric)
        assert (a.radius, a.thr64) == (b.radius, b.thr64)


@pytest.mark.parametrize("metric", METRICS)
def test_device_draws_and_computes_the_hosts_sample(device, metric, monkeypatch):
    """The rate search's sample on a device (pairs by the counter hash, float64 distances)
    equals the host's threads' bit for bit, pairs of rows and columns and cross pairs
    over several pieces, so the estimated radius does not depend on where it ran; a
    simulator and a device without fp64 take the host's path."""
    import clkernels
    from pyedmcl.kernels.distance import takes_sampled_distances

    be = clkernels.get_backend(device)
    monkeypatch.setattr(radius, "PAIRS_PIECE", 4096)
    monkeypatch.setattr(radius, "SAMPLES", 3 * 4096 + 77)
    x, y = grid_series(3000, 3, 9), grid_series(2500, 0, 10) * 7
    if not takes_sampled_distances(be):
        assert be.info.runtime == "oclgrind" or not be.info.fp64
        return
    for cols in (x, y):
        nr, nc = x.size - 4, cols.size - 4
        host = radius.sample_distances(x, cols, nr, nc, 3, 2, metric, 7)
        for keep in (False, True):  # read back, or kept and its k-th values selected there
            monkeypatch.setattr(radius, "keeps_sample", lambda be, keep=keep: keep)
            dev = radius.sample_distances(x, cols, nr, nc, 3, 2, metric, 7, be)
            for k in (0, 5, radius.SAMPLES // 50, radius.SAMPLES - 1):
                assert dev.kth(k) == host.kth(k) == np.partition(host.host(), k)[k]
            assert dev.least == host.least == host.host().min()
            assert np.array_equal(host.host(), dev.host())
        i, j = radius.sample_pairs(7, 1, nr, nc)
        assert i.size == 4096 and 0 <= i.min() and i.max() < nr and j.max() < nc
        assert np.array_equal(host.host()[4096:8192], sampled_dist(x, cols, i, j, 3, 2, metric))


def test_issue_case_recurrence_rate_on_quantized_data():
    """The reported kind of case: default float32 rqa with recurrence_rate on 0.1-grid data
    took float32's order statistic (here rate 0.1: radius 0.72111037 where float64 found
    0.72111026, a tie group of 0.52 on the other side of it: 15,915 recurrent cells
    against 15,593); every rate and window here differed. Both give float64's now, and
    the same result."""
    x = grid_series(400, 0, 1)
    for rate in (0.05, 0.1, 0.2):
        r32 = pe.rqa(x, E=2, recurrence_rate=rate, device=DEV)
        r64 = pe.rqa(x, E=2, recurrence_rate=rate, device=DEV, dtype="float64")
        assert r32.settings["dtype"] == "float32"
        assert r32.radius == r64.radius, rate
        assert _same_result(r32, r64), rate
    # the windows' radii (one search per window, each from the window's raw values)
    kw = dict(E=2, recurrence_rate=0.1, window=150, step=125, device=DEV)
    w32 = pe.rqa(x, **kw)
    w64 = pe.rqa(x, **kw, dtype="float64")
    assert np.array_equal(w32["radius"].to_numpy(), w64["radius"].to_numpy())


def test_cross_rqa_radius(monkeypatch):
    _no_fallback(monkeypatch)
    x, y = grid_series(350, 1, 3), grid_series(300, 2, 4) / 10
    r32 = pe.cross_rqa(x, y, E=2, recurrence_rate=0.08, device=DEV)
    r64 = pe.cross_rqa(x, y, E=2, recurrence_rate=0.08, device=DEV, dtype="float64")
    assert r32.radius == r64.radius


@pytest.mark.parametrize("metric", METRICS)
def test_error_bound_holds(metric):
    """Every cell's |d32 - d64| is within beta at the cap (the selection's premise), on a
    series whose float32 cast rounds (0.01 grid far from zero) and tiny differences."""
    x = grid_series(300, 1, 11)
    x[::7] += 1e-9  # pairs that float32 merges
    y = grid_series(280, 3, 12)
    z, zc, eta = select.centred_f32(x, y)
    E = 3
    pts = [np.stack([s[m: m + s.size - (E - 1)] for m in range(E)], 1) for s in (z, zc)]
    d32 = kernel_distances(pts[0], pts[1], metric).ravel()
    d64 = select.host_distances(x, y, E, 1, metric)
    c = select.error_coefficients(metric, E, eta)
    for q in (0.001, 0.05, 0.5):
        v32 = float(np.quantile(d32, q))
        beta = select.search_window(v32, c)
        hi = v32 + 2 * beta
        cap = 3 * hi + 4 * (c[1] / (1 - c[0])) ** 2 + 4 * c[2]
        near = d64 <= cap
        assert np.all(np.abs(d32[near].astype(np.float64) - d64[near]) <= beta / select.SAFETY)
        assert np.all(d32[~near] > hi) and np.all(d64[~near] > hi)


@settings(max_examples=12, deadline=None)
@given(kind=st.integers(0, 3), seed=st.integers(0, 10 ** 6), knn=st.integers(1, 40),
       metric=st.sampled_from(METRICS), rule=st.sampled_from(["distance", "squared"]))
def test_fan_thresholds_float32_is_float64(kind, seed, knn, metric, rule):
    """FAN's per-column thresholds: float32 mode gives the float64 path's order statistics
    and thresholds, and float32 thresholds that admit exactly the float32 values below
    the float64 order statistic (by the rule's comparison)."""
    from pyedmcl.rqa import fan

    x = grid_series(260, kind, seed)

    def float32_only(a, b, *args, **kw):  # a column redone whole: the selection failed
        assert a.dtype == np.float32, "a column of FAN's selection fell back to float64"
        return kernel_distances(a, b, *args, **kw)

    fan.kernel_distances = float32_only
    try:
        v32, t32, t64_32 = fan_thresholds(x, 2, 1, knn, metric, np.dtype(np.float32), rule)
    finally:
        fan.kernel_distances = kernel_distances
    v64, t64, t64_64 = fan_thresholds(x, 2, 1, knn, metric, np.dtype(np.float64), rule)
    assert np.array_equal(v32, v64) and np.array_equal(t64_32, t64)
    assert np.array_equal(t64, t64_64) and t64.dtype == np.float64 and t32.dtype == np.float32
    below = np.nextafter(t32, np.float32(0))
    if metric == "euclidean" and rule == "distance":
        r = np.sqrt(v64)
        assert np.all(np.sqrt(t32.astype(np.float64)) >= r)
        assert np.all((t32 == 0) | (np.sqrt(below.astype(np.float64)) < r))
    else:
        assert np.all(t32.astype(np.float64) >= v64)
        assert np.all((t32 == 0) | (below.astype(np.float64) < v64))
    assert np.array_equal(working_thresholds(v64, metric, np.float32, rule), t32)


def test_fan_radii_float32_is_float64():
    x = grid_series(300, 0, 21)
    r32 = pe.rqa(x, E=2, neighbourhood="fan", knn=9, device=DEV)
    r64 = pe.rqa(x, E=2, neighbourhood="fan", knn=9, device=DEV, dtype="float64")
    assert np.array_equal(r32.radius, r64.radius)


def _same_result(a, b) -> bool:
    """Every measure (NaN where both are), the counts and the histograms equal."""
    ma, mb = (np.array([r.measures[k] for k in sorted(r.measures)], float) for r in (a, b))
    return (a.n_recurrences == b.n_recurrences and np.array_equal(ma, mb, equal_nan=True)
            and all(np.array_equal(getattr(a, h), getattr(b, h)) for h in
                    ("diagonal_hist", "vertical_hist", "white_hist")))


def test_measures_float32_are_float64():
    """End to end with the float32 kernels' exact redo (:mod:`pyedmcl.rqa.exact`): a fixed
    rate's whole result, and FAN's, in float32 equal float64's on grid data."""
    x, y = grid_series(420, 0, 31), grid_series(420, 1, 32)
    for metric in ("euclidean", "maximum"):
        kw = dict(E=2, recurrence_rate=0.07, metric=metric, device=DEV)
        assert _same_result(pe.rqa(x, **kw), pe.rqa(x, **kw, dtype="float64")), metric
    kw = dict(E=2, recurrence_rate=0.05, device=DEV)
    assert _same_result(pe.cross_rqa(x, y, **kw), pe.cross_rqa(x, y, **kw, dtype="float64"))
    kw = dict(E=2, recurrence_rate=(0.1, 0.05), device=DEV)
    assert _same_result(pe.joint_rqa(x, y, **kw), pe.joint_rqa(x, y, **kw, dtype="float64"))
    kw = dict(E=2, neighbourhood="fan", knn=11, device=DEV)
    assert _same_result(pe.rqa(x, **kw), pe.rqa(x, **kw, dtype="float64"))
