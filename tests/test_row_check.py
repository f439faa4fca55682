"""float32 Simplex predictions float32 cannot hold are found per row and redone in float64.

The checked lookup's flags equal a NumPy evaluation of the template's first-order bound
(rounding at the threshold aside), its predictions equal the plain lookup's bit for bit;
float32 Simplex on near-repeating states and on a dense one-dimensional library then stays
within ``PREDICTION_TOL`` standard deviations of float64 in every prediction (it did not:
up to 4e-2 before), with redone rows equal to the float64 call's, variances and device
outputs included; the host fallback (a device without fp64) equals the device's float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.edm import row_check, row_redo
from pyedmcl.primitives import knn as pknn
from pyedmcl.primitives.knn import DeviceKnn
from pyedmcl.primitives.lookup import lookup_checked, lookup_device
from pyedmcl.primitives.ranges import resolve

U2 = 2.0 ** -23


def numpy_bound(idx, dist, y, shift, qnorm, E, K, span):
    """The template's bound per query for one target ``y`` (float64 arithmetic)."""
    ok = idx[:, :K] >= 0
    d = dist[:, :K].astype(np.float64)
    f = np.maximum(d[:, :1], 1e-6)
    w = np.where(ok, np.exp(-d / f), 0.0)
    yy = np.where(ok, y[np.clip(idx[:, :K] + shift, 0, None)], 0.0)
    den = w.sum(1)
    mu = (w * yy).sum(1) / den
    qn2 = 2 * qnorm.astype(np.float64)
    g = np.where(d[:, 0] >= np.float32(1e-6), U2 * (qn2 + (E + 4) * d[:, 0]) / f[:, 0], 0.0)
    bnd = (w * np.abs(yy - mu[:, None]) * (U2 * (qn2[:, None] + (E + 4) * d)
                                           + d * g[:, None])).sum(1) / (den * f[:, 0])
    db = dist[:, K:K + 1].astype(np.float64)
    near = (idx[:, K:K + 1] >= 0) & (db - d <= U2 * (2 * qn2[:, None] + (E + 4) * (d + db)))
    bnd += (np.where(near, w, 0.0) / den[:, None]).sum(1) * span
    return bnd


def test_checked_lookup_equals_numpy_bound(device):
    be = get_backend(device)
    rng = np.random.default_rng(5)
    nq, K, E, n = 2000, 4, 3, 3000
    dist = np.sort(rng.random((nq, K + 1)) * 1e-3, axis=1)
    dist[::7, 0] = rng.random(dist[::7].shape[0]) * 1e-7  # near-coincident nearest
    dist[::5, K] = dist[::5, K - 1] + 1e-9  # near ties at the k-th place
    dist = dist.astype(np.float32)
    idx = rng.integers(0, n - 2, (nq, K + 1)).astype(np.int32)
    idx[::11, K] = -1
    y = rng.standard_normal((2, n)).astype(np.float32)
    qnorm = (rng.random(nq) * 3).astype(np.float32)
    thr = np.array([1e-5, 1e-3])
    span = np.ptp(y.astype(np.float64), axis=1)
    table = DeviceKnn(be.to_device(idx[None]), be.to_device(dist[None]), 1, nq, K + 1)
    y_dev = be.to_device(y)
    acc = np.float64 if be.info.fp64 else np.float32
    c = lookup_checked(be, table, K, y_dev, n, 2, 1, be.to_device(qnorm),
                       be.to_device(np.concatenate([thr, span]).astype(acc)), E)
    p, flags = c.pred, be.to_host(c.flag)[0]
    # count and list, what the caller reads: every flagged query once, whichever of the
    # two targets flagged it
    report = be.to_host(c.report)
    count = int(report[0])
    want = np.flatnonzero(flags.any(axis=0))
    assert count == want.size < flags.sum()  # (some queries flagged for both targets)
    listed = report[2:2 + min(count, c.cap)]
    if count <= c.cap:
        np.testing.assert_array_equal(np.sort(listed), want)
    np.testing.assert_array_equal(c.rows_reader(be)(), np.flatnonzero(flags.any(axis=0)))
    plain = DeviceKnn(be.to_device(np.ascontiguousarray(idx[None, :, :K])),
                      be.to_device(np.ascontiguousarray(dist[None, :, :K])), 1, nq, K)
    want_p, _ = lookup_device(be, plain, y_dev, n, 2, 1)
    np.testing.assert_array_equal(be.to_host(p), be.to_host(want_p))
    for j in range(2):
        b = numpy_bound(idx, dist, y[j].astype(np.float64), 1, qnorm, E, K, span[j])
        clear = np.abs(b - thr[j]) > 1e-4 * thr[j]  # rounding decides only at the threshold
        np.testing.assert_array_equal(flags[j][clear], (b > thr[j])[clear].astype(np.uint8))
        assert 0 < flags[j].sum() < nq  # both outcomes are exercised


