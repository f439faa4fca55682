"""The batch kernels of rqa_lines (MODE bvertical / bdiagonal, pyedmcl.rqa.batch_kernels)
against a NumPy reference of each series' matrix; the vectorised host steps of the
batched path (measures, exact bounds) against their one-series forms, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import device_cases, run_under_oclgrind
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pyedmcl.kernels.rqa_lines import LineSpec
from pyedmcl.rqa import batch_kernels as B
from pyedmcl.rqa._oracles import matrix_histograms
from pyedmcl.rqa.distances import kernel_distances, points
from pyedmcl.rqa.exact import error_bound, error_bounds
from pyedmcl.rqa.measures import MEASURES, compute_measures, measures_of_rows
from pyedmcl.rqa.threshold import kernel_threshold


def batch_reference(series: list[np.ndarray], E: int, tau: int, thr64: np.ndarray,
                    metric: str, w: int, theiler_matrix: bool, white_border: bool,
                    hstride: int, fma: bool = False) -> tuple[np.ndarray, ...]:
    """What the batch kernels give, from each series' float64 matrix (d64 < thr64, as the
    float64 path and float32 with EXACT decide; ``fma``: squares summed by fma): the upper diagonals k >= max(w, 1), the
    vertical and white lines of the whole matrix (the Theiler band removed where
    ``theiler_matrix``), the recurrences."""
    S = len(series)
    d, v, wh = (np.zeros((S, hstride), np.int64) for _ in range(3))
    nrec = np.zeros(S, np.int64)
    for s, x in enumerate(series):
        p = points(np.asarray(x, np.float64), E, tau)
        R = kernel_distances(p, p, metric, fma) < thr64[s]
        n = R.shape[0]
        ref = matrix_histograms(R, w, "matrix" if theiler_matrix else "lines", white_border)
        v[s, :n], wh[s, :n], nrec[s] = ref["vert"][:n], ref["white"][:n], ref["n_rec"]
        for k in range(max(w, 1), n):
            run = 0
            for c in [*np.diagonal(R, k), False]:
                if c:
                    run += 1
                elif run:
                    d[s, run - 1] += 1
                    run = 0
    return d, v, wh, nrec


#: launch values: the CPU default (lane vectors), the GPU default (one lane per
#: work-item), and other walks and word sizes
SHAPES = [{"VEC": 16, "WG": 2, "BITS": 2, "PH": 128, "WALK": 3},
          {"VEC": 1, "WG": 32, "BITS": 2, "PH": 0, "WALK": 1, "UNR": 1, "PACK": 1, "DPAIR": 1},
          {"VEC": 4, "WG": 3, "BITS": 1, "PH": 32, "WALK": 1},
          {"VEC": 8, "WG": 1, "BITS": 2, "PH": 64, "WALK": 2},
          {"VEC": 2, "WG": 4, "BITS": 2, "PH": 0, "WALK": 0}]
#: (real, metric, w, theiler matrix, white border, fma)
OPTIONS = [("float", "euclidean", 1, False, True, False),
           ("double", "maximum", 0, False, False, False),
           ("float", "manhattan", 3, True, False, False),
           ("float", "euclidean", 0, True, True, True),
           ("double", "euclidean", 2, False, True, False)]
CASES = [(s, o) for s, o in zip(SHAPES, OPTIONS, strict=True)] + [
    (SHAPES[0], OPTIONS[2]), (SHAPES[1], OPTIONS[0]), (SHAPES[1], OPTIONS[3])]


@pytest.mark.parametrize("device,shape,opts", device_cases(CASES))
def test_batch_kernels_equal_numpy_reference(device, shape, opts, monkeypatch):
    """Series of many lengths (1 point, word borders 63/64/65, 130) in one launch, on
    decimal-quantized values (ties at the radius: float32 redoes them in float64; the
    GPU shape with the GPUs' redo of whole flagged halves, EXACT=2)."""
    from clkernels import get_backend
    from pyedmcl.kernels import rqa_lines

    if shape.get("PACK"):
        monkeypatch.setitem(rqa_lines.EXACT_KERNEL, "cpu", 2)

    real, metric, w, tm, wb, fma = opts
    E, tau, r = 2, 2, 0.5
    rng = np.random.default_rng(4)
    lens = [3, 65, 66, 67, 132, 40, 4]
    raws = [np.round(rng.standard_normal(t).cumsum() * 2) / 10 + 3.0 for t in lens]
    raws[5] = np.sin(np.arange(40) * 0.4)  # long lines
    be = get_backend(device)
    spec = LineSpec(E, tau, metric, real, theiler_matrix=tm, white_border=wb, fma=fma,
                    exact=real == "float")
    dt = spec.dtype
    rule = "squared" if fma else "distance"
    thr = np.array([kernel_threshold(r, metric, dt, rule)] * len(lens), dt)
    thr64 = np.array([kernel_threshold(r, metric, np.float64, rule)] * len(lens))
    n = np.array(lens) - (E - 1) * tau
    zs = [(x - 3.0).astype(dt) for x in raws]  # centred as float32 runs are
    xs, soff = B.lay_out(zs, dt)
    packed = B.Packed(xs, soff, n, thr)
    if spec.exact:
        A = np.array([float(np.max(np.abs(z))) for z in zs])
        packed.xs64 = B.lay_out(raws, np.float64)[0]
        packed.thr64, packed.exb = thr64, error_bounds(A, thr64, thr, metric, E)
    hs = int(n.max()) + 1
    got = B.histograms(be, spec, shape, packed, w=w, hstride=hs)
    ref = batch_reference(raws, E, tau, thr64, metric, w, tm, wb, hs, fma)
    for name, a, b in zip(("diagonal", "vertical", "white", "recurrences"), got, ref,
                          strict=True):
        assert np.array_equal(a.astype(np.int64), b), name
    mins = (2, 3, 1)
    c = B.counts(be, spec, shape, packed, w=w, hstride=hs, minima=mins)
    assert np.array_equal(c.nrec, ref[3])
    _check_counts(c, ref[:3], mins)


def _check_counts(c, hists, mins) -> None:
    """``c`` (Counts) holds what the dense histograms ``hists`` (d, v, w) give."""
    L = hists[0].shape[1]
    lengths = np.arange(1, L + 1)
    for q, (h, lm) in enumerate(zip(hists, mins, strict=True)):
        keep = lengths >= lm
        for s in range(h.shape[0]):
            nz = np.flatnonzero(h[s])
            want = [(h[s] * lengths * keep).sum(), (h[s] * lengths).sum(), h[s][keep].sum(),
                    nz[-1] + 1 if nz.size else 0]
            assert list(c.stats[s, q]) == want, (q, s)
            got = c.vals[c.start[s, q]:c.start[s, q] + c.count[s, q]]
            assert np.array_equal(got, h[s][keep][h[s][keep] != 0]), (q, s)


def test_batch_kernels_in_chunks(monkeypatch):
    """More series than one launch's histograms hold: several launches, the same rows."""
    from clkernels import get_backend

    be = get_backend(None)
    rng = np.random.default_rng(2)
    raws = [rng.standard_normal(50).cumsum() for _ in range(7)]
    spec = LineSpec(2, 1, "euclidean", "double")
    xs, soff = B.lay_out_blocks([np.array(raws)], np.float64)
    packed = B.Packed(xs, soff, np.full(7, 49), np.full(7, 1.0))
    whole = B.histograms(be, spec, B.batch_params(be.info), packed, w=1, hstride=50)
    monkeypatch.setattr(B, "CHUNK_BYTES", 12 * 50 * 3)  # 3 series a launch
    parts = B.histograms(be, spec, B.batch_params(be.info), packed, w=1, hstride=50)
    assert all(np.array_equal(a, b) for a, b in zip(whole, parts, strict=True))
    c = B.counts(be, spec, B.batch_params(be.info), packed, w=1, hstride=50,
                 minima=(2, 2, 1))
    assert np.array_equal(c.nrec, whole[3])
    _check_counts(c, whole[:3], (2, 2, 1))


def test_packs_stay_below_32_bit_offsets(monkeypatch):
    """Packs hold at most MAX_VALUES laid-out values (strides rounded up to ALIGN), one
    histogram class each, every series once, a length's series in order."""
    from pyedmcl.rqa import batch_lines as bl

    monkeypatch.setattr(B, "MAX_VALUES", B.LEAD + B.TAIL + 10 * 52)
    T = np.array([50] * 7 + [52] * 25 + [12] + [70] * 3)  # strides 52, 52, 12, 72
    got = bl._packs(T, np.arange(T.size), 0)
    assert [[(t, p.tolist()) for t, p in pack] for pack in got] == [
        [(12, [32]), (50, list(range(7))), (52, [7, 8])],
        [(52, list(range(9, 19)))], [(52, list(range(19, 29)))], [(52, [29, 30, 31])],
        [(70, [33, 34, 35])]]  # 70 embedded points: the next histogram class
    monkeypatch.setattr(bl, "PIPELINE_VALUES", 2 * 52)
    got = bl._packs(T[:7], np.arange(7), 0)
    assert [p.tolist() for pack in got for _, p in pack] == [[0, 1], [2, 3], [4, 5], [6]]


def test_batch_kernels_oclgrind_clean():
    """No access outside the buffers (lanes past a series' end, the last series'
    padding), no race on the local histograms."""
    out = run_under_oclgrind("""
        import numpy as np
        from clkernels import get_backend
        from pyedmcl.rqa import batch_kernels as B
        from pyedmcl.kernels.rqa_lines import LineSpec
        be = get_backend("oclgrind")
        rng = np.random.default_rng(1)
        lens = [9, 70, 3]
        raws = [rng.standard_normal(t).cumsum() for t in lens]
        for p, real in (({"VEC": 4, "WG": 2, "BITS": 2, "PH": 64, "WALK": 3}, "float"),
                        ({"VEC": 1, "WG": 4, "BITS": 2, "PH": 0, "WALK": 1, "UNR": 1,
                          "PACK": 1, "DPAIR": 1}, "float")):
            spec = LineSpec(2, 2, "euclidean", real, exact=True)
            n = np.array(lens) - 2
            xs, soff = B.lay_out([r.astype(np.float32) for r in raws], np.float32)
            pk = B.Packed(xs, soff, n, np.full(3, 1.0, np.float32),
                          B.lay_out(raws, np.float64)[0], np.full(3, 1.0),
                          np.full(3, 0.5, np.float32))
            d, v, w, nr = B.histograms(be, spec, p, pk, w=1, hstride=69)
            print(int(nr.sum()))
    """)
    assert out.strip()


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 600), st.integers(0, 3), st.tuples(*[st.integers(1, 4)] * 3),
       st.integers(0, 2 ** 32 - 1))
