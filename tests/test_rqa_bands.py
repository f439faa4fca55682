"""RQA lane bands over several devices and Dask workers: the recombined histograms
equal the one-device run (row order, SHARE/SYM paths) bit for bit, whichever device
ran which band, for every band width, edge and N (auto-, cross- and joint RQA)."""

from __future__ import annotations

import threading
import time
import types

import numpy as np
import pytest
from conftest import CPU_RUNTIMES, device_cases, every_shape
from test_rqa_dnr import _hists, _same, logistic  # shared helpers of the RQA tests

import clkernels
import pyedmcl as pe
from pyedmcl.rqa import bands as bands_mod  # (pe.rqa is the function; the module differs)
from pyedmcl.rqa import dnr, multi
from pyedmcl.rqa import ranges as ranges_mod

_SECOND: dict[str, object] = {}


def two_backends(device: str) -> list:
    """Two independent backends (contexts, queues) of one device; the second lives for
    the session (each backend builds its own programs: built once, not per test)."""
    be = clkernels.get_backend(device)
    if device not in _SECOND:
        _SECOND[device] = type(be)(be.info)
    return [be, _SECOND[device]]



@pytest.fixture
def small_bands(monkeypatch):
    """Default widths of a few lanes and several row ranges per device (two contexts of
    one device are alike), so that small tests have many tasks."""
    monkeypatch.setattr(bands_mod, "MIN_BAND", 1)
    monkeypatch.setattr(bands_mod, "BANDS_PER_DEVICE", 5)
    monkeypatch.setattr(ranges_mod, "ALIKE_RANGES_PER_DEVICE", 5)


def _dtypes(device: str) -> list[str]:
    return ["float32", "float64"] if pe.select_device(device).fp64 else ["float32"]


@pytest.mark.parametrize("split", ["lanes", "rows"])
def test_two_backends_identical_to_one(device, small_bands, split, monkeypatch):
    """Auto-, cross- and joint RQA on two backends, lane bands or row ranges: the
    one-device histograms."""
    monkeypatch.setattr(multi, "SPLIT", split)
    bes = two_backends(device)
    if split == "rows" and bes[0].info.runtime == "pocl":
        # two contexts of one PoCL CPU device driven from two threads abort the process
        # in PoCL itself, under load (PoCL 5.0, 16 cores, 8 such processes at once: 9-11
        # of 16 aborted: "pocl_release_dlhandle_cache: Assertion `found->ref_count > 0'
        # failed"); one lock around kernel creation, or no work-group specialisation, did
        # not help. pyedmcl opens one context per device (``devices=`` takes each device
        # once; only backends passed in, as here, can share one), and lane bands over the
        # same two contexts pass
        pytest.skip("two contexts of one PoCL device from two threads abort inside PoCL")
    # a CPU runtime of few shapes: float32 (float64's kernels run there in other tests);
    # the other CPU runtimes: float64 at one size (every size in float32)
    for dtype in _dtypes(device)[:None if every_shape(device) else 1]:
        sizes = ((40, None), (301, 64), (900, 97))
        if dtype == "float64" and device in CPU_RUNTIMES:
            sizes = sizes[1:2]
        for n, edge in sizes:
            x = logistic(n + 6)
            for kw in (dict(theiler=1), dict(theiler=3, theiler_scope="matrix", white_border=False),
                       dict(theiler=0)):
                kw.update(E=3, tau=3, radius=0.3, dtype=dtype, edge=edge)
                ref = pe.rqa(x, device=bes[0], **kw)
                got = pe.rqa(x, devices=bes, **kw)
                assert _same(_hists(got), _hists(ref)), (dtype, n, kw)
                assert sum(got.settings["device_tasks"]) > (2 if edge else 0)
            y = 0.9 * logistic(n // 2 + 20)[::-1].copy()
            for w in (0, 4):
                kw = dict(E=2, tau=2, radius=0.25, dtype=dtype, theiler=w, edge=edge)
                ref = pe.cross_rqa(x, y, device=bes[0], **kw)
                got = pe.cross_rqa(x, y, devices=bes, **kw)
                assert _same(_hists(got), _hists(ref)), (dtype, n, "cross", w)
            kw = dict(E=2, tau=1, radius=(0.3, 0.4), dtype=dtype, edge=edge)
            ref = pe.joint_rqa(x, x[::-1].copy(), device=bes[0], **kw)
            got = pe.joint_rqa(x, x[::-1].copy(), devices=bes, **kw)
            assert _same(_hists(got), _hists(ref)), (dtype, n, "joint")


def test_band_widths_and_partial_folds(device, monkeypatch):
    """Explicit band widths (one lane up to wider than the matrix) on one and two
    backends, and many partial 32->64-bit folds: the row-order histograms."""
    from pyedmcl.kernels.rqa_lines import LineSpec

    bes = two_backends(device)
    n = 250
    x = logistic(n + 1).astype(np.float32)
    kw = dict(spec=LineSpec(2, 1, "euclidean", "float"), n_rows=n, n_cols=n,
              diag_ranges=[(1, n)], edge=60)
    ref = dnr.detect_lines(bes[:1], x, x, 0.09, symmetric=True, **kw)
    for devs in (bes[:1], bes):
        for band in (0, 1, 7, 64, 1000):
            h = dnr.detect_lines(devs, x, x, 0.09, band=band, **kw)
            assert _same((h.diagonal, h.vertical, h.white, h.n_recurrences),
                         (ref.diagonal, ref.vertical, ref.white, ref.n_recurrences)), band
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 3000)
    h = dnr.detect_lines(bes, x, x, 0.09, band=30, **kw)
    assert _same((h.diagonal, h.vertical, h.white, h.n_recurrences),
                 (ref.diagonal, ref.vertical, ref.white, ref.n_recurrences))
    with pytest.raises(ValueError, match="band width"):
        dnr.detect_lines(bes, x, x, 0.09, band=-1, **kw)