def _logistic(n: int) -> np.ndarray:
    x = np.empty(n)
    x[0] = 0.4
    for i in range(1, n):
        x[i] = 3.8 * x[i - 1] * (1 - x[i - 1])
    return x


def near_repeats(n: int = 600, seed: int = 1) -> np.ndarray:
    """A logistic map at an offset of 100 whose segments repeat within 1e-7."""
    rng = np.random.default_rng(seed)
    x = _logistic(n)
    for _ in range(n // 30):
        a, b = rng.integers(0, n - 10, 2)
        x[b:b + 10] = x[a:a + 10] + 1e-7 * rng.standard_normal(10)
    return x + 100.0


def lorenz_x(n: int) -> np.ndarray:
    from pyedmcl.neighbors.lorenz import lorenz63

    return lorenz63(n, component="x")


#: RowCheck.resolved itself (spy_redo wraps it; a second spy must not wrap the first)
_REAL_RESOLVED = row_check.RowCheck.resolved


def spy_redo(monkeypatch, fail: str | None = None) -> list:
    """The rows each float64 redo of ``pe.simplex`` takes (the lookup's, the device's
    patched redo or the host's), appended to the list returned; ``fail``: a redo fails
    the test."""
    from pyedmcl.edm import simplex as S

    redone: list = []
    for name in ("redo_float64", "redo_patched"):
        real = getattr(row_check, name)

        def spy(*a, _real=real, **k):
            if fail:
                pytest.fail(fail)
            redone.append(a[4].size)
            return _real(*a, **k)
        monkeypatch.setattr(S, name, spy)
    real_fixed = row_redo.EnqueuedRedo.fixed

    def fixed(self, rows):  # the redo enqueued behind the first pass (GPUs)
        got = real_fixed(self, rows)
        if got is not None:
            if fail:
                pytest.fail(fail)
            redone.append(rows.size)
        return got
    monkeypatch.setattr(row_redo.EnqueuedRedo, "fixed", fixed)
    real_resolved = _REAL_RESOLVED

    def resolved(self):  # redone in the lookup (its table held the float64 neighbours)
        got = real_resolved(self)
        if got is not None and got.table.size:
            if fail:
                pytest.fail(fail)
            redone.append(np.unique(got.table[:, 0]).size)
        return got
    monkeypatch.setattr(row_check.RowCheck, "resolved", resolved)
    return redone


@pytest.mark.parametrize("case", ["near_repeats", "dense_1d", "decimals"])
def test_float32_predictions_within_tolerance(device, case, monkeypatch):
    """Repeating states, a dense library at E = 1, and data with one decimal (distances
    tie on a lattice in exact arithmetic: float32 and float64 break the ties apart, and
    the k-th neighbour may be any of several tied points)."""
    x, E = {"near_repeats": (near_repeats(), 3), "dense_1d": (lorenz_x(3000), 1),
            "decimals": (np.round(lorenz_x(3000), 1), 2)}[case]
    redone = spy_redo(monkeypatch)
    r32 = pe.simplex(x, E=E, device=device, variance=True)
    r64 = pe.simplex(x, E=E, device=device, variance=True, dtype="float64")
    assert redone and redone[0] > 0  # float32 alone was off here
    s = np.std(x)
    err = np.abs(r32.predicted - r64.predicted)
    assert np.nanmax(err) <= row_check.PREDICTION_TOL * s, np.nanmax(err) / s
    # the redone rows are the float64 call's
    assert np.sum(err == 0) >= redone[0]
    # rho: each kept prediction within the tolerance allows 1e-5 of rho; rounding errors
    # do not align, and 1.1e-9 was measured
    np.testing.assert_allclose(r32.rho, r64.rho, rtol=0, atol=1e-8)
    np.testing.assert_allclose(r32.rmse, r64.rmse, rtol=1e-6)
    # a variance moves with the weights times the neighbours' spread (<= a few s)
    np.testing.assert_allclose(r32.variance, r64.variance, rtol=0,
                               atol=10 * row_check.PREDICTION_TOL * s * s)


def test_device_outputs_and_several_targets_patched(device):
    x = near_repeats(seed=2)
    y = np.stack([x, np.roll(x, 3) * 2.0])
    r32 = pe.simplex(x, y, E=3, device=device, return_device=True)
    r64 = pe.simplex(x, y, E=3, device=device, dtype="float64")
    got = np.asarray(get_backend(device).to_host(r32.predicted), np.float64)
    # the tolerance plus one float32 step at the values' magnitude (outputs in data units)
    tol = row_check.PREDICTION_TOL * np.std(y, axis=1)[:, None]
    ulp = np.spacing(np.float32(np.nanmax(np.abs(r64.predicted))))
    assert np.all(np.abs(got - r64.predicted)[np.isfinite(r64.predicted)] <= tol + ulp)
    np.testing.assert_allclose(r32.rho, r64.rho, atol=1e-7)


def test_host_redo_equals_device_float64(device):
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("the device float64 redo needs fp64")
    x = near_repeats(300)
    y = x[None, :]
    plan = resolve(x.size, E=3, tau=1, Tp=1, knn=None, exclusion_radius=0, lib=None, pred=None)
    rows = np.arange(0, plan.pred_points.size, 3)
    from pyedmcl.neighbors import neighbor_backend

    p_dev, v_dev = row_check.redo_float64(be, plan, x, y, rows, neighbor_backend("exact"), True)

    class NoFp64:
        info = type("I", (), {"fp64": False})()

    p_host, v_host = row_check.redo_float64(NoFp64(), plan, x, y, rows, None, True)
    np.testing.assert_allclose(p_host, p_dev, rtol=1e-13)
    np.testing.assert_allclose(v_host, v_dev, rtol=1e-9, atol=1e-24)


@pytest.mark.parametrize("case", ["columns", "nan"])
def test_state_space_predictions_within_tolerance(device, case, monkeypatch):
    """The state-space path (several columns, NaN in the data) checks and redoes alike
    (before: 0.26 and 0.56 of the deviation off on these data)."""
    x = near_repeats(seed=3)
    if case == "columns":
        data, kw, s = np.column_stack([x, np.roll(x, 2)]), dict(target=0, E=2), np.std(x)
    else:
        data, kw = x.copy(), dict(E=3)
        data[[5, 100, 400]] = np.nan
        s = np.nanstd(data)
    redone = []
    from pyedmcl.edm import simplex_states

    real = simplex_states._redo
    monkeypatch.setattr("pyedmcl.edm.simplex_states._redo",
                        lambda *a, **k: redone.append(a[3].size) or real(*a, **k))
    r32 = pe.simplex(data, device=device, variance=True, **kw)
    r64 = pe.simplex(data, device=device, variance=True, dtype="float64", **kw)
    if not get_backend(device).info.fp64:
        return  # no float64 redo of a state space there (documented)
    assert redone and redone[0] > 0
    err = np.abs(r32.predicted - r64.predicted)
    np.testing.assert_array_equal(np.isnan(r32.predicted), np.isnan(r64.predicted))
    assert np.nanmax(err) <= row_check.PREDICTION_TOL * s, np.nanmax(err) / s
    np.testing.assert_allclose(r32.rho, r64.rho, rtol=0, atol=1e-9)


def test_generate_computes_in_float64(device):
    """Forecasts feed back: float32's rounding compounds along a generation even where no
    step is off by the tolerance (logistic map, 300 steps: 7.7e-5 of the std; integer
    data, whose forecasts leave the grid: 1.7 std), so float32 requests compute in
    float64 where the device has it (found by random comparison with float64)."""
    if not get_backend(device).info.fp64:
        pytest.skip("needs fp64")
    x = _logistic(2000)
    for data, E, steps in ((x, 1, 300), (np.round(1000 * x), 3, 40),
                           (near_repeats(800, seed=3), 3, 30)):
        g32 = pe.generate(data, E=E, steps=steps, device=device)
        g64 = pe.generate(data, E=E, steps=steps, device=device, dtype="float64")
        np.testing.assert_array_equal(g32.predicted, g64.predicted)


def test_binary_grid_data_are_exact(device, monkeypatch):
    """Values on a binary grid (here halves) keep every float32 distance exact: nothing
    is checked or redone, and float32 equals float64 but for the weights' rounding."""
    x = np.round(lorenz_x(2000) * 2) / 2
    assert row_check.exact_in_float32(x - 4.0, 3)
    assert not row_check.exact_in_float32(np.round(lorenz_x(2000), 1), 3)
    spy_redo(monkeypatch, fail="an exact float32 call redid rows")
    r32 = pe.simplex(x, E=3, device=device)
    r64 = pe.simplex(x, E=3, device=device, dtype="float64")
    assert np.nanmax(np.abs(r32.predicted - r64.predicted)) <= 1e-6 * np.std(x)


def _grid_loop(z, coords):
    """The binary-grid test as a plain loop over the grids 2^-m, m = 0 .. 12 (the
    definition :func:`row_check.exact_in_float32` computes from each value's lowest bit)."""
    if z.size == 0 or not np.all(np.isfinite(z)):
        return False
    lo, hi = float(np.min(z)), float(np.max(z))
    head = np.ravel(z)[:1024]
    for m in range(13):
        step = 2.0 ** m
        if coords * ((hi - lo) * step) ** 2 >= 2.0 ** 24:
            return False
        g = head * step
        if np.all(g == np.round(g)):
            g = z * step
            return bool(np.all(g == np.round(g)))
    return False


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31))
def test_binary_grid_test_equals_the_loop_over_grids(seed):
    """The grid found from each value's lowest set bit gives the loop's verdict on grids
    of 2^-m (m up to 15, so some beyond the test's 12), integers, zeros, mixed signs,
    values off the grid past the prefix, non-finite values, subnormals, float32 and
    2-D data."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        m, size = int(rng.integers(0, 16)), int(rng.integers(1, 2000))
        z = np.round(rng.standard_normal(size) * 2.0 ** int(rng.integers(-3, 14))) / 2.0 ** m
        kind = int(rng.integers(0, 7))
        if kind == 1 and size > 1100:
            z[int(rng.integers(1024, size))] += 2.0 ** -20
        elif kind == 2:
            z[int(rng.integers(0, size))] = (np.nan, np.inf, -np.inf)[int(rng.integers(0, 3))]
        elif kind == 3:
            z = z * 0.0
        elif kind == 4:
            z = rng.standard_normal(size)
        elif kind == 5:
            z = np.concatenate([z, [5e-324, 1e-310]])
        elif kind == 6:
            z = np.repeat(z[:, None], 2, axis=1)
        if rng.integers(0, 4) == 0:
            z = z.astype(np.float32)
        coords = int(rng.integers(1, 40))
        assert row_check.exact_in_float32(z, coords) == _grid_loop(z, coords), (kind, m, coords)


def _decimal_loop(x, places):
    """The decimal-grid test as a plain loop over 0 .. ``places`` places."""
    head = np.asarray(x, np.float64).ravel()[:1024]
    if head.size == 0 or not np.all(np.isfinite(head)):
        return False
    for m in range(places + 1):
        g = head * 10.0 ** m
        if np.all(np.abs(g - np.round(g)) <= 1e-9 * np.maximum(1.0, np.abs(g))):
            return True
    return False


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31))
def test_decimal_grid_test_equals_the_loop_over_places(seed):
    """Every number of places tested at once gives the loop's verdict: decimals of up to
    7 places at magnitudes 1e-3 .. 1e7, a value off the grid, NaN, thirds, no values."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        m, size = int(rng.integers(0, 8)), int(rng.integers(0, 1500))
        x = np.round(rng.standard_normal(size) * 10.0 ** int(rng.integers(-3, 8)), m)
        kind = int(rng.integers(0, 4))
        if kind == 1 and size:
            x[int(rng.integers(0, size))] += 1e-7
        elif kind == 2 and size:
            x[int(rng.integers(0, size))] = np.nan
        elif kind == 3:
            x = np.round(x * 3) / 3
        places = int(rng.integers(0, 6))
        assert row_check.on_decimal_grid(x, places) == _decimal_loop(x, places), (m, kind)


