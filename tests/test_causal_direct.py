"""Direct causal links: time-delayed CCM (pyEDM at every lag), partial cross mapping,
and ``pe.causal_network`` on a data matrix (reverse and indirect edges pruned).

Small data (N <= 500, 99 surrogates at most); simulation seeds below 100 (the accuracy
bench holds out seeds 1000 and up)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyedmcl as pe
from pyedmcl.data import logistic_graph

pyEDM = pytest.importorskip("pyEDM")

#: float64 skill against pyEDM's (both float64: only summation order differs)
RHO_TOL = 1e-12
R_CHAOTIC = (3.85, 3.95)


def _graph(edges, N, n, c, seed, r_range=R_CHAOTIC):
    A = np.zeros((N, N))
    for a, b in edges:
        A[a, b] = 1
    return logistic_graph(A, n, coupling=c, seed=seed, r_range=r_range)


@pytest.fixture(scope="module")
def pair():
    X = _graph([(0, 1)], 2, 200, 0.3, 7)
    return X[:, 0], X[:, 1]


def test_ccm_lag_scan_equals_pyedm_at_every_lag(pair):
    x, y = pair
    lags = [-3, -1, 0, 2]
    r = pe.ccm(x, y, E=2, Tp=lags, lib_sizes=[20, 150], sample=4, seed=5, dtype="float64",
               exclusion_radius=1)
    df = pd.DataFrame({"t": np.arange(x.size), "x": x, "y": y})
    for a, lag in enumerate(lags):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = pyEDM.CCM(dataFrame=df, columns="x", target="y", E=2, Tp=lag,
                            libSizes=[20, 150], sample=4, seed=5, exclusionRadius=1,
                            parallel=False)
        np.testing.assert_allclose(r.rho_xy[a], ref["x:y"], rtol=0, atol=RHO_TOL)
        np.testing.assert_allclose(r.rho_yx[a], ref["y:x"], rtol=0, atol=RHO_TOL)
    # x drives y: y's manifold recovers x's past best (a lag <= 0)
    assert r.best_lag_yx <= 0
    assert r.best_lag_xy == lags[int(np.argmax(r.rho_xy[:, -1]))]
    assert list(r.as_dataframe().columns) == ["Tp", "LibSize", "x:y", "y:x"]


def test_full_library_map_equals_pyedm(pair):
    from clkernels import get_backend
    from pyedmcl.network.crossmap import LibraryMap, lag_scan
    from pyedmcl.primitives.ranges import ccm_valid_times
    x, y = pair
    lags = np.array([-2, 0, 3])
    lm = LibraryMap(get_backend(None, None), x, E=3, tau=2, radius=2, real="double")
    got = lag_scan(lm, y, lags)[:, 0]
    df = pd.DataFrame({"t": np.arange(x.size), "x": x, "y": y})
    for a, lag in enumerate(lags):
        M = ccm_valid_times(x.size, 3, 2, int(lag)).size
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = pyEDM.CCM(dataFrame=df, columns="x", target="y", E=3, tau=-2, Tp=int(lag),
                            libSizes=[M], sample=1, exclusionRadius=2, parallel=False)
        assert abs(got[a] - ref["x:y"].iloc[0]) <= RHO_TOL


@pytest.fixture(scope="module")
def chain():
    # logistic_network's growth rates (3.6..3.9): strong enough synchrony that the
    # pairwise map also finds 0 -> 2
    return _graph([(0, 1), (1, 2)], 3, 500, 0.25, 5, r_range=(3.6, 3.9))


@pytest.fixture(scope="module")
def chain_net(chain):
    return pe.causal_network(chain, E=2, surrogates=99, seed=3)


def test_chain_has_no_indirect_edge(chain_net):
    pairwise = pe.causal_network(chain_net.xmap)
    assert (0, 2) in set(zip(pairwise["source"], pairwise["target"], strict=True))
    found = set(zip(chain_net.edges["source"], chain_net.edges["target"], strict=True))
    assert found == {(0, 1), (1, 2)}
    pr = chain_net.pruned
    ind = pr[(pr["source"] == 0) & (pr["target"] == 2)]
    assert ind["reason"].tolist() == ["indirect"] and ind["via"].tolist() == [1]
    assert (chain_net.edges["lag"] <= 0).all()


def test_partial_cross_map_separates_direct_from_indirect(chain):
    t = pe.partial_cross_map(chain, triples=[(0, 2, 1), (1, 2, 0)], E=2, lags=range(-3, 1),
                             surrogates=19, seed=2)
    ind, direct = t.iloc[0], t.iloc[1]
    assert ind["share"] < 0.7 <= direct["share"]
    assert direct["p_value"] == pytest.approx(1 / 20)


def test_strong_pair_has_no_reverse_edge():
    X = _graph([(0, 1)], 2, 400, 0.3, 11)
    net = pe.causal_network(pd.DataFrame(X, columns=["a", "b"]), E=2, surrogates=99, seed=4)
    pairwise = pe.causal_network(net.xmap)
    assert ("b", "a") in set(zip(pairwise["source"], pairwise["target"], strict=True))
    assert set(zip(net.edges["source"], net.edges["target"], strict=True)) == {("a", "b")}
    assert net.pruned[["source", "target", "reason"]].values.tolist() == [["b", "a", "reverse"]]
    assert net.pruned["lag"].iloc[0] > 0 >= net.edges["lag"].iloc[0]


def test_xmap_result_keeps_pairwise_behaviour(chain_net):
    edges = pe.causal_network(chain_net.xmap)
    assert list(edges.columns)[:3] == ["source", "target", "rho"]
    with pytest.raises(TypeError, match="lags"):
        pe.causal_network(chain_net.xmap, lags=range(-2, 3))


def test_bad_input_names_the_argument(chain):
    with pytest.raises(ValueError, match=r"surrogates=9 .*alpha=0.05.*surrogates >= 19"):
        pe.causal_network(chain, E=2, surrogates=9)
    with pytest.raises(ValueError, match=r"surrogates=49 .*alpha=0.01.*surrogates >= 99"):
        pe.causal_network(chain, E=2, surrogates=49, alpha=0.01)
    with pytest.raises(ValueError, match="lags=-400 is out of range"):
        pe.causal_network(chain, E=2, surrogates=19, lags=range(-400, 1))
    with pytest.raises(ValueError, match="Tp=600 is out of range"):
        pe.ccm(chain[:, 0], chain[:, 1], E=2, Tp=[0, 600], lib_sizes=[50])
    with pytest.raises(ValueError, match="at least 3"):
        pe.partial_cross_map(chain[:, :2], triples=[(0, 1, 1)])
    with pytest.raises(ValueError, match="surrogates=0"):
        pe.ccm(chain[:, 0], chain[:, 1], E=2, Tp=[0, 1], lib_sizes=[50], surrogates=5)
    from pyedmcl.network.pipeline import _warn_resolution
    with pytest.warns(RuntimeWarning, match=r"surrogates=199 is too few for 100 series.*"
                                            r"surrogates >= 1979"):
        _warn_resolution(100, 199, 0.05, "bh")
    with pytest.warns(RuntimeWarning, match="partial=True needs at least 3 series"):
        pe.causal_network(chain[:200, :2], E=2, surrogates=19, seed=1, partial=True)


def test_cli_network(tmp_path, chain):
    from pyedmcl.cli.main import main
    f = tmp_path / "chain.npy"
    np.save(f, chain[:300])
    out = tmp_path / "edges.csv"
    assert main(["network", str(f), "-E", "2", "--surrogates", "19", "--seed", "1",
                 "--lags=-3:3", "-o", str(out)]) == 0
    got = pd.read_csv(out)
    assert set(got["status"]) <= {"direct", "reverse", "indirect"}
    assert main(["network", str(f), "--surrogates", "9"]) == 2
    assert main(["network", str(f), "--lags", "3:-3"]) == 2


def test_partial_sort_keeps_the_full_order(pair):
    """float32 maps keep each query's nearest few rows (a partial sort); a lag wider than
    they cover re-sorts wider; either way the table is the full sort's."""
    from clkernels import get_backend
    from pyedmcl.network.crossmap import LibraryMap
    x, _ = pair
    lm = LibraryMap(get_backend(None, None), x, E=2, real="float")
    narrow = [lm.table(s, x.size) for s in (0, 3, -40)]  # -40: wider than kept, re-sorted
    lm._sort(lm.times.size)
    for (i0, w0), s in zip(narrow, (0, 3, -40), strict=True):
        i1, w1 = lm.table(s, x.size)
        np.testing.assert_array_equal(i0, i1)
        np.testing.assert_array_equal(w0, w1)


