"""CCM against pyEDM 2.5 (live) and a NumPy reference; the scans against pyEDM.

pyEDM draws libraries with ``default_rng(SeedSequence(SeedSequence(seed).entropy))``
per (direction, library size); pyedmcl does the same, so with one seed the
sampled curves agree to float32 precision: we assert 1e-5 on every mean rho.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe

pyEDM = pytest.importorskip("pyEDM")
RHO_TOL = 1e-5


def _coupled_logistic(n=400, bxy=0.0, byx=0.3):
    x, y = np.empty(n), np.empty(n)
    x[0], y[0] = 0.4, 0.2
    for t in range(n - 1):
        x[t + 1] = x[t] * (3.8 - 3.8 * x[t] - bxy * y[t])
        y[t + 1] = y[t] * (3.5 - 3.5 * y[t] - byx * x[t])
    return x, y


def _pyedm_ccm(df, col, tgt, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyEDM.CCM(dataFrame=df, columns=col, target=tgt, parallel=False, **kw)


@pytest.mark.parametrize("kw", [
    dict(E=3, Tp=0, libSizes="10 70 20", sample=20, seed=7),
    dict(E=2, Tp=1, libSizes=[15, 40, 78], sample=10, seed=3, exclusionRadius=2),
])
def test_ccm_sample_data_matches_pyedm(device, kw):
    df = pyEDM.sampleData["sardine_anchovy_sst"]
    ref = _pyedm_ccm(df, "anchovy", "np_sst", **kw)
    r = pe.ccm(df["anchovy"], df["np_sst"], E=kw["E"], Tp=kw["Tp"], lib_sizes=kw["libSizes"],
               sample=kw["sample"], seed=kw["seed"], exclusion_radius=kw.get("exclusionRadius", 0),
               device=device)
    np.testing.assert_array_equal(r.lib_sizes, ref["LibSize"])
    np.testing.assert_allclose(r.rho_xy, ref["anchovy:np_sst"], atol=RHO_TOL)
    np.testing.assert_allclose(r.rho_yx, ref["np_sst:anchovy"], atol=RHO_TOL)


def test_ccm_generated_convergence_matches_pyedm(device):
    x, y = _coupled_logistic()
    df = pd.DataFrame({"t": np.arange(x.size), "x": x, "y": y})
    ref = _pyedm_ccm(df, "x", "y", E=2, Tp=0, libSizes="20 380 60", sample=15, seed=42, tau=-2)
    r = pe.ccm(x, y, E=2, tau=2, lib_sizes="20 380 60", sample=15, seed=42, device=device)
    np.testing.assert_allclose(r.rho_xy, ref["x:y"], atol=RHO_TOL)
    np.testing.assert_allclose(r.rho_yx, ref["y:x"], atol=RHO_TOL)
    # x is driven by nothing, y by x: x cross-maps from y's manifold converges upward
    assert r.rho_yx[-1] > r.rho_yx[0]


def _ccm_reference(x, y, E, L, libs, k):
    """Brute-force NumPy CCM for given sampled libraries (float64)."""
    V = np.stack([x[(E - 1) - j: x.size - j] for j in range(E)], 1)
    target = y[E - 1:]
    out = []
    for lib in libs:
        D = np.sqrt(((V[:, None, :] - V[None, lib, :]) ** 2).sum(-1))
        D[np.arange(V.shape[0])[:, None] == lib[None, :]] = np.inf
        o = np.argsort(D, axis=1, kind="stable")[:, :k]
        d = np.take_along_axis(D, o, 1)
        w = np.exp(-d / np.where(d[:, :1] > 0, d[:, :1], 1.0))
        pred = (w * target[lib[o]]).sum(1) / w.sum(1)
        out.append(np.corrcoef(pred, target)[0, 1])
    return np.array(out)


def test_ccm_replacement_matches_numpy_reference(device):
    x, y = _coupled_logistic(200)
    r = pe.ccm(x, y, E=3, lib_sizes=[30, 90], sample=4, seed=5, replacement=True, device=device)
    M = x.size - 2
    for i, L in enumerate((30, 90)):
        rng = np.random.default_rng(np.random.SeedSequence(np.random.SeedSequence(5).entropy))
        libs = [np.sort(rng.choice(M, size=L, replace=True)) for _ in range(4)]
        ref = _ccm_reference(x, y, 3, L, libs, 4)
        np.testing.assert_allclose(r.rho_xy_samples[i], ref, atol=1e-5)


@pytest.mark.parametrize("kw, word", [
    (dict(E=2, lib_sizes=[2, 10]), "lib_sizes"), (dict(E=2, lib_sizes=[10, 5000]), "lib_sizes"),
    (dict(E=2, lib_sizes=[10], sample=0), "sample"), (dict(E=0, lib_sizes=[10]), "E"),
    (dict(E=2, lib_sizes=[]), "lib_sizes"),
])
def test_ccm_bad_input(kw, word):
    x, y = _coupled_logistic(100)
    with pytest.raises((ValueError, TypeError), match=word):
        pe.ccm(x, y, device=CPU_DEVICE, **kw)


def test_scans_match_pyedm(device):
    df = pyEDM.sampleData["TentMap"]
    x = df["TentMap"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e_ref = pyEDM.EmbedDimension(dataFrame=df, columns="TentMap", target="TentMap", lib="1 100",
                                     pred="201 500", maxE=6, showPlot=False, numProcess=1)
        t_ref = pyEDM.PredictInterval(dataFrame=df, columns="TentMap", target="TentMap",
                                      lib="1 100", pred="201 500", E=2, maxTp=5, showPlot=False,
                                      numProcess=1)
        x_ref = pyEDM.PredictExclusionRadius(dataFrame=df, columns="TentMap", target="TentMap",
                                             lib="1 300", pred="1 300", E=2, showPlot=False,
                                             numProcess=1)
    e = pe.embed_dimension(x, lib="1 100", pred="201 500", max_E=6, device=device)
    np.testing.assert_allclose(e.rho, e_ref["rho"], atol=RHO_TOL)
    assert e.best == e_ref["E"][int(np.argmax(e_ref["rho"]))]
    t = pe.predict_interval(x, lib="1 100", pred="201 500", E=2, max_Tp=5, device=device)
    np.testing.assert_allclose(t.rho, t_ref["rho"], atol=RHO_TOL)
    r = pe.predict_exclusion_radius(x, lib="1 300", pred="1 300", E=2, device=device)
    np.testing.assert_allclose(r.rho, x_ref["rho"], atol=RHO_TOL)


@pytest.mark.parametrize("kw", [
    dict(E=3, lib_sizes=[5, 20, 60, 118], sample=6),
    dict(E=2, tau=2, Tp=1, lib_sizes=[8, 40, 100], sample=5, exclusion_radius=3),
    dict(E=2, lib_sizes=[10, 50, 119], sample=5, replacement=True, knn=5),
    dict(E=3, lib_sizes=[30, 80], random=False),
    dict(E=2, knn=6, lib_sizes=[4, 5, 30, 100], sample=4),  # k = 3, 4, 6, 6: three launches
])
@pytest.mark.parametrize("integer", [False, True])
def test_ccm_sorted_rows_equal_per_sample_knn(device, kw, integer, monkeypatch):
    """The sorted full-library path (default) returns exactly what per-sample k-NN
    launches of the fused kernel return: same neighbours, same tie order (integer
    data has many exact distance ties), so identical rho samples (no tolerance)."""
    from pyedmcl.edm import ccm as ccm_mod
    x, y = _coupled_logistic(120)
    if integer:
        x, y = np.round(x * 6), np.round(y * 6)
    fast = pe.ccm(x, y, seed=11, device=device, **kw)
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 0)
    slow = pe.ccm(x, y, seed=11, device=device, **kw)
    np.testing.assert_array_equal(fast.rho_xy_samples, slow.rho_xy_samples)
    np.testing.assert_array_equal(fast.rho_yx_samples, slow.rho_yx_samples)


@pytest.mark.parametrize("sorted_rows", [True, False])
def test_ccm_oclgrind_clean(sorted_rows):
    """Both paths under Oclgrind (it counts as a GPU, which takes the per-sample k-NN
    launches: :func:`pyedmcl.edm.ccm.sorted_rows_pay`), unoptimised so that its
    uninitialised-value checks follow the fused k-NN kernel. The per-sample path's
    float32 lookup over a batch of two or more tables is reported as reading
    uninitialised table words (one table is not, nor are float64's): those checks are off
    for it, bounds and races stay on, and :func:`test_ccm_fresh_buffers_decide_no_rho`
    shows that no sample reads a word no launch wrote."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind(f"""
        import numpy as np, pyedmcl as pe
        from pyedmcl.edm import ccm
        ccm.sorted_rows_pay = lambda info, M, k: {sorted_rows}
        x = np.sin(np.arange(40) * 0.7) + 0.1 * np.cos(np.arange(40) * 1.3)
        y = np.cos(np.arange(40) * 0.4)
        r = pe.ccm(x, y, E=2, tau=2, lib_sizes=[6, 20, 36], sample=3, seed=1, exclusion_radius=1)
        r2 = pe.ccm(x, y, E=3, lib_sizes=[10, 30], sample=2, seed=2, replacement=True)
        print("rho", r.rho_xy, r2.rho_yx)
    """, unoptimised=True, ignore_uninitialized=not sorted_rows)
    assert "rho" in out


def test_ccm_fresh_buffers_decide_no_rho(monkeypatch):
    """Every fresh device buffer filled with garbage before the kernels see it (NaN
    floats, out-of-range int32 points): CCM's samples on both paths (sorted rows and
    per-sample k-NN launches over batches of libraries), float32 and float64, equal the
    clean run's bit for bit, so no sample reads a word no launch wrote."""
    from clkernels.backends import pyopencl_backend as P
    from pyedmcl.edm import ccm as ccm_mod

    x = np.sin(np.arange(300) * 0.7) + 0.1 * np.cos(np.arange(300) * 1.3)
    y = np.cos(np.arange(300) * 0.4) + 0.05 * np.sin(np.arange(300) * 2.1)

    def samples():
        out = []
        for pays in (True, False):
            monkeypatch.setattr(ccm_mod, "sorted_rows_pay", lambda info, M, k, p=pays: p)
            for dt in ("float32", "float64"):
                r = pe.ccm(x, y, E=3, lib_sizes=[20, 150], sample=5, seed=3, dtype=dt,
                           device=CPU_DEVICE)
                out += [r.rho_xy_samples, r.rho_yx_samples]
        return out

    clean = samples()
    orig = P.PyOpenCLBackend.empty

    def garbage(self, shape, dtype, *a, **k):
        arr = orig(self, shape, dtype, *a, **k)
        dt = np.dtype(dtype)
        if arr.size and (dt.kind == "f" or dt == np.int32):
            self.fill(arr, np.nan if dt.kind == "f" else 123456)
        return arr
    monkeypatch.setattr(P.PyOpenCLBackend, "empty", garbage)
    for a, b in zip(clean, samples(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scan, kw", [
    ("embed_dimension", dict(max_E=6, lib="1 100", pred="101 180")),
    ("predict_interval", dict(E=3, max_Tp=4, exclusion_radius=2)),
    ("predict_exclusion_radius", dict(E=2, radii=[0, 3, 8])),
])
def test_scans_equal_one_simplex_per_value(device, scan, kw):
    """The scan enqueues every value and reads all skills back once; each value's
    rho / MAE / RMSE must equal a separate pyedmcl.simplex call bit for bit (Simplex's
    float32 path as the scans take it: without the per-row float64 redo of
    pyedmcl.edm.row_check, which scans do not do)."""
    from pyedmcl.edm.row_check import unchecked

    x, _ = _coupled_logistic(180)
    r = getattr(pe, scan)(x, device=device, **kw)
    name = {"embed_dimension": "E", "predict_interval": "Tp",
            "predict_exclusion_radius": "exclusion_radius"}[scan]
    base = {k: v for k, v in kw.items() if k not in ("max_E", "max_Tp", "radii")}
    for i, v in enumerate(r.values):
        with unchecked():
            one = pe.simplex(x, device=device, **{**base, name: int(v)})
        assert (r.rho[i], r.mae[i], r.rmse[i]) == (one.rho, one.mae, one.rmse)


