"""RQA by D&R against the oracles: NumPy full-matrix reference, PyRQA 8, pyunicorn.

Tolerances: histograms and counts exactly (float64 distances). Ratios vs pyunicorn
1e-9 relative (pyunicorn adds 1e-8 to its denominators). PyRQA reports its
measures in float32, so its own values are compared at 2e-6 relative and the
same measures recomputed in float64 from PyRQA's histograms at 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_DEVICE, covering

import pyedmcl as pe
from clkernels import select_device
from pyedmcl.rqa._oracles import (
    numpy_reference,
    pyrqa_measures,
    pyrqa_run,
    pyunicorn_measures,
    pyunicorn_rp,
)
from pyedmcl.rqa.measures import compute_measures

#: PyRQA's own OpenCL platform: the one of the CPU device the tests use (PoCL, else Intel's
#: runtime where PoCL cannot build)
ORACLE_PLATFORM = select_device(CPU_DEVICE).platform_name


def logistic(n: int, r: float = 3.9, x0: float = 0.4) -> np.ndarray:
    """Logistic map from x0, no burn-in (pyedmcl.data.logistic_map)."""
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=r, x0=x0, burn=0)


def noisy_sine(n: int, seed: int = 0) -> np.ndarray:
    t = np.arange(n)
    return np.sin(2 * np.pi * t / 37.0) + 0.2 * np.random.default_rng(seed).standard_normal(n)


def recorded() -> np.ndarray:
    """A real recorded series: weekly flow S12CD+S333 (Everglades, 1980-2005, pyEDM data), z-scored."""
    pytest.importorskip("pyEDM", reason="the record is pyEDM's package data")
    import importlib.resources

    path = importlib.resources.files("pyEDM") / "data" / "S12CD-S333-SumFlow_1980-2005.csv"
    s = np.loadtxt(str(path), delimiter=",", skiprows=1, usecols=1)
    return (s - s.mean()) / s.std()


def f32(x: np.ndarray) -> np.ndarray:
    """pyunicorn stores series as float32: give every library the same values."""
    return x.astype(np.float32).astype(np.float64)


def _hist_eq(ours: np.ndarray, theirs: np.ndarray) -> bool:
    theirs = np.asarray(theirs).astype(np.int64)
    n = max(ours.size, theirs.size)
    a = np.zeros(n, np.int64)
    b = np.zeros(n, np.int64)
    a[: ours.size] = ours
    b[: theirs.size] = theirs
    return bool(np.array_equal(a, b))


SERIES = {"logistic": (logistic, 3, 2, 0.3), "sine": (noisy_sine, 2, 4, 0.4)}


#: (EDGE, BITS, SHARE, PH, WALK) of test_numpy_reference_small
SMALL_SHAPES = [(7, 0, 0, 0, 0), (64, 1, 0, 0, 1), (1000, 1, 0, 0, 0), (45, 0, 0, 0, 0),
                (100, 2, 0, 0, 1), (33, 2, 0, 1024, 1), (100, 2, 1, 0, 0), (33, 2, 1, 1024, 2),
                (64, 2, 1, 1024, 1), (100, 2, 2, 0, 1), (33, 2, 2, 1024, 1), (64, 2, 2, 1024, 2),
                (139, 2, 2, 1024, 0), (139, 2, 2, 1024, 1)]


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_numpy_reference_small(device, metric):
    """Full-matrix reference incl. Theiler scopes, white-border option, odd edges (every
    shape where conftest.every_shape holds, a covering few on another CPU runtime)."""
    x = logistic(140)
    for theiler, scope, wb in [(0, "lines", True), (1, "lines", True), (3, "matrix", False),
                               (2, "lines", False)]:
        ref = numpy_reference(x, None, E=3, tau=2, radius=0.3, metric=metric, theiler=theiler,
                              theiler_scope=scope, white_border=wb)
        # share=2: SYM=1 (upper triangle only, lower-triangle verticals as row runs)
        # ph/walk: private histograms of 1024 bins take the WALK paths' direct bins
        for edge, bits, share, ph, walk in covering(SMALL_SHAPES, device):
            r = pe.rqa(x, E=3, tau=2, radius=0.3, metric=metric, theiler=theiler,
                       theiler_scope=scope, white_border=wb, dtype="float64", device=device,
                       params={"VEC": 4, "WG": 4, "EDGE": edge, "BITS": bits, "PH": ph,
                               "SHARE": min(share, 1), "SYM": int(share == 2), "WALK": walk})
            assert _hist_eq(r.diagonal_hist, ref["diag"]), (theiler, scope, edge)
            assert _hist_eq(r.vertical_hist, ref["vert"]), (theiler, scope, edge)
            assert _hist_eq(r.white_hist, ref["white"]), (theiler, scope, wb, edge)
            assert r.n_recurrences == ref["n_rec"] and r.n_cells == ref["n_cells"]


def test_cross_numpy_reference(device):
    x, y = logistic(120), noisy_sine(97) * 0.5 + 0.5
    for theiler in (0, 2):
        ref = numpy_reference(x, y, E=2, tau=3, radius=0.2, metric="euclidean", theiler=theiler)
        for params in (None, {"VEC": 4, "WG": 4, "EDGE": 70, "BITS": 2, "SHARE": 1},
                       {"VEC": 1, "WG": 2, "EDGE": 13, "BITS": 2, "SHARE": 1}):
            r = pe.cross_rqa(x, y, E=2, tau=3, radius=0.2, theiler=theiler, dtype="float64",
                             device=device, edge=13 if params is None else None, params=params)
            assert _hist_eq(r.diagonal_hist, ref["diag"]), params
            assert _hist_eq(r.vertical_hist, ref["vert"]), params
            assert _hist_eq(r.white_hist, ref["white"]), params
            assert r.n_recurrences == ref["n_rec"], params


@pytest.mark.parametrize("name", ["logistic", "sine", "recorded"])
def test_pyunicorn_n2000(device, name):
    if name == "recorded":
        x, E, tau, radius = f32(recorded()), 3, 1, 0.3
    else:
        fn, E, tau, radius = SERIES[name]
        x = f32(fn(2000))
    for metric in ("maximum", "euclidean"):
        rp = pyunicorn_rp(x, E=E, tau=tau, radius=radius, metric=metric)
        for lmin in (2, 3):
            r = pe.rqa(x, E=E, tau=tau, radius=radius, metric=metric, theiler=1, l_min=lmin,
                       v_min=lmin, w_min=1, dtype="float64", device=device)
            assert _hist_eq(r.diagonal_hist, rp.diagline_dist())
            assert _hist_eq(r.vertical_hist, rp.vertline_dist())
            assert _hist_eq(r.white_hist, rp.white_vertline_dist())
            theirs = pyunicorn_measures(rp, lmin, lmin, 1)
            for k, v in theirs.items():
                assert r.measures[k] == pytest.approx(v, rel=1e-9, abs=0), (k, metric, lmin)


@pytest.mark.parametrize("n", [2000, 10000])
def test_pyrqa(device, n):
    x = logistic(n)
    cases = [("euclidean", 1, 2), ("maximum", 0, 3), ("manhattan", 5, 2)]
    if n > 2000:
        cases = cases[:1]
    for metric, theiler, lmin in cases:
        radius = {"euclidean": 0.3, "maximum": 0.2, "manhattan": 0.5}[metric]
        pr, _ = pyrqa_run(x, E=3, tau=2, radius=radius, metric=metric, theiler=theiler,
                          platform=ORACLE_PLATFORM,
                          l_min=lmin, v_min=lmin, w_min=lmin)
        r = pe.rqa(x, E=3, tau=2, radius=radius, metric=metric, theiler=theiler, l_min=lmin,
                   v_min=lmin, w_min=lmin, dtype="float64", device=device)
        assert _hist_eq(r.diagonal_hist, pr.diagonal_frequency_distribution)
        assert _hist_eq(r.vertical_hist, pr.vertical_frequency_distribution)
        assert _hist_eq(r.white_hist, pr.white_vertical_frequency_distribution)
        assert r.n_recurrences == int(pr.number_of_recurrence_points)
        theirs = pyrqa_measures(pr)
        exact = compute_measures(int(pr.number_of_recurrence_points), n_cells=r.n_cells,
                                 diag=pr.diagonal_frequency_distribution,
                                 vert=pr.vertical_frequency_distribution,
                                 white=pr.white_vertical_frequency_distribution,
                                 l_min=lmin, v_min=lmin, w_min=lmin)
        for k, v in theirs.items():
            assert r.measures[k] == pytest.approx(float(v), rel=2e-6), (k, metric)
            assert r.measures[k] == pytest.approx(exact[k], rel=1e-12), k


def test_pyrqa_cross(device):
    x, y = logistic(1500), noisy_sine(1100) * 0.4 + 0.5
    pr, _ = pyrqa_run(x, y=y, E=3, tau=2, radius=0.4, theiler=0, platform=ORACLE_PLATFORM)
    r = pe.cross_rqa(x, y, E=3, tau=2, radius=0.4, theiler=0, dtype="float64", device=device)
    assert _hist_eq(r.diagonal_hist, pr.diagonal_frequency_distribution)
    assert _hist_eq(r.vertical_hist, pr.vertical_frequency_distribution)
    assert _hist_eq(r.white_hist, pr.white_vertical_frequency_distribution)
    assert r.n_recurrences == int(pr.number_of_recurrence_points)
    assert r.RR == pytest.approx(float(pr.recurrence_rate), rel=2e-6)


def test_float32_threshold_effect(device):
    """float32 vs float64 distances: only cells within float32 rounding of r may flip.

    The number of recurrence points may differ by at most the number of cells
    whose float64 squared distance lies within 4 float32 ulps of r^2.
    """
    x = logistic(2000)
    r64 = pe.rqa(x, E=3, tau=2, radius=0.3, dtype="float64", device=device)
    r32 = pe.rqa(x, E=3, tau=2, radius=0.3, dtype="float32", device=device)
    a = np.stack([x[m * 2: m * 2 + 1996] for m in range(3)], axis=1)
    d2 = ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1)
    near = int((np.abs(d2 - 0.09) <= 4 * np.spacing(np.float32(0.09))).sum())
    assert abs(r32.n_recurrences - r64.n_recurrences) <= near
    assert r32.DET == pytest.approx(r64.DET, abs=near / max(r64.n_recurrences, 1) + 1e-12)


def test_pyunicorn_n10000():
    """N = 10,000 against pyunicorn (one device: pyunicorn holds the full matrix, ~15 s)."""
    x = f32(noisy_sine(10000 + 3))
    rp = pyunicorn_rp(x, E=2, tau=3, radius=0.3, metric="maximum")
    r = pe.rqa(x, E=2, tau=3, radius=0.3, metric="maximum", theiler=1, w_min=1,
               dtype="float64", device=CPU_DEVICE)
    assert _hist_eq(r.diagonal_hist, rp.diagline_dist())
    assert _hist_eq(r.vertical_hist, rp.vertline_dist())
    assert _hist_eq(r.white_hist, rp.white_vertline_dist())
    for k, v in pyunicorn_measures(rp, 2, 2, 1).items():
        assert r.measures[k] == pytest.approx(v, rel=1e-9, abs=0), k


def test_pyrqa_joint(device):
    """Joint RQA against PyRQA's JRQA (two fixed radii, Theiler 1)."""
    import warnings

    warnings.filterwarnings("ignore")
    from pyrqa.analysis_type import Classic
    from pyrqa.computation import JRQAComputation
    from pyrqa.metric import EuclideanMetric
    from pyrqa.neighbourhood import FixedRadius
    from pyrqa.settings import JointSettings, Settings
    from pyrqa.time_series import TimeSeries

    from pyedmcl.rqa._oracles import pyrqa_opencl

    x, y = logistic(1200), noisy_sine(1200)

    def settings(s, r):
        return Settings(TimeSeries(s, embedding_dimension=2, time_delay=1, dtype=np.float64),
                        analysis_type=Classic, neighbourhood=FixedRadius(r),
                        similarity_measure=EuclideanMetric, theiler_corrector=1)

    comp = JRQAComputation.create(JointSettings(settings(x, 0.3), settings(y, 0.5)), verbose=False,
                                  opencl=pyrqa_opencl(ORACLE_PLATFORM))
    pr = comp.run()
    r = pe.joint_rqa(x, y, E=2, tau=1, radius=(0.3, 0.5), dtype="float64", device=device,
                     edge=333)
    assert _hist_eq(r.diagonal_hist, pr.diagonal_frequency_distribution)
    assert _hist_eq(r.vertical_hist, pr.vertical_frequency_distribution)
    assert _hist_eq(r.white_hist, pr.white_vertical_frequency_distribution)
    assert r.n_recurrences == int(pr.number_of_recurrence_points)
