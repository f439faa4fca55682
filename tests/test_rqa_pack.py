"""The GPU defaults' word layouts against the plain ones and the NumPy full-matrix oracle:
PACK=1 (a cell's bit from the sign of d - thr, rows shifted in last to first, aligned
full halves read by 16-byte loads) and PLANES=1 (column words stored as two 32-bit
planes, diagonals gathered from the half holding their bit). The same histograms, bit
for bit, on every platform present."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_rqa_matches_oracle, device_cases, first_case_only, rqa_template_params

import pyedmcl as pe
from pyedmcl.kernels.rqa_lines import RQA_LINES, SERIES_PAD
from pyedmcl.rqa._oracles import numpy_reference

#: VEC 1 layouts that pack bits: the GPU default (SHARE, unrolled halves), row blocks of
#: 98 rows (every other block starts off the 16-byte grid: the unaligned full halves;
#: diagonals from planes of ragged last words), 32-row words, and the unshared diagonals
#: (their cells packed too); VARIANT: the values tried against PACK=0, PLANES=0
LAYOUTS = [
    {"VEC": 1, "WG": 128, "EDGE": 4096, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1,
     "UNR": 1},
    {"VEC": 1, "WG": 16, "EDGE": 98, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1,
     "UNR": 1},
    {"VEC": 1, "WG": 8, "EDGE": 100, "BITS": 1, "PH": 0, "SHARE": 0, "SYM": 0, "WALK": 0,
     "UNR": 1},
    {"VEC": 1, "WG": 32, "EDGE": 130, "BITS": 2, "PH": 0, "SHARE": 0, "SYM": 0, "WALK": 1,
     "UNR": 0},
]
IDS = ["gpu", "unaligned-blocks", "bits1-unshared", "rolled-unshared"]
VARIANT = [{"PACK": 1, "PLANES": 1}, {"PACK": 1, "PLANES": 1}, {"PACK": 1}, {"PACK": 1}]


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _both(fn, p, v, **kw):
    """fn's histograms with PACK 0, PLANES 0 and with the variant v (which found some
    recurrences)."""
    a, b = (_hists(fn(params=dict(p, **w), **kw)) for w in ({"PACK": 0, "PLANES": 0}, v))
    assert b[3] > 0
    return a, b


@pytest.mark.parametrize(("device", "p", "v"), device_cases(
    list(zip(LAYOUTS, VARIANT, strict=True)), IDS, gpu_paths=True))
def test_pack_identical(device, p, v):
    """Auto-RQA in both precisions and three metrics (quantized data: many cells exactly at
    the radius), the Theiler band in the matrix, PyRQA's fma rule, cross- and joint RQA,
    and FAN's per-column thresholds: the variant equals the plain layout; auto-RQA equals
    the oracle."""
    from pyedmcl.data import logistic_map

    x = logistic_map(333, r=3.9, x0=0.4, burn=0)
    q = np.round(x * 8) / 8  # ties: distances equal to the radius
    y = np.sin(np.arange(301) * 0.31)
    cases = [
        dict(E=3, tau=2, radius=0.2, metric="euclidean"),
        dict(E=3, tau=2, radius=0.25, metric="euclidean", dtype="float64"),
        dict(E=2, tau=1, radius=0.25, metric="maximum", theiler=3, theiler_scope="matrix",
             white_border=False),
        dict(E=4, tau=3, radius=0.5, metric="manhattan"),
        dict(E=3, tau=2, radius=0.2, metric="euclidean", threshold_rule="squared"),
        dict(E=2, tau=2, metric="euclidean", neighbourhood="fan", knn=17),
    ]
    if first_case_only(device):  # PoCL beside Intel's runtime: the first case (and the
        cases = cases[:1]         # oracle, cross- and joint RQA below)
    for kw in cases:
        for s in (x, q):
            a, b = _both(lambda s=s, **k: pe.rqa(s, device=device, **k), p, v, **kw)
            assert _same(a, b), kw
    ref = numpy_reference(q, None, E=3, tau=2, radius=0.25, metric="euclidean", theiler=1)
    res = pe.rqa(q, E=3, tau=2, radius=0.25, dtype="float64", device=device,
                 params=dict(p, **v))
    assert_rqa_matches_oracle(res, ref)
    assert _same(*_both(lambda **k: pe.cross_rqa(x, y, E=2, tau=3, radius=0.3,
                                                 device=device, **k), p, v))
    assert _same(*_both(lambda **k: pe.joint_rqa(x[:300], y[:300], E=2, radius=0.3,
                                                 device=device, **k), p, v))


def test_pack_needs_finite_thresholds():
    """A radius so large that the squared threshold overflows float32 (inf): the run
    takes the compare (PACK 0), and every cell is recurrent, as the oracle says."""
    from pyedmcl.rqa import dnr

    x = np.linspace(-1.0, 1.0, 120)
    seen = []
    orig = dnr._device_state

    def spy(*a, **k):
        st = orig(*a, **k)
        seen.append(st.params.get("PACK"))
        return st

    p = dict(LAYOUTS[0], PACK=1)
    try:
        dnr._device_state = spy
        res = pe.rqa(x, E=2, radius=1e20, params=p)
    finally:
        dnr._device_state = orig
    assert seen == [0]
    n = x.size - 1
    assert res.n_recurrences == n * n


def test_pack_template_constraints():
    """PACK needs bit words and one lane per work-item: the template refuses other
    layouts and the tuning space never proposes them."""
    from clkernels.devices import DeviceInfo  # noqa: F401  (the constraint's argument type)
    from clkernels.templates import render

    base = rqa_template_params(VEC=2, WG=4, PACK=1)
    with pytest.raises(ValueError, match="PACK=1 needs"):
        render(RQA_LINES.template, base)
    with pytest.raises(ValueError, match="PACK=1 needs"):
        render(RQA_LINES.template, dict(base, VEC=1, BITS=0))
    assert "bits = (bits << 1) | rec;" in render(RQA_LINES.template, dict(base, VEC=1))


def test_planes_template_constraints():
    """PLANES needs the shared words of one lane per work-item, and with SYM the chunked
    horizontal walk: the template refuses other layouts; the host asks for it only where
    it applies."""
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import _planes

    base = rqa_template_params(MODE="diagonal", WG=4, SHARE=1, WALK=1, PLANES=1)
    assert "__global uint* restrict sbits" in render(RQA_LINES.template, base)
    for bad in ({"SHARE": 0}, {"VEC": 2}, {"SYM": 1, "MODE": "horizontal"}):
        with pytest.raises(ValueError, match="PLANES=1 needs"):
            render(RQA_LINES.template, dict(base, **bad))

    class Info:
        is_gpu = True
        runtime = "nvidia"

    p = {"VEC": 1, "WG": 128, "BITS": 2, "SHARE": 1, "SYM": 0, "WALK": 1, "PLANES": 1}
    assert _planes(p, Info, 128)
    assert not _planes(dict(p, SYM=1), Info, 128)          # SYM's whole-row walk reads words
    assert _planes(dict(p, SYM=1, HCH=16), Info, 128)      # its chunked walk reads planes
    assert not _planes(dict(p, SYM=1, HCH=16, WG=8), Info, 8)   # HCH must divide WG
    assert not _planes(dict(p, VEC=2), Info, 128)
    assert not _planes(dict(p, SHARE=0), Info, 128)
    assert not _planes(dict(p, VEC=16, PH=128, WALK=3), Info, 4)


@pytest.mark.parametrize("vec", [1, 16])
@pytest.mark.parametrize("share", ["auto", "cross", "no-device-copy"])
def test_series_layout(device, vec, share):
    """The kernels' series buffers: y (and y2, tcol) padded by VEC zeros on the left and
    max(VEC, SERIES_PAD) on the right, x (x2) followed by SERIES_PAD zeros. Auto- and joint
    RQA's row series (``x is y``) is copied on the device from the padded column series, the same values
    as an upload; a backend without device copies uploads it."""
    import clkernels
    from pyedmcl.kernels.rqa_lines import LineSpec

    x = np.sin(np.arange(301) * 0.7)
    y = x if share != "cross" else np.cos(np.arange(211) * 0.3)
    tcol = np.linspace(0.1, 0.2, len(y))
    spec = LineSpec(2, 1, "euclidean", "float", joint=True, percol=True)
    be = _Copies(clkernels.get_backend(device), share != "no-device-copy")
    out = RQA_LINES.series(be, {"VEC": vec}, spec, x, y, x, y, tcol)
    xd, yd, x2d, y2d, td = (np.asarray(be.to_host(a)) for a in out)
    f = np.float32
    want_y = np.concatenate([np.zeros(vec, f), y.astype(f), np.zeros(max(vec, SERIES_PAD), f)])
    want_x = np.concatenate([x.astype(f), np.zeros(SERIES_PAD, f)])
    assert np.array_equal(yd, want_y) and np.array_equal(y2d, want_y)
    assert np.array_equal(xd, want_x) and np.array_equal(x2d, want_x)
    assert np.array_equal(td, np.concatenate([np.zeros(vec, f), tcol.astype(f),
                                              np.zeros(max(vec, SERIES_PAD), f)]))
    assert be.copies == (2 if share == "auto" else 0)  # x and x2 copied on the device


class _Copies:
    """A backend that counts its device copies, or has none (``copy=False``)."""

    def __init__(self, be, copy: bool):
        self.be, self.copy, self.copies = be, copy, 0

    def __getattr__(self, name):
        return getattr(self.be, name)

    def copy_within(self, *args):
        if not self.copy:
            raise NotImplementedError
        self.copies += 1
        return self.be.copy_within(*args)