def test_lag_scan_without_sorted_rows_is_the_same(pair, monkeypatch):
    """More rows than the sorted rows hold: each lag runs CCM on its own, same skill."""
    import pyedmcl.edm.ccm as ccm_mod
    x, y = pair
    kw = dict(E=2, Tp=[-2, 1], lib_sizes=[30, 120], sample=3, seed=2, dtype="float64")
    ref = pe.ccm(x, y, **kw)
    monkeypatch.setattr(ccm_mod, "MAX_SORTED_ENTRIES", 100)
    got = pe.ccm(x, y, **kw)
    np.testing.assert_allclose(got.rho_xy, ref.rho_xy, rtol=0, atol=RHO_TOL)
    np.testing.assert_allclose(got.rho_yx, ref.rho_yx, rtol=0, atol=RHO_TOL)


def test_small_library_of_all_rows_is_the_full_map(pair):
    """A 'small' library of every admissible row is the full library: its skill equals
    the full-library map's (float64, no ties); smaller libraries draw random rows."""
    from clkernels import get_backend
    from pyedmcl.network.convergence import subsample_skill
    from pyedmcl.network.crossmap import LibraryMap, lag_scan
    x, y = pair
    lm = LibraryMap(get_backend(None, None), x, E=2, radius=1, real="double")
    for lag in (-2, 0, 1):
        rows = int(np.count_nonzero((lm.times + lag >= 0) & (lm.times + lag < y.size)))
        got = subsample_skill(lm, y, lag, rows, 2, np.random.default_rng(0))
        np.testing.assert_allclose(got[:, 0], lag_scan(lm, y, np.array([lag]))[0, 0],
                                   rtol=0, atol=RHO_TOL)
    small = subsample_skill(lm, y, -1, 20, 3, np.random.default_rng(1))
    assert small.shape == (3, 1) and len(set(small[:, 0])) == 3