@example(1, 2, (2, 2, 1), 3)  # W_max 0 or 1: RTE nan (ln 1 = 0)
@example(2, 3, (1, 1, 2), 4)  # W_max 2 with w_min above some rows' lines: RTE 0 or nan
def test_measures_of_rows_equal_compute_measures(L, dens, mins, seed):
    """Row by row, bit for bit, every measure (RTE included): histograms dense and sparse,
    of few and of more than 128 nonzero bins (numpy's pairwise sums), empty rows, zero
    cells, longest white lines of 0, 1 and more."""
    rng = np.random.default_rng(seed)
    S = 12
    H = [((rng.random((S, L)) < dens / 3) * rng.integers(1, 10 ** int(rng.integers(1, 7)),
                                                          (S, L))).astype(np.uint32)
         for _ in range(3)]
    nrec = rng.integers(0, 10 ** 6, S)
    ncells = rng.integers(0, 10 ** 7, S)
    got = measures_of_rows(nrec, ncells, *H, *mins)
    assert list(got) == list(MEASURES)  # RTE among them, in the table's order
    for s in range(S):
        ref = compute_measures(int(nrec[s]), int(ncells[s]), *(h[s].astype(np.uint64)
                                                                for h in H), *mins)
        for k in MEASURES:
            assert (np.isnan(ref[k]) and np.isnan(got[k][s])) or ref[k] == got[k][s], k


