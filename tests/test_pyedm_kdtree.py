"""pyedmcl.edm.pyedm_kdtree: the library point pyEDM's S-map leaves out of a row with one
point too many, against the whole query pyEDM makes (every place of the tree's answer,
pyEDM's mask and its first knn admissible points) on quantised data, where equally far
farthest points are common. Exact: the same library position in every row."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

from pyedmcl.edm.pyedm_kdtree import (  # noqa: E402
    FarthestDrop,
    farthest_ties,
    pyedm_query,
    pyedm_tree,
    smap_k_query,
)
from pyedmcl.edm.smap_host import embed_at  # noqa: E402

E = 4


def walk(n: int, seed: int = 3) -> np.ndarray:
    return np.round(np.cumsum(np.random.default_rng(seed).choice([-0.1, 0, 0.1], n)), 1)


def pyedm_left_out(states, lib_t, tp, point, knn, R) -> int:
    """pyEDM's FindNeighbors for one S-map row, whole: query k_query, mask, first knn."""
    kq = smap_k_query(lib_t, np.array([tp]), knn, R)
    _, idx = pyedm_query(pyedm_tree(states), point[None, :], kq)
    nb = lib_t[idx[0]]
    keep = idx[0][(np.abs(nb - tp) > R).cumsum() <= knn]
    out = np.setdiff1d(np.flatnonzero(np.abs(lib_t - tp) > R), keep)
    assert out.size == 1
    return int(out[0])


@pytest.mark.parametrize("case", ["disjoint", "overlap", "exclusion"])
def test_dropped_is_what_pyedms_whole_query_leaves_out(case):
    x = walk(900)
    lib_t = np.arange(E - 1, 400) if case == "disjoint" else np.arange(E - 1, 500)
    pred_t = np.arange(400, 899)
    R = 3 if case == "exclusion" else 0
    knn = lib_t.size - 1
    states = embed_at(x, lib_t, E, 1)
    rows = pred_t[np.abs(lib_t[None, :] - pred_t[:, None]).min(axis=1) > R]  # one too many
    pts = embed_at(x, rows, E, 1)
    d2 = ((pts[:, None, :] - states[None, :, :]) ** 2).sum(axis=2)
    tied = farthest_ties(d2, np.ones(d2.shape, bool))
    assert tied.sum() >= 20, "too few tied farthest points to test"
    rule = FarthestDrop(states, lib_t, pred_t, knn, R)
    got = rule.dropped(rows[tied], pts[tied])
    want = [pyedm_left_out(states, lib_t, int(tp), p, knn, R)
            for tp, p in zip(rows[tied], pts[tied], strict=True)]
    np.testing.assert_array_equal(got, want)
    # not a rule on positions: the tree leaves out the last of the tied points in some
    # rows and another one in others
    last = [int(np.flatnonzero(d2[i] == d2[i].max())[-1]) for i in np.flatnonzero(tied)]
    assert np.any(np.asarray(want) != np.asarray(last))


def test_a_row_with_excluded_points_is_refused():
    x = walk(200)
    lib_t, pred_t = np.arange(3, 150), np.arange(100, 199)
    rule = FarthestDrop(embed_at(x, lib_t, E, 1), lib_t, pred_t, lib_t.size - 1, 0)
    with pytest.raises(ValueError, match="excluded"):
        rule.dropped(np.array([120]), embed_at(x, np.array([120]), E, 1))
