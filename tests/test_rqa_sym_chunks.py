"""SYM with HCH > 0 (the GPU path: upper triangle only, the rows of a row block walked in
chunks of HCH 64-column tiles from 32-row planes, then joined across chunks by MODE
"hjoin") against the full-matrix path (SYM=0) and the NumPy oracle: the same histograms,
bit for bit, on every platform present (the first shape; every shape on GPUs and the CPU
runtime that builds fastest: conftest.device_cases)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GpuInfo, assert_rqa_matches_oracle, device_cases, rqa_template_params

import pyedmcl as pe
from pyedmcl.rqa._oracles import numpy_reference

#: the GPU default's shape (OVL: the walks and joins in a second queue) in small row
#: blocks, so that a few hundred points make several blocks, planes and chunks
GPU = {"VEC": 1, "WG": 32, "EDGE": 512, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1,
       "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": 0, "SHFL": 0, "DPAIR": 0}
#: (HCH, EDGE, WALK): chunks of 8 tiles (512 columns: rows cross chunk edges, whole
#: chunks one run), 16, and 32 (one chunk a row at this size); row blocks of 96 rows
#: (three planes), of 200 (not a multiple of 32 rows); the transition walk
VARIANTS = [(8, 512, 1), (16, 512, 1), (32, 96, 1), (32, 512, 1), (8, 200, 0)]


Gpu = GpuInfo


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _series() -> dict[str, np.ndarray]:
    """Chaotic data, the same quantized (many distances exactly at the radius) and a
    longer series with laminar stretches: rows in the flat at 0.5 are black across the
    flat columns 600..1299 (whole 512-column chunks one black run), rows in the flat at
    0.05 white across them (whole chunks one white run)."""
    from pyedmcl.data import logistic_map

    x = logistic_map(700, r=3.9, x0=0.4, burn=0)
    flat = logistic_map(1400, r=3.9, x0=0.3, burn=0)
    flat[100:260] = 0.5
    flat[300:340] = 0.05
    flat[600:1300] = 0.5
    return {"chaotic": x, "quantized": np.round(x * 8) / 8, "laminar": flat}


@pytest.mark.parametrize(("device", "hch", "edge", "walk"), device_cases(
    VARIANTS, [f"hch{h}-edge{e}-walk{w}" for h, e, w in VARIANTS], gpu_paths=True))
def test_chunked_rows_identical(device, hch, edge, walk):
    """Auto-RQA in both precisions, three metrics, Theiler windows in the line ranges and
    in the matrix, white lines touching the borders dropped: SYM with chunked rows equals
    the full matrix (SYM=0); joint RQA (symmetric) too; and the run took SYM."""
    plain = dict(GPU, EDGE=edge, WALK=walk)
    sym = dict(plain, SYM=1, HCH=hch)
    cases = [
        dict(E=2, tau=1, radius=0.2, metric="euclidean"),
        dict(E=3, tau=2, radius=0.25, metric="maximum", theiler=4, dtype="float64"),
        dict(E=1, tau=1, radius=0.125, metric="manhattan", theiler=3, theiler_scope="matrix",
             white_border=False),
    ]
    for name, s in _series().items():
        for kw in cases:
            a = pe.rqa(s, device=device, params=sym, **kw)
            assert a.settings.get("symmetric"), (name, kw)
            assert _same(_hists(a), _hists(pe.rqa(s, device=device, params=plain, **kw))), (name, kw)
    x, y = _series()["chaotic"], np.sin(np.arange(700) * 0.31)
    j = [_hists(pe.joint_rqa(x, y, E=2, radius=0.3, device=device, params=p)) for p in (plain, sym)]
    assert _same(*j)


def test_chunked_rows_oracle(device):
    """The float64 oracle (pyunicorn's counting of the full matrix) on quantized data."""
    q = _series()["quantized"]
    ref = numpy_reference(q, None, E=3, tau=2, radius=0.25, metric="euclidean", theiler=1)
    res = pe.rqa(q, E=3, tau=2, radius=0.25, dtype="float64", device=device,
                 params=dict(GPU, SYM=1, HCH=16))
    assert res.settings.get("symmetric")
    assert_rqa_matches_oracle(res, ref)


def test_chunked_rows_32bit_split(device, monkeypatch):
    """Horizontal launches split by planes where a launch's cells could pass 2^31 (here a
    lowered limit): the same histograms as one launch per row block."""
    import importlib

    dnr = importlib.import_module("pyedmcl.rqa.dnr")
    x = _series()["laminar"]
    p = dict(GPU, SYM=1, HCH=8)
    one = _hists(pe.rqa(x, E=2, radius=0.2, device=device, params=p))
    monkeypatch.setattr(dnr, "_U32_SAFE", 40_000)   # a few planes per launch
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 40_000)
    assert _same(_hists(pe.rqa(x, E=2, radius=0.2, device=device, params=p)), one)


def test_chunked_rows_oclgrind_clean():
    """No out-of-bounds access, race or uninitialised read (an unoptimised build:
    conftest.run_under_oclgrind) in the chunked walk and the join (ragged last
    block, a row starting in a chunk's second tile, full chunks; HCH 8, and 32 as on
    GPUs, whose second round of tiles lies past the columns: the coalesced staging of a
    round's words skips them)."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(230) * 0.37) + 0.1 * np.cos(np.arange(230) * 1.3)
        x[60:140] = 0.2
        for hch in (8, 32):
            p = {"VEC": 1, "WG": 32, "EDGE": 96, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
                 "WALK": 1, "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": hch,
                 "SHFL": 0, "DPAIR": 0}
            a = pe.rqa(x, E=2, tau=2, radius=0.3, params=p)
            print(a.n_recurrences, a.settings.get("symmetric"))
    """, unoptimised=True)
    got = [ln.split() for ln in out.strip().splitlines()[-2:]]
    assert [g[1] for g in got] == ["True", "True"] and got[0][0] == got[1][0], out