def _warm_items(monkeypatch, items: int) -> None:
    """Walk-ups with ``items`` work-items per lane (WARM; 0: one) on any device (the
    default: 32 on GPUs only)."""
    from pyedmcl.kernels import rqa_lines

    if items:
        monkeypatch.setattr(rqa_lines, "_warm", lambda mode, info: items
                            if mode in rqa_lines.WARM_MODES.values() else 0)


@pytest.mark.parametrize("warm", [0, 32], ids=["warm-serial", "warm-coop"])
def test_row_ranges_identical(device, monkeypatch, warm):
    """Row ranges keep SHARE (and OVL: the diagonals in a second queue): carries at each
    range's top from warm-ups (each lane walked up until its open run began, by one
    work-item or by a work-group of 32, a row each), runs at the matrix border counted
    once, the warm-ups' recurrences subtracted: the one-device histograms (auto with the
    Theiler band out of the matrix and white_border=False, cross with negative diagonals,
    joint, FAN)."""
    from pyedmcl.kernels.rqa_lines import LineSpec
    from pyedmcl.rqa import ranges

    _warm_items(monkeypatch, warm)
    warmed = []
    orig = ranges.RangeDevice._warm
    monkeypatch.setattr(ranges.RangeDevice, "_warm",
                        lambda self, t, r0: warmed.append(r0) or orig(self, t, r0))
    bes = two_backends(device)
    H = lambda h: (h.diagonal, h.vertical, h.white, h.n_recurrences)  # noqa: E731
    x = logistic(604).astype(np.float32)
    y = (0.9 * logistic(321)[::-1]).astype(np.float32)
    p = {"VEC": 4, "WG": 4, "EDGE": 32, "BITS": 2, "PH": 32, "SHARE": 1, "SYM": 0, "WALK": 1}
    auto = LineSpec(3, 2, "euclidean", "float", theiler_matrix=True, white_border=False)
    cross = LineSpec(2, 1, "euclidean", "float")
    joint = LineSpec(2, 1, "maximum", "float", joint=True)
    cases = [(auto, x, x, None, None, 600, 600, [(3, 600)], 3),
             (cross, y, x, None, None, 320, 603, [(-319, 603)], 0),
             (joint, x, x, x[::-1].copy(), x[::-1].copy(), 600, 600, [(1, 600)], 1)]
    for spec, a, b, a2, b2, nr, nc, dr, w in cases:
        kw = dict(spec=spec, n_rows=nr, n_cols=nc, diag_ranges=dr, w=w, x2=a2, y2=b2,
                  thr2=0.2, edge=32)
        ref = dnr.detect_lines(bes[:1], a, b, 0.09, symmetric=spec is not cross, **kw)
        for height in (32, 100):
            for devs in (bes[:1], bes):
                for ovl in (0, 1):  # OVL: ranges one after the other on a device, too
                    got = dnr.detect_lines(devs, a, b, 0.09, band=height, split="rows",
                                           params=dict(p, OVL=ovl), **kw)
                    assert got.shared and _same(H(got), H(ref)), (spec, height, len(devs))
                    assert got.overlapped == (ovl and devs[0].streams > 1)
    assert warmed and min(warmed) > 0  # ranges below the top found their carries
    monkeypatch.setattr(multi, "SPLIT", "rows")
    kw = dict(E=2, tau=1, neighbourhood="fan", knn=15, edge=32)
    ref = pe.rqa(x[:300], device=bes[0], **kw)
    assert _same(_hists(pe.rqa(x[:300], devices=bes, **kw)), _hists(ref))


