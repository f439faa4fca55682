"""Contraction as a per-job choice: FMA=1 sums each squared coordinate difference
with OpenCL's ``fma()`` in knn.cl.mako and knn_scan.cl.mako.

``fma()`` is correctly rounded on every conforming device, so FMA=1 tables must be
bit-identical across devices and across every kernel variant (as FMA=0 ones are),
and differ from FMA=0 only by rounding (distances within 1e-6 relative; float32
data). The fused E-scan must stay bit-identical to the per-E kernel with FMA=1.
The cross map keeps one choice per job (stored with its parameters), so its rows
agree on every device of the job and with single-pair CCM made the same way.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import TEST_DEVICES

import pyedmcl as pe
from clkernels import get_backend
from clkernels.devices import list_devices
from pyedmcl._fma import job_fma
from pyedmcl.data import logistic_map
from pyedmcl.kernels.knn import KNN
from pyedmcl.primitives.knn import knn_table

#: configurations of every k-NN variant (float32): the FMA=1 table must not depend on it
CONFIGS = [
    dict(VARIANT="rows", WG=16, TILE=32, QB=1, EA=0, INS="reg", FLAG=1),
    dict(VARIANT="rows", WG=32, TILE=32, QB=1, EA=2, INS="reg", FLAG=1, SPLIT=4),
    dict(VARIANT="cols", WG=16, TILE=32, QB=8, EA=0, INS="reg", FLAG=1),
    dict(VARIANT="cols", WG=8, TILE=16, QB=8, EA=0, INS="local", FLAG=0),
    dict(VARIANT="vec", WG=8, TILE=32, QB=8, EA=0, INS="reg", FLAG=1),
    dict(VARIANT="vec", WG=16, TILE=32, QB=4, EA=0, INS="reg", FLAG=1, QQ=2, CB=4),
    dict(VARIANT="vec", WG=16, TILE=64, QB=8, EA=0, INS="reg", FLAG=1, SPLIT=2, CB=8),
]


def _fake(info, kind: str):
    return dataclasses.replace(info, device_type=kind)


def test_job_fma_policy(monkeypatch):
    info = list_devices()[0]
    gpu, cpu = _fake(info, "gpu"), _fake(info, "cpu")
    monkeypatch.delenv("PYEDMCL_FMA", raising=False)
    assert job_fma([gpu]) and job_fma([gpu, gpu])
    assert not job_fma([cpu]) and not job_fma([gpu, cpu]) and not job_fma([])
    monkeypatch.setenv("PYEDMCL_FMA", "1")
    assert job_fma([cpu]) and job_fma([gpu, cpu])
    monkeypatch.setenv("PYEDMCL_FMA", "0")
    assert not job_fma([gpu])
    monkeypatch.setenv("PYEDMCL_FMA", "maybe")
    with pytest.raises(ValueError, match="PYEDMCL_FMA"):
        job_fma([gpu])


def _tables(device, params, fma, E=5, k=6, n=240):
    be = get_backend(device)
    x = logistic_map(n + E - 1, r=3.9, x0=0.4, burn=0).astype(np.float32)
    spec = {"E": E, "TAU": 1, "K": k, "METRIC": "euclidean", "REAL": "float", "FMA": fma}
    pts = be.to_device(np.arange(n, dtype=np.int32))
    idx, dist = be.empty((n, k), np.int32), be.empty((n, k), np.float32)
    KNN.launch(be, params, spec, be.to_device(x), pts, n, pts, n, 1, 0, idx, dist)
    return be.to_host(idx), be.to_host(dist)


def test_fma_tables_identical_across_variants_and_devices():
    """Every variant on every CPU runtime present gives one FMA=1 table, bit for bit,
    and it differs from the FMA=0 table only by rounding (and does differ: the
    fma() path is really compiled)."""
    ref = None
    for device in TEST_DEVICES:
        for params in CONFIGS:
            i1, d1 = _tables(device, params, 1)
            if ref is None:
                ref = (i1, d1)
                i0, d0 = _tables(device, params, 0)
                np.testing.assert_allclose(d1, d0, rtol=1e-6)
                assert (d1 != d0).any(), "FMA=1 rounds like FMA=0 everywhere: not compiled?"
                assert (i1 == i0).mean() > 0.99  # a near-tie may swap two ranks
            np.testing.assert_array_equal(i1, ref[0], err_msg=f"{device} {params}")
            np.testing.assert_array_equal(d1, ref[1], err_msg=f"{device} {params}")


def test_fma_knn_table_matches_numpy(device, monkeypatch):
    monkeypatch.setenv("PYEDMCL_FMA", "1")
    x = np.random.default_rng(3).standard_normal(300)
    E, k = 4, 5
    idx, d = knn_table(x, E=E, knn=k, device=device)
    V = np.stack([x[j: j + x.size - E + 1] for j in range(E)], 1)
    D = np.sqrt(((V[:, None, :] - V[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    np.testing.assert_allclose(d, np.sort(D, axis=1)[:, :k], rtol=1e-5, atol=1e-6)


def test_fma_scan_bit_identical_to_per_E_simplex(device, monkeypatch):
    """The fused scan's tables are the per-E kernel's with FMA=1 as well: every
    prediction of the scan equals Simplex's at that E exactly."""
    from pyedmcl._precision import unstandardised
    from pyedmcl.edm.row_check import unchecked
    from pyedmcl.primitives.ranges import resolve
    from pyedmcl.primitives.scan_fused import fused_layout, run_fused
    monkeypatch.setenv("PYEDMCL_FMA", "1")
    x = logistic_map(160, r=3.9, x0=0.4, burn=0)
    kw = dict(lib="1 90", pred="60 160", Tp=2)
    plans = [resolve(x.size, E=E, **kw) for E in range(1, 7)]
    lay = fused_layout(plans)
    _, pred = run_fused(get_backend(device), lay, x, None, np.float32, "float",
                        predictions=True)
    for E in range(1, 7):
        # run_fused is given the raw series and scans take float32 alone: like with like
        with unstandardised(), unchecked():
            ref = pe.simplex(x, E=E, device=device, **kw)
        np.testing.assert_array_equal(pred[E - 1][lay.qemax >= E],
                                      ref.predicted.astype(np.float32), err_msg=f"E={E}")


