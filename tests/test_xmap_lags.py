"""pe.xmap with Tp a list of lags: each lag's matrix against pe.xmap at that one Tp
(same device, same dtype: bit-identical; the scan shares one neighbour search per
library and E-group, pyedmcl.xmap.lag_engine) over tied distances in float32 and
float64, given and found E, lags of either sign, every knn_method, both lag
directions of tau, lags cut into several union tables, and a float32 check that falls
back to float64; the window kernel against a host reference; a few entries against
pyEDM's CCM at that Tp (float64 reference vs the float32 pipeline: 1e-5 on rho, as
tests/test_xmap.py); the result type; bad lags and options. The lag-against-single-Tp
tests take the device fixture (every runtime; conftest's covering thins the cases on CPU
runtimes); the rest run on CPU_DEVICE.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE, run_under_oclgrind

import pyedmcl as pe
from pyedmcl._precision import PrecisionWarning
from pyedmcl.data import logistic_map
from pyedmcl.primitives.ranges import ccm_valid_times
from pyedmcl.xmap.lag_engine import lag_chunks, plan_chunks

RHO_TOL = 1e-5
LAGS = [-3, -1, 0, 2]


def panel(L: int = 100, N: int = 5, seed: int = 3) -> np.ndarray:
    """(L, N) noisy oscillators, each driven by its neighbour one step late."""
    rng = np.random.default_rng(seed)
    t = np.arange(L)
    base = np.sin(t[:, None] * rng.uniform(0.15, 0.6, N)[None, :])
    drive = np.roll(np.roll(base, 1, axis=1), 1, axis=0) * 0.4
    return (base + drive + 0.2 * rng.standard_normal((L, N))).astype(np.float32)


@pytest.fixture(scope="module")
def lagged():
    X = panel()
    return X, pe.xmap(X, E=[2, 3, 2, 3, 2], Tp=LAGS, device=CPU_DEVICE)


def test_each_lag_is_the_single_tp_map(lagged):
    X, r = lagged
    assert r.rho.shape == (len(LAGS), 5, 5) and list(r.lags) == LAGS
    for a, lag in enumerate(LAGS):
        one = pe.xmap(X, E=[2, 3, 2, 3, 2], Tp=lag, device=CPU_DEVICE)
        np.testing.assert_array_equal(r.rho[a], np.asarray(one.rho))
        np.testing.assert_array_equal(r.at(lag), np.asarray(one.rho))


def test_auto_E_lags_equal_single_tp_maps():
    X = panel(L=80, N=3, seed=5)
    r = pe.xmap(X, Tp=range(-1, 2), max_E=4, device=CPU_DEVICE)
    for a, lag in enumerate(range(-1, 2)):
        one = pe.xmap(X, Tp=lag, max_E=4, device=CPU_DEVICE)
        np.testing.assert_array_equal(r.E, one.E)
        np.testing.assert_array_equal(r.rho[a], np.asarray(one.rho))


def quantized(L: int = 90, N: int = 4, step: float = 0.25) -> np.ndarray:
    """:func:`panel` on a grid of ``step``: most queries' k-th and (k+1)-th neighbours
    tie (the order among equal distances decides the tables)."""
    return np.round(panel(L, N, seed=7).astype(np.float64) / step) * step


def assert_each_lag_single(X, lags, device: str = CPU_DEVICE, **kw) -> None:
    """``pe.xmap(X, Tp=lags, **kw)``'s matrix at every lag is ``pe.xmap(X, Tp=lag)``'s,
    on ``device``."""
    r = pe.xmap(X, Tp=lags, device=device, **kw)
    assert list(r.lags) == sorted(set(lags))
    for a, lag in enumerate(r.lags):
        one = pe.xmap(X, Tp=int(lag), device=device, **kw)
        np.testing.assert_array_equal(r.E, one.E)
        np.testing.assert_array_equal(r.rho[a], np.asarray(one.rho), err_msg=f"Tp={lag}")


@pytest.mark.parametrize("lags", [range(-6, 1), range(1, 5), [-4, -1, 0, 3]],
                         ids=["negative", "positive", "mixed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("E", [[2, 3, 1, 3], "auto"], ids=["given", "auto"])
def test_tied_distances_every_lag_is_the_single_tp_map(device, lags, dtype, E):
    assert_each_lag_single(quantized(), lags, device, E=E, max_E=4, dtype=dtype)


@pytest.mark.parametrize("opts", [{"knn_method": "batched"}, {"knn_method": "edm"},
                                  {"knn_method": "scan"}, {"tau": 2}, {"tau": -1},
                                  {"block_rows": 3}], ids=str)
def test_knn_methods_and_tau_every_lag_is_the_single_tp_map(device, opts):
    assert_each_lag_single(panel(L=80, N=4, seed=11), [-3, 0, 2], device, E=[2, 3, 1, 3],
                           **opts)


@pytest.mark.parametrize("E, lags, raw", [([4, 5, 6, 4, 5, 7], range(-3, 1), False),
                                          ([4, 5, 6, 2, 5, 7], range(-3, 1), True),
                                          ([4, 5, 6, 2, 5, 7], [-2, 0, 3], True)],
                         ids=["no-edge", "edge", "mixed-lags"])
@pytest.mark.parametrize("knn_method", [None, "scan"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scanned_groups_every_lag_is_the_single_tp_map(device, E, lags, raw, knn_method,
                                                       dtype):
    """Mixed E: every E-group's core lists from one fused multi-E scan over the lags'
    union (its library the core), merged with each group's edge where it has one (the
    scan's accumulated distances, RAW); where no group has an edge the scan's tables are
    every lag's. Over tied distances."""
    from clkernels import get_backend
    from pyedmcl.xmap.lag_engine import XmapLagEngine
    X = quantized(N=6)
    eng = XmapLagEngine(get_backend(device), X.T.astype(np.float32), np.array(E),
                        np.array(lags), tau=1, Tp=0, knn_kernel=knn_method)
    assert eng._scan_Es == sorted(set(E))
    assert bool(eng.fused.setup(inputs=False).params.get("RAW", 0)) == raw
    assert_each_lag_single(X, lags, device, E=E, knn_method=knn_method, dtype=dtype)


