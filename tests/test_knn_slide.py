"""The k-NN rows variant's SLIDE option (knn/_slide.mako): a contiguous library's tile as
raw series values, scanned in blocks. It must give the plain rows variant's table bit for
bit (indices and distances) and the NumPy reference's; it runs on every device (the rows
variant is a GPU default, but any OpenCL device runs it, so CPUs check it here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import CPU_DEVICE

from clkernels import get_backend
from pyedmcl.kernels.knn import KNN, SLIDE_GPU, is_contiguous
from pyedmcl.kernels.xmap import XMAP_KNN
from pyedmcl.primitives.knn import knn_device

ROWS = dict(VARIANT="rows", WG=16, QB=1, INS="reg", FLAG=1)

#: (E, TAU, K, EA, SLIDE, TILE, radius, REAL, METRIC, FMA): E = 1..20, lags 1..4 up to the
#: largest window span (48), K = E + 1 and larger, every EA chunking, every SLIDE block,
#: float64 (2-wide vector loads), radius -1 (none), 0, > 0, the three metrics, fma() sums
#: (GPU jobs' FMA=1) and plain ones
CASES = [
    (1, 1, 2, 0, 8, 32, 0, "float", "euclidean", 0),
    (2, 1, 3, 2, 16, 32, 1, "float", "euclidean", 0),
    (3, 2, 10, 2, 8, 16, 0, "double", "euclidean", 1),
    (4, 1, 5, 2, 16, 32, 0, "float", "maximum", 0),
    (5, 4, 6, 4, 32, 64, 3, "float", "euclidean", 0),
    (7, 2, 8, 4, 16, 64, -1, "float", "euclidean", 1),
    (9, 1, 10, 4, 8, 32, 1, "float", "manhattan", 0),
    (12, 3, 13, 8, 8, 32, 0, "float", "euclidean", 0),
    (17, 3, 18, 4, 16, 64, 1, "float", "euclidean", 1),
    (20, 1, 21, 4, 16, 64, 2, "float", "euclidean", 1),
    (20, 1, 33, 0, 8, 16, 0, "double", "euclidean", 0),
]


def _reference(x, E, tau, K, R, lib):
    """NumPy table for library ``lib`` (kernel points, coordinates x[p + j * tau]): order
    (distance, |p - l|, l)."""
    npts = x.size - (E - 1) * tau
    V = np.stack([x[j * tau: j * tau + npts] for j in range(E)], 1).astype(np.float64)
    p = np.arange(npts)
    D2 = ((V[:, None, :] - V[None, lib, :]) ** 2).sum(-1)
    gap = np.abs(p[:, None] - lib[None, :])
    D2[gap <= R] = np.inf
    tie = 2 * gap + (lib[None, :] > p[:, None])
    order = np.lexsort((tie, D2), axis=1)[:, :K]
    d2 = np.take_along_axis(D2, order, 1)
    idx = np.where(np.isinf(d2), -1, lib[order])
    return idx, np.sqrt(d2)


def _tables(be, params, spec, x, libs, R):
    nb, nl = libs.shape
    npts = x.size - (spec["E"] - 1) * spec["TAU"]
    dt = np.float64 if spec["REAL"] == "double" else np.float32
    idx = be.empty((nb, npts, spec["K"]), np.int32)
    dist = be.empty((nb, npts, spec["K"]), dt)
    KNN.launch(be, params, spec, be.to_device(x.astype(dt)), be.to_device(np.arange(npts, dtype=np.int32)),
               npts, be.to_device(libs.astype(np.int32)), nl, nb, R, idx, dist)
    return be.to_host(idx), be.to_host(dist)


@pytest.mark.parametrize("E, tau, K, EA, SLIDE, TILE, R, real, metric, fma", CASES,
                         ids=[f"E{c[0]}-T{c[1]}-K{c[2]}-EA{c[3]}-S{c[4]}-{c[7]}-{c[8]}-F{c[9]}"
                              for c in CASES])
def test_slide_gives_the_plain_rows_table_bit_for_bit(device, E, tau, K, EA, SLIDE, TILE, R,
                                                      real, metric, fma):
    """Two series: a quantised random walk (exact ties: squared distances are small
    integers, exact in float32, so the NumPy order is exact) and a plain one (rounding:
    only the same operations in the same order give the same bits); two batches of
    contiguous libraries starting at different points, lengths no multiple of TILE or
    SLIDE (partial blocks and tiles), queries outside the library."""
    be = get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    walk = np.cumsum(np.random.default_rng(E).standard_normal(170))
    npts = walk.size - (E - 1) * tau
    nl = npts - 50 if TILE < 64 else npts - 21  # 72..149 points: never whole tiles
    libs = np.stack([np.arange(3, 3 + nl), np.arange(npts - nl, npts)])
    spec = {"E": E, "TAU": tau, "K": K, "METRIC": metric, "REAL": real, "FMA": fma}
    for x in (np.round(walk / 2), walk):
        plain = _tables(be, {**ROWS, "TILE": TILE, "EA": EA}, spec, x, libs, R)
        slide = _tables(be, {**ROWS, "TILE": TILE, "EA": EA, "SLIDE": SLIDE}, spec, x, libs, R)
        np.testing.assert_array_equal(slide[0], plain[0])
        np.testing.assert_array_equal(slide[1], plain[1])
        for b in range(2 if metric == "euclidean" else 0):  # the others: as plain rows
            # the values the kernel sees, in float64: float32 rounding of the sums only,
            # 1e-5 relative (E <= 20 squares; differences of close floats are exact)
            ref_i, ref_d = _reference(x.astype(np.float32 if real == "float" else np.float64),
                                      E, tau, K, R, libs[b])
            np.testing.assert_allclose(slide[1][b], ref_d, rtol=1e-5)
            if x is not walk:  # integer distances: the exact order, ties included
                np.testing.assert_array_equal(slide[0][b], ref_i)


@pytest.mark.parametrize("split", [2, 4])
def test_slide_with_split_queries(device, split):
    """SPLIT work-items per query take alternate blocks and points of each tile, their
    lists merged: the one-work-item table bit for bit (plain and quantised walks,
    a partial last tile, a radius)."""
    be = get_backend(device)
    walk = np.cumsum(np.random.default_rng(9).standard_normal(300))
    E, K, R = 5, 6, 2
    npts = walk.size - (E - 1)
    libs = np.arange(7, npts - 2)[None, :]
    spec = {"E": E, "TAU": 1, "K": K, "METRIC": "euclidean", "REAL": "float"}
    for x in (np.round(walk / 2), walk):
        plain = _tables(be, {**ROWS, "TILE": 64, "EA": 2}, spec, x, libs, R)
        slide = _tables(be, {**ROWS, "TILE": 64, "EA": 2, "SLIDE": 8, "SPLIT": split}, spec, x,
                        libs, R)
        np.testing.assert_array_equal(slide[0], plain[0])
        np.testing.assert_array_equal(slide[1], plain[1])


def test_knn_device_with_forced_slide(device):
    """The algorithms' entry point with SLIDE forced on a contiguous library equals the
    plain rows variant's table, also with fewer library points than k and at tau 2; a
    gapped library (the option reads point lib[0] + i as library index i) or a window
    span (E - 1) * tau above 48 is refused."""
    be = get_backend(device)
    x = np.sin(np.arange(400) * 0.31) + 0.01 * np.random.default_rng(1).standard_normal(400)
    xd = be.to_device(x.astype(np.float32))
    q = np.arange(0, 395, 3)
    lib = np.arange(10, 380)
    rows = {**ROWS, "TILE": 64, "EA": 2, "SPLIT": 1, "QQ": 1, "CB": 0}
    for lp, k, tau in ((lib, 5, 1), (lib, 5, 2), (np.arange(10, 30), 25, 1)):  # 20 for 25: padded
        tabs = []
        for slide in (0, 16):
            t = knn_device(be, xd, x.size, E=4, tau=tau, k=k, qpts=q, lpts=lp, radius=0,
                           params={**rows, "SLIDE": slide})
            tabs.append((be.to_host(t.idx), be.to_host(t.dist)))
        np.testing.assert_array_equal(tabs[1][0], tabs[0][0])
        np.testing.assert_array_equal(tabs[1][1], tabs[0][1])
    assert (tabs[1][0][..., 20:] == -1).all() and np.isinf(tabs[1][1][..., 20:]).all()
    for kw in (dict(tau=1, lpts=np.r_[10:100, 101:380]), dict(tau=17, lpts=lib)):
        with pytest.raises(ValueError, match="SLIDE"):
            knn_device(be, xd, x.size, E=4, k=5, qpts=q, radius=0, params={**rows, "SLIDE": 16},
                       **kw)


def test_contiguity_check():
    assert is_contiguous(np.arange(5, 9))
    assert is_contiguous(np.array([[0, 1, 2], [7, 8, 9]]))
    assert not is_contiguous(np.array([0, 1, 3]))
    assert not is_contiguous(np.array([[0, 1, 2], [7, 8, 10]]))
    assert not is_contiguous(np.array([0, 1, 1, 3]))  # span right, a repeat and a gap
    assert not is_contiguous(np.zeros((1, 0), np.int32))
    frozen = np.array([3, 4, 5, 7, 8], np.int32)  # read-only (a plan's lists): remembered
    frozen.flags.writeable = False
    for _ in range(2):  # asked again: each view's own answer
        assert not is_contiguous(frozen)
        assert is_contiguous(frozen[:3]) and is_contiguous(frozen[3:])
        assert not is_contiguous(frozen[2:4]) and is_contiguous(np.atleast_2d(frozen[3:]))


def _fake_gpu(runtime: str = "nvidia"):
    info = get_backend(CPU_DEVICE).info
    gpu = dataclasses.replace(info, device_type="gpu", runtime=runtime, name="Fake GPU 9000",
                              normalised_name="fake-gpu-9000", max_work_group_size=1024,
                              max_work_item_sizes=(1024, 1024, 64), local_mem_bytes=49152,
                              compute_units=132)
    return type("FakeBackend", (), {"info": gpu})()


def test_params_for_takes_slide_only_where_it_applies():
    """Untuned GPUs take SLIDE on a contiguous library with one column and a window span
    of at most 48, split queries too (a block per split at least); otherwise (gapped, a
    longer span, NC > 1, CPUs,
    the series-batched xmap family) the plain rows tile. (A vendor with no shipped
    tuning: NVIDIA's shipped entries cover this bucket.)"""
    be = _fake_gpu(runtime="untuned-vendor")
    spec = {"E": 7, "TAU": 1, "K": 8, "METRIC": "euclidean", "REAL": "float"}
    big = 1 << 20
    p = KNN.params_for(be, spec, big, nq_total=big, contiguous=True)
    assert p["VARIANT"] == "rows" and p["SLIDE"] == SLIDE_GPU and KNN.space.valid(p, be.info)
    assert KNN.params_for(be, spec, big, nq_total=big)["SLIDE"] == 0
    assert KNN.params_for(be, {**spec, "TAU": 8}, big, nq_total=big, contiguous=True)["SLIDE"]
    assert KNN.params_for(be, {**spec, "TAU": 9}, big, nq_total=big, contiguous=True)["SLIDE"] == 0
    assert KNN.params_for(be, {**spec, "E": 14, "NC": 2}, big, nq_total=big,
                          contiguous=True)["SLIDE"] == 0
    few = KNN.params_for(be, spec, big, nq_total=64, contiguous=True)  # split queries
    assert few["SPLIT"] > 1 and few["SLIDE"] and KNN.space.valid(few, be.info)
    cpu = get_backend(CPU_DEVICE)
    assert KNN.params_for(cpu, spec, 4096, nq_total=4096, contiguous=True)["SLIDE"] == 0
    # the series-batched family on a GPU: its SLIDE layout where it applies and the entry
    # (here the shipped GPU default, measured before SLIDE) did not measure SLIDE
    xp = XMAP_KNN.params_for(be, spec, 4096, nq_total=4096 * 64, contiguous=True)
    assert xp == {**XMAP_KNN.SLIDE_LAYOUT_GPU} and XMAP_KNN.space.valid(xp, be.info)
    for other in ({"contiguous": False}, {"spec": {**spec, "TAU": 9}}):
        args = {"spec": spec, "contiguous": True, **other}
        got = XMAP_KNN.params_for(be, args["spec"], 4096, nq_total=4096 * 64,
                                  contiguous=args["contiguous"])
        assert got["SLIDE"] == 0 and got != {**XMAP_KNN.SLIDE_LAYOUT_GPU, "SLIDE": 0}
    slides = [c for c in KNN.space.candidates(be.info) if c["SLIDE"]]
    assert slides and all(c["VARIANT"] == "rows" and c["TILE"] % (c["SLIDE"] * c["SPLIT"]) == 0
                          for c in slides)


def test_oclgrind_clean():
    """Bounds, races and uninitialised reads: SLIDE tiles with a partial last tile and
    block, float32 and float64 (2-wide loads), against a NumPy table (the plain rows
    kernel is no reference here: Oclgrind 21 stops on the `freeze` LLVM puts in it)."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np
        from clkernels import get_backend
        from pyedmcl.kernels.knn import KNN
        be = get_backend()
        x = np.sin(np.arange(60) * 0.7) + 0.1 * np.cos(np.arange(60) * 1.3)
        V = np.stack([x[j: j + 58] for j in range(3)], 1)
        lib = np.arange(4, 41)
        D = np.sqrt(((V[:50, None] - V[None, lib]) ** 2).sum(-1))
        D[np.abs(np.arange(50)[:, None] - lib[None]) <= 1] = np.inf
        ref = np.argsort(D, axis=1, kind="stable")[:, :4]
        for real, dt in (("float", np.float32), ("double", np.float64)):
            spec = {"E": 3, "TAU": 1, "K": 4, "METRIC": "euclidean", "REAL": real}
            idx = be.empty((50, 4), np.int32); dist = be.empty((50, 4), dt)
            KNN.launch(be, dict(VARIANT="rows", WG=8, TILE=16, QB=1, EA=2, INS="reg", FLAG=1,
                                SLIDE=8), spec, be.to_device(x.astype(dt)),
                       be.to_device(np.arange(50, dtype=np.int32)), 50,
                       be.to_device(lib.astype(np.int32)), lib.size, 1, 1, idx, dist)
            be.finish()
            assert (be.to_host(idx) == lib[ref]).all()
            assert np.allclose(be.to_host(dist), np.take_along_axis(D, ref, 1), rtol=1e-5)
            print(real, "same")
    """)
    assert "float same" in out and "double same" in out


