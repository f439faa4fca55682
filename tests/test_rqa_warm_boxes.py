"""Column walk-ups skip whole blocks of white rows by the row series' boxes (WBOX,
templates/rqa_lines/_warm.mako): the carries equal NumPy's walk of the matrix, and row
ranges on two backends give the one-device histograms, on a random walk quantized to a
0.1 grid, where most of a column above a range's first row is white (the case in which
walking every cell up cost as much as the range itself)."""

from __future__ import annotations

import numpy as np
import pytest
from test_rqa_bands import _warm_items, _warm_reference, two_backends
from test_rqa_dnr import _hists, _same

import clkernels
import pyedmcl as pe
from pyedmcl.kernels import rqa_lines
from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec
from pyedmcl.rqa import multi
from pyedmcl.rqa import ranges as ranges_mod


def random_walk(n: int, seed: int = 0) -> np.ndarray:
    """A Gaussian random walk rounded to a 0.1 grid (ties at grid radii)."""
    return np.round(np.cumsum(np.random.default_rng(seed).normal(size=n)), 1)


def _distances(x: np.ndarray, E: int, tau: int, metric: str, dt: type, rows: int,
               cols: slice) -> np.ndarray:
    """The kernel's distances (squared for euclidean) of rows ``0 .. rows - 1`` to the
    columns ``cols``, in ``dt`` and the kernel's order of operations."""
    n = len(x) - (E - 1) * tau
    xr = x.astype(dt)
    ex = np.stack([xr[m * tau:m * tau + n] for m in range(E)], 1)
    a, b = ex[:rows], ex[cols]
    d = None
    for m in range(E):
        t = a[:, None, m] - b[None, :, m]
        t = t * t if metric == "euclidean" else np.abs(t)
        d = t if d is None else (np.maximum(d, t) if metric == "maximum" else d + t)
    return d


