"""Every kernel family runs through the SYCL backend (dpctl) and agrees with PyOpenCL.

Same device (Intel's CPU runtime, seen by both), same rendered source: results
must be identical (same compiler, same rounding), so the comparison is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe

dpctl = pytest.importorskip("dpctl")


@pytest.fixture(scope="module")
def sycl():
    from clkernels import get_backend

    try:
        return get_backend("intel", backend="sycl")
    except Exception as exc:
        pytest.skip(f"no OpenCL-backend SYCL device: {exc}")


def _network(net) -> np.ndarray:
    return np.append(net.local_clustering, [net.transitivity, net.average_path_length])


X = np.sin(np.arange(400) * 0.3) + 0.01 * np.random.default_rng(0).standard_normal(400)
CASES = {
    "simplex": lambda d: pe.simplex(X, E=3, device=d).predicted,
    "smap": lambda d: pe.smap(X, E=3, theta=2, device=d).predicted,
    "ccm": lambda d: pe.ccm(X, np.roll(X, 1), E=3, lib_sizes=[50, 100], sample=3, seed=1,
                            device=d).rho_xy,
    "rqa": lambda d: np.array([pe.rqa(X, E=3, radius=0.3, device=d).DET]),
    "rqa_network": lambda d: _network(pe.recurrence_network(X, E=3, radius=0.3, device=d,
                                                            path_lengths=True)),
    "xmap": lambda d: np.asarray(pe.xmap(np.stack([X, np.roll(X, 2), np.cos(np.arange(400) * 0.2)], 1),
                                         E=3, device=d).rho),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_family_on_sycl_matches_pyopencl(sycl, name):
    got = CASES[name](sycl)
    ref = CASES[name]("intel")
    np.testing.assert_array_equal(got, ref)
