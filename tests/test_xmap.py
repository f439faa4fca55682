"""pe.xmap against a pyEDM CCM loop, pyedmcl's own single-pair CCM, kedm.xmap and the
embedding scan; bad input; Oclgrind.

Tolerances: pyEDM (float64) vs our float32 pipeline: 1e-5 on rho. pyedmcl.ccm:
exact (same kernels' arithmetic, same reduction order). kedm.xmap (float32,
another summation order): 1e-5. Across devices and block sizes: bit-identical.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE, TEST_DEVICES, run_under_oclgrind

import pyedmcl as pe

RHO_TOL = 1e-5


def panel(L: int = 120, N: int = 20, seed: int = 0) -> np.ndarray:
    """(L, N) coupled noisy oscillators with different periods and drivers."""
    rng = np.random.default_rng(seed)
    t = np.arange(L)
    base = np.sin(t[:, None] * rng.uniform(0.15, 0.6, N)[None, :])
    drive = np.roll(base, 1, axis=1) * rng.uniform(0, 0.5, N)[None, :]
    return (base + drive + 0.2 * rng.standard_normal((L, N))).astype(np.float32)


def mixed_E(N: int) -> np.ndarray:
    return np.resize([2, 3, 4], N)


@pytest.fixture(scope="module")
def pyedm_matrix():
    pyEDM = pytest.importorskip("pyEDM")
    X = panel()
    L, N = X.shape
    E = mixed_E(N)
    df = pd.DataFrame(X.astype(np.float64), columns=[f"x{i}" for i in range(N)])
    df.insert(0, "time", np.arange(1, L + 1))
    ref = np.empty((N, N))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(N):
            for j in range(N):
                # full library: all L - (E-1) rows (a "sample" of all rows is all rows)
                o = pyEDM.CCM(dataFrame=df, columns=f"x{i}", target=f"x{j}", E=int(E[j]),
                              tau=-1, Tp=0, libSizes=[L - int(E[j]) + 1], sample=1,
                              parallel=False)
                ref[i, j] = o[f"x{i}:x{j}"].iloc[0]
    return X, E, ref


def test_matches_pyedm_ccm_loop_and_own_ccm_exactly(device, pyedm_matrix):
    X, E, ref = pyedm_matrix
    N = X.shape[1]
    r = pe.xmap(X, E=E, device=device, block_rows=7)
    assert r.rho.shape == (N, N) and r.rho.dtype == np.float32
    np.testing.assert_array_equal(r.E, E)
    np.testing.assert_allclose(r.rho, ref, atol=RHO_TOL, rtol=0)
    own = np.empty((N, N), np.float32)
    for i in range(N):
        for j in range(N):
            c = pe.ccm(X[:, i], X[:, j], E=int(E[j]), lib_sizes=[X.shape[0]], random=False,
                       device=device)
            own[i, j] = np.float32(c.rho_xy[0])
    np.testing.assert_array_equal(r.rho, own)


def test_matches_kedm_xmap(device):
    kedm = pytest.importorskip("kedm")
    X = panel(L=200, N=8, seed=3)
    E = np.resize([1, 2, 5], 8)
    r = pe.xmap(X, E=E, device=device)
    np.testing.assert_allclose(r.rho, kedm.xmap(X, E.tolist()), atol=RHO_TOL, rtol=0)


def test_tp_matches_own_ccm(device):
    """Any Tp ccm takes (|Tp| < n; beyond n / 2 too, which xmap used to refuse)."""
    X = panel(L=80, N=4, seed=5)
    for Tp in (-2, 3, 55, -60):
        r = pe.xmap(X, E=3, Tp=Tp, tau=2, device=device)
        for i, j in ((0, 1), (2, 3), (1, 1)):
            c = pe.ccm(X[:, i], X[:, j], E=3, tau=2, Tp=Tp, lib_sizes=[80], random=False,
                       device=device)
            assert r.rho[i, j] == np.float32(c.rho_xy[0])


def test_block_size_and_devices_bit_identical():
    X = panel(L=90, N=11, seed=1)
    E = mixed_E(11)
    a = pe.xmap(X, E=E, block_rows=11).rho
    b = pe.xmap(X, E=E, block_rows=3).rho
    np.testing.assert_array_equal(a, b)
    for kk in ("edm", "batched"):  # both k-NN kernels: the same tables, the same matrix
        np.testing.assert_array_equal(a, pe.xmap(X, E=E, block_rows=4, knn_method=kk).rho)
    if len(TEST_DEVICES) >= 2:  # the default device's contraction choice on both
        from clkernels import get_backend
        from pyedmcl._fma import job_fma
        fma = job_fma([get_backend().info])
        c = pe.xmap(X, E=E, block_rows=2, devices=TEST_DEVICES[:2], fma=fma)
        np.testing.assert_array_equal(a, c.rho)
        assert sum(c.blocks_per_device.values()) == 6


@pytest.mark.parametrize("E", ["auto", "mixed"])
def test_xmap_panel_uploaded_band_by_band(monkeypatch, E):
    """Where the float32 panel goes to the devices band by band while the host prepares
    it (GPUs; forced on CPUs too: bands of 256 series on several threads, one or two
    devices), the embedding scan and the map are the same bit for bit as with the
    engine's own upload, and every band was written once per device."""
    from clkernels import get_backend
    from pyedmcl.xmap import core
    X = panel(L=60, N=600, seed=3)
    kw = {"E": "auto", "max_E": 3} if E == "auto" else {"E": mixed_E(600)}
    kw["fma"] = False  # one contraction choice for every device set (a GPU with a CPU)
    devs = [d for d in TEST_DEVICES if d != "oclgrind"][:2]
    ref = pe.xmap(X, device=devs[0], **kw)
    monkeypatch.setattr(core, "uploads_early", lambda be: be.writes_async)
    monkeypatch.setattr(core, "PARALLEL_BYTES", 1)
    offsets = []
    for name in devs:
        be = get_backend(name)
        write = be.write_async
        monkeypatch.setattr(be, "write_async",
                            lambda dst, h, o=0, w=write: offsets.append(o) or w(dst, h, o))
    for d in (devs[:1], devs) if len(devs) > 1 else (devs,):
        offsets.clear()
        got = pe.xmap(X, devices=d, **kw)
        np.testing.assert_array_equal(got.rho, ref.rho)
        np.testing.assert_array_equal(got.E, ref.E)
        if E == "auto":
            np.testing.assert_array_equal(got.edim_rho, ref.edim_rho)
        assert sorted(offsets) == sorted([b * 60 for b in (0, 256, 512)] * len(d))