#: the row path with SYM: whole-row walks (CPUs, HCH 0) and the GPU's chunked walks with
#: their joins (HCH 8: 512 columns a chunk, several per row at these sizes)
SYM_PARAMS = [
    {"VEC": 4, "WG": 4, "EDGE": 32, "BITS": 2, "PH": 32, "SHARE": 1, "SYM": 1, "WALK": 1},
    {"VEC": 1, "WG": 32, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1, "WALK": 1,
     "UNR": 1, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": 0, "DPAIR": 0},
    {"VEC": 1, "WG": 32, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1, "WALK": 1,
     "UNR": 1, "PACK": 1, "PLANES": 1, "HCH": 8, "SHFL": 2, "DPAIR": 1, "DMAJ": 1},
]


SYM_CASES = [(p, w) for p in SYM_PARAMS for w in (0, 32)]


@pytest.mark.parametrize(("device", "p", "warm"), device_cases(
    SYM_CASES, [f"{n}-warm-{w}" for n in ("rows", "chunked", "diagonal-major")
                for w in ("serial", "coop")], gpu_from=2))
def test_row_ranges_symmetric(device, p, warm, monkeypatch):
    """SYM on row ranges (upper triangle only; each range joins its columns through the
    diagonal with its own rows' runs): on one device and on two, with and without OVL,
    the histograms and recurrences of the one-device SYM run and of the whole matrix
    (SYM 0); auto-RQA with laminar stretches (runs across ranges and chunks), the Theiler
    band removed from the matrix with white lines at the border dropped, and joint RQA.
    The GPU's chunked and diagonal-major walks on GPUs and the fastest-building CPU
    runtime (conftest.device_cases)."""
    from pyedmcl.kernels.rqa_lines import LineSpec

    _warm_items(monkeypatch, warm)
    bes = two_backends(device)
    H = lambda h: (h.diagonal, h.vertical, h.white, h.n_recurrences)  # noqa: E731
    x = logistic(702).astype(np.float32)
    x[100:180] = 0.5  # black across those rows and columns
    x[400:430] = 0.05
    auto = LineSpec(2, 1, "euclidean", "float")
    theiler = LineSpec(3, 2, "euclidean", "float", theiler_matrix=True, white_border=False)
    joint = LineSpec(2, 1, "maximum", "float", joint=True)
    cases = [(auto, x, None, 700, [(1, 700)], 0), (theiler, x, None, 698, [(3, 698)], 3),
             (joint, x, x[::-1].copy(), 700, [(1, 700)], 1)]
    for spec, a, a2, n, dr, w in cases:
        kw = dict(spec=spec, n_rows=n, n_cols=n, diag_ranges=dr, w=w, x2=a2, y2=a2, thr2=0.2)
        whole = dnr.detect_lines(bes[:1], a, a, 0.09, params=dict(p, SYM=0), **kw)
        ref = dnr.detect_lines(bes[:1], a, a, 0.09, symmetric=True, params=p, **kw)
        assert ref.symmetric and _same(H(ref), H(whole)), spec
        for height in (p["EDGE"], 200):
            for devs in (bes[:1], bes):
                for ovl in (0, 1, 2):
                    got = dnr.detect_lines(devs, a, a, 0.09, band=height, split="rows",
                                           symmetric=True, params=dict(p, OVL=ovl), **kw)
                    assert got.symmetric, (spec, height, len(devs), ovl)
                    assert _same(H(got), H(ref)), (spec, height, len(devs), ovl)
                    # OVL with SYM: the chunked row walks in the second queue (OVL 1) or
                    # in a third (OVL 2)
                    want = min(ovl, devs[0].streams - 1) if "HCH" in p else 0
                    assert got.overlapped == want
    # the ranges a two-device run cuts by time (no height): alike devices, one each
    got = dnr.detect_lines(bes, x, x, 0.09, split="rows", symmetric=True, params=p,
                           spec=auto, n_rows=700, n_cols=700, diag_ranges=[(1, 700)])
    ref = dnr.detect_lines(bes[:1], x, x, 0.09, symmetric=True, params=p, spec=auto,
                           n_rows=700, n_cols=700, diag_ranges=[(1, 700)])
    assert got.symmetric and _same(H(got), H(ref))


@pytest.mark.parametrize("split", ["rows", "lanes"])
def test_failed_merge_check_stops_every_device(device, split, monkeypatch):
    """rqa() on two devices goes ahead of the float32 merge check; where it fails
    mid-run every device stops (each finishes what it holds first) and the call gives
    one warning and the float64 histograms."""
    from conftest import failing_check

    from pyedmcl._precision import PrecisionWarning

    launches, stopped = failing_check(monkeypatch, 6)
    monkeypatch.setattr(multi, "SPLIT", split)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.random(300), 1e9 + rng.random(300)])  # float32 merges these
    bes = two_backends(device)
    p = {"VEC": 4, "WG": 4, "EDGE": 32, "BITS": 2, "PH": 32, "SHARE": 1}
    with pytest.warns(PrecisionWarning, match="float64") as rec:
        got = pe.rqa(x, E=2, radius=0.1, devices=bes, params=p)
    assert len([w for w in rec if issubclass(w.category, PrecisionWarning)]) == 1
    assert stopped and set(launches[:max(stopped)]) == {"float"}  # stopped in float32
    ref = pe.rqa(x, E=2, radius=0.1, device=bes[0], params=p, dtype="float64")
    assert got.settings["dtype"] == "float64" and _same(_hists(got), _hists(ref))


