"""Fused embedding-dimension scan (knn_scan/knn_scan.cl.mako) against the per-E path.

Oracles: (a) :func:`pyedmcl.simplex` per E: the fused tables are bit-identical to
the per-E kernel's (same coordinates added in the same order, contraction off), so
every prediction must be EXACTLY equal; skills are reduced in another order over the
same pairs (queries without a prediction at that E are skipped), so rho / MAE /
RMSE agree to 1e-12 with a float64 accumulator (1e-5 with float32); (b) pyEDM 2.5
EmbedDimension, live, within 1e-5 (float32 data). Small sizes: every case compiles
its own kernels.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE, FAST_BUILD_CPU, device_cases, run_under_oclgrind

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl._precision import unstandardised
from pyedmcl.data import logistic_map
from pyedmcl.edm.row_check import unchecked
from pyedmcl.kernels.knn_scan import KNN_SCAN
from pyedmcl.primitives.ranges import resolve
from pyedmcl.primitives.scan_fused import fused_layout, run_fused, scan_layout

RHO_TOL = 1e-5  # vs pyEDM (float32 data, its float64)

CASES = {
    "loo": dict(),
    "disjoint": dict(lib="1 70", pred="71 140"),
    "segments": dict(lib="1 40 55 110", pred="30 140", exclusion_radius=2),
    "tp_radius": dict(Tp=3, exclusion_radius=4),
    "tau2": dict(tau=2, Tp=2, lib="1 100", pred="60 140"),
    "knn": dict(knn=4, lib="1 90", pred="91 140"),
}


def _series(integer: bool = False) -> np.ndarray:
    x = logistic_map(140, r=3.9, x0=0.4, burn=0)
    return np.floor(x * 6) if integer else x  # integer series: many tied distances


def _skill_tol(device: str) -> float:
    return 1e-12 if get_backend(device).info.fp64 else 1e-5


def _fused(device, x, max_E, params=None, **kw):
    be = get_backend(device)
    plans = [resolve(x.size, E=E, **kw) for E in range(1, max_E + 1)]
    lay = fused_layout(plans)
    assert lay is not None, "these rows nest: the fused path must apply"
    sk, pred = run_fused(be, lay, x, None, np.float32, "float", params=params, predictions=True)
    return lay, plans, sk, pred


@pytest.mark.parametrize("integer", [False, True], ids=["real", "ties"])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_equals_per_E_simplex(device, case, integer):
    kw = CASES[case]
    x = _series(integer)
    max_E = 6
    lay, plans, sk, pred = _fused(device, x, max_E, **kw)
    for E, plan in zip(range(1, max_E + 1), plans, strict=True):
        with unstandardised(), unchecked():  # run_fused above saw x as given; scans
            ref = pe.simplex(x, E=E, device=device, **kw)  # take float32 alone
        np.testing.assert_array_equal(lay.qt[lay.qemax >= E], plan.pred_times)
        got = pred[E - 1][lay.qemax >= E]
        np.testing.assert_array_equal(got, ref.predicted.astype(np.float32),
                                      err_msg=f"E={E}: fused predictions differ from simplex")
        assert np.isnan(pred[E - 1][lay.qemax < E]).all()
        tol = _skill_tol(device)
        np.testing.assert_allclose(sk[E - 1, :3], [ref.rho, ref.mae, ref.rmse], rtol=0, atol=tol)
    # the public API takes the fused path and equals the per-E pipeline
    a = pe.embed_dimension(x, max_E=max_E, device=device, fused=True, **kw)
    b = pe.embed_dimension(x, max_E=max_E, device=device, fused=False, **kw)
    np.testing.assert_allclose(a.rho, b.rho, rtol=0, atol=_skill_tol(device))
    np.testing.assert_allclose(a.rmse, b.rmse, rtol=0, atol=_skill_tol(device))


@pytest.mark.parametrize("kw", [dict(max_E=1), dict(max_E=3, dtype=np.float64),
                                dict(max_E=4, knn=1, exclusion_radius=2)],
                         ids=["E1", "float64", "knn1"])
def test_edges_and_float64(device, kw):
    """float64 data (double vectors), a single E, knn=1: fused equals the per-E path
    (same tables; skills to 1e-12 with a float64 accumulator, 1e-5 without)."""
    x = _series()
    a = pe.embed_dimension(x, device=device, fused=True, **kw)
    b = pe.embed_dimension(x, device=device, fused=False, **kw)
    np.testing.assert_allclose(a.rho, b.rho, rtol=0, atol=_skill_tol(device))
    np.testing.assert_allclose(a.mae, b.mae, rtol=0, atol=_skill_tol(device))


VARIANTS = [
    {"WG": 8, "TILE": 16, "QB": 4, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 0},
    {"WG": 16, "TILE": 32, "QB": 8, "SPLIT": 3, "INS": "q", "VEC": 1, "ANY": 1},
    {"WG": 16, "TILE": 16, "QB": 2, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1},
    {"WG": 2, "TILE": 32, "QB": 3, "SPLIT": 1, "INS": "q", "VEC": 8, "ANY": 0},
    {"WG": 4, "TILE": 64, "QB": 5, "SPLIT": 2, "INS": "qe", "VEC": 16, "ANY": 0},
    {"WG": 4, "TILE": 32, "QB": 4, "SPLIT": 1, "INS": "key", "VEC": 16, "ANY": 0},
    {"WG": 1, "TILE": 16, "QB": 1, "SPLIT": 1, "INS": "key", "VEC": 4, "ANY": 0},
    {"WG": 4, "TILE": 64, "QB": 4, "SPLIT": 1, "INS": "key", "VEC": 16, "ANY": 0, "LPB": 64},
    {"WG": 1, "TILE": 32, "QB": 1, "SPLIT": 1, "INS": "key", "VEC": 4, "ANY": 0, "LPB": 32},
    {"WG": 16, "TILE": 16, "QB": 2, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1, "CQ": 1},
    {"WG": 8, "TILE": 32, "QB": 5, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 1, "CQ": 1},
]


@pytest.mark.parametrize(("device", "params"), device_cases(
    VARIANTS, ["qe", "split3-any", "split2-qe-any", "vec8", "vec16-split2-qe", "key16", "key4",
               "key16-lpb64", "key4-lpb32", "split2-qe-cq", "qe-cq-r4"]))
def test_variants_give_identical_tables(device, params):
    """Insertion modes and library splits (merged after) keep the total order; so do
    candidate lanes (CQ), which visit a tile's candidates in the order their atomics
    ran (the lists keep the best K under a total order: any visiting order). Every
    variant where conftest.every_shape holds, a covering few on another CPU runtime."""
    x = _series(integer=True)
    kw = CASES["segments"]
    _, _, sk0, p0 = _fused(device, x, 5, **kw)
    _, _, sk1, p1 = _fused(device, x, 5, params=params, **kw)
    np.testing.assert_array_equal(p0, p1)
    np.testing.assert_array_equal(sk0[:, 3], sk1[:, 3])


@pytest.mark.parametrize("params", [
    {"WG": 8, "TILE": 8, "QB": 6, "SPLIT": 3, "INS": "qe", "VEC": 1, "ANY": 1, "CQ": 1},
    {"WG": 8, "TILE": 16, "QB": 3, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 0},
    {"WG": 2, "TILE": 64, "QB": 4, "SPLIT": 2, "INS": "qe", "VEC": 16, "ANY": 0},
], ids=["qe-cq", "qe", "qe-vec16"])
@pytest.mark.parametrize("real", ["float", "double"])
def test_per_list_insertion_exact_on_real_valued_series(device, params, real):
    """INS "qe" recomputes a candidate's partial sum in the (query, E) work-item: the
    same coordinates in the same order as the distance phase and the per-E kernel, so
    the same bits on series whose sums round (random walks, E up to 12, several
    tau and exclusion radii), not only on integer series. A loop to E there was
    compiled by Intel's CPU runtime into a sum in another order (an ulp off)."""
    be = get_backend(device)
    rng = np.random.default_rng(0)
    dt = np.float64 if real == "double" else np.float32
    ref = {"WG": 4, "TILE": 64, "QB": 4, "SPLIT": 1, "INS": "q", "VEC": 8, "ANY": 0}
    for n, emax, kw in ((702, 8, {}), (400, 12, dict(tau=2, exclusion_radius=3))):
        x = np.cumsum(rng.standard_normal(n))
        lay = fused_layout([resolve(n, E=E, **kw) for E in range(1, emax + 1)])
        sk0, p0 = run_fused(be, lay, x, None, dt, real, params=ref, predictions=True)
        sk1, p1 = run_fused(be, lay, x, None, dt, real, params=params, predictions=True)
        np.testing.assert_array_equal(p0, p1)
        np.testing.assert_array_equal(sk0, sk1)


