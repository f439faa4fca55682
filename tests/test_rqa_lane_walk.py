"""WALK=3 (the run walk over VEC lanes at once, the CPU default) against the lane-by-lane
walks and the NumPy full-matrix oracle: the same histograms, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.kernels.rqa_lines import RQA_LINES
from pyedmcl.rqa._oracles import numpy_reference

#: the reference: the scalar transition walk, no private bins, no SHARE/SYM
REF = {"VEC": 1, "WG": 1, "EDGE": 4096, "BITS": 2, "PH": 0, "SHARE": 0, "SYM": 0, "WALK": 0}


def logistic(n: int) -> np.ndarray:
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=3.9, x0=0.4, burn=0)


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _assert_same(a, b, what) -> None:
    for u, v in zip(a[:3], b[:3], strict=True):
        assert np.array_equal(u, v), what
    assert a[3] == b[3], what


def _lane(vec: int, sym: int, edge: int, ph: int = 128) -> dict:
    return {"VEC": vec, "WG": 4, "EDGE": edge, "BITS": 2, "PH": ph, "SHARE": 1, "SYM": sym,
            "WALK": 3}


@pytest.mark.parametrize("E,tau,metric,rule,kw,windows", [
    (1, 1, "euclidean", "distance", dict(radius=0.3), ((0, "lines", True), (3, "matrix", False))),
    (3, 2, "maximum", "distance", dict(recurrence_rate=0.02), ((70, "lines", False),)),
    (5, 3, "euclidean", "squared", dict(recurrence_rate=0.1), ((1, "matrix", True),
                                                               (2, "lines", False))),
    (2, 4, "manhattan", "squared", dict(radius=0.2), ((0, "lines", False),))])
def test_lane_walk_auto_rqa(device, E, tau, metric, rule, kw, windows):
    """Auto-RQA: SYM 0/1, VEC 4/8/16, edges that do not divide N, Theiler windows (both
    scopes, wider than a 64-cell word), both border rules, fixed radius and rate."""
    x = logistic(700)
    for theiler, scope, wb in windows:
        base = dict(E=E, tau=tau, metric=metric, threshold_rule=rule, theiler=theiler,
                    theiler_scope=scope, white_border=wb, device=device, **kw)
        ref = _hists(pe.rqa(x, **base, params=REF))
        for vec, sym, edge in ((16, 1, 97), (8, 1, 300), (4, 0, 64)):
            got = _hists(pe.rqa(x, **base, params=_lane(vec, sym, edge)))
            _assert_same(got, ref, (kw, theiler, scope, wb, vec, sym, edge))


def test_lane_walk_oracle_and_dtypes(device):
    """The NumPy oracle (float64) and float32; dense and sparse matrices (long white and
    black runs across words); N around multiples of 64."""
    for n, r in ((63, 0.5), (129, 0.9), (400, 0.05)):
        x = logistic(n + 4)
        ref = numpy_reference(x, None, E=3, tau=2, radius=r, metric="euclidean", theiler=1)
        res = pe.rqa(x, E=3, tau=2, radius=r, dtype="float64", device=device,
                     params=_lane(16, 1, 97))
        assert res.n_recurrences == ref["n_rec"], n
        for k, o in (("diagonal_hist", ref["diag"]), ("vertical_hist", ref["vert"]),
                     ("white_hist", ref["white"])):
            h = np.asarray(getattr(res, k), np.int64)
            m = max(h.size, o.size)
            assert np.array_equal(np.pad(h, (0, m - h.size)), np.pad(o, (0, m - o.size))), (n, k)
        f32 = pe.rqa(x, E=3, tau=2, radius=r, dtype="float32", device=device)
        got = pe.rqa(x, E=3, tau=2, radius=r, dtype="float32", device=device,
                     params=_lane(8, 1, 64, ph=64))
        _assert_same(_hists(got), _hists(pe.rqa(x, E=3, tau=2, radius=r, dtype="float32",
                                                 device=device, params=REF)), n)
        _assert_same(_hists(got), _hists(f32), n)


def test_lane_walk_cross_joint_fan(device):
    """Cross-RQA (columns walked without SYM), joint RQA (SYM) and FAN (per-column
    thresholds): WALK=3 equals the reference walk."""
    x, y = logistic(500), np.sin(np.arange(430) * 0.37)
    ref = _hists(pe.cross_rqa(x, y, E=2, tau=2, radius=0.3, device=device, params=REF))
    got = _hists(pe.cross_rqa(x, y, E=2, tau=2, radius=0.3, device=device,
                              params=_lane(16, 0, 97)))
    _assert_same(got, ref, "cross")
    jx = logistic(450)
    jy = np.cos(np.arange(450) * 0.21)
    ref = _hists(pe.joint_rqa(jx, jy, E=2, tau=1, radius=(0.3, 0.5), device=device, params=REF))
    for vec, sym in ((16, 1), (4, 1), (8, 0)):
        got = _hists(pe.joint_rqa(jx, jy, E=2, tau=1, radius=(0.3, 0.5), device=device,
                                  params=_lane(vec, sym, 130)))
        _assert_same(got, ref, ("joint", vec, sym))
    ref = _hists(pe.rqa(x, E=3, neighbourhood="fan", knn=12, device=device, params=REF))
    got = _hists(pe.rqa(x, E=3, neighbourhood="fan", knn=12, device=device,
                        params=_lane(16, 0, 97)))
    _assert_same(got, ref, "fan")


def test_lane_walk_needs_vector_lanes_and_bins():
    """WALK=3 falls back to the lane-by-lane walk where it cannot run (VEC=1, PH < 64)."""
    from clkernels import get_backend
    from pyedmcl.kernels.rqa_lines import LineSpec

    info = get_backend(None).info
    spec = LineSpec(2, 1, "euclidean", "float")
    for p, walk in (({"VEC": 1, "PH": 128}, 1), ({"VEC": 16, "PH": 32}, 1),
                    ({"VEC": 16, "PH": 128}, 3)):
        params = {"WG": 4, "BITS": 2, "SHARE": 1, "SYM": 1, "WALK": 3, **p}
        assert spec.template_params("vertical", params, info)["WALK"] == walk, p


def test_lane_walk_oclgrind_clean():
    """No out-of-bounds access or race in the WALK=3 kernels (vertical, diagonal,
    horizontal; SYM and not; lanes past the launch's end; row-block edges not 64-aligned)."""
    from conftest import run_under_oclgrind

    # an unoptimised build: Oclgrind's uninitialised-value plugin crashed (SIGSEGV) on the
    # optimised kernels; unoptimised it checks them too (conftest.run_under_oclgrind)
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(90) * 0.37) + 0.1 * np.cos(np.arange(90) * 1.3)
        for vec, sym, edge in ((4, 1, 70), (2, 0, 13)):
            p = {"VEC": vec, "WG": 4, "EDGE": edge, "BITS": 2, "PH": 64, "SHARE": 1,
                 "SYM": sym, "WALK": 3}
            a = pe.rqa(x, E=2, tau=2, radius=0.3, params=p, theiler=2, theiler_scope="matrix",
                       white_border=False)
            b = pe.cross_rqa(x, x[:71] * 1.1, E=2, tau=1, radius=0.3, params=p)
            print(a.n_recurrences, b.n_recurrences)
    """, unoptimised=True)
    assert out.strip()


def test_shared_bits_reused_between_runs(device):
    """The SHARE column-bit buffer a CPU run leaves is re-zeroed and reused by the next
    run of its size; concurrent runs on one backend each get their own; same histograms."""
    import threading

    from pyedmcl.rqa import dnr

    x = logistic(900)
    p = _lane(16, 1, 128)
    ref = _hists(pe.rqa(x, E=3, tau=2, radius=0.3, device=device, params=REF))
    first = _hists(pe.rqa(x, E=3, tau=2, radius=0.3, device=device, params=p))
    again = _hists(pe.rqa(x, E=3, tau=2, radius=0.3, device=device, params=p))
    _assert_same(first, ref, "first")
    _assert_same(again, ref, "reused")
    from clkernels import get_backend
    used = get_backend(device)  # (not another backend of the runtime: SYCL's, other tests')
    kept = [(be, buf) for be, buf in list(dnr._sbits_cache.items()) if be is used]
    if pe.select_device(device).device_type == "cpu":   # CPUs keep the last run's buffer
        words, stride = RQA_LINES.shared_layout(p, x.size - 4, x.size - 4)
        assert kept and kept[0][1][1].size == words * stride
    out: list = []

    def run() -> None:
        for _ in range(3):
            out.append(_hists(pe.rqa(x, E=3, tau=2, radius=0.3, device=device, params=p)))
    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 6
    for h in out:
        _assert_same(h, ref, "concurrent")

