"""Ties at the threshold on quantized data, decided as each oracle decides them.

Data on a 0.1 grid (float32-representable: pyunicorn stores series as float32) with a
radius equal to an attained distance, so many cells sit exactly at the radius.
``threshold_rule="distance"`` must give pyunicorn's recurrence matrix (histograms and
counts exactly, measures to 1e-9: pyunicorn adds 1e-8 to denominators);
``"squared"`` PyRQA's (its OpenCL kernels, float64 and float32, whose ``sum += diff *
diff`` the OpenCL compilers contract into fma) exactly.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from clkernels import select_device
from pyedmcl.rqa._oracles import pyrqa_run, pyunicorn_measures, pyunicorn_rp
from pyedmcl.rqa.threshold import kernel_threshold, recurrent

ORACLE_PLATFORM = select_device(CPU_DEVICE).platform_name
UNI = {"euclidean": "euclidean", "maximum": "supremum", "manhattan": "manhattan"}


def quantized(n: int, step: float = 0.1, seed: int = 3) -> np.ndarray:
    """A random walk rounded to a grid of ``step``, centred on the grid, as float32 values."""
    x = np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 0.3
    x = np.round(x / step) * step
    x -= np.round(x.mean() / step) * step
    return x.astype(np.float32).astype(np.float64)


def recorded_quantized() -> np.ndarray:
    """A real record on a 0.1 grid: weekly flow S12CD+S333 (Everglades, pyEDM's data),
    z-scored and rounded to one decimal, as float32 values."""
    pytest.importorskip("pyEDM", reason="the record is pyEDM's package data")
    import importlib.resources

    path = importlib.resources.files("pyEDM") / "data" / "S12CD-S333-SumFlow_1980-2005.csv"
    s = np.loadtxt(str(path), delimiter=",", skiprows=1, usecols=1)
    z = np.round((s - s.mean()) / s.std(), 1)
    return z.astype(np.float32).astype(np.float64)


def tied_radii(x: np.ndarray, E: int, metric: str, k: int = 3) -> list[float]:
    """The ``k`` most frequent positive distances (pyunicorn's values): radii with ties."""
    d = pyunicorn_rp(x, E=E, tau=1, radius=1.0, metric=metric).distance_matrix(UNI[metric])
    v, c = np.unique(d[d > 0], return_counts=True)
    return [float(r) for r in v[np.argsort(-c, kind="stable")[:k]]]


def _hist_eq(ours, theirs) -> bool:
    theirs = np.trim_zeros(np.asarray(theirs).astype(np.int64), "b")
    ours = np.trim_zeros(np.asarray(ours).astype(np.int64), "b")
    return ours.size == theirs.size and bool(np.array_equal(ours, theirs))


def _around(v, dt, k: int = 3) -> list:
    """``v`` and its ``k`` neighbours on each side in ``dt``."""
    out, lo, hi = [dt(v)], dt(v), dt(v)
    for _ in range(k):
        lo, hi = np.nextafter(lo, dt(-np.inf)), np.nextafter(hi, dt(np.inf))
        out += [lo, hi]
    return out


def test_kernel_threshold_decides_like_the_rule():
    """d < kernel_threshold(r) equals the rule written plainly on the values around the
    threshold, around r and around r * r."""
    rng = np.random.default_rng(0)
    for dt in (np.float64, np.float32):
        for r in [0.1, 0.2, 0.3, 0.7, 1.1, 2.0, *rng.random(100) * 3]:
            for metric in ("euclidean", "maximum", "manhattan"):
                for rule in ("distance", "squared"):
                    t = dt(kernel_threshold(r, metric, dt, rule))
                    d = np.array(_around(t, dt) + _around(r, dt) + _around(r * r, dt), dt)
                    assert np.array_equal(d < t, recurrent(d, r, metric, rule)), (dt, r, metric,
                                                                                 rule)


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_ties_pyunicorn_float64(device, metric):
    x = quantized(500)
    assert _ties_pyunicorn(device, metric, x) or metric != "euclidean"  # rules disagree


def test_ties_pyunicorn_recorded(device):
    """The held-out real record (quantized): every measure as pyunicorn's, Euclidean."""
    _ties_pyunicorn(device, "euclidean", recorded_quantized()[:700])


def _ties_pyunicorn(device, metric, x) -> bool:
    """Every tied radius as pyunicorn; returns whether the "squared" rule disagreed
    somewhere (the data then exercise a tie the rules decide differently)."""
    differs = False
    for E in (2, 3):
        for r in tied_radii(x, E, metric):
            rp = pyunicorn_rp(x, E=E, tau=1, radius=r, metric=metric)
            res = pe.rqa(x, E=E, radius=r, metric=metric, dtype="float64", w_min=1,
                         device=device)
            assert res.n_recurrences == int(rp.R.sum()), (E, r)
            assert _hist_eq(res.diagonal_hist, rp.diagline_dist())
            assert _hist_eq(res.vertical_hist, rp.vertline_dist())
            assert _hist_eq(res.white_hist, rp.white_vertline_dist())
            for k, v in pyunicorn_measures(rp, 2, 2, 1).items():
                assert res.measures[k] == pytest.approx(v, rel=1e-9, abs=0), (k, E, r)
            sq = pe.rqa(x, E=E, radius=r, metric=metric, dtype="float64",
                        threshold_rule="squared", device=device)
            differs |= sq.n_recurrences != res.n_recurrences
    return differs


def test_ties_pyunicorn_float32(device):
    """float32 on a dyadic grid (every difference and square exact in float32): the
    float32 path decides every tie as pyunicorn's float64 does."""
    x = quantized(400, step=0.125, seed=5)
    for metric in ("euclidean", "maximum"):
        for r in tied_radii(x, 3, metric, 2):
            rp = pyunicorn_rp(x, E=3, tau=1, radius=r, metric=metric)
            res = pe.rqa(x, E=3, radius=r, metric=metric, dtype="float32", device=device)
            assert res.settings["dtype"] == "float32"
            assert res.n_recurrences == int(rp.R.sum()), (metric, r)
            assert _hist_eq(res.diagonal_hist, rp.diagline_dist())
            assert _hist_eq(res.vertical_hist, rp.vertline_dist())


def test_float32_numpy_reference_on_grid(device):
    """0.1 grid in float32 (differences round): the unchecked kernels' decision (EXACT=0)
    is the rule applied to float32 squared distances summed as the kernels sum them
    (NumPy, no FMA); the default float32 path decides as float64 (the rule applied to
    the float64 squared distances)."""
    from pyedmcl.rqa.exact import unchecked

    x = quantized(300)
    xs = x.astype(np.float32)  # centred on the grid: the float32 path's shift is 0
    a = np.stack([xs[m: m + 298] for m in range(3)], axis=1)
    diff = a[:, None, :] - a[None, :, :]
    d2 = {"distance": diff[..., 0] * diff[..., 0], "squared": diff[..., 0] * diff[..., 0]}
    for m in (1, 2):
        sq = diff[..., m] * diff[..., m]
        d2["distance"] = d2["distance"] + sq
        # "squared" sums by fma() as PyRQA's contracted kernels: the float64 sum of the
        # exact product and a float32 is rounded once more to float32 (53 >= 2 * 24 + 2 bits:
        # the double rounding is innocuous)
        d2["squared"] = (diff[..., m].astype(np.float64) ** 2 + d2["squared"]).astype(np.float32)
    a64 = np.stack([x[m: m + 298] for m in range(3)], axis=1)
    d64 = ((a64[:, None, :] - a64[None, :, :]) ** 2).sum(-1)  # the same order: m = 0, 1, 2
    for r in tied_radii(x, 3, "euclidean", 2) + [0.3, 0.5]:
        for rule in ("distance", "squared"):
            with unchecked():
                res = pe.rqa(x, E=3, radius=r, dtype="float32", threshold_rule=rule,
                             device=device)
            want = int(recurrent(d2[rule], r, "euclidean", rule).sum())
            assert res.n_recurrences == want, (r, rule)
            res = pe.rqa(x, E=3, radius=r, dtype="float32", threshold_rule=rule, device=device)
            if rule == "distance":  # float64 sums without fma: the reference above
                assert res.n_recurrences == int(recurrent(d64, r, "euclidean", rule).sum())
            ref = pe.rqa(x, E=3, radius=r, dtype="float64", threshold_rule=rule, device=device)
            assert res.n_recurrences == ref.n_recurrences, (r, rule)


@pytest.mark.parametrize(("dtype", "pyrqa_dtype"), [("float64", "float64"),
                                                   ("float32", "float64"),
                                                   ("unchecked", "float32")])
def test_ties_pyrqa_squared(device, dtype, pyrqa_dtype):
    """The squared rule: float64 and float32 (deciding as float64) equal PyRQA in float64;
    the unchecked float32 kernels (EXACT=0) equal PyRQA in float32."""
    from pyedmcl.rqa.exact import unchecked

    x = quantized(500)
    for r in tied_radii(x, 2, "euclidean", 2) + [0.3, 0.5]:
        pr, _ = pyrqa_run(x, E=2, tau=1, radius=r, theiler=1, dtype=pyrqa_dtype,
                          platform=ORACLE_PLATFORM)
        with unchecked() if dtype == "unchecked" else contextlib.nullcontext():
            res = pe.rqa(x, E=2, radius=r, dtype="float32" if dtype == "unchecked" else dtype,
                         threshold_rule="squared", device=device)
        assert res.n_recurrences == int(pr.number_of_recurrence_points), r
        assert _hist_eq(res.diagonal_hist, pr.diagonal_frequency_distribution)
        assert _hist_eq(res.vertical_hist, pr.vertical_frequency_distribution)
        assert _hist_eq(res.white_hist, pr.white_vertical_frequency_distribution)


def test_fixed_rate_ties_pyunicorn(device):
    """Fixed RR on quantized data: pyunicorn's threshold and its count, exactly."""
    from pyunicorn.timeseries import RecurrencePlot

    x = quantized(400)
    for rate in (0.02, 0.05, 0.1):
        for metric in ("euclidean", "maximum"):
            rp = RecurrencePlot(x, metric=UNI[metric], recurrence_rate=rate, dim=2, tau=1,
                                silence_level=3)
            res = pe.rqa(x, E=2, recurrence_rate=rate, metric=metric, dtype="float64",
                         device=device)
            assert res.n_recurrences == int(rp.R.sum()), (rate, metric)
            assert res.settings["recurrence_rate"] == rate
            assert _hist_eq(res.diagonal_hist, rp.diagline_dist())


def test_fixed_rate_exact_count(device):
    """Fixed RR: the cells below pyunicorn's order statistic recur, none at it (float32
    included: no cell at the threshold slips in through fl(r * r)). Cross-RQA has no
    tie there, so exactly k = int(rate * (n_cells - 1)) cells recur; in auto-RQA each
    distance has its mirror twin, so k or k - 1 (as the NumPy order statistic says)."""
    from pyedmcl.data import logistic_map

    x = logistic_map(700, r=3.9, x0=0.4, burn=0)
    y = logistic_map(500, r=3.8, x0=0.3, burn=0)
    a = np.stack([x[:-1], x[1:]], axis=1)
    d2 = ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1).ravel()
    for dtype in ("float64", "float32"):
        for rate in (0.01, 0.05):
            res = pe.cross_rqa(x, y, E=2, recurrence_rate=rate, dtype=dtype, device=device)
            assert res.n_recurrences == int(rate * (699 * 499 - 1)), (dtype, rate)
            res = pe.rqa(x, E=2, recurrence_rate=rate, dtype=dtype, device=device)
            k = int(rate * (d2.size - 1))
            want = int((d2 < np.partition(d2, k)[k]).sum())
            assert want in (k - 1, k)
            assert res.n_recurrences == want, (dtype, rate)


def test_bad_rule():
    with pytest.raises(ValueError, match="threshold_rule"):
        pe.rqa(np.arange(20.0), radius=1.0, threshold_rule="sqrt")


def _mix(h: int) -> int:
    """splitmix64's output function on a 64-bit integer."""
    m = (1 << 64) - 1
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & m
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & m
    return h ^ (h >> 31)


def _pair(seed: int, s: int, nr: int, nc: int) -> tuple[int, int]:
    """Pair ``s`` of the rate search's sample of ``seed`` (key: the mix of seed GOLDEN)."""
    golden, m = 0x9E3779B97F4A7C15, (1 << 64) - 1
    h = _mix((_mix((seed * golden) & m) + s * golden) & m)
    return (h >> 32) * nr >> 32, (h & 0xFFFFFFFF) * nc >> 32


@pytest.mark.parametrize("metric", ["euclidean", "maximum", "manhattan"])
def test_sampled_rate_distances(metric, monkeypatch):
    """Above ``EXACT_CELLS`` the rate's order statistic comes from random pairs: their
    distances are the kernels' (coordinates summed in order, E = 9 included, where a
    NumPy row sum would pair them up), and the threshold is their order statistic; the
    pairs are pieces of ``PAIRS_PIECE`` (drawn on threads), pair ``s`` splitmix64's
    output of ``key + s GOLDEN`` split into a row and a column (here in Python integers)."""
    from pyedmcl.rqa import radius

    monkeypatch.setattr(radius, "EXACT_CELLS", 1000)
    monkeypatch.setattr(radius, "SAMPLES", 5000)
    monkeypatch.setattr(radius, "PAIRS_PIECE", 1200)  # 5 pieces, the last of 200

    x = np.random.default_rng(3).standard_normal(3000)
    y = np.random.default_rng(4).standard_normal(2000)
    for E, tau in ((3, 2), (9, 1)):
        nr, nc = x.size - (E - 1) * tau, y.size - (E - 1) * tau
        i, j = (np.array(a) for a in zip(*(_pair(12345, s, nr, nc) for s in range(5000)),
                                            strict=True))
        want = np.zeros(5000) if metric != "maximum" else None
        for m in range(E):
            d = np.abs(x[i + m * tau] - y[j + m * tau])
            term = d * d if metric == "euclidean" else d
            want = term if want is None else (np.maximum(want, term) if metric == "maximum"
                                              else want + term)
        got = radius.sampled_dist(x, y, i, j, E, tau, metric)
        assert np.array_equal(got, want), (E, metric)
        r, thr = radius.threshold_for_rate(x, y, 0.1, E=E, tau=tau, metric=metric)
        k = int(0.1 * (5000 - 1))
        v = np.partition(want, k)[k]
        assert r == (float(np.sqrt(v)) if metric == "euclidean" else float(v))


def test_kth_smallest_equals_partition(monkeypatch):
    """The bracketed selection gives np.partition's k-th value for every k tried, ties and
    a value repeated across the bracket included, and through its fallback when the
    bracket misses (a subsample that is not representative of the data)."""
    from pyedmcl.rqa import radius

    rng = np.random.default_rng(8)
    a = np.round(rng.standard_normal(1 << 20) ** 2, 2)  # many ties
    for k in (0, 1, 977, a.size // 3, a.size // 2, a.size - 2, a.size - 1):
        assert radius.kth_smallest(a, k) == np.partition(a, k)[k], k
    n = 1 << 20
    s = rng.permutation(n).astype(np.float64)
    monkeypatch.setattr(radius, "KTH_STRIDE", 1 << 18)
    mid = np.flatnonzero(np.abs(s - n / 2) < 3)[:4]  # the subsample: 4 values near n / 2
    s[mid], s[:: 1 << 18] = s[:: 1 << 18], s[mid].copy()
    calls = []
    real = np.partition
    monkeypatch.setattr(np, "partition", lambda x, k: calls.append(x.size) or real(x, k))
    for k in (5, n // 2, n - 7):
        assert radius.kth_smallest(s, k) == real(s, k)[k], k
    assert calls.count(n) == 2  # k = 5 and n - 7 missed the bracket: full partitions