KEY_CASES = [(c, r, e, lp) for lp in (0, 32) for e in (10, 17) for r in ("float", "double")
             for c in ("loo", "knn", "tau2")]


@pytest.mark.parametrize(("device", "case", "real", "emax", "lpb"), device_cases(
    KEY_CASES, ["-".join(map(str, (lp, e, r, c))) for c, r, e, lp in KEY_CASES], pairs=True))
def test_key_lists_equal_local_lists(device, case, real, emax, lpb):
    """INS "key" (CPUs: private lists, first thresholds from lane minima) gives the tables
    of the local-memory lists bit for bit: float32 packed keys and the float64 network,
    k-NN per E, tau 2, ties (integer series); max_E 17 with 8-lane vectors covers E with
    K above one vector of lane minima (two vectors), and above two (no first threshold);
    max_E 10 keeps every float32 list within one ulong16 (the sorted-lane lists), 17 not;
    LPB 32: four vectors' candidate tests before one branch (candidates found against a
    threshold that an earlier lane has lowered since). Every combination on GPUs, every
    two values together on the CPU runtime that builds fastest (conftest.pairwise), a
    covering few on another CPU runtime."""
    x = _series(integer=True)
    be = get_backend(device)
    dt = np.float64 if real == "double" else np.float32
    kw = CASES[case]
    lay = fused_layout([resolve(x.size, E=E, **kw) for E in range(1, emax + 1)])
    ref = {"WG": 4, "TILE": 64, "QB": 4, "SPLIT": 1, "INS": "q", "VEC": 8, "ANY": 0}
    key = {"WG": 2, "TILE": 32, "QB": 2, "SPLIT": 1, "INS": "key", "VEC": 8, "ANY": 0,
           "LPB": lpb}
    sk0, p0 = run_fused(be, lay, x, None, dt, real, params=ref, predictions=True)
    sk1, p1 = run_fused(be, lay, x, None, dt, real, params=key, predictions=True)
    np.testing.assert_array_equal(p0, p1)
    np.testing.assert_array_equal(sk0, sk1)


