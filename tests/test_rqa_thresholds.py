"""Several thresholds decided in one pass over the cells (NTHR, pyedmcl.kernels.rqa_lines_k):
rqa_grid's rows at several radii and rates equal single pe.rqa calls bit for bit (float32
and float64, ordinary and decimal-quantized data whose distances tie at the radius), on
every platform present; the multi-threshold kernels' histograms equal a NumPy reference
of each threshold's matrix over the CPU paths (row blocks, SYM or not, the lane walk or
the scalar one, THEILER_MATRIX, EXACT's near cells); bad input refused. Exact equality,
no tolerance.

Every test takes five thresholds (K = 5) and one embedding per metric, so each program
is built once."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest
from conftest import FAST_BUILD_CPU, HAS_OCLGRIND, covering, run_under_oclgrind

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.kernels.rqa_lines import LineSpec
from pyedmcl.rqa import lines_k as rqa_lines_k
from pyedmcl.rqa import radii as radii_mod
from pyedmcl.rqa._oracles import matrix_histograms
from pyedmcl.rqa.distances import kernel_distances
from pyedmcl.rqa.dnr_k import Thresholds, detect_lines_k
from pyedmcl.rqa.exact import for_run, for_runs
from pyedmcl.rqa.measures import MEASURES
from pyedmcl.rqa.threshold import kernel_threshold

RADII = [0.3, 0.5, 0.5, 0.8, 1.2]  # grid multiples (ties on the 0.1 grid), one repeated
RATES = [0.02, 0.05, 0.08, 0.12, 0.2]


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


def _row_equal(one, row) -> bool:
    return (all(_same(one.measures[k], row[k]) for k in MEASURES)
            and one.n_recurrences == row["n_recurrences"] and one.radius == row["radius"])


@pytest.fixture(scope="module")
def series() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    walk = rng.standard_normal(420).cumsum()
    return {"ordinary": walk / walk.std(),
            "quantized": np.round(walk * 3) / 10 + 40.0}  # a 0.1 grid, far from zero


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["ordinary", "quantized"])
def test_grid_radii_equal_single_calls(device, series, kind, dtype):
    x = series[kind]
    opts = [dict(E=3, tau=2), dict(E=2, theiler=0, theiler_scope="matrix", white_border=False,
                                   metric="maximum", threshold_rule="squared")]
    for kw in covering(opts, device):
        df = pe.rqa_grid(x, radius=RADII, dtype=dtype, device=device, **kw)
        for k, r in enumerate(RADII):
            one = pe.rqa(x, radius=r, dtype=dtype, device=device, **kw)
            assert _row_equal(one, df.iloc[k]), (kw, r)


def test_grid_rates_equal_single_calls(device, series):
    """The radius of each rate found as the single call finds it (float32: the float64
    path's order statistic), then decided in the one pass."""
    x = series["quantized"]
    df = pe.rqa_grid(x, E=3, tau=2, recurrence_rate=RATES, device=device)
    for k, q in enumerate(RATES):
        one = pe.rqa(x, E=3, tau=2, recurrence_rate=q, device=device)
        assert _row_equal(one, df.iloc[k]), q


def test_one_pass_per_group_and_fallbacks(monkeypatch, series):
    """Thresholds go through passes of at most MAX_THRESHOLDS (here 3: a pass of 3, one of
    2); a lone one and a path without shared words run alone; the same rows."""
    x = series["ordinary"]
    ref = pe.rqa_grid(x, E=3, tau=2, radius=RADII, device=FAST_BUILD_CPU)
    calls: list[int] = []
    real = radii_mod.detect_lines_k

    def spy(*a, **kw):
        calls.append(kw["spec"].nthr)
        return real(*a, **kw)
    monkeypatch.setattr(radii_mod, "detect_lines_k", spy)
    monkeypatch.setattr(radii_mod, "MAX_THRESHOLDS", 3)
    got = pe.rqa_grid(x, E=3, tau=2, radius=RADII, device=FAST_BUILD_CPU)
    assert calls == [3, 2]
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(got, ref)
    monkeypatch.setattr(rqa_lines_k, "takes", lambda *a: False)  # no path: one by one
    pd.testing.assert_frame_equal(pe.rqa_grid(x, E=3, tau=2, radius=RADII,
                                              device=FAST_BUILD_CPU), ref)


def test_kept_buffers_between_passes(device, series):
    """Passes one after another take the arrays the last pass left (keeping_buffers: its
    histograms and carries zeroed again, series written again), of another length and
    dtype between them: every row still equals its single call."""
    for x, dtype in ((series["ordinary"], "float32"), (series["quantized"][:300], "float32"),
                     (series["ordinary"], "float64"), (series["ordinary"], "float32")):
        df = pe.rqa_grid(x, E=3, tau=2, radius=RADII[:3], dtype=dtype, device=device)
        for k, r in enumerate(RADII[:3]):
            one = pe.rqa(x, E=3, tau=2, radius=r, dtype=dtype, device=device)
            assert _row_equal(one, df.iloc[k]), (x.size, dtype, r)


def test_kept_pool_dropped_after_error(monkeypatch, series):
    """A pass that raises keeps no pool (its arrays may still be queued); the next pass
    allocates anew and gives the single calls' rows; a kept pool holds the arrays of the
    last pass's shapes."""
    from pyedmcl.rqa import dnr

    be = get_backend(FAST_BUILD_CPU)
    x = series["ordinary"]
    pe.rqa_grid(x, E=3, tau=2, radius=RADII[:3], device=FAST_BUILD_CPU)
    assert be in dnr._kept_pools
    real = radii_mod.detect_lines_k

    def boom(*a, **kw):
        real(*a, **kw)
        raise RuntimeError("boom")
    monkeypatch.setattr(radii_mod, "detect_lines_k", boom)
    with pytest.raises(RuntimeError, match="boom"):
        pe.rqa_grid(x, E=3, tau=2, radius=RADII[:3], device=FAST_BUILD_CPU)
    assert be not in dnr._kept_pools
    monkeypatch.setattr(radii_mod, "detect_lines_k", real)
    df = pe.rqa_grid(x, E=3, tau=2, radius=RADII[:3], device=FAST_BUILD_CPU)
    for k, r in enumerate(RADII[:3]):
        assert _row_equal(pe.rqa(x, E=3, tau=2, radius=r, device=FAST_BUILD_CPU), df.iloc[k])
    # the pool keeps the last pass's shapes only, not every shape seen
    shapes = set(dnr._kept_pools[be]["free"])
    pe.rqa_grid(x[:300], E=3, tau=2, radius=RADII[:3], device=FAST_BUILD_CPU)
    assert set(dnr._kept_pools[be]["free"]) != shapes
    pe.rqa_grid(x, E=3, tau=2, radius=RADII[:3], device=FAST_BUILD_CPU)
    assert set(dnr._kept_pools[be]["free"]) == shapes


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_for_runs_equal_for_run(metric):
    """The several-threshold Exacts are for_run's, field for field (bounds bit for bit)."""
    rng = np.random.default_rng(5)
    raw = rng.standard_normal(200).cumsum()
    z = (raw - raw.mean()).astype(np.float32)
    thr32 = [kernel_threshold(r, metric, np.float32) for r in RADII]
    thr64 = [kernel_threshold(r, metric, np.float64) for r in RADII]
    got = for_runs(np.float32, (raw, raw), (z, z), metric, 3, thr32, thr64)
    for r, t32, t64, g in zip(RADII, thr32, thr64, got, strict=True):
        e = for_run(np.float32, (raw, raw), (z, z), r, metric, "distance", 3, t32, thr64=t64)
        assert (g.thr64, g.b) == (e.thr64, e.b) and np.float32(g.b).tobytes() == \
            np.float32(e.b).tobytes(), r
        assert np.array_equal(g.x, e.x) and np.array_equal(g.y, e.y)
    assert for_runs(np.float64, (raw, raw), (z, z), metric, 3, thr32, thr64) == [None] * 5


#: (VEC, WG, EDGE, PH, SYM, WALK) of the kernel paths that take several thresholds: the
#: CPU default (lane walk, SYM), without SYM, the scalar walk (VEC 1: the GPU's, EXACT's
#: near test threshold by threshold), and the table-less near test (VEC 2: K + 2 > 2 VEC)
SHAPES = [(16, 4, 96, 128, 1, 3), (8, 4, 130, 64, 0, 3), (1, 16, 200, 0, 0, 1),
          (2, 8, 64, 32, 1, 1)]


_REFERENCES: dict[tuple, dict] = {}


def _reference(raw: np.ndarray, E: int, tau: int, metric: str, thr64: float, w: int,
               scope: str) -> dict:
    """Histograms of the matrix the float64 path decides: the kernels' float64 distances
    of the series as given, below ``thr64`` (kept: the shapes and dtypes share them)."""
    key = (raw.tobytes(), E, tau, metric, float(thr64), w, scope)
    if key not in _REFERENCES:
        n = raw.size - (E - 1) * tau
        p = np.stack([raw[m * tau:m * tau + n] for m in range(E)], axis=1)
        _REFERENCES[key] = matrix_histograms(kernel_distances(p, p, metric) < thr64, w, scope)
    return _REFERENCES[key]


def _inputs(raw: np.ndarray, dt: type, E: int, metric: str
            ) -> tuple[np.ndarray, Thresholds, object]:
    """The kernels' series (float32: centred, EXACT's float64 inputs with it) and RADII's
    thresholds, as pe.rqa makes them."""
    z = (raw - 12.0).astype(np.float32) if dt == np.float32 else raw
    exs = [for_run(np.dtype(dt), (raw, raw), (z, z), r, metric, "distance", E) for r in RADII]
    thr = np.array([kernel_threshold(r, metric, dt) for r in RADII], dt)
    if exs[0] is None:
        return z, Thresholds(thr), None
    return z, Thresholds(thr, np.array([e.thr64 for e in exs]),
                         np.array([e.b for e in exs], np.float32)), exs[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_histograms_equal_numpy_reference(device, dtype):
    """detect_lines_k over the paths (row blocks of 64 to 200 rows: carries across
    blocks; THEILER_MATRIX; float32 with EXACT on the 0.1 grid) against each threshold's
    matrix in NumPy: the float64 path's decisions, which float32 takes too."""
    rng = np.random.default_rng(3)
    raw = np.round(rng.standard_normal(230).cumsum() * 3) / 10 + 12.0
    dt = np.float32 if dtype == "float32" else np.float64
    be = get_backend(device)
    cases = [(3, 2, "euclidean", 1, "lines"), (2, 1, "maximum", 2, "matrix")]
    for k, shape in enumerate(covering(SHAPES, device)):
        E, tau, metric, w, scope = cases[k % 2]
        vec, wg, edge, ph, sym, walk = shape
        z, ts, ex = _inputs(raw, dt, E, metric)
        spec = LineSpec(E, tau, metric, "float" if dt == np.float32 else "double",
                        theiler_matrix=scope == "matrix", exact=ex is not None,
                        nthr=len(RADII))
        n = z.size - (E - 1) * tau
        hs = detect_lines_k(be, z, z, ts, spec=spec, n_rows=n, n_cols=n,
                            diag_ranges=[(w, n)], w=w, symmetric=True, exact=ex,
                            params={"VEC": vec, "WG": wg, "EDGE": edge, "BITS": 2, "PH": ph,
                                    "SHARE": 1, "SYM": sym, "WALK": walk})
        for h, k64 in zip(hs, ts.thr64 if ex is not None else
                          [kernel_threshold(r, metric, np.float64) for r in RADII], strict=True):
            ref = _reference(raw, E, tau, metric, k64, w, scope)
            assert np.array_equal(h.vertical, ref["vert"]), (shape, k64)
            assert np.array_equal(h.white, ref["white"]), (shape, k64)
            # the kernels walk the upper triangle's diagonals: half of both triangles' lines
            assert np.array_equal(2 * h.diagonal, ref["diag"]), (shape, k64)
            assert h.n_recurrences == ref["n_rec"], (shape, k64)


def test_bad_thresholds_refused():
    x = np.arange(40.0)
    spec = LineSpec(2, 1, "euclidean", "double", nthr=3)
    kw = dict(spec=spec, n_rows=39, n_cols=39, diag_ranges=[(1, 39)], symmetric=True)
    be = get_backend(FAST_BUILD_CPU)
    for thr, match in (([1.0, 0.5, 2.0], "ascend"), ([0.0, 1.0, 2.0], "positive"),
                       ([1.0, 2.0], "one per threshold")):
        with pytest.raises(ValueError, match=match):
            detect_lines_k(be, x, x, Thresholds(np.array(thr)), **kw)
    with pytest.raises(ValueError, match="more than"):
        detect_lines_k(be, x, x, Thresholds(np.arange(1.0, 18.0)),
                       **dict(kw, spec=dataclasses.replace(spec, nthr=17)))


#: the run of test_oclgrind_clean: three thresholds of a 0.1 grid series in float32 (EXACT's
#: near cells) in one pass with params P, each equal to a run of its own
OCLGRIND_RUN = """
    import dataclasses, numpy as np, pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.kernels.rqa_lines import LineSpec
    from pyedmcl.rqa.dnr import detect_lines
    from pyedmcl.rqa.dnr_k import Thresholds, detect_lines_k
    from pyedmcl.rqa.exact import for_run
    from pyedmcl.rqa.threshold import kernel_threshold
    raw = np.round(np.sin(np.arange(70) * 0.37) * 20) / 10 + 3.0
    z = (raw - 3.0).astype(np.float32)
    radii = [0.2, 0.3, 0.5]
    exs = [for_run(np.float32, (raw, raw), (z, z), r, "euclidean", "distance", 2)
           for r in radii]
    thr = np.array([kernel_threshold(r, "euclidean", np.float32) for r in radii], np.float32)
    ts = Thresholds(thr, np.array([e.thr64 for e in exs]), np.array([e.b for e in exs],
                    np.float32))
    spec = LineSpec(2, 1, "euclidean", "float", exact=True)
    be = get_backend(None)
    kw = dict(n_rows=69, n_cols=69, diag_ranges=[(1, 69)], w=1, symmetric=True, params=P)
    hs = detect_lines_k(be, z, z, ts, spec=dataclasses.replace(spec, nthr=3), exact=exs[0],
                        **kw)
    for t, e, h in zip(thr, exs, hs):
        one = detect_lines([be], z, z, float(t), spec=spec, exact=e, **kw)
        print(h.n_recurrences == one.n_recurrences and all(
            np.array_equal(a, b) for a, b in ((h.diagonal, one.diagonal),
                                              (h.vertical, one.vertical), (h.white, one.white))))
"""


@pytest.mark.skipif(not HAS_OCLGRIND, reason="needs Oclgrind")
@pytest.mark.parametrize("params", [
    {"VEC": 4, "WG": 4, "EDGE": 40, "BITS": 2, "PH": 64, "SHARE": 1, "SYM": 1, "WALK": 3},
    {"VEC": 1, "WG": 8, "EDGE": 40, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1}],
    ids=["cpu-lanes-sym", "gpu-scalar"])
def test_oclgrind_clean(params):
    """The multi-threshold kernels under Oclgrind (no invalid access or race; no
    uninitialised read on the scalar path: on the lane walk's the plugin crashes, as on
    the one-threshold lane walk, test_rqa_lane_walk), each threshold's histograms equal a
    run of its own."""
    code = "P = " + repr(params) + "\n" + textwrap.dedent(OCLGRIND_RUN)
    out = run_under_oclgrind(code, ignore_uninitialized=params["WALK"] == 3)
    assert out.split() == ["True"] * 3, out


#: rqa_grid itself on Oclgrind: two passes of three radii (tiny N, two lengths), every row
#: against its single call, and the passes counted (the several-threshold path taken)
OCLGRIND_GRID = """
    import numpy as np, pyedmcl as pe
    from pyedmcl.rqa import radii as rm
    from pyedmcl.rqa.measures import MEASURES
    calls = []
    real = rm.detect_lines_k
    def spy(*a, **kw):
        calls.append(kw["spec"].nthr)
        return real(*a, **kw)
    rm.detect_lines_k = spy
    raw = np.round(np.sin(np.arange(80) * 0.37) * 20) / 10 + 3.0
    for x in (raw, raw[:61]):
        df = pe.rqa_grid(x, E=2, radius=[0.2, 0.3, 0.5])
        for k, r in enumerate([0.2, 0.3, 0.5]):
            one, row = pe.rqa(x, E=2, radius=r), df.iloc[k]
            print(one.n_recurrences == row["n_recurrences"] and all(
                (np.isnan(one.measures[m]) and np.isnan(row[m])) or one.measures[m] == row[m]
                for m in MEASURES))
    print(calls)
"""


@pytest.mark.skipif(not HAS_OCLGRIND, reason="needs Oclgrind")
def test_oclgrind_grid_rows():
    """rqa_grid's passes under Oclgrind (no invalid access or race), rows equal to the
    single calls, each pass one launch set of three thresholds. Oclgrind's uninitialised-
    value plugin cannot run its default path's row walk (an unsupported LLVM `freeze` in
    rqa_horizontal, on main too; its results then differ): that plugin off."""
    out = run_under_oclgrind(textwrap.dedent(OCLGRIND_GRID),
                             ignore_uninitialized=True).split("\n")
    assert out[:6] == ["True"] * 6 and out[6] == "[3, 3]", out