def test_simplex_passes_library_contiguity(monkeypatch):
    """pe.simplex's whole-series library reaches params_for as contiguous (so GPUs may
    take SLIDE); a library of two segments does not."""
    import pyedmcl as pe
    seen = []
    original = KNN.params_for

    def spy(be, spec, size, nq_total=None, contiguous=False, **kw):  # kw: bucket_k
        seen.append(contiguous)
        return original(be, spec, size, nq_total=nq_total, contiguous=contiguous, **kw)

    monkeypatch.setattr(KNN, "params_for", spy)
    x = np.sin(np.arange(300) * 0.37)
    pe.simplex(x, E=3, device=CPU_DEVICE)
    pe.simplex(x, E=3, lib=[1, 100, 151, 300], pred=[1, 300], device=CPU_DEVICE)
    assert seen == [True, False]


def test_entries_from_before_slide_stay_usable():
    """Tuning entries written before SLIDE existed (no SLIDE key, as in most shipped
    files) are valid and read as SLIDE=0, the code they measured; a looked-up entry
    keeps the SLIDE it was tuned with."""
    from clkernels.tuning import lookup
    be = get_backend(CPU_DEVICE)
    old = {k: v for k, v in KNN.space.default(be.info).items() if k != "SLIDE"}
    assert KNN.space.valid(old, be.info) and KNN.space.complete(old)["SLIDE"] == 0
    assert not KNN.space.valid({**old, "SLIDE": 0, "BOGUS": 1}, be.info)
    spec = {"E": 3, "TAU": 1, "K": 4, "METRIC": "euclidean", "REAL": "float"}
    choice = lookup(KNN, be.info, KNN.spec_bucket(spec), KNN.size_bucket(4096))
    raw = choice.entry["params"] if choice.entry is not None else {}
    assert choice.params["SLIDE"] == raw.get("SLIDE", 0)
    assert KNN.space.valid(choice.params, be.info)