def test_mostly_flagged_calls_run_in_float64_from_the_start(device, monkeypatch):
    """Where a sample says most rows would be redone (ties of one-decimal data), the call
    is the float64 one, without a float32 pass and a redo of most of it; data off a
    decimal grid take no sample (and keep float32), decimal data with few ties keep
    float32 after it."""
    from pyedmcl.edm import simplex as S

    monkeypatch.setattr(S, "SAMPLE_FROM", 256)
    monkeypatch.setattr(S, "SAMPLE_QUERIES", 128)
    spy_redo(monkeypatch, fail="redone after all")
    x = np.round(lorenz_x(3000), 1)
    if not get_backend(device).info.fp64:
        pytest.skip("float64 from the start needs fp64")
    r32 = pe.simplex(x, E=2, device=device)
    r64 = pe.simplex(x, E=2, device=device, dtype="float64")
    np.testing.assert_array_equal(r32.predicted, r64.predicted)
    assert r32.rho == r64.rho
    fractions = []
    real = S.sampled_flag_fraction
    monkeypatch.setattr(S, "sampled_flag_fraction",
                        lambda *a: fractions.append(real(*a)) or fractions[-1])
    spy_redo(monkeypatch)
    pe.simplex(_logistic(3000), E=3, device=device)
    assert not fractions  # no decimal grid: no sample
    assert not row_check.on_decimal_grid(_logistic(3000))
    pe.simplex(np.round(_logistic(3000), 4), E=3, device=device)
    assert fractions and fractions[0] < S.MOSTLY_FLAGGED