def test_row_ranges_bind_each_task_once(device, monkeypatch):
    """A row range's launches reuse one bound launcher per task, mode and column-bit
    buffer (binding one per launch cost ~40 us of host time each), with the same
    histograms."""
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec

    p = SYM_PARAMS[1]
    x = logistic(702).astype(np.float32)
    kw = dict(spec=LineSpec(2, 1, "euclidean", "float"), n_rows=700, n_cols=700,
              diag_ranges=[(1, 700)], symmetric=True, params=p)
    ref = dnr.detect_lines(two_backends(device)[:1], x, x, 0.09, **kw)
    made = []
    launcher = RQA_LINES.launcher

    def counting(*a, **k):
        made.append(a[3])
        return launcher(*a, **k)

    monkeypatch.setattr(RQA_LINES, "launcher", counting)
    launches = []
    launch = dnr._launch
    monkeypatch.setattr(dnr, "_launch", lambda st, ln, m, f: (launches.append(ln.kind),
                                                              launch(st, ln, m, f)))
    got = dnr.detect_lines(two_backends(device)[:1], x, x, 0.09, band=200, split="rows", **kw)
    assert _same((got.diagonal, got.vertical, got.white, got.n_recurrences),
                 (ref.diagonal, ref.vertical, ref.white, ref.n_recurrences))
    # four ranges of 200 rows, three to four row blocks each: per range one launcher per
    # task, mode and column-bit buffer (even, odd blocks); the warm-ups' launches
    # (scratch carries) bind their own
    assert len(made) < len(launches) / 2, (len(made), len(launches))