def _boxes_reference(x: np.ndarray, E: int, tau: int, n: int, dt: type) -> np.ndarray:
    """The boxes in NumPy: per level, block and coordinate, the least and the largest
    value of the block's row points (the last block up to row ``n``), in ``dt``."""
    out = []
    lo = hi = np.stack([x.astype(dt)[m * tau:m * tau + n] for m in range(E)])
    for _ in range(rqa_lines.WARM_BOX_LEVELS):
        blocks = -(-lo.shape[1] // 32)
        lo = np.stack([[lo[m, b * 32:(b + 1) * 32].min() for b in range(blocks)]
                       for m in range(E)])
        hi = np.stack([[hi[m, b * 32:(b + 1) * 32].max() for b in range(blocks)]
                       for m in range(E)])
        out.append(np.stack([lo.T, hi.T], 2).ravel())
    return np.concatenate(out)


@pytest.mark.parametrize("real", ["float", "double"])
@pytest.mark.parametrize(("E", "tau", "n"), [(3, 5, 40_000 - 17), (1, 1, 32 * 32 * 32 + 1),
                                             (5, 2, 1_000)])
def test_row_boxes_equal_numpy(device, real, E, tau, n):
    """The device's boxes (MODE boxes) equal NumPy's order statistics of the row points
    exactly, level after level, laid out (b E + m) 2; the last block of each level
    partial (or a single row); from a host array and from the device's row series."""
    be = clkernels.get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    x = random_walk(n + (E - 1) * tau + 7)
    spec = LineSpec(E, tau, "euclidean", real)
    want = _boxes_reference(x, E, tau, n, spec.dtype)
    got = be.to_host(RQA_LINES.row_boxes(be, spec, x, n))
    assert got.dtype == spec.dtype and np.array_equal(got, want)
    xd = be.to_device(x.astype(spec.dtype))
    assert np.array_equal(be.to_host(RQA_LINES.row_boxes(be, spec, xd, n)), want)


@pytest.mark.parametrize("warm", [0, 32], ids=["serial", "coop"])
@pytest.mark.parametrize(("metric", "real"), [("euclidean", "double"), ("euclidean", "float"),
                                              ("maximum", "double"), ("manhattan", "float")])
def test_walk_up_skips_white_blocks(device, monkeypatch, warm, metric, real):
    """The column carries at a range's first row (open run, its colour, a recurrence
    above) equal NumPy's walk of the matrix, ranges starting inside and at the end of
    32- and 1,024-row blocks; the boxes let most of those rows go unwalked here, and
    the kernel acts on them (boxes that put every point far away change the carries)."""
    be = clkernels.get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    _warm_items(monkeypatch, warm)
    x = random_walk(3_000, seed=1)
    E, tau = 3, 2
    thr = 0.09 if metric == "euclidean" else 0.3
    nr = nc = len(x) - (E - 1) * tau
    spec = LineSpec(E, tau, metric, real)
    p = {"VEC": 4, "WG": 4}
    series = RQA_LINES.series(be, p, spec, x, x)
    boxes = RQA_LINES.row_boxes(be, spec, x, nr)
    far = be.to_device(np.full(be.to_host(boxes).size, 1e30, spec.dtype))
    d = _distances(x, E, tau, metric, spec.dtype, nr, slice(0, nc))
    R = d < spec.dtype(thr)
    kw = dict(series=series, thr=thr, thr2=0.0, n_rows=nr, n_cols=nc, w=0)
    skippable = 0
    for r0 in (57, 1024, 2048, 2100, nr - 1):
        want = list(_warm_reference(R, r0, 0, 0)[:3])
        for bx, same in ((boxes, True), (far, False)):
            cols = RQA_LINES.carry(be, p, "vertical", nc)
            hist = tuple(be.zeros(nr + 1, np.uint32) for _ in range(2))
            RQA_LINES.launcher(be, p, spec, "warmcol", carry0=0, carry=cols, hist=hist,
                               boxes=bx, **kw)(r0, 0, 0, nc)
            got = [be.to_host(b)[:nc].tolist() for b in cols]
            assert (got == want) == same, (r0, same)
        # the 32-row blocks above r0 whose rows all lie beyond the threshold (the boxes
        # find a subset of them): most, on this walk
        blocks = R[:r0 // 32 * 32].reshape(r0 // 32, 32, nc).any(1)
        skippable += int((~blocks).sum())
    assert skippable > 0.8 * sum(r0 // 32 for r0 in (57, 1024, 2048, 2100, nr - 1)) * nc


@pytest.mark.parametrize("real", ["double", "float"])
def test_walk_up_skips_32768_row_blocks(device, real):
    """Columns far down a 40,000-point walk: the third level's 32,768-row block is
    skipped whole, and the carries equal NumPy's (64 columns)."""
    be = clkernels.get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    if be.info.runtime == "oclgrind":
        pytest.skip("a simulator: the 1,024-row levels are its test (above)")
    x = random_walk(40_000, seed=2) + 0.05 * np.arange(40_000)  # a drift
    E, tau, thr = 2, 1, 0.04
    nr = nc = len(x) - (E - 1) * tau
    spec = LineSpec(E, tau, "euclidean", real)
    p = {"VEC": 4, "WG": 4}
    lane0, r0 = nc - 64, 36_000
    R = _distances(x, E, tau, "euclidean", spec.dtype, r0, slice(lane0, nc)) < spec.dtype(thr)
    want = list(_warm_reference(R, r0, 0, 0)[:3])
    cols = RQA_LINES.carry(be, p, "vertical", 64)
    hist = tuple(be.zeros(nr + 1, np.uint32) for _ in range(2))
    RQA_LINES.launcher(be, p, spec, "warmcol", series=RQA_LINES.series(be, p, spec, x, x),
                       thr=thr, thr2=0.0, n_rows=nr, n_cols=nc, w=0, carry0=lane0, carry=cols,
                       hist=hist, boxes=RQA_LINES.row_boxes(be, spec, x, nr))(r0, 0, lane0, 64)
    assert [be.to_host(b)[:64].tolist() for b in cols] == want
    # the first 32,768-row block's box lies beyond the threshold from all 64 points
    ex = np.stack([x[lane0:nc], x[lane0 + tau:nc + tau]], 1)
    box = np.stack([[x[m * tau:32768 + m * tau].min(), x[m * tau:32768 + m * tau].max()]
                    for m in range(E)])
    gap = np.clip(ex, box[:, 0], box[:, 1]) - ex
    assert ((gap ** 2).sum(1) > thr).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_ranges_of_a_walk_equal_one_device(device, monkeypatch, dtype):
    """pe.rqa of the walk on two backends, split in row ranges (each range below the
    first walks its columns up with the boxes): the one-device histograms, for a radius
    on the grid (float32: the near cells decided as float64 does) and for a fixed
    recurrence rate, with and without the Theiler window."""
    bes = two_backends(device)
    if dtype == "float64" and not bes[0].info.fp64:
        pytest.skip("no fp64 on this device")
    monkeypatch.setattr(multi, "SPLIT", "rows")
    monkeypatch.setattr(ranges_mod, "ALIKE_RANGES_PER_DEVICE", 3)
    boxed = []
    orig = ranges_mod.RangeDevice._warm
    monkeypatch.setattr(ranges_mod.RangeDevice, "_warm", lambda self, t, r0: (
        orig(self, t, r0), boxed.append(self.boxes is not None)))
    x = random_walk(2_500, seed=3)
    for kw in ({"radius": 0.3}, {"recurrence_rate": 0.02, "theiler": 5}):
        ref = pe.rqa(x, E=3, tau=2, dtype=dtype, device=bes[0], edge=256, **kw)
        got = pe.rqa(x, E=3, tau=2, dtype=dtype, devices=bes, edge=256, **kw)
        assert _same(_hists(got), _hists(ref)), kw
    assert boxed and all(boxed)


@pytest.mark.parametrize("warm", [0, 32], ids=["serial", "coop"])
def test_walk_up_redoes_a_box_at_the_threshold_in_float64(device, monkeypatch, warm):
    """EXACT (float32 decided as float64): a block whose nearest point lies at the
    radius on the 0.1 grid, white in float32 and black in float64 (-16.2 against -15.9,
    radius 0.3), is walked, not skipped, at both levels (its 32 and 1,024 rows): the
    column's open white run ends at that row, as float64's does."""
    from pyedmcl.rqa.exact import make_exact
    from pyedmcl.rqa.threshold import kernel_threshold

    be = clkernels.get_backend(device)
    if not be.info.fp64:
        pytest.skip("EXACT needs fp64")
    _warm_items(monkeypatch, warm)
    t64 = kernel_threshold(0.3, "euclidean", np.float64, "radius")
    t32 = kernel_threshold(0.3, "euclidean", np.float32, "radius")
    assert (-16.2 - -15.9) ** 2 < t64 <= np.float32(np.float32(-16.2) - np.float32(-15.9)) ** 2
    x = np.full(1_100, -1_000.0)  # every row below the two points: a box ends at -16.2
    x[1_000], x[1_030], x[1_040:1_050] = -16.2, -15.9, 500.0
    z = x.astype(np.float32)
    spec = LineSpec(1, 1, "euclidean", "float", exact=True)
    p = {"VEC": 4, "WG": 4}
    ex = make_exact(x, x, z, z, t64, t32, "euclidean", 1)
    series = RQA_LINES.series(be, p, spec, z, z, exact=ex)
    n, r0 = len(x), 1_024
    R = (x[:r0, None] - x[None, r0:]) ** 2 < t64
    want = list(_warm_reference(R, r0, 0, 0)[:3])
    assert want[1][1_030 - r0] == r0 - 1 - 1_000  # the white run ends at row 1,000
    cols = RQA_LINES.carry(be, p, "vertical", n - r0)
    hist = tuple(be.zeros(n + 1, np.uint32) for _ in range(2))
    RQA_LINES.launcher(be, p, spec, "warmcol", series=series, thr=t32, thr2=0.0, n_rows=n,
                       n_cols=n, w=0, carry0=r0, carry=cols, hist=hist,
                       boxes=RQA_LINES.row_boxes(be, spec, z, n))(r0, 0, r0, n - r0)
    assert [be.to_host(b)[:n - r0].tolist() for b in cols] == want