def test_entropies_on_threads_equal_one_thread(monkeypatch):
    from pyedmcl.rqa import measures

    rng = np.random.default_rng(1)
    H = ((rng.random((40, 300)) < 0.5) * rng.integers(1, 99, (40, 300))).astype(np.uint32)
    one = measures_of_rows(np.ones(40), np.ones(40), H, H, H)
    monkeypatch.setattr(measures, "PIECE_VALUES", 64)  # many pieces, on threads
    many = measures_of_rows(np.ones(40), np.ones(40), H, H, H)
    assert all(np.array_equal(one[k], many[k], equal_nan=True) for k in MEASURES)


def test_pairwise_rows_equal_numpy_sum():
    """Every length up to past numpy's 128-value leaves and their halvings, bit for bit."""
    from pyedmcl.rqa.measures import pairwise_rows

    rng = np.random.default_rng(2)
    n = np.arange(0, 1100)
    first = np.r_[0, np.cumsum(n)[:-1]]
    a = rng.standard_normal(int(n.sum())) * np.exp2(rng.integers(-40, 40, int(n.sum())))
    ref = np.array([a[f:f + m].sum() for f, m in zip(first, n, strict=True)])
    assert np.array_equal(pairwise_rows(a, first, n).view(np.int64), ref.view(np.int64))


