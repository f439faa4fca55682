"""float32 RQA decides every cell as dtype="float64" does (EXACT, pyedmcl.rqa.exact): on
grid data (values on a 0.1 or 0.01 grid, integers, far from zero; the radius a grid
multiple, so that many distances equal it) the float32 histograms equal the float64 ones
bit for bit -- auto-, cross- and joint RQA, windows, FAN's per-column thresholds,
recurrence networks and plots, several backends -- on every platform present, and every
rqa_lines variant on Intel's runtime. The unchecked float32 kernels (EXACT=0) differ on
the same data, so each comparison can fail."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from conftest import FAST_BUILD_CPU, TEST_DEVICES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rqa_bands import two_backends

import clkernels
import pyedmcl as pe
from pyedmcl._precision import PrecisionWarning
from pyedmcl.kernels.rqa_lines import LineSpec
from pyedmcl.rqa import multi
from pyedmcl.rqa.dnr import detect_lines
from pyedmcl.rqa.exact import make_exact, unchecked
from pyedmcl.rqa.threshold import kernel_threshold

PROPS = settings(max_examples=15, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
FEW = settings(PROPS, max_examples=6)

#: kernel shapes the property tests draw from (each built once): (E, tau, metric, rule)
SHAPES = [(2, 1, "euclidean", "distance"), (3, 2, "maximum", "distance"),
          (2, 2, "manhattan", "distance"), (3, 1, "euclidean", "squared")]


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


@st.composite
def grid_series(draw, n_min: int = 200, n_max: int = 320):
    """(series, grid, radius): a random walk on a grid (0.1, 0.01, integers, or a 0.1 grid
    of mixed scales: calm and wild stretches), offset from zero, and a radius that is a
    grid multiple."""
    kind = draw(st.sampled_from(["0.1", "0.01", "int", "mixed"]))
    n = draw(st.integers(n_min, n_max))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    offset = draw(st.sampled_from([0.0, 3.7, -250.0, 1000.0]))
    g = {"0.1": 0.1, "0.01": 0.01, "int": 1.0, "mixed": 0.1}[kind]
    sd = {"0.1": 0.3, "0.01": 0.03, "int": 2.0, "mixed": 0.3}[kind]
    steps = rng.normal(0.0, sd, n)
    if kind == "mixed":
        steps[n // 3: 2 * n // 3] *= 30.0
    x = np.round((offset + np.cumsum(steps)) / g) * g
    k = draw(st.integers(1, 4)) * (5 if kind == "0.01" else 1)
    return x, g, k * g


@pytest.mark.parametrize("device", TEST_DEVICES)
@PROPS
@given(data=grid_series(), shape=st.sampled_from(SHAPES), which=st.sampled_from(
    ["rqa", "cross", "joint"]))
def test_float32_equals_float64(device, data, shape, which):
    x, g, r = data
    E, tau, metric, rule = shape
    y = np.round((x[::-1][: len(x) - 17] + 2 * g) / g) * g
    kw = dict(E=E, tau=tau, metric=metric, threshold_rule=rule, device=device)
    if which == "rqa":
        def run(dt):
            return pe.rqa(x, radius=r, dtype=dt, **kw)
    elif which == "cross":
        def run(dt):
            return pe.cross_rqa(x, y, radius=r, dtype=dt, **kw)
    else:
        z = np.round((x[::-1] * 0.5) / g) * g

        def run(dt):
            return pe.joint_rqa(x, z, radius=(r, 2 * r), dtype=dt, **kw)
    assert _same(_hists(run("float32")), _hists(run("float64")))


#: every rqa_lines path, on Intel's runtime: the CPU default (lane walk), scalar and
#: vector cells without bit words, 32-row words, shared words, PACK with unrolled and
#: rolled halves, the GPU default (planes, chunked row walk) and DMAJ (shuffles via
#: local memory)
_GPU = {"VEC": 1, "WG": 32, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1, "WALK": 1,
        "UNR": 1, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": 0, "DPAIR": 0}
VARIANTS = {
    "default": None,
    "vec4-bits0": {"VEC": 4, "WG": 4, "EDGE": 64, "BITS": 0},
    "vec1-bits0": {"VEC": 1, "WG": 8, "EDGE": 70, "BITS": 0},
    "vec8-bits1": {"VEC": 8, "WG": 4, "EDGE": 96, "BITS": 1, "PH": 32, "WALK": 1},
    "vec2-share": {"VEC": 2, "WG": 4, "EDGE": 64, "BITS": 2, "PH": 32, "SHARE": 1, "WALK": 1},
    "pack-unr": {"VEC": 1, "WG": 16, "EDGE": 98, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0,
                 "WALK": 1, "UNR": 1, "PACK": 1, "PLANES": 1},
    "pack-rolled": {"VEC": 1, "WG": 32, "EDGE": 130, "BITS": 2, "PH": 0, "SHARE": 0, "SYM": 0,
                    "WALK": 1, "UNR": 0, "PACK": 1},
    "gpu-hch": _GPU,
    "dmaj-shfl2": dict(_GPU, SHFL=2, DPAIR=1, DMAJ=1),
}


@pytest.mark.skipif(FAST_BUILD_CPU != "intel", reason="Intel's CPU runtime is not present")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant(name):
    """Auto-RQA (three metrics, the fma rule, the Theiler band in the matrix, column order)
    and joint RQA on quantized data: float32 equals float64; the unchecked float32
    kernels differ somewhere (the data do test the redo: the unchecked kernels are run
    until one case differs). Every case on the default path, two on each other variant."""
    p = VARIANTS[name]
    rng = np.random.default_rng(5)
    q = np.round(rng.normal(0, 1, 300), 1)
    q2 = np.round(np.cumsum(rng.normal(0, 0.3, 300)), 1)
    cases = [
        lambda **k: pe.rqa(q, E=2, radius=0.2, **k),
        lambda **k: pe.rqa(q2, E=3, tau=2, radius=0.3, metric="maximum", **k),
        lambda **k: pe.rqa(q2, E=3, radius=0.4, metric="manhattan", **k),
        lambda **k: pe.rqa(q2, E=2, radius=0.2, threshold_rule="squared", theiler=3,
                           theiler_scope="matrix", **k),
        lambda **k: pe.cross_rqa(q, q2[:250] + 3, E=2, radius=0.2, **k),
        lambda **k: pe.joint_rqa(q, q2, E=2, radius=(0.2, 0.3), **k),
    ]
    if name != "default":  # every case on the default path; two on each other variant,
        # each case on two of them (each case builds programs of its own: decision 0172)
        k = list(VARIANTS).index(name)
        cases = [cases[k % 6], cases[(k + 3) % 6]]
    differ = 0
    for i, f in enumerate(cases):
        orders = ("row", "column") if name == "default" and i == 0 else ("row",)
        for order in orders:
            kw = dict(device="intel", params=p, order=order)
            want = _hists(f(dtype="float64", **kw))
            assert _same(_hists(f(dtype="float32", **kw)), want), (name, i, order)
            if not differ:
                with unchecked():
                    differ += not _same(_hists(f(dtype="float32", **kw)), want)
    assert differ > 0


@pytest.mark.skipif(FAST_BUILD_CPU != "intel", reason="Intel's CPU runtime is not present")
@pytest.mark.parametrize("name", ["default", "pack-unr", "dmaj-shfl2"])
def test_per_half_flags(name, monkeypatch):
    """EXACT=2 (the GPUs' kernels: one near flag per 32-row half; a flagged half redone
    whole, or in DMAJ its near cells found again and redone) on the CPU: the same
    histograms as float64."""
    import pyedmcl.kernels.rqa_lines as K

    monkeypatch.setitem(K.EXACT_KERNEL, "cpu", 2)
    rng = np.random.default_rng(6)
    q = np.round(np.cumsum(rng.normal(0, 0.3, 300)), 1)
    for f in (lambda **k: pe.rqa(q, E=2, radius=0.2, **k),
              lambda **k: pe.rqa(q, E=3, tau=2, radius=0.5, metric="manhattan", **k),
              lambda **k: pe.joint_rqa(q, q[::-1].copy(), E=2, radius=(0.2, 0.3), **k)):
        kw = dict(device="intel", params=VARIANTS[name])
        assert _same(_hists(f(dtype="float32", **kw)), _hists(f(dtype="float64", **kw)))


@pytest.mark.parametrize("device", TEST_DEVICES)
@FEW
@given(data=grid_series(300, 420), shape=st.sampled_from(SHAPES[:2]))
def test_windowed_equals_float64(device, data, shape):
    x, _, r = data
    E, tau, metric, rule = shape
    kw = dict(E=E, tau=tau, radius=r, metric=metric, threshold_rule=rule, window=120,
              step=40, device=device)
    a, b = pe.rqa(x, dtype="float32", **kw), pe.rqa(x, dtype="float64", **kw)
    cols = [c for c in a.columns if c != "dtype"]
    assert a[cols].equals(b[cols])


@pytest.mark.parametrize("device", TEST_DEVICES)
@FEW
@given(data=grid_series(), shape=st.sampled_from(SHAPES[:3]))
def test_networks_and_plots_equal_float64(device, data, shape):
    x, _, r = data
    E, tau, metric, rule = shape
    kw = dict(E=E, tau=tau, radius=r, metric=metric, threshold_rule=rule, device=device)
    a = pe.recurrence_network(x, dtype="float32", **kw)
    b = pe.recurrence_network(x, dtype="float64", **kw)
    assert np.array_equal(a.degree, b.degree) and a.transitivity == b.transitivity
    kw.pop("threshold_rule")
    assert np.array_equal(pe.recurrence_plot(x, dtype="float32", size=128, **kw),
                          pe.recurrence_plot(x, dtype="float64", size=128, **kw))


@pytest.mark.parametrize("device", TEST_DEVICES)
@FEW
@given(data=grid_series(), shape=st.sampled_from(SHAPES[:2]))
def test_per_column_thresholds_equal_float64(device, data, shape):
    """FAN's kernel interface (PERCOL): fixed per-column radii on the grid, float32 with
    the float64 thresholds and bounds equals the float64 run."""
    x, g, r = data
    E, tau, metric, _ = shape
    n = x.size - (E - 1) * tau
    radii = r * (1 + np.arange(n) % 3)
    t64 = np.array([kernel_threshold(v, metric, np.float64) for v in radii])
    t32 = np.array([kernel_threshold(v, metric, np.float32) for v in radii], dtype=np.float32)
    be = clkernels.get_backend(device)
    z = (x - x.mean()).astype(np.float32)
    ranges = [(-(n - 1), -0), (1, n)]
    out = []
    for dt in (np.float32, np.float64):
        real = "float" if dt == np.float32 else "double"
        spec = LineSpec(E, tau, metric, real, percol=True, exact=dt == np.float32)
        ex = make_exact(x, x, z, z, 0.0, 0.0, metric, E, tcol=(t64, t32)) if spec.exact \
            else None
        s = z if dt == np.float32 else x
        h = detect_lines([be], s, s, 0.0, spec=spec, n_rows=n, n_cols=n, diag_ranges=ranges,
                         tcol=t32 if dt == np.float32 else t64, exact=ex)
        out.append((h.diagonal, h.vertical, h.white, h.n_recurrences))
    assert _same(*out)


@pytest.mark.parametrize("split", ["lanes", "rows"])
def test_several_backends(split, monkeypatch):
    """Two backends (lane bands, row ranges with their walk-ups): float32 equals float64."""
    monkeypatch.setattr(multi, "SPLIT", split)
    bes = two_backends(FAST_BUILD_CPU)
    rng = np.random.default_rng(9)
    q = np.round(np.cumsum(rng.normal(0, 0.3, 400)), 1)
    for f in (lambda dt: pe.rqa(q, E=2, radius=0.2, dtype=dt, devices=bes, edge=64),
              lambda dt: pe.joint_rqa(q, q[::-1].copy(), E=2, radius=0.3, dtype=dt,
                                      devices=bes, edge=64)):
        assert _same(_hists(f("float32")), _hists(f("float64")))


def _henon(n: int) -> np.ndarray:
    x, y, out = 0.1, 0.1, []
    for _ in range(n + 100):
        x, y = 1 - 1.4 * x * x + y, 0.3 * x
        out.append(x)
    return np.array(out[100:])


@pytest.mark.parametrize("device", TEST_DEVICES)
def test_rounded_henon_matches_the_oracles(device):
    """The rounded Henon map (0.1 grid): float32 LAM and DET equal pyunicorn's (its
    float32-held values, compared in float64; distance rule) and PyRQA's float64 run
    (squared rule, fma sums) where PyRQA runs on Intel's runtime."""
    pytest.importorskip("pyunicorn")
    from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp

    h = np.round(_henon(500), 1).astype(np.float32).astype(np.float64)
    for E, r in ((2, 0.2), (3, 0.3)):
        ours = pe.rqa(h, E=E, radius=r, device=device)
        u = pyunicorn_measures(pyunicorn_rp(h, E=E, tau=1, radius=r))
        assert ours.LAM == pytest.approx(u["LAM"], rel=1e-9)
        assert ours.DET == pytest.approx(u["DET"], rel=1e-9)
        with unchecked():  # the unchecked float32 kernels miss ties here
            assert pe.rqa(h, E=E, radius=r, device=device).LAM != pytest.approx(u["LAM"],
                                                                                rel=1e-9)
    if device != "intel":
        return
    pytest.importorskip("pyrqa")
    from pyedmcl.rqa._oracles import pyrqa_measures, pyrqa_run

    try:
        res, _ = pyrqa_run(h, E=2, tau=1, radius=0.2, theiler=1, dtype=np.float64,
                           platform="Intel")
    except Exception as exc:  # PyRQA's OpenCL setup is its own
        pytest.skip(f"PyRQA does not run on Intel's runtime here: {exc}")
    ours = pe.rqa(h, E=2, radius=0.2, threshold_rule="squared", device=device)
    assert ours.LAM == pytest.approx(pyrqa_measures(res)["LAM"], rel=1e-6)


def test_no_fp64_warns_and_runs_unchecked():
    """A device without fp64 keeps the float32 kernels unchecked and says so once."""
    be = clkernels.get_backend(FAST_BUILD_CPU)
    nofp64 = type(be)(be.info)  # a backend of its own, told that its device lacks fp64
    nofp64.info = dataclasses.replace(be.info, fp64=False)
    q = np.round(np.random.default_rng(1).normal(0, 1, 200), 1)
    import pyedmcl._precision as precision

    precision._warned_no_fp64[0] = False
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        a = pe.rqa(q, E=2, radius=0.2, devices=[nofp64])
    assert any(issubclass(w.category, PrecisionWarning) and "no fp64" in str(w.message)
               for w in got)
    with unchecked():
        b = pe.rqa(q, E=2, radius=0.2, device=FAST_BUILD_CPU)
    assert _same(_hists(a), _hists(b))
