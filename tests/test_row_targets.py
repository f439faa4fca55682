"""float32 Simplex of one library series and many targets (FastCCM's 1 source x S targets
shape) through the row check's lists.

A tie at the knn-th neighbour flags its query for every target (the bound's span term),
so the checked lookup lists a flagged query once, not once per target, and lists each
query it resolved once: the rows to redo then come from the two lists, not from a read
of every prediction's flag, and the redo after the wait reads the float64 series the
lookup's resolve uploaded. Cases: decimal data (wide ties: flagged, not resolved),
continuous data whose resolved predictions overflow their list (whole rows redone), and
lists too short for either (the flags read, as before). Each is the float64 call's bit
for bit on the redone rows, every target, and the same as the other paths.
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
    """Per call: the rows redone after the wait and whether the flags were read."""
    got: dict = {"rows": [], "flags_read": 0}
    real_predict, real_flagged = S._predict, L.flagged_queries

    def predict(*a):
        out = real_predict(*a)
        got["rows"].append(out[3])
        return out

    def flagged(*a):
        got["flags_read"] += 1
        return real_flagged(*a)
    monkeypatch.setattr(S, "_predict", predict)
    monkeypatch.setattr(L, "flagged_queries", flagged)
    return got


def _assert_float64_rows(r32, r64, rows, y):
    """The redone rows are the float64 call's for every target, bit for bit; the rest
    within the row check's tolerance."""
    assert rows.size > 0, "no row redone: the case tests nothing"
    for name in ("predicted", "variance"):
        np.testing.assert_array_equal(getattr(r32, name)[:, rows], getattr(r64, name)[:, rows])
    err = np.abs(r32.predicted - r64.predicted)
    assert np.all(err <= row_check.PREDICTION_TOL * np.std(y, axis=1)[:, None])


@pytest.mark.parametrize("kind", ["decimals", "continuous"])
def test_many_targets_list_a_flagged_query_once(device, spy, monkeypatch, kind):
    """Ties (decimals: flagged for every target, not resolved) or resolved predictions
    beyond their list (continuous): the rows to redo come from the lists (no flag read),
    and the results equal those read from the flags, those redone after the wait alone,
    and the float64 call's on every redone row."""
    _fp64(device)
    x, y, E = _targets(kind, 400, 300)
    kw = dict(E=E, Tp=0, exclusion_radius=3, device=device, variance=True)
    if kind == "continuous":  # its near-ties: some 90 resolved predictions
        monkeypatch.setattr(L, "FLAG_LIST", 64)
    # decimals: some 50 rows flagged, not resolved, each for most of the 300 targets
    # (over 2,048 flags), and 30,000 resolved predictions
    got = pe.simplex(x, y, **kw)
    rows = spy["rows"][-1]
    assert spy["flags_read"] == 0
    r64 = pe.simplex(x, y, **{**kw, "dtype": "float64"})
    _assert_float64_rows(got, r64, rows, y)
    monkeypatch.setattr(L, "FLAG_LIST", 1)  # both lists full: the flags read, as before
    flags = pe.simplex(x, y, **kw)
    assert spy["flags_read"] == 1
    np.testing.assert_array_equal(spy["rows"][-1], rows)
    monkeypatch.setattr(S, "RESOLVE_IN_LOOKUP", False)  # every flagged row after the wait
    after = pe.simplex(x, y, **kw)
    np.testing.assert_array_equal(spy["rows"][-1], rows)
    for name in OUTPUTS:
        np.testing.assert_array_equal(getattr(flags, name), getattr(got, name), err_msg=name)
        np.testing.assert_array_equal(getattr(after, name), getattr(got, name), err_msg=name)


def test_the_redo_reads_the_resolves_float64_targets(device, monkeypatch):
    """Flagged rows redone after the wait read the float64 series and targets the
    lookup's resolve uploaded: the targets go to the device in float64 once a call."""
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
    real_redo = S.redo_patched
    monkeypatch.setattr(S, "redo_patched",
                        lambda *a, **k: redone.append(a[4].size) or real_redo(*a, **k))
    r32 = pe.simplex(x, y, E=E, device=device)
    assert redone and redone[0] > 0 and len(uploads) == 1, (redone, uploads)
    r64 = pe.simplex(x, y, E=E, device=device, dtype="float64")
    np.testing.assert_allclose(r32.rho, r64.rho, rtol=0, atol=1e-8)


def test_many_targets_oclgrind_clean():
    """The lists of several targets under Oclgrind (marks, the resolved queries' list)."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from pyedmcl.primitives import lookup as L
        x = np.empty(300); x[0] = 0.4
        for i in range(1, 300): x[i] = 3.9 * x[i - 1] * (1 - x[i - 1])
        x[200:210] = x[50:60] + 1e-7  # a near-repeat: flagged, resolved in the lookup
        x += 100.0
        y = np.stack([x, np.roll(x, 3) * 2.0, np.round(x, 1)])
        L.FLAG_LIST = 2  # the resolved predictions overflow: rows from the two lists
        r = pe.simplex(x, y, E=3, variance=True)
        q = pe.simplex(x, y, E=3, variance=True, dtype="float64")
        print("close", bool(np.allclose(r.predicted, q.predicted, rtol=0, atol=1e-4)))
    """, unoptimised=True)
    assert "close True" in out, out
