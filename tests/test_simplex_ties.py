"""Simplex on decimal data decides tied neighbours as pyEDM does (pyedmcl/edm/simplex_ties.py).

pyEDM ranks equally far library points by (distance, |p - l|, l) on roots of its own
float64 sums; the kernels by (squared distance, |p - l|, l) on theirs. On values with few
decimals equal distances are common and the two arithmetics round them apart, so the
rows whose knn-th place ties are decided again by pyEDM's rule.

Tolerances: float64 predictions within 1e-12 of pyEDM's (every row; the same neighbours,
weights from the same distances up to a few ulps), float32 within 1e-5 of the target's
range (storage rounding) and 1e-9 of the float64 call's on the rows the rule decided.
Each case is also run with the rule off, which must miss pyEDM by more than 1e-3 on at
least one row (the case holds a tie that the kernels' order decides otherwise).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_RUNTIMES

import pyedmcl as pe
from pyedmcl.data import lorenz63
from pyedmcl.edm import simplex_ties as st
from pyedmcl.primitives.knn import knn_table
from pyedmcl.primitives.ranges import resolve

pyEDM = pytest.importorskip("pyEDM")
pd = pytest.importorskip("pandas")


def lorenz_rounded(n: int, places: int) -> np.ndarray:
    return np.round(lorenz63(n, dt=0.01, sample_every=1)[:, 0], places)


def walk(n: int, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(np.cumsum(rng.choice([-0.1, 0.1], n)), 1)


#: (series, E, tau (ours), exclusion radius, lib, pred): each holds a row the kernels'
#: order decides otherwise (checked below with the rule off)
CASES = {
    "lorenz-E3-halves": (lambda: lorenz_rounded(1200, 1), 3, 1, 0, (1, 600), (601, 1200)),
    "lorenz-E3-loo": (lambda: lorenz_rounded(1200, 1), 3, 1, 0, (1, 1200), (1, 1200)),
    "walk-E5-loo": (lambda: walk(800), 5, 1, 0, (1, 800), (1, 800)),
    "walk-E9-radius3": (lambda: walk(800), 9, 1, 3, (1, 800), (1, 800)),
    "lorenz-E3-tau2-radius5": (lambda: lorenz_rounded(1200, 1), 3, 2, 5, (1, 1200), (1, 1200)),
    "lorenz-E4-future-lags": (lambda: lorenz_rounded(1200, 1), 4, -1, 0, (1, 600), (601, 1200)),
    # 12 coordinates: pyEDM's tree adds them in four running sums
    "walk-E12-loo": (lambda: walk(800), 12, 1, 0, (1, 800), (1, 800)),
}


def pyedm_predictions(x, E, tau, R, lib, pred, times) -> np.ndarray:
    """pyEDM's Simplex predictions for the times ``times`` (the rows predicted from)."""
    df = pd.DataFrame({"t": np.arange(1, x.size + 1), "x": x})
    r = pyEDM.Simplex(dataFrame=df, columns="x", target="x", lib=f"{lib[0]} {lib[1]}",
                      pred=f"{pred[0]} {pred[1]}", E=E, Tp=1, tau=-tau, exclusionRadius=R)
    got = dict(zip(r.iloc[:, 0].astype(int), r["Predictions"].to_numpy(float), strict=True))
    return np.array([got.get(int(t) + 1, np.nan) for t in times])


@pytest.mark.parametrize("name", list(CASES))
def test_float64_predictions_are_pyedms_on_decimal_data(monkeypatch, device, name):
    make, E, tau, R, lib, pred = CASES[name]
    x = make()
    kw = dict(E=E, tau=tau, Tp=1, lib=lib, pred=pred, exclusion_radius=R, dtype="float64",
              device=device)
    got = pe.simplex(x, **kw)
    want = pyedm_predictions(x, E, tau, R, lib, pred, got.times)
    ok = np.isfinite(want)
    assert ok.sum() > 0.9 * want.size
    np.testing.assert_allclose(np.asarray(got.predicted)[ok], want[ok], rtol=0, atol=1e-12)
    if device in CPU_RUNTIMES:  # (GPUs fuse multiply-adds: their ties may fall otherwise)
        monkeypatch.setattr(st, "ENABLED", False)  # the kernels' own order misses pyEDM
        old = np.asarray(pe.simplex(x, **kw).predicted)
        assert np.max(np.abs(old[ok] - want[ok])) > 1e-3


