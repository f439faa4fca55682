"""float32 Simplex of one library series and many targets (FastCCM's 1 source x S targets
shape) through the row check's lists.

A tie at the knn-th neighbour flags its query for every target (the bound's span term),
so the checked lookup lists a flagged query once, not once per target, and lists each
query it resolved once. Where the resolved predictions overflow their list every target
of a flagged row is the float64 call's: the lookup's resolve_rows weighs every target of
the resolved rows before the skill, the others flagged are redone after the wait (from
the float64 series the resolve uploaded), and no flag is read. Cases: decimal data (wide
ties: flagged, not resolved, and resolved ones), continuous data (near-ties, resolved);
each equals, bit for bit, the same call with the rows redone after the wait from the two
lists, from the flags (both lists full), or with nothing resolved in the lookup, and the
float64 call on every flagged row, every target.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.edm import row_check
from pyedmcl.edm import simplex as S
from pyedmcl.primitives import lookup as L

OUTPUTS = ("predicted", "variance", "rho", "mae", "rmse")


def _fp64(device):
    if not get_backend(device).info.fp64:
        pytest.skip("the lookup's float64 redo needs fp64")


def _targets(kind: str, n: int, s: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A library series, ``s`` targets ``(s, n)`` and E: "decimals" (one decimal place,
    distances tie on a lattice) or "continuous" (noise: near-ties at the knn-th place
    that the lookup resolves)."""
    rng = np.random.default_rng(7)
    z = rng.standard_normal((s + 1, n))
    if kind == "decimals":
        z = np.round(z, 1) + 3.0
        return z[0], z[1:], 2
    return z[0], z[1:] * rng.uniform(0.5, 4.0, (s, 1)) + rng.uniform(-5, 5, (s, 1)), 5


@pytest.fixture
def spy(monkeypatch):
    """Per call: the rows redone after the wait, the rows resolved whole in the lookup,
    and how often the flags were read."""
    got: dict = {"rows": [], "whole": [], "flags_read": 0}
    real_predict, real_flagged = S._predict, L.flagged_queries

    def predict(*a):
        out = real_predict(*a)
        got["rows"].append(out[3])
        res = out[6]
        got["whole"].append(np.zeros(0, int) if res is None or res.rows is None else res.rows)
        return out

    def flagged(*a):
        got["flags_read"] += 1
        return real_flagged(*a)
    monkeypatch.setattr(S, "_predict", predict)
    monkeypatch.setattr(L, "flagged_queries", flagged)
    return got


def _assert_float64_rows(r32, r64, rows, y):
    """The flagged rows are the float64 call's for every target, bit for bit; the rest
    within the row check's tolerance."""
    assert rows.size > 0, "no row flagged: the case tests nothing"
    for name in ("predicted", "variance"):
        if getattr(r64, name) is not None:
            np.testing.assert_array_equal(getattr(r32, name)[:, rows],
                                          getattr(r64, name)[:, rows])
    err = np.abs(r32.predicted - r64.predicted)
    assert np.all(err <= row_check.PREDICTION_TOL * np.std(y, axis=1)[:, None])


@pytest.mark.parametrize("variance", [True, False])
@pytest.mark.parametrize("kind", ["decimals", "continuous"])
def test_many_targets_flagged_rows_whole(device, spy, monkeypatch, kind, variance):
    """Ties (decimals: some 50 rows flagged and not resolved, each for most of the 300
    targets, over 2,048 flags; 30,000 resolved predictions) or near-ties (continuous: some
    90 resolved predictions, the list shortened to 64): resolved rows whole from the
    lookup, the rest redone after the wait, no flag read; the same results as the rows
    redone after the wait from the lists, from the flags, or with nothing resolved in
    the lookup, and the float64 call's on every flagged row."""
    _fp64(device)
    x, y, E = _targets(kind, 400, 300)
    kw = dict(E=E, Tp=0, exclusion_radius=3, device=device, variance=variance)
    if kind == "continuous":
        monkeypatch.setattr(L, "FLAG_LIST", 64)
    got = pe.simplex(x, y, **kw)
    after, whole = spy["rows"][-1], spy["whole"][-1]
    flagged = np.union1d(after, whole)
    assert spy["flags_read"] == 0 and whole.size > 0
    assert np.intersect1d(after, whole).size == 0
    if kind == "continuous":
        assert after.size == 0  # every flagged row resolved: no float64 k-NN
    r64 = pe.simplex(x, y, **{**kw, "dtype": "float64"})
    _assert_float64_rows(got, r64, flagged, y)
    others = {}
    monkeypatch.setattr(L, "RESOLVE_ROWS_BYTES", 0)  # no row whole: after the wait, all
    others["lists"] = (pe.simplex(x, y, **kw), spy["rows"][-1])
    assert spy["flags_read"] == 0
    monkeypatch.setattr(L, "FLAG_LIST", 1)  # both lists full: the flags read, as before
    others["flags"] = (pe.simplex(x, y, **kw), spy["rows"][-1])
    assert spy["flags_read"] == 1
    monkeypatch.setattr(S, "RESOLVE_IN_LOOKUP", False)  # every flagged row after the wait
    others["unresolved"] = (pe.simplex(x, y, **kw), spy["rows"][-1])
    for path, (r, rows) in others.items():
        np.testing.assert_array_equal(rows, flagged, err_msg=path)
        for name in OUTPUTS:
            np.testing.assert_array_equal(getattr(r, name), getattr(got, name),  # (None too)
                                          err_msg=f"{path}: {name}")


