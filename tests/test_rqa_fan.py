"""FAN (``neighbourhood="fan"``, each column's knn nearest) against pyunicorn's
``local_recurrence_rate`` matrix (its row i is our column i: compared transposed, every
histogram through the NumPy run reference) and a NumPy reference of the decision.
Counts and histograms exactly (float64, quantized data with ties at the k-th distance).
"""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.rqa._oracles import matrix_histograms
from pyedmcl.rqa.distances import kernel_distances


def quantized(n: int, seed: int = 2) -> np.ndarray:
    x = np.round(np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 3) / 10
    return x.astype(np.float32).astype(np.float64)


def _eq(ours: np.ndarray, theirs: np.ndarray) -> bool:
    a = np.trim_zeros(np.asarray(ours).astype(np.int64), "b")
    b = np.trim_zeros(np.asarray(theirs).astype(np.int64), "b")
    return a.size == b.size and bool(np.array_equal(a, b))


@pytest.mark.parametrize("metric", ["euclidean", "maximum"])
def test_fan_pyunicorn_local_recurrence_rate(device, metric):
    from pyunicorn.timeseries import RecurrencePlot

    x = quantized(300)
    n = 299
    for k, theiler in ((5, 1), (30, 0)):
        # int(lrr * (N - 1)) = k: pyunicorn's row i holds the k nearest of point i
        rp = RecurrencePlot(x, metric={"euclidean": "euclidean", "maximum": "supremum"}[metric],
                            local_recurrence_rate=(k + 0.5) / (n - 1), dim=2, tau=1,
                            silence_level=3)
        R = rp.R.T.astype(bool)  # our columns are pyunicorn's rows
        ref = matrix_histograms(R, theiler)
        r = pe.rqa(x, E=2, neighbourhood="fan", knn=k, metric=metric, theiler=theiler,
                   dtype="float64", device=device)
        assert r.n_recurrences == ref["n_rec"], (k, theiler)
        assert (R.sum(axis=0) <= k).all() and (R.sum(axis=0) < k).any()  # ties exercised
        assert _eq(r.diagonal_hist, ref["diag"])
        assert _eq(r.vertical_hist, ref["vert"])
        assert _eq(r.white_hist, ref["white"])


def test_fan_numpy_reference_float32(device):
    """float32: the decision is float64's, d < (k-th smallest of the column) with both from
    the raw series in float64 (the thresholds are the float64 path's, the cells near them
    redone in double by the kernels)."""
    x = quantized(250, seed=4)
    pts = np.stack([x[:-2], x[1:-1], x[2:]], axis=1)
    d = kernel_distances(pts, pts, "euclidean")
    k = 12
    for rule in ("squared", "distance"):
        kth = np.partition(d, k, axis=0)[k]
        if rule == "squared":
            R = d < kth[None, :]
        else:
            R = np.sqrt(d) < np.sqrt(kth)[None, :]
        ref = matrix_histograms(R, 1)
        r = pe.rqa(x, E=3, neighbourhood="fan", knn=k, dtype="float32", threshold_rule=rule,
                   device=device, edge=64)
        assert r.settings["dtype"] == "float32"
        assert r.n_recurrences == ref["n_rec"], rule
        assert _eq(r.diagonal_hist, ref["diag"]) and _eq(r.vertical_hist, ref["vert"])


def test_fan_bad_values():
    x = np.arange(40.0)
    with pytest.raises(ValueError, match="needs knn"):
        pe.rqa(x, neighbourhood="fan")
    with pytest.raises(ValueError, match="knn="):
        pe.rqa(x, neighbourhood="fan", knn=5, radius=1.0)
    with pytest.raises(ValueError, match="knn=40"):
        pe.rqa(x, neighbourhood="fan", knn=40)
    with pytest.raises(ValueError, match="neighbourhood"):
        pe.rqa(x, neighbourhood="corridor", radius=1.0)
    with pytest.raises(ValueError, match="for neighbourhood='fan'"):
        pe.rqa(x, radius=1.0, knn=3)


def test_fan_variants_identical(device):
    """Every run-walk variant, lane width, edge and order gives the reference histograms
    (per-column thresholds are read per lane in the vertical and the diagonal walks);
    float32, so the reference is float64's decision from the raw series."""
    x = quantized(140, seed=6)
    pts = np.stack([x[:-2], x[2:]], axis=1)
    d = kernel_distances(pts, pts, "euclidean")
    R = d < np.partition(d, 9, axis=0)[9][None, :]
    ref = matrix_histograms(R, 2, "matrix", white_border=False)
    for vec, bits, ph, sh, wk in ((1, 0, 0, 0, 0), (4, 1, 32, 0, 1), (4, 2, 32, 1, 1),
                                  (1, 2, 0, 1, 0), (2, 2, 64, 1, 2)):
        p = {"VEC": vec, "WG": 4, "EDGE": 13, "BITS": bits, "PH": ph, "SHARE": sh, "SYM": 0,
             "WALK": wk}
        for order in ("row", "column"):
            r = pe.rqa(x, E=2, tau=2, neighbourhood="fan", knn=9, threshold_rule="squared",
                       theiler=2, theiler_scope="matrix", white_border=False, params=p,
                       order=order, device=device)
            assert r.n_recurrences == ref["n_rec"], (p, order)
            assert _eq(r.diagonal_hist, ref["diag"]) and _eq(r.vertical_hist, ref["vert"])
            assert _eq(r.white_hist, ref["white"]), (p, order)


def test_fan_and_fma_oclgrind_clean():
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(40) * 0.37) + 0.1 * np.cos(np.arange(40) * 1.3)
        for vec, bits, ph, sh, wk in ((1, 0, 0, 0, 0), (4, 2, 32, 1, 1)):
            p = {"VEC": vec, "WG": 4, "EDGE": 13, "BITS": bits, "PH": ph, "SHARE": sh,
                 "SYM": 0, "WALK": wk}
            a = pe.rqa(x, E=2, tau=2, neighbourhood="fan", knn=7, params=p, theiler=2)
            b = pe.rqa(x, E=3, radius=0.3, threshold_rule="squared", params=p)
            print(a.n_recurrences, b.n_recurrences)
    """)
    assert out.strip()
