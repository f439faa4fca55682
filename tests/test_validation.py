"""Regression tests of issue #20 item 6: each input once accepted silently or crashing.

Small sizes on PoCL; every test fails on the code before the fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl._precision import PrecisionWarning

X = np.sin(np.arange(120) * 0.7) + 0.01 * np.arange(120)
Y = np.cos(np.arange(120) * 0.5)


def test_xmap_non_integral_E_is_refused_not_truncated():
    with pytest.raises(TypeError, match=r"E must be an integer \(in \[1, "):
        pe.xmap(np.stack([X, Y], 1), E=1.5, device=CPU_DEVICE)
    with pytest.raises(TypeError, match="E must be an integer"):
        pe.xmap(np.stack([X, Y], 1), E=True, device=CPU_DEVICE)


@pytest.mark.parametrize("fn", ["rqa", "cross_rqa", "joint_rqa"])
def test_rqa_integral_float_E_runs_as_int(fn):
    f = getattr(pe, fn)
    args = (X,) if fn == "rqa" else (X, Y)
    a = f(*args, E=2, tau=1, l_min=2, radius=0.5, device=CPU_DEVICE)
    b = f(*args, E=2.0, tau=np.float32(1), l_min=2.0, radius=0.5, device=CPU_DEVICE)
    assert a.as_dict()["RR"] == b.as_dict()["RR"] and a.DET == b.DET


def test_ccm_huge_sample_is_refused_up_front():
    with pytest.raises(ValueError, match=r"sample=1000000000 needs about .* allowed here: sample <= \d+"):
        pe.ccm(X, Y, E=2, lib_sizes=[20, 40], sample=10**9, seed=1, device=CPU_DEVICE)


def test_recurrence_rate_below_floor_is_explained():
    n = X.size - 1  # E=2
    with pytest.raises(ValueError, match=r"below the smallest rate this input allows.*main diagonal") as ei:
        pe.rqa(X, E=2, recurrence_rate=1e-6, device=CPU_DEVICE)
    floor = float(str(ei.value).split("use recurrence_rate >= ")[1].split()[0])
    assert 1 / n <= floor < 3 / n
    q = pe.rqa(X, E=2, recurrence_rate=floor, device=CPU_DEVICE)  # the rate named runs
    assert q.RR > 0
    with pytest.raises(ValueError, match="smallest non-zero rate"):  # cross: no cell recurs
        pe.cross_rqa(X, Y, E=2, recurrence_rate=1e-9, device=CPU_DEVICE)


def _suggested(call) -> float:
    with pytest.raises(ValueError, match="below the smallest rate") as ei:
        call(1e-6)
    return float(str(ei.value).split("use recurrence_rate >= ")[1].split()[0])


def test_recurrence_rate_floor_is_the_least_rate_that_runs():
    """The rate the refusal names is accepted and reaches the fewest recurrences (the cells
    at the smallest distance: the zeros of repeated points and the main diagonal, or a
    cross plot's closest pairs); below c / (n_cells - 1) no rate is. Ties: pyunicorn's
    order statistic, int(rate * (n_cells - 1))."""
    x = np.array([0., 0, 1, 1, 2, 2, 3, 3])  # 16 zero cells of 64; floor 16/63
    floor = _suggested(lambda r: pe.rqa(x, recurrence_rate=r, dtype="float64",
                                        device=CPU_DEVICE))
    assert 16 / 63 <= floor < 16 / 63 * 1.01
    assert pe.rqa(x, recurrence_rate=floor, dtype="float64", device=CPU_DEVICE).RR == 16 / 64
    with pytest.raises(ValueError, match="16/64 = 0.25 for the 8 x 8"):
        pe.rqa(x, recurrence_rate=0.99 * 16 / 63, dtype="float64", device=CPU_DEVICE)
    xc, yc = np.array([0., 1, 2, 3]), np.array([0.5, 10, 20])  # two closest pairs of 12
    floor = _suggested(lambda r: pe.cross_rqa(xc, yc, recurrence_rate=r, dtype="float64",
                                              device=CPU_DEVICE))
    assert 2 / 11 <= floor < 2 / 11 * 1.01
    assert pe.cross_rqa(xc, yc, recurrence_rate=floor, dtype="float64",
                        device=CPU_DEVICE).RR == 2 / 12


def test_rqa_errors_name_the_window_and_the_series():
    """A windowed run's refusal names its window; joint RQA's names the series; line
    minima beyond a window say so; path_lengths takes a bool or None."""
    x = np.round(np.cumsum(np.random.default_rng(1).standard_normal(300)) * 3) / 10
    x[100:170] = x[100]  # one window of a constant stretch
    with pytest.raises(ValueError, match=r"window \(100, 149\) of the embedded points: "
                                         r"recurrence_rate=0.1: every distance is 0"):
        pe.rqa(x, recurrence_rate=0.1, window=50, step=50, dtype="float64", device=CPU_DEVICE)
    ys = np.round(np.sin(np.arange(200) * 0.1))
    with pytest.raises(ValueError, match="^series y: recurrence_rate=0.05 is below"):
        pe.joint_rqa(np.sin(np.arange(200) * 0.3), ys, recurrence_rate=(0.05, 0.05),
                     device=CPU_DEVICE)
    with pytest.raises(ValueError, match=r"w_min=5 .* a window of 3 embedded points"):
        pe.rqa(x, radius=0.5, window=3, w_min=5, device=CPU_DEVICE)
    with pytest.raises(TypeError, match="path_lengths must be True, False or None"):
        pe.recurrence_network(x[:100], radius=0.3, path_lengths="no", device=CPU_DEVICE)


def test_max_E_out_of_range_is_a_clear_error():
    """max_E beyond the fused kernels' knn limit runs (slower path, tests/test_multivariate.py);
    beyond the kernels' E it is an error, and too large for the series names the E."""
    with pytest.raises(ValueError, match=r"max_E=513 is out of range; allowed: in \[1, 512\]"):
        pe.embed_dimension(X, max_E=513, device=CPU_DEVICE)
    with pytest.raises(ValueError, match=r"max_E=100 is too large for this series"):
        pe.embed_dimension(X, max_E=100, device=CPU_DEVICE)
    import pyedmcl.compat.pyedm as EDM

    df = pd.DataFrame({"Time": np.arange(1, 121), "x": X})
    with pytest.raises(ValueError, match=r"^maxE=513 is out of range"):
        EDM.EmbedDimension(dataFrame=df, columns="x", target="x", lib="1 100", pred="101 119",
                           maxE=513, showPlot=False, device=CPU_DEVICE)
    with pytest.raises(ValueError, match=r"maxE=40 is too large .* use maxE <= \d+"):
        EDM.EmbedDimension(dataFrame=df, columns="x", target="x", lib="1 60", pred="61 119",
                           maxE=40, showPlot=False, device=CPU_DEVICE)
    with pytest.raises(TypeError, match="tau must be an integer"):
        EDM.Simplex(dataFrame=df, columns="x", target="x", lib="1 60", pred="61 119", E=2,
                    tau="1", device=CPU_DEVICE)


def test_embed_dimension_bool_is_not_a_cached_int():
    pe.embed_dimension(X, max_E=3, tau=1, device=CPU_DEVICE)  # fills the layout cache for tau=1
    with pytest.raises(TypeError, match="tau must be an integer"):
        pe.embed_dimension(X, max_E=3, tau=True, device=CPU_DEVICE)


def test_cli_broken_h5_is_bad_input_not_a_runtime_failure(tmp_path, capsys):
    from pyedmcl.cli.main import main

    (tmp_path / "x.h5").write_bytes(b"not hdf5 at all")
    assert main(["simplex", str(tmp_path / "x.h5"), "-E", "2", "--device", CPU_DEVICE]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "x.h5 is not a readable .h5 file" in err
    assert main(["simplex", str(tmp_path / "x.h5"), "-E", "1.5"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_integers_as_the_api_takes_them(tmp_path, capsys):
    """``-E 2.0`` is 2 on the command line too (same result as ``-E 2``); ``-E 1.5`` is
    refused with exit 2 and one line naming the option."""
    import json

    from pyedmcl.cli.main import main

    np.save(tmp_path / "x.npy", np.sin(np.arange(200) * 0.3))
    outs = []
    for e in ("2", "2.0"):
        assert main(["simplex", str(tmp_path / "x.npy"), "-E", e, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert main(["simplex", str(tmp_path / "x.npy"), "-E", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-E" in err[0] and "'1.5' is not an integer" in err[0]


def test_cli_missing_extra_is_one_line(tmp_path, capsys, monkeypatch):
    """A command needing an extra that is not installed (Zarr for xmap -o) says which one
    to install in one line, exit 1, no traceback hint."""
    from pyedmcl.cli.main import main

    np.save(tmp_path / "X.npy", np.random.default_rng(0).random((40, 3)))
    monkeypatch.setitem(__import__("sys").modules, "zarr", None)  # import zarr now fails
    # a device named: the default one may first say, once a process, which runtime it
    # skipped (PoCL where its LLVM does not know the CPU), a line of its own
    assert main(["xmap", str(tmp_path / "X.npy"), "-o", str(tmp_path / "m.zarr"), "--E", "2",
                 "--devices", CPU_DEVICE]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'pyedmcl[io]'" in err[0], err


@pytest.mark.parametrize("call", [
    lambda x: pe.simplex(x, E=2, device=CPU_DEVICE),
    lambda x: pe.smap(x, E=2, theta=2.0, device=CPU_DEVICE),
    lambda x: pe.rqa(x, E=2, radius=0.1, device=CPU_DEVICE),
    lambda x: pe.ccm(x, x[::-1].copy(), E=2, lib_sizes=[20, 40], sample=2, device=CPU_DEVICE),
], ids=["simplex", "smap", "rqa", "ccm"])
def test_values_whose_squares_overflow_are_refused(call):
    """Values of 1e300 made every squared distance inf: the calls answered NaN (rho, DET)
    with no error. Now a ValueError names the series and the allowed magnitude."""
    x = np.sin(np.arange(60) * 0.7) * 1e300
    with pytest.raises(ValueError, match=r"x holds values up to 9.98e\+299 .*allowed: \|value\| <= 1e\+150"):
        call(x)
    with warnings.catch_warnings():  # 1e140: allowed, and it runs (RQA in float64)
        warnings.simplefilter("ignore", PrecisionWarning)
        call(x * 1e-160)


def test_rqa_beyond_float32_squares_runs_in_float64():
    """RQA centres its series (a radius is in data units) but does not scale them: values
    of 1e20 squared overflow float32, and the rate's radius search and the kernels saw
    inf. Such a call runs in float64 with a PrecisionWarning and equals the float64 run."""
    x = np.sin(np.arange(80) * 0.7) * 1e20
    with pytest.warns(PrecisionWarning, match="beyond float32's range"):
        r = pe.rqa(x, E=2, recurrence_rate=0.35, device=CPU_DEVICE)
    ref = pe.rqa(x, E=2, recurrence_rate=0.35, dtype="float64", device=CPU_DEVICE)
    assert r.n_recurrences == ref.n_recurrences > 0
    np.testing.assert_array_equal(r.diagonal_hist, ref.diagonal_hist)


def test_joint_rqa_names_the_series_of_a_bad_pair_value():
    """A pair's bad radius or rate says which series it belongs to."""
    x = np.sin(np.arange(300) * 0.3)
    with pytest.raises(ValueError, match="recurrence_rate of y=2"):
        pe.joint_rqa(x, x, recurrence_rate=(0.1, 2))
    with pytest.raises(ValueError, match="radius of x=-1"):
        pe.joint_rqa(x, x, radius=(-1, 2))


def test_ccm_and_xmap_refuse_what_they_would_cut():
    """A fractional library size is refused, not cut to an integer; xmap's n_workers is
    checked with or without a cluster."""
    with pytest.raises(ValueError, match=r"lib_sizes=\[20.7\] is not a list of integers"):
        pe.ccm(X, Y, E=2, lib_sizes=[20.7], sample=2, seed=1, device=CPU_DEVICE)
    np.testing.assert_array_equal(
        pe.ccm(X, Y, E=2, lib_sizes=np.array([20.0, 30.0]), sample=2, seed=1,
               device=CPU_DEVICE).lib_sizes, [20, 30])
    with pytest.raises(ValueError, match=r"n_workers=0 is out of range"):
        pe.xmap(np.stack([X, Y], axis=1), E=2, n_workers=0, device=CPU_DEVICE)


def test_constant_series_are_named_in_a_warning():
    """ccm and xmap with a given E still run a constant series (pyEDM does) but say that
    its skill is tie order alone; E="auto" refuses it."""
    y = np.cumsum(np.random.default_rng(0).normal(size=100))
    with pytest.warns(UserWarning, match="ccm: series x is constant"):
        pe.ccm(np.ones(100), y, E=2, lib_sizes=[50], sample=2, seed=1, device=CPU_DEVICE)
    X = np.stack([y, np.ones(100), y[::-1]], axis=1)
    with pytest.warns(UserWarning, match="xmap: series 1 is constant"):
        pe.xmap(X, E=2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="too short or constant"):
        pe.xmap(X, E="auto", max_E=3, device=CPU_DEVICE)


def _each(values, lo, hi):
    """check_int_array's element-by-element reading (the reference of its fast path)."""
    from pyedmcl.validation import check_int

    arr = np.atleast_1d(np.asarray(values, dtype=object))
    if arr.ndim != 1:
        raise ValueError(f"E must be one integer or a 1-D list of integers, got shape {arr.shape}")
    return np.array([check_int(v, "E", lo, hi) for v in arr], dtype=np.int64)


@pytest.mark.parametrize("values", [
    np.arange(1, 21), np.arange(1, 21, dtype=np.uint8), np.arange(1, 21).astype(np.float32),
    np.array([3.0, 2.0, -0.0 + 1]), np.array(5), np.array([], dtype=np.int64),
    np.array([1, 65]), np.array([0, 3]), np.array([2.5, 3.0]), np.array([3.0, np.nan]),
    np.array([np.inf]), np.array([2.0 ** 70]), np.array([2 ** 63], dtype=np.uint64),
    np.array([True, False]), np.array([[1, 2]]), [1, 2.0, np.int8(3)], (4,), 7, 7.0,
    [True, 2], pd.Series([3, 4, 5]), pd.Series([3.0, 4.5]), pd.Series([True, False]),
    pd.Series([3, None], dtype="Int64"),
])
def test_int_array_check_reads_numeric_arrays_as_element_by_element(values):
    """The whole-array check of a numeric E returns what the element check returns, and
    refuses what it refuses with the same message (the first bad element's)."""
    from pyedmcl.validation import check_int_array

    try:
        want = _each(values, 1, 64)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)) as got:
            check_int_array(values, "E", 1, 64)
        assert str(got.value) == str(exc)
        return
    got = check_int_array(values, "E", 1, 64)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_two_d_targets_are_checked_as_each_row_would_be():
    """Simplex's 2-D targets are validated by row-wise reductions (a map of 20,000 targets
    spent 0.4 s in a loop over rows): the same array (float64 rows read, not copied, as a
    1-D target is; other dtypes and layouts converted) and, for a bad row, the error that
    row's own check gives, naming target[i] and the first bad index."""
    from pyedmcl.edm.simplex import as_targets

    rng = np.random.default_rng(0)
    Y = rng.standard_normal((6, 50))
    got, single = as_targets(Y, 50)
    assert not single and got is Y
    got = as_targets(np.asfortranarray(Y), 50)[0]  # another layout: a C-contiguous copy
    assert got.dtype == np.float64 and got.flags.c_contiguous and not np.shares_memory(got, Y)
    np.testing.assert_array_equal(got, Y)
    np.testing.assert_array_equal(as_targets(Y.astype(np.int32), 50)[0], Y.astype(np.int32))
    for bad, want in [(np.nan, r"target\[3\] contains NaN or inf \(first at index 7\)"),
                      (-np.inf, r"target\[3\] contains NaN or inf \(first at index 7\)"),
                      (1e200, r"target\[3\] holds values up to 1e\+200 \(first at index 7\)")]:
        Z = Y.copy()
        Z[3, 7] = bad
        Z[5, 1] = bad  # a later bad row: the first is named
        with pytest.raises(ValueError, match=want):
            as_targets(Z, 50)
    with pytest.raises(TypeError, match="target must hold real numbers"):
        as_targets(Y.astype(complex), 50)
    with pytest.raises(ValueError, match="target holds no series"):
        as_targets(np.empty((0, 50)), 50)