def test_map_on_staged_lanes_of_two_targets_and_paired_entries_same_rho(monkeypatch):
    """A map on staged target lanes (a GPU's wide groups; forced on the CPU device) with
    TJ = 2 targets a work-item read at fixed distances from one unclamped column, the
    engine's time-major rows padded to whole work-groups (37 targets: a ragged tile), and
    with the staged entries as (offset, weight) pairs (PR), gives the default layout's
    rho bit for bit."""
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap import skill_plan as sk
    X = panel(L=90, N=37, seed=5)
    E = np.resize([2, 4, 3], 37)  # three E-groups of 12-13 targets
    ref = pe.xmap(X, E=E, device=CPU_DEVICE, fma=False).rho
    tiles = []
    lanes_y = sk.SkillPlan.lanes_y

    def spy(self, g, tile=1):
        tiles.append(tile)
        return lanes_y(self, g, tile)

    monkeypatch.setattr(sk.SkillPlan, "lanes_y", spy)
    for tj, pr, lwg in ((2, 0, 8), (2, 1, 4), (1, 1, 16)):
        lay = dict(xk._LAYOUT, TJ=tj, LANES=1, LWG=lwg, LB=1, LMAJ=1, CM=1, ST=1, CH=16,
                   SPL=2, PR=pr)
        monkeypatch.setattr(sk, "cpu_layout", lambda p, ntg, time_major=False, lay=lay: dict(lay))
        tiles.clear()
        got = pe.xmap(X, E=E, device=CPU_DEVICE, fma=False).rho
        np.testing.assert_array_equal(got, ref)
        assert set(tiles) == {lwg * tj}