SCAN_VARIANTS = [{"WG": 4, "TILE": 64, "QB": 16, "SPLIT": 1, "INS": "q", "VEC": 16, "ANY": 0},
                 {"WG": 8, "TILE": 16, "QB": 4, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1},
                 {"WG": 4, "TILE": 32, "QB": 4, "SPLIT": 1, "INS": "key", "VEC": 8, "ANY": 0}]


@pytest.mark.parametrize("params", SCAN_VARIANTS, ids=lambda p: f"{p['INS']}-{p['SPLIT']}")
def test_every_scan_variant_every_lag_is_the_single_tp_block(device, params, monkeypatch):
    """The fused scan's accumulated distances (RAW) from each insertion mode and a split
    scan's merge: every lag's rows are the single-lag engine's, bit for bit."""
    import pyedmcl.kernels.xmap as xk
    from clkernels import get_backend
    from pyedmcl.xmap.engine import XmapEngine
    from pyedmcl.xmap.lag_engine import XmapLagEngine
    monkeypatch.setattr(xk.XMAP_SCAN, "params_for", lambda *a, sp=params: dict(sp))
    be = get_backend(device)
    X = quantized(N=5).T.astype(np.float32)
    E, lags = np.array([2, 3, 2, 4, 3]), np.array([-3, -1, 0, 2])
    eng = XmapLagEngine(be, X, E, lags, Tp=0, knn_kernel="scan")
    got = eng.block(0, 5)
    assert eng.fused.setup().params.get("RAW") == 1
    for a, lag in enumerate(lags):
        one = XmapEngine(be, X, E, Tp=int(lag), knn_kernel="batched")
        np.testing.assert_array_equal(got[a], one.block(0, 5), err_msg=f"Tp={lag}")


KNN_VARIANTS = [dict(VARIANT="vec", WG=8, TILE=32, QB=4, EA=0, INS="reg", FLAG=1),
                dict(VARIANT="rows", WG=16, TILE=32, QB=1, EA=0, INS="reg", FLAG=1),
                dict(VARIANT="rows", WG=16, TILE=64, QB=1, EA=0, INS="reg", FLAG=1, SLIDE=16),
                dict(VARIANT="cols", WG=16, TILE=32, QB=16, EA=0, INS="local", FLAG=0),
                dict(VARIANT="cols", WG=16, TILE=32, QB=8, EA=0, INS="mask", FLAG=0)]


