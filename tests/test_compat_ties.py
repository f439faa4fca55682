"""compat.pyedm decides distance ties as pyEDM does (scipy KDTree's order).

Data: a Lorenz-63 series rounded to 1 decimal (not one of pyEDM's test sets), so
neighbour distances tie exactly and often. Simplex, S-map and CCM through compat's
general path (NaN rows, multivariate or ``embedded`` state spaces) against pyEDM in
float64. Tolerance 1e-12 absolute: once the neighbour sets and their order are
pyEDM's, both run the same float64 host arithmetic on the same distances (computed
as pyEDM computes them), so agreement is to rounding, far below 1e-12 at these
magnitudes; a tie decided differently moves a prediction by ~1e-3 or more.

Each case first asserts that the ties are real: some query rows hold equal distances
among their nearest candidates, and on some of them scipy's KDTree and the device's
documented order (distance, |p - l|, l) disagree. With the device's order in place
of KDTree's, the S-map and CCM cases fail (measured: 1.8e-3, 1.6e-5); Simplex's
tie-break is that total order in pyEDM too, so its case checks the port of pyEDM's
tie-break (and ``knn_neighbors`` row for row).

Univariate plain calls (compat's fast path, the fused pipeline) on the same data:
S-map and CCM whose delay vectors hold equal distances are routed to the general
path, so they agree with pyEDM to the same 1e-12; the tests show the routing is what
makes them agree (the fast path forced on them misses by far more) and that untied
data still take the fast path (the general path patched to fail).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyedmcl.compat.pyedm as EDM
from pyedmcl.compat._state_knn import (
    host_distances,
    kdtree_candidates,
    kdtree_distances,
    row_distances,
    state_neighbors,
    tied_rows,
)
from pyedmcl.compat._tie_check import has_distance_ties, univariate_ties

pyEDM = pytest.importorskip("pyEDM")
pytest.importorskip("scipy")
TOL = 1e-12


def _lorenz(n: int = 320, dt: float = 0.02, decimals: int | None = 1) -> pd.DataFrame:
    """Lorenz-63 (sigma 10, rho 28, beta 8/3), RK4, every step kept, rounded to
    ``decimals`` (None: not rounded, no distance ties)."""
    def f(s):
        x, y, z = s
        return np.array([10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z])

    s = np.array([1.0, 1.0, 1.0])
    out = np.empty((n + 200, 3))
    for i in range(n + 200):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out[i] = s
    v = out[200:] if decimals is None else np.round(out[200:], decimals)  # transient dropped
    return pd.DataFrame({"Time": np.arange(1, n + 1), "x": v[:, 0], "y": v[:, 1], "z": v[:, 2]})


@pytest.fixture(scope="module")
def data():
    return _lorenz()


def _with_nan(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    d.loc[[30, 31, 140], "x"] = np.nan
    d.loc[[200], "y"] = np.nan
    return d


def _ref(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _same(a: pd.DataFrame, b: pd.DataFrame, atol: float = TOL) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for c in a.columns:
        np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), atol=atol, rtol=0,
                                   equal_nan=True, err_msg=c)


def _assert_ties_matter(emb: np.ndarray, k: int, leafsize, device) -> None:
    """Rows of ``emb`` (NaN rows left out) tie within their k+1 nearest others, and
    KDTree's order differs from the device's on some of them."""
    rows = np.flatnonzero(~np.isnan(emb).any(axis=1))
    nbr, _ = state_neighbors(emb, rows, rows, k + 1, -1, device=device)
    tied = tied_rows(host_distances(emb, rows, nbr))
    assert tied.sum() >= 5, "the data hold too few distance ties to test tie order"
    kd, _ = kdtree_candidates(emb, rows, rows, k + 1, leafsize, device=device)
    assert (kd != nbr).any(), "KDTree's and the device's tie orders agree everywhere here"


def _lags(df: pd.DataFrame, names: list[str], E: int) -> np.ndarray:
    return np.hstack([np.column_stack([df[c].shift(i).to_numpy(float) for i in range(E)])
                      for c in names])


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_simplex_ties_as_pyedm(data, nan, device):
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y", target="x", lib="1 200", pred="150 300", E=2, Tp=1,
              returnObject=True)
    _assert_ties_matter(_lags(d, ["x", "y"], 2), 5, 20, device)
    a, b = _ref(pyEDM.Simplex, d, **kw), _ref(EDM.Simplex, d, device=device, **kw)
    np.testing.assert_array_equal(a.knn_neighbors, b.knn_neighbors)
    _same(a.Projection, b.Projection)


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_smap_ties_as_pyedm(data, nan, device, monkeypatch):
    """An embedded state space with ties at the knn cut. With NaN rows: pyEDM's
    bookkeeping, to 1e-12. Clean: the fused solver (the general path patched to fail),
    its candidates in pyEDM's tree order, at its tolerance: predictions and variances
    1e-9, coefficients 1e-9 of these magnitudes (measured 5e-13 and 2.5e-11 for C0)."""
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y z", target="x", lib="1 250", pred="100 310", theta=3.0, knn=12,
              embedded=True, Tp=1)
    _assert_ties_matter(d[["x", "y", "z"]].to_numpy(float), 12, 20, device)
    a = _ref(pyEDM.SMap, d, **kw)
    if not nan:
        _forbid_general(monkeypatch)
    b = _ref(EDM.SMap, d, device=device, **kw)
    for key in ("predictions", "coefficients"):
        _same(a[key], b[key], TOL if nan else 1e-9)


@pytest.mark.parametrize("nan", [False, True], ids=["clean", "nan"])
def test_ccm_ties_as_pyedm(data, nan, device):
    d = _with_nan(data) if nan else data
    kw = dict(columns="x y", target="z", libSizes=[20, 300, 70], sample=4, E=2, Tp=0, seed=11,
              includeData=True)
    _assert_ties_matter(_lags(d, ["x", "y"], 2), 5, None, device)
    a = _ref(pyEDM.CCM, d, parallel=False, **kw)
    b = _ref(EDM.CCM, d, device=device, **kw)
    _same(a, b)


def _forbid_general(monkeypatch) -> None:
    def fail(*a, **kw):
        raise AssertionError("the general path ran")
    for name in ("_run", "_ccm_pyedm", "_scan_general"):
        monkeypatch.setattr(EDM, name, fail)


def _fast(kind: str, d: pd.DataFrame, device) -> pd.DataFrame:
    kw = dict(columns="x", target="y", lib="1 250", pred="100 310", E=3, Tp=1)
    if kind == "simplex":
        return _ref(EDM.Simplex, d, device=device, **kw)
    if kind in ("smap_knn12", "smap_default"):
        knn = 12 if kind == "smap_knn12" else 0
        r = _ref(EDM.SMap, d, theta=3.0, knn=knn, device=device, **kw)
        return pd.concat([r["predictions"], r["coefficients"].iloc[:, 1:]], axis=1)
    if kind == "nonlinear":
        return _ref(EDM.PredictNonlinear, d, theta="0 2 5", knn=12, device=device, **kw)
    return _ref(EDM.CCM, d, columns="x", target="z", libSizes=[20, 300, 70], sample=4, E=2, Tp=0,
                seed=11, includeData=True, device=device)


def _oracle(kind: str, d: pd.DataFrame) -> pd.DataFrame:
    kw = dict(columns="x", target="y", lib="1 250", pred="100 310", E=3, Tp=1)
    if kind == "simplex":
        return _ref(pyEDM.Simplex, d, **kw)
    if kind in ("smap_knn12", "smap_default"):
        knn = 12 if kind == "smap_knn12" else 0
        r = _ref(pyEDM.SMap, d, theta=3.0, knn=knn, **kw)
        return pd.concat([r["predictions"], r["coefficients"].iloc[:, 1:]], axis=1)
    if kind == "nonlinear":
        return _ref(pyEDM.PredictNonlinear, d, theta="0 2 5", knn=12, showPlot=False, **kw)
    return _ref(pyEDM.CCM, d, columns="x", target="z", libSizes=[20, 300, 70], sample=4, E=2,
                Tp=0, seed=11, includeData=True, parallel=False)


KINDS = ["simplex", "smap_knn12", "smap_default", "nonlinear", "ccm"]


@pytest.mark.parametrize("kind", ["simplex", "ccm"])
def test_fast_path_ties_as_pyedm(data, kind, device, monkeypatch):
    E = 2 if kind == "ccm" else 3
    assert univariate_ties(data["x"].to_numpy(float), E, -1), "no distance ties in the data"
    ref = _oracle(kind, data)
    _same(ref, _fast(kind, data, device))
    if kind == "ccm":
        # the fused pipeline's own tie order on these data is not pyEDM's: routing matters
        monkeypatch.setattr(EDM, "_ties_decide", lambda *a, **k: False)
        forced = _fast(kind, data, device)
        gap = max(np.nanmax(np.abs(ref[c].to_numpy(float) - forced[c].to_numpy(float)))
                  for c in ref.columns if c != "Time")
        assert gap > 1e-9, f"the fast path's tie order agrees with pyEDM here ({gap})"


@pytest.mark.parametrize("kind", ["smap_default", "smap_knn12", "nonlinear"])
def test_smap_keeps_the_fast_path_on_tied_data(data, kind, device, monkeypatch):
    """S-map and PredictNonlinear on tied data (Lorenz rounded to one decimal) keep the
    fused path (general path patched to fail): its ties, which of equally far points fall
    inside pyEDM's neighbour query and in what order, and which farthest point the
    default knn leaves out, are decided by a tree built as pyEDM's
    (pyedmcl.edm.pyedm_kdtree). Against pyEDM at the fused path's tolerance (as
    test_untied_data_keep_the_fast_path): predictions 1e-9, rho pyEDM's 6 digits,
    coefficients left out (the fused solver and lstsq part at ~1e-7 on correlated lags).
    The kernel's own order instead misses (with a knn, the candidates kept in the
    device's order)."""
    assert univariate_ties(data["x"].to_numpy(float), 3, -1), "no distance ties in the data"
    ref = _oracle(kind, data)
    _forbid_general(monkeypatch)
    tol = 1.01e-6 if kind == "nonlinear" else 1e-9

    def gap() -> float:
        got = _fast(kind, data, device)
        cols = [c for c in ref.columns if c != "Time" and not c.startswith(("C0", "\u2202"))]
        return max(float(np.nanmax(np.abs(got[c].to_numpy(float) - ref[c].to_numpy(float))))
                   for c in cols)

    assert gap() < tol
    if kind != "smap_default":  # knn: the device's candidates as they come
        from pyedmcl.edm import smap
        monkeypatch.setattr(smap, "tree_order", lambda states, points, cand, kq: cand[:, :kq])
        assert gap() > tol