@pytest.mark.parametrize("reduceat", [True, False])
def test_entropies_equal_line_stats_bits(monkeypatch, reduceat):
    """Per segment, bit for bit (the sign of a zero too) the 1-D entropy: segments of 0 to
    700 values placed out of order, with and without a tail, scaled, some of no lines;
    by np.add.reduceat and by the explicit pairwise sums."""
    from pyedmcl.rqa import measures

    monkeypatch.setattr(measures, "_REDUCEAT", [reduceat])
    rng = np.random.default_rng(3)
    S = 300
    count = rng.integers(0, 700, (S, 2))
    count[rng.random((S, 2)) < 0.2] = 1
    count[rng.random((S, 2)) < 0.1] = 0
    vals = rng.integers(1, 10 ** 6, int(count.sum())).astype(np.uint32)
    order = rng.permutation(2 * S)  # the segments' places in vals
    start = np.empty(2 * S, np.int64)
    start[order] = np.r_[0, np.cumsum(count.ravel()[order])[:-1]]
    start = start.reshape(S, 2)
    tail = np.zeros((S, 2), bool)
    tail[:, 0] = rng.random(S) < 0.5
    scale = np.array([2.0, 1.0])
    n_min = np.array([[int(vals[start[s, q]:start[s, q] + count[s, q]].sum()) * int(scale[q])
                       + tail[s, q] for q in range(2)] for s in range(S)])
    n_min[rng.random((S, 2)) < 0.05] = 0
    got = measures.entropies(vals, start, count, n_min, scale, tail)
    for s in range(S):
        for q in range(2):
            if n_min[s, q] == 0:
                assert got[s, q] == 0
                continue
            p = np.r_[vals[start[s, q]:start[s, q] + count[s, q]] * scale[q], [1.0] * int(tail[s, q])]
            ref = -(p / n_min[s, q] * np.log(p / n_min[s, q])).sum()  # (line_stats')
            assert np.float64(ref).view(np.int64) == got[s, q:q + 1].view(np.int64)[0]


def test_error_bounds_equal_error_bound():
    rng = np.random.default_rng(0)
    A = rng.uniform(0, 1e4, 50)
    t64 = rng.uniform(1e-6, 10, 50)
    t32 = t64.astype(np.float32)
    for metric in ("euclidean", "maximum", "manhattan"):
        got = error_bounds(A, t64, t32, metric, 3)
        ref = [float(error_bound(a, b, c, metric, 3)) for a, b, c in zip(A, t64, t32,
                                                                          strict=True)]
        assert np.array_equal(got, np.array(ref, np.float32))