@pytest.mark.parametrize("params", KNN_VARIANTS, ids=lambda p: f"{p['VARIANT']}-{p['INS']}")
def test_every_knn_variant_every_lag_is_the_single_tp_block(device, params):
    """The lag engine's core and edge lists (accumulated distances) from each k-NN
    variant: every lag's rows are the single-lag engine's, bit for bit."""
    from clkernels import get_backend
    from pyedmcl.xmap.engine import XmapEngine
    from pyedmcl.xmap.lag_engine import XmapLagEngine
    be = get_backend(device)
    X = quantized(N=5).T.astype(np.float32)
    E, lags = np.array([2, 3, 2, 4, 3]), np.array([-3, -1, 0, 2])
    for kk in ("batched", "edm"):
        got = XmapLagEngine(be, X, E, lags, Tp=0, knn_kernel=kk, knn_params=params).block(0, 5)
        for a, lag in enumerate(lags):
            one = XmapEngine(be, X, E, Tp=int(lag), knn_kernel=kk, knn_params=params)
            np.testing.assert_array_equal(got[a], one.block(0, 5), err_msg=f"Tp={lag}")


def test_lags_cut_into_chunks_are_the_single_tp_maps():
    """Lags whose one union table would keep more than the cap of neighbours run on
    several tables (chunks of neighbouring lags); each lag is still the single map's."""
    lags = np.arange(-40, 41, 8)
    assert len(lag_chunks(120, 3, 1, lags)) > 1
    assert_each_lag_single(quantized(L=120, N=3), lags, E=3, dtype="float32")


@pytest.mark.parametrize("tau", [1, 3, -2])
def test_plan_chunks_rows_core_and_edge(tau):
    """Each lag's rows are its CCM rows, one stretch of its chunk's union (the queries);
    the core is the rows every lag of the chunk keeps, the edge the rest of the union (at
    most the cap, unless the chunk is one lag), so a lag's library is the core and the
    edge rows inside its window."""
    n, E = 60, 3
    lags = np.arange(-15, 16, 3)
    chunks = plan_chunks(n, E, tau, lags, cap=12)
    assert len(chunks) > 1
    assert [r.a for c in chunks for r in c.lags] == list(range(lags.size))
    for c in chunks:
        off = (E - 1) * abs(tau) if tau > 0 else 0
        times = c.pts.astype(np.int64) + off
        common = np.ones(c.U, bool)
        for r in c.lags:
            own = ccm_valid_times(n, E, tau, r.lag)
            np.testing.assert_array_equal(times[r.r0:r.r0 + r.M], own)
            inside = (c.pts >= r.lo) & (c.pts < r.hi)
            np.testing.assert_array_equal(np.flatnonzero(inside), np.arange(r.r0, r.r0 + r.M))
            np.testing.assert_array_equal(r.obs, own + r.lag)
            common &= inside
        np.testing.assert_array_equal(c.core, c.pts[common])
        np.testing.assert_array_equal(c.edge, c.pts[~common])
        assert c.core.size > 0 and (c.S <= 12 or len(c.lags) == 1)