def test_convergence_p_is_fishers_z_test():
    from scipy.stats import norm

    from pyedmcl.network.convergence import convergence_p
    full, small = np.array([0.8, 0.5, 0.3, -0.1, np.nan]), np.array([0.5, 0.45, 0.35, -0.3, 0.2])
    z = (np.arctanh(full) - np.arctanh(small)) / np.sqrt(1 / (50 - 3) + 1 / (997 - 3))
    want = np.where(np.isfinite(full) & (full > 0), norm.sf(z), 1.0)
    np.testing.assert_allclose(convergence_p(full, small, 50, 997), want, rtol=1e-12)


def test_fork_sibling_edge_is_nonconvergent():
    """Siblings of a common driver cross-map each other; that skill is reached by small
    libraries already (no convergence), the drivers' edges rise with the library."""
    X = _graph([(0, 1), (0, 2)], 3, 500, 0.3, 35)
    net = pe.causal_network(X, E=2, surrogates=99, seed=3)
    pairwise = set(zip(*(pe.causal_network(net.xmap)[c] for c in ("source", "target")),
                       strict=True))
    assert (1, 2) in pairwise
    assert set(zip(net.edges["source"], net.edges["target"], strict=True)) == {(0, 1), (0, 2)}
    sib = net.pruned[(net.pruned["source"] == 1) & (net.pruned["target"] == 2)]
    assert sib["reason"].tolist() == ["nonconvergent"] and sib["conv_p"].iloc[0] > 0.05
    assert (net.edges["conv_p"] <= 0.05).all()
    assert (net.edges["rho_small"] < net.edges["rho_lag"]).all()


def test_more_bad_input_names_the_argument(chain):
    with pytest.raises(ValueError, match=r"lags=\[1, 2\] has no lag <= 0"):
        pe.causal_network(chain, E=2, surrogates=19, lags=[1, 2])
    with pytest.raises(ValueError, match=r"min_library=3 is out of range; allowed: in \[6, 250\]"):
        pe.causal_network(chain, E=2, surrogates=19, min_library=3)
    with pytest.raises(ValueError, match="convergence=.yes. is invalid"):
        pe.causal_network(chain, E=2, surrogates=19, convergence="yes")
    x, y = chain[:200, 0], chain[:200, 1]
    with pytest.warns(RuntimeWarning, match=r"Tp=195 leaves 4 usable rows .* smallest library "
                                            r"size 50.*Tp within -149..149"):
        pe.ccm(x, y, E=2, Tp=[0, 195], lib_sizes=[50], sample=2, seed=1, dtype="float64")
    from pyedmcl.network.pipeline import _warn_resolution
    with pytest.warns(RuntimeWarning, match=r"method='bonferroni'.*surrogates >= 1799"):
        _warn_resolution(10, 199, 0.05, "bonferroni")