@pytest.mark.parametrize("nan_row", [13, 41])
def test_nan_targets_follow_the_float64_neighbours(device, nan_row):
    """A redone row takes the NaN rule (a neighbour with a NaN target predicts NaN) from
    its float64 neighbours: float32 gave NaN where float64 does not, and a value from the
    filled target where float64 gives NaN (found by random comparison)."""
    if not get_backend(device).info.fp64:
        pytest.skip("the state-space redo needs fp64")
    rng = np.random.default_rng(0)
    x, y = rng.uniform(2, 3, 60), rng.standard_normal(60)
    x[10], x[30], x[40] = 0.5, 0.6, 0.7
    x[12] = 0.7 + 1e-9  # ties row 40 in float32, nearer in time
    y[nan_row] = np.nan
    kw = dict(E=1, knn=2, lib=[1, 60], pred=[11, 11], device=device)
    np.testing.assert_array_equal(pe.simplex(x, y, **kw).predicted,
                                  pe.simplex(x, y, dtype="float64", **kw).predicted)


@pytest.mark.parametrize("knn", [63, 64, 65, 80])
def test_knn_at_and_beyond_the_fused_kernel(device, knn):
    """knn = 64 (the fused kernel keeps no next neighbour) and knn > 64 (sorted rows, the
    bound taken on the host) are checked too: a float32 tie at the knn-th place moved the
    prediction by 5e-2 of the deviation there (found by random comparison)."""
    if not get_backend(device).info.fp64:
        pytest.skip("the state-space redo needs fp64")
    rng = np.random.default_rng(1)
    n, q = 300, 150
    x = rng.uniform(5, 6, n) * rng.choice([-1, 1], n)
    y = rng.standard_normal(n)
    x[q] = 0.0
    near = rng.choice(np.r_[0:140, 160:n - 1], 80, replace=False)
    x[near] = np.sort(rng.uniform(0.1, 0.2, 80))
    kth = near[knn - 1]
    x[kth] = float(np.float32(x[kth]))
    x[q + 3] = x[kth] + 1e-12  # equal to the knn-th in float32, nearer in time
    y[kth + 1], y[q + 4] = -3.0, 3.0
    kw = dict(E=1, knn=knn, lib=[1, n], pred=[q + 1, q + 1], device=device)
    a = pe.simplex(x, y, **kw).predicted
    b = pe.simplex(x, y, dtype="float64", **kw).predicted
    assert np.abs(a - b).max() <= row_check.PREDICTION_TOL * np.std(y)