def test_window_kernel_merges_core_and_edge_lists():
    """knn/window.cl.mako against a host merge: the first k of the core list and the edge
    entries inside the window, by accumulated distance then tie key, finished (sqrt);
    equal distances across the lists (ties), short lists padded with -1, a core list in
    strided rows after an offset (a scan's E plane) and an edge list in shifted points."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN, RawLists
    be = get_backend(CPU_DEVICE)
    rng = np.random.default_rng(4)
    nb, rows, kc, ke, k, row0, nq, lo, hi = 3, 24, 4, 6, 4, 2, 18, 5, 17
    qpts = np.arange(rows, dtype=np.int32) + 3

    def lists(width, pts):  # sorted as the knn kernel sorts
        idx = np.stack([np.stack([rng.choice(pts, width, replace=False) for _ in range(rows)])
                        for _ in range(nb)]).astype(np.int32)
        dist = rng.integers(1, 6, (nb, rows, width)).astype(np.float32)  # many ties
        key = 2 * np.abs(idx - qpts[None, :, None]) + (idx > qpts[None, :, None])
        order = np.lexsort((key, dist), axis=-1)
        return (np.take_along_axis(idx, order, -1), np.take_along_axis(dist, order, -1))

    ci, cd = lists(kc, np.arange(0, 40, 2))  # (the two lists hold different points)
    ei, ed = lists(ke, np.arange(5, 40, 2))  # (>= sh: shifted points stay points)
    ei[1, 4, 3:], ed[1, 4, 3:] = -1, np.inf  # a short edge list
    ci[0, 5, 2:], cd[0, 5, 2:] = -1, np.inf  # a short core list
    ld, off, sh = kc + 3, 5, 3  # core rows of ld entries after off; edge points - sh
    cis = np.full((nb, off + rows * ld), 77, np.int32)
    cds = np.full((nb, off + rows * ld), -1.0, np.float32)
    cis[:, off:].reshape(nb, rows, ld)[:, :, :kc] = ci
    cds[:, off:].reshape(nb, rows, ld)[:, :, :kc] = cd
    d = be.to_device
    out_i, out_d = be.empty((nb, nq, k), np.int32), be.empty((nb, nq, k), np.float32)
    KNN.launch_window(be, "float", d(qpts), row0, nq, nb,
                      RawLists(d(cis), d(cds), kc, ld, off + rows * ld, off),
                      RawLists(d(np.where(ei >= 0, ei - sh, -1).astype(np.int32)), d(ed), ke,
                               ke, rows * ke, 0, sh), lo, hi, k, out_i, out_d)
    want_i = np.full((nb, nq, k), -1, np.int32)
    want_d = np.full((nb, nq, k), np.inf, np.float32)
    for b in range(nb):
        for q in range(nq):
            r, p = row0 + q, qpts[row0 + q]
            cand = [(cd[b, r, j], ci[b, r, j]) for j in range(kc) if ci[b, r, j] >= 0]
            cand += [(ed[b, r, j], ei[b, r, j]) for j in range(ke)
                     if ei[b, r, j] >= 0 and lo <= ei[b, r, j] < hi]
            cand.sort(key=lambda c: (c[0], 2 * abs(int(c[1]) - p) + (c[1] > p)))
            for j, (dd, ll) in enumerate(cand[:k]):
                want_i[b, q, j], want_d[b, q, j] = ll, np.sqrt(dd)
    np.testing.assert_array_equal(be.to_host(out_i), want_i)
    np.testing.assert_array_equal(be.to_host(out_d), want_d)
    KNN.launch_window(be, "float", d(qpts), row0, nq, nb,  # no edge: the core, finished
                      RawLists(d(cis), d(cds), kc, ld, off + rows * ld, off), None, lo, hi, k,
                      out_i, out_d)
    np.testing.assert_array_equal(be.to_host(out_i), ci[:, row0:row0 + nq, :k])
    np.testing.assert_array_equal(be.to_host(out_d), np.sqrt(cd[:, row0:row0 + nq, :k]))


def test_float32_check_falls_back_to_float64_at_every_lag():
    """A series float32 cannot hold: one warning, and every lag's float64 matrix."""
    rng = np.random.default_rng(3)
    x = np.repeat([0.0, 1.0], 100) + 1e-9 * logistic_map(200) + 1e-10 * rng.random(200)
    P = np.column_stack([x, logistic_map(200), x[::-1]])
    with pytest.warns(PrecisionWarning, match="float64") as rec:
        got = pe.xmap(P, E=2, Tp=[-2, 0, 1], device=CPU_DEVICE)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    for a, lag in enumerate((-2, 0, 1)):
        ref = pe.xmap(P, E=2, Tp=lag, device=CPU_DEVICE, dtype="float64")
        np.testing.assert_array_equal(got.rho[a], np.asarray(ref.rho))


