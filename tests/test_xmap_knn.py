"""The k-NN kernel's launch modes and variants the all-to-all map uses, against NumPy.

* series batching (``series_stride``): batch b = series b of the flattened data,
  shared point lists, series-local output indices;
* the CPU ``vec`` variant (explicit SIMD vectors over library points, packed-key
  top-k for float32), every vector width, float32 and float64, library-list
  batching too (CCM's sampled libraries);
* every variant builds the same xmap matrix bit for bit (the engine with fixed
  k-NN parameters).

Tolerances: integer-valued data, so squared distances are exact and the table
(indices, ties broken by |p - l| then l) must equal the reference exactly;
distances to rtol 1e-6 (the sqrt). Matrices across variants: bit-identical.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import CPU_DEVICE, CPU_RUNTIMES, FAST_BUILD_CPU, covering, few, run_under_oclgrind
from test_xmap import panel

import pyedmcl as pe
from clkernels import get_backend
from clkernels.backends.base import render
from pyedmcl.xmap import skill_plan
from pyedmcl.xmap.skill_plan import SkillPlan

VEC = [dict(VARIANT="vec", WG=8, TILE=32, QB=4, EA=0, INS="reg", FLAG=1),
       dict(VARIANT="vec", WG=16, TILE=64, QB=8, EA=0, INS="reg", FLAG=1),
       dict(VARIANT="vec", WG=4, TILE=16, QB=16, EA=0, INS="reg", FLAG=1)]
ROWS = dict(VARIANT="rows", WG=16, TILE=32, QB=1, EA=0, INS="reg", FLAG=1)
COLS = dict(VARIANT="cols", WG=16, TILE=32, QB=16, EA=0, INS="local", FLAG=0)
MASK = dict(VARIANT="cols", WG=16, TILE=32, QB=8, EA=0, INS="mask", FLAG=0)


def _reference(x: np.ndarray, E: int, k: int, R: int, lib: np.ndarray, npts: int):
    """(indices, distances) of each query 0..npts-1 among ``lib``: distance, |p - l|, l."""
    V = np.stack([x[j: j + npts] for j in range(E)], 1)
    p = np.arange(npts)
    D = np.sqrt(((V[:, None, :] - V[None, lib, :]) ** 2).sum(-1))
    D[np.abs(p[:, None] - lib[None, :]) <= R] = np.inf
    tie = 2 * np.abs(p[:, None] - lib[None, :]) + (lib[None, :] > p[:, None])
    order = np.lexsort((tie, D), axis=1)[:, :k]
    d = np.take_along_axis(D, order, 1)
    i = np.where(np.isinf(d), -1, lib[order])
    pad = k - order.shape[1]  # fewer library points than k: -1 / inf
    return np.pad(i, ((0, 0), (0, pad)), constant_values=-1), \
        np.pad(d, ((0, 0), (0, pad)), constant_values=np.inf)


def _launch(device, params, X, E, k, R, libs, series: bool, real="float"):
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    be = get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64")
    dt = np.float64 if real == "double" else np.float32
    n = X.shape[1]
    npts = n - (E - 1)
    nb = X.shape[0] if series else libs.shape[0]
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": "euclidean", "REAL": real}
    idx = be.empty((nb, npts, k), np.int32)
    dist = be.empty((nb, npts, k), dt)
    xd = be.to_device(np.ascontiguousarray(X, dtype=dt).reshape(-1))
    qd = be.to_device(np.arange(npts, dtype=np.int32))
    ld = be.to_device(np.ascontiguousarray(libs, dtype=np.int32))
    if series:
        KNN.launch(be, params, spec, xd, qd, npts, ld, libs.shape[-1], nb, R, idx, dist,
                   xoff=0, series_stride=n)
    else:
        KNN.launch(be, params, spec, xd, qd, npts, ld, libs.shape[1], nb, R, idx, dist)
    return be.to_host(idx), be.to_host(dist)


@pytest.mark.parametrize("params", VEC + [ROWS, COLS, MASK],
                         ids=lambda p: f"{p['VARIANT']}-{p['INS']}-QB{p['QB']}")
def test_series_batches_match_numpy(device, params):
    """Three series in one launch; integer data (many exact ties); radius 1; a library
    shorter than the queries so rows near the end pad with -1 / inf at k=40."""
    rng = np.random.default_rng(4)
    X = rng.integers(0, 4, (3, 97)).astype(float)
    E, k, R = 3, 6, 1
    npts = X.shape[1] - (E - 1)
    lib = np.arange(0, npts, 2)
    got_i, got_d = _launch(device, params, X, E, k, R, lib, series=True)
    for b in range(3):
        ref_i, ref_d = _reference(X[b], E, k, R, lib, npts)
        np.testing.assert_array_equal(got_i[b], ref_i)
        np.testing.assert_allclose(got_d[b], ref_d, rtol=1e-6)
    got_i, _ = _launch(device, params, X[:1], E, 40, R, lib[:30], series=True)
    ref_i, _ = _reference(X[0], E, 40, R, lib[:30], npts)
    np.testing.assert_array_equal(got_i[0], ref_i)


@pytest.mark.parametrize("real", ["float", "double"])
@pytest.mark.parametrize("params", VEC, ids=lambda p: f"QB{p['QB']}")
def test_vec_library_batches_match_numpy(device, params, real):
    """Library-list batching (CCM's sampled subsets) with the vec variant."""
    x = np.random.default_rng(2).integers(0, 5, 150).astype(float)
    E, k, R = 3, 6, 0
    npts = x.size - (E - 1)
    libs = np.stack([np.sort(np.random.default_rng(s).choice(npts, 70, replace=False))
                     for s in range(3)])
    got_i, got_d = _launch(device, params, x[None, :], E, k, R, libs, series=False, real=real)
    for b in range(3):
        ref_i, ref_d = _reference(x, E, k, R, libs[b], npts)
        np.testing.assert_array_equal(got_i[b], ref_i)
        np.testing.assert_allclose(got_d[b], ref_d, rtol=1e-6)


def test_every_variant_same_matrix(device):
    """The engine with each k-NN variant (batched and one table per launch): the same
    matrix and E-scan bit for bit; and equal to single-pair CCM (every variant where
    conftest.every_shape holds, a covering few on another CPU runtime)."""
    from clkernels import get_backend
    from pyedmcl.kernels.xmap import XMAP_KNN
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(device)
    X = panel(L=90, N=6, seed=7).T
    E = np.array([2, 3, 2, 4, 3, 2])
    ref = None
    # (and a GPU's layout for contiguous libraries: SLIDE blocks of raw values)
    for params in covering(VEC + [ROWS, COLS, MASK, XMAP_KNN.SLIDE_LAYOUT_GPU], device):
        for kk in ("batched", "edm"):
            eng = XmapEngine(be, X, E, knn_kernel=kk, knn_params=params)
            got = (eng.block(0, 6), eng.edim_block(0, 6, 4))
            if ref is None:
                ref = got
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
    c = pe.ccm(X[1], X[3], E=4, lib_sizes=[90], random=False, device=device)
    assert ref[0][1, 3] == np.float32(c.rho_xy[0])


SCAN = [{"WG": 4, "TILE": 64, "QB": 16, "SPLIT": 1, "INS": "q", "VEC": 16, "ANY": 0},
        {"WG": 8, "TILE": 16, "QB": 4, "SPLIT": 2, "INS": "qe", "VEC": 1, "ANY": 1},
        {"WG": 2, "TILE": 32, "QB": 3, "SPLIT": 3, "INS": "q", "VEC": 8, "ANY": 0},
        {"WG": 4, "TILE": 32, "QB": 4, "SPLIT": 1, "INS": "key", "VEC": 8, "ANY": 0},
        {"WG": 4, "TILE": 64, "QB": 4, "SPLIT": 1, "INS": "key", "VEC": 16, "ANY": 0, "LPB": 64}]


@pytest.mark.parametrize("tau, Tp", [(1, 0), (2, 1), (1, -2)])
def test_fused_scan_tables_same_matrix(device, monkeypatch, tau, Tp):
    """Mixed E through the fused multi-E scan (one knn_scan launch per library batch,
    series batching, SPLIT merges included): the per-E batched path's matrix bit for
    bit, for every scan configuration and for library batches that split the rows;
    the automatic choice takes the scan for mixed E; rho equals single-pair CCM."""
    from clkernels import get_backend
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(device)
    X = panel(L=80, N=7, seed=11).T
    E = np.array([1, 3, 2, 5, 3, 4, 1])
    ref = XmapEngine(be, X, E, tau=tau, Tp=Tp, knn_kernel="batched").block(0, 7)
    auto = XmapEngine(be, X, E, tau=tau, Tp=Tp)
    assert auto.fused.applies()  # GPUs, and CPUs through the private-list scan (INS "key")
    np.testing.assert_array_equal(auto.block(0, 7), ref)
    for sp in SCAN:
        monkeypatch.setattr(xk.XMAP_SCAN, "params_for", lambda *a, sp=sp: dict(sp))
        eng = XmapEngine(be, X, E, tau=tau, Tp=Tp, knn_kernel="scan")
        got = np.vstack([eng.block(0, 3), eng.block(3, 7)])
        np.testing.assert_array_equal(got, ref)
    c = pe.ccm(X[2], X[3], E=5, tau=tau, Tp=Tp, lib_sizes=[X.shape[1]], random=False,
               device=device)
    assert ref[2, 3] == np.float32(c.rho_xy[0])


@pytest.mark.parametrize("tau", [1, 3])
def test_fused_scan_padded_panel_on_device_and_host(device, monkeypatch, tau):
    """The fused scan's padded panel (each series after (Emax - 1) tau zeros, rows of
    ``ldx``), gathered on the device from the panel already there and copied from the
    host (offsets past int32) alike, bit for bit, with the same int layout; the matrix
    the same either way."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn_scan import KNN_SCAN, batch_inputs
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(device)
    X = panel(L=70, N=9, seed=4).T.astype(np.float32)
    E = np.array([1, 3, 2, 5, 3, 4, 1, 2, 6])
    eng = XmapEngine(be, X, E, tau=tau, knn_kernel="scan")
    got = eng.block(0, 9)
    sc = eng.fused.setup()
    lanes = KNN_SCAN.padded_lanes(sc.params, sc.nq)
    xp, ints, ldx = batch_inputs(X, sc.qt, sc.qemax, 5 * tau, lanes, np.float32)
    assert sc.ldx == ldx and ldx >= 5 * tau + X.shape[1]
    np.testing.assert_array_equal(be.to_host(sc.xp_dev).reshape(-1), xp)
    np.testing.assert_array_equal(be.to_host(sc.ints_dev), ints)
    monkeypatch.setattr(SkillPlan, "gathers_targets", property(lambda self: False))
    host = XmapEngine(be, X, E, tau=tau, knn_kernel="scan")
    np.testing.assert_array_equal(host.block(0, 9), got)
    np.testing.assert_array_equal(be.to_host(host.fused.setup().xp_dev).reshape(-1), xp)


def test_fused_scan_rules():
    """The scan is not used for one E-group or negative tau, and is refused when forced
    where it cannot apply."""
    from clkernels import get_backend
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(CPU_DEVICE)
    X = panel(L=60, N=4, seed=3).T
    assert not XmapEngine(be, X, np.full(4, 3)).fused.applies()
    assert not XmapEngine(be, X, np.array([1, 2, 3, 4]), tau=-1).fused.applies()
    with pytest.raises(ValueError, match="tau > 0"):
        XmapEngine(be, X, np.array([1, 2, 3, 4]), tau=-1, knn_kernel="scan").block(0, 4)


def test_fused_scan_on_cpus_follows_tuning(monkeypatch):
    """On a CPU the map takes the fused scan with the private-list mode ("key"), and
    with another insertion mode only where tuning measured it on this CPU (a user
    entry here; not the heuristic's, nor one borrowed from another CPU's class): the
    untuned local-memory lists lose to the per-E kernels, tuned ones can win. The tuned scan's matrix is the per-E path's, bit for bit."""
    from clkernels import get_backend
    from clkernels.tuning.database import Choice, UserDB, entry_key, make_entry
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap import engine, fused_tables
    be = get_backend(CPU_DEVICE)
    X = panel(L=80, N=7, seed=11).T
    E = np.array([1, 3, 2, 5, 3, 4, 1])
    q = {"WG": 4, "TILE": 64, "QB": 16, "SPLIT": 1, "INS": "q", "VEC": 16, "ANY": 0}
    spec = {"EMAX": 5, "TAU": 1, "KNN": 0, "METRIC": "euclidean", "REAL": "float"}
    sb, zb = xk.XMAP_SCAN.spec_bucket(spec), xk.XMAP_SCAN.size_bucket(79)
    # the heuristic's "q", or one borrowed from another CPU's class: per-E kernels
    for source in ("heuristic", "shipped:cpu_class"):
        with monkeypatch.context() as m:
            m.setattr(xk.XMAP_SCAN, "params_for", lambda *a: dict(q))
            m.setattr(fused_tables, "lookup", lambda *a, s=source: Choice(dict(q), s))
            assert not engine.XmapEngine(be, X, E).fused.applies(), source
    # a tuned "q" (user database of this device): the scan
    UserDB(be.info).put(entry_key("xmap_scan", sb, zb),
                        make_entry(xk.XMAP_SCAN, be.info, sb, zb, q, 0.001, q, 0.001))
    assert xk.XMAP_SCAN.params_for(be, spec, 79, 79)["INS"] == "q"
    auto = engine.XmapEngine(be, X, E)
    assert auto.fused.applies()
    ref = engine.XmapEngine(be, X, E, knn_kernel="batched").block(0, 7)
    np.testing.assert_array_equal(auto.block(0, 7), ref)


def test_oclgrind_clean_fused_scan():
    """Series-batched knn_scan (SPLIT 2: the batched merge too), pack from its E planes
    and the skill, under Oclgrind: no invalid access or race, the PoCL matrix (atol
    1e-5: Oclgrind has its own libm for the weights), and no uninitialised read (an
    unoptimised build: conftest.run_under_oclgrind; test_xmap.py's full cross-map run
    still reports xmap_skill's reads of the packed table there)."""
    out = run_under_oclgrind("""
        import json, numpy as np, clkernels
        from pyedmcl.kernels import xmap as xk
        from pyedmcl.xmap.engine import XmapEngine
        xk.XMAP_SCAN.params_for = lambda *a: {"WG": 2, "TILE": 8, "QB": 2, "SPLIT": 2,
                                                 "INS": "qe", "VEC": 1, "ANY": 1}
        X = np.random.default_rng(0).standard_normal((3, 20)).astype(np.float32)
        eng = XmapEngine(clkernels.get_backend(), X, np.array([1, 3, 2]), knn_kernel="scan")
        print(json.dumps(eng.block(0, 3).tolist()))
    """, unoptimised=True)
    got = np.array(json.loads(out.strip().splitlines()[-1]), np.float32)
    from clkernels import get_backend
    from pyedmcl.xmap.engine import XmapEngine
    X = np.random.default_rng(0).standard_normal((3, 20)).astype(np.float32)
    ref = XmapEngine(get_backend(CPU_DEVICE), X, np.array([1, 3, 2]), knn_kernel="batched")
    np.testing.assert_allclose(got, ref.block(0, 3), atol=1e-5, rtol=0)


def test_oclgrind_clean_vec():
    """The vec variant (float32 packed keys, float64 network) and series batching run
    clean under Oclgrind and give the NumPy table."""
    out = run_under_oclgrind("""
        import json, numpy as np, clkernels
        from pyedmcl.kernels.knn import KNN
        be = clkernels.get_backend()
        X = np.random.default_rng(1).integers(0, 4, (2, 40)).astype(np.float32)
        res = {}
        for real in ("float", "double"):
            if real == "double" and not be.info.fp64:
                continue
            dt = np.float64 if real == "double" else np.float32
            spec = {"E": 2, "TAU": 1, "K": 3, "METRIC": "euclidean", "REAL": real}
            idx = be.empty((2, 39, 3), np.int32); dist = be.empty((2, 39, 3), dt)
            pts = be.to_device(np.arange(39, dtype=np.int32))
            KNN.launch(be, dict(VARIANT="vec", WG=4, TILE=16, QB=8, EA=0, INS="reg", FLAG=1),
                       spec, be.to_device(X.astype(dt).reshape(-1)), pts, 39, pts, 39, 2, 0,
                       idx, dist, series_stride=40)
            be.finish()
            res[real] = be.to_host(idx).tolist()
        print(json.dumps(res))
    """)
    res = json.loads(out.strip().splitlines()[-1])
    X = np.random.default_rng(1).integers(0, 4, (2, 40)).astype(float)
    assert res
    for got in res.values():
        for b in range(2):
            ref_i, _ = _reference(X[b], 2, 3, 0, np.arange(39), 39)
            np.testing.assert_array_equal(np.array(got[b]), ref_i)


SKILL = [{"TJ": 4, "VEC": 0, "LANES": 0, "LWG": 32}, {"TJ": 2, "VEC": 1, "LANES": 0, "LWG": 32},
         {"TJ": 8, "VEC": 1, "LANES": 0, "LWG": 32}, {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4},
         {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 4}, {"TJ": 4, "VEC": 0, "LANES": 1, "LWG": 2},
         {"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
         {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
         {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1, "LB": 2},
         {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "LMAJ": 1},
         {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LMAJ": 1},
         {"TJ": 4, "VEC": 2, "LANES": 0, "LWG": 32}, {"TJ": 16, "VEC": 2, "LANES": 0, "LWG": 32},
         {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "CM": 1},
         {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LB": 3, "LMAJ": 1, "CM": 1},
         {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "LB": 2, "CM": 0},
         {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "LB": 2, "LMAJ": 1, "CM": 1, "ST": 1, "CH": 1},
         {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LB": 3, "CM": 1, "ST": 1, "CH": 16},
         {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "LB": 2, "LMAJ": 1, "CM": 1, "ST": 1, "CH": 2,
          "SPL": 4},
         {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LB": 1, "CM": 1, "ST": 1, "CH": 16, "SPL": 8}]


def test_skill_vector_lanes_bit_identical(device, monkeypatch):
    """The fused lookup + rho with targets as vector lanes (VEC=1; VEC=2 read
    time-major, TJ 4 and 16 of E-groups of 1 to 6 targets) or as work-items
    (LANES=1: the reduction tree evaluated per work-item with a stack) gives the
    scalar kernel's matrix and E-scan bit for bit (every lane runs the same
    operations in the same order), in either grid order (LMAJ), with the tables in
    query-class order (CM) or not, staged in local memory (ST: one row at a time, or
    every row of a class at once) or not, the classes split into 4 or 8 subtrees
    streamed apart (SPL), and so does LB = 2 or 3 (libraries per work-group:
    row blocks of 4, 4 and 3 libraries, ragged groups; an E-scan batch of 5); a target count that is not a multiple of TJ or
    LWG; a NaN-free short series whose library leaves queries without a full
    neighbour set (NaN preds). The groups are small: CPUs keep each given layout here
    (FEW_TARGETS 0), and their own small-group layout (scalar, or one time-major vector
    on PoCL) gives the same again. Every layout where conftest.every_shape holds, a
    covering few (every value of every parameter) on another CPU runtime."""
    from pyedmcl.kernels import xmap as xk
    X = panel(L=60, N=11, seed=9)
    got = []
    monkeypatch.setattr(xk, "FEW_TARGETS", 0)
    for sp in covering(SKILL, device):
        monkeypatch.setattr(xk.XMAP_SKILL, "params_for", lambda be, spec, size, sp=sp: sp)
        r = pe.xmap(X, E=[2, 3, 5] * 3 + [2, 9], block_rows=4, device=device)
        e = pe.xmap(X[:, :5], E="auto", max_E=3, device=device)
        got.append((r.rho, e.edim_rho))
    monkeypatch.undo()
    got.append((pe.xmap(X, E=[2, 3, 5] * 3 + [2, 9], block_rows=4, device=device).rho,
                pe.xmap(X[:, :5], E="auto", max_E=3, device=device).edim_rho))
    for g in got[1:]:
        np.testing.assert_array_equal(g[0], got[0][0])
        np.testing.assert_array_equal(g[1], got[0][1])


def test_escan_layout_has_one_target_slot(monkeypatch):
    """The diagonal (E-scan) mode predicts one target per library: whatever the tuned
    layout, it runs one target slot without target or vector lanes (more slots computed
    the same target again), one library per work-group, no pipelining, K an argument
    (KR: one program for every E)."""
    from pyedmcl.kernels import xmap as xk
    be = get_backend(CPU_DEVICE)
    spec = {"K": 18, "REAL": "float", "WEIGHT": "simplex"}
    for tuned in (dict(xk.SCALAR_LAYOUT, TJ=8, LB=2), dict(xk.SCALAR_LAYOUT, TJ=4, VEC=4, PF=1),
                  dict(xk.SCALAR_LAYOUT, TJ=16, VEC=2),
                  dict(xk.SCALAR_LAYOUT, LANES=1, LWG=32, LB=8, CM=1, ST=1, SPL=4)):
        monkeypatch.setattr(xk.XMAP_SKILL, "params_for", lambda be, spec, size, p=tuned: p)
        d = xk.XMAP_SKILL.layout(be, spec, 1000, diag=True)
        assert {k: d[k] for k in ("TJ", "VEC", "LANES", "PF", "LB", "CM", "ST", "SPL", "KR")} == dict(
            TJ=1, VEC=0, LANES=0, PF=0, LB=1, CM=0, ST=0, SPL=1, KR=1)
        m = xk.XMAP_SKILL.layout(be, spec, 1000)  # the map's: as tuned
        assert m["TJ"] == tuned["TJ"] and not m.get("KR", 0)


def test_escan_runtime_k_same_rows_one_program(device, monkeypatch):
    """The E-scan's pack and skill with K as an argument (KR) give the unrolled kernels'
    rows bit for bit (fused scan and per-E path, simplex weights, a ragged batch, ties),
    and every E of the scan takes the same program."""
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap import engine as eng
    from pyedmcl.xmap.edim_scan import EdimScan
    be = get_backend(device)
    X = panel(L=90, N=7, seed=4)
    X[:, 2] = np.round(X[:, 2] * 4) / 4  # quantized: tied distances
    layout = xk.XMAP_SKILL.layout
    rows = {}
    for kr in (1, 0):
        monkeypatch.setattr(xk.XMAP_SKILL, "layout",
                            lambda be_, spec, size, diag=False, kr=kr: dict(
                                layout(be_, spec, size, diag), **({"KR": 0} if not kr else {})))
        e = eng.XmapEngine(be, np.ascontiguousarray(X.T))
        fused = e.edim_block(0, 7, 9)
        monkeypatch.setattr(EdimScan, "_fused", lambda *a, **k: False)
        per_e = e.edim_block(0, 7, 9)
        monkeypatch.undo()
        rows[kr] = (fused, per_e)
    for a, b in zip(rows[1], rows[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(rows[1][0], rows[1][1])
    srcs = {render(*xk.XMAP_SKILL.request(be, {"K": k, "REAL": "float", "WEIGHT": "simplex"},
                                          layout(be, {"K": k, "REAL": "float",
                                                      "WEIGHT": "simplex"}, 90, True),
                                          "xmap_skill")[:2])
            for k in (2, 5, 9, 17, 21)}
    assert len(srcs) == 1  # one program for every E


@pytest.mark.parametrize("lay", [dict(TJ=1), dict(TJ=2, LB=2)])
def test_map_runtime_k_same_matrix_one_program(device, monkeypatch, lay):
    """The map's pack and skill with K as an argument (KR, CCM's normalised weights: a
    CPU's small E-groups) give the unrolled kernels' matrix bit for bit (one or two
    targets a work-group, two libraries a work-group; E mixed, a ragged row block, tied
    distances, queries without a full neighbour set), and every E-group takes the same
    program."""
    from pyedmcl.kernels import xmap as xk
    X = panel(L=70, N=9, seed=6)
    X[:, 3] = np.round(X[:, 3] * 4) / 4  # quantized: tied distances
    E = [1, 2, 3, 5, 8, 2, 3, 13, 4]
    used = []

    def layout_kr(kr):
        def f(params, ntg, time_major=False):
            p = dict(xk.SCALAR_LAYOUT, **lay, KR=kr)
            used.append(p)
            return p
        return f

    got = []
    for kr in (0, 1):
        monkeypatch.setattr(skill_plan, "cpu_layout", layout_kr(kr))
        monkeypatch.setattr(skill_plan, "gpu_layout", lambda params, ntg, info, kr=kr: layout_kr(kr)(params, ntg))
        got.append(pe.xmap(X, E=E, block_rows=4, device=device).rho)
    monkeypatch.undo()
    assert {p["KR"] for p in used} == {0, 1}
    np.testing.assert_array_equal(got[1], got[0])
    assert np.isfinite(got[0]).any()
    be = get_backend(device)
    srcs = {render(*xk.XMAP_SKILL.request(be, {"K": k, "REAL": "float", "WEIGHT": "ccm"},
                                          dict(xk.SCALAR_LAYOUT, **lay, KR=1), name)[:2])
            for k in (2, 5, 9, 21) for name in ("pack", "xmap_skill")}
    assert len(srcs) == 1  # one program (pack and skill) for every E


@pytest.mark.parametrize("K", [5, 64, 70])
def test_runtime_k_pack_kept_weights_same_tables(device, K):
    """CCM's pack keeps each weight for its normalisation instead of computing it twice;
    the runtime-K pack (one source for every K) keeps 64 slots and computes any slot
    beyond them again: its tables equal the constant-K pack's bit for bit on both sides
    of that bound (missing neighbours, zero distances and a query with no prediction
    included)."""
    from pyedmcl.kernels import xmap as xk
    be = get_backend(device)
    rng = np.random.default_rng(K)
    nb, nq = 3, 37
    idx = rng.integers(0, 500, (nb, nq, K)).astype(np.int32)
    dist = np.sort(rng.random((nb, nq, K)).astype(np.float32), axis=2)
    dist[0, :4, :2] = 0  # zero distances (d_min 0: those get weight 1)
    idx[1, 5, K - 3:] = -1  # fewer than K neighbours: no prediction
    dist[1, 5, K - 3:] = np.inf
    spec = {"K": K, "REAL": "float", "WEIGHT": "ccm"}
    got = []
    for kr in (0, 1):
        tidx = be.empty((nb, K, nq), np.int32)
        tw = be.empty((nb, K, nq), np.float32)
        tden = be.empty((nb, nq), np.float64 if be.info.fp64 else np.float32)
        xk.XMAP_SKILL.pack(be, spec, be.to_device(idx), be.to_device(dist), K, nq * K, 0, nq,
                           nb, 0, tidx, tw, tden, dict(xk.SCALAR_LAYOUT, KR=kr))
        got.append([np.asarray(be.to_host(a)) for a in (tidx, tw, tden)])
    for a, b in zip(*got, strict=True):
        np.testing.assert_array_equal(a, b)
    assert (got[0][2][1, 5] == 0) and np.all(got[0][1][1, :, 5] == 0)
    assert np.all(got[0][1][0, :2, :4] == np.float32(0.5))  # two zero distances share 1


def test_wide_groups_take_target_lanes_on_gpus():
    """On a GPU an E-group of at least ``wide_targets`` targets has its own tuning bucket
    ("-wide"), untuned: target lanes reading class-ordered tables staged in local
    memory, a layout the tuning space accepts, and the tuner's reference there (an
    NVIDIA GPU without entries of its own reads the shipped vendor defaults: target
    lanes too); a
    CPU ignores the flag (its own heuristic) and the tuning command skips wide specs on
    it; the narrow buckets keep their names (and entries)."""
    from pyedmcl.kernels import xmap as xk
    info = get_backend(CPU_DEVICE).info
    gpu = dataclasses.replace(info, device_type="gpu", runtime="nvidia", name="Fake GPU 9000",
                              normalised_name="fake-gpu-9000", max_work_group_size=1024,
                              max_work_item_sizes=(1024, 1024, 64), compute_units=132)
    be = type("FakeBackend", (), {"info": gpu})()
    assert xk.wide_targets(gpu) == 4224
    spec = {"K": 7, "REAL": "float", "WEIGHT": "ccm"}
    assert xk.XMAP_SKILL.spec_bucket(spec) == "float-double-K8"
    assert xk.XMAP_SKILL.spec_bucket(dict(spec, WIDE=1)) == "float-double-K8-wide"
    ref = xk.XMAP_SKILL.spec_default(dict(spec, WIDE=1), gpu)  # untuned; the tuner's reference
    assert ref == xk.wide_layout(gpu) and ref["LANES"] == 1 and ref["CM"] == 1 and ref["ST"] == 1
    assert xk.XMAP_SKILL.space.valid(ref, gpu)
    # another NVIDIA GPU reads the shipped vendor defaults (derived from the H100's entries)
    lay = xk.XMAP_SKILL.params_for(be, dict(spec, WIDE=1), 1000)
    assert lay["LANES"] == 1 and lay["CM"] == 1
    assert xk.XMAP_SKILL.space.valid(lay, gpu)
    assert xk.XMAP_SKILL.applies(dict(spec, WIDE=1), gpu)
    cpu = get_backend(CPU_DEVICE)
    assert not xk.XMAP_SKILL.applies(dict(spec, WIDE=1), cpu.info)  # `tune` skips it there
    assert xk.XMAP_SKILL.applies(spec, cpu.info)
    assert xk.XMAP_SKILL.params_for(cpu, dict(spec, WIDE=1), 1000)["LB"] == 1


def test_class_major_rows_is_packs_order(device):
    """``class_major_rows`` (the tuning case's host packing) lists the queries in the
    order pack writes CM tables: the packed rows equal the k-major tables permuted."""
    from clkernels import get_backend as gb
    from pyedmcl.kernels import xmap as xk
    be = gb(device)
    nq, k, nb = 150, 4, 3
    rng = np.random.default_rng(2)
    idx = rng.integers(-1, 90, (nb, nq, k)).astype(np.int32)
    idx[..., 0] = np.abs(idx[..., 0])
    dist = np.sort(rng.random((nb, nq, k)), axis=-1).astype(np.float32)
    spec = {"K": k, "REAL": "float", "WEIGHT": "simplex"}
    acc = np.float64 if be.info.fp64 else np.float32
    out = {}
    for cm in (0, 1):
        lay = {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 1, "LMAJ": 0, "CM": cm}
        t = (be.empty((nb * nq * k,), np.int32), be.empty((nb * nq * k,), acc),
             be.empty((nb * nq,), acc))
        xk.XMAP_SKILL.pack(be, spec, be.to_device(idx.ravel()), be.to_device(dist.ravel()), k,
                           nq * k, 0, nq, nb, 0, *t, lay)
        out[cm] = [be.to_host(a) for a in t]
    rows = xk.class_major_rows(nq, xk.ccm_skill_wg(be.info))
    assert sorted(rows) == list(range(nq))
    np.testing.assert_array_equal(out[1][0].reshape(nb, nq, k),
                                  out[0][0].reshape(nb, k, nq).transpose(0, 2, 1)[:, rows])
    np.testing.assert_array_equal(out[1][1].reshape(nb, nq, k),
                                  out[0][1].reshape(nb, k, nq).transpose(0, 2, 1)[:, rows])
    np.testing.assert_array_equal(out[1][2].reshape(nb, nq), out[0][2].reshape(nb, nq)[:, rows])


def test_time_major_targets_line_aligned_on_device_and_host(device, monkeypatch):
    """The targets a target-lane skill reads, time-major: gathered on the device from the
    panel and copied from the host alike, bit for bit, each row padded with zeros to a
    pitch of whole 128-byte lines of float32 (a 32-lane tile reads one line, not two)."""
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap.engine import XmapEngine
    be = get_backend(device)
    X = panel(L=90, N=37).T.astype(np.float32)  # (series, times), as the engine holds them
    eng = XmapEngine(be, X, np.array([2, 3] * 18 + [2]))
    assert xk.time_major_pitch(37) == 64 and xk.time_major_pitch(64) == 64
    for g in eng.groups:
        y, ldy = eng.skills.lanes_y(g)
        ref, ref_ldy = xk.time_major(X[g.targets])
        assert ldy == ref_ldy and ldy % 32 == 0 and ldy >= g.targets.size
        np.testing.assert_array_equal(be.to_host(y).reshape(-1, ldy), ref)
        assert not ref[:, g.targets.size:].any()
    monkeypatch.setattr(SkillPlan, "gathers_targets", property(lambda self: False))
    host = XmapEngine(be, X, np.array([2, 3] * 18 + [2]))
    for g, h in zip(eng.groups, host.groups, strict=True):
        np.testing.assert_array_equal(be.to_host(host.skills.lanes_y(h)[0]), be.to_host(eng.skills.lanes_y(g)[0]))
    # a layout whose work-groups read 128 targets a row: the rows padded to hold them
    # (the host's copy, then the device's gather)
    assert xk.time_major_pitch(37, 128) == 128 and xk.time_major_pitch(130, 64) == 192
    g = host.groups[0]
    y, ldy = host.skills.lanes_y(g, 128)
    ref, ref_ldy = xk.time_major(X[g.targets], 128)
    assert ldy == ref_ldy == 128
    np.testing.assert_array_equal(be.to_host(y).reshape(-1, ldy), ref)
    assert host.skills.lanes_y(g, 64) == (y, ldy)  # a smaller tile: the same rows
    g2 = host.groups[1]  # 18 targets: rows of 32, made again for a tile they do not hold
    assert host.skills.lanes_y(g2)[1] == 32 and host.skills.lanes_y(g2, 64)[1] == 64
    y2 = host.skills.lanes_y(g2, 128)
    assert y2[1] == 128 and host.skills.lanes_y(g2, 32) == y2 and host.skills.lanes_y(g2, 64) == y2
    g = eng.groups[0]
    y, ldy = eng.skills.lanes_y(g, 128)
    np.testing.assert_array_equal(be.to_host(y).reshape(-1, ldy), ref)


def test_staged_skill_refuses_rows_without_whole_work_groups():
    """A staged skill reading by byte offsets reads each work-item's TJ targets at fixed
    distances, unclamped: a time-major pitch that does not hold whole work-groups of
    LWG x TJ targets is refused before the launch (it would read past the rows)."""
    from pyedmcl.kernels import xmap as xk
    lay = {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 32, "PF": 0, "LB": 1, "LMAJ": 1, "CM": 1,
           "ST": 1, "CH": 16, "SPL": 1}
    assert xk.lane_tile(lay) == 64 and xk.lane_tile(dict(lay, O32=0)) == 1
    assert xk.lane_tile(dict(lay, ST=0)) == 1
    be = get_backend(CPU_DEVICE)
    y = be.to_device(np.zeros((10, 32), np.float32))
    with pytest.raises(ValueError, match="ldy=32 is not a multiple"):
        xk.XMAP_SKILL.launch(be, lay, {"K": 3, "REAL": "float", "WEIGHT": "ccm"}, None, None,
                             None, 8, 1, y, 32, 0, None, None, 20, None, None, 20, 0)


#: (ST, CH, SPL, O32, KR, PR) of the staged skill's comparison; the first is unstaged
STAGED = [(0, 16, 1, 1, 0, 0), (1, 1, 1, 1, 0, 0), (1, 2, 1, 1, 0, 0), (1, 16, 1, 1, 0, 0),
          (1, 2, 2, 1, 0, 0), (1, 16, 8, 1, 0, 0), (1, 16, 1, 0, 0, 0), (1, 2, 2, 0, 0, 0),
          (1, 16, 1, 1, 1, 0), (1, 2, 2, 0, 1, 0), (1, 1, 8, 1, 1, 0), (1, 16, 1, 1, 0, 1),
          (1, 2, 2, 1, 0, 1), (1, 1, 8, 1, 1, 1), (1, 2, 2, 0, 0, 1)]


def test_staged_skill_bit_identical_with_empty_slots(device):
    """The staged skill (ST: table rows in local memory, CH at a time) gives the
    unstaged one's rho bit for bit on tables with empty slots (-1: fewer than K
    neighbours): "ccm" (such a query has no prediction; its empty slots read time 0
    with weight 0, no test) and "simplex" (it predicts from the neighbours it has; the
    empty slots are skipped), with a shift (tshift), unobserved queries, a ragged class
    count (nq = 150: classes of 2 and 3 rows), ragged libraries (LB 2 of 3) and targets
    (LWG x TJ 4 of 7), CH 1, 2 and 16, the classes split into 2 or 8 subtrees (SPL), the
    entries staged as byte offsets (O32) or as times, K even and odd, K unrolled or a
    kernel argument (KR, the program rendered for a larger K). Every layout on GPUs (the
    only devices that take them: several libraries a work-group, staged rows), a
    covering few (every value of every parameter) on CPU runtimes."""
    from clkernels import get_backend as gb
    from pyedmcl.kernels import xmap as xk
    be = gb(device)
    for k in (4, 5):
        _staged_case(be, xk, k, few(STAGED) if device in CPU_RUNTIMES else STAGED)


def _staged_case(be, xk, k, layouts):
    from pyedmcl.primitives.lookup import ccm_shifts_device
    nq, nb, ntg, n = 150, 3, 7, 200
    rng = np.random.default_rng(5)
    idx = np.sort(rng.integers(0, 150, (nb, nq, k)), axis=-1).astype(np.int32)
    idx[:, ::7, 2:] = -1  # queries with 2 of 4 neighbours
    idx[1, ::11, 1:] = -1
    dist = np.sort(rng.random((nb, nq, k)), axis=-1).astype(np.float32)
    dist[idx < 0] = np.inf
    acc = np.float64 if be.info.fp64 else np.float32
    yt, ldy = xk.time_major(rng.standard_normal((ntg, n)).astype(np.float32))
    y = be.to_device(yt)
    obs = np.arange(nq, dtype=np.int32) + 40
    obs[::13] = -1
    tgt = be.to_device(np.arange(ntg, dtype=np.int32))
    shift = ccm_shifts_device(be, yt[:, :ntg].T, obs)  # (FS: "ccm")
    rows = xk.class_major_rows(nq, xk.ccm_skill_wg(be.info))
    assert min(np.bincount(rows % xk.ccm_skill_wg(be.info))) >= 2
    for weight in ("ccm", "simplex"):
        spec = {"K": k, "REAL": "float", "WEIGHT": weight}
        got = []
        # (KR: K an argument, the program rendered for K + 3, a mixed-E map's first use)
        # (PR: the staged entries as (offset, weight) pairs, with O32 only)
        for st, ch, spl, o32, kr, pr in layouts:
            lay = {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "PF": 0, "LB": 2, "LMAJ": 1,
                   "CM": 1, "ST": st, "CH": ch, "SPL": spl, "O32": o32, "KR": kr, "PR": pr}
            prog = dict(spec, K=k + 3) if kr else spec
            t = (be.empty((nb * nq * k,), np.int32), be.empty((nb * nq * k,), acc),
                 be.empty((nb * nq,), acc))
            xk.XMAP_SKILL.pack(be, prog, be.to_device(idx.ravel()), be.to_device(dist.ravel()),
                               k, nq * k, 0, nq, nb, 0, *t, lay, k=k)
            out = be.to_device(np.full(nb * ntg, -7, np.float32))
            xk.XMAP_SKILL.launch(be, lay, prog, *t, nq, nb, y, ldy, 5, tgt, tgt, ntg,
                                 be.to_device(obs), out, ntg, 0, k=k, shift=shift)
            got.append(be.to_host(out))
        assert np.isfinite(got[0]).all() and (got[0] != -7).all()
        for g in got[1:]:
            np.testing.assert_array_equal(g, got[0])


def test_pack_tile_fits_local_memory():
    """The class-major pack's tile shrinks with K and with the device's local memory (8,
    4, 2, 1 rows a class), so a large K builds where 8 rows would not fit; no tile
    without CM. The built pack's own local memory (the runtime's count, "simplex": the
    widest weights) stays within the budget."""
    import dataclasses

    import pyopencl as cl

    from pyedmcl.kernels import xmap as xk
    be = get_backend(FAST_BUILD_CPU)  # (Intel's runtime counts a kernel's static local arrays)
    big = dataclasses.replace(be.info, local_mem_bytes=65536)
    small = dataclasses.replace(be.info, local_mem_bytes=16384)
    assert [xk.pack_tile({"CM": 1, "K": k}, big) for k in (4, 31, 32, 63, 64, 101, 300)] == \
        [8, 8, 4, 4, 2, 2, 1]
    assert [xk.pack_tile({"CM": 1, "K": k}, small) for k in (4, 21, 101)] == [8, 4, 1]
    assert xk.pack_tile({"CM": 0, "K": 7}, big) == 0
    lay = {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 1, "LMAJ": 0, "CM": 1}
    budget = min(xk.PACK_TILE_BYTES, be.info.local_mem_bytes)
    for k in (4, 31, 32, 63, 64, 101):
        req = xk.XMAP_SKILL.request(be, {"K": k, "REAL": "float", "WEIGHT": "simplex"}, lay, "pack")
        used = be.kernel(*req).handle.get_work_group_info(
            cl.kernel_work_group_info.LOCAL_MEM_SIZE, be.device)
        if used == 0 and be.info.runtime == "pocl":
            pytest.skip("PoCL reports no local memory for a kernel's static local arrays")
        assert 0 < used <= budget, (k, req[1]["PIW"], used)


@pytest.mark.parametrize("nq_of_wg,k", [((0, 5), 4), ((1, 0), 4), ((2, 3), 4), ((3, 0), 4),
                                        ((9, 3), 4), ((2, 3), 40), ((3, 1), 101)])
def test_class_major_pack_order(device, nq_of_wg, k):
    """pack with CM writes packed row r of each library from query class_major_rows[r]
    (tiles of 8 query classes x pack_tile rows, staged in local memory: 8 rows, 4 at
    K = 40, 2 at K = 101): the same entries, weights and weight sums as the k-major
    pack, permuted (query counts below one row of classes, a multiple of it, with a
    remainder, and classes of more rows than a tile takes)."""
    from pyedmcl.kernels import xmap as xk
    be = get_backend(device)
    wg = xk.ccm_skill_wg(be.info)
    nq, nb = nq_of_wg[0] * wg + nq_of_wg[1], 3
    assert xk.pack_tile({"CM": 1, "K": k}, be.info) == {4: 8, 40: 4, 101: 2}[k]
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 500, (nb, nq, k)).astype(np.int32)
    idx[:, ::7, -1] = -1  # rows without a full neighbour list
    dist = np.sort(rng.random((nb, nq, k)), axis=2).astype(np.float32)
    acc = np.float64 if be.info.fp64 else np.float32
    spec = {"K": k, "REAL": "float", "WEIGHT": "ccm"}
    out = {}
    for cm in (0, 1):
        lay = {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 1, "LMAJ": 0, "CM": cm}
        t = (be.empty((nb * nq * k,), np.int32), be.empty((nb * nq * k,), acc),
             be.empty((nb * nq,), acc))
        xk.XMAP_SKILL.pack(be, spec, be.to_device(idx.ravel()), be.to_device(dist.ravel()),
                           k, nq * k, 0, nq, nb, 0, *t, lay)
        tidx, tw, tden = (be.to_host(a) for a in t)
        # ("ccm" packs its normalised weights in the data type, float32, into that buffer)
        out[cm] = [tidx, tw.view(np.float32)[:nb * nq * k], tden]
    rows = xk.class_major_rows(nq, wg)
    for a, b in zip(out[0][:2], out[1][:2], strict=True):  # k-major against class-major
        np.testing.assert_array_equal(a.reshape(nb, k, nq).transpose(0, 2, 1)[:, rows],
                                      b.reshape(nb, nq, k))
    np.testing.assert_array_equal(out[0][2].reshape(nb, nq)[:, rows], out[1][2].reshape(nb, nq))


def test_class_major_pack_clean_under_oclgrind():
    """The class-major pack (tiles of 8 query classes x pack_tile rows staged in local
    memory, a barrier, partial tiles) runs clean under Oclgrind, for "ccm" and "simplex"
    weights and K = 4 and 40, and packs the k-major pack's entries, weights and sums in
    class_major_rows order (both packs on Oclgrind: the same libm, so bit for bit)."""
    out = run_under_oclgrind("""
        import json, numpy as np, clkernels
        from pyedmcl.kernels import xmap as xk
        be = clkernels.get_backend()
        wg = xk.ccm_skill_wg(be.info)
        acc = np.float64 if be.info.fp64 else np.float32
        res = []
        for nq, k, weight in ((2 * wg + 3, 4, "ccm"), (wg + 5, 40, "simplex")):
            rng = np.random.default_rng(9)
            idx = rng.integers(0, 500, (2, nq, k)).astype(np.int32)
            idx[:, ::7, -1] = -1
            dist = np.sort(rng.random((2, nq, k)), axis=2).astype(np.float32)
            case = {}
            for cm in (0, 1):
                lay = {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 1, "LMAJ": 0,
                       "CM": cm}
                t = (be.empty((2 * nq * k,), np.int32), be.empty((2 * nq * k,), acc),
                     be.empty((2 * nq,), acc))
                xk.XMAP_SKILL.pack(be, {"K": k, "REAL": "float", "WEIGHT": weight},
                                   be.to_device(idx.ravel()), be.to_device(dist.ravel()),
                                   k, nq * k, 0, nq, 2, 0, *t, lay)
                tidx, tw, tden = (be.to_host(a) for a in t)
                if weight == "ccm":  # (its normalised weights: float32 in that buffer)
                    tw = tw.view(np.float32)[:2 * nq * k]
                case[cm] = [tidx.tolist(), tw.tolist(), tden.tolist()]
            res.append([nq, k, wg, case[0], case[1]])
        print(json.dumps(res))
    """)
    from pyedmcl.kernels import xmap as xk
    for nq, k, wg, kmaj, cmaj in json.loads(out.strip().splitlines()[-1]):
        rows = xk.class_major_rows(nq, wg)
        for a, b in zip(kmaj[:2], cmaj[:2], strict=True):
            np.testing.assert_array_equal(
                np.array(a).reshape(2, k, nq).transpose(0, 2, 1)[:, rows],
                np.array(b).reshape(2, nq, k))
        np.testing.assert_array_equal(np.array(kmaj[2]).reshape(2, nq)[:, rows],
                                      np.array(cmaj[2]).reshape(2, nq))


def test_staged_rows_fit_local_memory():
    """``staged_rows``: the layout's CH where LB libraries' (and SPL subtrees') staged
    rows fit 32 KiB of local memory beside a split's roots, fewer where they would not
    (never below one row); the tuning space keeps a split's roots within 16 KiB and
    splits only staged layouts."""
    from pyedmcl.kernels import xmap as xk
    info = get_backend(CPU_DEVICE).info
    gpu = dataclasses.replace(info, device_type="gpu", local_mem_bytes=49152, fp64=True)
    assert xk.staged_rows(16, 7, 1, gpu) == 16
    assert xk.staged_rows(32, 21, 8, gpu) == 32768 // (8 * (21 * 12 + 8) + 4)
    assert xk.staged_rows(16, 33, 64, gpu) == 1
    # a split's roots (SPL 8 x LWG 32 x 8 float64 statistics: 16 KiB) leave the rest
    roots = xk.split_roots_bytes({"SPL": 8, "LB": 1, "LWG": 32, "TJ": 1}, gpu)
    assert roots == 16384
    assert xk.staged_rows(16, 21, 1, gpu, 8, roots) == 16384 // (8 * (21 * 12 + 8) + 32) == 7
    space = xk.XMAP_SKILL.space
    lay = dict(xk.wide_layout(gpu), LWG=32, SPL=8)
    assert space.valid(lay, gpu) and not space.valid(dict(lay, LWG=64), gpu)  # 32 KiB roots
    assert not space.valid(dict(lay, ST=0, CH=16), gpu)  # a split needs staged rows
    small = dataclasses.replace(gpu, local_mem_bytes=4096)
    assert xk.staged_rows(16, 33, 2, small) == 4096 // (2 * (33 * 12 + 8) + 4) == 5


def test_gpu_small_groups_take_queries_as_work_items():
    """Below FEW_TARGETS_GPU a GPU's E-group whose tuned layout is target lanes runs the
    GPU heuristic's layout (queries as work-items); from it on, and for a layout that is
    not target lanes, the tuned one stays."""
    from pyedmcl.kernels import xmap as xk
    info = get_backend(CPU_DEVICE).info
    gpu = dataclasses.replace(info, device_type="gpu", runtime="nvidia", name="Fake GPU 9000",
                              normalised_name="fake-gpu-9000", max_work_group_size=1024,
                              max_work_item_sizes=(1024, 1024, 64), compute_units=132)
    lanes = dict(xk.wide_layout(gpu), LWG=32, SPL=4)
    small = xk.gpu_layout(lanes, xk.FEW_TARGETS_GPU - 1, gpu)
    assert small == dict(xk._LAYOUT, **xk._skill_heuristic(gpu)) and not small["LANES"]
    assert xk.XMAP_SKILL.space.valid(small, gpu)
    assert xk.gpu_layout(lanes, xk.FEW_TARGETS_GPU, gpu) == lanes
    assert xk.gpu_layout(xk.SCALAR_LAYOUT, 5, gpu) == xk.SCALAR_LAYOUT


def test_cpu_small_groups_take_one_time_major_vector():
    """Below FEW_TARGETS a CPU's E-group runs the scalar layout with K an argument (one
    program for every small group), or with ``time_major`` (PoCL) one time-major vector
    holding all its targets (TJ: the next power of two, 2 to 16)."""
    from pyedmcl.kernels import xmap as xk
    tuned = {"TJ": 8, "VEC": 1, "LANES": 0, "LWG": 32, "PF": 0, "LB": 1, "LMAJ": 0}
    assert xk.cpu_layout(tuned, 5) == dict(xk.SCALAR_LAYOUT, KR=1)
    assert xk.cpu_layout(tuned, 5, time_major=True) == dict(xk.SCALAR_LAYOUT, TJ=8, VEC=2)
    assert xk.cpu_layout(tuned, 1, time_major=True)["TJ"] == 2
    assert xk.cpu_layout(tuned, 23, time_major=True)["TJ"] == 16
    assert xk.cpu_layout(tuned, 24, time_major=True) == tuned


def test_skill_pipelined_bit_identical(device, monkeypatch):
    """PF = 1 (the next query's table row and target values loaded while this one is
    computed) gives the PF = 0 matrix bit for bit, and so do LB = 2 and 4 libraries per
    work-group (row blocks of 5 and 3 libraries: a ragged last group of libraries), and
    target lanes reading class-ordered tables (CM) two libraries per work-group, also
    staged in local memory (ST) three rows at a time (classes of 3-4 rows: a short last
    stage) and 32 at a time (one stage), and split into 2 or 8 subtrees of classes
    (SPL): several passes of WG = 64 queries
    with a ragged last one, target counts that are not multiples of TJ, a constant
    stretch (zero distances, ties), Tp < 0 (target read before the query); and pe.ccm's
    rho exactly."""
    from pyedmcl.kernels import xmap as xk
    X = panel(L=230, N=13, seed=4)
    X[:150, 12] = X[150:, 12].mean()  # long constant stretch: zero distances, ties
    E = [2, 3, 5] * 4 + [4]
    got = []
    for sp in ({"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 0},
               {"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
               {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
               {"TJ": 4, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
               {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1, "LB": 2},
               {"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 0, "LB": 4},
               {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 2, "LMAJ": 1, "CM": 1},
               {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 2, "LMAJ": 1, "CM": 1,
                "ST": 1, "CH": 3},
               {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 8, "PF": 0, "LB": 1, "LMAJ": 1, "CM": 1,
                "ST": 1, "CH": 32},
               {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 2, "LMAJ": 1, "CM": 1,
                "ST": 1, "CH": 3, "SPL": 2},
               {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 4, "PF": 0, "LB": 1, "LMAJ": 0, "CM": 1,
                "ST": 1, "CH": 16, "SPL": 8}):
        monkeypatch.setattr(xk.XMAP_SKILL, "params_for", lambda be, spec, size, sp=sp: sp)
        got.append([pe.xmap(X, E=E, block_rows=5, Tp=Tp, device=device).rho for Tp in (0, -3)])
    for g in got[1:]:
        np.testing.assert_array_equal(g[0], got[0][0])
        np.testing.assert_array_equal(g[1], got[0][1])
    for i, j in ((0, 1), (5, 12), (12, 3)):
        c = pe.ccm(X[:, i], X[:, j], E=E[j], lib_sizes=[X.shape[0]], random=False,
                   device=device)
        assert got[1][0][i, j] == np.float32(c.rho_xy[0])


@pytest.mark.parametrize("sp", [{"TJ": 4, "VEC": 1, "LANES": 0, "LWG": 32},
                                {"TJ": 4, "VEC": 2, "LANES": 0, "LWG": 32},
                                {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2},
                                {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LMAJ": 1},
                                {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1},
                                {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1, "LB": 2},
                                {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 2, "LMAJ": 1, "LB": 2,
                                 "CM": 1},
                                {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LMAJ": 1, "LB": 2,
                                 "CM": 1, "ST": 1, "CH": 2},
                                {"TJ": 2, "VEC": 0, "LANES": 1, "LWG": 2, "LMAJ": 1, "LB": 2,
                                 "CM": 1, "ST": 1, "CH": 2, "SPL": 4}],
                         ids=["vec", "vec-time-major", "lanes", "lanes-lmaj", "pipelined",
                              "pipelined-lb2", "lanes-cm-lb2", "lanes-staged", "lanes-split"])
def test_oclgrind_clean_skill_vec(sp):
    """VEC=1, VEC=2 (time-major), LANES=1 (with class-ordered tables, CM, and two
    libraries per work-group), PF=1 (pipelined query loop) and LB=2 lookup + rho (both weights: the matrix and the E-scan) under Oclgrind, agreeing with PoCL
    within float32 rounding (atol 1e-5); the three targets keep the given layout
    (FEW_TARGETS 0)."""
    out = run_under_oclgrind(f"""
        import json, numpy as np, pyedmcl as pe
        from pyedmcl.kernels import xmap as xk
        xk.FEW_TARGETS = 0
        xk.XMAP_SKILL.params_for = lambda be, spec, size: {sp!r}
        X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
        r = pe.xmap(X, E="auto", max_E=2)
        print(json.dumps([r.rho.tolist(), r.edim_rho.tolist()]))
    """, ignore_uninitialized=True)
    rho, edim = json.loads(out.strip().splitlines()[-1])
    X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
    ref = pe.xmap(X, E="auto", max_E=2, device=CPU_DEVICE)
    np.testing.assert_allclose(np.array(rho, np.float32), ref.rho, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.array(edim, np.float32), ref.edim_rho, atol=1e-5, rtol=0)


@pytest.mark.parametrize("metric", ["maximum", "manhattan"])
def test_vec_other_metrics_signed_zeros(device, metric):
    """vec's packed keys with the other metrics on data holding both -0.0 and +0.0
    (a coordinate difference -0 - 0 = -0): same table as the rows variant, which
    compares values (so -0 == +0 ties break by |p - l|, then l)."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    be = get_backend(device)
    x = np.random.default_rng(8).integers(-1, 2, 120).astype(np.float32)
    x[::3] = -0.0
    x[1::7] = 0.0
    E, k = 3, 5
    npts = x.size - (E - 1)
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": metric, "REAL": "float"}
    pts = be.to_device(np.arange(npts, dtype=np.int32))
    xd = be.to_device(x)
    out = []
    for params in (ROWS, VEC[1]):
        idx = be.empty((1, npts, k), np.int32)
        dist = be.empty((1, npts, k), np.float32)
        KNN.launch(be, params, spec, xd, pts, npts, pts, npts, 1, 0, idx, dist)
        out.append((be.to_host(idx), be.to_host(dist)))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    np.testing.assert_array_equal(out[1][1], out[0][1])  # -0.0 == +0.0 here


def test_scan_table_budget_scales_with_gpu_memory():
    """The fused-scan batch budget: CPUs keep the small one; GPUs get 1/16 of their
    memory between 4x the per-E budget and 4 GiB (the batch size only moves work
    between launches: the matrix is the same, see the block-size tests)."""
    import dataclasses

    from clkernels import get_backend
    from pyedmcl.kernels.xmap import TABLE_BUDGET_CPU, TABLE_BUDGET_GPU, scan_table_budget
    cpu = get_backend(CPU_DEVICE).info
    assert scan_table_budget(cpu) == TABLE_BUDGET_CPU

    def gpu(gib: int):
        return dataclasses.replace(cpu, device_type="gpu", global_mem_bytes=gib << 30)

    assert scan_table_budget(gpu(8)) == 4 * TABLE_BUDGET_GPU
    assert scan_table_budget(gpu(32)) == 2 << 30
    assert scan_table_budget(gpu(80)) == 4 << 30


def test_small_groups_take_fewer_target_lanes(device, monkeypatch):
    """A CPU's target-lane skill (LANES) runs as many work-items as an E-group has
    targets (at least 8), or one query per work-item for a few targets (any tuned
    layout): the matrix equals the tuned layout's bit for bit."""
    from clkernels import get_backend
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap import engine as eng_mod
    p = {"TJ": 1, "LWG": 32}
    assert [xk.lanes_for(p, n) for n in (1, 9, 16, 17, 100)] == [8, 16, 16, 32, 32]
    assert xk.lanes_for({"TJ": 2, "LWG": 64}, 40) == 32
    lanes = {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 32, "PF": 0, "LB": 1}
    assert xk.cpu_layout(lanes, 5) == dict(xk.SCALAR_LAYOUT, KR=1)
    assert xk.cpu_layout(lanes, 40)["LWG"] == 32 and xk.cpu_layout(lanes, 24)["LWG"] == 32
    vec = dict(lanes, LANES=0, TJ=8, VEC=1)  # small groups: scalar whatever the tuned layout
    assert xk.cpu_layout(vec, 5) == dict(xk.SCALAR_LAYOUT, KR=1) and xk.cpu_layout(vec, 24) == vec
    be = get_backend(device)
    X = panel(L=70, N=40, seed=5).T
    E = np.where(np.arange(40) < 30, 2, np.arange(40) % 3 + 1)  # groups of 33, 4 and 3
    orig = xk.XMAP_SKILL.layout

    def forced(be, spec, size, diag=False):
        return orig(be, spec, size, diag) if diag else dict(lanes)
    monkeypatch.setattr(xk.XMAP_SKILL, "layout", forced)
    got = eng_mod.XmapEngine(be, X, E, knn_kernel="batched").block(0, 40)
    monkeypatch.setattr(skill_plan, "cpu_layout", lambda params, ntg, time_major=False: params)
    ref = eng_mod.XmapEngine(be, X, E, knn_kernel="batched").block(0, 40)
    np.testing.assert_array_equal(got, ref)
