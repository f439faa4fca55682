"""float32 you can trust (issue #20 item 4): offset/scale invariance, map-back, fallback.

On main before this change, CCM on a coupled-logistic pair gave rho 0.976 and the same
data + 1e6 gave 0.306 (float32 distances cancel the offset); xmap had no float64. Each
test below fails there. Sizes are small: every test runs in well under a second per device.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import CPU_DEVICE, failing_check

import pyedmcl as pe
from pyedmcl._precision import MAX_MERGED_FRACTION, PrecisionWarning, prepare
from pyedmcl.data import coupled_logistic, logistic_map

XY = coupled_logistic(400)
X, Y = XY[:, 0], XY[:, 1]
SHIFTS = [(1e6, 1.0), (0.0, 1e-6), (0.0, 1e6)]  # (offset, scale) applied to the data


def test_ccm_offset_invariant(device):
    """The issue's case: + 1e6 gave rho 0.306 instead of 0.976 (float32, no warning)."""
    kw = dict(E=2, lib_sizes=[300], sample=10, seed=1, device=device)
    plain = pe.ccm(X, Y, **kw)
    assert plain.rho_yx[-1] > 0.9
    for off, sc in SHIFTS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrecisionWarning)
            got = pe.ccm(X * sc + off, Y * sc + off, **kw)
        np.testing.assert_allclose(got.rho_yx, plain.rho_yx, atol=0.01)
        np.testing.assert_allclose(got.rho_xy, plain.rho_xy, atol=0.01)


def test_simplex_offset_scale_and_mapped_back(device):
    """Predictions come back in data units and equal float64's on the same data, offset or
    scaled: the float32 path centres only, so pyEDM's weight floor exp(-d / max(d_min,
    1e-6)), in data units, binds as in float64 (at 1e-6 of the units it binds: rho 0.30
    there against 0.43 unscaled, in float64 and in pyEDM alike)."""
    kw = dict(E=2, Tp=1, lib=[1, 200], pred=[201, 399], device=device)
    plain = pe.simplex(X, Y, **kw)
    for off, sc in SHIFTS:
        x, y = X * sc + off, Y * sc + off
        got = pe.simplex(x, y, **kw)
        r64 = pe.simplex(x, y, dtype="float64", **kw)
        if sc >= 1:  # the floor does not bind: the unshifted data's rho
            assert abs(got.rho - plain.rho) < 0.01
        assert abs(got.rho - r64.rho) < 1e-4
        spread = Y.std() * sc
        assert np.nanmax(np.abs(got.predicted - r64.predicted)) < 1e-4 * spread
        obs = np.where(np.isnan(r64.observed), np.nan, y[got.times.clip(0, y.size - 1)])
        np.testing.assert_array_equal(got.observed, obs)
        assert abs(got.mae - r64.mae) < 1e-4 * spread
        assert abs(got.rmse - r64.rmse) < 1e-4 * spread
        # the device path maps back on the device (float32 output: its own rounding)
        dev = pe.simplex(x, y, return_device=True, **kw)
        assert np.nanmax(np.abs(dev.predicted.get() - r64.predicted)) < 1e-4 * spread + 1e-7 * off


def test_simplex_float32_floor_in_data_units(device):
    """A series at 1e-5 of its units (a logistic map): float32 gives float64's and pyEDM's
    rho (0.99939843; scaling it would have given 0.99974994, the unscaled series')."""
    x = np.empty(200)
    x[0] = 0.4
    for t in range(199):
        x[t + 1] = 3.9 * x[t] * (1 - x[t])
    x *= 1e-5
    kw = dict(E=2, Tp=1, lib=[1, 100], pred=[101, 200], device=device)
    got = pe.simplex(x, **kw).rho
    assert got == pytest.approx(pe.simplex(x, dtype="float64", **kw).rho, abs=1e-6)
    assert got != pytest.approx(pe.simplex(x * 1e5, **kw).rho, abs=1e-5)  # the floor binds
    pyEDM = pytest.importorskip("pyEDM")
    import pandas as pd
    out = pyEDM.Simplex(dataFrame=pd.DataFrame({"time": np.arange(1, 201), "x": x}),
                        columns="x", target="x", lib="1 100", pred="101 200", E=2, Tp=1)
    ok = out[["Observations", "Predictions"]].dropna().to_numpy()
    assert got == pytest.approx(np.corrcoef(ok[:, 0], ok[:, 1])[0, 1], abs=1e-6)


