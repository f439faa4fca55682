"""The GPU paths of rqa_lines, on every platform present, against the paths they replace:
the same histograms, bit for bit. Every shape on GPUs and on the CPU runtime that builds
fastest; the first shape on another CPU runtime (conftest.device_cases: CPUs never run
these paths for users).

SHFL: the diagonal launch builds its 64-row words from four column-plane loads per
work-item and a barrel shift over the 32 lanes of a warp, instead of 64 gathers per word.
SHFL=2 runs the shuffles through local memory and so checks the bit moves everywhere;
SHFL=1 (NVIDIA's shfl.sync) runs where an NVIDIA device is.

DPAIR: the diagonal walk steps from black run start to end, and every walk counts its
lines of length 1 in a register.

DMAJ: the cells computed diagonal-major by the diagonal launches (each coordinate term
once per diagonal), the column words made from them by the barrel shift, and the column
and row walks reading those words."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GpuInfo, device_cases, every_shape, first_case_only, rqa_template_params

import pyedmcl as pe
from pyedmcl.data import logistic_map

#: the GPU default's shape in small row blocks (several blocks, planes and warps at a few
#: hundred points); SYM with the chunked row walk, as the GPU default
GPU = {"VEC": 1, "WG": 32, "EDGE": 512, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1, "WALK": 1,
       "UNR": 1, "OVL": 2, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": 0, "DPAIR": 0}
#: (WG, EDGE, SYM): one warp per group; two (SHFL=2's bounds are the group's, SHFL=1's
#: the warp's); row blocks of 96 rows (not a multiple of 64) and 200; the full matrix
VARIANTS = [(32, 512, 1), (64, 512, 1), (32, 96, 1), (64, 200, 0), (128, 512, 0)]


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def _shfl_values(device: str) -> list[int]:
    return [2, 1] if device == "nvidia" else [2]


@pytest.mark.parametrize(("device", "wg", "edge", "sym"), device_cases(
    VARIANTS, [f"wg{w}-edge{e}-sym{s}" for w, e, s in VARIANTS], gpu_paths=True))
def test_shuffled_diagonal_words_identical(device, wg, edge, sym):
    """Auto-RQA (chaotic, quantized with many distances at the radius, three metrics,
    both precisions, Theiler windows), cross-RQA of series of different lengths (negative
    diagonals, words past the columns' end) and joint RQA: the shuffled words give the
    gather's histograms."""
    x = logistic_map(700, r=3.9, x0=0.4, burn=0)
    y = np.sin(np.arange(523) * 0.31) + 0.05 * np.cos(np.arange(523) * 1.7)
    plain = dict(GPU, WG=wg, EDGE=edge, SYM=sym, HCH=8 if sym else 0)
    cases = [
        (lambda p: pe.rqa(x, E=2, tau=1, radius=0.2, device=device, params=p)),
        (lambda p: pe.rqa(np.round(x * 8) / 8, E=3, tau=2, radius=0.25, metric="maximum",
                          theiler=4, dtype="float64", device=device, params=p)),
        (lambda p: pe.rqa(x, E=1, radius=0.125, metric="manhattan", theiler=3,
                          theiler_scope="matrix", device=device, params=p)),
        (lambda p: pe.cross_rqa(x, y, E=2, tau=3, radius=0.3, theiler=0, device=device,
                                params=dict(p, SYM=0, HCH=0))),
        (lambda p: pe.cross_rqa(y, x, E=2, radius=0.3, theiler=0, device=device,
                                params=dict(p, SYM=0, HCH=0))),
        (lambda p: pe.joint_rqa(x, np.resize(y, 700), E=2, radius=0.3, device=device,
                                params=p)),
    ]
    if first_case_only(device):  # PoCL beside Intel's runtime: the first case
        cases = cases[:1]
    for i, run in enumerate(cases):
        want = _hists(run(plain))
        for shfl in _shfl_values(device):
            assert _same(_hists(run(dict(plain, SHFL=shfl))), want), (i, shfl)


def _laminar() -> np.ndarray:
    """Chaotic data with flat stretches: long black lines (across several 64-row words
    and row blocks) beside many isolated recurrences."""
    x = logistic_map(900, r=3.9, x0=0.3, burn=0)
    x[100:260] = 0.5
    x[300:340] = 0.05
    x[600:800] = 0.5
    return x


@pytest.mark.parametrize(("device", "wg", "edge", "sym"), device_cases(
    VARIANTS, [f"wg{w}-edge{e}-sym{s}" for w, e, s in VARIANTS], gpu_paths=True))
def test_paired_walk_identical(device, wg, edge, sym):
    """DPAIR (with and without SHFL): auto-RQA of chaotic, quantized and laminar data,
    cross-RQA (both orders) and a Theiler band in the matrix give the histograms of the
    transition walk (a CPU runtime of few shapes: the auto-RQA cases)."""
    x, lam = logistic_map(700, r=3.9, x0=0.4, burn=0), _laminar()
    y = np.sin(np.arange(523) * 0.31) + 0.05 * np.cos(np.arange(523) * 1.7)
    plain = dict(GPU, WG=wg, EDGE=edge, SYM=sym, HCH=8 if sym else 0)
    cases = [
        (lambda p: pe.rqa(x, E=2, tau=1, radius=0.2, device=device, params=p)),
        (lambda p: pe.rqa(lam, E=2, tau=2, radius=0.1, device=device, params=p)),
        (lambda p: pe.rqa(np.round(lam * 8) / 8, E=1, radius=0.2, metric="maximum",
                          theiler=2, theiler_scope="matrix", white_border=False,
                          dtype="float64", device=device, params=p)),
        (lambda p: pe.cross_rqa(lam, y, E=2, radius=0.3, theiler=0, device=device,
                                params=dict(p, SYM=0, HCH=0))),
        (lambda p: pe.cross_rqa(y, lam, E=2, radius=0.3, theiler=0, device=device,
                                params=dict(p, SYM=0, HCH=0))),
    ]
    if not every_shape(device):  # a CPU runtime of few shapes: the auto-RQA cases
        cases = cases[:1 if first_case_only(device) else 3]
    for i, run in enumerate(cases):
        want = _hists(run(plain))
        for shfl in [0, *_shfl_values(device)]:
            got = _hists(run(dict(plain, DPAIR=1, SHFL=shfl)))
            assert _same(got, want), (i, shfl)


def test_dpair_template_value():
    """DPAIR reaches the black-start walk without private bins only (the GPU path)."""
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import RQA_LINES, _dpair

    Info = GpuInfo
    p = dict(GPU, DPAIR=1)
    assert all(_dpair(p, Info, m) == 1 for m in ("vertical", "diagonal", "horizontal"))
    assert _dpair(dict(p, PH=128), Info, "diagonal") == 0
    assert _dpair(dict(p, WALK=0), Info, "diagonal") == 0
    base = rqa_template_params(MODE="diagonal", PH=64, SHARE=1, WALK=1, DPAIR=1)
    with pytest.raises(ValueError, match="DPAIR=1 needs WALK=1 and PH=0"):
        render(RQA_LINES.template, base)


def test_shfl_template_value():
    """SHFL reaches the diagonal launch only on the path it reads (the planes, whole
    warps per work-group), SHFL=1 only on NVIDIA; every other launch renders without it."""
    from pyedmcl.kernels.rqa_lines import _fits, _shfl

    Info = GpuInfo

    class Amd(GpuInfo):
        runtime = "amd"

    p = dict(GPU, WG=128, SHFL=1)
    assert _shfl(p, Info, "diagonal") == 1 and _fits(p, Info)
    assert _shfl(p, Info, "vertical") == 0 and _shfl(p, Info, "horizontal") == 0
    assert _shfl(p, Amd, "diagonal") == 0 and not _fits(p, Amd)   # the gather there
    assert _shfl(dict(p, SHFL=2), Amd, "diagonal") == 2
    assert _shfl(dict(p, WG=16), Info, "diagonal") == 0   # not whole warps
    assert _shfl(dict(p, PLANES=0, HCH=0, SYM=0), Info, "diagonal") == 0


#: (WG, EDGE): one and four warps per group; row blocks of 96 rows (32-row halves, a
#: ragged 64-row word) and several blocks
DMAJ_VARIANTS = [(32, 512), (128, 512), (64, 96)]


def _dmaj_runs(device: str, wg: int) -> bool:
    """Whether DMAJ runs on ``device`` in work-groups of ``wg`` (PoCL: one warp's worth
    only, :func:`pyedmcl.kernels.rqa_lines._pocl_dmaj_crash`)."""
    from clkernels import get_backend

    return get_backend(device).info.runtime != "pocl" or wg <= 32


def _dmaj_taken(monkeypatch) -> list[int]:
    """Records the DMAJ each run settles (pyedmcl.rqa.dnr._diagonal_major)."""
    import importlib

    dnr = importlib.import_module("pyedmcl.rqa.dnr")
    taken: list[int] = []
    orig = dnr._diagonal_major

    def spy(st, m, ranges, ask):
        orig(st, m, ranges, ask)
        taken.append(int(st.params["DMAJ"]))
    monkeypatch.setattr(dnr, "_diagonal_major", spy)
    return taken


@pytest.mark.parametrize(("device", "wg", "edge"), device_cases(
    DMAJ_VARIANTS, [f"wg{w}-edge{e}" for w, e in DMAJ_VARIANTS], gpu_paths=True))
def test_diagonal_major_identical(device, wg, edge, monkeypatch):
    """DMAJ (SHFL 2, and 1 on NVIDIA): auto-RQA of chaotic, laminar and quantized data,
    three metrics, both precisions, E = 1 (no carried terms) to (E - 1) tau = 32 (the
    most the registers carry): the histograms of the column-major cells. Where it cannot
    apply (a Theiler window above 1: the walks would read cells no diagonal launch makes;
    (E - 1) tau above 32; joint RQA) the run takes the column-major path, the same
    histograms again. Every case on the first shape, two on the others (each case builds
    its own kernels: several seconds each on PoCL); a CPU runtime of few shapes
    (conftest.every_shape) runs the first shape's first two and first refused cases."""
    from pyedmcl.data import roessler

    if not _dmaj_runs(device, wg):  # PoCL beyond one warp: the column-major cells on both sides
        pytest.skip("DMAJ is off here (_pocl_dmaj_crash): nothing of it to compare")
    taken = _dmaj_taken(monkeypatch)
    x, lam = logistic_map(700, r=3.9, x0=0.4, burn=0), _laminar()
    z = roessler(900)
    plain = dict(GPU, WG=wg, EDGE=edge, DPAIR=1)
    applies = [
        (lambda p: pe.rqa(x, E=2, tau=1, radius=0.2, device=device, params=p)),
        (lambda p: pe.rqa(z, E=3, tau=6, recurrence_rate=0.05, device=device, params=p)),
        (lambda p: pe.rqa(lam, E=2, tau=2, radius=0.1, device=device, params=p)),
        (lambda p: pe.rqa(np.round(x * 8) / 8, E=3, tau=2, radius=0.25, metric="maximum",
                          dtype="float64", device=device, params=p)),
        (lambda p: pe.rqa(lam, E=1, radius=0.125, metric="manhattan", device=device,
                          params=p)),
        (lambda p: pe.rqa(z, E=5, tau=8, radius=2.0, white_border=False, device=device,
                          params=p)),
    ]
    refused = [
        (lambda p: pe.rqa(x, E=3, tau=2, radius=0.25, theiler=3, device=device, params=p)),
        (lambda p: pe.rqa(z, E=6, tau=7, radius=2.0, device=device, params=p)),
        (lambda p: pe.joint_rqa(x, x[::-1].copy(), E=2, radius=0.3, device=device,
                                params=p)),
    ]
    if (wg, edge) != DMAJ_VARIANTS[0]:  # other shapes: the case and laminar runs
        applies, refused = applies[1:3], refused[:1]
    elif not every_shape(device):  # the first case and the (PoCL: the first)
        applies, refused = applies[:1 if first_case_only(device) else 2], refused[:1]
    for on, cases in ((1, applies), (0, refused)):
        for i, run in enumerate(cases):
            want = _hists(run(plain))
            for shfl in _shfl_values(device):
                taken.clear()
                got = _hists(run(dict(plain, SHFL=shfl, DMAJ=1)))
                assert taken == [int(on and _dmaj_runs(device, wg))], (on, i, shfl)
                assert _same(got, want), (on, i, shfl)


@pytest.mark.parametrize("wg", (32, 64, 128))
def test_diagonal_major_lane_split(device, wg, monkeypatch):
    """DMAJ with a row block's diagonals over several launches (a lowered 32-bit budget,
    as N ~ 10^6 splits them at ~2.6e5 lanes): launches start on whole 128-lane multiples,
    so the second planes a launch's last warp writes meet the next launch's first warp;
    the histograms of the column-major cells, one to four work-groups a launch."""
    import importlib

    from pyedmcl.data import roessler

    if not _dmaj_runs(device, wg):
        pytest.skip("PoCL runs DMAJ in one-warp work-groups only (_pocl_dmaj_crash)")
    dnr = importlib.import_module("pyedmcl.rqa.dnr")
    monkeypatch.setattr(dnr, "_U32_SAFE", 40_000)   # 128 lanes a launch of 96 rows
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 40_000)
    starts: list[int] = []
    orig = dnr._row_blocks

    def spy(task, *a, **k):
        out = orig(task, *a, **k)
        if task.mode == "diagonal":
            starts.extend(ln.lane0 - task.lo for ln in out)
        return out
    monkeypatch.setattr(dnr, "_row_blocks", spy)
    taken = _dmaj_taken(monkeypatch)
    z = roessler(900)
    plain = dict(GPU, WG=wg, EDGE=96, DPAIR=1)
    want = _hists(pe.rqa(z, E=3, tau=6, recurrence_rate=0.05, device=device, params=plain))
    for shfl in _shfl_values(device):
        taken.clear()
        starts.clear()
        got = _hists(pe.rqa(z, E=3, tau=6, recurrence_rate=0.05, device=device,
                            params=dict(plain, SHFL=shfl, DMAJ=1)))
        assert taken == [1]
        assert len(set(starts)) > 4 and all(s % 128 == 0 for s in starts), starts
        assert _same(got, want), shfl


