"""D&R invariances (edges, orders, devices, platforms), joint/fixed-RR, bad input, Oclgrind."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    CPU_DEVICE,
    CPU_RUNTIMES,
    TEST_DEVICES,
    assert_rqa_matches_oracle,
    covering,
    few,
    run_under_oclgrind,
)

import clkernels
import pyedmcl as pe
from pyedmcl.rqa._oracles import numpy_reference


def logistic(n: int) -> np.ndarray:
    """Logistic map r=3.9 from 0.4, no burn-in (pyedmcl.data.logistic_map)."""
    from pyedmcl.data import logistic_map

    return logistic_map(n, r=3.9, x0=0.4, burn=0)


def _hists(r):
    return (r.diagonal_hist.copy(), r.vertical_hist.copy(), r.white_hist.copy(), r.n_recurrences)


def _same(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


#: (VEC, WG, BITS, PH, SHARE, WALK) of the CPU paths' comparison. SHARE=1: diagonal words
#: gathered from the vertical launch's column words; SHARE=2 here: SYM=1 (upper triangle
#: only, lower verticals from row runs); WALK 0/1/2: transition walk / black-start walk
#: (+ branch-light diagonals at PH >= 64) / its branch-free steps of 8; the last: Intel's
#: compiler takes WALK=0 there (kernels.rqa_lines._walk)
CPU_SHAPES = [(1, 16, 1, 0, 0, 1), (4, 8, 0, 32, 0, 0), (8, 2, 1, 32, 0, 1),
              (16, 4, 1, 0, 0, 0), (16, 4, 0, 32, 0, 0), (1, 8, 2, 0, 0, 1),
              (8, 2, 2, 32, 0, 0), (16, 4, 2, 1024, 0, 1), (16, 4, 2, 1024, 0, 2),
              (1, 8, 2, 0, 1, 0), (8, 2, 2, 32, 1, 1), (16, 4, 2, 1024, 1, 1),
              (1, 8, 2, 0, 2, 1), (16, 4, 2, 1024, 2, 1), (16, 4, 2, 1024, 2, 0),
              (4, 2, 2, 1024, 2, 2), (8, 4, 2, 32, 2, 1), (16, 16, 2, 1024, 2, 1)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_edges_orders_vec_identical(device, dtype):
    """Edge lengths that do not divide N, both orders, every VEC: bit-identical histograms.
    Every shape where conftest.every_shape holds, with the Theiler band in the lines; on
    CPU runtimes float64 and the band in the matrix (a flag beside the shape) take every
    value of every shape parameter (conftest.few), and another CPU runtime a covering few."""
    def shapes(cases: list, scope: str = "lines") -> list:
        thin = device in CPU_RUNTIMES and (dtype == "float64" or scope == "matrix")
        return few(cases) if thin else covering(cases, device)

    x = logistic(1203)
    ref = _hists(pe.rqa(x, E=4, tau=3, radius=0.35, dtype=dtype, device=device))
    for edge, order in shapes([(e, o) for e in (97, 256, 333, 1000, 5000)
                               for o in ("row", "column")]):
        r = pe.rqa(x, E=4, tau=3, radius=0.35, dtype=dtype, device=device, edge=edge,
                   order=order)
        assert _same(_hists(r), ref), (edge, order)
    for scope, wb in (("lines", True), ("matrix", False)):
        kw = dict(E=4, tau=3, radius=0.35, dtype=dtype, device=device, theiler=2,
                  theiler_scope=scope, white_border=wb)
        base = _hists(pe.rqa(x, **kw, params={"VEC": 1, "WG": 1, "EDGE": 1203, "BITS": 0,
                                              "PH": 0}))
        for vec, wg, bits, ph, share, walk in shapes(CPU_SHAPES, scope):
            edges = ((300, 64, 1203, 97) if (share, vec, walk) == (2, 16, 1) else (97,)
                     if share == 2 else (300, 64) if share else (300,))
            for edge in edges:
                r = pe.rqa(x, **kw, params={"VEC": vec, "WG": wg, "EDGE": edge, "BITS": bits,
                                            "PH": ph, "SHARE": min(share, 1),
                                            "SYM": int(share == 2), "WALK": walk})
                assert _same(_hists(r), base), (vec, wg, bits, ph, share, walk, edge, scope)


def test_platforms_and_multi_device_identical():
    """float32 and float64: the same histograms on every platform and on 2 devices at once."""
    if len(TEST_DEVICES) < 2:
        pytest.skip("needs two OpenCL runtimes (e.g. pocl + intel)")
    x = logistic(1500)
    for dtype in ("float32", "float64"):
        for metric in ("euclidean", "manhattan"):
            per = [_hists(pe.rqa(x, E=5, tau=3, radius=0.44, metric=metric, dtype=dtype,
                                 device=d)) for d in TEST_DEVICES]
            for h in per[1:]:
                assert _same(h, per[0]), (dtype, metric)
            both = pe.rqa(x, E=5, tau=3, radius=0.44, metric=metric, dtype=dtype,
                          devices=TEST_DEVICES[:2], edge=211)
            assert _same(_hists(both), per[0])
            assert both.settings["devices"] == [pe.select_device(d).selector for d in TEST_DEVICES[:2]]
            xc = pe.cross_rqa(x, x[:900] * 0.9, E=2, tau=1, radius=0.2, dtype=dtype,
                              devices=TEST_DEVICES[:2], edge=150)
            xs = pe.cross_rqa(x, x[:900] * 0.9, E=2, tau=1, radius=0.2, dtype=dtype,
                              device=TEST_DEVICES[0])
            assert _same(_hists(xc), _hists(xs))


def test_joint_rqa_reference(device):
    x = logistic(150)
    y = np.sin(np.arange(150) * 0.3)
    r = pe.joint_rqa(x, y, E=2, tau=1, radius=(0.3, 0.4), dtype="float64", device=device, edge=37)
    ra = numpy_reference(x, None, E=2, tau=1, radius=0.3, metric="euclidean", theiler=0)
    del ra
    # joint reference: AND of the two matrices
    def pts(s):
        return np.stack([s[:-1], s[1:]], axis=1)
    a, b = pts(x), pts(y)
    R = (((a[:, None] - a[None]) ** 2).sum(-1) < 0.09) & (((b[:, None] - b[None]) ** 2).sum(-1) < 0.16)
    assert r.n_recurrences == int(R.sum())
    vh = np.zeros(R.shape[0], np.int64)
    for j in range(R.shape[1]):
        k = 0
        for c in R[:, j]:
            if c:
                k += 1
            elif k:
                vh[k - 1] += 1
                k = 0
        if k:
            vh[k - 1] += 1
    assert np.array_equal(r.vertical_hist.astype(np.int64), vh)
    dh = np.zeros(R.shape[0], np.int64)
    for k in range(-(R.shape[0] - 1), R.shape[0]):
        if k == 0:
            continue
        run = 0
        for c in np.diagonal(R, k):
            if c:
                run += 1
            elif run:
                dh[run - 1] += 1
                run = 0
        if run:
            dh[run - 1] += 1
    assert np.array_equal(r.diagonal_hist.astype(np.int64), dh)


def test_joint_and_theiler_symmetric_path_identical(device):
    """SYM=1 (upper triangle only) gives the full path's histograms for joint RQA and for
    Theiler windows wider than a 64-row word, under both scopes and white-border rules."""
    x = logistic(901)
    y = np.sin(np.arange(901) * 0.21) + 0.05 * np.cos(np.arange(901) * 2.3)
    full = {"VEC": 16, "WG": 4, "EDGE": 200, "BITS": 2, "PH": 1024, "SHARE": 1, "SYM": 0}
    for edge, vec, wg, ph in ((200, 16, 4, 1024), (64, 1, 8, 0)):
        p = dict(full, EDGE=edge, VEC=vec, WG=wg, PH=ph, SYM=1)
        for w, scope, wb in ((0, "lines", True), (70, "matrix", False), (130, "lines", False)):
            kw = dict(E=3, tau=2, radius=(0.3, 0.5), metric="maximum", theiler=w,
                      theiler_scope=scope, white_border=wb, device=device)
            sym, ref = pe.joint_rqa(x, y, **kw, params=p), pe.joint_rqa(x, y, **kw, params=full)
            assert sym.settings["symmetric"] and not ref.settings["symmetric"]
            assert _same(_hists(sym), _hists(ref)), (edge, w, scope)
            kw.update(radius=0.3, metric="manhattan")
            assert _same(_hists(pe.rqa(x, **kw, params=p)),
                         _hists(pe.rqa(x, **kw, params=full))), (edge, w, scope)


def test_symmetric_path_tiny_and_word_boundary_sizes(device):
    """SYM=1 against the full-matrix NumPy reference at N = 1, 2, 63..65 (one point, one
    64-row word and its borders), with Theiler windows wider than N."""
    from pyedmcl.rqa._oracles import numpy_reference

    rng = np.random.default_rng(1)
    for n in (1, 2, 63, 64, 65):
        x = rng.random(n)
        for w, scope, wb in ((0, "lines", True), (1, "matrix", False), (65, "matrix", True)):
            ref = numpy_reference(x, None, E=1, tau=1, radius=0.3, metric="euclidean",
                                  theiler=w, theiler_scope=scope, white_border=wb)
            for vec, wg, ph, walk in ((16, 4, 1024, 1), (1, 8, 0, 1), (8, 2, 1024, 2),
                                      (4, 4, 1024, 0)):
                r = pe.rqa(x, E=1, tau=1, radius=0.3, theiler=w, theiler_scope=scope,
                           white_border=wb, dtype="float64", device=device,
                           params={"VEC": vec, "WG": wg, "EDGE": 64, "BITS": 2, "PH": ph,
                                   "SHARE": 1, "SYM": 1, "WALK": walk})
                for got, key in ((r.diagonal_hist, "diag"), (r.vertical_hist, "vert"),
                                 (r.white_hist, "white")):
                    exp = np.zeros(max(got.size, ref[key].size), np.int64)
                    exp[: ref[key].size] = ref[key]
                    assert np.array_equal(np.pad(got.astype(np.int64), (0, exp.size - got.size)),
                                          exp), (n, w, scope, key)
                assert r.n_recurrences == ref["n_rec"], (n, w, scope)


def test_fixed_recurrence_rate_matches_pyunicorn_threshold(device):
    """Small N: the radius is pyunicorn's order statistic of all distances."""
    from pyunicorn.timeseries import RecurrencePlot

    x = logistic(600).astype(np.float32).astype(np.float64)
    r = pe.rqa(x, E=3, tau=2, recurrence_rate=0.1, metric="maximum", dtype="float64",
               device=device)
    rp = RecurrencePlot(x, metric="supremum", recurrence_rate=0.1, dim=3, tau=2, silence_level=3)
    assert r.RR == pytest.approx(rp.recurrence_rate(), rel=1e-12)
    assert abs(r.RR - 0.1) < 0.01