def test_chunked_rows_constraints():
    """HCH needs SYM and the 32-row planes; the join needs HCH; the host asks for the
    chunked walk only where it applies, and GPUs tune SYM only with it."""
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import RQA_LINES, _fits, _gpu_unfit, _hch, _wg

    base = rqa_template_params(MODE="horizontal", SHARE=1, SYM=1, WALK=1, PACK=1, PLANES=1,
                                HCH=8)
    assert "transpose32" in render(RQA_LINES.template, base)
    assert "hhead[i] = a;" in render(RQA_LINES.template, dict(base, MODE="hjoin"))
    for bad, msg in (({"SYM": 0}, "needs SYM=1"), ({"PLANES": 0}, "HCH > 0 needs"),
                     ({"HCH": 0}, "PLANES=1 needs HCH")):
        with pytest.raises(ValueError, match=msg):
            render(RQA_LINES.template, dict(base, **bad))
    with pytest.raises(ValueError, match="HCH must be 2, 4, 8, 16 or 32"):
        render(RQA_LINES.template, dict(base, HCH=1))   # two rounds of HCH / 2 tiles
    with pytest.raises(ValueError, match="hjoin needs HCH"):
        render(RQA_LINES.template, dict(base, MODE="hjoin", HCH=0, PLANES=0))

    p = {"VEC": 1, "WG": 128, "EDGE": 4096, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
         "WALK": 1, "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": 16, "SHFL": 0, "DPAIR": 0}
    assert _hch(p, Gpu, "horizontal") == 16 and _hch(p, Gpu, "hjoin") == 16
    assert _hch(p, Gpu, "vertical") == 0 and _hch(dict(p, SYM=0), Gpu, "horizontal") == 0
    assert _hch(dict(p, PLANES=0), Gpu, "horizontal") == 0
    # an HCH the work-group cannot hold (tuned WG 8 beside HCH 16): the whole-row walk
    assert _hch(dict(p, WG=8), Gpu, "horizontal") == 0 and _wg("horizontal", dict(p, WG=8), Gpu) == 1
    assert _wg("horizontal", p, Gpu) == 128
    assert _fits(p, Gpu) and not _gpu_unfit(p, Gpu)
    assert not _fits(dict(p, WG=8), Gpu) and _gpu_unfit(dict(p, WG=8), Gpu)  # whole rows
    assert _gpu_unfit(dict(p, HCH=0, PLANES=0), Gpu)      # the whole-row walk
    assert not _fits(dict(p, PLANES=0), Gpu)


def test_gpu_default_takes_sym_where_the_tiles_fit():
    """The GPU heuristic walks the upper triangle only (SYM with HCH 32); a GPU whose local
    memory cannot hold a work-group's row tiles beside the histograms gets SYM off (a
    heuristic outside the tuning space would be replaced by the space's first point)."""
    from pyedmcl.kernels.rqa_lines import RQA_LINES, _fits

    small = type("SmallGpu", (Gpu,), {"local_mem_bytes": 16 * 1024})
    big = RQA_LINES.space.heuristic(Gpu)
    assert big["SYM"] == 1 and big["HCH"] == 32 and _fits(big, Gpu)
    p = RQA_LINES.space.heuristic(small)
    assert p["SYM"] == 0 and p["HCH"] == 0 and _fits(p, small)


def test_partial_params_named_in_the_error():
    """``params`` is a point of the tuning space: one lacking VEC, WG or EDGE is refused
    with the names, not a KeyError from deep inside."""
    x = _series()["chaotic"]
    with pytest.raises(ValueError, match="params lacks VEC, WG, EDGE"):
        pe.rqa(x, E=2, radius=0.2, params={"SYM": 0})


@pytest.mark.parametrize(("bad", "match"), [
    ({"VEC": 3}, "VEC=3 is not allowed; VEC takes 1, 2, 4, 8, 16"),
    ({"HCH": 64}, "HCH=64 is not allowed"),
    ({"WG": 5}, "WG=5 is not allowed"),
    ({"OVL": 5}, "OVL=5 is not allowed"),
    ({"FOO": 1}, "unknown name"),
    ({"SYM": True}, "SYM=True has type bool"),
    ({"EDGE": 0}, "EDGE=0 must be a positive integer"),
    ({"EDGE": 2.5}, "EDGE=2.5 must be a positive integer"),
])
def test_params_outside_the_space_refused(bad, match):
    """A value the tuning space does not hold is refused, naming the parameter and what it
    takes: VEC 3 built a kernel that counted wrong histograms without a word. EDGE shapes
    no kernel: any positive integer runs (the same histograms as the tuned edge)."""
    x = _series()["chaotic"]
    base = {"VEC": 1, "WG": 32, "EDGE": 512, "BITS": 2, "SHARE": 1}
    with pytest.raises(ValueError, match=match):
        pe.rqa(x, E=2, radius=0.2, params={**base, **bad})
    with pytest.raises(ValueError, match="must be a dict"):
        pe.rqa(x, E=2, radius=0.2, params=[("VEC", 1)])
    ref = pe.rqa(x, E=2, radius=0.2, params=base)
    odd = pe.rqa(x, E=2, radius=0.2, params={**base, "EDGE": 100, "VEC": np.int64(1)})
    for k in ("diagonal_hist", "vertical_hist", "white_hist"):
        np.testing.assert_array_equal(getattr(odd, k), getattr(ref, k))