#: (WG, EDGE, DSEG): two segments of a row block of 512 rows; four of 256 rows (one
#: 64-row word each); eight of a ragged block of 96 rows (most segments hold no row)
DSEG_VARIANTS = [(32, 512, 2), (64, 256, 4), (32, 96, 8)]


@pytest.mark.parametrize(("device", "wg", "edge", "dseg"), device_cases(
    DSEG_VARIANTS, [f"wg{w}-edge{e}-dseg{d}" for w, e, d in DSEG_VARIANTS], gpu_paths=True))
def test_diagonal_major_segments_identical(device, wg, edge, dseg, monkeypatch):
    """DSEG (DMAJ's diagonal launches in row segments, their runs joined by MODE djoin):
    laminar data (black lines across segments, whole segments one run, diagonals ending
    inside a segment) and a Roessler record of long lines, at a fixed radius and a fixed
    rate: the histograms of the column-major cells and of one segment, every segment's
    join launched after its launch."""
    from clkernels.backends import pyopencl_backend as P
    from pyedmcl.data import roessler

    if not _dmaj_runs(device, wg):
        pytest.skip("PoCL runs DMAJ in one-warp work-groups only (_pocl_dmaj_crash)")
    taken = _dmaj_taken(monkeypatch)
    names: list[str] = []
    orig = P.PyOpenCLBackend.launch_bound

    def spy(self, bound, *a, **k):
        names.append(bound.kernel.handle.function_name)
        return orig(self, bound, *a, **k)
    monkeypatch.setattr(P.PyOpenCLBackend, "launch_bound", spy)
    lam, z = _laminar(), roessler(700)
    plain = dict(GPU, WG=wg, EDGE=edge, DPAIR=1)
    for run in ((lambda p: pe.rqa(lam, E=2, tau=2, radius=0.1, device=device, params=p)),
                (lambda p: pe.rqa(z, E=3, tau=6, recurrence_rate=0.08, device=device,
                                  params=p))):
        want = _hists(run(plain))
        for shfl in _shfl_values(device):
            one = _hists(run(dict(plain, SHFL=shfl, DMAJ=1)))
            taken.clear()
            names.clear()
            got = _hists(run(dict(plain, SHFL=shfl, DMAJ=1, DSEG=dseg)))
            assert taken == [1]
            assert names.count("rqa_djoin") == names.count("rqa_diagonal") > 0
            assert _same(one, want) and _same(got, want), shfl