def test_oclgrind_clean():
    """The lag scan's kernels (the union k-NN, the window, pack and skill) run without
    invalid accesses or data races on Oclgrind, agreeing with the CPU within float32
    rounding (Oclgrind's libm); uninitialised-value reports are ignored as on the
    single-lag map's path (tests/test_xmap.py's test_oclgrind_clean says why)."""
    import json
    X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
    out = run_under_oclgrind("""
        import json, numpy as np, pyedmcl as pe
        X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
        r = pe.xmap(X, E=[1, 2, 3], Tp=[-2, 0, 1], block_rows=2)
        print(json.dumps(r.rho.tolist()))
    """, ignore_uninitialized=True)
    got = np.array(json.loads(out.strip().splitlines()[-1]), np.float32)
    ref = pe.xmap(X, E=[1, 2, 3], Tp=[-2, 0, 1], device=CPU_DEVICE)
    np.testing.assert_allclose(got, ref.rho, atol=RHO_TOL, rtol=0)


def test_entries_match_pyedm_ccm(lagged):
    pyEDM = pytest.importorskip("pyEDM")
    X, r = lagged
    L = X.shape[0]
    df = pd.DataFrame(X.astype(np.float64), columns=[f"x{i}" for i in range(X.shape[1])])
    df.insert(0, "time", np.arange(1, L + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, lag in enumerate(LAGS):
            for i, j in ((0, 1), (2, 0), (4, 3)):
                E = int(r.E[j])
                o = pyEDM.CCM(dataFrame=df, columns=f"x{i}", target=f"x{j}", E=E, tau=-1,
                              Tp=lag, libSizes=[L], sample=1, parallel=False)
                assert abs(r.rho[a, i, j] - o[f"x{i}:x{j}"].iloc[0]) < RHO_TOL, (lag, i, j)


def test_best_lag_and_frames(lagged):
    X, r = lagged
    best = r.best_lag
    assert best.shape == (5, 5)
    for i, j in ((0, 1), (3, 2)):
        col = r.rho[:, i, j]
        assert best[i, j] == LAGS[int(np.argmax(col))]
        assert r.best_rho[i, j] == col.max()
    df = r.as_dataframe()
    assert len(df) == len(LAGS) * 25
    row = df[(df.Tp == -1) & (df.library == "1") & (df.target == "4")]
    assert row.rho.iloc[0] == r.rho[1, 1, 4]
    pytest.importorskip("xarray")
    ds = r.as_xarray()
    assert list(ds.Tp.values) == LAGS
    np.testing.assert_array_equal(ds.rho.sel(Tp=2).values, r.rho[3])


@pytest.mark.parametrize("Tp, match", [([0, 100], r"Tp=100.*-99"), ([-100], r"Tp=-100"),
                                       ([], "Tp is empty"), ("0,1", "Tp must be an integer")])
def test_bad_lags_refused(Tp, match):
    X = panel()
    with pytest.raises((ValueError, TypeError), match=match):
        pe.xmap(X, E=2, Tp=Tp, device=CPU_DEVICE)


def test_lags_with_store_or_surrogates_refused(tmp_path):
    X = panel()
    with pytest.raises(ValueError, match="surrogates="):
        pe.xmap(X, E=2, Tp=[0, 1], surrogates=9, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="out="):
        pe.xmap(X, E=2, Tp=[0, 1], out=str(tmp_path / "m.zarr"), device=CPU_DEVICE)
    with pytest.raises(ValueError, match="method='simplex' only"):
        pe.xmap(X, E=2, Tp=[0, 1], method="smap", theta=2.0, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="scheduler="):
        pe.xmap(X, E=2, Tp=[0, 1], scheduler="tcp://127.0.0.1:1", device=CPU_DEVICE)
    with pytest.raises(ValueError, match="exclusion_radius"):  # the simplex map has none
        pe.xmap(X, E=2, Tp=[0, 1], exclusion_radius=3, device=CPU_DEVICE)


def test_an_E_too_large_for_a_far_lag_names_it():
    X = panel(L=30, N=3)
    with pytest.raises(ValueError, match=r"E=12 .*Tp=12\)"):
        pe.xmap(X, E=12, Tp=[-1, 0, 12], device=CPU_DEVICE)
    with pytest.raises(ValueError, match="knn_method='scan' needs tau > 0"):
        pe.xmap(X, E=2, tau=-1, Tp=[0, 1], knn_method="scan", device=CPU_DEVICE)
