"""The recurrence-time entropy ``RTE`` (W_entr / ln W_max, the CRP toolbox's ``rpde``):
against a NumPy reference that reads the white vertical lines off a float64 recurrence
matrix, against pyunicorn's white-line entropy over ln of its longest white line, and in
every row of rqa_batch, rqa_grid and windowed rqa.

Tolerances: 1e-12 relative against the NumPy reference (the same float64 formula on the
same counts, summed in another order); 1e-9 against pyunicorn (it adds 1e-8 to its
denominators).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
from pyedmcl.rqa.measures import MEASURES, compute_measures


def _series(n: int = 400, seed: int = 5) -> np.ndarray:
    x = np.sin(np.arange(n) * 0.31) + 0.3 * np.random.default_rng(seed).standard_normal(n)
    return x.astype(np.float32).astype(np.float64)


def rte_reference(x: np.ndarray, E: int, radius: float, w_min: int,
                  white_border: bool = True) -> float:
    """From the recurrence matrix: each column's runs of non-recurrent cells (white lines;
    those touching the top or bottom row only with ``white_border``), the Shannon entropy
    of their lengths >= w_min, over ln of the longest white line."""
    n = x.size - (E - 1)
    v = np.stack([x[m: m + n] for m in range(E)], axis=1)
    R = np.sqrt(((v[:, None, :] - v[None, :, :]) ** 2).sum(-1)) < radius
    lengths = []
    for j in range(n):
        black = np.flatnonzero(np.r_[True, R[:, j], True])  # padded by recurrent cells
        gaps = np.diff(black) - 1  # the white runs between recurrent cells
        inner = np.ones(gaps.size, bool)
        if not white_border:
            inner[[0, -1]] = False
        lengths += [int(g) for g, ok in zip(gaps, inner, strict=True) if g > 0 and ok]
    if not lengths or max(lengths) < 2:
        return math.nan
    kept = np.array([t for t in lengths if t >= w_min])
    if kept.size == 0:
        return 0.0
    _, counts = np.unique(kept, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum() / math.log(max(lengths)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rte_matches_the_matrix_reference(device, dtype):
    x = _series()
    for E, r, w_min, border in ((2, 0.4, 1, True), (3, 0.6, 2, True), (2, 0.4, 3, False)):
        res = pe.rqa(x, E=E, radius=r, w_min=w_min, white_border=border, dtype=dtype,
                     device=device)
        ref = rte_reference(x, E, r, w_min, border)
        assert 0 < res.RTE < 1
        assert res.RTE == pytest.approx(ref, rel=1e-12, abs=0), (E, r, w_min, border)


def test_rte_matches_pyunicorn(device):
    x = _series(seed=6)
    rp = pyunicorn_rp(x, E=2, tau=1, radius=0.4)
    for w_min in (1, 2):
        res = pe.rqa(x, E=2, radius=0.4, w_min=w_min, dtype="float64", device=device)
        theirs = pyunicorn_measures(rp, 2, 2, w_min)["RTE"]
        assert res.RTE == pytest.approx(theirs, rel=1e-9, abs=0), w_min


def test_rte_limits():
    """A periodic record's returns all take one time: RTE 0; no white line longer than one
    cell: nan (ln 1 = 0); no line at or above w_min: 0, as W_entr."""
    white = np.zeros(10, np.int64)
    white[4] = 7  # every recurrence time 5
    m = compute_measures(10, 100, np.zeros(10), np.zeros(10), white, w_min=2)
    assert m["RTE"] == 0.0 and m["W_max"] == 5
    white = np.zeros(10, np.int64)
    white[0] = 3
    assert math.isnan(compute_measures(10, 100, np.zeros(10), np.zeros(10), white)["RTE"])
    white[6] = 1  # one line of 7 only, w_min 8: no time kept
    m = compute_measures(10, 100, np.zeros(10), np.zeros(10), white, w_min=8)
    assert m["RTE"] == 0.0 == m["W_entr"]
    uniform = np.ones(10, np.int64)  # every time 1..10 once: ln 10 / ln 10
    m = compute_measures(10, 100, np.zeros(10), np.zeros(10), uniform, w_min=1)
    assert m["RTE"] == pytest.approx(1.0, rel=1e-15)


def test_rte_in_batch_grid_and_window_rows(device):
    """RTE is a column of every tabular result, each equal to the single call's."""
    x = _series(300)
    X = np.stack([x, _series(300, seed=9)], axis=1)
    assert "RTE" in MEASURES
    b = pe.rqa_batch(X, E=2, radius=0.4, device=device)
    g = pe.rqa_grid(x, E=2, radius=[0.3, 0.4], w_min=[1, 2], device=device)
    w = pe.rqa(x, E=2, radius=0.4, window=100, step=100, device=device)
    assert b.loc[0, "RTE"] == pe.rqa(x, E=2, radius=0.4, device=device).RTE
    for _, row in g.iterrows():
        one = pe.rqa(x, E=2, radius=row["radius"], w_min=int(row["w_min"]), device=device)
        assert row["RTE"] == one.RTE
    a, e = w.index[1]
    assert w.loc[(a, e), "RTE"] == pe.rqa(x[a: e + 2], E=2, radius=0.4, device=device).RTE