def test_dmaj_template_value():
    """DMAJ reaches the vertical, diagonal and horizontal launches of the path it needs
    (SYM's chunked row walk over planes, PACK, the diagonal launch's shuffles, row blocks
    on 32-row boundaries) for a matrix it can compute; the template refuses it elsewhere."""
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec, _fits

    Info = GpuInfo
    p = dict(GPU, WG=128, SHFL=1, DMAJ=1)
    spec = LineSpec(3, 6, "euclidean", "float")
    assert _fits(p, Info)
    assert [spec.dmaj(m, p, Info) for m in ("vertical", "diagonal", "horizontal")] == [1, 1, 1]
    assert spec.dmaj("hjoin", p, Info) == 0 and spec.dmaj("warmdiag", p, Info) == 0
    for off in (dict(p, SYM=0, HCH=0), dict(p, PACK=0), dict(p, SHFL=0), dict(p, EDGE=4004)):
        assert spec.dmaj("diagonal", off, Info) == 0 and not _fits(off, Info), off

    class Pocl(GpuInfo):
        runtime = "pocl"

    q = dict(p, SHFL=2)   # PoCL: the local-memory shuffles in one-warp work-groups only
    assert spec.dmaj("diagonal", dict(q, WG=32), Pocl) == 1
    assert spec.dmaj("diagonal", dict(q, WG=64), Pocl) == 0
    assert spec.dmaj("diagonal", dict(q, WG=64), GpuInfo) == 1
    for other in (LineSpec(3, 6, "euclidean", "float", joint=True),
                  LineSpec(3, 6, "euclidean", "float", theiler_matrix=True),
                  LineSpec(3, 6, "euclidean", "float", fma=True),
                  LineSpec(6, 7, "euclidean", "float")):
        assert not other.takes_dmaj() and other.dmaj("diagonal", p, Info) == 0
    assert LineSpec(5, 8, "maximum", "double").takes_dmaj()
    base = rqa_template_params(MODE="diagonal", SHARE=1, SYM=1, WALK=1, BITS=2, DMAJ=1)
    with pytest.raises(ValueError, match="DMAJ=1 needs SYM, PLANES, PACK"):
        render(RQA_LINES.template, base)
    # DSEG: the diagonal launch of the DMAJ path only
    assert spec.dseg("diagonal", dict(p, DSEG=4), Info) == 4
    assert spec.dseg("vertical", dict(p, DSEG=4), Info) == 1
    assert spec.dseg("diagonal", dict(p, DSEG=4, SHFL=0), Info) == 1
    assert not _fits(dict(p, DMAJ=0, DSEG=4), Info)
    with pytest.raises(ValueError, match="DSEG > 1 needs DMAJ=1"):
        render(RQA_LINES.template, rqa_template_params(MODE="diagonal", DSEG=4))