@pytest.mark.parametrize("name", ["lorenz-E3-loo", "walk-E5-loo", "walk-E9-radius3"])
def test_float32_decides_as_float64_on_decimal_data(device, name):
    make, E, tau, R, lib, pred = CASES[name]
    x = make()
    kw = dict(E=E, tau=tau, Tp=1, lib=lib, pred=pred, exclusion_radius=R, device=device)
    f32 = np.asarray(pe.simplex(x, **kw, dtype="float32").predicted)
    f64 = np.asarray(pe.simplex(x, **kw, dtype="float64").predicted)
    np.testing.assert_allclose(f32, f64, rtol=0, atol=1e-5 * np.ptp(x))


def test_float32_redone_rows_take_the_float64_rule(monkeypatch, device):
    """The rows float32 redoes in float64 and that tie there get pyEDM's rule: the float64
    call's values, bit for bit."""
    x = lorenz_rounded(1200, 1)
    kw = dict(E=3, tau=1, Tp=1, lib=(1, 1200), pred=(1, 1200), device=device)
    from pyedmcl.edm import simplex as S

    decided: list = []
    orig = S._rule_values

    def spy(be, plan, ser, x64, y64, rows, *a, **k):
        out = orig(be, plan, ser, x64, y64, rows, *a, **k)
        decided.append((np.array(rows), out[0][0].copy()))
        return out

    monkeypatch.setattr(S, "_rule_values", spy)
    f32 = pe.simplex(x, **kw, dtype="float32")
    assert decided and decided[0][0].size, "float32 decided no tied row here"
    rows, vals = decided[0]
    f64 = pe.simplex(x, **kw, dtype="float64")  # (its rows decided in the pass)
    np.testing.assert_array_equal(np.asarray(f32.predicted)[rows], vals)
    np.testing.assert_array_equal(np.asarray(f64.predicted)[rows], vals)


def test_skill_is_that_of_the_decided_predictions(device):
    x = lorenz_rounded(1200, 1)
    got = pe.simplex(x, E=3, Tp=1, lib=(1, 1200), pred=(1, 1200), dtype="float64",
                     device=device)
    p, o = np.asarray(got.predicted), np.asarray(got.observed)
    ok = np.isfinite(p) & np.isfinite(o)
    assert got.rho == pytest.approx(np.corrcoef(p[ok], o[ok])[0, 1], abs=1e-12)
    assert got.mae == pytest.approx(np.abs(p[ok] - o[ok]).mean(), abs=1e-12)


def test_several_targets_and_variances(device):
    x = lorenz_rounded(1200, 1)
    y = np.vstack([x, np.round(lorenz63(1200, dt=0.01, sample_every=1)[:, 2], 1)])
    kw = dict(E=3, Tp=1, lib=(1, 1200), pred=(1, 1200), dtype="float64", device=device,
              variance=True)
    both = pe.simplex(x, y, **kw)
    for j in range(2):
        one = pe.simplex(x, y[j], **kw)
        np.testing.assert_array_equal(np.asarray(both.predicted)[j], one.predicted)
        np.testing.assert_array_equal(np.asarray(both.variance)[j], one.variance)
        assert both.rho[j] == pytest.approx(one.rho, abs=1e-14)


def host_table(x, plan, rows, k):
    idx, d = knn_table(x, E=plan.E, tau=plan.tau, knn=k, lib_points=plan.lib_points,
                       query_points=plan.pred_points[rows],
                       exclusion_radius=plan.exclusion_radius, dtype="float64")
    return np.asarray(idx).astype(np.int64), np.asarray(d, np.float64)


