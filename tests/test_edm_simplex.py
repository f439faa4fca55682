"""Simplex and the k-NN kernel against pyEDM (computed live) and a NumPy reference.

Tolerances (float32 kernels vs pyEDM's float64): rho within 1e-5 (pyEDM itself
rounds rho to 6 digits), predictions within 1e-4 relative (+1e-6 absolute).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.primitives.knn import knn_table

pyEDM = pytest.importorskip("pyEDM")

RHO_TOL = 1e-5
PRED_RTOL = 1e-4
#: absolute floor, relative to the target's magnitude: float32 holds the series to
#: ~6e-8 relative, so a prediction near 0 built from values of size |y|max
#: cannot be closer than a few 1e-7 * |y|max
PRED_ATOL_SCALE = 1e-6


def assert_pred(got, ref, target):
    atol = PRED_ATOL_SCALE * float(np.max(np.abs(target)))
    np.testing.assert_allclose(got, ref, rtol=PRED_RTOL, atol=atol)


def _pyedm_simplex(df, col, tgt, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pyEDM.Simplex(dataFrame=df, columns=col, target=tgt, **kw)
    pred = out["Predictions"].to_numpy()
    err = pyEDM.AuxFunc.ComputeError(out["Observations"], out["Predictions"])
    return pred[np.isfinite(pred)], err["rho"]


def _logistic(n, r=3.9, x0=0.4):
    x = np.empty(n)
    x[0] = x0
    for i in range(1, n):
        x[i] = r * x[i - 1] * (1 - x[i - 1])
    return x


def _lorenz_x(n, dt=0.01, sub=5):
    s = np.array([1.0, 1.0, 1.0])
    out = []
    for i in range(n * sub):
        x, y, z = s
        s = s + dt * np.array([10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z])
        if i % sub == 0:
            out.append(s[0])
    return np.array(out)


CASES = [
    ("block_3sp", "x_t", "y_t", dict(E=3, Tp=1, lib="1 100", pred="101 195")),
    ("block_3sp", "x_t", "x_t", dict(E=4, Tp=1, lib="1 198", pred="1 198")),
    ("block_3sp", "y_t", "z_t", dict(E=2, Tp=2, lib="1 80 101 198", pred="50 150",
                                     exclusionRadius=3)),
    ("Lorenz5D", "V1", "V3", dict(E=5, Tp=1, lib="1 500", pred="501 900", tau=-2)),
    ("Lorenz5D", "V2", "V2", dict(E=3, Tp=0, lib="1 1000", pred="1 1000", knn=7)),
    ("TentMap", "TentMap", "TentMap", dict(E=2, Tp=1, lib="1 300", pred="301 600")),
    ("TentMap", "TentMap", "TentMap", dict(E=3, Tp=-2, lib="1 400", pred="401 600")),
    ("circle", "x", "y", dict(E=2, Tp=1, lib="1 100", pred="101 198", tau=2)),
    ("sardine_anchovy_sst", "anchovy", "np_sst", dict(E=3, Tp=1, lib="1 78", pred="1 78")),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_simplex_matches_pyedm_sample_data(device, case):
    name, col, tgt, kw = case
    df = pyEDM.sampleData[name]
    ref_pred, ref_rho = _pyedm_simplex(df, col, tgt, **kw)
    ours = dict(kw)
    ours["tau"] = -ours.pop("tau", -1)  # pyEDM's tau=-1 is our tau=1
    ours["exclusion_radius"] = ours.pop("exclusionRadius", 0)
    r = pe.simplex(df[col], df[tgt], device=device, **ours)
    got = r.predicted[np.isfinite(r.predicted)]
    assert_pred(got, ref_pred, df[tgt])
    assert abs(r.rho - ref_rho) < RHO_TOL


@pytest.mark.parametrize("series", ["logistic", "lorenz"])
def test_simplex_matches_pyedm_generated_chaos(device, series):
    import pandas as pd
    x = _logistic(800) if series == "logistic" else _lorenz_x(800)
    df = pd.DataFrame({"t": np.arange(1, x.size + 1), "x": x})
    for E in (1, 4, 7):
        ref_pred, ref_rho = _pyedm_simplex(df, "x", "x", E=E, Tp=1, lib="1 800", pred="1 800")
        r = pe.simplex(x, E=E, device=device)
        assert_pred(r.predicted[np.isfinite(r.predicted)], ref_pred, x)
        assert abs(r.rho - ref_rho) < RHO_TOL


def test_ties_and_zero_distances_follow_pyedm_order(device):
    """Integer series: many exactly equal distances, zero distances (duplicate vectors).

    pyEDM's Simplex orders ties by (distance, |pred row - lib row|, lib row); the
    kernel uses the same key, so neighbour sets and predictions agree exactly.
    Distances of integer data are exact in float32, so no tie is lost to rounding.
    Zero distances: both floor d_min at 1e-6, so exact duplicates take all the weight.
    """
    import pandas as pd
    rng = np.random.default_rng(11)
    x = rng.integers(0, 4, 400).astype(float)
    df = pd.DataFrame({"t": np.arange(1, 401), "x": x})
    for E, knn in ((1, 0), (2, 0), (3, 9)):
        ref_pred, ref_rho = _pyedm_simplex(df, "x", "x", E=E, Tp=1, knn=knn, lib="1 400",
                                           pred="1 400")
        r = pe.simplex(x, E=E, knn=knn or None, device=device)
        assert_pred(r.predicted[np.isfinite(r.predicted)], ref_pred, x)
        assert abs(r.rho - ref_rho) < RHO_TOL


def _knn_reference(x, E, tau, k, R):
    span = (E - 1) * tau
    V = np.stack([x[j * tau: j * tau + x.size - span] for j in range(E)], 1)
    D = np.sqrt(((V[:, None, :] - V[None, :, :]) ** 2).sum(-1))
    p = np.arange(V.shape[0])
    D[np.abs(p[:, None] - p[None, :]) <= R] = np.inf
    tie = 2 * np.abs(p[:, None] - p[None, :]) + (p[None, :] > p[:, None])
    order = np.lexsort((np.broadcast_to(tie, D.shape), D), axis=1)[:, :k]
    return order, np.take_along_axis(D, order, 1), D


@pytest.mark.parametrize("E, tau, k, R", [(1, 1, 2, 0), (3, 2, 4, 0), (5, 1, 6, 3), (2, 1, 33, -1)])
def test_knn_kernel_matches_numpy(device, E, tau, k, R):
    x = np.random.default_rng(3).standard_normal(300)
    idx, d = knn_table(x, E=E, tau=tau, knn=k, exclusion_radius=R, device=device)
    ref_i, ref_d, D = _knn_reference(x, E, tau, k, R)
    np.testing.assert_allclose(d, ref_d, rtol=1e-5, atol=1e-6)
    # the chosen points are truly that near (a float32 near-tie may swap two ranks)
    np.testing.assert_allclose(np.take_along_axis(D, idx, 1), ref_d, rtol=1e-5, atol=1e-6)
    assert (idx == ref_i).mean() > 0.999


VARIANTS = [
    dict(VARIANT="rows", WG=16, TILE=32, QB=1, EA=0, INS="reg", FLAG=1),
    dict(VARIANT="rows", WG=32, TILE=64, QB=1, EA=4, INS="reg", FLAG=1),
    dict(VARIANT="rows", WG=32, TILE=32, QB=1, EA=0, INS="reg", FLAG=1, SPLIT=4),
    dict(VARIANT="rows", WG=16, TILE=64, QB=1, EA=2, INS="reg", FLAG=1, SPLIT=2),
    dict(VARIANT="rows", WG=64, TILE=64, QB=1, EA=4, INS="reg", FLAG=1, SPLIT=32),
    dict(VARIANT="cols", WG=16, TILE=32, QB=8, EA=0, INS="reg", FLAG=1),
    dict(VARIANT="cols", WG=16, TILE=16, QB=16, EA=2, INS="local", FLAG=1),
    dict(VARIANT="cols", WG=8, TILE=16, QB=8, EA=0, INS="local", FLAG=0),
    dict(VARIANT="vec", WG=8, TILE=32, QB=8, EA=0, INS="reg", FLAG=1),
    # QQ queries per work-item (register blocking): a partial last block of queries
    dict(VARIANT="vec", WG=8, TILE=16, QB=4, EA=0, INS="reg", FLAG=1, QQ=2),
    dict(VARIANT="vec", WG=4, TILE=32, QB=16, EA=0, INS="reg", FLAG=1, QQ=2, CB=4),
    # candidate buffers: flushed when full (CB=1: every candidate) and per tile
    dict(VARIANT="vec", WG=8, TILE=16, QB=4, EA=0, INS="reg", FLAG=1, CB=1),
    dict(VARIANT="vec", WG=16, TILE=64, QB=8, EA=0, INS="reg", FLAG=1, CB=8),
    # SPLIT work-items per query: partial lists merged (with and without buffers)
    dict(VARIANT="vec", WG=16, TILE=32, QB=4, EA=0, INS="reg", FLAG=1, SPLIT=4),
    dict(VARIANT="vec", WG=8, TILE=64, QB=8, EA=0, INS="reg", FLAG=1, SPLIT=2, CB=4),
]


@pytest.mark.parametrize("params", VARIANTS, ids=[
    f"{p['VARIANT']}-{p['INS']}-QB{p['QB']}-EA{p['EA']}-F{p['FLAG']}-S{p.get('SPLIT', 1)}-Q{p.get('QQ', 1)}-CB{p.get('CB', 0)}"
    for p in VARIANTS])
def test_knn_kernel_variants_match_numpy(device, params):
    """Every tunable configuration (GPU 'rows' ones too) gives the reference table;
    integer data (many exact ties), several batches, an exclusion radius."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    be = get_backend(device)
    x = np.random.default_rng(2).integers(0, 5, 150).astype(float)
    E, k, R = 3, 6, 1
    npts = x.size - (E - 1)
    libs = np.stack([np.sort(np.random.default_rng(s).choice(npts, 70, replace=False))
                     for s in range(3)]).astype(np.int32)
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": "euclidean", "REAL": "float"}
    idx = be.empty((3, npts, k), np.int32)
    dist = be.empty((3, npts, k), np.float32)
    KNN.launch(be, params, spec, be.to_device(x.astype(np.float32)),
               be.to_device(np.arange(npts, dtype=np.int32)), npts, be.to_device(libs), 70, 3, R,
               idx, dist)
    got_i, got_d = be.to_host(idx), be.to_host(dist)
    _, _, D = _knn_reference(x, E, 1, k, R)
    p = np.arange(npts)
    for b in range(3):
        lib = libs[b]
        Db = D[:, lib]
        tie = 2 * np.abs(p[:, None] - lib[None, :]) + (lib[None, :] > p[:, None])
        order = np.lexsort((tie, Db), axis=1)[:, :k]
        np.testing.assert_array_equal(got_i[b], lib[order])
        np.testing.assert_allclose(got_d[b], np.take_along_axis(Db, order, 1), rtol=1e-6)