def test_shfl_oclgrind_clean():
    """No out-of-bounds access, race or uninitialised read (an unoptimised build:
    conftest.run_under_oclgrind) in the shuffled words (SHFL=2: local memory and
    barriers): auto-RQA with a ragged last row block (with DMAJ too: its row and column
    values read past a diagonal's cells, inside the series' padding), and cross-RQA with
    negative diagonals."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(230) * 0.37) + 0.1 * np.cos(np.arange(230) * 1.3)
        y = np.cos(np.arange(150) * 0.41)
        p = {"VEC": 1, "WG": 64, "EDGE": 96, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
             "WALK": 1, "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": 2}
        a = pe.rqa(x, E=2, tau=2, radius=0.3, params=p)
        d = pe.rqa(x, E=3, tau=5, radius=0.5, params=dict(p, DMAJ=1))
        q = dict(p, SYM=0, HCH=0)
        c = pe.cross_rqa(x, y, E=2, radius=0.3, theiler=0, params=q)
        print(a.n_recurrences, d.n_recurrences, c.n_recurrences, a.settings.get("symmetric"))
    """, unoptimised=True)
    assert out.split()[-1] == "True"


def test_untuned_gpu_edge_by_size(monkeypatch):
    """An untuned GPU takes the larger row blocks (and, diagonal-major, their row
    segments) up to GPU_SMALL_N embedded points and the heuristic's edge above; a tuned
    entry and a CPU keep theirs."""
    import dataclasses

    from conftest import CPU_DEVICE

    import pyedmcl.kernels.rqa_lines as rl
    from clkernels import get_backend
    from clkernels.tuning import Choice

    cpu = get_backend(CPU_DEVICE)
    gpu = dataclasses.replace(cpu.info, device_type="gpu", runtime="nvidia", name="Fake GPU 9000",
                              normalised_name="fake-gpu-9000", max_work_group_size=1024,
                              max_work_item_sizes=(1024, 1024, 64), local_mem_bytes=49152,
                              compute_units=132)
    be = type("FakeBackend", (), {"info": gpu})()
    spec = {"E": 3, "REAL": "float", "METRIC": "euclidean"}
    default = rl._heuristic(gpu)
    small = rl.RQA_LINES.params_for(be, spec, 100_000)
    assert small == {**rl.RQA_LINES.space.complete(default), "EDGE": rl.GPU_SMALL_DSEG_EDGE,
                     "DSEG": rl.GPU_SMALL_DSEG}
    assert rl.RQA_LINES.space.valid(small, gpu)
    assert rl.RQA_LINES.params_for(be, spec, rl.GPU_SMALL_N)["EDGE"] == rl.GPU_SMALL_DSEG_EDGE
    large = rl.RQA_LINES.params_for(be, spec, rl.GPU_SMALL_N + 1)
    assert large["EDGE"] == default["EDGE"] and large.get("DSEG", 1) == 1
    # a GPU whose diagonal launches are column-major (no warp shuffles): no segments
    amd = dataclasses.replace(gpu, runtime="amd", name="Fake GPU 7000",
                              normalised_name="fake-gpu-7000")
    other = rl.RQA_LINES.params_for(type("FakeBackend", (), {"info": amd})(), spec, 100_000)
    assert other["EDGE"] == rl.GPU_SMALL_EDGE and other.get("DSEG", 1) == 1
    cpu_edge = rl.lookup(rl.RQA_LINES, cpu.info, rl.RQA_LINES.spec_bucket(spec),
                         rl.RQA_LINES.size_bucket(100_000)).params["EDGE"]
    assert rl.RQA_LINES.params_for(cpu, spec, 100_000)["EDGE"] == cpu_edge
    tuned = dict(default, EDGE=2048)
    monkeypatch.setattr(rl, "lookup", lambda *a, **k: Choice(tuned, "user"))
    assert rl.RQA_LINES.params_for(be, spec, 100_000)["EDGE"] == 2048
