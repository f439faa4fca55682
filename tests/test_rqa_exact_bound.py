"""The float32 error bound of :mod:`pyedmcl.rqa.exact` against a NumPy brute force: every
cell where the float32 kernel's decision and the float64 path's differ lies within the
bound (so the kernels redo it), and on continuous data the bound flags almost no cell."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl.rqa.distances import kernel_distances
from pyedmcl.rqa.exact import error_bound, near_cells
from pyedmcl.rqa.threshold import kernel_threshold


def _points(s: np.ndarray, E: int, tau: int) -> np.ndarray:
    n = s.size - (E - 1) * tau
    return np.stack([s[m * tau:m * tau + n] for m in range(E)], axis=1)


def _check(raw: np.ndarray, E: int, tau: int, metric: str, radius: float, rule: str,
           fma: bool = False) -> tuple[int, float]:
    """(cells deciding differently, fraction flagged near); asserts each such cell is near."""
    z = (raw - raw.mean()).astype(np.float32)   # the float32 path's centred kernel input
    t32 = kernel_threshold(radius, metric, np.float32, rule)
    t64 = kernel_threshold(radius, metric, np.float64, rule)
    b = error_bound(float(np.abs(z).max()), t64, t32, metric, E)
    p32, p64 = _points(z, E, tau), _points(raw, E, tau)
    d32 = kernel_distances(p32, p32, metric, fma) < np.float32(t32)
    d64 = kernel_distances(p64, p64, metric, fma) < t64
    near = near_cells(z, z, E, tau, metric, t32, b, fma)
    differ = d32 != d64
    assert not (differ & ~near).any(), (E, tau, metric, radius, int((differ & ~near).sum()))
    return int(differ.sum()), float(near.mean())


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_every_differing_cell_is_flagged(metric):
    rng = np.random.default_rng(7)
    differ_total = 0
    for E, tau, grid, r_steps, offset in [(2, 1, 0.1, 2, 0.0), (3, 2, 0.1, 3, 0.0),
                                         (2, 1, 0.01, 17, 5.0), (4, 1, 1.0, 3, 1000.0),
                                         (5, 3, 0.1, 4, 37.3)]:
        raw = np.round(rng.normal(offset, 1.0, 500) / grid) * grid
        for rule in ("distance", "squared"):
            n, _ = _check(raw, E, tau, metric, r_steps * grid, rule)
            differ_total += n
    if metric == "euclidean":  # quantized data do make the paths differ: the test can fail
        assert differ_total > 0


def test_fma_sums_are_covered():
    rng = np.random.default_rng(3)
    raw = np.round(rng.normal(2.0, 1.0, 400), 1)
    _check(raw, 3, 1, "euclidean", 0.3, "squared", fma=True)


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_continuous_data_flag_few_cells(metric):
    rng = np.random.default_rng(11)
    raw = np.cumsum(rng.normal(size=600)) + 50.0
    _, frac = _check(raw, 3, 2, metric, 1.5, "distance")
    assert frac < 1e-3


def test_unresolvable_radius_redoes_every_cell():
    # a radius float32 cannot resolve at the data's magnitude: B is infinite
    b = error_bound(1e6, 1e-6, np.float32(1e-6), "euclidean", 3)
    assert np.isinf(b)


def test_largest_is_the_largest_magnitude():
    """The bound's A: max |value| over the float32 kernel inputs (an array given twice,
    as auto-RQA's rows and columns, read once): the same value as max(|s|), 0 for none,
    NaN values (no cell decides them) skipped."""
    from pyedmcl.rqa.exact import largest

    rng = np.random.default_rng(3)
    for _ in range(200):
        a = (rng.standard_normal(rng.integers(0, 40)) * 10.0 ** rng.integers(-3, 5)).astype(np.float32)
        b = (rng.standard_normal(rng.integers(0, 40)) - rng.integers(0, 3)).astype(np.float32)
        want = max([float(np.max(np.abs(s))) for s in (a, b) if s.size] or [0.0])
        assert largest(a, b) == want
        assert largest(a, a) == (float(np.max(np.abs(a))) if a.size else 0.0)
    assert largest() == 0.0 and largest(np.zeros(0, np.float32)) == 0.0
    assert largest(np.array([-2.5, np.nan], np.float32), np.ones(3, np.float32)) == 2.5
    assert largest(np.full(3, np.nan, np.float32), np.ones(3, np.float32)) == 1.0
