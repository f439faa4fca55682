"""The k-d tree back-end returns the exact kernel's k-NN tables (decision 0059), and
``auto`` picks it for CCM on CPUs at low E and large L from measured cost lines.

Oracle: the exact OpenCL kernel (its total order (distance, |p - l|, l), decision 0007).
On data rounded to one decimal (or integers) distances tie exactly and often; the tree
must then keep the same neighbours at the k-th place, in the same order, with the same
distances (recomputed in the kernel's arithmetic, so compared bit for bit).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from clkernels import get_backend
from clkernels.tuning.database import UserDB
from pyedmcl.neighbors import auto as A
from pyedmcl.neighbors import neighbor_backend, resolve_backend
from pyedmcl.neighbors.lorenz import lorenz63

pytest.importorskip("scipy")


def _series(decimals):
    y = lorenz63(700)
    return y if decimals is None else np.round(y, decimals)


@pytest.mark.parametrize("fma", ["auto", "1"])
@pytest.mark.parametrize("decimals", [None, 1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kdtree_table_is_the_exact_kernels(device, decimals, dtype, fma, monkeypatch):
    """Also with fused multiply-adds forced (``PYEDMCL_FMA=1``: a GPU's default, where
    the kernel's sums round differently; the tree's distances follow them)."""
    monkeypatch.setenv("PYEDMCL_FMA", fma)
    x = _series(decimals).astype(dtype)
    E, k = 3, 4
    npts = x.size - (E - 1)
    q = np.arange(npts, dtype=np.int32)
    rng = np.random.default_rng(3)
    libs = np.stack([np.sort(rng.choice(npts, 200, replace=False)) for _ in range(2)])
    for lp, radius in ((q, 0), (libs.astype(np.int32), 3), (q, -1)):
        ie, de = neighbor_backend("exact").search(x, E=E, tau=1, k=k, qpts=q, lpts=lp,
                                                  radius=radius, device=device)
        it, dt = neighbor_backend("kdtree").search(x, E=E, tau=1, k=k, qpts=q, lpts=lp,
                                                   radius=radius, device=device)
        np.testing.assert_array_equal(it, ie)
        np.testing.assert_array_equal(dt.astype(dtype), de.astype(dtype))
    if decimals is not None:  # the check is about ties: they must reach the k-th place
        _, d5 = neighbor_backend("exact").search(x, E=E, tau=1, k=k + 1, qpts=q, lpts=q,
                                                 radius=0, device=device)
        assert np.sum(d5[0, :, k - 1] == d5[0, :, k]) > 10


@pytest.mark.parametrize("decimals", [None, 1])
def test_ccm_auto_and_kdtree_equal_exact(decimals):
    """rho of every sample: the tree path and ``auto`` (default) equal the exact path to
    1e-12 (they are bit-identical tables; only the lookup launch differs)."""
    a = lorenz63(420)
    x, y = a[:400], a[5:405] ** 2 / 10
    if decimals is not None:
        x, y = np.round(x, decimals), np.round(y, decimals)
    kw = dict(E=3, lib_sizes=[20, 200, 390], sample=4, seed=2, dtype="float64",
              device=CPU_DEVICE)
    ref = pe.ccm(x, y, knn_method="exact", **kw)
    for b in ("kdtree", "auto"):
        r = pe.ccm(x, y, knn_method=b, **kw)
        for s, s0 in ((r.rho_xy_samples, ref.rho_xy_samples),
                      (r.rho_yx_samples, ref.rho_yx_samples)):
            np.testing.assert_allclose(s, s0, rtol=0, atol=1e-12)


def _fake(info, **kw):
    return dataclasses.replace(info, **kw)


def _ccm_entry(info, E, L, cost):
    return {"kernel": A.FAMILY, "version": A.MODEL_VERSION, "level": "device",
            "key": info.device_key, "spec_bucket": A.e_bucket(E), "size_bucket": f"n{L}",
            "size": L, "spec": {"E": E, "shape": "ccm"}, "params": {"BACKEND": "exact"},
            "cost": cost}


def test_ccm_cost_lines_decide_by_library_count():
    """fixed + per-library cost: the exact kernel's sorted rows pay once, the tree per
    library; Simplex-shape lookups ignore CCM entries."""
    info = get_backend(CPU_DEVICE).info
    UserDB(info).put("knn_backend/E4/n4096", _ccm_entry(
        info, 3, 4096, {"exact": [5.0, 0.001], "kdtree": [0.0, 0.1]}))
    assert A.choose(info, L=4096, E=3, shape="ccm", libraries=10).backend == "kdtree"
    assert A.choose(info, L=4096, E=3, shape="ccm", libraries=100).backend == "exact"
    UserDB(info).put("knn_backend/E4/n4096", _ccm_entry(  # approximate lines: never used
        info, 3, 4096, {"exact": [5.0, 0.001], "kdtree": [0.0, 0.1], "ivf": [0.0, 0.0]}))
    assert A.choose(info, L=4096, E=3, shape="ccm", libraries=10).backend == "kdtree"
    assert A.choose(info, L=4096, E=3).source != "user"
    with pytest.raises(ValueError, match="shape"):
        A.choose(info, L=4096, E=3, shape="xmap")


def test_ccm_shipped_crossovers_on_cpus_and_gpus():
    """The shipped CCM entries (global, CPU only): a CPU at low E and large L gets the
    tree; a small library, or many libraries of a few thousand points (the exact path's
    sorted rows are paid once), the exact kernel; a GPU keeps the exact kernel."""
    real = get_backend(CPU_DEVICE).info
    cpu = _fake(real, runtime="fakecl", name="Fake CPU", normalised_name="fake-cpu",
                device_type="cpu")
    pick = A.choose(cpu, L=5000, E=3, shape="ccm", libraries=30)
    assert (pick.backend, pick.source) == ("kdtree", "shipped:global")
    assert A.choose(cpu, L=12000, E=1, shape="ccm", libraries=30).backend == "kdtree"
    assert A.choose(cpu, L=250, E=3, shape="ccm", libraries=30).backend == "exact"
    assert A.choose(cpu, L=2000, E=3, shape="ccm", libraries=1000).backend == "exact"
    gpu = _fake(real, runtime="nvidia", name="Fake GPU", normalised_name="fake-gpu",
                device_type="gpu")
    assert A.choose(gpu, L=5000, E=3, shape="ccm", libraries=30).backend == "exact"
    be = get_backend(CPU_DEVICE)
    nb = resolve_backend("auto", be, L=5000, E=3, shape="ccm", libraries=30)
    assert nb.exact and nb.info.requested == "auto"