def test_host_flags_equal_the_numpy_bound():
    """The sorted rows' host bound is the kernel's (this file's NumPy reference)."""
    rng = np.random.default_rng(7)
    nq, K, E, n = 500, 4, 3, 800
    dist = np.sort(rng.random((nq, K + 1)) * 1e-3, axis=1)
    dist[::7, 0] = rng.random(dist[::7].shape[0]) * 1e-7
    dist[::5, K] = dist[::5, K - 1] + 1e-9
    dist = dist.astype(np.float32)
    idx = rng.integers(0, n - 2, (nq, K + 1)).astype(np.int32)
    idx[::11, K] = -1
    y = rng.standard_normal((1, n))
    qnorm = (rng.random(nq) * 3).astype(np.float32)
    thr, span = np.array([1e-5]), np.ptp(y, axis=1)
    b = numpy_bound(idx, dist, y[0], 1, qnorm, E, K, span[0])
    got = row_check.host_flags(idx, dist, y, 1, qnorm, E, thr, span, K)
    clear = np.abs(b - thr[0]) > 1e-6 * thr[0]
    np.testing.assert_array_equal(got[clear], (b > thr[0])[clear])
    assert 0 < got.sum() < nq


def test_knn_equal_to_the_library(device):
    """A library of exactly knn points has no next neighbour: the table is not widened
    (it was, and the exact back-end refused k = knn + 1; found by random comparison)."""
    x = np.round(_logistic(185) * 2.53, 2) + 1e4
    for knn, lib in ((63, "1 68"), (8, "1 13")):
        kw = dict(E=2, tau=2, Tp=3, knn=knn, lib=lib, pred="69 185", device=device)
        a = pe.simplex(x, **kw).predicted
        b = pe.simplex(x, dtype="float64", **kw).predicted
        assert np.nanmax(np.abs(a - b)) <= row_check.PREDICTION_TOL * np.std(x)