def test_knn_ties_integer_series(device):
    x = np.random.default_rng(5).integers(0, 3, 200).astype(float)
    idx, d = knn_table(x, E=2, knn=10, device=device)
    ref_i, ref_d, _ = _knn_reference(x, 2, 1, 10, 0)
    np.testing.assert_array_equal(idx, ref_i)  # exact: integer distances have no rounding


def test_several_targets_share_one_table(device):
    x = _logistic(300)
    y = np.stack([np.roll(x, 1), x ** 2])
    both = pe.simplex(x, y, E=2, device=device)
    for j in range(2):
        one = pe.simplex(x, y[j], E=2, device=device)
        np.testing.assert_allclose(both.predicted[j], one.predicted, rtol=1e-6)
        assert abs(both.rho[j] - one.rho) < 1e-9


BAD = [
    (dict(E=0), "E"), (dict(E=2, knn=0.5), "knn"), (dict(E=2, knn=-1), "knn"),
    (dict(E=2, lib="1 5000"), "lib"), (dict(E=2, pred="0 10"), "pred"), (dict(E=2, lib=[]), "lib"),
    (dict(E=2, tau=0), "tau"), (dict(E=60, tau=2), "E"), (dict(E=2, exclusion_radius=-1), "exclusion_radius"),
]


