"""Recurrence networks on the device (the ``rqa_network`` family), on every device present.

Oracles: pyunicorn's ``RecurrenceNetwork`` (``threshold_rule="distance"``, float64,
quantized data with radii equal to attained distances, fixed radius and fixed RR), and a
NumPy reference of each kernel (the adjacency from the kernels' arithmetic, ``fma`` sums
emulated under ``"squared"``; triangles ``diag(A^3)``; BFS by dense boolean frontiers).
Every count is an integer, so counts must be equal and the measures built from them
agree with pyunicorn to 1e-12 relative (its own summation order of the same integers).
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from conftest import assert_network_matches_pyunicorn

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.fma_emulation import fma
from pyedmcl.kernels import rqa_network as K
from pyedmcl.rqa import network_device
from pyedmcl.rqa.distances import kernel_distances
from pyedmcl.rqa.distances import points as _points
from pyedmcl.rqa.threshold import kernel_threshold, recurrent

UNI = {"euclidean": "euclidean", "maximum": "supremum", "manhattan": "manhattan"}


def quantized(n: int, seed: int = 2) -> np.ndarray:
    """A random walk on a 0.1 grid, float32-representable (pyunicorn stores float32)."""
    x = np.round(np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 3) / 10
    return x.astype(np.float32).astype(np.float64)


def reference_adjacency(s, E, tau, radius, metric, dt, rule) -> np.ndarray:
    """``A = R - I``: the oracle's rule on the kernels' distances (NumPy)."""
    pts = _points(np.asarray(s, dtype=dt), E, tau)
    d = kernel_distances(pts, pts, metric, fma=(rule == "squared"))
    A = recurrent(d, radius, metric, rule)
    np.fill_diagonal(A, False)
    return A


def packed(A: np.ndarray) -> np.ndarray:
    """Rows of ``A`` as uint32 words, bit b of word w = column 32 w + b."""
    n = A.shape[0]
    nw = K.words(n)
    B = np.zeros((n, nw * 32), dtype=np.uint64)
    B[:, :n] = A
    return (B.reshape(n, nw, 32) << np.arange(32, dtype=np.uint64)).sum(axis=2).astype(np.uint32)


def reference_paths(A: np.ndarray) -> tuple[int, int]:
    """Sum and number of finite shortest-path lengths over ordered pairs (BFS, NumPy)."""
    total = count = 0
    for s in range(A.shape[0]):
        vis = np.zeros(A.shape[0], bool)
        vis[s] = True
        front, level = vis.copy(), 0
        while front.any():
            level += 1
            front = A[front].any(axis=0) & ~vis
            vis |= front
            total += level * int(front.sum())
            count += int(front.sum())
    return total, count


def test_fma_emulation_matches_exact_rounding():
    """``fma`` against exact rational arithmetic rounded once (float64; float32 by
    picking the nearest float32, ties to even)."""
    rng = np.random.default_rng(5)
    a = np.round(rng.standard_normal(1500) * 30) / 10 * rng.choice([1.0, 1e-3, 7.3], 1500)
    c = np.abs(rng.standard_normal(1500)) * rng.choice([1.0, 1e3, 1e-5], 1500)
    got = fma(a, a, c)
    want = np.array([float(Fraction(x) ** 2 + Fraction(z)) for x, z in zip(a, c, strict=True)])
    assert np.array_equal(got, want)
    a32, c32 = a.astype(np.float32), c.astype(np.float32)
    got32 = fma(a32, a32, c32)
    for x, z, g in zip(a32.tolist(), c32.tolist(), got32, strict=True):
        exact = Fraction(x) ** 2 + Fraction(z)
        lo = np.float32(float(exact))
        cands = [lo, np.nextafter(lo, np.float32(np.inf)), np.nextafter(lo, np.float32(-np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact),
                                         int(np.array(v).view(np.uint32)) & 1))
        assert g == best


@pytest.mark.parametrize("dtype,metric,rule", [
    ("float64", "euclidean", "distance"), ("float64", "euclidean", "squared"),
    ("float32", "euclidean", "squared"), ("float32", "manhattan", "distance"),
    ("float64", "maximum", "distance")])
def test_kernels_match_numpy_reference(device, dtype, metric, rule, monkeypatch):
    """Each kernel against its NumPy reference, launches cut small (tiles of rows,
    batches of sources) and the BFS sets in global scratch as well as in local memory."""
    be = get_backend(device)
    dt = np.dtype(dtype)
    s = quantized(131, seed=7).astype(dt)
    E, tau, radius = 3, 2, 0.9
    n = s.size - (E - 1) * tau
    A = reference_adjacency(s, E, tau, radius, metric, dt, rule)
    want_paths = reference_paths(A)
    thr = kernel_threshold(radius, metric, dt, rule)
    monkeypatch.setattr(network_device, "WORK_PER_LAUNCH", 4000)
    spec = K.NetworkSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                         fma=(rule == "squared"))
    x = be.to_device(s)
    adj, deg = be.empty(n * K.words(n), np.uint32), be.zeros(n, np.uint32)
    K.adjacency(be, spec, x, n, thr, r0=0, rows=n, adj=adj, deg=deg)
    assert np.array_equal(be.to_host(adj).reshape(n, -1), packed(A))
    for plocal in (True, False):
        monkeypatch.setattr(K, "local_sets_fit", lambda _be, _n, v=plocal: v)
        c = network_device.device_counts(be, s, E, tau, thr, metric, dt, rule, paths=True)
        assert np.array_equal(c["degree"], A.sum(axis=1))
        Ai = A.astype(np.int64)
        assert np.array_equal(c["tri2"], np.diag(Ai @ Ai @ Ai))
        assert (c["path_total"], c["path_count"]) == want_paths


@pytest.mark.parametrize("metric", ["euclidean", "maximum"])
def test_device_network_pyunicorn_ties(device, metric):
    """Radii equal to the most frequent attained distances (ties at the radius) and a
    fixed RR: degrees exactly, every measure to 1e-12 relative."""
    from pyunicorn.timeseries import RecurrenceNetwork

    x = quantized(300)
    probe = RecurrenceNetwork(x, metric=UNI[metric], dim=2, tau=1, threshold=1.0, silence_level=3)
    d = probe.distance_matrix(UNI[metric])
    v, cnt = np.unique(d[(d > 0) & (d < 1.5)], return_counts=True)
    radius = float(v[np.argmax(cnt)])
    for kw, ours in (({"threshold": radius}, {"radius": radius}),
                     ({"recurrence_rate": 0.05}, {"recurrence_rate": 0.05})):
        net = RecurrenceNetwork(x, metric=UNI[metric], dim=2, tau=1, silence_level=3, **kw)
        r = pe.recurrence_network(x, E=2, metric=metric, dtype="float64", device=device, **ours)
        assert r.settings["method"] == "device"
        assert_network_matches_pyunicorn(r, net)


@pytest.mark.parametrize(("dtype", "pyrqa_dtype"), [("float64", "float64"),
                                                   ("float32", "float64"),
                                                   ("unchecked", "float32")])
def test_device_network_pyrqa_squared(device, dtype, pyrqa_dtype):
    """``threshold_rule="squared"`` against PyRQA's recurrence matrix (its OpenCL kernels,
    fma-contracted sums) at a radius tied with many distances: each degree is PyRQA's
    row sum minus the main diagonal; float32 decides as float64 (PyRQA in float64), the
    unchecked float32 kernels as PyRQA in float32."""
    import contextlib

    import pyrqa.metric as pm
    from conftest import CPU_DEVICE
    from pyrqa.analysis_type import Classic
    from pyrqa.computation import RPComputation
    from pyrqa.neighbourhood import FixedRadius
    from pyrqa.settings import Settings
    from pyrqa.time_series import TimeSeries

    from clkernels import select_device
    from pyedmcl.rqa._oracles import pyrqa_opencl
    from pyedmcl.rqa.exact import unchecked

    x = quantized(260, seed=9)
    x -= np.round(x.mean() * 10) / 10  # centred on the grid: the float32 path shifts by 0
    pts = _points(x, 2, 1)
    d = np.sqrt(kernel_distances(pts, pts, "euclidean"))
    v, cnt = np.unique(d[(d > 0) & (d < 1.0)], return_counts=True)
    for radius in (float(v[np.argmax(cnt)]), 0.5):
        ts = TimeSeries(x, embedding_dimension=2, time_delay=1, dtype=np.dtype(pyrqa_dtype))
        st = Settings(ts, analysis_type=Classic, neighbourhood=FixedRadius(radius),
                      similarity_measure=pm.EuclideanMetric, theiler_corrector=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comp = RPComputation.create(
                st, opencl=pyrqa_opencl(select_device(CPU_DEVICE).platform_name), verbose=False)
            R = np.asarray(comp.run().recurrence_matrix_reverse)[::-1].astype(np.int64)
        with unchecked() if dtype == "unchecked" else contextlib.nullcontext():
            net = pe.recurrence_network(x, E=2, radius=radius, threshold_rule="squared",
                                        dtype="float32" if dtype == "unchecked" else dtype,
                                        device=device)
        assert np.array_equal(net.degree, R.sum(axis=1) - np.diag(R)), radius


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_device_equals_host_and_rqa_matrix(device, dtype):
    """Both rules: the device's counts are the host path's (same matrix, so the measures
    are equal bit for bit), and the links are rqa()'s recurrences off the main diagonal."""
    x = quantized(250, seed=4)
    for rule in ("distance", "squared"):
        kw = dict(E=2, radius=0.7, dtype=dtype, threshold_rule=rule, device=device)
        dev = pe.recurrence_network(x, **kw)
        host = pe.recurrence_network(x, method="host", **kw)
        assert np.array_equal(dev.degree, host.degree)
        assert np.array_equal(dev.local_clustering, host.local_clustering)
        for k in ("transitivity", "global_clustering", "average_path_length", "link_density"):
            assert getattr(dev, k) == getattr(host, k), (rule, k)
        res = pe.rqa(x, E=2, radius=0.7, dtype=dtype, threshold_rule=rule, device=device)
        assert res.n_recurrences == 2 * dev.n_links + dev.n_nodes