def test_first_use_map_runs_staged_groups_on_one_runtime_k_program(monkeypatch):
    """Where a map's E-groups on staged target lanes (a GPU's wide groups; here forced
    on the CPU device) have programs that are not built yet, they run on one program with
    K an argument, rendered for their largest K, while their own programs build behind
    the job (ended when it ends); the matrix is the same bit for bit as with their own
    programs, which a map whose programs are known takes, as does one where no helper
    could build them behind (they would never be built otherwise)."""
    from clkernels import get_backend
    from pyedmcl.kernels import xmap as xk
    from pyedmcl.xmap import skill_plan as sk
    staged = dict(xk._LAYOUT, TJ=1, LANES=1, LWG=32, LB=1, LMAJ=1, CM=1, ST=1, CH=16, SPL=2)
    monkeypatch.setattr(sk, "cpu_layout", lambda p, ntg, time_major=False: dict(staged))
    X = panel(L=90, N=24, seed=4)
    E = np.resize([1, 2, 3, 4, 6], 24)  # five groups, K 2 .. 7
    be = get_backend(CPU_DEVICE)
    behind, ended, programs = [], [], []
    launch = xk.XMAP_SKILL.launch

    def spy(be_, params, spec, *a, k=None, **kw):
        programs.append((params.get("KR", 0), spec["K"], k))
        return launch(be_, params, spec, *a, k=k, **kw)

    monkeypatch.setattr(xk.XMAP_SKILL, "launch", spy)
    monkeypatch.setattr(be, "build_behind", lambda reqs: behind.append(list(reqs)))  # None
    ref = None
    for known in (True, None, False):
        monkeypatch.setattr(be, "known", lambda reqs, known=known: bool(known))
        programs.clear()
        got = pe.xmap(X, E=E, device=CPU_DEVICE, fma=False)
        if known is None:  # not known, but no helper could build them behind: their own now
            np.testing.assert_array_equal(got.rho, ref.rho)
            assert {p[0] for p in programs} == {0} and len(behind) == 1 and not ended
            behind.clear()
            monkeypatch.setattr(be, "build_behind", lambda reqs: behind.append(list(reqs))
                                or (lambda: ended.append(1)))
        elif known:
            ref = got
            assert {p[0] for p in programs} == {0} and not behind
        else:
            np.testing.assert_array_equal(got.rho, ref.rho)
            assert {(kr, K) for kr, K, _ in programs} == {(1, 7)}  # one program, K <= 7
            assert {k for *_, k in programs} == {2, 3, 4, 5, 7}  # each group's own K
            assert len(behind) == 1 and ended == [1]
            own = {(r[1]["K"], r[2]) for r in behind[0]}
            assert own == {(K, n) for K in (2, 3, 4, 5, 7) for n in ("pack", "xmap_skill")}
            assert all(not r[1].get("KR") for r in behind[0])


def test_scan_skill_reduces_over_its_own_width(monkeypatch):
    """The embedding scan's skill (``diag``) launches work-groups of SCAN_SKILL_WG
    streams whatever CCM's width (decision 0113: at CCM's 16 the scan's small launches,
    each as long as one stream, were 2x slower), so its rho, and the E they choose, stay
    the same when CCM's width changes; the cross map reduces over CCM's."""
    from clkernels import get_backend
    from pyedmcl.kernels import lookup
    from pyedmcl.kernels import xmap as xk
    be = get_backend(CPU_DEVICE)
    seen = []  # (diag, local size) of each skill launch
    launch = be.launch

    def spy(kernel, gsize, lsize, *args, **kw):
        if kernel.name == "xmap_skill":
            seen.append((int(args[14]), tuple(lsize)))  # (argument 14: diag)
        return launch(kernel, gsize, lsize, *args, **kw)

    monkeypatch.setattr(be, "launch", spy)
    X = panel(L=120, N=6, seed=7)
    ref = pe.xmap(X, E="auto", max_E=4, device=CPU_DEVICE)
    assert {ls for diag, ls in seen if diag} == {(xk.scan_skill_wg(be.info), 1)}
    assert xk.scan_skill_wg(be.info) == 64 and any(not diag for diag, _ in seen)
    seen.clear()
    monkeypatch.setattr(lookup, "CCM_SKILL_WG", 4)
    got = pe.xmap(X, E="auto", max_E=4, device=CPU_DEVICE)
    assert {ls for diag, ls in seen if diag} == {(64, 1)}
    np.testing.assert_array_equal(got.edim_rho, ref.edim_rho)
    np.testing.assert_array_equal(got.E, ref.E)