def test_the_redo_reads_the_resolves_float64_targets(device, monkeypatch):
    """Flagged rows redone after the wait read the float64 series and targets the
    lookup's resolve uploaded (decimal data: the redo that decides their ties too, one
    k-NN of the rows): the targets go to the device in float64 once a call."""
    _fp64(device)
    be = get_backend(device)
    x, y, E = _targets("decimals", 400, 40)
    uploads: list = []
    for name in ("to_device", "to_device_aside"):
        real = getattr(type(be), name)

        def upload(self, a, *args, _real=real, _name=name, **k):
            if getattr(a, "shape", None) == y.shape and a.dtype == np.float64:
                uploads.append(_name)
            return _real(self, a, *args, **k)
        monkeypatch.setattr(type(be), name, upload)
    redone: list = []
    real_redo, real_rule = S.redo_patched, S._redo_with_rule
    monkeypatch.setattr(S, "redo_patched",
                        lambda *a, **k: redone.append(np.array(a[4])) or real_redo(*a, **k))
    # (decimal data: the redo that also decides their ties)
    monkeypatch.setattr(S, "_redo_with_rule",
                        lambda *a, **k: redone.append(np.array(a[3])) or real_rule(*a, **k))
    r32 = pe.simplex(x, y, E=E, device=device)
    assert redone and redone[0].size > 0 and len(uploads) == 1, (redone, uploads)
    r64 = pe.simplex(x, y, E=E, device=device, dtype="float64")
    # the redone rows are the float64 call's, every target, bit for bit
    rows = redone[0]
    np.testing.assert_array_equal(np.asarray(r32.predicted)[:, rows],
                                  np.asarray(r64.predicted)[:, rows])
    # the skill reads the predictions as float32 holds them (2^-24 relative; the redone
    # rows' float64 values rounded so): measured within 1.4e-8 of the float64 call's
    np.testing.assert_allclose(r32.rho, r64.rho, rtol=0, atol=2e-8)


def test_many_targets_oclgrind_clean():
    """The lists and the whole rows of several targets under Oclgrind (marks, the resolved
    queries' list and neighbours, resolve_rows)."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from pyedmcl.edm import simplex as S
        from pyedmcl.primitives import lookup as L
        x = np.empty(300); x[0] = 0.4
        for i in range(1, 300): x[i] = 3.9 * x[i - 1] * (1 - x[i - 1])
        x[200:210] = x[50:60] + 1e-7  # a near-repeat: flagged, resolved in the lookup
        x += 100.0
        y = np.stack([x, np.roll(x, 3) * 2.0, np.round(x, 1)])
        L.FLAG_LIST = 16  # 14 rows resolved, 18 predictions: every target of the rows
        seen = []
        real = S._predict
        S._predict = lambda *a: seen.append(real(*a)) or seen[-1]
        r = pe.simplex(x, y, E=3, variance=True)
        q = pe.simplex(x, y, E=3, variance=True, dtype="float64")
        rows = seen[0][6].rows
        print("whole", rows.size, np.array_equal(r.predicted[:, rows], q.predicted[:, rows]),
              np.array_equal(r.variance[:, rows], q.variance[:, rows]))
    """, unoptimised=True)
    assert "whole 0" not in out and "True True" in out, out


# the call's host work on a panel of targets: the values of the reductions it replaced

@pytest.fixture
def banded(monkeypatch):
    """Bands of rows on threads forced on small panels (pyedmcl._bands)."""
    from pyedmcl import _bands

    monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1)
    monkeypatch.setattr(_bands.os, "cpu_count", lambda: 4)


def _panel(nan: bool = True) -> np.ndarray:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((157, 1003)).cumsum(axis=1) * 1e3 + 5e4
    X[3] = 7.0
    if nan:
        X[40, 5] = np.nan
        X[41] = np.nan
    return X


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (the all-NaN row)
@pytest.mark.parametrize("nan", [False, True])
def test_panel_tolerances_and_spans_are_the_one_target_reductions(banded, monkeypatch, nan):
    """The row check's tolerances and spans of several targets (one pass by chunks of rows
    on threads) equal the NaN-aware reductions of one target, row by row."""
    from pyedmcl import _precision
    from pyedmcl.primitives.ranges import resolve

    monkeypatch.setattr(_precision, "_SPREAD_CHUNK_VALUES", 3000)  # chunks of 2 rows
    yz = _panel(nan)
    plan = resolve(yz.shape[1], E=2, tau=1, Tp=1, knn=None, exclusion_radius=0, lib=None,
                   pred=None)
    check = row_check.RowCheck(plan, yz[0], yz)
    want_thr = np.array([row_check.RowCheck(plan, yz[0], r[None]).thr[0] for r in yz])
    want_span = np.array([row_check.RowCheck(plan, yz[0], r[None]).span[0] for r in yz])
    np.testing.assert_array_equal(check.thr, want_thr)
    np.testing.assert_array_equal(check.span, want_span)
    std, lo, hi = _precision.row_spread(yz)
    np.testing.assert_array_equal(std, yz.std(axis=1))
    np.testing.assert_array_equal(lo, yz.min(axis=1))
    np.testing.assert_array_equal(hi, yz.max(axis=1))


