"""`line_stats` (nonzero bins only) against the definitions evaluated over every bin."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl.rqa.measures import line_stats


def _full_bins(h: np.ndarray, l_min: int) -> dict:
    """The definitions over every bin, line length by line length."""
    pts_all = pts_min = n_min = lmax = 0
    for i, c in enumerate(h.tolist()):
        length = i + 1
        pts_all += c * length
        if c:
            lmax = length
        if length >= l_min:
            pts_min += c * length
            n_min += c
    p = np.array([c for i, c in enumerate(h.tolist()) if i + 1 >= l_min and c], np.float64)
    entr = float(-(p / n_min * np.log(p / n_min)).sum()) if n_min else 0.0
    return {"points_min": pts_min, "points_all": pts_all, "lines_min": n_min, "max": lmax,
            "entropy": entr}


@pytest.mark.parametrize("case", ["empty", "below-lmin", "one-bin", "sparse", "last-bin"])
@pytest.mark.parametrize("l_min", [1, 2, 5])
def test_line_stats_matches_full_bins(case, l_min):
    rng = np.random.default_rng(7)
    h = np.zeros(1001, np.uint64)
    if case == "below-lmin":
        h[0] = 40
    elif case == "one-bin":
        h[9] = 3
    elif case == "sparse":
        idx = rng.choice(1000, 60, replace=False)
        h[idx] = rng.integers(1, 10**9, idx.size, dtype=np.uint64)
    elif case == "last-bin":
        h[[0, 1, 999]] = [7, 2, 1]
    got = line_stats(h, l_min)
    want = _full_bins(h, l_min)
    assert {k: v for k, v in got.items() if k != "entropy"} == \
        {k: v for k, v in want.items() if k != "entropy"}
    # the same nonzero bins in the same order: the same float64 sum
    assert got["entropy"] == want["entropy"]