def test_auto_E_is_the_embedding_scan_best():
    X = panel(L=100, N=4, seed=2)
    r = pe.xmap(X, E="auto", max_E=5)
    b = pe.xmap(X, E="auto", max_E=5, knn_method="batched")  # scan with the batched k-NN
    np.testing.assert_array_equal(r.edim_rho, b.edim_rho)
    for i in range(4):
        s = pe.embed_dimension(X[:, i], max_E=5, Tp=1, lib="1 50", pred="51 100")
        np.testing.assert_allclose(r.edim_rho[i], s.rho, atol=RHO_TOL)
        assert r.E[i] == s.best


def test_dataframe_and_list_input():
    X = panel(L=60, N=3)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    r = pe.xmap(df, E=2)
    assert r.names == ["a", "b", "c"]
    np.testing.assert_array_equal(r.rho, pe.xmap([X[:, 0], X[:, 1], X[:, 2]], E=2).rho)


@pytest.mark.parametrize("bad, match", [
    ([np.arange(50.0), np.arange(40.0)], "different lengths"),
    (np.ones((50, 1)), "N >= 2"),
    (np.ones(50), "2-D"),
    (np.random.default_rng(0).random((3, 500)), r"3 time points .* pass X\.T"),  # transposed
])
def test_bad_shapes(bad, match):
    with pytest.raises(ValueError, match=match):
        pe.xmap(bad, E=2)


def test_nan_columns_named():
    X = panel(L=50, N=4).astype(np.float64)
    X[7, 2] = np.nan
    df = pd.DataFrame(X, columns=list("abcd"))
    with pytest.raises(ValueError, match=r"\['c'\].*NaN"):
        pe.xmap(df, E=2)