@pytest.mark.parametrize("kwargs, match", [
    ({"x": np.ones(5), "E": 3, "tau": 3, "radius": 0.1}, "too short"),
    ({"x": np.r_[1.0, np.nan, 2.0, 3.0], "radius": 0.1}, "NaN"),
    ({"x": np.arange(10.0), "radius": 0.0}, "radius"),
    ({"x": np.arange(10.0), "radius": -1.0}, "radius"),
    ({"x": np.arange(10.0), "recurrence_rate": 1.0}, "recurrence_rate"),
    ({"x": np.arange(10.0), "recurrence_rate": 0.0}, "recurrence_rate"),
    ({"x": np.arange(10.0)}, "exactly one"),
    ({"x": np.arange(10.0), "radius": 0.1, "l_min": 0}, "l_min"),
    ({"x": np.arange(10.0), "radius": 0.1, "metric": "cosine"}, "metric"),
])
def test_bad_input(kwargs, match):
    x = kwargs.pop("x")
    with pytest.raises(ValueError, match=match):
        pe.rqa(x, device=CPU_DEVICE, **kwargs)


def test_oclgrind_clean():
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl as pe
        x = np.sin(np.arange(60) * 0.37) + 0.1 * np.cos(np.arange(60) * 1.3)
        for vec, bits, ph, sh, wk in ((1, 0, 0, 0, 0), (4, 1, 32, 0, 1), (1, 1, 0, 0, 0),
                                      (4, 2, 32, 0, 0), (1, 2, 0, 0, 1), (4, 2, 32, 1, 1),
                                      (1, 2, 0, 1, 0), (4, 2, 32, 2, 0), (4, 2, 64, 2, 1),
                                      (2, 2, 64, 2, 2)):
            p = {"VEC": vec, "WG": 4, "EDGE": 13, "BITS": bits, "PH": ph, "SHARE": min(sh, 1),
                 "SYM": int(sh == 2), "WALK": wk}
            a = pe.rqa(x, E=2, tau=2, radius=0.3, params=p, theiler=2, theiler_scope="matrix",
                       white_border=False)
            b = pe.cross_rqa(x, x[:41] * 1.1, E=2, tau=1, radius=0.3, params=p)
            c = pe.joint_rqa(x, x[::-1].copy(), E=2, radius=0.4, params=p, metric="maximum")
            print(a.n_recurrences, b.n_recurrences, c.n_recurrences)
    """)
    assert out.strip()


def test_partial_folds_of_32bit_histograms(device, monkeypatch):
    """Many intermediate (partial) 32->64-bit folds give the same histograms as one."""
    from pyedmcl.rqa import dnr  # (pe.rqa is the function; the module is pyedmcl.rqa)

    x = logistic(700)
    ref = _hists(pe.rqa(x, E=2, tau=1, radius=0.3, dtype="float64", device=device, edge=50))
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 4000)
    got = _hists(pe.rqa(x, E=2, tau=1, radius=0.3, dtype="float64", device=device, edge=50))
    assert _same(got, ref)


def _fold_trace(monkeypatch, run, limit: int) -> tuple[tuple, list[dict[str, int]]]:
    """``run()``'s histograms with the fold limit lowered to ``limit``, and each group's
    cells since its last fold after every launch; checks each launch's bookkeeping."""
    from pyedmcl.rqa import dnr

    seen: list[dict[str, int]] = []
    launch = dnr._launch

    def spy(st, ln, m, fold_bins):
        before = dict(st.cells_since_fold)
        launch(st, ln, m, fold_bins)
        after = dict(st.cells_since_fold)
        seen.append(after)
        cells = ln.cells(m.n_cols)
        g = ("d" if ln.kind == "diagonal" else
             "h" if ln.kind != "vertical" and st.hrec is not None else "vw")
        # the launch's group: its earlier cells folded first where they would pass
        assert after[g] == (before.get(g, 0) + cells
                            if before.get(g, 0) + cells <= limit else cells)
        assert all(after[k] == v for k, v in before.items() if k != g)

    with monkeypatch.context() as mp:
        mp.setattr(dnr, "_u32_limit", lambda: limit)
        mp.setattr(dnr, "_launch", spy)
        return _hists(run()), seen