@pytest.mark.parametrize("kw", [
    dict(lib="1 100", pred="201 500"),
    dict(lib="1 300", pred="1 300", Tp=2, exclusionRadius=3),
    dict(lib="1 300", pred="151 400", tau=-2),
])
def test_matches_pyedm_embed_dimension(device, kw):
    pyEDM = pytest.importorskip("pyEDM")
    df = pyEDM.sampleData["TentMap"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyEDM.EmbedDimension(dataFrame=df, columns="TentMap", target="TentMap", maxE=7,
                                   showPlot=False, numProcess=1, **kw)
    ours = dict(lib=kw["lib"], pred=kw["pred"], Tp=kw.get("Tp", 1),
                exclusion_radius=kw.get("exclusionRadius", 0), tau=-kw.get("tau", -1))
    s = pe.embed_dimension(df["TentMap"].to_numpy(), max_E=7, device=device, fused=True, **ours)
    np.testing.assert_allclose(s.rho, ref["rho"], rtol=0, atol=RHO_TOL)
    assert s.best == ref["E"][int(np.argmax(ref["rho"]))]


def test_target_series_and_fallbacks():
    """A separate target; rows that do not nest (future lags, overlapping lib pairs)
    fall back to the per-E path, which ``fused=True`` refuses with a clear error."""
    x = _series()
    y = np.roll(x, 3) + 0.1 * x
    a = pe.embed_dimension(x, y, max_E=4, lib="1 70", pred="71 140", device=CPU_DEVICE, fused=True)
    b = pe.embed_dimension(x, y, max_E=4, lib="1 70", pred="71 140", device=CPU_DEVICE, fused=False)
    np.testing.assert_allclose(a.rho, b.rho, rtol=0, atol=1e-12)
    for kw in (dict(tau=-1), dict(lib="1 80 60 120")):
        assert fused_layout([resolve(x.size, E=E, **kw) for E in range(1, 5)]) is None
        with pytest.raises(ValueError, match="fused=True"):
            pe.embed_dimension(x, max_E=4, device=CPU_DEVICE, fused=True, **kw)
        c = pe.embed_dimension(x, max_E=4, device=CPU_DEVICE, **kw)  # per-E path
        d = pe.embed_dimension(x, max_E=4, device=CPU_DEVICE, fused=False, **kw)
        np.testing.assert_array_equal(c.rho, d.rho)


def test_max_E_beyond_the_fused_range_takes_the_fused_scan_for_its_head():
    """max_E 34: E 1..32 come from the fused scan (the max_E 32 scan's skills exactly),
    E 33, 34 from the per-E pipelines (pyedmcl.simplex's skills); a few programs are
    built, not two per E (68 on the per-E path), and a too large max_E names its E
    before any work."""
    x = logistic_map(300, r=3.9, x0=0.4, burn=0)
    # host logic (which E take which path): on the runtime that compiles fastest (PoCL
    # compiles the E = 32 kernels again at their first launch: decision 0172); the
    # kernels run on every platform in the tests above
    be = get_backend(FAST_BUILD_CPU)
    kw = dict(device=FAST_BUILD_CPU)  # float32: the fused kernels build in seconds
    n0 = be.build_count
    res = pe.embed_dimension(x, max_E=34, **kw)
    assert be.build_count - n0 <= 12
    np.testing.assert_array_equal(res.values, np.arange(1, 35))
    head = pe.embed_dimension(x, max_E=32, **kw)
    np.testing.assert_array_equal(res.rho[:32], head.rho)
    np.testing.assert_array_equal(res.rmse[:32], head.rmse)
    for E in (33, 34):
        one = pe.simplex(x, E=E, **kw)
        np.testing.assert_allclose(res.rho[E - 1], one.rho, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"max_E=40 is too large.*E=37 fails.*use max_E <= 36"):
        pe.embed_dimension(x[:75], max_E=40, **kw)


@pytest.mark.parametrize("case", list(CASES) + ["future", "overlap", "bad_knn"])
def test_fast_layout_equals_layout_of_resolved_plans(case):
    """scan_layout (one resolve + per-E library rows, cached) is fused_layout of all plans."""
    kw = {**CASES, "future": dict(tau=-1), "overlap": dict(lib="1 80 60 120"),
          "bad_knn": dict(knn=200)}[case]
    n, max_E = 140, 6
    fast = scan_layout(n, max_E, **kw)
    try:
        ref = fused_layout([resolve(n, E=E, **kw) for E in range(1, max_E + 1)])
    except ValueError:
        ref = None
    assert (fast is None) == (ref is None)
    if ref is not None:
        for f in ("emax", "tau", "knn", "radius", "Tp", "t0"):
            assert getattr(fast, f) == getattr(ref, f), f
        for f in ("qt", "qemax", "lemax", "obs"):
            np.testing.assert_array_equal(getattr(fast, f), getattr(ref, f), err_msg=f)
        assert scan_layout(n, max_E, **kw) is fast  # cached


@pytest.mark.parametrize("params", [
    {"WG": 16, "TILE": 16, "QB": 2, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 1},
    {"WG": 16, "TILE": 32, "QB": 4, "SPLIT": 3, "INS": "q", "VEC": 1, "ANY": 1},
    {"WG": 2, "TILE": 32, "QB": 3, "SPLIT": 2, "INS": "q", "VEC": 8, "ANY": 0},
], ids=["qe", "split3", "vec8-split2"])
def test_tile_order_does_not_change_the_scan(device, params, monkeypatch):
    """ORD=1 (each chunk's tiles nearest in time to the queries first) gives ORD=0's
    tables and skills exactly, on a smooth series where the order matters most."""
    import pyedmcl.kernels.knn as knn_mod
    from pyedmcl.neighbors.lorenz import lorenz63
    x = lorenz63(300, component="x")
    out = []
    for order in (0, 1):
        monkeypatch.setattr(knn_mod, "TILE_ORDER", order)
        out.append(_fused(device, x, 6, params=params, lib="1 120 141 300", pred="20 300",
                          exclusion_radius=2)[2:])
    for a, b in zip(out[0], out[1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_tuning_family_registered_and_case_runs():
    import dataclasses

    from pyedmcl.kernels import registry
    fam = registry()["knn_scan"]
    assert fam is KNN_SCAN
    be = get_backend(CPU_DEVICE)
    gpu = dataclasses.replace(be.info, device_type="gpu", max_work_group_size=1024,
                              max_work_item_sizes=(1024, 1024, 64), local_mem_bytes=49152)
    assert fam.space.valid(fam.space.heuristic(gpu), gpu)  # the GPU default is in its space
    assert fam.space.candidates(gpu) and all(c["VEC"] == 1 for c in fam.space.candidates(gpu))
    # candidate lanes (CQ) only with the per-(query, E) insertion and candidate words:
    # GPUs have both kinds, CPUs none (their private-list scan cannot take them)
    gpu_cq = [c for c in fam.space.candidates(gpu) if c["CQ"]]
    assert gpu_cq and all(c["INS"] == "qe" and c["ANY"] for c in gpu_cq)
    assert any(not c["CQ"] for c in fam.space.candidates(gpu))
    assert not any(c["CQ"] for c in fam.space.candidates(be.info))
    assert not fam.space.valid(dict(fam.space.default(be.info), CQ=1), be.info)
    from pyedmcl.kernels.xmap import XMAP_SCAN  # the map's scan: same space, its own default
    assert XMAP_SCAN.space.valid(XMAP_SCAN.space.heuristic(gpu), gpu)
    assert XMAP_SCAN.space.heuristic(gpu)["CQ"] == 1
    spec = {"EMAX": 4, "TAU": 1, "KNN": 0, "METRIC": "euclidean", "REAL": "float"}
    case = fam.case(be, spec, 200)
    other = next(c for c in fam.space.candidates(be.info) if c["SPLIT"] == 2 and c["INS"] == "qe")
    outs = []
    for p in (fam.space.default(be.info), other):
        assert fam.space.valid(p, be.info)
        evs = case.run(p)
        # the tuner sums these: a split scan's time is the scan's and the merge's
        # (the merge alone made every SPLIT > 1 look 30x faster to the H100 tuner)
        assert len(evs) == (2 if p["SPLIT"] > 1 else 1)
        be.wait(evs[-1])
        outs.append(case.output())
    assert np.isfinite(outs[0]).any()
    assert case.matches(outs[1], outs[0])


def test_oclgrind_clean():
    """Both insertion modes, candidate lanes and the split + merge run clean (bounds, races,
    uninitialised values) at a tiny size and agree with PoCL bit for bit on the
    neighbour order (predictions within float32 rounding: Oclgrind has its own libm)."""
    code = """
        import json, numpy as np, clkernels
        from pyedmcl.data import logistic_map
        from pyedmcl.primitives.ranges import resolve
        from pyedmcl.primitives.scan_fused import fused_layout, run_fused
        x = logistic_map(40, r=3.9, x0=0.4, burn=0)
        lay = fused_layout([resolve(40, E=E, lib="1 25", pred="10 40", exclusion_radius=1)
                            for E in range(1, 4)])
        out = []
        for p in ({"WG": 8, "TILE": 8, "QB": 3, "SPLIT": 1, "INS": "q", "VEC": 1, "ANY": 0},
                  {"WG": 4, "TILE": 8, "QB": 2, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1},
                  {"WG": 4, "TILE": 8, "QB": 3, "SPLIT": 1, "INS": "qe", "VEC": 1, "ANY": 1,
                   "CQ": 1},
                  {"WG": 2, "TILE": 16, "QB": 2, "SPLIT": 1, "INS": "q", "VEC": 4, "ANY": 0}):
            sk, pred = run_fused(clkernels.get_backend(), lay, x, None, np.float32, "float",
                                 params=p, predictions=True)
            out.append([np.nan_to_num(pred, nan=-9).tolist(), sk[:, 3].tolist()])
        print(json.dumps(out))
    """
    res = json.loads(run_under_oclgrind(code).strip().splitlines()[-1])
    x = logistic_map(40, r=3.9, x0=0.4, burn=0)
    lay, _, sk, pred = _fused(CPU_DEVICE, x, 3, lib="1 25", pred="10 40", exclusion_radius=1)
    for p, n in res:
        np.testing.assert_allclose(np.array(p), np.nan_to_num(pred, nan=-9), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(n, sk[:, 3])


def test_dataframe_input_ok():
    x = pd.Series(_series())
    s = pe.embed_dimension(x, max_E=3, device=CPU_DEVICE)
    assert s.values.tolist() == [1, 2, 3] and np.isfinite(s.rho).all()


def test_repeated_scans_reuse_scratch_correctly():
    """Scans of one shape reuse device scratch: each result is still its own series'."""
    xs = [_series(), np.sin(np.arange(140) * 0.7) + 0.01 * np.arange(140)]
    got = [pe.embed_dimension(x, max_E=4, device=CPU_DEVICE) for x in xs + xs[:1]]
    for x, g in zip(xs + xs[:1], got, strict=True):
        ref = pe.embed_dimension(x, max_E=4, device=CPU_DEVICE, fused=False)
        np.testing.assert_allclose(g.rho, ref.rho, rtol=0, atol=1e-12)


def test_oclgrind_clean_key_lists():
    """The private-list variant (INS "key") runs without invalid accesses, races or
    uninitialised reads under Oclgrind and gives the local-memory lists' tables (an
    unoptimised build: the plugin crashed on the optimised reductions of vector compare
    masks; conftest.run_under_oclgrind)."""
    code = """
        import json, numpy as np, clkernels
        from pyedmcl.data import logistic_map
        from pyedmcl.primitives.ranges import resolve
        from pyedmcl.primitives.scan_fused import fused_layout, run_fused
        x = logistic_map(40, r=3.9, x0=0.4, burn=0)
        lay = fused_layout([resolve(40, E=E, lib="1 25", pred="10 40", exclusion_radius=1)
                            for E in range(1, 4)])
        out = []
        for lpb in (0, 8):  # one branch per vector, and per two
            p = {"WG": 2, "TILE": 8, "QB": 2, "SPLIT": 1, "INS": "key", "VEC": 4, "ANY": 0,
                 "LPB": lpb}
            sk, pred = run_fused(clkernels.get_backend(), lay, x, None, np.float32, "float",
                                 params=p, predictions=True)
            out.append([np.nan_to_num(pred, nan=-9).tolist(), sk[:, 3].tolist()])
        print(json.dumps(out))
    """
    runs = json.loads(run_under_oclgrind(code, unoptimised=True).strip().splitlines()[-1])
    x = logistic_map(40, r=3.9, x0=0.4, burn=0)
    lay, _, sk, pred = _fused(CPU_DEVICE, x, 3, lib="1 25", pred="10 40", exclusion_radius=1)
    for p, n in runs:
        np.testing.assert_allclose(np.array(p), np.nan_to_num(pred, nan=-9), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(n, sk[:, 3])