def test_xmap_batched_slide_same_map(device, monkeypatch):
    """The all-to-all map's batched k-NN with the SLIDE tile (its CCM rows are contiguous,
    which the engine passes on) gives the map of the plain tile bit for bit."""
    import pyedmcl as pe
    from pyedmcl.kernels import xmap as kx

    rng = np.random.default_rng(4)
    X = np.cumsum(rng.standard_normal((300, 6)), axis=0).astype(np.float32)
    X[::7] = np.round(X[::7], 1)  # some ties
    ref = pe.xmap(X, E=np.array([2, 3, 5, 2, 3, 5]), device=device, knn_method="batched").rho
    orig = kx.XmapKnnKernel.params_for
    seen = []

    def slide(self, be, spec, size, **kw):
        seen.append(kw.get("contiguous"))
        p = orig(self, be, spec, size, **kw)
        return {**p, "VARIANT": "rows", "SLIDE": 16, "TILE": 64, "WG": 16, "QB": 1, "EA": 0,
                "CB": 0, "QQ": 1, "SPLIT": 1, "INS": "reg", "FLAG": 1}

    monkeypatch.setattr(kx.XmapKnnKernel, "params_for", slide)
    got = pe.xmap(X, E=np.array([2, 3, 5, 2, 3, 5]), device=device, knn_method="batched").rho
    assert seen and all(seen)
    assert np.array_equal(np.asarray(got), np.asarray(ref), equal_nan=True)