def test_folds_per_histogram_group(device, monkeypatch):
    """Each kind of launch (vertical, diagonal, SYM's chunked row walk) counts into its
    own 32-bit histograms and folds them on its own cells: after every launch no group
    has passed the limit since its last fold, a fold empties only the group about to pass
    it, and the histograms equal those of one fold at the end."""
    x = logistic(700)
    gpu = {"VEC": 1, "WG": 32, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
           "WALK": 1, "UNR": 1, "OVL": 1, "PACK": 1, "PLANES": 1, "HCH": 8}
    for p in (gpu, dict(gpu, SYM=0, HCH=0)):
        def run(p=p):
            return pe.rqa(x, E=2, tau=1, radius=0.3, device=device, params=p)

        # launches of ~45,000 cells: each group folds every two or three of its launches
        got, seen = _fold_trace(monkeypatch, run, 100_000)
        assert _same(got, _hists(run()))
        assert len({g for s in seen for g in s}) >= 2   # several groups counted apart
        # a group folds (its count drops) while another keeps its unfolded cells
        assert any(b[g] < a[g] and any(b[h] > 0 for h in b if h != g)
                   for a, b in zip(seen, seen[1:], strict=False) for g in a if g in b)


def test_share_path_taken_only_where_valid(device):
    """SHARE=1 runs on one device in row order with verticals; otherwise the plain path."""
    from pyedmcl.kernels.rqa_lines import LineSpec
    from pyedmcl.rqa.dnr import detect_lines

    be = clkernels.get_backend(device)
    x = logistic(300).astype(np.float32)
    p = {"VEC": 4, "WG": 4, "EDGE": 100, "BITS": 2, "PH": 32, "SHARE": 1}
    kw = dict(spec=LineSpec(2, 1, "euclidean", "float"), n_rows=299, n_cols=299,
              diag_ranges=[(1, 299)])
    on = detect_lines([be], x, x, 0.09, params=p, **kw)
    off = detect_lines([be], x, x, 0.09, params=dict(p, SHARE=0), **kw)
    col = detect_lines([be], x, x, 0.09, params=p, order="column", **kw)
    assert on.shared and not off.shared and not col.shared
    # SYM=1 only where the caller says the matrix is symmetric and SHARE is taken
    ps = dict(p, SYM=1)
    sym = detect_lines([be], x, x, 0.09, params=ps, symmetric=True, **kw)
    nosym = [detect_lines([be], x, x, 0.09, params=ps, **kw),
             detect_lines([be], x, x, 0.09, params=dict(ps, SHARE=0), symmetric=True, **kw),
             detect_lines([be], x, x, 0.09, params=ps, symmetric=True, order="column", **kw)]
    assert sym.symmetric and sym.shared and not any(h.symmetric for h in nosym)
    for h in (off, col, sym, *nosym):
        assert np.array_equal(on.diagonal, h.diagonal) and np.array_equal(on.vertical, h.vertical)
        assert np.array_equal(on.white, h.white) and on.n_recurrences == h.n_recurrences