def test_scans_offset_invariant(device):
    plain = pe.embed_dimension(X, max_E=4, device=device)
    ref = pe.predict_interval(X, E=2, max_Tp=3, dtype="float64", device=device)
    for off, sc in SHIFTS:
        got = pe.embed_dimension(X * sc + off, max_E=4, device=device)
        r64 = pe.embed_dimension(X * sc + off, max_E=4, dtype="float64", device=device)
        np.testing.assert_allclose(got.rho, r64.rho, atol=1e-4)
        if sc >= 1:  # pyEDM's floor (1e-6 in data units) binds at 1e-6 of the units
            np.testing.assert_allclose(got.rho, plain.rho, atol=0.01)
            np.testing.assert_allclose(got.mae, plain.mae * sc, rtol=1e-3)
        tp = pe.predict_interval(X * sc + off, E=2, max_Tp=3, device=device)
        tp64 = pe.predict_interval(X * sc + off, E=2, max_Tp=3, dtype="float64", device=device)
        np.testing.assert_allclose(tp.rmse, tp64.rmse, rtol=1e-3)
        if sc >= 1:
            np.testing.assert_allclose(tp.rmse, ref.rmse * sc, rtol=1e-3)


def test_smap_offset_scale_coefficients_mapped_back(device):
    kw = dict(E=2, theta=2.0, lib=[1, 150], pred=[151, 299], device=device)
    plain = pe.smap(X, Y, **kw)
    for off, sc in SHIFTS + [(5.0, 3.0)]:
        for ridge in (0.0, 0.1):
            x, y = X * sc + off, Y * sc + off
            got = pe.smap(x, y, ridge=ridge * sc * sc, **kw)
            ref = pe.smap(x, y, ridge=ridge * sc * sc, dtype="float64", **kw)
            if ridge == 0:
                assert abs(got.rho - plain.rho) < 0.01
            spread = Y.std() * sc
            assert np.max(np.abs(got.predicted - ref.predicted)) < 1e-4 * spread
            # slopes are unit-free here (x and y scaled alike); the intercept carries
            # mean_x * sum(slopes): its float32 tolerance scales with that term
            np.testing.assert_allclose(got.coefficients[:, 1:], ref.coefficients[:, 1:],
                                       atol=1e-4 * np.abs(ref.coefficients[:, 1:]).max())
            c0_scale = spread + abs(off) * np.abs(ref.coefficients[:, 1:]).sum(axis=1)
            assert np.all(np.abs(got.coefficients[:, 0] - ref.coefficients[:, 0]) < 1e-4 * c0_scale)


def test_xmap_offset_invariant_and_float64(device):
    rng = np.random.default_rng(0)
    P = np.column_stack([XY[:300], np.cumsum(rng.standard_normal(300))])
    plain = np.asarray(pe.xmap(P, E=2, device=device).rho)
    r64 = pe.xmap(P, E=2, device=device, dtype="float64")
    assert np.asarray(r64.rho).dtype == np.float32  # the stored matrix stays float32
    np.testing.assert_allclose(plain, np.asarray(r64.rho), atol=1e-4)
    for off, sc in SHIFTS:
        got = np.asarray(pe.xmap(P * sc + off, E=2, device=device).rho)
        np.testing.assert_allclose(got, plain, atol=0.01)
    # float64 needs no transform: an offset barely moves it either
    np.testing.assert_allclose(np.asarray(pe.xmap(P + 1e6, E=2, device=device,
                                                  dtype="float64").rho),
                               np.asarray(r64.rho), atol=1e-5)