@pytest.mark.parametrize("kw, word", BAD)
def test_bad_input(kw, word):
    x = _logistic(100)
    with pytest.raises((ValueError, TypeError), match=word):
        pe.simplex(x, device=CPU_DEVICE, **kw)


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_rejected(bad):
    """inf is rejected; NaN is missing data (tests/test_multivariate.py)."""
    x = _logistic(100)
    x[10] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        pe.simplex(x, E=2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="NaN or inf"):
        pe.simplex(_logistic(100), x, E=2, device=CPU_DEVICE)


def test_too_short_series():
    with pytest.raises(ValueError, match="too short"):
        pe.simplex(np.arange(6.0), E=4, device=CPU_DEVICE)


@pytest.mark.parametrize("real", ["float", "double"])
def test_vec_options_do_not_change_the_table(device, real):
    """The vec variant's QQ / SPLIT / CB options give the plain variant's table bit for
    bit, in float32 (packed keys, buffered) and float64 (insertion network, merged)."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    be = get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    dt = np.float64 if real == "double" else np.float32
    x = np.random.default_rng(4).integers(0, 5, 260).astype(dt)  # many exact ties
    E, k = 4, 7
    npts = x.size - (E - 1)
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": "euclidean", "REAL": real}
    pts = be.to_device(np.arange(npts, dtype=np.int32))
    xd = be.to_device(x)
    out = []
    for opt in ({}, {"QQ": 2}, {"SPLIT": 2}, {"SPLIT": 4, "CB": 4}, {"QQ": 2, "CB": 1}):
        idx, dist = be.empty((npts, k), np.int32), be.empty((npts, k), dt)
        KNN.launch(be, dict(VARIANT="vec", WG=16, TILE=32, QB=8, EA=0, INS="reg", FLAG=1, **opt),
                   spec, xd, pts, npts, pts, npts, 1, 1, idx, dist)
        out.append((be.to_host(idx), be.to_host(dist)))
    for i, d in out[1:]:
        np.testing.assert_array_equal(i, out[0][0])
        np.testing.assert_array_equal(d, out[0][1])


@pytest.mark.parametrize("params", [VARIANTS[2], VARIANTS[5], VARIANTS[7], VARIANTS[11], VARIANTS[14]],
                         ids=["rows-split", "cols-reg", "cols-local", "vec-cb", "vec-split-cb"])
def test_tile_order_does_not_change_the_table(device, params):
    """ORD=1 (library tiles nearest the queries first) gives ORD=0's table bit for bit:
    a smooth series (where the order matters most), queries at both ends and in the
    middle of the library, a contiguous library (the direct position lookup) and a
    gapped one (binary search), a partial last tile."""
    from clkernels import get_backend
    from pyedmcl.kernels.knn import KNN
    from pyedmcl.neighbors.lorenz import lorenz63
    be = get_backend(device)
    x = lorenz63(410, component="x").astype(np.float32)
    E, k = 3, 5
    npts = x.size - (E - 1)
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": "euclidean", "REAL": "float"}
    xd = be.to_device(x)
    pts = be.to_device(np.arange(npts, dtype=np.int32))
    for lib in (np.arange(npts), np.r_[0:150, 170:300, 333:npts]):
        lib_d = be.to_device(lib.astype(np.int32))
        out = []
        for order in (0, 1):
            idx, dist = be.empty((npts, k), np.int32), be.empty((npts, k), np.float32)
            KNN.launch(be, params, {**spec, "ORD": order}, xd, pts, npts, lib_d, lib.size, 1, 0,
                       idx, dist)
            out.append((be.to_host(idx), be.to_host(dist)))
        np.testing.assert_array_equal(out[1][0], out[0][0])
        np.testing.assert_array_equal(out[1][1], out[0][1])


def test_oclgrind_clean():
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from pyedmcl.primitives.knn import knn_table
        from pyedmcl.kernels.knn import KNN
        from clkernels import get_backend
        x = np.sin(np.arange(60) * 0.7) + 0.1 * np.cos(np.arange(60) * 1.3)
        r = pe.simplex(x, E=3, tau=2, Tp=1, exclusion_radius=2)
        print("rho", r.rho)
        be = get_backend()
        for variant, params in (("rows", dict(WG=8, TILE=16, QB=1, EA=2, INS="reg", FLAG=1, SPLIT=2)), ("cols", dict(WG=8, TILE=16, QB=4, EA=2, INS="local", FLAG=0)),
                                ("vec", dict(WG=8, TILE=16, QB=4, EA=0, INS="reg", FLAG=1, QQ=2, CB=2)),
                                ("vec", dict(WG=8, TILE=16, QB=4, EA=0, INS="reg", FLAG=1, SPLIT=2, CB=2))):
            spec = {"E": 2, "TAU": 1, "K": 3, "METRIC": "euclidean", "REAL": "float"}
            xd = be.to_device(x.astype(np.float32))
            pts = be.to_device(np.arange(45, dtype=np.int32))
            lib = be.to_device(np.arange(0, 59, 2, dtype=np.int32))
            idx = be.empty((45, 3), np.int32); dist = be.empty((45, 3), np.float32)
            KNN.launch(be, {"VARIANT": variant, **params}, spec, xd, pts, 45, lib, 29, 1, 0, idx, dist)
            be.finish()
            print(variant, be.to_host(idx)[:2].tolist())
        from pyedmcl.edm import ccm as ccm_mod  # the sorted rows (per-sample: test_edm_ccm)
        ccm_mod.sorted_rows_pay = lambda info, M, k: True
        c = pe.ccm(x, np.cos(np.arange(60) * 0.7), E=2, lib_sizes=[10, 30], sample=3, seed=1)
        print("ccm", c.rho_xy)
    """)
    assert "rho" in out and "ccm" in out