def test_xmap_knn_keeps_an_entry_that_measured_slide():
    """A GPU entry of the series-batched family that measured SLIDE (a re-tune) is taken
    as it is, SLIDE 0 included; one without SLIDE, or the heuristic, gives way to
    ``SLIDE_LAYOUT_GPU`` where SLIDE applies, and never on CPUs."""
    from clkernels.tuning.database import Choice
    be = _fake_gpu()
    spec = {"E": 5, "TAU": 1, "K": 6, "METRIC": "euclidean", "REAL": "float"}
    vec = {"VARIANT": "vec", "WG": 32, "TILE": 256, "QB": 16, "EA": 0, "INS": "reg", "FLAG": 1,
           "SPLIT": 1, "QQ": 1, "CB": 0}
    tuned = Choice({**vec, "SLIDE": 0}, "shipped:device", {"params": {**vec, "SLIDE": 0}})
    assert XMAP_KNN.chosen(be.info, tuned, spec, True) == {**vec, "SLIDE": 0}
    old = Choice({**vec, "SLIDE": 0}, "shipped:device", {"params": dict(vec)})
    assert XMAP_KNN.chosen(be.info, old, spec, True) == XMAP_KNN.SLIDE_LAYOUT_GPU
    assert XMAP_KNN.chosen(be.info, old, spec, False) == {**vec, "SLIDE": 0}
    assert XMAP_KNN.chosen(be.info, Choice({**vec, "SLIDE": 0}, "heuristic"), spec,
                           True) == XMAP_KNN.SLIDE_LAYOUT_GPU
    cpu = get_backend(CPU_DEVICE).info
    assert XMAP_KNN.chosen(cpu, old, spec, True) == {**vec, "SLIDE": 0}


