"""The end of a run on the device, on every platform present: ``rqa_collect`` (SYM's row
totals merged into the vertical and white ones, one past each histogram's last nonzero
bin, how many bins are nonzero), ``rqa_sparse`` (the nonzero bins gathered as pairs),
``rqa_count_sums`` (a column task's recurrences summed), and
:func:`pyedmcl.rqa.dnr.read_totals`, which reads those pairs (or, past its cap, each
histogram up to its last nonzero bin), against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl.kernels.rqa_lines import RQA_LINES
from pyedmcl.rqa import dnr


def _histograms(n: int, seed: int) -> list[np.ndarray]:
    """d, v, w, hv, hw: sparse 64-bit counts (some past 2^32), last bins of every kind:
    the last slot used, one far inside, none at all."""
    rng = np.random.default_rng(seed)
    out = []
    for end in (n, n // 3, 0, min(7, n), n - 1):
        h = np.zeros(n, np.uint64)
        if end:
            idx = rng.choice(end, size=min(end, 40), replace=False)
            h[idx] = rng.integers(1, 1 << 40, idx.size, dtype=np.uint64)
            h[end - 1] = rng.integers(1, 1 << 34, dtype=np.uint64)
        out.append(h)
    return out


def _end(h: np.ndarray) -> int:
    nz = np.flatnonzero(h)
    return int(nz[-1]) + 1 if nz.size else 0


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("n", [1, 63, 1000, 4097])
def test_collect_merges_and_finds_last_bins(device, n, merge):
    import clkernels

    be = clkernels.get_backend(device)
    d, v, w, hv, hw = _histograms(n, seed=n + merge)
    dev = [be.to_device(a) for a in (d, v, w, hv, hw)]
    cap = 25
    ext, pairs = RQA_LINES.collect(be, dev[0], dev[1], dev[2],
                                   (dev[3], dev[4]) if merge else None, n, cap)
    v_want, w_want = (v + hv, w + hw) if merge else (v, w)
    wants = (d, v_want, w_want)
    nonzero = [int(np.count_nonzero(a)) for a in wants]
    assert be.to_host(ext).tolist() == [*(_end(a) for a in wants), *nonzero]
    for want, nz, (bins, counts) in zip(wants, nonzero, pairs, strict=True):
        if nz <= cap:  # every nonzero bin once, in any order
            b = be.to_host(bins)[:nz].astype(np.int64)
            assert sorted(b) == np.flatnonzero(want).tolist()
            assert np.array_equal(be.to_host(counts)[:nz], want[b])
    assert np.array_equal(be.to_host(dev[1]), v_want)
    assert np.array_equal(be.to_host(dev[2]), w_want)
    assert np.array_equal(be.to_host(dev[0]), d)       # read only


@pytest.mark.parametrize("i0, n", [(0, 1), (0, 1024), (5, 1023), (17, 5000), (0, 0)])
def test_count_sums(device, i0, n):
    import clkernels

    be = clkernels.get_backend(device)
    counts = np.random.default_rng(n).integers(0, 1 << 32, i0 + n + 9, dtype=np.uint64)
    counts = counts.astype(np.uint32)
    sums = RQA_LINES.count_sums(be, be.to_device(counts), i0, n)
    got = be.to_host(sums)
    assert got.size == max(1, -(-n // 1024))
    assert int(got.sum(dtype=np.uint64)) == int(counts[i0:i0 + n].sum(dtype=np.uint64))


@pytest.mark.parametrize("cap", [1 << 16, 30], ids=["pairs", "beyond-the-cap"])
def test_read_totals_reads_the_nonzero_bins(device, monkeypatch, cap):
    """Every total as its nonzero bins and its extent: read as pairs, or (more nonzero
    bins than the cap: the diagonal and the merged white totals here) up to its last bin."""
    import clkernels

    monkeypatch.setattr(dnr, "SPARSE_CAP", cap)
    monkeypatch.setattr(dnr, "DENSE_BINS", 100)  # the totals here end beyond it, or at 0
    be = clkernels.get_backend(device)
    n = 3000
    d, v, w, hv, hw = _histograms(n, seed=5)
    m = dnr._Matrix(None, n - 1, n - 1, 1.0, 0.0, 0)   # hlen = n
    h64 = {k: be.to_device(a) for k, a in zip(("d", "v", "w", "hv", "hw"), (d, v, w, hv, hw),
                                               strict=True)}
    st = dnr._DevState(be, {}, (), {}, h64)
    counts = np.arange(2500, dtype=np.uint32)
    sums = [RQA_LINES.count_sums(be, be.to_device(counts), 100, 2000),
            np.array([7, 8], np.uint64)]
    (gd, gv, gw), totals = dnr.read_totals(st, m, sums)
    for got, want in ((gd, d), (gv, v + hv), (gw, w + hw)):
        total = np.zeros(n, np.uint64)
        got.add_into(total)
        assert got.size == _end(want) and np.array_equal(total, want)
        assert np.array_equal(got.bins, np.flatnonzero(want))  # ascending
    assert totals == [int(counts[100:2100].sum()), 15]


def test_nonzero_bins_of_several_devices():
    """The union of the devices' nonzero bins, ascending, below the histograms' length."""
    rng = np.random.default_rng(2)
    hlen = 5000
    parts, wants = [], [set(), set(), set()]
    for _ in range(3):
        kinds = []
        for kind in range(3):
            bins = np.sort(rng.choice(hlen, size=300 * kind, replace=False)).astype(np.int64)
            wants[kind].update(int(b) for b in bins if b < hlen - 1)
            kinds.append(dnr.Counts(bins, np.ones(bins.size, np.uint64),
                                    int(bins[-1]) + 1 if bins.size else 0))
        parts.append(tuple(kinds))
    for got, want in zip(dnr.nonzero_bins(parts, hlen), wants, strict=True):
        assert got.tolist() == sorted(want)
    assert [a.tolist() for a in dnr.nonzero_bins(parts[:1], hlen)] == [
        [b for b in c.bins.tolist() if b < hlen - 1] for c in parts[0]]
