"""UNR=1 (a full 32-row half of the bit packing fully unrolled: the GPU default) against
UNR=0 and the NumPy full-matrix oracle: the same histograms, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_rqa_matches_oracle

import pyedmcl as pe
from pyedmcl.rqa._oracles import numpy_reference

#: the GPU default's shape, two columns per work-item, the CPU default's (SYM, lane walk, private bins), 32-bit words
LAYOUTS = [
    {"VEC": 1, "WG": 128, "EDGE": 4096, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1},
    {"VEC": 2, "WG": 64, "EDGE": 128, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 1},
    {"VEC": 16, "WG": 4, "EDGE": 97, "BITS": 2, "PH": 128, "SHARE": 1, "SYM": 1, "WALK": 3},
    {"VEC": 4, "WG": 8, "EDGE": 100, "BITS": 1, "PH": 0, "SHARE": 0, "SYM": 0, "WALK": 1},
    {"VEC": 1, "WG": 16, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0, "WALK": 0},
]


def _hists(r):
    return (r.diagonal_hist, r.vertical_hist, r.white_hist, r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


@pytest.mark.parametrize("p", LAYOUTS, ids=["gpu", "gpu-vec2", "cpu-sym-lanes", "bits1", "vec1"])
def test_unrolled_halves_identical(device, p):
    """Auto-RQA (N not a multiple of 32, Theiler band in the matrix, both metrics that
    differ most), cross- and joint RQA: UNR 1 equals UNR 0; auto-RQA equals the oracle."""
    from pyedmcl.data import logistic_map

    x = logistic_map(333, r=3.9, x0=0.4, burn=0)
    y = np.sin(np.arange(301) * 0.31)
    for kw in (dict(E=3, tau=2, radius=0.2, metric="euclidean"),
               dict(E=1, tau=1, radius=0.05, metric="maximum", theiler=3,
                    theiler_scope="matrix", white_border=False)):
        got = _hists(pe.rqa(x, params=dict(p, UNR=1), device=device, **kw))
        assert _same(got, _hists(pe.rqa(x, params=dict(p, UNR=0), device=device, **kw)))
    # the float64 oracle
    ref = numpy_reference(x, None, E=3, tau=2, radius=0.2, metric="euclidean", theiler=1)
    res = pe.rqa(x, E=3, tau=2, radius=0.2, dtype="float64", device=device,
                 params=dict(p, UNR=1))
    assert_rqa_matches_oracle(res, ref)
    c = [_hists(pe.cross_rqa(x, y, E=2, tau=3, radius=0.3, params=dict(p, UNR=u),
                             device=device)) for u in (0, 1)]
    assert _same(*c)
    j = [_hists(pe.joint_rqa(x[:300], y[:300], E=2, radius=0.3, params=dict(p, UNR=u),
                             device=device)) for u in (0, 1)]
    assert _same(*j)


def test_unrolled_halves_oclgrind_clean():
    """No out-of-bounds access, race or uninitialised read with UNR=1 (full and partial
    halves; an unoptimised build, so that Oclgrind's uninitialised-value plugin can follow
    every kernel: conftest.run_under_oclgrind)."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(90) * 0.37) + 0.1 * np.cos(np.arange(90) * 1.3)
        p = {"VEC": 2, "WG": 4, "EDGE": 40, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0,
             "WALK": 1, "UNR": 1}
        a = pe.rqa(x, E=2, tau=2, radius=0.3, params=p)
        print(a.n_recurrences)
    """, unoptimised=True)
    assert out.strip()