def test_default_smap_leaves_out_pyedms_farthest_point(device, monkeypatch):
    """S-map with pyEDM's default knn on a random walk on the 0.1 grid, disjoint halves:
    prediction rows leave out one of several equally far library points, the tree's
    choice. The fast path (general path patched to fail) gives pyEDM's predictions within
    1e-9 (measured 1.6e-13); leaving out the last of equally far points instead misses by
    3.5e-4 of the largest prediction."""
    from pyedmcl.edm.pyedm_kdtree import FarthestDrop

    x = np.round(np.cumsum(np.random.default_rng(3).choice([-0.1, 0, 0.1], 1200)), 1)
    d = pd.DataFrame({"Time": np.arange(1, 1201), "x": x})
    kw = dict(columns="x", target="x", lib="1 600", pred="601 1200", E=5, Tp=1, theta=1.0)
    ref = _ref(pyEDM.SMap, d, **kw)["predictions"]["Predictions"].to_numpy(float)
    _forbid_general(monkeypatch)

    def gap() -> float:
        got = _ref(EDM.SMap, d, device=device, **kw)["predictions"]["Predictions"]
        return float(np.nanmax(np.abs(got.to_numpy(float) - ref)) / np.nanmax(np.abs(ref)))

    assert gap() < 1e-9
    monkeypatch.setattr(FarthestDrop, "usable", lambda self: False)  # the last of equal ones
    assert gap() > 1e-5


