"""CCM significance: the surrogate null on the device, p-values, convergence.

Oracles: the observed CCM curve itself (pyEDM-verified in test_edm_ccm.py) -- the null
machinery given the data as its "surrogates" must reproduce it, so the null differs
from the observed curve only in the target; SciPy for Kendall's tau and
Benjamini--Hochberg; a known unidirectionally coupled system (coupled logistic maps,
x drives y, Sugihara et al. 2012) with fixed seeds for the decision itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.data import coupled_logistic, logistic_map
from pyedmcl.primitives.stats import bh_adjust, convergence_fit, kendall_tau, surrogate_p

SIZES = [20, 50, 100, 200, 350]


def _pair(n=400):
    d = coupled_logistic(n, bxy=0.0, byx=0.1)  # x drives y, y does not drive x
    return d[:, 0], d[:, 1]


def test_true_direction_significant_reverse_and_independent_not(device):
    x, y = _pair()
    r = pe.ccm(x, y, E=2, lib_sizes=SIZES, sample=20, seed=1, surrogates=99, device=device)
    s = r.significance
    # rho_yx: y's manifold cross-maps x, evidence that x drives y (true)
    assert s.p_yx[-1] < 0.05 and r.rho_yx[-1] > s.null_yx_q95[-1]
    assert s.p_xy[-1] > 0.05  # y does not drive x
    conv = r.convergence
    assert conv.p_yx < 0.05 and conv.tau_yx > 0.9
    cdf = conv.as_dataframe()
    assert list(cdf["direction"]) == ["x:y", "y:x"] and cdf["p_value"][1] == conv.p_yx
    assert np.abs(conv.fitted(r.lib_sizes, "yx") - r.rho_yx).max() < 0.1  # a fitted curve
    z = logistic_map(400, r=4.0, x0=0.3141)  # independent of x
    ri = pe.ccm(x, z, E=2, lib_sizes=SIZES, sample=20, seed=2, surrogates=99,
                surrogate_method="random_shuffle", device=device)
    assert ri.significance.p_xy[-1] > 0.05 and ri.significance.p_yx[-1] > 0.05
    assert s.null_xy.shape == (len(SIZES), 99)
    df = r.as_dataframe()
    assert list(df.columns) == ["LibSize", "x:y", "y:x", "x:y p", "x:y null_mean",
                                "x:y null_q95", "y:x p", "y:x null_mean", "y:x null_q95"]
    assert np.array_equal(df["y:x p"].to_numpy(), s.p_yx)
    lo, hi = s.band("yx")
    assert (lo <= hi).all() and np.allclose(hi, s.null_yx_q95, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_null_of_the_data_is_the_observed_curve(device, dtype):
    """The null pipeline (one k-NN table per sampled library, every target looked up
    from it) given copies of the data as targets returns the observed curve: same
    libraries, same neighbours, same weights. Tolerances: 1e-12 in float64 (the two
    paths sum in the same order; bit-identical on the Intel CPU runtime), 1e-6 in
    float32 (float32 rho rounding)."""
    from clkernels import get_backend
    from pyedmcl._precision import prepare
    from pyedmcl.edm.ccm_null import kernel_series, null_curves
    from pyedmcl.edm.ccm_spec import CrossMapSpec
    x, y = _pair(300)
    kw = dict(E=3, tau=1, Tp=0, knn=None, exclusion_radius=1)
    r = pe.ccm(x, y, lib_sizes=[30, 120, 290], sample=6, seed=4, dtype=dtype, device=device,
               **kw)
    be = get_backend(device)
    prep = prepare([x, y], np.dtype(dtype), be.info.fp64, names=["x", "y"])
    xs = prep.series[0]
    ys = kernel_series(np.tile(y, (3, 1)), prep.dtype)
    spec = CrossMapSpec(E=3, tau=1, Tp=0, k=4, radius=1, sizes=np.array([30, 120, 290]),
                        sample=6, entropy=np.random.SeedSequence(4).entropy, random=True,
                        replacement=False)
    null = null_curves(be, prep.real, xs, ys, spec)
    tol = 1e-12 if dtype == "float64" else 1e-6
    assert np.abs(null - r.rho_xy[:, None]).max() <= tol


def test_reproducible_and_validated():
    x, y = _pair(200)
    kw = dict(E=2, lib_sizes=[30, 150], sample=5, seed=3, surrogates=19,
              surrogate_method="twin", surrogate_options={"threshold": 0.05},
              device=CPU_DEVICE)
    a, b = pe.ccm(x, y, **kw), pe.ccm(x, y, **kw)
    assert np.array_equal(a.significance.null_xy, b.significance.null_xy)
    assert np.all((a.significance.p_xy >= 1 / 20) & (a.significance.p_xy <= 1))
    assert pe.ccm(x, y, E=2, lib_sizes=[30], sample=2, device=CPU_DEVICE).significance is None
    with pytest.raises(ValueError, match="surrogates=-1 is out of range"):
        pe.ccm(x, y, E=2, lib_sizes=[30], surrogates=-1, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="surrogate_method='phase' is invalid"):
        pe.ccm(x, y, E=2, lib_sizes=[30], surrogates=5, surrogate_method="phase",
               device=CPU_DEVICE)
    with pytest.raises(ValueError, match="surrogate_options has unknown keys"):
        pe.ccm(x, y, E=2, lib_sizes=[30], surrogates=5, surrogate_options={"bogus": 1},
               device=CPU_DEVICE)


def test_surrogate_p():
    null = np.array([[0.1, 0.6, 0.5, 0.2], [np.nan, 0.9, 0.8, 0.95]])
    p = surrogate_p([0.5, 0.85], null)
    assert np.allclose(p, [(1 + 2) / 5, (1 + 2) / 4])  # NaN nulls are not counted
    assert np.isnan(surrogate_p([np.nan], null[:1]))[0]


def test_null_summary_matches_numpy():
    from pyedmcl.primitives.stats import null_summary
    a = np.random.default_rng(2).standard_normal((4, 5, 37))
    a[0, 1, :5] = np.nan
    a[1, 2, :] = np.nan
    a[2, 3, 1:] = np.nan  # one finite value
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        ref_m, ref_q = np.nanmean(a, axis=-1), np.nanquantile(a, 0.95, axis=-1)
    m, q = null_summary(a, 0.95)
    np.testing.assert_allclose(m, ref_m, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(q, ref_q, rtol=1e-13, atol=1e-15)


def test_kendall_tau_matches_scipy():
    st = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (5, 12, 60):
        x = rng.integers(0, 6, n).astype(float)  # ties in both
        y = x + rng.integers(0, 4, n)
        for alt in ("two-sided", "greater", "less"):
            t, p = kendall_tau(x, y, alternative=alt)
            ref = st.kendalltau(x, y, method="asymptotic", alternative=alt)
            assert t == pytest.approx(ref.statistic, abs=1e-12)
            assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
    assert np.isnan(kendall_tau([1, 1, 1], [1, 2, 3])[0])
    with pytest.raises(ValueError, match="alternative"):
        kendall_tau([1, 2], [1, 2], alternative="up")


def test_bh_matches_scipy():
    st = pytest.importorskip("scipy.stats")
    p = np.random.default_rng(1).random(50) ** 3
    assert np.allclose(bh_adjust(p), st.false_discovery_control(p), rtol=0, atol=1e-12)
    q = bh_adjust(np.array([[0.01, np.nan], [0.04, 0.03]]))
    assert np.isnan(q[0, 1]) and np.allclose(q[~np.isnan(q)], st.false_discovery_control(
        [0.01, 0.04, 0.03]))


def test_convergence_fit_recovers_a_curve():
    L = np.array([10, 20, 40, 80, 160, 320.0])
    rho = 0.8 * (1 - np.exp(-0.02 * L))
    a, g, rmse = convergence_fit(L, rho)
    assert a == pytest.approx(0.8, rel=0.02) and g == pytest.approx(0.02, rel=0.03)
    assert rmse < 0.01


def test_convergence_fit_keeps_rho_inf_a_correlation():
    """A skill still rising linearly at the largest library (no saturation in range): the
    unconstrained fit put rho_inf near 2 (seen on y:x of a CCM at N=5,000); constrained to
    [-1, 1] it is no worse than a fine brute-force grid over that range."""
    L = np.array([100.0, 2545.0, 4990.0])
    rho = np.array([-0.000279, 0.069248, 0.132965])
    a, g, rmse = convergence_fit(L, rho)
    assert -1.0 <= a <= 1.0
    gg = np.geomspace(0.01 / L.max(), 100 / L.min(), 4000)
    aa = np.linspace(-1, 1, 2001)
    sse = ((aa[None, :, None] * (1 - np.exp(-gg[:, None, None] * L)) - rho) ** 2).sum(-1)
    assert rmse <= np.sqrt(sse.min() / L.size) * 1.01 + 1e-6