@pytest.mark.parametrize("kw, match", [
    (dict(E=0), "E"), (dict(E=[2, 3]), "N=4"), (dict(E="best"), "auto"),
    (dict(E=2, tau=0), "tau"), (dict(E=2, block_rows=0), "block_rows"),
    (dict(E=2, scheduler="local"), "out="), (dict(E=2, knn_method="faiss"), "knn_method"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        pe.xmap(panel(L=50, N=4), **kw)


def test_e_too_large_for_the_series_refused():
    """rho[i, j] is pe.ccm's, which refuses a library of fewer than E + 2 usable rows
    (E + 1 neighbours and the query): so does the map, naming the largest E that fits
    (it used to cross-map such a target with fewer neighbours); that E runs and equals
    pe.ccm."""
    X = panel(L=48, N=3)
    with pytest.raises(ValueError, match=r"E=20 is too large .* 9 usable rows.*E <= 15 fits"):
        pe.xmap(X, E=[20, 3, 5], tau=2, Tp=1, device=CPU_DEVICE)
    r = pe.xmap(X, E=[15, 3, 5], tau=2, Tp=1, device=CPU_DEVICE)
    c = pe.ccm(X[:, 1], X[:, 0], E=15, tau=2, Tp=1, lib_sizes=[48], random=False,
               device=CPU_DEVICE)
    assert r.rho[1, 0] == np.float32(c.rho_xy[0])
    with pytest.raises(ValueError, match="E=16"):
        pe.ccm(X[:, 1], X[:, 0], E=16, tau=2, Tp=1, lib_sizes=[48], random=False,
               device=CPU_DEVICE)
    with pytest.raises(ValueError, match="E=16 is too large"):
        pe.xmap(X, E=16, tau=2, Tp=1, device=CPU_DEVICE)


def test_rho_is_ccms_at_many_neighbours_on_every_runtime(device):
    """The map's rho equals pe.ccm's bit for bit on every runtime, at K = 16 neighbours
    too. Intel's CPU runtime without AVX-512 fuses CCM's normalised products into their
    sum despite FP_CONTRACT OFF, and its float32 predictions were 2-7 ulp off every other
    runtime's (E = 15, Zen 3); the lookup rounds each product on its own there
    (clkernels.devices.fuses_despite_pragma)."""
    X = panel(L=48, N=3)
    r = pe.xmap(X, E=[15, 3, 5], tau=2, Tp=1, device=device)
    c = pe.ccm(X[:, 1], X[:, 0], E=15, tau=2, Tp=1, lib_sizes=[48], random=False,
               device=device)
    assert r.rho[1, 0] == np.float32(c.rho_xy[0])


def test_fresh_buffers_decide_no_rho(monkeypatch):
    """Every fresh device buffer filled with garbage before the kernels see it (NaN
    floats, run-like uint32 words, out-of-range int32 points): the maps (both k-NN
    kernels, mixed E, row blocks) equal the clean run's bit for bit, so no rho reads a
    word no launch wrote (what Oclgrind's uninitialised-value plugin cannot tell for the
    packed table)."""
    from clkernels.backends import pyopencl_backend as P

    X = np.random.default_rng(0).standard_normal((300, 6))
    E = [1, 2, 3, 2, 1, 3]

    def maps():
        return [np.asarray(pe.xmap(X, E=E, block_rows=2, knn_method=kk, device=CPU_DEVICE).rho)
                for kk in ("edm", "batched")] + [np.asarray(pe.xmap(X, E=3, device=CPU_DEVICE).rho)]

    clean = maps()
    orig = P.PyOpenCLBackend.empty

    def garbage(self, shape, dtype, *a, **k):
        arr = orig(self, shape, dtype, *a, **k)
        dt = np.dtype(dtype)
        if arr.size and (dt.kind == "f" or dt in (np.uint32, np.int32)):
            self.fill(arr, np.nan if dt.kind == "f" else (0x7FFFFFF5 if dt == np.uint32 else 123456))
        return arr
    monkeypatch.setattr(P.PyOpenCLBackend, "empty", garbage)
    for a, b in zip(clean, maps(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_oclgrind_clean():
    """Every xmap kernel (both k-NN kernels, both weights, pack, fused skill, the
    diagonal embedding-scan mode) runs without invalid accesses or data races, and
    the results agree with PoCL within float32 rounding (Oclgrind has its own libm).
    The embedding-scan path is fully clean. On the full cross-map path Oclgrind
    reports the packed k-NN table as uninitialised when xmap_skill reads it, also from
    an unoptimised build, so that run ignores uninitialised-value reports only;
    test_fresh_buffers_decide_no_rho shows no rho depends on a word no launch wrote."""
    out = run_under_oclgrind("""
        import json, numpy as np, clkernels
        from pyedmcl.xmap.engine import XmapEngine
        X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
        r = XmapEngine(clkernels.get_backend(), X.T).edim_block(0, 3, 1)
        print(json.dumps(r.tolist()))
    """)
    edim = np.array(json.loads(out.strip().splitlines()[-1]), np.float32)
    X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
    ref = pe.xmap(X, E=[1, 2, 3], device=CPU_DEVICE)
    got = {}
    for kk in ("edm", "batched"):
        out = run_under_oclgrind(f"""
            import json, numpy as np, pyedmcl as pe
            X = np.random.default_rng(0).standard_normal((24, 3)).astype(np.float32)
            r = pe.xmap(X, E=[1, 2, 3], block_rows=2, knn_method="{kk}")
            print(json.dumps(r.rho.tolist()))
        """, ignore_uninitialized=True)
        got[kk] = np.array(json.loads(out.strip().splitlines()[-1]), np.float32)
        np.testing.assert_allclose(got[kk], ref.rho, atol=RHO_TOL, rtol=0)
    np.testing.assert_array_equal(got["edm"], got["batched"])
    ref_e = pe.xmap(X, E="auto", max_E=1, device=CPU_DEVICE)
    np.testing.assert_allclose(edim, ref_e.edim_rho, atol=RHO_TOL, rtol=0)


@pytest.mark.parametrize("shape,dtype", [((1, 3), np.float32), ((257, 513), np.float64),
                                         ((1100, 4001), np.float32)])
def test_series_major_copy(shape, dtype):
    """The tiled (and, for large panels, threaded) transpose equals numpy's plain one,
    for ragged tiles and float64 input (rounded to float32 as ``astype`` does)."""
    from pyedmcl.xmap.core import series_major_f32
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = series_major_f32(a)
    assert got.flags.c_contiguous and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.ascontiguousarray(a.T, dtype=np.float32))


@pytest.mark.parametrize("then", [None, lambda rows, sl: None])
@pytest.mark.parametrize("shape,dtype", [((1, 3), np.float32), ((257, 513), np.float64),
                                         ((1100, 4001), np.float32)])
def test_series_major_extremes(shape, dtype, then):
    """The rows' largest and smallest values reduced tile by tile during the copy (band
    by band where each band is handed on) equal max / min over each row of the copy,
    NaN where the row holds one (inf kept)."""
    from pyedmcl.xmap.core import series_major_f32
    a = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    a[0, 0] = np.nan
    a[-1, -1] = np.inf
    a[shape[0] // 2, min(1, shape[1] - 1)] = -np.inf
    out, hi, lo = series_major_f32(a, dtype=np.float64, extremes=True, then=then)
    np.testing.assert_array_equal(out, np.ascontiguousarray(a.T, dtype=np.float64))
    np.testing.assert_array_equal(hi, out.max(axis=1))
    np.testing.assert_array_equal(lo, out.min(axis=1))


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("shape,threads", [((300, 7), 1), ((1100, 700), 3)])
def test_series_major_copy_standardises_each_band(monkeypatch, scale, shape, threads):
    """The copy hands every band of rows to a RowStandardiser as it writes it (ragged
    last band, chunks of a few rows, bands from several threads): the same shifts,
    scales, values and float32 cast bit for bit as standardising the finished copy."""
    from pyedmcl import _precision as P
    from pyedmcl.xmap import core
    rng = np.random.default_rng(4)
    a = rng.standard_normal(shape).cumsum(axis=0) * 10 ** rng.uniform(-3, 6, shape[1]) + 1e4
    a[:, 1] = 2.5  # a constant series
    monkeypatch.setattr(P, "_CHUNK_VALUES", 3 * shape[0])
    monkeypatch.setattr(core.os, "cpu_count", lambda: threads)
    monkeypatch.setattr(core, "PARALLEL_BYTES", 1)
    std = P.RowStandardiser((shape[1], shape[0]), scale, cast=np.float32)
    bands = []

    def then(rows, sl):
        bands.append(sl.start)
        std(rows, sl)

    out = core.series_major_f32(a, dtype=np.float64, then=then)
    assert sorted(bands) == list(range(0, shape[1], core.TRANSPOSE_TILE))
    f, z, z32 = std.result()
    ref_f, ref_z, ref_32 = P._standardise(out, scale, None, np.float32)
    np.testing.assert_array_equal(out, a.T)
    for got, ref in ((f.shift, ref_f.shift), (f.scale, ref_f.scale), (f.spread, ref_f.spread),
                     (z, ref_z), (z32, ref_32)):
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(RuntimeError, match="before every row"):
        P.RowStandardiser((4, 3), scale).result()
    # in place (the map's float32 path): the copy itself becomes the standardised rows
    dst = np.empty((shape[1], shape[0]))
    std = P.RowStandardiser(dst.shape, scale, cast=np.float32, out=dst)
    core.series_major_f32(a, dtype=np.float64, then=std, out=dst)
    f, z, z32 = std.result()
    assert z is dst
    for got, ref in ((f.shift, ref_f.shift), (f.scale, ref_f.scale), (z, ref_z), (z32, ref_32)):
        np.testing.assert_array_equal(got, ref)


def test_standardising_copy_threads_follow_the_panel_size():
    """The standardising copy takes about one thread per 12 MiB of the float64 panel,
    8 at least and 12 at most (then the cores and bands bound them)."""
    from pyedmcl.xmap import core
    assert core.fused_threads(10_000 * 1_000 * 8) == 8
    assert core.fused_threads(5_000 * 3_780 * 8) == 12
    assert core.fused_threads(1_000) == 8 and core.fused_threads(1 << 40) == 12
    assert core.fused_threads(10 * core.FUSED_BYTES_PER_THREAD) == 10


def test_xmap_float64_fall_back_from_the_raw_panel():
    """One series too narrow for float32's squared distances (std 1e-14) sends the whole
    map to float64 with one warning, run on the raw panel (the float32 path centres its
    copy in place): the same matrix bit for bit as asking for float64."""
    from pyedmcl._precision import PrecisionWarning
    X = np.random.default_rng(6).standard_normal((200, 4)).cumsum(axis=0)
    X[:, 2] *= 1e-14
    X[:, [0, 3]] += [1e5 + 0.3, -7e3]
    with pytest.warns(PrecisionWarning, match="spread over"):
        got = pe.xmap(X, E=2, device=CPU_DEVICE)
    ref = pe.xmap(X, E=2, device=CPU_DEVICE, dtype="float64")
    np.testing.assert_array_equal(got.rho, ref.rho)
    # the fall-back's kernel input is the raw panel, not the copy centred in place
    from pyedmcl._precision import RowStandardiser, prepare
    z = np.ascontiguousarray(X.T)
    std = RowStandardiser(z.shape, False, cast=np.float32, out=z)
    std(z, slice(0, 4))
    with pytest.warns(PrecisionWarning, match="spread over"):
        p = prepare([z], np.float32, True, names=["X"], scale=False, cast=True,
                    standardised=[std.result()], raw=lambda: [np.ascontiguousarray(X.T)])
    assert p.dtype == np.float64
    np.testing.assert_array_equal(p.kernel_input(0), X.T)


@pytest.mark.parametrize("N,rows,devices", [(5000, 128, 2), (10000, 128, 2), (100, 64, 1),
                                            (7, 2, 3), (1, 4, 2), (2, 128, 4)])
def test_even_blocks(N, rows, devices):
    """The in-memory map's row blocks: consecutive, covering every row once, at most
    ``rows`` rows, sizes within one row, their number a multiple of the devices where
    N allows (N = 5,000 on two GPUs: 40 blocks of 125, not 39 of 128 and one of 8)."""
    from pyedmcl.xmap.core import even_blocks
    b = even_blocks(N, rows, devices)
    assert [x[0] for x in b] == list(range(len(b)))
    assert b[0][1] == 0 and b[-1][2] == N
    assert all(x[2] == y[1] for x, y in zip(b, b[1:], strict=False))
    sizes = [x[2] - x[1] for x in b]
    assert max(sizes) <= rows and max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    assert len(b) % devices == 0 or len(b) == N
    if (N, rows, devices) == (5000, 128, 2):
        assert sizes == [125] * 40


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("offset", [0.0, -3.0e4, 1.0e9])
def test_largest_standardised_from_extremes(scale, offset):
    """prepare's largest magnitude after centring (and scaling), taken from the raw rows'
    extremes, is largest_magnitude of the standardised panel bit for bit: quantized
    data, constant rows, large offsets and rows whose extremes round alike."""
    from pyedmcl._bands import largest_magnitude
    from pyedmcl._precision import _largest_standardised, _standardise
    rng = np.random.default_rng(2)
    a = np.round(rng.standard_normal((40, 300)) * 10 ** rng.uniform(-3, 3, (40, 1)), 2) + offset
    a[3] = offset  # a constant row
    a[5, :] = offset + np.array([1e-9, -1e-9] * 150)  # extremes that round to one value
    for rows in (a, a[7]):  # a panel and one 1-D series
        aff, z, _ = _standardise(rows, scale, None)
        got = _largest_standardised((np.atleast_2d(rows).max(axis=1),
                                     np.atleast_2d(rows).min(axis=1)), aff, scale)
        assert got == largest_magnitude(z)


def test_xmap_constant_and_nonfinite_from_extremes():
    """The map's constant-series warning and its refusal of non-finite series, both
    decided from the copy's row extremes, name the right series."""
    X = np.random.default_rng(3).standard_normal((60, 4))
    X[:, 2] = 1.5
    with pytest.warns(UserWarning, match="series 2 is constant"):
        pe.xmap(X, E=2, device=CPU_DEVICE)
    X[10, 1] = np.inf
    X[0, 3] = np.nan
    with pytest.raises(ValueError, match=r"series \[1, 3\] contain NaN or inf"):
        pe.xmap(X, E=2, device=CPU_DEVICE)