@pytest.mark.parametrize("block_lanes", [0, 200])
def test_row_ranges_symmetric_cost(block_lanes):
    """SYM ranges: a block's column cells are its columns from its first row on, its row
    walks add HORIZONTAL_COST of them, each block ``block_lanes`` columns' time (GPUs);
    equal time per range within a block's time; the blocks' fixed time makes the top
    range taller. GPUs take BLOCK_LANES, CPUs none."""
    from pyedmcl.kernels.rqa_lines import LineSpec

    n, edge = 1000, 16
    m = dnr._Matrix(LineSpec(1, 1, "euclidean", "float"), n, n, 0.1, 0.0, 0)
    diag = [(1, n)]
    starts = np.arange(0, n, edge)
    heights = np.minimum(edge, n - starts)
    cols = heights * (n - starts)
    i = np.arange(n)
    dcells = np.add.reduceat(np.clip(n - i - 1, 0, None), starts)
    cost = ((1 + ranges_mod.HORIZONTAL_COST) * cols + ranges_mod.DIAGONAL_COST * dcells
            + heights * block_lanes)

    def plan(count: int, lanes: int) -> list:
        return sorted(ranges_mod.plan_ranges(m, True, diag, edge, count, per_device=1, sym=True,
                                             block_lanes=lanes), key=lambda r: r.r0)
    without = {count: plan(count, 0) for count in (2, 3, 5)}
    for count in (2, 3, 5):
        rs = plan(count, block_lanes)
        assert len(rs) == count and rs[0].r0 == 0 and rs[-1].r1 == n
        b = [(r.r0 // edge, -(-r.r1 // edge)) for r in rs]
        assert [r.cells for r in rs] == [int(cols[u:v].sum() + dcells[u:v].sum()) for u, v in b]
        share = cost.sum() / count
        assert max(abs(cost[u:v].sum() - share) for u, v in b) <= cost[0]
        assert rs[0].r1 - rs[0].r0 < rs[-1].r1 - rs[-1].r0  # the top rows hold more cells
        if block_lanes:
            assert rs[0].r1 > without[count][0].r1
    gpu, cpu = (types.SimpleNamespace(info=types.SimpleNamespace(is_gpu=g)) for g in (1, 0))
    assert multi._block_lanes([gpu, gpu]) == ranges_mod.BLOCK_LANES
    assert multi._block_lanes([gpu, cpu]) == multi._block_lanes([cpu, cpu]) == 0


def test_block_diagonal_cells_closed_form():
    """The diagonal cells per row block, summed as arithmetic series, equal the per-row
    count (random shapes, edges and diagonal ranges: empty, negative, past the matrix)."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        nr, nc, edge = (int(v) for v in rng.integers(1, 200, 3))
        drs = []
        for _ in range(int(rng.integers(0, 3))):
            lo = int(rng.integers(-nr - 5, nc + 5))
            drs.append((lo, int(rng.integers(lo - 3, nc + 8))))
        m = dnr._Matrix(None, nr, nc, 0.1, 0.0, 0)
        rows = np.arange(nr)
        per_row = sum((np.clip(np.minimum(hi, nc - rows) - np.maximum(lo, -rows), 0, None)
                       for lo, hi in drs), np.zeros(nr, np.int64))
        want = np.add.reduceat(per_row, np.arange(0, nr, edge))
        assert np.array_equal(ranges_mod.block_diagonal_cells(m, drs, edge), want), (nr, nc, drs)


def _warm_reference(R: np.ndarray, r0: int, k_lo: int, k_hi: int):
    """The carries at row ``r0`` of the boolean matrix ``R``, by NumPy: per column the
    open run's colour and length and whether a recurrence lies above it; per diagonal
    ``k`` its open black run."""
    vr, wr, np_ = [], [], []
    for j in range(R.shape[1]):
        col = R[:r0, j][::-1]
        n = int(np.argmax(col != col[0])) if (col != col[0]).any() else len(col)
        vr.append(n if col[0] else 0)
        wr.append(0 if col[0] else n)
        np_.append(n if col[0] else int(col.any()))
    dr = []
    for k in range(k_lo, k_hi):
        run, i = 0, r0 - 1
        while i >= 0 and 0 <= i + k < R.shape[1] and R[i, i + k]:
            run, i = run + 1, i - 1
        dr.append(run)
    return vr, wr, np_, dr


@pytest.mark.parametrize("vec", [1, 4])
def test_warm_carries_against_numpy(device, vec):
    """MODE warmcol / warmdiag: the carries a row range starts from equal NumPy's walk of
    the recurrence matrix (float64, the Theiler band out of the matrix, a flat stretch
    whose runs reach the top; ranges starting at row 1, inside and at the last row)."""
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec

    be = clkernels.get_backend(device)
    x = logistic(260)
    x[30:90] = 0.5
    y = np.concatenate([x[:150], 0.9 * logistic(50)])
    E, thr, w = 2, 0.01, 2
    nr, nc = len(x) - E + 1, len(y) - E + 1
    ex = np.stack([x[m:m + nr] for m in range(E)], 1)
    ey = np.stack([y[m:m + nc] for m in range(E)], 1)
    d2 = sum((ex[:, None, m] - ey[None, :, m]) ** 2 for m in range(E))
    plain = d2 < thr      # the diagonal launches see no Theiler band (the host's ranges
    ii, jj = np.indices(plain.shape)  # of diagonals leave it out), the columns do
    R = plain & (np.abs(ii - jj) >= w)
    spec = LineSpec(E, 1, "euclidean", "double", theiler_matrix=True)
    p = {"VEC": vec, "WG": 4}
    series = RQA_LINES.series(be, p, spec, x, y)
    for r0 in (1, 57, nr - 1):
        vr, wr, np_, _ = _warm_reference(R, r0, 1 - r0, nc - r0)
        dr = _warm_reference(plain, r0, 1 - r0, nc - r0)[3]
        cols = RQA_LINES.carry(be, p, "vertical", nc)
        diag = RQA_LINES.carry(be, p, "diagonal", nc - 1)
        hist = tuple(be.zeros(max(nr, nc) + 1, np.uint32) for _ in range(2))
        kw = dict(series=series, thr=thr, thr2=0.0, n_rows=nr, n_cols=nc, w=w)
        RQA_LINES.launcher(be, p, spec, "warmcol", carry0=0, carry=cols, hist=hist,
                           boxes=RQA_LINES.row_boxes(be, spec, x, nr), **kw)(r0, 0, 0, nc)
        RQA_LINES.launcher(be, p, spec, "warmdiag", carry0=1 - r0, carry=diag, hist=hist[:1],
                           **kw)(r0, 0, 1 - r0, nc - 1)
        got = [be.to_host(b)[:nc].tolist() for b in cols] + [be.to_host(diag[0])[:nc - 1].tolist()]
        assert got == [vr, wr, np_, dr], r0

def _two_devices_as_one(bes: list, patch) -> object:
    """pe.rqa on both backends after ``patch()`` (which slows or delays one of them), its
    histograms checked equal to one backend's run before the patch; the result. Both
    backends run the call once before the patch: a cold kernel cache compiles each task's
    kernels at its first launch (PoCL: per work-group size), which takes longer than the
    patch's delay and would decide which device takes more tasks."""
    x = logistic(606)
    ref = pe.rqa(x, E=3, tau=3, radius=0.3, device=bes[1], edge=32)
    assert _same(_hists(pe.rqa(x, E=3, tau=3, radius=0.3, devices=bes, edge=32)), _hists(ref))
    patch()
    got = pe.rqa(x, E=3, tau=3, radius=0.3, devices=bes, edge=32)
    assert _same(_hists(got), _hists(ref))
    return got


@pytest.mark.parametrize("split", ["lanes", "rows"])
def test_slow_device_takes_fewer_bands(device, small_bands, split, monkeypatch):
    """Dynamic balance: a device slowed down on the host takes fewer tasks (bands or
    row ranges) than the other, and the histograms do not change."""
    from pyedmcl.rqa import ranges

    monkeypatch.setattr(multi, "SPLIT", split)
    bes = two_backends(device)
    slow = bes[0]
    cls = bands_mod.BandDevice if split == "lanes" else ranges.RangeDevice
    run = cls.run

    def run_slowly(self, task):
        if self.be is slow:  # well above a task's time on a loaded 2-core CPU (50 ms was not)
            time.sleep(0.3)
        return run(self, task)

    got = _two_devices_as_one(bes, lambda: monkeypatch.setattr(cls, "run", run_slowly))
    fast, slow_n = got.settings["device_tasks"][1], got.settings["device_tasks"][0]
    assert fast > slow_n, got.settings["device_tasks"]


@pytest.mark.parametrize("split", ["lanes", "rows"])
def test_each_device_takes_a_task_however_late_its_thread(device, split, monkeypatch):
    """With as many tasks as devices (alike devices' row ranges: one each) a thread that
    starts late still gets one: the first thread, done enqueuing a short task at once,
    does not take the other device's too (it did: tasks/device [2, 0] on two contexts)."""
    monkeypatch.setattr(multi, "SPLIT", split)
    monkeypatch.setattr(bands_mod, "BANDS_PER_DEVICE", 1)
    monkeypatch.setattr(bands_mod, "MIN_BAND", 1)
    import clkernels.threads as threads_mod

    bes = two_backends(device)
    per_device = threads_mod.run_per_device

    def second_thread_late(work, devices):
        def late(item, stop):  # item: (slot index, device)
            if item[1].be is bes[1]:
                time.sleep(0.3)  # reaches the queue after the first has enqueued its task
            return work(item, stop)
        return per_device(late, devices)

    got = _two_devices_as_one(
        bes, lambda: monkeypatch.setattr(threads_mod, "run_per_device", second_thread_late))
    tasks = got.settings["device_tasks"]
    assert min(tasks) >= 1, tasks
    if split == "rows":
        assert tasks == [1, 1], tasks


def test_plan_covers_every_lane_once():
    """Bands partition the lanes; cells add up to the matrix's (diagonal ranges too)."""
    from pyedmcl.kernels.rqa_lines import LineSpec

    m = dnr._Matrix(LineSpec(1, 1, "euclidean", "float"), 37, 23, 0.1, 0.0, 0)
    ranges = [(-36, -2), (3, 23)]
    for width in (1, 5, 100):
        bs = bands_mod.plan_bands(m, True, ranges, width)
        cols = sorted((b.lo, b.hi) for b in bs if b.mode == "vertical")
        assert cols[0][0] == 0 and cols[-1][1] == 23
        assert all(a[1] == b[0] for a, b in zip(cols, cols[1:], strict=False))
        diags = np.concatenate([np.arange(b.lo, b.hi) for b in bs if b.mode == "diagonal"])
        assert sorted(diags.tolist()) == list(range(-36, -2)) + list(range(3, 23))
        cells = sum(b.cells for b in bs if b.mode == "diagonal")
        i, j = np.indices((37, 23))
        k = j - i
        assert cells == int((((k >= -36) & (k < -2)) | ((k >= 3) & (k < 23))).sum())
        assert [b.cells for b in bs] == sorted((b.cells for b in bs), reverse=True)


def test_row_ranges_equal_cells():
    """Row ranges partition the rows on block boundaries, their cells add up to the
    matrix's, and with no height they hold about equal time (column cells plus
    DIAGONAL_COST per diagonal cell; the diagonals' cells lie in the top rows: equal
    heights would not balance); alike devices get one each."""
    from pyedmcl.kernels.rqa_lines import LineSpec

    n, edge = 1000, 16
    m = dnr._Matrix(LineSpec(1, 1, "euclidean", "float"), n, n, 0.1, 0.0, 0)
    diag = [(1, n)]  # the upper triangle (symmetric auto-RQA)
    for vertical in (True, False):
        for count in (1, 2, 3, 7):
            rs = sorted(ranges_mod.plan_ranges(m, vertical, diag, edge, count, per_device=1),
                        key=lambda r: r.r0)
            assert len(rs) == count
            assert rs[0].r0 == 0 and rs[-1].r1 == n
            assert all(a.r1 == b.r0 and b.r0 % edge == 0 for a, b in zip(rs, rs[1:], strict=False))
            i = np.arange(n)
            per_row = (n if vertical else 0) + np.clip(n - i - 1, 0, None)
            assert [r.cells for r in rs] == [int(per_row[r.r0:r.r1].sum()) for r in rs]
            cost = (n if vertical else 0) + ranges_mod.DIAGONAL_COST * np.clip(n - i - 1, 0, None)
            share = cost.sum() / count
            assert max(abs(cost[r.r0:r.r1].sum() - share) for r in rs) <= cost[:edge].sum()
        fixed = ranges_mod.plan_ranges(m, vertical, diag, edge, 2, height=100)
        assert sorted(r.r1 - r.r0 for r in fixed)[-1] == 112  # 100 rows rounded up to blocks
    be = clkernels.get_backend(None)
    assert multi._ranges_per_device([be, type(be)(be.info)]) == ranges_mod.ALIKE_RANGES_PER_DEVICE


@pytest.mark.parametrize("kwargs, match", [
    (dict(scheduler=123), "scheduler"),
    (dict(scheduler=""), "scheduler"),
    (dict(scheduler="local", n_workers=0), "n_workers"),
    (dict(scheduler="local", window=100), "scheduler"),
    (dict(scheduler="local", neighbourhood="fan", knn=5, radius=None), "scheduler"),
])
def test_bad_scheduler_input(kwargs, match):
    kw = dict(E=2, tau=1, radius=0.3)
    kw.update(kwargs)
    if kw.get("radius") is None:
        kw.pop("radius")
    with pytest.raises(ValueError, match=match):
        pe.rqa(logistic(300), **kw)


@pytest.mark.parametrize("split", ["lanes", "rows"])
def test_dask_local_cluster_identical(split, monkeypatch):
    """Lane bands or row ranges as Dask tasks on a LocalCluster of 2 in-process workers
    (each its own context): the one-device histograms for auto-, cross- and joint RQA."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(multi, "SPLIT", split)
    x = logistic(700)
    y = 0.9 * logistic(500)[::-1].copy()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for kw in (dict(theiler=1, edge=64),
                   dict(theiler=2, theiler_scope="matrix", white_border=False, edge=97)):
            ref = pe.rqa(x, E=3, tau=2, radius=0.3, **kw)
            got = pe.rqa(x, E=3, tau=2, radius=0.3, scheduler=client, **kw)
            assert _same(_hists(got), _hists(ref)), kw
            assert sum(got.settings["device_tasks"]) >= 2
            # row ranges keep SYM where the one-device run takes it (decision 0084)
            assert bool(got.settings.get("symmetric")) == (
                split == "rows" and bool(ref.settings.get("symmetric"))), kw
        ref = pe.cross_rqa(x, y, E=2, tau=1, radius=0.2, theiler=3, edge=50)
        got = pe.cross_rqa(x, y, E=2, tau=1, radius=0.2, theiler=3, scheduler=client, edge=50)
        assert _same(_hists(got), _hists(ref))
        ref = pe.joint_rqa(x, x[::-1].copy(), E=2, tau=1, radius=0.2, edge=64)
        got = pe.joint_rqa(x, x[::-1].copy(), E=2, tau=1, radius=0.2, scheduler=client,
                           edge=64)
        assert _same(_hists(got), _hists(ref))
    assert threading.active_count() < 50


def test_dask_ranges_mixed_sym_run_again(monkeypatch):
    """Row ranges on Dask whose workers do not all take SYM (here: one worker's device
    refuses it) are run again without SYM: the one-device histograms, not a mix of the
    upper-triangle and whole-matrix walks."""
    distributed = pytest.importorskip("distributed")
    from pyedmcl.rqa import ranges

    monkeypatch.setattr(multi, "SPLIT", "rows")
    init = ranges.RangeDevice.__init__
    made = []

    def one_refuses(self, *a, symmetric=False, **kw):
        made.append(symmetric)
        init(self, *a, symmetric=symmetric and len(made) != 2, **kw)

    monkeypatch.setattr(ranges.RangeDevice, "__init__", one_refuses)
    x = logistic(700)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2)  # both take ranges: a worker not up yet took none
        for p in SYM_PARAMS:
            kw = dict(E=3, tau=2, radius=0.3, theiler=1, params=p)
            ref = pe.rqa(x, **kw)
            assert ref.settings.get("symmetric")
            made.clear()
            got = pe.rqa(x, scheduler=client, **kw)
            assert _same(_hists(got), _hists(ref))
            # the first two devices were asked for SYM, the second refused; run again
            assert made[:2] == [True, True] and made[2:] and not any(made[2:])
            assert not got.settings.get("symmetric")


@pytest.mark.parametrize("p", SYM_PARAMS, ids=["rows", "chunked", "diagonal-major"])
def test_dask_ranges_symmetric(p, monkeypatch):
    """Row ranges as Dask tasks keep SYM (each worker joins its ranges' columns): the
    one-device histograms, auto- and joint RQA, the Theiler band in the matrix."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(multi, "SPLIT", "rows")
    x = logistic(700)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for kw in (dict(theiler=1), dict(theiler=2, theiler_scope="matrix", white_border=False)):
            ref = pe.rqa(x, E=3, tau=2, radius=0.3, params=p, **kw)
            got = pe.rqa(x, E=3, tau=2, radius=0.3, params=p, scheduler=client, **kw)
            assert ref.settings.get("symmetric") and got.settings.get("symmetric"), kw
            assert _same(_hists(got), _hists(ref)), kw
            assert sum(got.settings["device_tasks"]) >= 2
        ref = pe.joint_rqa(x, x[::-1].copy(), E=2, tau=1, radius=0.2, params=p)
        got = pe.joint_rqa(x, x[::-1].copy(), E=2, tau=1, radius=0.2, params=p,
                           scheduler=client)
        assert got.settings.get("symmetric") and _same(_hists(got), _hists(ref))


def test_cli_devices_and_scheduler_flags(tmp_path, capsys):
    """``--devices`` (two selectors of one device) gives the one-device histograms;
    ``--scheduler`` with ``--window`` is refused in one line."""
    import json

    from pyedmcl.cli.main import main

    np.save(tmp_path / "x.npy", logistic(400))
    args = ["rqa", str(tmp_path / "x.npy"), "-E", "2", "-r", "0.2", "--json", "--histograms"]
    assert main(args) == 0
    one = json.loads(capsys.readouterr().out)
    sel = pe.select_device(None).selector
    assert main(args + ["--devices", f"{sel},{sel}"]) == 0
    both = json.loads(capsys.readouterr().out)
    for k in ("diagonal_hist", "vertical_hist", "white_hist", "n_recurrences"):
        assert both[k] == one[k], k
    assert main(args + ["--scheduler", "local", "--window", "100"]) == 2
    assert "--scheduler" in capsys.readouterr().err


def test_oclgrind_clean_bands():
    """Band launches (widths that are no multiple of VEC, row blocks skipped by diagonal
    bands, cross-RQA's negative diagonals) and row ranges (warm-ups of lane subsets,
    SHARE) make no invalid access, race or uninitialised read."""
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        from clkernels import get_backend
        from pyedmcl.kernels.rqa_lines import LineSpec
        from pyedmcl.rqa.dnr import detect_lines
        be = get_backend("oclgrind")
        x = (np.sin(np.arange(60) * 0.37) + 0.1 * np.cos(np.arange(60) * 1.3)).astype(np.float32)
        y = x[:41] * np.float32(1.1)
        for vec, bits, wk, band in ((4, 2, 1, 7), (1, 1, 0, 3)):
            p = {"VEC": vec, "WG": 4, "EDGE": 13, "BITS": bits, "PH": 32, "SHARE": 0,
                 "SYM": 0, "WALK": wk}
            a = detect_lines([be], x, x, 0.09, spec=LineSpec(2, 2, "euclidean", "float"),
                             n_rows=58, n_cols=58, diag_ranges=[(2, 58)], params=p, band=band)
            b = detect_lines([be], y, x, 0.09, spec=LineSpec(2, 1, "euclidean", "float"),
                             n_rows=40, n_cols=59, diag_ranges=[(-39, 59)], params=p,
                             band=band)
            print(a.n_recurrences, b.n_recurrences)
        p = {"VEC": 4, "WG": 4, "EDGE": 13, "BITS": 2, "PH": 32, "SHARE": 1, "SYM": 0,
             "WALK": 1}  # row ranges: SHARE launches, warm-ups of a few lanes
        c = detect_lines([be], y, x, 0.09, spec=LineSpec(2, 1, "euclidean", "float"),
                         n_rows=40, n_cols=59, diag_ranges=[(-39, 59)], params=p, band=13,
                         split="rows")
        from pyedmcl.kernels import rqa_lines  # the GPUs' walk-ups: 32 work-items a lane
        rqa_lines._warm = lambda mode, info: 32 if mode in rqa_lines.WARM_MODES.values() else 0
        z = np.concatenate([x, x[::-1], x]).astype(np.float32)  # runs longer than a step
        d = detect_lines([be], z, z, 0.3, spec=LineSpec(2, 1, "euclidean", "float"),
                         n_rows=179, n_cols=179, diag_ranges=[(1, 179)], params=p, band=78,
                         split="rows", symmetric=True)
        print(c.n_recurrences, d.n_recurrences)
    """)
    assert out.strip()


def _usable_gpus() -> list:
    from clkernels.devices import list_devices, usable

    return [d for d in list_devices()
            if d.is_gpu and d.runtime != "oclgrind" and usable(d).ok]


@pytest.mark.skipif(len(_usable_gpus()) < 2, reason="needs two GPUs")
def test_two_gpus_threads_and_dask_identical():
    """Two GPUs of this node, one host thread each (one row range each when they are
    alike) and a LocalCluster of one worker process per GPU: the histograms of one GPU,
    bit for bit."""
    distributed = pytest.importorskip("distributed")
    bes = [clkernels.get_backend(d) for d in _usable_gpus()[:2]]
    x = logistic(20_006)
    kw = dict(E=3, tau=3, radius=0.3)
    ref = pe.rqa(x, device=bes[0], **kw)
    got = pe.rqa(x, devices=bes, **kw)
    assert _same(_hists(got), _hists(ref))
    # the two ranges keep the one GPU's upper-triangle walk (decision 0084)
    assert bool(got.settings.get("symmetric")) == bool(ref.settings.get("symmetric"))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = pe.rqa(x, devices=bes, scheduler=client, **kw)
    assert _same(_hists(got), _hists(ref))
    assert sum(got.settings["device_tasks"]) >= 2