@pytest.mark.parametrize("tau,radius", [(1, 0), (3, 5)])
def test_redo_table_in_lists_equals_the_single_launch(device, monkeypatch, tau, radius):
    """The float64 redo's table from the library in several lists (one launch, merged
    on the device) is the single launch's, bit for bit: neighbours, order and distances."""
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("the device redo needs fp64")
    from pyedmcl.neighbors import neighbor_backend
    from pyedmcl.primitives.knn import knn_device

    monkeypatch.setattr(row_check, "REDO_CHUNK", 97)
    monkeypatch.setattr(row_check, "REDO_LISTS_ON_CPU", True)
    x = near_repeats(1500, seed=4)
    plan = resolve(x.size, E=3, tau=tau, Tp=1, knn=None, exclusion_radius=radius, lib=None,
                   pred=None)
    qpts = plan.pred_points[np.r_[0:3, 400:410, plan.pred_points.size - 3:plan.pred_points.size]]
    kw = dict(E=3, tau=tau, k=plan.knn, qpts=qpts, lpts=plan.lib_points,
              radius=plan.exclusion_radius)
    xd = be.to_device(x)
    got, tie = row_check.redo_table(be, neighbor_backend("exact"), xd, x.size, kw, None)
    want = knn_device(be, xd, x.size, real="double", **kw)
    assert tie is not None and be.to_host(tie)[0] == 0  # lists taken, no equal distances
    np.testing.assert_array_equal(be.to_host(got.idx), be.to_host(want.idx))
    np.testing.assert_array_equal(be.to_host(got.dist), be.to_host(want.dist))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 5))