def test_device_disconnected_empty_and_bad_method(device):
    """Paths only within components (igraph's unconn=True); a network without links
    gives nan for every ratio; a bad method is a ValueError naming it."""
    from pyunicorn.timeseries import RecurrenceNetwork

    x = np.concatenate([quantized(60, 1), quantized(60, 3) + 100.0]).astype(np.float32).astype(float)
    net = RecurrenceNetwork(x, metric="euclidean", threshold=0.6, silence_level=3)
    r = pe.recurrence_network(x, radius=0.6, dtype="float64", device=device)
    assert r.average_path_length == pytest.approx(net.average_path_length(), rel=1e-12)
    lone = pe.recurrence_network(np.arange(40.0), radius=0.5, dtype="float64", device=device)
    assert lone.n_links == 0 and np.isnan(lone.transitivity)
    assert np.isnan(lone.average_path_length) and lone.global_clustering == 0.0
    with pytest.raises(ValueError, match="method"):
        pe.recurrence_network(x, radius=0.6, method="gpu")


@pytest.mark.parametrize("local_sets", [True, False])
def test_network_kernels_oclgrind_clean(local_sets):
    """Every kernel, the BFS sets in local memory or in global scratch, launches cut
    small: no invalid access, race or uninitialised read, and the host path's counts.
    One variant per Oclgrind process: after the local-set kernel has run, Oclgrind 3's
    uninitialised-value plugin reports the global-scratch kernel's local list (filled
    by local atomics) as uninitialised, though that kernel alone, or run first, is clean
    and both give the host's counts."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind(f"""
        import numpy as np, pyedmcl as pe
        from pyedmcl.kernels import rqa_network as K
        from pyedmcl.rqa import network_device
        x = np.round(np.sin(np.arange(44) * 0.1) * 10) / 10  # a chain: many BFS levels
        network_device.WORK_PER_LAUNCH = 300
        host = pe.recurrence_network(x, E=2, tau=3, radius=0.25, dtype="float64",
                                     threshold_rule="squared", method="host")
        K.local_sets_fit = lambda be, n: {local_sets}
        dev = pe.recurrence_network(x, E=2, tau=3, radius=0.25, dtype="float64",
                                    threshold_rule="squared", path_lengths=True)
        assert np.array_equal(dev.degree, host.degree)
        assert dev.transitivity == host.transitivity
        assert dev.average_path_length == host.average_path_length
        print(dev.n_links, dev.average_path_length)
    """)
    assert out.strip()