@pytest.mark.parametrize("white_border", [True, False])
def test_open_runs_counted_on_the_device(device, white_border, monkeypatch):
    """The runs the carryovers hold open after the last row block, counted into the
    histograms on the device (rqa_add_runs + fold), equal the host's binning of the same
    carryovers (task_open_runs, which the band runners keep), also with partial 32-bit
    folds. A slow series leaves long open runs of both colours in many columns."""
    from pyedmcl.kernels.rqa_lines import LineSpec
    from pyedmcl.rqa import dnr

    be = clkernels.get_backend(device)
    t = np.arange(300)
    x = (np.sin(t * 0.013) + 0.3 * np.sin(t * 0.071)).astype(np.float32)
    spec = LineSpec(2, 2, "euclidean", "float", white_border=white_border)
    m = dnr._Matrix(spec, 298, 298, 0.05, 0.0, 0)
    p = {"VEC": 4, "WG": 4, "EDGE": 64, "BITS": 2, "PH": 32, "SHARE": 0, "SYM": 0}
    for limit in (None, 5000):
        if limit:
            monkeypatch.setattr(dnr, "_u32_limit", lambda lim=limit: lim)
        st = dnr._device_state(be, m, x, x, None, None, p, None)
        dnr._choose_paths(st, m, False, False, [(1, 298)])
        dnr._assign_tasks([st], m, True, [(1, 298)])
        dnr._run([st], [dnr._plan(st, m, "row")], m)
        # the host's way first: the 32-bit counts since the last fold plus the open runs
        host = [be.to_host(st.h64[k]) + be.to_host(st.h32[k]) for k in ("d", "v", "w")]
        n_host = 0
        for task in st.tasks:
            d, v, w, n = dnr.task_open_runs(be, task, m)
            host[0], host[1], host[2] = host[0] + d, host[1] + v, host[2] + w
            n_host += n
        assert sum(int(h[:-1].sum()) for h in host) > 0
        got = dnr._recombine([st], m)
        assert _same((got.diagonal, got.vertical, got.white, got.n_recurrences),
                     (host[0][:-1], host[1][:-1], host[2][:-1], n_host)), limit


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overlapped_row_blocks_identical(device, dtype, monkeypatch):
    """OVL (a row block's diagonal launches in the backend's second queue, beside the next
    block's vertical launch; column bits double-buffered) gives the histograms of one
    queue bit for bit, with partial 32-bit folds (each histogram folded in the queue of
    its writers) and for cross-RQA; auto-RQA equals the float64 NumPy oracle."""
    from pyedmcl.kernels.rqa_lines import LineSpec
    from pyedmcl.rqa import dnr
    from pyedmcl.rqa.dnr import detect_lines

    be = clkernels.get_backend(device)
    base = {"VEC": 1, "WG": 16, "EDGE": 64, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 0,
            "WALK": 1, "UNR": 1}
    x = logistic(651)
    xs = x.astype(dtype)
    kw = dict(spec=LineSpec(3, 2, "euclidean", "double" if dtype == "float64" else "float"),
              n_rows=647, n_cols=647, diag_ranges=[(1, 647)])
    one = detect_lines([be], xs, xs, 0.2, params=dict(base, OVL=0), **kw)
    two = detect_lines([be], xs, xs, 0.2, params=dict(base, OVL=1), **kw)
    assert two.overlapped == (be.streams > 1) and two.shared and not one.overlapped
    for a, b in ((one.diagonal, two.diagonal), (one.vertical, two.vertical),
                 (one.white, two.white)):
        assert np.array_equal(a, b)
    assert one.n_recurrences == two.n_recurrences
    # one row block, SYM, or column order: OVL is not taken
    assert not detect_lines([be], xs, xs, 0.2, params=dict(base, OVL=1, EDGE=1024),
                            **kw).overlapped
    assert not detect_lines([be], xs, xs, 0.2, params=dict(base, OVL=1, SYM=1),
                            symmetric=True, **kw).overlapped
    assert not detect_lines([be], xs, xs, 0.2, params=dict(base, OVL=1), order="column",
                            **kw).overlapped
    y = np.sin(np.arange(500) * 0.31)
    for scope in ("lines", "matrix"):
        rq = [_hists(pe.rqa(x, E=3, tau=2, radius=0.2, theiler=3, theiler_scope=scope,
                            dtype=dtype, device=device, params=dict(base, OVL=o)))
              for o in (0, 1)]
        assert _same(*rq), scope
    whole = _hists(pe.rqa(x, E=3, tau=2, radius=0.2, dtype=dtype, device=device,
                          params=dict(base, OVL=0)))
    monkeypatch.setattr(dnr, "_u32_limit", lambda: 5000)
    folded = _hists(pe.rqa(x, E=3, tau=2, radius=0.2, dtype=dtype, device=device,
                           params=dict(base, OVL=1)))
    assert _same(folded, whole)
    c = [_hists(pe.cross_rqa(x, y, E=2, tau=3, radius=0.3, dtype=dtype, device=device,
                             params=dict(base, OVL=o))) for o in (0, 1)]
    assert _same(*c)
    if dtype == "float64":
        ref = numpy_reference(x, None, E=3, tau=2, radius=0.2, metric="euclidean", theiler=1)
        res = pe.rqa(x, E=3, tau=2, radius=0.2, dtype="float64", device=device,
                     params=dict(base, OVL=1))
        assert_rqa_matches_oracle(res, ref)