def test_device_merge_equals_the_host_merge(device, seed, k):
    """The device's merge of library lists' tables is :func:`merge_tables`: the same
    table, and its tie flag set exactly where the host refuses (equal distances among
    the first k + 1), on tables with points listed twice, empty slots and ties."""
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("the merge runs in float64")
    from pyedmcl.kernels.lookup import LOOKUP

    rng = np.random.default_rng(seed)
    lists, nq = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    idx = rng.integers(-1, 12, (lists, nq, k)).astype(np.int32)
    # a point's distance is one value wherever it is listed; few values: ties are common
    dist = np.where(idx >= 0, (idx % rng.integers(6, 13)) / 4.0 + rng.integers(0, 2, (nq, 1)),
                    np.inf)
    qpts = rng.integers(0, 12, nq).astype(np.int32)
    want = row_check.merge_tables(idx, dist, qpts, k)
    oidx, odist = be.empty((1, nq, k), np.int32), be.empty((1, nq, k), np.float64)
    tie = be.to_device(np.zeros(1, np.int32))
    LOOKUP.launch_merge(be, be.to_device(idx), be.to_device(dist), lists, nq, k, k,
                        be.to_device(qpts), oidx, odist, tie)
    assert bool(be.to_host(tie)[0]) == (want is None)
    if want is not None:
        np.testing.assert_array_equal(be.to_host(oidx)[0], want[0])
        np.testing.assert_array_equal(be.to_host(odist)[0], want[1])


def test_merge_tables_order_and_refusal():
    """Candidates merge in the kernel's order, a point listed twice taken once; equal
    distances among the first k + 1 (whose squares the kernel ranked) give None."""
    idx = np.array([[[5, 9, -1]], [[9, 7, 2]]], np.int32)
    dist = np.array([[[0.1, 0.3, np.inf]], [[0.3, 0.2, 0.5]]])
    i, d = row_check.merge_tables(idx, dist, np.array([6]), 3)
    np.testing.assert_array_equal(i, [[5, 7, 9]])
    np.testing.assert_array_equal(d, [[0.1, 0.2, 0.3]])
    dist[1, 0, 2] = 0.3  # point 2 ties point 9 at the 4th place: order unknown here
    assert row_check.merge_tables(idx, dist, np.array([6]), 3) is None
    i, _ = row_check.merge_tables(idx, dist, np.array([6]), 2)  # the tie lies past k + 1
    np.testing.assert_array_equal(i, [[5, 7]])
    i, _ = row_check.merge_tables(idx[:, :, :2], dist[:, :, :2], np.array([6]), 1)
    np.testing.assert_array_equal(i, [[5]])


def test_nothing_flagged_reads_no_flags(device, monkeypatch):
    """Ordinary data flag no row: the count and list come back with the skill, and
    neither the flags nor a redo follow (the cost of the check is the lookup's own)."""
    from pyedmcl.primitives import lookup

    monkeypatch.setattr(lookup, "flagged_queries",
                        lambda *a: pytest.fail("the flags were read"))
    spy_redo(monkeypatch, fail="a row was redone")
    r = pe.simplex(_logistic(800), E=3, device=device)
    assert np.isfinite(r.rho)
    assert row_check.on_decimal_grid(np.round(_logistic(800), 2))  # decimal data: sampled
    assert not row_check.on_decimal_grid(_logistic(800) + 1e-9)


def test_widened_table_tuning():
    """The check's wider table: on GPUs the tuning of the table it widens (the next
    bucket's was 15% slower on the H100), on CPUs its own (None: knn_device's choice)."""
    import dataclasses
    from types import SimpleNamespace

    from conftest import CPU_DEVICE

    from pyedmcl.kernels.knn import KNN
    from pyedmcl.primitives.knn import widened_params

    be = get_backend(CPU_DEVICE)
    pts = np.arange(2000, dtype=np.int32)
    kw = dict(E=7, tau=2, k=9, qpts=pts, lpts=pts, base_k=8)
    assert widened_params(be, **kw) is None
    gpu = SimpleNamespace(info=dataclasses.replace(be.info, device_type="gpu"))
    spec = {"E": 7, "TAU": 2, "K": 9, "METRIC": "euclidean", "REAL": "float"}
    want = KNN.params_for(gpu, spec, 2000, nq_total=2000, contiguous=True, bucket_k=8)
    assert widened_params(gpu, **kw) == want
    assert KNN.spec_bucket({**spec, "K": 8}) != KNN.spec_bucket(spec)  # another bucket