@pytest.mark.parametrize("name", ["lorenz-E3-loo", "walk-E9-radius3", "lorenz-E4-future-lags"])
def test_decide_from_candidates_is_the_full_scan(name):
    """:func:`decide` on a row's candidates (the tie and all nearer points) gives what
    :func:`scan_rows` gives from the whole library, on every row it settles; it settles
    most of them."""
    make, E, tau, R, lib, pred = CASES[name]
    x = make()
    plan = resolve(x.size, E=E, tau=tau, Tp=1, knn=None, exclusion_radius=R, lib=lib, pred=pred)
    rule = st.Rule.of(x, plan)
    rows = np.arange(plan.pred_points.size)
    idx, d = host_table(x, plan, rows, plan.knn + 1)
    tie = st.tied(d, idx, plan.knn, plan.E)
    rows, kth = rows[tie], d[tie, plan.knn - 1]
    p = plan.pred_points[rows].astype(np.int64)
    w = st.tie_width(plan.E)
    # the candidates: every admissible library point within kth (1 + 2w), by NumPy
    S = rule.states(rule.lib)
    d2 = ((S[None] - rule.states(p)[:, None]) ** 2).sum(axis=2)
    near = (d2 <= ((kth * (1 + 2 * w)) ** 2)[:, None]) & (np.abs(p[:, None] - rule.lib) > R)
    width = int(near.sum(axis=1).max())
    cand = np.full((rows.size, width), -1, np.int64)
    for i in range(rows.size):
        c = rule.lib[near[i]]
        cand[i, :c.size] = c
    nbr, dist, ok = st.decide(rule, p, cand, kth * (1 + w))
    assert ok.mean() > 0.9
    s_nbr, s_dist = st.scan_rows(rule, p[ok])
    np.testing.assert_array_equal(nbr[ok], s_nbr)
    np.testing.assert_array_equal(dist[ok], s_dist)


def test_range_lists_hold_every_point_within_the_limit(device):
    from clkernels import get_backend
    from pyedmcl.primitives.knn import range_lists

    x = lorenz_rounded(600, 1)
    E, tau, R = 3, 2, 2
    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("no fp64 on this device")
    lib = np.arange(0, 500, dtype=np.int32)
    q = np.array([3, 100, 250, 499, 550], np.int32)
    lim = np.array([0.0, 0.5, 2.0, 8.0, 1e9])
    xd = be.to_device(x.astype(np.float64))
    got, cnt = range_lists(be, xd, E=E, tau=tau, qpts=q, l_dev=be.to_device(lib),
                           nl=lib.size, lim=lim, radius=R, cap=16)
    for i, p in enumerate(q):
        d2 = sum((x[lib + j * tau] - x[p + j * tau]) ** 2 for j in range(E))
        want = lib[(d2 <= lim[i]) & (np.abs(lib - p) > R)]
        assert cnt[i] == want.size
        np.testing.assert_array_equal(got[i, :min(16, want.size)], want[:16])
        assert (got[i, min(16, want.size):] == -1).all()


def test_applies_only_to_decimal_data_off_a_binary_grid():
    from pyedmcl.neighbors.exact import ExactBackend

    plan = resolve(500, E=3, tau=1, Tp=1, knn=None, exclusion_radius=0, lib=None, pred=None)
    nb = ExactBackend()
    rng = np.random.default_rng(1)
    assert st.applies(np.round(rng.normal(size=500), 1), plan, nb)
    assert st.applies(np.round(rng.normal(size=500) * 100, 2), plan, nb)
    assert not st.applies(rng.normal(size=500), plan, nb)  # continuous: no equal distances
    assert not st.applies(np.round(rng.normal(size=500) * 10), plan, nb)  # integers: exact sums
    assert not st.applies(np.round(rng.normal(size=500) * 8) / 8, plan, nb)  # binary grid
    assert not st.applies(np.round(rng.normal(size=500), 1), plan, object())  # approximate