def test_cli_network_bad_flags(tmp_path, chain):
    from pyedmcl.cli.main import main
    f = tmp_path / "chain.npy"
    np.save(f, chain[:200])
    assert main(["network", str(f), "--surrogates", "19", "--lags=1:3"]) == 2
    assert main(["network", str(f), "--surrogates", "19", "--min-library", "3"]) == 2
    assert main(["network", str(f), "--surrogates", "19", "--convergence", "z"]) == 2
    out = tmp_path / "edges.csv"
    assert main(["network", str(f), "-E", "2", "--surrogates", "19", "--seed", "1",
                 "--convergence", "kendall", "-o", str(out)]) == 0
    assert {"conv_tau", "conv_tau_p"} <= set(pd.read_csv(out).columns)


def test_plot_draws_edges_and_checks_truth(chain_net):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    A = np.zeros((3, 3))
    A[0, 1] = A[1, 2] = 1
    ax = chain_net.plot(truth=A)
    assert len(ax.patches) == len(chain_net.edges) + 3  # one arrow per edge, one disc per node
    with pytest.raises(ValueError, match=r"truth has shape \(2, 2\); needs \(3, 3\)"):
        chain_net.plot(truth=np.zeros((2, 2)))


def test_kendall_convergence_is_scipys_tau_of_the_skill_curve(pair):
    """tau and p are scipy's kendalltau (one-sided, a rise) of the mean skill at each
    ladder size and the full library's skill against the library size."""
    from scipy.stats import kendalltau

    from clkernels import get_backend
    from pyedmcl.network.convergence import kendall_convergence, ladder, subsample_skill
    from pyedmcl.network.crossmap import LibraryMap, lag_scan
    x, y = pair
    lm = LibraryMap(get_backend(None, None), x, E=2, radius=1, real="double")
    rows = int(lm.times.size)
    sizes = ladder(20, rows)
    assert sizes[0] == 20 and sizes[-1] == rows // 2 and np.all(np.diff(sizes) > 0)
    full = lag_scan(lm, y, np.array([0]))[0]
    tau, p = kendall_convergence(lm, y, 0, sizes, 4, np.random.default_rng(7), full, rows)
    rng = np.random.default_rng(7)
    curve = [np.nanmean(subsample_skill(lm, y, 0, int(s), 4, rng)) for s in sizes]
    want = kendalltau(np.append(sizes, rows), np.append(curve, full[0]), alternative="greater")
    np.testing.assert_allclose([tau[0], p[0]], [want.statistic, want.pvalue], rtol=1e-12)
    assert tau[0] > 0  # a coupled pair's skill rises with the library


def test_kendall_rule_keeps_the_drivers_edges():
    """The drivers' edges rise with the library at every size (tau > 0, p <= alpha).
    The rule asks for a monotone rise, not a large one: the siblings' edge, whose skill
    rises a little but steadily, passes it (Fisher's z, the default, drops it:
    test_fork_sibling_edge_is_nonconvergent); edges it drops fail it."""
    X = _graph([(0, 1), (0, 2)], 3, 500, 0.3, 35)
    net = pe.causal_network(X, E=2, surrogates=99, seed=3, convergence="kendall")
    edges = net.edges
    assert {(0, 1), (0, 2)} <= set(zip(edges["source"], edges["target"], strict=True))
    assert ((edges["conv_tau"] > 0) & (edges["conv_tau_p"] <= 0.05)).all()
    non = net.pruned[net.pruned["reason"] == "nonconvergent"]
    assert (~((non["conv_tau"] > 0) & (non["conv_tau_p"] <= 0.05))).all()
    with pytest.raises(ValueError, match="convergence='z'.*'kendall'"):
        pe.causal_network(X, E=2, surrogates=19, convergence="z")
