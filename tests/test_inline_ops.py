"""The inline forms that kernels take on PoCL (``INL=1``), on every OpenCL platform
present: the double exp of ``clkernels/templates/_mathops.mako`` (PoCL's float32
lookup weights) and ``_vecops.mako``'s ``lane_bits`` (a compare mask's lanes as bits).

The exp must be the operations its header states, bit for bit (a NumPy replay of them, with
no contraction, is the reference), and it must be exp: within 1 ulp of NumPy's exp over
the normal range, within one subnormal step below it, and exact at the edges (0, +inf,
NaN, the underflow and overflow thresholds).
"""

from __future__ import annotations

import numpy as np
import pytest
from mako.lookup import TemplateLookup
from mako.template import Template

import clkernels
from clkernels.templates import template_dirs

SOURCE = """<%namespace name="mth" file="/_mathops.mako"/>
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
${mth.exp_fn(1, "double")}
__kernel void f(__global const double* x, __global double* y)
{
    const size_t i = get_global_id(0);
    y[i] = ${mth.exp(1, "double")}(x[i]);
}
"""

LOG2E, LN2_HI, LN2_LO = (float.fromhex(h) for h in
                         ("0x1.71547652b82fep0", "0x1.62e42feep-1", "0x1.a39ef35793c76p-33"))


def replay(x: np.ndarray) -> np.ndarray:
    """The kernel's operations in NumPy float64 (each one correctly rounded)."""
    import math

    with np.errstate(over="ignore", invalid="ignore"):
        xc = np.where(x < -746.0, -746.0, np.where(x > 710.0, 710.0, x))
        xc = np.where(np.isnan(xc), 0.0, xc)  # the kernel returns NaN before using these
        shift = float.fromhex("0x1.8p52")
        k = (xc * LOG2E + shift) - shift
        r = (xc - k * LN2_HI) - k * LN2_LO
        p = np.full_like(r, 1 / math.factorial(13))
        for n in range(12, 1, -1):
            # the template's literals are 1/n! rounded to double, as Python rounds them
            p = p * r + 1 / math.factorial(n)
        p = p * r + 1.0
        p = p * r + 1.0
        ki = k.astype(np.int64)
        k1 = ki >> 1
        s1 = ((k1 + 1023) << 52).view(np.float64)
        s2 = ((ki - k1 + 1023) << 52).view(np.float64)
        y = (p * s1) * s2
    return np.where(np.isnan(x), x, np.where(x < -746.0, 0.0,
                                             np.where(x > 709.782712893384, np.inf, y)))


def points() -> np.ndarray:
    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, -1.0, 1.0, 1e-300, -1e-300, 709.78, 709.782712893384, 709.79, 710.5,
             -708.39, -708.4, -745.13, -745.14, -746.0, -746.5, -1e6, 1e6, np.inf, -np.inf,
             np.nan, 0.34657359027997264, -0.34657359027997264]
    return np.concatenate([
        -rng.exponential(4.0, 50_000),             # the lookup's x = -d / d_min <= -1
        rng.uniform(-745.0, 709.0, 50_000),
        rng.uniform(-1.0, 1.0, 20_000),
        np.asarray(edges)])


@pytest.fixture(scope="module")
def rendered() -> str:
    lookup = TemplateLookup(directories=[str(d) for d in template_dirs()], strict_undefined=True)
    return Template(SOURCE, lookup=lookup).render()


def test_inline_exp_is_its_stated_operations_and_is_exp(device, rendered):
    be = clkernels.get_backend(device)
    if not be.info.fp64:
        pytest.skip(f"{device} has no fp64")
    x = points()
    k = be.kernel_from_source(rendered, "f")
    xd, yd = be.to_device(x), be.empty((x.size,), np.float64)
    be.wait(be.launch(k, (x.size,), None, xd, yd))
    y = be.to_host(yd)
    want = replay(x)
    assert np.array_equal(y.view(np.int64), want.view(np.int64)), \
        f"{np.sum(y.view(np.int64) != want.view(np.int64))} values differ from the replay"

    with np.errstate(over="ignore"):
        ref = np.exp(x)
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float64).tiny)
    ulps = np.abs(y[normal] - ref[normal]) / np.spacing(ref[normal])
    assert ulps.max() <= 1.0  # libm's exp is itself within ~0.5 ulp
    low = np.isfinite(x) & (ref < np.finfo(np.float64).tiny)
    assert np.all(np.abs(y[low] - ref[low]) <= 5e-324)
    assert np.isnan(y[np.isnan(x)]).all()
    assert y[x == np.inf][0] == np.inf and y[x == -np.inf][0] == 0.0
    assert y[x == 0.0].tolist() == [1.0, 1.0]
    assert y[x == 710.5][0] == np.inf and y[x == -746.5][0] == 0.0


@pytest.mark.parametrize("template", ["lookup/simplex_lookup.cl.mako",
                                      "xmap/xmap_lookup.cl.mako"])
def test_only_float32_data_take_the_inline_exp(template):
    """Float64 data keep the runtime's exp on PoCL (their results keep their bits);
    float32 data take the inline one there, and only there."""
    from clkernels.templates import render
    from pyedmcl.kernel_fingerprints import normalised

    base = {"K": 4, "ACC": "double", "WG": 64, "WEIGHT": "ccm", "VARIANCE": 0, "TJ": 2,
            "VEC": 0, "LANES": 0, "LWG": 64, "PF": 0, "LB": 1, "LMAJ": 0, "CM": 0, "ST": 0,
            "CH": 16, "SPL": 1, "PR": 0, "KR": 0, "KS": 4, "CHECK": 0, "O32": 1, "PIW": 0, "FS": 1,
            "RESOLVE": 0, "E": 0, "TAU": 0, "FMA": 0, "NOFUSE": 0}

    def src(real, inl):
        return normalised(render(template, {**base, "REAL": real, "INL": inl}))

    assert "inl_exp" not in src("float", 0) and "inl_exp" not in src("double", 1)
    assert "inl_exp(" in src("float", 1)
    if template.startswith("lookup/"):  # INL changes nothing else there
        assert src("double", 1) == src("double", 0)


LANE_BITS = """<%namespace name="vec" file="/_vecops.mako"/>
${vec.ops(INL)}
__kernel void f(__global const float* x, const float t, __global uint* out)
{
    const size_t i = get_global_id(0);
    const float16 v = vload16(i, x);
${vec.lane_bits(INL, "v <= (float16)t", 16, "m_", "b")}\\
    out[i] = b1_;
}
"""


@pytest.mark.parametrize("inl", [0, 1])
def test_lane_bits_are_the_lanes(device, inl):
    """Bit i of `lane_bits` is lane i of the mask, in the generic OR tree (INL 0) and in
    the AVX-512 mask move that PoCL takes (INL 1; the OR tree where it cannot)."""
    lookup = TemplateLookup(directories=[str(d) for d in template_dirs()], strict_undefined=True)
    src = Template(LANE_BITS, lookup=lookup).render(INL=inl)
    be = clkernels.get_backend(device)
    x = np.random.default_rng(3).random(16 * 4096).astype(np.float32)
    x[::7] = 0.5  # ties with the threshold
    k = be.kernel_from_source(src, "f")
    out = be.empty((4096,), np.uint32)
    be.wait(be.launch(k, (4096,), None, be.to_device(x), np.float32(0.5), out))
    want = ((x.reshape(-1, 16) <= np.float32(0.5)) * (1 << np.arange(16))).sum(1)
    np.testing.assert_array_equal(be.to_host(out), want.astype(np.uint32))