def test_a_slide_winner_gives_way_to_the_best_timed_layout_without_it():
    """Where the tuned winner is a SLIDE layout the launch cannot take (a window span above 48, a gapped
    library), the entry's fastest timed configuration without SLIDE is taken (the tuner
    times tau = 1); where SLIDE applies, the winner."""
    import json

    from clkernels.tuning.database import Choice

    be = _fake_gpu(runtime="untuned-vendor")
    win = {"VARIANT": "rows", "WG": 32, "TILE": 256, "EA": 2, "QB": 1, "QQ": 1, "CB": 0,
           "INS": "reg", "FLAG": 1, "SPLIT": 1, "SLIDE": 8}
    vec = {"VARIANT": "vec", "WG": 128, "TILE": 128, "EA": 0, "QB": 8, "QQ": 2, "CB": 0,
           "INS": "reg", "FLAG": 1, "SPLIT": 1, "SLIDE": 0}
    slow = {**vec, "QB": 4}
    times = {json.dumps(win, sort_keys=True): 1.0, json.dumps(vec, sort_keys=True): 2.0,
             json.dumps(slow, sort_keys=True): 3.0}
    choice = Choice(win, "shipped:device", {"params": win, "times": times})
    spec = {"E": 7, "TAU": 9, "K": 8, "METRIC": "euclidean", "REAL": "float"}
    assert KNN.chosen(be.info, choice, spec, contiguous=True) == KNN.space.complete(vec)
    assert KNN.chosen(be.info, choice, {**spec, "TAU": 1}, contiguous=False) == \
        KNN.space.complete(vec)
    assert KNN.chosen(be.info, choice, {**spec, "TAU": 1}, contiguous=True) == win
    bare = Choice(win, "shipped:device", {"params": win})  # no times: the winner, fixed later
    assert KNN.chosen(be.info, bare, spec, contiguous=True) == win


def test_an_entry_from_before_slide_gives_way_to_the_slide_layout_on_gpus():
    """A GPU entry that never measured SLIDE (its params lack the key) gives the SLIDE
    layout where SLIDE applies (tau 3, E 12: span 33), and its own params where it does
    not (a gapped library, a span above 48) or on a CPU."""
    from clkernels.tuning.database import Choice
    from pyedmcl.kernels.knn import SLIDE_LAYOUT_GPU

    be = _fake_gpu()
    old = {"VARIANT": "vec", "WG": 128, "TILE": 256, "EA": 0, "QB": 8, "QQ": 1, "CB": 0,
           "INS": "reg", "FLAG": 1, "SPLIT": 1}
    choice = Choice(old, "shipped:vendor_type", {"params": old})
    spec = {"E": 12, "TAU": 3, "K": 13, "METRIC": "euclidean", "REAL": "float"}
    assert KNN.chosen(be.info, choice, spec, contiguous=True) == SLIDE_LAYOUT_GPU
    assert KNN.chosen(be.info, choice, spec, contiguous=False) == old
    assert KNN.chosen(be.info, choice, {**spec, "TAU": 5}, contiguous=True) == old
    cpu = get_backend(CPU_DEVICE).info
    assert KNN.chosen(cpu, choice, spec, contiguous=True) == old