#: library rows 4 and 6 (E = 3) lie at squared distances 0.4999999999999999 and
#: 0.49999999999999994 from query row 10: one square root
SQRT_TIE = [0.4, 0.4, 0.6, 0.7, 0.3, 0.9, 0.6, 0.5, 0.3, 0.2, 0.7]


def test_simplex_ties_after_the_square_root(data, device, monkeypatch):
    """pyEDM breaks ties by time among equal square roots of sums that it adds in another
    order than the fused kernel, which compares the sums themselves; here pyEDM takes
    library row 6 (nearer in time), the kernel row 4 (the smaller sum). Simplex keeps the
    fast path (general path patched to fail), which decides such rows of decimal data by
    pyEDM's rule (pyedmcl/edm/simplex_ties.py); its scans go the general path."""
    from pyedmcl.edm import simplex_ties

    d = pd.DataFrame({"Time": np.arange(1, 12), "x": SQRT_TIE})
    kw = dict(columns="x", target="x", lib="1 8", pred="9 11")
    ref = _ref(pyEDM.Simplex, d, E=3, **kw)
    with monkeypatch.context() as m:
        _forbid_general(m)
        _same(ref, _ref(EDM.Simplex, d, E=3, device=device, **kw))
        big = _ref(pyEDM.Simplex, data, E=3, columns="x", target="y", lib="1 250",
                   pred="100 310")
        _same(big, _ref(EDM.Simplex, data, E=3, device=device, columns="x", target="y",
                        lib="1 250", pred="100 310"))
    scan = dict(columns="x", target="y", lib="1 250", pred="100 310")  # the tied Lorenz data
    for name, extra in (("EmbedDimension", dict(maxE=6)), ("PredictInterval", dict(E=3, maxTp=3)),
                        ("PredictExclusionRadius", dict(E=3, exclusionRadius=[0, 5]))):
        want = _ref(getattr(pyEDM, name), data, showPlot=False, numProcess=1, **extra, **scan)
        got = _ref(getattr(EDM, name), data, device=device, **extra, **scan)
        assert np.isfinite(want["rho"].to_numpy(float)).all()
        _same(want, got)
        if name == "EmbedDimension":
            want_E = want
    monkeypatch.setattr(EDM, "_ties_decide", lambda *a, **k: False)  # the fused kernel's order
    monkeypatch.setattr(simplex_ties, "ENABLED", False)
    forced = _ref(EDM.Simplex, d, E=3, device=device, **kw)
    gap = np.nanmax(np.abs(forced.Predictions.to_numpy(float) - ref.Predictions.to_numpy(float)))
    assert gap > 1e-3, gap
    forced = _ref(EDM.EmbedDimension, data, maxE=6, device=device, **scan)  # measured: 2.2e-5
    assert np.abs(forced["rho"].to_numpy(float) - want_E["rho"].to_numpy(float)).max() > 1e-6


