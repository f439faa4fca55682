"""Windowed RQA in one pass over the band (pyedmcl.rqa.band, kernel family rqa_band).

float64 and float32 (each window prepared as rqa() prepares it). Oracles: the per-window path (one rqa() per window, ``method="windows"``), equal in every
measure and count (exact: same decisions, integer histograms, the same measure code); a
NumPy reference of each window's line histograms built from the full recurrence matrix;
pyunicorn on whole windows (counts exact, ratios to 1e-9 relative: it adds 1e-8 to its
denominators). Oclgrind: no invalid access, race or barrier divergence in the kernels.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import CPU_DEVICE, TEST_DEVICES, run_under_oclgrind

import pyedmcl as pe
from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
from pyedmcl.rqa.core import _band_windows, rqa
from pyedmcl.rqa.windowed import windowed_rqa as _windowed_rqa


def windowed_rqa(one, x, **kw):
    """The windowed path with the band runner rqa() gives it (``method`` chooses)."""
    return _windowed_rqa(one, x, band=_band_windows, **kw)


def quantized(n: int, seed: int = 3) -> np.ndarray:
    """A 0.1-grid random walk: many distances tie with the radius."""
    x = np.round(np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 3) / 10
    return x.astype(np.float32).astype(np.float64)


def _same_frames(a, b) -> bool:
    va, vb = a.to_numpy(float), b.to_numpy(float)
    return list(a.index) == list(b.index) and bool(
        ((va == vb) | (np.isnan(va) & np.isnan(vb))).all())


CASES = [  # window, step and options: overlaps, S | W or not, S > W, S = 1, every rule
    dict(E=3, radius=0.5, window=120, step=40),
    dict(E=2, radius=0.7, window=97, step=13, theiler=0, w_min=1, white_border=False),
    dict(E=3, radius=0.5, window=100, step=30, theiler=5, theiler_scope="matrix",
         white_border=False),
    dict(E=2, tau=2, radius=0.4, window=90, step=45, metric="maximum",
         threshold_rule="squared"),
    dict(E=3, radius=1.0, window=64, step=16, metric="manhattan", theiler=3, l_min=3),
    dict(E=3, radius=0.5, window=110, step=25, threshold_rule="squared", v_min=1, w_min=4),
    dict(E=1, radius=0.3, window=21, step=1, theiler=2, theiler_scope="matrix"),
    dict(E=2, radius=0.5, window=40, step=55),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_band_equals_one_rqa_per_window(device, case):
    x = quantized(300, seed=case)
    kw = dict(CASES[case], dtype="float64", device=device)
    band = windowed_rqa(rqa, x, method="band", **kw)
    per = windowed_rqa(rqa, x, method="windows", **kw)
    assert band.attrs["method"] == "band" and per.attrs["method"] == "windows"
    assert _same_frames(band, per)
    assert pe.rqa(x, **kw).attrs["method"] == "band"  # rqa()'s default takes the band


def _numpy_windows(x, E, tau, r, W, S, w):
    """Each window's (recurrences, diagonal, vertical, white) histograms from the full
    recurrence matrix (float64, squared distances summed in coordinate order, d2 < r^2 with
    r^2 the smallest float whose sqrt is >= r, as the kernels' threshold)."""
    from pyedmcl.rqa.threshold import kernel_threshold

    n = x.size - (E - 1) * tau
    pts = np.stack([x[m * tau: m * tau + n] for m in range(E)], axis=1)
    d2 = np.zeros((n, n))
    for m in range(E):
        diff = pts[:, None, m] - pts[None, :, m]
        d2 += diff * diff
    R = d2 < kernel_threshold(r, "euclidean", np.dtype(np.float64), "distance")

    def runs(v, colour):
        out, cur = [], 0
        for b in v:
            if b == colour:
                cur += 1
            elif cur:
                out.append(cur)
                cur = 0
        return out + ([cur] if cur else [])

    res = []
    for s in range(0, n - W + 1, S):
        M = R[s: s + W, s: s + W]
        h = [np.zeros(W, np.int64) for _ in range(3)]
        for k in range(max(w, 1), W):
            for ln in runs(np.diagonal(M, k), True):
                h[0][ln - 1] += 2
        if w == 0:
            h[0][W - 1] += 1
        for j in range(W):
            for ln in runs(M[:, j], True):
                h[1][ln - 1] += 1
            for ln in runs(M[:, j], False):
                h[2][ln - 1] += 1
        res.append((int(M.sum()), *h))
    return res


def test_band_histograms_numpy_reference(device, monkeypatch):
    from clkernels import get_backend
    from pyedmcl.rqa import band
    from pyedmcl.rqa.band import band_histograms
    from pyedmcl.rqa.threshold import kernel_threshold

    x = quantized(140, seed=11)
    E, tau, r, W, S = 2, 3, 0.6, 45, 10
    for w, bins in ((0, 1 << 23), (1, 3 * W), (4, 5 * W)):  # 1, 2 and 4 windows per pass
        monkeypatch.setattr(band, "_HIST_BINS", bins)
        n = x.size - (E - 1) * tau
        nrec, d, v, wh = band_histograms(
            [get_backend(device)], x, kernel_threshold(r, "euclidean", np.dtype(np.float64)),
            E=E, tau=tau, metric="euclidean", real="double", fma=False, theiler_matrix=False,
            w=w, white_border=True, n_points=n, window=W, step=S)
        ref = _numpy_windows(x, E, tau, r, W, S, w)
        assert nrec.tolist() == [t[0] for t in ref]
        for i, (_, rd, rv, rw) in enumerate(ref):
            assert d[i].tolist() == rd.tolist() and v[i].tolist() == rv.tolist(), (w, i)
            assert wh[i].tolist() == rw.tolist(), (w, i)


def test_band_windows_match_pyunicorn(device):
    x = quantized(400, seed=5)
    E, W, S = 3, 150, 60
    df = pe.rqa(x, E=E, radius=0.5, window=W, step=S, w_min=1, dtype="float64", device=device)
    assert df.attrs["method"] == "band"
    for a, b in [df.index[0], df.index[-1]]:
        sub = x[a: b + 1 + (E - 1)]
        rp = pyunicorn_rp(sub, E=E, tau=1, radius=0.5)
        row = df.loc[(a, b)]
        assert row["n_recurrences"] == int(rp.R.sum())
        for k, val in pyunicorn_measures(rp, 2, 2, 1).items():
            assert row[k] == pytest.approx(val, rel=1e-9, abs=0), (a, k)


@pytest.mark.parametrize("shape", ["logistic", "spikes"])
def test_band_float32_windows_prepared_as_rqa(device, shape):
    """float32: each window is centred as rqa() centres it (or run in float64 where its
    values would merge); windows prepared alike share a pass, rows equal per window."""
    from pyedmcl.data import logistic_map

    if shape == "logistic":
        x = logistic_map(900, r=3.9, x0=0.4, burn=0) * 1000 + 5e4
        kw = dict(E=3, radius=40.0, window=150, step=30, threshold_rule="squared")
    else:  # windows holding a spike switch to float64 (PrecisionWarning), the rest float32
        x = 1e4 + np.round(np.random.default_rng(5).standard_normal(900), 3) * 1e-1
        x[[300, 620]] += 1e9
        kw = dict(E=2, radius=0.05, window=100, step=25, theiler=0)
    with warnings.catch_warnings(record=True) as wb:
        warnings.simplefilter("always")
        band = windowed_rqa(rqa, x, method="band", device=device, **kw)
    with warnings.catch_warnings(record=True) as ww:
        warnings.simplefilter("always")
        per = windowed_rqa(rqa, x, method="windows", device=device, **kw)
    assert _same_frames(band, per)
    assert len(wb) == len(ww) and (len(wb) > 0) == (shape == "spikes")


def test_method_choice_and_refusals():
    x = quantized(200, seed=2)
    kw = dict(E=2, window=60, step=20, device=CPU_DEVICE)  # the band runs on CPUs
    assert pe.rqa(x, radius=0.5, **kw).attrs["method"] == "band"  # float32, shared centring
    df = pe.rqa(x, recurrence_rate=0.1, dtype="float64", **kw)
    assert df.attrs["method"] == "windows" and df["radius"].nunique() > 1
    ramp = np.arange(300) * 10.0  # every window centred differently in float32
    assert pe.rqa(ramp, radius=5.0, **kw).attrs["method"] == "windows"
    for xx, extra, what in ((ramp, dict(radius=5.0), "float64"),
                            (x, dict(recurrence_rate=0.1, dtype="float64"), "recurrence_rate"),
                            (x, dict(neighbourhood="fan", knn=5, dtype="float64"), "fan")):
        with pytest.raises(ValueError, match=what):
            windowed_rqa(rqa, xx, method="band", **kw, **extra)
    with pytest.raises(ValueError, match="method"):
        windowed_rqa(rqa, x, method="tiles", radius=0.5, **kw)
    with pytest.raises(ValueError, match="l_min"):
        windowed_rqa(rqa, x, method="band", radius=0.5, l_min=61, dtype="float64", **kw)


def test_band_two_devices_identical():
    if len(TEST_DEVICES) < 2:
        pytest.skip("needs two OpenCL runtimes (e.g. pocl + intel)")
    x = quantized(300, seed=9)
    kw = dict(E=2, radius=0.5, window=80, step=20, dtype="float64")
    one = windowed_rqa(rqa, x, method="band", device=TEST_DEVICES[0], **kw)
    two = windowed_rqa(rqa, x, method="band", devices=TEST_DEVICES[:2], **kw)
    assert _same_frames(one, two)


def test_band_kernels_under_oclgrind():
    # Oclgrind's uninitialised-value plugin stops at LLVM's `freeze` (emitted for the
    # divisions by the constant step) and leaves the histograms empty: it is off here;
    # invalid accesses, data races and barrier divergence are still checked. Unoptimised
    # (run_under_oclgrind(unoptimised=True)) it reports rqa_hjoin's and rqa_symjoin's
    # reads of row pieces and column carries that reach them by device copies or stay
    # unwritten; test_fresh_uint32_buffers_decide_nothing shows no result depends on them.
    out = run_under_oclgrind("""
        import numpy as np
        from pyedmcl.rqa.core import _band_windows, rqa
        from pyedmcl.rqa.windowed import windowed_rqa
        x = np.round(np.sin(np.arange(90) * 0.37) * 10) / 10
        for kw in (dict(window=30, step=7), dict(window=20, step=25, theiler=0,
                   theiler_scope="matrix", white_border=False), dict(window=16, step=1)):
            a = windowed_rqa(rqa, x, E=2, radius=0.3, dtype="float64", method="band",
                             band=_band_windows, **kw)
            b = windowed_rqa(rqa, x, E=2, radius=0.3, dtype="float64", method="windows", **kw)
            va, vb = a.to_numpy(float), b.to_numpy(float)
            print(bool(((va == vb) | (np.isnan(va) & np.isnan(vb))).all()))
    """, ignore_uninitialized=True)
    assert out.split() == ["True"] * 3


def test_cli_window_takes_the_band(tmp_path, capsys):
    import json

    from pyedmcl.cli.main import main

    x = quantized(300, seed=4)
    np.save(tmp_path / "x.npy", x)
    assert main(["rqa", str(tmp_path / "x.npy"), "-E", "2", "-r", "0.5", "--window", "90",
                 "--step", "30", "-q", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    per = windowed_rqa(rqa, x, E=2, radius=0.5, window=90, step=30, method="windows")
    assert [r["n_recurrences"] for r in rows] == list(per["n_recurrences"])
    assert [r["DET"] for r in rows] == pytest.approx(list(per["DET"]), rel=0, abs=0)


def test_band_step_one_many_cut_runs(device):
    """Step 1 (every run cut by many windows' borders) with a Theiler band over the matrix:
    NVIDIA's compiler (H100, driver 580) miscounted these cuts with the run-closing
    function inlined (decision 0055); each window's histograms equal the NumPy reference."""
    from clkernels import get_backend
    from pyedmcl.rqa.band import band_histograms
    from pyedmcl.rqa.threshold import kernel_threshold

    x = quantized(160, seed=6)
    W, S, w = 21, 1, 2
    nrec, d, v, wh = band_histograms(
        [get_backend(device)], x, kernel_threshold(0.3, "euclidean", np.dtype(np.float64)),
        E=1, tau=1, metric="euclidean", real="double", fma=False, theiler_matrix=False,
        w=w, white_border=True, n_points=x.size, window=W, step=S)
    ref = _numpy_windows(x, 1, 1, 0.3, W, S, w)
    assert nrec.tolist() == [t[0] for t in ref]
    for i, (_, rd, rv, rw) in enumerate(ref):
        assert (d[i].tolist(), v[i].tolist(), wh[i].tolist()) == (
            rd.tolist(), rv.tolist(), rw.tolist()), i


@pytest.mark.parametrize("device", [CPU_DEVICE])
def test_fresh_uint32_buffers_decide_nothing(device, monkeypatch):
    """Every fresh uint32 device buffer (histograms, run carries, row pieces, counts)
    filled with a run-like garbage word before the kernels see it: the band windows and
    SYM's chunked rows (HCH) give the histograms of clean buffers, so no result reads a
    word no launch wrote (what Oclgrind's uninitialised-value plugin cannot tell for
    words moved by device copies)."""
    from clkernels.backends import pyopencl_backend as P

    x = np.round(np.sin(np.arange(90) * 0.37) * 10) / 10
    y = np.sin(np.arange(600) * 0.37) + 0.1 * np.random.default_rng(3).standard_normal(600)
    hch = [{"VEC": 1, "WG": wg, "EDGE": 96, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
            "WALK": 1, "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": sh}
           for wg, sh in ((32, 0), (64, 2))]
    kws = (dict(window=30, step=7), dict(window=20, step=25, theiler=0,
                                         theiler_scope="matrix", white_border=False))

    def results():
        band = [_windowed_rqa(rqa, x, E=2, radius=0.3, dtype="float64", method="band",
                              band=_band_windows, device=device, **kw).to_numpy(float)
                for kw in kws]
        full = [pe.rqa(y, E=2, tau=2, radius=0.3, params=p, device=device) for p in hch]
        return band, [(r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)
                      for r in full]

    clean = results()
    orig = P.PyOpenCLBackend.empty

    def garbage(self, shape, dtype, *a, **k):
        arr = orig(self, shape, dtype, *a, **k)
        if np.dtype(dtype) == np.uint32 and arr.size:
            self.fill(arr, 0x7FFFFFF5)  # a white run of 2^31 - 11 cells, or a count
        return arr
    monkeypatch.setattr(P.PyOpenCLBackend, "empty", garbage)
    dirty = results()
    for a, b in zip(clean[0], dirty[0], strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(clean[1], dirty[1], strict=True):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
