"""FUSE (pyedmcl.rqa.fused, decision 0120): auto-RQA's cells and all three walks in one
kernel, each tile's lane segments joined after it, on every platform present, against the
column-major path's histograms (which the other tests hold to pyunicorn and PyRQA)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import GpuInfo, rqa_template_params

import pyedmcl as pe
from pyedmcl.data import logistic_map, roessler

#: the column-major row path (SYM, whole-row walks) of small row blocks
PLAIN = {"VEC": 1, "WG": 32, "EDGE": 128, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
         "WALK": 1}


def _laminar() -> np.ndarray:
    """Chaotic data with flat stretches: runs across many tiles, whole segments of one
    colour."""
    x = logistic_map(900, r=3.9, x0=0.3, burn=0)
    x[100:260] = 0.5
    x[300:340] = 0.05
    x[600:800] = 0.5
    return x


def _hists(r) -> tuple:
    return (np.trim_zeros(np.asarray(r.diagonal_hist, np.int64), "b"),
            np.trim_zeros(np.asarray(r.vertical_hist, np.int64), "b"),
            np.trim_zeros(np.asarray(r.white_hist, np.int64), "b"), r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _taken(monkeypatch) -> list[bool]:
    """Records, per detect_lines call, whether the fused path ran."""
    fused = importlib.import_module("pyedmcl.rqa.fused")
    taken: list[bool] = []
    orig = fused.applies

    def spy(*a, **k):
        p = orig(*a, **k)
        taken.append(p is not None)
        return p
    monkeypatch.setattr(fused, "applies", spy)
    return taken


CASES = [
    ("roessler", lambda: roessler(700), dict(E=3, tau=6, recurrence_rate=0.05)),
    ("logistic", lambda: logistic_map(500, r=3.9, x0=0.4, burn=0), dict(E=2, tau=1, radius=0.2)),
    ("laminar", _laminar, dict(E=2, tau=2, radius=0.1)),
    ("laminar-no-white-border", _laminar, dict(E=2, tau=2, radius=0.1, white_border=False)),
    ("theiler-0", lambda: roessler(400), dict(E=3, tau=6, radius=2.0, theiler=0)),
    ("quantized-maximum-float64", lambda: np.round(logistic_map(600, r=3.9, x0=0.4) * 8) / 8,
     dict(E=3, tau=2, radius=0.25, metric="maximum", dtype="float64")),
    ("E1-manhattan", _laminar, dict(E=1, radius=0.125, metric="manhattan")),
    ("span-32", lambda: roessler(500), dict(E=5, tau=8, radius=2.0)),
]


@pytest.mark.parametrize(("name", "series", "kw"), CASES, ids=[c[0] for c in CASES])
def test_fused_identical(device, name, series, kw, monkeypatch):
    """Chaotic, laminar and quantized data, three metrics, both precisions, E = 1 (no
    carried terms) to (E - 1) tau = 32, white lines at the border dropped, a Theiler
    window of 0 and 1: the column-major histograms and recurrences, for tiles of one warp's
    32 x 32 cells to several groups, ranges and bands a launch."""
    taken = _taken(monkeypatch)
    x = series()
    want = _hists(pe.rqa(x, device=device, params=PLAIN, **kw))
    for fr, fkw, wg in ((32, 32, 32), (64, 96, 32), (128, 256, 64)):
        taken.clear()
        got = _hists(pe.rqa(x, device=device, params=dict(PLAIN, WG=wg, FUSE=1, FR=fr, FKW=fkw),
                            **kw))
        assert taken and all(taken), (fr, fkw, wg)
        assert _same(got, want), (fr, fkw, wg)


def test_fused_folds(device, monkeypatch):
    """A lowered 32-bit budget: several bands a launch only, the histograms folded between
    launches (each launch's cells and the joins' counts below the budget)."""
    dnr = importlib.import_module("pyedmcl.rqa.dnr")
    x = roessler(300)
    want = _hists(pe.rqa(x, E=3, tau=6, recurrence_rate=0.1, device=device, params=PLAIN))
    folds: list[int] = []
    orig = dnr._fold
    monkeypatch.setattr(dnr, "_fold", lambda *a, **k: (folds.append(1), orig(*a, **k))[1])
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 20_000)
    got = _hists(pe.rqa(x, E=3, tau=6, recurrence_rate=0.1, device=device,
                        params=dict(PLAIN, FUSE=1, FR=32, FKW=64)))
    assert len(folds) > 3
    assert _same(got, want)


def test_fused_refused(device, monkeypatch):
    """Where the fused path cannot compute the matrix (a Theiler band wider than the main
    diagonal, (E - 1) tau above 32, joint RQA, cross-RQA) the run takes the others: the
    same histograms."""
    taken = _taken(monkeypatch)
    x = logistic_map(400, r=3.9, x0=0.4, burn=0)
    runs = [
        lambda p: pe.rqa(x, E=3, tau=2, radius=0.25, theiler=3, device=device, params=p),
        lambda p: pe.rqa(roessler(500), E=6, tau=7, radius=2.0, device=device, params=p),
        lambda p: pe.joint_rqa(x, x[::-1].copy(), E=2, radius=0.3, device=device, params=p),
        lambda p: pe.cross_rqa(x, x[::-1].copy(), E=2, radius=0.3, device=device, params=p),
    ]
    for i, run in enumerate(runs):
        want = _hists(run(PLAIN))
        taken.clear()
        got = _hists(run(dict(PLAIN, FUSE=1, FR=32, FKW=64)))
        assert not any(taken), i
        assert _same(got, want), i


def test_fused_params():
    """FUSE is taken from explicit parameters (the tuner does not try it yet), FR and FKW
    take multiples of 32 beyond the tuner's one value each, a work-group takes whole warps
    and its local memory must fit; the template refuses MODE fused off its path."""
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec, _fits

    p = RQA_LINES.check_params(dict(PLAIN, FUSE=1, FR=64, FKW=96))
    assert p["FUSE"] == 1 and p["FR"] == 64
    assert RQA_LINES.space.params["FUSE"] == (0,)
    with pytest.raises(ValueError, match="FR=48 is not allowed"):
        RQA_LINES.check_params(dict(PLAIN, FUSE=1, FR=48))
    gpu = dict(PLAIN, SYM=0, FUSE=1)   # (SYM's whole-row walk is unfit for GPUs)
    assert _fits(dict(gpu, WG=128), GpuInfo)
    assert not _fits(dict(gpu, WG=16), GpuInfo)
    assert not _fits(dict(gpu, WG=1024, FR=1024), GpuInfo)   # local memory
    spec = LineSpec(3, 6, "euclidean", "float")
    tp = spec.fused_params(dict(PLAIN, FUSE=1, FR=64, FKW=96), GpuInfo)
    assert (tp["MODE"], tp["SHFL"], tp["PACK"], tp["FR"], tp["FKW"]) == ("fused", 1, 1, 64, 96)
    assert not LineSpec(3, 6, "euclidean", "float", joint=True).takes_fused()
    assert not LineSpec(6, 7, "euclidean", "float").takes_fused()
    base = rqa_template_params(MODE="fused", SHFL=2, PACK=0, FR=64, FKW=96)
    with pytest.raises(ValueError, match="MODE fused needs PACK"):
        render(RQA_LINES.template, base)
    with pytest.raises(ValueError, match="multiples of 32"):
        render(RQA_LINES.template, dict(base, PACK=1, FR=48))


def test_fused_oclgrind_clean():
    """No out-of-bounds access or race in the fused kernel and its joins (the shuffles
    through local memory, barriers in the group loop): auto-RQA over several bands,
    ranges and launches, a ragged last band, white lines at the border dropped."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(230) * 0.37) + 0.1 * np.cos(np.arange(230) * 1.3)
        p = {"VEC": 1, "WG": 32, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
             "WALK": 1}
        q = dict(p, FUSE=1, FR=32, FKW=64)
        H = lambda r: (r.diagonal_hist.tolist(), r.vertical_hist.tolist(),
                       r.white_hist.tolist(), r.n_recurrences)
        for kw in (dict(E=3, tau=5, radius=0.5), dict(E=2, tau=2, radius=0.3, white_border=False)):
            print(H(pe.rqa(x, params=q, **kw)) == H(pe.rqa(x, params=p, **kw)))
    """, ignore_uninitialized=True)
    assert out.split() == ["True", "True"]


def test_fused_with_lane_vector_parameters(device, monkeypatch):
    """FUSE asked for beside a CPU's parameters (16 lanes a work-item, groups of 4): the
    fused launch takes one lane a work-item and whole warps (one on devices without warp
    shuffles), the same histograms."""
    taken = _taken(monkeypatch)
    x = roessler(400)
    cpu = {"VEC": 16, "WG": 4, "EDGE": 256, "BITS": 2, "PH": 128, "SHARE": 1, "SYM": 1,
           "WALK": 3}
    want = _hists(pe.rqa(x, E=3, tau=6, recurrence_rate=0.05, device=device, params=cpu))
    taken.clear()
    got = _hists(pe.rqa(x, E=3, tau=6, recurrence_rate=0.05, device=device,
                        params=dict(cpu, FUSE=1, FR=64, FKW=64)))
    assert taken == [True]
    assert _same(got, want)


@pytest.mark.parametrize("n", [2, 3, 33, 64, 97])
def test_fused_small_and_ragged(device, n, monkeypatch):
    """Matrices of a few points to a few tiles with ragged last bands and ranges, white
    lines at the border counted and dropped: the column-major histograms."""
    taken = _taken(monkeypatch)
    x = logistic_map(n + 1, r=3.9, x0=0.4, burn=0)
    for wb in (True, False):
        want = _hists(pe.rqa(x, E=2, radius=0.3, white_border=wb, device=device, params=PLAIN))
        for fr, fkw in ((32, 32), (64, 32), (32, 64)):
            taken.clear()
            got = _hists(pe.rqa(x, E=2, radius=0.3, white_border=wb, device=device,
                                params=dict(PLAIN, FUSE=1, FR=fr, FKW=fkw)))
            assert taken == [True] and _same(got, want), (wb, fr, fkw)


def test_fused_row_ranges(device, monkeypatch):
    """FUSE on row ranges: two contexts of one device and one device with ranges of a given
    height (its ranges take the carries over one after the other), each range's carries
    from the walk-ups: the one-device histograms, for chaotic data, laminar stretches
    across ranges and white lines at the border dropped."""
    from test_rqa_bands import two_backends

    core = importlib.import_module("pyedmcl.rqa.core")
    orig = core.detect_lines
    banded = lambda *a, **k: orig(*a, **{**k, "band": 96})   # noqa: E731  (ranges of 96 rows)
    bes = two_backends(device)
    q = dict(PLAIN, FUSE=1, FR=32, FKW=64)
    for x, kw in ((roessler(500), dict(E=3, tau=6, recurrence_rate=0.05)),
                  (_laminar(), dict(E=2, tau=2, radius=0.1, white_border=False))):
        want = _hists(pe.rqa(x, device=device, params=PLAIN, **kw))
        two = pe.rqa(x, devices=bes, params=q, **kw)
        assert two.settings["fused"] and _same(_hists(two), want)
        monkeypatch.setattr(core, "detect_lines", banded)
        one = pe.rqa(x, device=device, params=q, **kw)
        monkeypatch.undo()
        assert one.settings["fused"] and one.settings["device_tasks"] and _same(_hists(one), want)


def test_fused_buffers_that_do_not_fit(device, monkeypatch):
    """Where the fused path's buffers do not fit in the device's memory, the run takes the
    other paths: the same histograms."""
    fused = importlib.import_module("pyedmcl.rqa.fused")

    def no_memory(*a, **k):
        raise MemoryError("simulated: the pieces do not fit")
    x = roessler(300)
    want = _hists(pe.rqa(x, E=3, tau=6, recurrence_rate=0.05, device=device, params=PLAIN))
    monkeypatch.setattr(fused.FusedDevice, "__init__", no_memory)
    r = pe.rqa(x, E=3, tau=6, recurrence_rate=0.05, device=device,
               params=dict(PLAIN, FUSE=1, FR=32, FKW=64))
    assert not r.settings["fused"] and _same(_hists(r), want)