def test_the_ties_kernel_lists_the_hosts_tied_rows(monkeypatch, device):
    """The float64 pass's ``ties`` kernel lists exactly the rows :func:`tied` finds in
    the same table, with their knn-th distances."""
    from pyedmcl.edm import simplex as S

    x = walk(800)
    got: list = []
    orig = S._tie_list

    def spy(be, parts):
        (q0, rows, kth, count, _), = parts  # one block: the device's whole list
        c = int(be.to_host(count)[0])
        r, d = be.to_host(rows)[:c], be.to_host(kth)[:c]
        order = np.argsort(r)
        got.append((q0 + r[order], d[order]))
        return orig(be, parts)

    monkeypatch.setattr(S, "_tie_list", spy)
    pe.simplex(x, E=5, Tp=1, lib=(1, 800), pred=(1, 800), dtype="float64", device=device)
    rows, kth = got[-1]
    plan = resolve(x.size, E=5, tau=1, Tp=1, knn=None, exclusion_radius=0, lib=(1, 800),
                   pred=(1, 800))
    idx, d = knn_table(x, E=5, tau=1, knn=plan.knn + 1, lib_points=plan.lib_points,
                       query_points=plan.pred_points, exclusion_radius=0, dtype="float64",
                       device=device)
    d = np.asarray(d, np.float64)
    want = np.flatnonzero(st.tied(d, np.asarray(idx), plan.knn, 5))
    assert want.size
    np.testing.assert_array_equal(rows, want)
    np.testing.assert_array_equal(kth, d[want, plan.knn - 1])


@pytest.mark.parametrize("force", ["host", "cut-lists", "few-slots"])
def test_rows_the_device_leaves_open_take_the_hosts_rule(monkeypatch, device, force):
    """The device decides the tied rows behind the lookup; rows past its slots, with a
    cut candidate list or a radius it does not take go to the host's rule: pyEDM's
    predictions either way (1e-12), and the host decides exactly those rows."""
    from pyedmcl.edm import simplex as S

    name = "walk-E9-radius3"
    make, E, tau, R, lib, pred = CASES[name]
    x = make()
    if force == "host":
        monkeypatch.setattr(st, "DEVICE_RADIUS", R - 1)
    elif force == "cut-lists":
        monkeypatch.setattr(st, "GROUP_CAP", 2)
    else:
        monkeypatch.setattr(st, "DEVICE_SLOTS", 16)
    host: list = []
    orig = S._tie_list

    def spy(be, parts):
        out = orig(be, parts)
        host.append(out[0].size)
        return out

    monkeypatch.setattr(S, "_tie_list", spy)
    kw = dict(E=E, tau=tau, Tp=1, lib=lib, pred=pred, exclusion_radius=R, dtype="float64",
              device=device)
    got = pe.simplex(x, **kw)
    want = pyedm_predictions(x, E, tau, R, lib, pred, got.times)
    ok = np.isfinite(want)
    np.testing.assert_allclose(np.asarray(got.predicted)[ok], want[ok], rtol=0, atol=1e-12)
    assert host and host[-1] > 0
    monkeypatch.undo()
    host.clear()
    monkeypatch.setattr(S, "_tie_list", spy)
    pe.simplex(x, **kw)
    assert host[-1] == 0, "the device left rows open with its defaults"


def test_query_blocks_decide_their_ties(monkeypatch, device):
    """Queries split into blocks (a device short of memory): each block lists and decides
    its own tied rows, the same predictions as one launch."""
    import clkernels
    from pyedmcl.edm import simplex as S

    make, E, tau, R, lib, pred = CASES["lorenz-E3-loo"]
    x = make()
    kw = dict(E=E, tau=tau, Tp=1, lib=lib, pred=pred, exclusion_radius=R, dtype="float64",
              device=device, variance=True)
    whole = pe.simplex(x, **kw)
    monkeypatch.setattr(S, "run_blocked",
                        lambda *a, **k: clkernels.run_blocked(*a, **{**k, "block": 300}))
    monkeypatch.setattr(st, "DEVICE_SLOTS", 40)  # (and some rows past the slots)
    parts = pe.simplex(x, **kw)
    np.testing.assert_array_equal(parts.predicted, whole.predicted)
    np.testing.assert_array_equal(parts.variance, whole.variance)
    assert parts.rho == pytest.approx(whole.rho, abs=1e-14)