def test_predictions_back_in_one_pass(banded):
    """The float32 predictions mapped back to data units in one pass (the cast inside the
    first operation) are the cast's then the map's, centred only or scaled too."""
    from pyedmcl._precision import Affine

    rng = np.random.default_rng(4)
    p = (rng.standard_normal((57, 301)) * 30).astype(np.float32)
    shift = rng.standard_normal(57) * 1e4
    for scale in (np.ones(57), 2.0 ** rng.integers(-3, 4, 57)):
        f = Affine(shift, scale)
        np.testing.assert_array_equal(f.back_from(p), f.back_in_place(p.astype(np.float64)))
    one = Affine(shift[:1], np.ones(1))
    np.testing.assert_array_equal(one.back_from(p[0]), one.back_in_place(p[0].astype(np.float64)))
    np.testing.assert_array_equal(Affine.identity(57).back_from(p), p.astype(np.float64))


def test_row_extremes_remembered_for_the_call(banded):
    """A panel's rows reduced once a call: the constant-series check's, the NaN test's and
    the targets' validation's values are those of numpy's reductions."""
    from pyedmcl import _extremes
    from pyedmcl.constant_series import constant_names

    X = _panel()
    with _extremes.call_memo():
        lo, hi = _extremes.row_extremes(X)
        np.testing.assert_array_equal(lo, X.min(axis=1))
        np.testing.assert_array_equal(hi, X.max(axis=1))
        assert _extremes.row_extremes(X)[0] is lo  # the memo's
        got = _extremes.extremes(X)  # from the rows' (NaN: the panel holds one)
        assert np.isnan(got[0]) and np.isnan(got[1])
        # a NaN row (41) and a constant one (3); the memo's values left unchanged
        assert constant_names({"x": X[0], "target": X}, ("x", "target")) == ["target[3]"]
        np.testing.assert_array_equal(_extremes.row_extremes(X)[0], X.min(axis=1))
        Y = np.nan_to_num(X)
        _extremes.row_extremes(Y)
        assert _extremes.extremes(Y) == (float(Y.min()), float(Y.max()))
    with pytest.raises(ValueError, match=r"target\[40\]"):
        S.as_target_rows(X)
    assert S.as_target_rows(np.nan_to_num(X)) is not X
    Y = np.nan_to_num(X)
    assert S.as_target_rows(Y) is Y  # float64 rows: read, not copied


def test_host_work_by_bands_gives_the_same_results(device, monkeypatch):
    """A call whose host passes over the targets (validation, centring and cast, tolerances
    and spans, observed values, the patch of redone rows, the map back) all run by bands
    of rows on threads gives the results of the passes in one call."""
    from pyedmcl import _bands

    x, y, E = _targets("decimals", 300, 60)
    want = pe.simplex(x, y, E=E, device=device, variance=True)
    monkeypatch.setattr(_bands, "PARALLEL_VALUES", 1)
    monkeypatch.setattr(_bands.os, "cpu_count", lambda: 4)
    got = pe.simplex(x, y, E=E, device=device, variance=True)
    for name in ("observed", *OUTPUTS):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_panel_spreads_come_from_the_preparation(device, monkeypatch):
    """A float32 Simplex of a panel of targets takes the row check's tolerances and spans
    from its preparation (the standardisation's std, the validation's extremes of the
    targets as given): no pass of their own over the panel. They equal the centred
    panel's reductions within 1e-12, and the call's results equal those of a check that
    measures them itself."""
    from pyedmcl import _precision
    from pyedmcl.primitives.ranges import resolve

    _fp64(device)
    x, y, E = _targets("continuous", 400, 40)
    ser = S.SimplexSeries.prepared(x, y, None, device, None)
    plan = resolve(ser.n, E=E, tau=1, Tp=0, knn=None, exclusion_radius=3, lib=None, pred=None)
    measured = row_check.RowCheck(plan, ser.xz, ser.yz)._spreads
    for known, got in zip(ser.target_spreads, measured, strict=True):
        np.testing.assert_allclose(known, got, rtol=1e-12)
    calls = []
    real = _precision.row_spread
    monkeypatch.setattr(_precision, "row_spread", lambda a: calls.append(a.shape) or real(a))
    kw = dict(E=E, Tp=0, exclusion_radius=3, device=device)
    got = pe.simplex(x, y, **kw)
    assert calls == []
    real_check = row_check.row_check
    monkeypatch.setattr(S, "row_check", lambda *a: real_check(*a[:4]))  # measured spreads
    again = pe.simplex(x, y, **kw)
    assert calls
    for name in OUTPUTS:
        np.testing.assert_array_equal(getattr(again, name), getattr(got, name), err_msg=name)