def test_simplex_scans_on_tied_decimal_data_call_the_fast_simplex(data, device, monkeypatch):
    """The Simplex scans on tied decimal data run one fast Simplex a value (its ties
    decided by pyEDM's rule), not pyEDM's bookkeeping (patched to fail): pyEDM's rho."""
    scan = dict(columns="x", target="y", lib="1 250", pred="100 310")
    calls = (("EmbedDimension", dict(maxE=6)), ("PredictInterval", dict(E=3, maxTp=3)),
             ("PredictExclusionRadius", dict(E=3, exclusionRadius=[0, 5])))
    want = {name: _ref(getattr(pyEDM, name), data, showPlot=False, numProcess=1, **extra,
                       **scan) for name, extra in calls}
    scan_per_value = EDM._scan_general
    _forbid_general(monkeypatch)  # pyEDM's bookkeeping (_run) fails; the scan per value runs
    monkeypatch.setattr(EDM, "_scan_general", scan_per_value)
    for name, extra in calls:
        got = _ref(getattr(EDM, name), data, device=device, **extra, **scan)
        _same(want[name], got)


def test_simplex_skips_the_quadratic_check_on_continuous_data(device, monkeypatch):
    """Simplex's ties need equal true distances (quantised or repeated values): a short
    series of distinct values off a decimal grid runs no O(N^2) check (it took 25 times
    the call at N = 2,000), while CCM (KDTree's order at the k-th neighbour) still checks
    every short series and S-map none (it decides its ties as pyEDM itself)."""
    from pyedmcl.compat import _tie_check

    def fail(*a, **kw):
        raise AssertionError("the quadratic tie check ran")

    monkeypatch.setattr(_tie_check, "has_distance_ties", fail)
    d = _lorenz(decimals=None)
    kw = dict(columns="x", target="y", lib="1 250", pred="100 310")
    EDM.Simplex(d, E=3, device=device, **kw)
    EDM.EmbedDimension(d, maxE=4, device=device, **kw)
    EDM.SMap(d, E=3, theta=2.0, knn=12, device=device, **kw)  # decides its ties itself
    with pytest.raises(AssertionError, match="quadratic"):
        EDM.CCM(d, columns="x", target="y", libSizes=[50, 200], sample=2, E=3, device=device)