def _enqueue_cases():
    x = near_repeats(400, seed=5)  # 51, 68 and 7 rows flagged
    y = np.stack([x, np.roll(x, 3) * 2.0 + 1.0])
    return {
        "self": (x, None, dict(E=3)),
        "variance, Tp 2, exclusion": (x, None, dict(E=2, tau=2, Tp=2, exclusion_radius=3,
                                                      variance=True)),
        "two targets, lib and pred": (x, y, dict(E=3, lib="1 266", pred="267 390")),
        "decimals E=1": (np.round(lorenz_x(1200), 1), None, dict(E=1)),  # > 128 flagged
    }


@pytest.mark.parametrize("case", list(_enqueue_cases()))
@pytest.mark.parametrize("slots", [128, "128 chunked", 2])
def test_enqueued_redo_equals_the_redo_after_the_wait(device, monkeypatch, request, case, slots):
    """The float64 redo enqueued behind the first pass (no host round trip) gives the
    redo after the wait's results bit for bit: predictions, variances and skill; also
    with each slot's library scanned in chunks merged on the device (as on GPUs); with
    more flagged rows than slots the rows are redone after the wait, equal again."""
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("the device redo needs fp64")
    if slots == "128 chunked":
        slots = 128
        monkeypatch.setattr(row_redo, "REDO_GROUPS_PER_CU", 10 ** 4)
        monkeypatch.setattr(row_redo, "REDO_MIN_POINTS", 1)
        monkeypatch.setattr(row_redo, "REDO_MAX_CHUNKS", 5)
        monkeypatch.setattr(row_redo, "REDO_SPLITS", (16,))
    chunked: list = []
    real_chunked = pknn.knn_device_chunked
    monkeypatch.setattr(pknn, "knn_device_chunked",
                        lambda *a, **k: chunked.append(k["chunks"]) or real_chunked(*a, **k))
    x, y, kw = _enqueue_cases()[case]
    from pyedmcl.edm import simplex as S
    monkeypatch.setattr(S, "RESOLVE_IN_LOOKUP", False)  # the enqueued redo takes them all
    monkeypatch.setattr(row_redo, "ENQUEUE_ON", ())
    want = pe.simplex(x, y, device=device, **kw)
    monkeypatch.setattr(row_redo, "ENQUEUE_ON", ("gpu", "cpu"))
    monkeypatch.setattr(row_redo, "REDO_SLOTS", slots)
    taken: list = []
    real_fixed = row_redo.EnqueuedRedo.fixed
    monkeypatch.setattr(row_redo.EnqueuedRedo, "fixed",
                        lambda self, rows: taken.append(real_fixed(self, rows)) or taken[-1])
    got = pe.simplex(x, y, device=device, **kw)
    for name in ("predicted", "variance", "rho", "mae", "rmse"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert taken, "no row was flagged: the case does not test the redo"
    if slots == 128 and case != "decimals E=1":
        assert taken[0] is not None  # the enqueued redo held every flagged row
    if slots == 2:
        assert taken[0] is None  # more flagged rows than slots: redone after the wait
    if request.node.callspec.params["slots"] == "128 chunked":
        assert chunked and chunked[0] == 5


@pytest.mark.parametrize("E, tau", [(1, 1), (7, 2), (12, 3), (5, -2), (70, 1)])
def test_point_norms_equal_the_direct_sums(E, tau):
    """The query norms the bound reads, from a run of points (slices; E = 70: running
    sums) and from gapped points (running sums): the direct O(n E) float64 sums, the
    squares within 1e-12 relative plus the running sums' cancellation, 1e-15 of the
    total."""
    rng = np.random.default_rng(E)
    z = rng.standard_normal(600) * 3 + 1
    t = abs(tau)
    npts = z.size - (E - 1) * t
    direct = np.sqrt(np.stack([z[k * t:k * t + npts] ** 2 for k in range(E)]).sum(0))
    for pts in (np.arange(4, npts - 3), np.arange(0, npts, 3)):
        got = row_check.point_norms(z * z, pts, E, tau)
        np.testing.assert_allclose(got ** 2, direct[pts] ** 2, rtol=1e-12,
                                   atol=1e-15 * float((z * z).sum()))