def test_repeated_call_uploads_only_its_series(monkeypatch):
    """A repeated Simplex call reuses the plan's point lists on the device (uploads: the
    series, and the float32 row check's query norms, the target's units in one array
    (tolerance, span, and for the lookup's own redo shift and scale) and that redo's
    float64 series, these beside a running kernel; the flag counts are zeroed by a
    launch); results are
    unchanged, with a new series of the same length too; the upload cache stays within
    its byte bound."""
    from clkernels import get_backend
    from pyedmcl.edm import simplex as S
    be = get_backend(CPU_DEVICE)
    x = np.sin(np.arange(500) * 0.3) + 0.01 * np.arange(500)
    first = pe.simplex(x, E=3, device=be)
    uploads = []
    for name in ("to_device", "to_device_aside"):
        real = getattr(be, name)
        monkeypatch.setattr(be, name, lambda a, real=real, **kw: uploads.append(a.shape)
                            or real(a, **kw))
    again = pe.simplex(x, E=3, device=be)
    assert sorted(uploads) == [(4,), (498,), (500,), (500,)]
    np.testing.assert_array_equal(again.predicted, first.predicted)
    y = np.cos(np.arange(500) * 0.2)
    cached = pe.simplex(y, E=3, device=be).predicted
    from pyedmcl.primitives import ranges
    monkeypatch.setattr(ranges, "_plans", type(ranges._plans)())
    monkeypatch.setattr(S, "_plan_uploads", type(S._plan_uploads)())
    np.testing.assert_array_equal(cached, pe.simplex(y, E=3, device=be).predicted)
    monkeypatch.setattr(S, "PLAN_UPLOAD_BYTES", 1)
    for E in (2, 4, 5):
        pe.simplex(x, E=E, device=be)
    assert len(S._plan_uploads) == 1