def test_state_space_distances_added_left_to_right(device):
    """An ``embedded`` frame of 8 columns on a 0.1 grid: pyEDM adds a row's squares left to
    right (its column-major array; NumPy would add 8 or more contiguous values pairwise),
    and the one-ulp difference decides the tie at the neighbours' edge for time 14."""
    rng = np.random.default_rng(7)
    cols = [f"c{j}" for j in range(8)]
    M = [[0.6, 0.8, 0.6, 1.0, -0.0, 0.4, 0.2, -0.9], [0.8, -0.1, -0.1, 0.2, -0.7, -0.2, 0.4, -0.6],
         [0.0, 0.2, -0.4, -0.5, 0.8, 0.1, 0.8, -0.0], [0.1, -0.3, 0.2, 0.3, 0.4, 0.4, 1.0, -0.6],
         [0.7, -0.1, 0.1, 0.2, 0.4, -0.7, 0.1, 0.1], [0.9, 0.7, -0.2, -0.2, -0.5, 0.0, -0.1, 0.5],
         [0.7, -0.1, -0.6, 0.3, -0.8, 0.6, 0.5, 0.8], [0.9, 0.1, 0.5, 0.5, 0.6, 0.7, -0.2, -0.8],
         [-0.3, 0.3, -0.2, 0.6, 0.1, -0.7, 0.9, -0.4], [0.8, 0.9, 0.6, -0.7, -0.2, 0.2, 1.0, -0.6],
         [0.8, 0.4, 0.4, -0.2, -0.3, 0.9, -0.6, -0.3], [0.6, 0.6, 0.5, -0.6, 0.1, 0.5, 0.9, -0.6],
         [0.5, 0.2, 0.2, 0.9, 0.4, 0.8, 0.6, 0.3], [-0.2, -0.5, 0.2, -0.7, 0.6, 0.8, 0.3, 0.8]]
    d = pd.DataFrame(M, columns=cols)
    d.insert(0, "Time", np.arange(1, 15))
    kw = dict(columns=" ".join(cols), target="c0", lib="1 12", pred="13 14", E=8, embedded=True)
    a = _ref(pyEDM.Simplex, d, returnObject=True, **kw)
    b = _ref(EDM.Simplex, d, returnObject=True, device=device, **kw)
    np.testing.assert_array_equal(np.asarray(b.knn_neighbors), np.asarray(a.knn_neighbors))
    _same(a.Projection, b.Projection)
    diff = rng.standard_normal((50, 12))  # row_distances is NumPy's column-major sum
    np.testing.assert_array_equal(row_distances(diff),
                                  np.sqrt(np.sum(np.asfortranarray(diff) ** 2, axis=1)))