def test_rqa_offset_same_recurrences(device):
    x = logistic_map(400)
    y = logistic_map(400, x0=0.3)
    base = pe.rqa(x, E=2, radius=0.1, device=device)
    ref = pe.rqa(x, E=2, radius=0.1, device=device, dtype="float64")
    assert base.n_recurrences == ref.n_recurrences
    for off in (1e3, 1e6):
        got = pe.rqa(x + off, E=2, radius=0.1, device=device)
        assert got.n_recurrences == ref.n_recurrences
        assert abs(got.DET - base.DET) < 0.01
        c = pe.cross_rqa(x + off, y + off, E=2, radius=0.1, device=device)
        c64 = pe.cross_rqa(x, y, E=2, radius=0.1, device=device, dtype="float64")
        assert c.n_recurrences == c64.n_recurrences
        j = pe.joint_rqa(x + off, y - off, E=2, radius=0.1, device=device)
        j64 = pe.joint_rqa(x, y, E=2, radius=0.1, device=device, dtype="float64")
        assert j.n_recurrences == j64.n_recurrences
        im = pe.recurrence_plot(x + off, E=2, radius=0.1, size=64, device=device)
        np.testing.assert_array_equal(im, pe.recurrence_plot(x, E=2, radius=0.1, size=64,
                                                             device=device))


def test_float64_is_never_transformed(device):
    """float64 is never transformed: each call's results equal, bit for bit, the same call
    with the float32 preparation switched off (:func:`unstandardised`: inputs reach the
    kernels as given), in the same run on the same device -- so no recorded value of one
    CPU model is needed (Intel's runtime vectorises and orders sums per CPU). The data
    sit at +10 so that an accidental centring or scaling would move the last bits; pyEDM
    (float64 NumPy) is the oracle for the values themselves."""
    from pyedmcl._precision import unstandardised

    xy = coupled_logistic(150) + 10.0
    x, y = xy[:, 0], xy[:, 1]
    kw = dict(dtype="float64", device=device)

    def results() -> dict[str, list[float]]:
        r = pe.simplex(x, y, E=2, Tp=1, lib=[1, 80], pred=[81, 149], **kw)
        s = pe.smap(x, E=2, theta=2.0, lib=[1, 80], pred=[81, 149], **kw)
        c = pe.ccm(x, y, E=2, lib_sizes=[20, 60], sample=5, seed=1, **kw)
        e = pe.embed_dimension(x, max_E=4, **kw)
        q = pe.rqa(x, E=2, radius=0.1, **kw)
        return {"simplex": [r.rho, r.mae, r.rmse, *r.predicted[:4]],
                "smap": [s.rho, s.mae, s.rmse, *s.predicted[:3], *s.coefficients[0]],
                "ccm": [*c.rho_xy, *c.rho_yx], "edim": [*e.rho, *e.mae],
                "rqa": [q.RR, q.DET, q.L, q.LAM]}

    got = results()
    with unstandardised():
        plain = results()
    for k, vals in plain.items():
        assert [float(v).hex() for v in got[k]] == [float(v).hex() for v in vals], k
    # the values themselves: pyEDM's Simplex and S-map on the same rows (float64 NumPy;
    # summation orders differ, so 1e-12 relative)
    pyEDM = pytest.importorskip("pyEDM")
    import pandas as pd

    df = pd.DataFrame({"time": np.arange(1, 151), "x": x, "y": y})
    ref = pyEDM.Simplex(dataFrame=df, columns="x", target="y", E=2, Tp=1, lib=[1, 80],
                        pred=[81, 149])
    pred = ref["Predictions"].to_numpy()[1:5]
    np.testing.assert_allclose(got["simplex"][3:7], pred, rtol=1e-12)