def test_xmap_fma_job_choice_is_stored_and_bit_identical(tmp_path, monkeypatch):
    """fma=True on two devices at once (or one) gives one matrix, equal to single-pair
    CCM made with FMA on; the choice is stored and a resumed job keeps it."""
    rng = np.random.default_rng(7)
    X = np.cumsum(rng.standard_normal((90, 6)), axis=0).astype(np.float32)
    E = np.resize([2, 3, 5], 6)
    one = pe.xmap(X, E=E, device=TEST_DEVICES[0], fma=True)
    off = pe.xmap(X, E=E, device=TEST_DEVICES[0], fma=False)
    np.testing.assert_allclose(one.rho, off.rho, atol=1e-5)
    if len(TEST_DEVICES) >= 2:
        two = pe.xmap(X, E=E, devices=TEST_DEVICES[:2], block_rows=1, fma=True)
        np.testing.assert_array_equal(one.rho, two.rho)
    monkeypatch.setenv("PYEDMCL_FMA", "1")
    for i, j in ((0, 1), (3, 2), (5, 4)):
        c = pe.ccm(X[:, i], X[:, j], E=int(E[j]), lib_sizes=[90], random=False,
                   device=TEST_DEVICES[0])
        assert one.rho[i, j] == np.float32(c.rho_xy[0])
    monkeypatch.delenv("PYEDMCL_FMA")
    out = tmp_path / "f.zarr"
    r = pe.xmap(X, E=E, out=out, device=TEST_DEVICES[0], block_rows=2, fma=True)
    from pyedmcl.xmap.store import XmapStore
    assert XmapStore.open_existing(out).params["fma"] is True
    again = pe.xmap(X, E=E, out=out, device=TEST_DEVICES[0])  # resumes: keeps fma=True
    np.testing.assert_array_equal(again.rho[:], one.rho)
    np.testing.assert_array_equal(r.rho[:], one.rho)
    with pytest.raises(ValueError, match="overwrite"):
        pe.xmap(X, E=E, out=out, device=TEST_DEVICES[0], fma=False)


def test_gpu_rows_equal_cpu_rows(monkeypatch):
    """With one contraction choice (and correctly rounded / and sqrt, which the
    backends request where the device offers them) a GPU computes a CPU's cross-map
    matrix and k-NN tables bit for bit. Needs a GPU and a CPU runtime."""
    kinds = {d: get_backend(d).info.is_gpu for d in TEST_DEVICES}
    gpu = next((d for d, g in kinds.items() if g), None)
    cpu = next((d for d, g in kinds.items() if not g), None)
    if gpu is None or cpu is None:
        pytest.skip("needs a GPU and a CPU OpenCL runtime")
    if not get_backend(gpu).info.correct_div_sqrt:
        pytest.skip("this GPU has no correctly rounded float32 sqrt")
    rng = np.random.default_rng(7)
    X = np.cumsum(rng.standard_normal((300, 12)), axis=0).astype(np.float32)
    E = np.resize([1, 2, 3, 5, 8], 12)
    for fma in (False, True):
        a = pe.xmap(X, E=E, device=cpu, fma=fma).rho
        b = pe.xmap(X, E=E, devices=[gpu, cpu], block_rows=2, fma=fma).rho
        np.testing.assert_array_equal(a, b)
    x = logistic_map(2000, r=3.9, x0=0.4, burn=0)
    for fma in ("0", "1"):
        monkeypatch.setenv("PYEDMCL_FMA", fma)
        ig, dg = knn_table(x, E=6, device=gpu)
        ic, dc = knn_table(x, E=6, device=cpu)
        np.testing.assert_array_equal(ig, ic)
        np.testing.assert_array_equal(dg, dc)