@pytest.mark.parametrize("D", [3, 5, 8, 9, 12, 16])
def test_kdtree_distances_are_scipys(D):
    """pyEDM's knn_distances come from scipy's KDTree, which adds squares in four running
    sums: kdtree_distances has its bits (NumPy's pairwise or a left-to-right sum differ
    in the last bit for 8 coordinates or more on 15-30% of these distances)."""
    from scipy.spatial import KDTree

    rng = np.random.default_rng(D)
    X = np.round(rng.standard_normal((400, D)), 3) * 1.37
    q = X[:50] + 0.011
    d, i = KDTree(X).query(q, k=5)
    np.testing.assert_array_equal(kdtree_distances(X[i] - q[:, None, :]), d)


@pytest.mark.parametrize("kind", KINDS)
def test_untied_data_keep_the_fast_path(kind, device, monkeypatch):
    """Unrounded data: no tie, so the fused pipeline runs (general path patched to fail).

    Its results are those of tests/test_compat_pyedm_parity.py's tolerance (1e-9: the
    same neighbours, float64 sums in another order on the device); rho of
    PredictNonlinear is pyEDM's 6-digit rounding (1.01e-6). S-map coefficients are
    left out: the fused solver and numpy's lstsq part at ~1e-7 on these correlated
    lags (a conditioning matter, not a neighbour one)."""
    d = _lorenz(decimals=None)
    assert not univariate_ties(d["x"].to_numpy(float), 2 if kind == "ccm" else 3, -1)
    ref = _oracle(kind, d)
    _forbid_general(monkeypatch)
    got = _fast(kind, d, device)
    cols = [c for c in ref.columns if not c.startswith(("C0", "\u2202"))]
    tol = 1.01e-6 if kind == "nonlinear" else 1e-9
    for c in cols:
        np.testing.assert_allclose(got[c].to_numpy(float), ref[c].to_numpy(float), atol=tol,
                                   rtol=0, equal_nan=True, err_msg=c)


def test_has_distance_ties_small_cases():
    """Hand-checked: 0 is 1 from both 1 and -1 (a tie); on 0, 1, 3 every row's two
    distances differ (1/3, 1/2, 3/2); a duplicate point is a tie at distance 0 for a
    third point only through equal distances to the pair."""
    assert has_distance_ties(np.array([[0.0], [1.0], [-1.0]]))
    assert not has_distance_ties(np.array([[0.0], [1.0], [3.0]]))
    assert has_distance_ties(np.array([[0.0], [2.0], [2.0]]))  # 0 -> 2 twice
    assert not has_distance_ties(np.array([[0.0, 0.0], [1.0, 0.0]]))  # fewer than 3 rows
    assert univariate_ties(np.array([0.1, 0.2, 0.1, 0.2, 0.3]), 1, -1)


def test_long_continuous_series_skip_the_quadratic_check():
    """Past ALWAYS_CHECK values only quantised or repeating series are checked."""
    from pyedmcl.compat._tie_check import ALWAYS_CHECK, may_tie, univariate_ties

    rng = np.random.default_rng(0)
    cont = rng.standard_normal(ALWAYS_CHECK + 500)
    assert not may_tie(cont) and not univariate_ties(cont, 3, -1)
    assert may_tie(np.round(cont, 2)) and may_tie(np.r_[cont, cont[:1]])
    assert may_tie(cont[:ALWAYS_CHECK])
    assert univariate_ties(np.round(cont, 1), 2, -1)  # a 0.1 grid of 2,500 values ties