def test_scans_oclgrind_clean():
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(50) * 0.7) + 0.1 * np.cos(np.arange(50) * 1.3)
        r = pe.embed_dimension(x, max_E=3, lib="1 25", pred="26 50")
        r2 = pe.predict_exclusion_radius(x, E=2, radii=[0, 4])
        print("rho", r.rho, r2.rho)
    """)
    assert "rho" in out


def test_ccm_nan_sizes_say_why():
    """Where no sample of a library size predicts (an exclusion radius leaving fewer than
    knn admissible neighbours), rho is NaN with one warning naming the sizes and the
    reason, not numpy's 'Mean of empty slice'; sizes that predict stay quiet."""
    rng = np.random.default_rng(0)
    x, y = np.cumsum(rng.normal(size=100)), np.cumsum(rng.normal(size=100))
    kw = dict(E=2, lib_sizes=[50, 99], sample=3, seed=1, device=CPU_DEVICE)
    with pytest.warns(RuntimeWarning, match=r"rho is NaN at library sizes \[50, 99\].*"
                                            r"exclusion_radius=98") as rec:
        r = pe.ccm(x, y, exclusion_radius=98, **kw)
    assert len(rec) == 1 and "Mean of empty slice" not in str(rec[0].message)
    assert np.isnan(r.rho_xy).all() and np.isnan(r.rho_yx).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(pe.ccm(x, y, exclusion_radius=10, **kw).rho_xy).all()
