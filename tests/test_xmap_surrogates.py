"""The all-to-all map with surrogates: rho unchanged, the null per pair against the CCM
null path (itself checked against the observed CCM curve), the Zarr store (checksummed,
resumable, refused with other parameters), the FDR-controlled causal network on a
network of known adjacency, and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.cli.main import main as cli_main
from pyedmcl.data import logistic_network

NS = 39  # surrogates per target in these tests


def _net(N=6, n=300, seed=3):
    return logistic_network(N, n, seed=seed, coupling=0.3)


def test_rho_unchanged_and_null_matches_the_ccm_null(device):
    from clkernels import get_backend
    from pyedmcl.edm.ccm_null import null_curves
    from pyedmcl.edm.ccm_spec import CrossMapSpec
    from pyedmcl.primitives.stats import null_summary, surrogate_p
    from pyedmcl.xmap.xmap_null import surrogate_panel
    X, _ = _net()
    E = np.array([2, 3, 2, 3, 2, 3])
    plain = pe.xmap(X, E=E, device=device)
    r = pe.xmap(X, E=E, surrogates=NS, seed=5, device=device)
    np.testing.assert_array_equal(np.asarray(r.rho), np.asarray(plain.rho))
    assert r.surrogates == NS and r.p_value.shape == (6, 6)
    # reference: the CCM null path at full library for a few pairs, same surrogates
    be = get_backend(device)
    Xs = (X - X.mean(0)) / X.std(0)  # rho is invariant to each series' affine map
    S = surrogate_panel(X.T.copy(), NS, "ebisuzaki", None, 5, np.float64)
    for i, j in ((4, 0), (1, 5), (0, 3)):
        spec = CrossMapSpec(E=int(E[j]), tau=1, Tp=0, k=int(E[j]) + 1, radius=0,
                            sizes=np.array([X.shape[0]]), sample=1, entropy=0, random=False,
                            replacement=False)
        null = null_curves(be, "float", Xs[:, i], S[j * NS:(j + 1) * NS], spec)[0]
        m, q = null_summary(null)
        assert abs(m - r.null_mean[i, j]) < 1e-5 and abs(q - r.null_q95[i, j]) < 1e-5
        assert abs(surrogate_p(r.rho[i, j], null) - r.p_value[i, j]) <= 1 / (NS + 1) + 1e-9


def test_store_resumes_and_checks_the_null(tmp_path):
    zarr = pytest.importorskip("zarr")
    X, _ = _net(6, 300)
    kw = dict(E=2, surrogates=NS, seed=2, device=CPU_DEVICE)
    ref = pe.xmap(X, **kw)
    out = tmp_path / "s.zarr"
    r = pe.xmap(X, out=out, block_rows=2, **kw)
    for k in ("rho", "p_value", "null_mean", "null_q95"):
        np.testing.assert_array_equal(np.asarray(getattr(r, k)[:]), getattr(ref, k))
    assert pe.xmap_verify(out).ok
    g = zarr.open_group(str(out), mode="r+")
    assert g.attrs["pyedmcl_xmap"]["seed"] == 2 and g["p_value"].chunks == (2, 6)
    g["p_value"][2, 1] = 0.5  # a flipped p-value fails its block's checksum
    chk = pe.xmap_verify(out)
    assert chk.bad == [1]
    again = pe.xmap(X, out=out, E=2, surrogates=NS, device=CPU_DEVICE)  # the stored seed
    assert sum(again.blocks_per_device.values()) == 1
    np.testing.assert_array_equal(np.asarray(again.p_value[:]), ref.p_value)
    opened = pe.xmap_open(out)
    assert opened.surrogates == NS
    np.testing.assert_array_equal(np.asarray(opened.null_q95[:]), ref.null_q95)
    with pytest.raises(ValueError, match="parameters differ: surrogates=39 .now 19."):
        pe.xmap(X, out=out, E=2, surrogates=19, device=CPU_DEVICE)
    plain = tmp_path / "p.zarr"  # a store without surrogates has no null arrays
    pe.xmap(X, out=plain, E=2, device=CPU_DEVICE)
    assert "p_value" not in zarr.open_group(str(plain), mode="r")
    with pytest.raises(ValueError, match="computed with surrogates"):
        pe.causal_network(plain)


def test_causal_network_finds_the_drivers():
    X, A = _net(6, 400, seed=3)
    r = pe.xmap(X, E=2, surrogates=199, seed=1, device=CPU_DEVICE)
    edges = pe.causal_network(r)  # BH at 0.05 over 30 pairs
    found = {(s, t) for s, t in zip(edges["source"], edges["target"], strict=True)}
    true = {(int(i), int(j)) for i, j in zip(*np.nonzero(A), strict=True)}
    assert found == true  # every true edge i -> j, and no other pair
    assert list(edges.columns) == ["source", "target", "rho", "p_value", "q_value",
                                   "null_mean", "null_q95"]
    assert (edges["q_value"] <= 0.05).all() and (edges["q_value"] >= edges["p_value"]).all()
    assert len(pe.causal_network(r, method="none")) >= len(edges)
    # p = 1/20 (19 surrogates, none above rho) is significant at 0.05 despite float32
    r19 = pe.xmap(X, E=2, surrogates=19, seed=1, device=CPU_DEVICE)
    e19 = pe.causal_network(r19, method="none")
    assert len(e19) >= 4 and (e19["p_value"] <= 0.0500001).all()
    off = ~np.eye(6, dtype=bool)
    assert len(e19) == int((r19.p_value[off] <= 0.0500001).sum())
    assert len(pe.causal_network(r, method="bonferroni")) <= len(edges)
    with pytest.raises(ValueError, match="alpha=1.5 is out of range"):
        pe.causal_network(r, alpha=1.5)
    with pytest.raises(ValueError, match="method='fdr' is invalid"):
        pe.causal_network(r, method="fdr")


def test_graph_needs_networkx_or_gives_a_digraph():
    X, _ = _net(4, 150)
    r = pe.xmap(X, E=2, surrogates=9, seed=1, device=CPU_DEVICE)
    try:
        import networkx  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(ModuleNotFoundError, match="pip install networkx"):
            pe.causal_network(r, graph=True)
    else:
        g = pe.causal_network(r, graph=True, method="none")
        assert g.number_of_nodes() == 4
        assert g.number_of_edges() == len(pe.causal_network(r, method="none"))


def test_bad_surrogate_arguments(tmp_path):
    X, _ = _net(3, 100)
    with pytest.raises(ValueError, match="surrogates=-2 is out of range"):
        pe.xmap(X, E=2, surrogates=-2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="surrogate_method='x' is invalid"):
        pe.xmap(X, E=2, surrogates=3, surrogate_method="x", device=CPU_DEVICE)
    with pytest.raises(ValueError, match="scheduler= needs out="):
        pe.xmap(X, E=2, surrogates=3, scheduler="local")
    with pytest.raises(ValueError, match="largest allocation|host memory"):
        pe.xmap(X, E=2, surrogates=10**9, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="seed=-1"):
        pe.xmap(X, E=2, surrogates=3, seed=-1, device=CPU_DEVICE)


def test_cli_surrogates(tmp_path, capsys):
    pytest.importorskip("zarr")
    X, _ = _net(4, 150)
    src = tmp_path / "in.npy"
    np.save(src, X)
    out = tmp_path / "o.zarr"
    rc = cli_main(["xmap", str(src), "-o", str(out), "--E", "2", "--surrogates", "9",
                   "--seed", "3", "-q", "--device", CPU_DEVICE])
    assert rc == 0
    assert "9 surrogates per target" in capsys.readouterr().out
    ref = pe.xmap(X, E=2, surrogates=9, seed=3, device=CPU_DEVICE)
    np.testing.assert_array_equal(np.asarray(pe.xmap_open(out).p_value[:]), ref.p_value)