@pytest.mark.parametrize("split", [1, 128])
def test_range_list_of_a_device_list(device, split):
    """The range lists of a device list of tied queries (as the ties kernel leaves it),
    one work-item a query or a work-group (GPUs): every admissible library point within
    (kth (1 + 2 width))^2, in any order, for the listed slots; counts 0 past them."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN

    be = get_backend(device)
    if not be.info.fp64:
        pytest.skip("no fp64 on this device")
    x = lorenz_rounded(700, 1)
    E, tau, R, w, cap = 3, 1, 1, 1e-3, 32
    lib = np.arange(0, 600, dtype=np.int32)
    qpts = np.arange(600, 690, dtype=np.int32)
    rows = np.array([5, 0, 40, 89], np.int32)
    kth = np.array([0.2, 0.0, 0.5, 3.0])
    slots = 6
    out = be.empty((slots, cap), np.int32)
    cnt = be.empty(slots, np.int32)
    KNN.launch_range_list(be, E, tau, be.to_device(x), be.to_device(lib), lib.size,
                          be.to_device(qpts), be.to_device(rows), be.to_device(kth),
                          be.to_device(np.array([rows.size, 0], np.int32)), slots, w, R, cap,
                          out, cnt, split=split)
    got, c = be.to_host(out), be.to_host(cnt)
    assert (c[rows.size:] == 0).all()
    for s, (q, k) in enumerate(zip(rows, kth, strict=True)):
        p = qpts[q]
        d2 = sum((x[lib + j] - x[p + j]) ** 2 for j in range(E))
        want = lib[(d2 <= (k * (1 + 2 * w)) ** 2) & (np.abs(lib - p) > R)]
        assert c[s] == want.size
        if want.size <= cap:
            np.testing.assert_array_equal(np.sort(got[s, :want.size]), want)


def test_tie_kernels_oclgrind_clean():
    """The ties, range-list and decide kernels (and the split range walk of GPUs) under
    Oclgrind's memory, race and uninitialised-value checks, on a tiny walk with a radius
    and a few slots (rows past them and cut lists go to the host)."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from pyedmcl.edm import simplex_ties as st
        from pyedmcl.kernels import knn as K
        rng = np.random.default_rng(5)
        x = np.round(np.cumsum(rng.choice([-0.1, 0.1], 160)), 1)
        st.DEVICE_SLOTS, st.GROUP_CAP = 12, 8
        kw = dict(E=3, lib=(1, 160), pred=(1, 160), exclusion_radius=1, dtype="float64")
        a = pe.simplex(x, **kw)
        real = K.KNN.launch_range_list
        K.KNN.launch_range_list = lambda *p, **k: real(*p, **{**k, "split": 16})
        b = pe.simplex(x, **kw)
        assert np.array_equal(a.predicted, b.predicted, equal_nan=True)
        print("OK", int(np.isfinite(a.predicted).sum()))
    """, unoptimised=True)
    assert "OK" in out


@pytest.mark.parametrize("E", [1, 3, 12])
def test_the_resolve_declines_at_the_hosts_tie_width(E):
    """The float32 lookup's resolve declines float64 ties at the width the ties kernel and
    the host test use (``tie_width``, written into the template as a literal)."""
    from clkernels.templates import render

    src = render("lookup/simplex_lookup.cl.mako",
                 {"K": E + 1, "REAL": "float", "ACC": "double", "WG": 64, "WEIGHT": "simplex",
                  "VARIANCE": 0, "INL": 0, "KS": E + 3, "CHECK": 1, "FS": 0, "RESOLVE": 1,
                  "E": E, "TAU": 1, "FMA": 0, "NOFUSE": 0})
    assert f"#define PYEDM_TIE_WIDTH {st.tie_width(E)!r}" in src