def _clustered(n: int = 200) -> np.ndarray:
    """Two clusters 1 apart with a spread of 1e-9 inside each: distinct in float64, but
    standardised values differ by ~2e-9, below float32's resolution (~1e-7)."""
    rng = np.random.default_rng(3)
    return np.repeat([0.0, 1.0], n // 2) + 1e-9 * logistic_map(n) + 1e-10 * rng.random(n)


def test_warning_when_float32_would_merge_values(device):
    x = _clustered()
    with pytest.warns(PrecisionWarning, match="float64.*dtype='float64'"):
        got = pe.simplex(x, E=2, device=device)
    ref = pe.simplex(x, E=2, dtype="float64", device=device)
    np.testing.assert_array_equal(got.predicted, ref.predicted)  # it ran in float64
    with pytest.warns(PrecisionWarning):
        pe.ccm(x, x[::-1].copy(), E=2, lib_sizes=[50], sample=2, seed=0, device=device)
    with warnings.catch_warnings():  # dtype="float64" silences it
        warnings.simplefilter("error", PrecisionWarning)
        pe.simplex(x, E=2, dtype="float64", device=device)


def test_simplex_targets_that_merge_in_float32_stay_float32(device):
    """Simplex's targets decide nothing (they are averaged with weights the library's
    distances set), so the merge check covers the library only: clustered targets whose
    values merge in float32 keep the call in float32, with no warning, and predictions
    within 1e-5 of the targets' spread of float64's (a merged value moves a prediction
    by float32's rounding, the row check's to bound); the same series as the library
    still switches to float64."""
    x = logistic_map(300)
    y = _clustered(300)
    y2 = np.stack([y, y[::-1].copy()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        got = pe.simplex(x, target=y2, E=2, device=device)
    ref = pe.simplex(x, target=y2, E=2, dtype="float64", device=device)
    for g, r, t in zip(np.atleast_2d(got.predicted), np.atleast_2d(ref.predicted), y2,
                       strict=True):
        ok = np.isfinite(r)
        assert np.abs(g[ok] - r[ok]).max() <= 1e-5 * t.std()
    with pytest.warns(PrecisionWarning):
        pe.simplex(y, target=x, E=2, device=device)


@pytest.mark.parametrize("target", ["self", "other"])
def test_smap_checks_float32_beside_the_device_work(device, target):
    """smap() runs float32 while the merge check sorts the series; where it fails (x, or
    a target float32 cannot hold), one warning naming the series and the float64
    results, bit for bit; a series float32 holds gives no warning."""
    bad, ok = _clustered(), logistic_map(200)
    x, y, name = (bad, None, "x") if target == "self" else (ok, bad, "target")
    kw = dict(E=2, theta=2.0, device=device)
    with pytest.warns(PrecisionWarning, match=f"{name}: .*float64") as rec:
        got = pe.smap(x, y, **kw)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    ref = pe.smap(x, y, dtype="float64", **kw)
    for f in ("predicted", "coefficients", "variance", "rho", "mae", "rmse"):
        np.testing.assert_array_equal(getattr(got, f), getattr(ref, f), err_msg=f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        pe.smap(ok, **kw)


@pytest.mark.parametrize("polls", [0, 3, None], ids=["first", "during", "after"])
def test_rqa_checks_float32_beside_the_device_work(device, polls, monkeypatch):
    """rqa() runs float32 while the merge check sorts the series. Where the check fails
    before the first launch, during the run (the run stops: the launches already made
    are all it cost) or after it, the call gives one warning and the float64 result,
    histograms bit for bit."""
    launches, stopped = failing_check(monkeypatch, polls)
    x = _clustered()
    p = {"VEC": 4, "WG": 4, "EDGE": 25, "BITS": 2, "PH": 64, "SHARE": 1}  # many launches
    with pytest.warns(PrecisionWarning, match="x: .*float64") as rec:
        got = pe.rqa(x, E=2, radius=0.1, device=device, params=p)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    f32 = launches.count("float")
    if polls == 0:   # failed at the first launch
        assert stopped == [0] and f32 == 0
    elif polls == 3:  # the verdict at the second launch's poll: stopped at the third
        assert stopped == [2] and f32 == 2
    else:            # the float32 run was complete before the verdict
        assert not stopped and f32 >= 10, f32
    ref = pe.rqa(x, E=2, radius=0.1, device=device, dtype="float64", params=p)
    assert got.settings["dtype"] == "float64"
    for h in ("diagonal_hist", "vertical_hist", "white_hist"):
        np.testing.assert_array_equal(getattr(got, h), getattr(ref, h))
    with warnings.catch_warnings():  # a series float32 holds: no warning, float32
        warnings.simplefilter("error", PrecisionWarning)
        assert pe.rqa(logistic_map(200), E=2, radius=0.1, device=device).settings[
            "dtype"] == "float32"


@pytest.mark.parametrize("kind", ["cross", "joint", "joint-y"])
def test_cross_and_joint_rqa_check_float32_beside_the_device_work(device, kind, monkeypatch):
    """cross_rqa() and joint_rqa() run float32 beside the merge check as rqa() does: a
    series float32 cannot hold (either one of a joint pair) stops the run a few launches
    in, gives one warning naming it and the float64 histograms."""
    launches, stopped = failing_check(monkeypatch, 3)
    p = {"VEC": 4, "WG": 4, "EDGE": 25, "BITS": 2, "PH": 64, "SHARE": 1}
    x, ok = _clustered(), logistic_map(200)
    if kind == "cross":
        fn, name = (lambda **k: pe.cross_rqa(x, ok[:150], E=2, radius=0.1, **k)), "x"
    elif kind == "joint":
        fn, name = (lambda **k: pe.joint_rqa(x, ok, E=2, radius=0.1, **k)), "x"
    else:
        fn, name = (lambda **k: pe.joint_rqa(ok, x, E=2, radius=0.1, **k)), "y"
    with pytest.warns(PrecisionWarning, match=f"{name}: .*float64") as rec:
        got = fn(device=device, params=p)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    assert stopped == [2] and launches[:2] == ["float", "float"]  # stopped at the third
    ref = fn(device=device, params=p, dtype="float64")
    assert got.settings["dtype"] == "float64"
    for h in ("diagonal_hist", "vertical_hist", "white_hist"):
        np.testing.assert_array_equal(getattr(got, h), getattr(ref, h))


def test_xmap_checks_float32_beside_the_map(device):
    """In memory the map runs while the merge check sorts the series; a series float32
    cannot hold still gives one warning and the float64 matrix, bit for bit."""
    x = _clustered()
    P = np.column_stack([x, logistic_map(200), x[::-1]])
    with pytest.warns(PrecisionWarning, match="X\\[0\\].*float64") as rec:
        got = pe.xmap(P, E=2, device=device)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    ref = pe.xmap(P, E=2, device=device, dtype="float64")
    np.testing.assert_array_equal(np.asarray(got.rho), np.asarray(ref.rho))
    with pytest.raises(ValueError, match="lacks fp64"):  # the deferred verdict refuses too
        prepare([P.T], np.float32, fp64=False, names=["X"], deferred=True).float32_holds()
    ok = prepare([P[:, 1:2].T], np.float32, fp64=True, names=["X"], deferred=True)
    assert ok.float32_holds() and ok.dtype == np.float32


def test_merge_detection_and_refusal_without_fp64():
    x = _clustered()
    with pytest.raises(ValueError, match="lacks fp64.*rescale"):
        prepare([x], np.float32, fp64=False, names=["x"])
    # ordinary data merge far fewer values than the threshold: no switch
    walk = np.cumsum(np.random.default_rng(0).standard_normal(20000))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        p = prepare([walk + 1e6], np.float32, fp64=True, names=["x"])
    assert p.dtype == np.float32 and MAX_MERGED_FRACTION > 0.01
    np.testing.assert_allclose(p.affine[0].back(p.series[0]), walk + 1e6, rtol=1e-15)
    # float64: given back unchanged (identity map)
    q = prepare([walk], np.float64, fp64=True, names=["x"])
    assert q.series[0] is not None and np.array_equal(q.series[0], walk)
    assert q.affine[0].is_identity


@pytest.mark.parametrize("bad", ["float16", "int32", "floaty", 3])
def test_dtype_validated_everywhere(bad):
    x = logistic_map(60)
    calls = [
        lambda: pe.simplex(x, E=2, dtype=bad),
        lambda: pe.smap(x, E=2, theta=1.0, dtype=bad),
        lambda: pe.ccm(x, x, E=2, lib_sizes=[20], sample=2, dtype=bad),
        lambda: pe.embed_dimension(x, max_E=3, dtype=bad),
        lambda: pe.predict_interval(x, E=2, max_Tp=2, dtype=bad),
        lambda: pe.predict_exclusion_radius(x, E=2, radii=[0, 1], dtype=bad),
        lambda: pe.predict_nonlinear(x, E=2, thetas=[1.0], dtype=bad),
        lambda: pe.xmap(np.column_stack([x, x[::-1]]), E=2, dtype=bad),
        lambda: pe.rqa(x, radius=0.1, dtype=bad),
        lambda: pe.cross_rqa(x, x, radius=0.1, dtype=bad),
        lambda: pe.joint_rqa(x, x, radius=0.1, dtype=bad),
        lambda: pe.recurrence_plot(x, radius=0.1, dtype=bad),
        lambda: pe.knn_table(x, E=2, dtype=bad),
        lambda: pe.knn_search(x, E=2, dtype=bad),
        lambda: pe.pairwise_distances(x, E=2, dtype=bad),
        lambda: pe.measure_recall(x, E=2, knn_method="exact", dtype=bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="dtype"):
            call()


def test_cli_dtype(tmp_path, capsys):
    from pyedmcl.cli.main import main

    P = np.column_stack([XY[:120], logistic_map(120)])
    np.save(tmp_path / "p.npy", P)
    out = tmp_path / "m.zarr"
    assert main(["xmap", str(tmp_path / "p.npy"), "-o", str(out), "--E", "2", "--dtype",
                 "float64", "-q", "--device", CPU_DEVICE]) == 0
    from pyedmcl.xmap.store import XmapStore
    assert XmapStore.open_existing(out).params["dtype"] == "float64"
    capsys.readouterr()
    assert main(["xmap", str(tmp_path / "p.npy"), "-o", str(out), "--dtype", "half"]) == 2
    assert "--dtype" in capsys.readouterr().err


@pytest.mark.parametrize("cpus", [1, 4])
def test_panel_standardised_in_bands_bit_identical(monkeypatch, cpus):
    """A panel is standardised by chunks of rows (ragged: 2 rows of 300 a chunk, 203
    rows), a large one in bands of rows on threads: the same shifts, scales and values
    bit for bit as in one piece (constant, offset and wide-range rows too), and the cast
    made beside it is the cast of those values."""
    from pyedmcl import _precision as P
    rng = np.random.default_rng(5)
    X = rng.standard_normal((203, 300)).cumsum(axis=1)
    X[7] = 3.0
    X[9] *= 1e6
    X[11] += 1e4
    one = P._affine(X, True, None)
    from pyedmcl import _bands
    monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1)
    monkeypatch.setattr(_bands.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(P, "_CHUNK_VALUES", 700)
    assert _bands.row_bands(X)[1] == cpus   # the bands are what runs
    f, z, z32 = P._standardise(X, True, None, np.float32)
    np.testing.assert_array_equal(f.shift, one.shift)
    np.testing.assert_array_equal(f.scale, one.scale)
    np.testing.assert_array_equal(f.spread, one.spread)
    np.testing.assert_array_equal(z, one.forward(X))
    assert z32.dtype == np.float32 and z32.flags.c_contiguous
    np.testing.assert_array_equal(z32, one.forward(X).astype(np.float32))
    f, z, none = P._standardise(X, False, np.array([0.5]))
    assert none is None
    np.testing.assert_array_equal(z, P._affine(X, False, np.array([0.5])).forward(X))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf, in threads
def test_long_rows_checked_in_value_buckets(monkeypatch):
    """A long row's merge check sorts value buckets on several threads (keyed by the
    float32 cast, so values that merge share a bucket): the same fraction as the one
    sort, with ties, clusters that merge, NaNs and infinities, a constant row."""
    from pyedmcl import _precision

    rng = np.random.default_rng(5)
    n = 20_000
    rows = [logistic_map(n), np.round(rng.standard_normal(n), 2),
            np.concatenate([1e3 + 1e-9 * rng.standard_normal(n // 2), rng.standard_normal(n // 2)]),
            np.where(rng.random(n) < 0.02, np.nan, rng.standard_normal(n)),
            np.full(n, np.nan), np.full(n, 2.5),
            np.concatenate([[np.inf, -np.inf, np.inf], rng.standard_normal(n)])]
    monkeypatch.setattr(_precision, "_BUCKETED_VALUES", 1000)
    for r in rows:
        one_sort = _precision._merged_slab(r[None])[0]
        for threads in (2, 3, 8):
            assert _precision._merged_row_bucketed(r, threads) == one_sort
        assert _precision.merged_fraction(np.stack([r, r[::-1]])).tolist() == [one_sort] * 2
        for limit in (0.0, 0.01, 0.05, 0.5):  # the map's and RQA's check: a bound first
            got = _precision._merged_row_bucketed(r, 3, limit)
            assert got == one_sort if one_sort > limit else one_sort <= got <= limit
            got = _precision.merged_beyond(r, limit)[0]
            assert got == one_sort if one_sort > limit else one_sort <= got <= limit
    assert _precision._merged_slab(rows[2][None])[0] > 0.4  # the clusters do merge


def test_centred_only_tiny_spread_runs_in_float64():
    """A centred-only (Simplex, xmap) float32 input whose spread would put squared
    distances among float32's subnormals runs in float64, with one warning, even where
    it is one row of a panel whose other rows are fine."""
    X = np.stack([X_SINE, X_SINE * 1e-14])
    with pytest.warns(PrecisionWarning, match=r"X: values spread over .*\(std >= 1e-12\)"):
        p = prepare([X], np.float32, True, names=["X"], scale=False)
    assert p.dtype == np.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        assert prepare([X[:1]], np.float32, True, names=["X"], scale=False).dtype == np.float32
        assert prepare([X], np.float32, True, names=["X"]).dtype == np.float32  # scaled: fine


X_SINE = np.sin(np.arange(300) * 0.3)


@pytest.mark.parametrize("inline", [False, True], ids=["thread", "inline"])
def test_gated_check_starts_when_opened_or_asked(monkeypatch, inline):
    """A gated merge check starts at start_check() (once) or at the first question, and
    gives the verdict the immediate check gives: on its thread, or for a small input
    (INLINE_CHECK_VALUES) on the calling thread, with the same verdicts."""
    import pyedmcl._precision as prec

    submitted, ran = [], []
    pool = prec._check_pool()

    class Counting:
        def submit(self, fn):
            submitted.append(fn)
            return pool.submit(fn)
    monkeypatch.setattr(prec, "_check_pool", lambda: Counting())
    monkeypatch.setattr(prec, "INLINE_CHECK_VALUES", 1 << 15 if inline else 0)
    x = _clustered()
    bad = prepare([x], np.float32, fp64=True, names=["x"], deferred="gated")
    assert bad.dtype == np.float32 and submitted == []
    check = bad._gated[0]
    bad._gated = (lambda: ran.append(1) or check(), *bad._gated[1:])
    bad.start_check()
    bad.start_check()
    assert len(submitted) == (0 if inline else 1)
    if inline:
        assert ran == [1]  # done at start_check, on this thread
    with pytest.warns(PrecisionWarning, match="x: .*float64"):
        assert not bad.float32_holds()
    assert ran == [1]
    good = prepare([logistic_map(500)], np.float32, fp64=True, names=["x"], deferred="gated")
    assert good.float32_holds() and len(submitted) == (0 if inline else 2)  # asked: started then
    with pytest.raises(ValueError, match="deferred='soon' is invalid"):
        prepare([x], np.float32, fp64=True, names=["x"], deferred="soon")


def test_xmap_opens_its_merge_check_once_every_device_has_a_block(monkeypatch, device):
    """The in-memory map gates its merge check: it starts once, after each device of the
    job queued its first block (the check's threads no longer slow the map's start)."""
    import pyedmcl._precision as prec
    from pyedmcl.xmap import scheduler
    from pyedmcl.xmap.engine import XmapEngine

    events = []
    real_start, real_block = prec.Prepared.start_check, XmapEngine.block_async

    def start_check(self, *a, **k):
        events.append("start" if self._gated is not None else "again")
        return real_start(self, *a, **k)

    def block_async(self, *a, **k):
        events.append("block")
        return real_block(self, *a, **k)
    monkeypatch.setattr(prec.Prepared, "start_check", start_check)
    monkeypatch.setattr(scheduler.XmapEngine, "block_async", block_async)
    P = np.column_stack([logistic_map(300, r=3.7 + 0.05 * i) for i in range(6)])
    got = pe.xmap(P, E=2, device=device, block_rows=2)
    assert events[0] == "block" and events.count("start") == 1
    assert events.index("start") == 1  # right after the one device's first block
    assert events.count("block") == 3 and np.asarray(got.rho).dtype == np.float32


def test_xmap_names_the_column_float32_cannot_hold(device):
    """A DataFrame's column that float32 cannot hold is named in the warning, beside its
    row of the panel."""
    import pandas as pd

    x = _clustered()
    df = pd.DataFrame({"walk": np.cumsum(np.random.default_rng(2).standard_normal(x.size)),
                       "clusters": x})
    with pytest.warns(PrecisionWarning, match=r"X\[1\] \(column 'clusters'\): .*float64"):
        pe.xmap(df, E=2, device=device)


def test_row_mean_and_std_from_one_sum_are_numpys():
    """The standardisation takes each row's mean and std from one sum (no pass of its own
    for the mean): bit for bit numpy's ``mean(axis=1)`` and ``std(axis=1)``, with offsets
    far from zero, NaN and inf rows, one-value rows, and other dtypes (numpy's calls)."""
    from pyedmcl._precision import _mean_std
    rng = np.random.default_rng(3)
    for shape in [(5, 1000), (17, 3780), (3, 1), (4, 2), (2, 129), (1, 100_000)]:
        for off in (0.0, 1e6, -3e9, 1e-8):
            a = np.cumsum(rng.standard_normal(shape) * rng.uniform(1e-3, 1e3), axis=1) + off
            if shape[0] > 2:
                a[0, 0], a[1, -1] = np.nan, np.inf
            ints = np.round(np.nan_to_num(a[:, :50], posinf=0.0)).astype(np.int64)
            for b in (a, a.astype(np.float32), ints):
                with np.errstate(invalid="ignore", over="ignore"):
                    m, s = _mean_std(b)
                    np.testing.assert_array_equal(m, b.mean(axis=1))
                    np.testing.assert_array_equal(s, b.std(axis=1))
