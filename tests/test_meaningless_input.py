"""Inputs that make an answer meaningless are named: a time axis out of order or given
twice, a constant series, a 2-D array where one series is documented, and a CCM library
that holds the series it cross-maps. API: ValueError / ConstantSeriesWarning /
TimeOrderWarning (pyEDM compatibility layer); CLI: one line, exit 2."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.io import read_csv
from pyedmcl.time_order import TimeOrderWarning, time_order_problem
from pyedmcl.validation import ConstantSeriesWarning

N = 80
X = np.sin(np.arange(N) * 0.3) + 0.05 * np.cos(np.arange(N) * 1.7)
Z = np.cos(np.arange(N) * 0.71) * np.sin(np.arange(N) * 0.13)


def _cli(argv) -> tuple[int, str]:
    from pyedmcl.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def _exit_2(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, (rc, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for s in needles:
        assert s in err, (s, err)


# --- time order ---------------------------------------------------------------------------

@pytest.mark.parametrize("values, row, word", [
    ([1, 2, 3, 5, 4], "data row 5 (4) comes after row 4 (5)", "not increasing"),
    ([2003, 2002, 2001], "data row 2 (2002) comes after row 1 (2003)", "not increasing"),
    ([1.0, 2.0, 2.0, 3.0], "repeats the time 2.0 (data rows 2 and 3", "repeats"),
    (["2001-01-01", "2001-01-03", "2001-01-02"], "data row 3 (2001-01-02)", "not increasing"),
    ([1.0, np.nan, 0.5], "data row 3 (0.5) comes after row 1 (1.0)", "not increasing"),
])
def test_time_order_names_the_first_offending_row(values, row, word):
    msg = time_order_problem(np.array(values, dtype=object if isinstance(values[0], str)
                                      else None), "t")
    assert msg is not None and row in msg and word in msg and "'t'" in msg


def test_time_order_accepts_increasing_and_unjudgeable_columns():
    assert time_order_problem(np.arange(5), "t") is None
    assert time_order_problem(np.array(["2001-01-01", "2001-02-01"], dtype=object), "d") is None
    assert time_order_problem(np.array(["a", "c", "b"], dtype=object), "label") is None


@pytest.mark.parametrize("text, col", [
    ("year,x\n2003,1\n2002,2\n2001,3\n", "year"),
    ("date,x\n2001-01-01,1\n2001-01-03,2\n2001-01-02,3\n", "date"),
    ("t,x\n1,1\n2,2\n2,3\n", "t"),
    (",x\n2,1\n0,2\n1,3\n", "Unnamed: 0"),  # a shuffled frame's to_csv() index
])
def test_csv_time_column_out_of_order_is_refused(text, col):
    with pytest.raises(ValueError, match=rf"f\.csv: time column '{col}' .*--time-column"):
        read_csv(io.StringIO(text), "f.csv")
    assert read_csv(io.StringIO(text), "f.csv", time_column=False).time is None  # --no-time


def test_pandas_time_axis_out_of_order_is_refused():
    back = pd.Series(X, index=pd.date_range("2000", periods=N, freq="D")[::-1])
    with pytest.raises(ValueError, match=r"x \(its index\): time column 'index' is not "
                                         r"increasing: data row 2 .*sort"):
        pe.simplex(back, E=2, device=CPU_DEVICE)
    df = pd.DataFrame({"year": np.arange(N)[::-1], "x": X, "z": Z})
    with pytest.raises(ValueError, match=r"^x: time column 'year' is not increasing"):
        pe.simplex(df, columns=["x"], target="z", E=2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="time column 'year'"):
        pe.xmap(df, E=2, device=CPU_DEVICE)


def test_pandas_rows_reordered_by_value_are_refused():
    """A Series sorted by value keeps its integer labels: no longer in time order."""
    s = pd.Series(X)
    with pytest.raises(ValueError, match=r"x \(its index\): .*look shuffled.*sort_index"):
        pe.simplex(s.sort_values(), E=2, device=CPU_DEVICE)
    with pytest.raises(ValueError, match="look shuffled"):
        pe.ccm(pd.DataFrame({"x": X, "z": Z}).sample(frac=1, random_state=0), target="z",
               columns="x", E=2, lib_sizes=[30, 60], sample=2, seed=1, device=CPU_DEVICE)
    for fine in (s[::-1], s[s > 0]):  # reversed on purpose; a subset in order
        assert np.isfinite(pe.simplex(fine, E=2, device=CPU_DEVICE).rho)


def test_compat_warns_of_time_order_as_pyedm_accepts_it():
    import pyedmcl.compat.pyedm as EDM

    df = pd.DataFrame({"Time": np.r_[1, 3, 2, np.arange(4, N + 1)], "x": X})
    kw = dict(columns="x", target="x", lib="1 40", pred="41 79", E=2)
    with pytest.warns(TimeOrderWarning, match=r"Simplex: time column 'Time' is not "
                                              r"increasing: data row 3 \(2\)"):
        out = EDM.Simplex(dataFrame=df, **kw)
    assert np.isfinite(out["Predictions"].to_numpy()[1:]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TimeOrderWarning)
        EDM.Simplex(dataFrame=df, noTime=True, **kw)  # the first column is no time then
        EDM.Simplex(dataFrame=df.assign(Time=np.arange(N)), **kw)


# --- constant series ----------------------------------------------------------------------

def test_constant_series_warned_and_noted_edm():
    c = np.full(N, 2.5)
    c[[3, 9]] = np.nan  # constant once the NaN rows are left out
    with pytest.warns(ConstantSeriesWarning, match="^simplex: series x is constant"):
        r = pe.simplex(c, E=2, device=CPU_DEVICE)
    assert np.isnan(r.rho) and "constant" in r.notes[0]
    with pytest.warns(ConstantSeriesWarning, match="^ccm: series y is constant"):
        r = pe.ccm(X, np.full(N, 1.0), E=2, lib_sizes=[30, 60], sample=2, seed=1,
                   device=CPU_DEVICE)
    assert r.notes and "ccm: series y" in r.notes[0]
    with pytest.warns(ConstantSeriesWarning, match="^embed_dimension: series target"):
        s = pe.embed_dimension(X, np.ones(N), max_E=2, device=CPU_DEVICE)
    assert len(s.notes) == 1 and np.isnan(s.rho).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantSeriesWarning)
        assert not pe.simplex(X, E=2, device=CPU_DEVICE).notes


def test_a_calls_extremes_and_arguments_are_its_own():
    """The call's min and max of a series (pyedmcl._extremes) are each array's own, NaN
    where it holds one; the constant-series check binds a call's arguments as
    inspect's bind does, or not at all where bind refuses them."""
    import inspect

    from pyedmcl._extremes import call_memo, extremes, has_nan
    from pyedmcl.constant_series import _binder

    a = np.array([3.0, -1.0, 2.0])
    b = a.copy()
    b[0] = 9.0
    with call_memo():
        assert extremes(a) == (-1.0, 3.0) and extremes(b) == (-1.0, 9.0)
        assert extremes(a) == (-1.0, 3.0) and not has_nan(a)
        assert has_nan(np.array([1.0, np.nan])) and np.isnan(extremes(np.array([np.nan]))[1])
    assert not has_nan(np.zeros(0)) and not has_nan(np.arange(3))

    def f(x, target=None, *, E=None, theta, columns=None):
        return None
    sig, bind = inspect.signature(f), _binder(inspect.signature(f))
    Z = -X
    for args, kw in [((X,), {"theta": 1}), ((X, Z), {"theta": 1, "E": 2}),
                     ((), {"x": X, "theta": 2}), ((X,), {}), ((X,), {"x": X, "theta": 1}),
                     ((X, Z, X), {"theta": 1}), ((X,), {"bogus": 1, "theta": 1})]:
        try:
            want = dict(sig.bind(*args, **kw).arguments)
        except TypeError:
            want = None
        got = bind(args, kw)
        assert (got is None) == (want is None), (args, kw)
        assert got is None or (got.keys() == want.keys()
                               and all(got[k] is want[k] for k in got)), (args, kw)


def test_constant_series_warned_and_noted_rqa():
    with pytest.warns(ConstantSeriesWarning, match="^rqa: series x is constant: every pair"):
        r = pe.rqa(np.ones(60), E=2, radius=0.1, device=CPU_DEVICE)
    assert r.RR == 1 and "recurrent at any radius" in r.notes[0] and "note:" in repr(r)


def test_constant_series_warned_elsewhere():
    c = np.ones(60)
    with pytest.warns(ConstantSeriesWarning, match="^recurrence_plot: series x is constant"):
        assert pe.recurrence_plot(c, radius=0.1, device=CPU_DEVICE).all()
    with pytest.warns(ConstantSeriesWarning, match="^recurrence_network: series x"):
        assert pe.recurrence_network(c, radius=0.1, device=CPU_DEVICE).notes
    with pytest.warns(ConstantSeriesWarning, match="^generate: series x is constant"):
        assert pe.generate(c, E=2, steps=3, device=CPU_DEVICE).notes


# --- several series where one is documented; a library holding its target -----------------

def test_two_d_series_refused_with_shape_and_remedy():
    with pytest.raises(ValueError, match=r"x must be 1-D \(a single series\), got shape "
                                         r"\(80, 2\); .*embedded=True"):
        pe.rqa(np.stack([X, Z], axis=1), radius=0.3, device=CPU_DEVICE)
    with pytest.raises(ValueError, match=r"y must be 1-D .*shape \(80, 2\); pass one column"):
        pe.cross_rqa(X, np.stack([X, Z], axis=1), radius=0.3, device=CPU_DEVICE)


def test_ccm_library_holding_its_target_is_refused():
    with pytest.raises(ValueError, match=r"ccm: y's column '1' .* is the series rho_yx "
                                         r"cross-maps .*leave it out of y"):
        pe.ccm(X, np.stack([Z, X], axis=1), E=2, lib_sizes=[30, 60], sample=2, seed=1,
               device=CPU_DEVICE)
    df = pd.DataFrame({"x": X, "z": Z})
    with pytest.raises(ValueError, match=r"ccm: x's column 'z' .*leave it out of columns="):
        pe.ccm(df, columns=["x", "z"], target="z", E=2, lib_sizes=[30, 60], sample=2,
               seed=1, device=CPU_DEVICE)


def test_identical_series_are_named():
    from pyedmcl.validation import SelfMapWarning

    with pytest.warns(SelfMapWarning, match="ccm: x and y are the same series"):
        pe.ccm(X, X.copy(), E=2, lib_sizes=[30, 60], sample=2, seed=1, device=CPU_DEVICE)
    with pytest.raises(ValueError, match=r"xmap: series 'a' and 'c' are identical.*drop one"):
        pe.xmap(pd.DataFrame({"a": X, "b": Z, "c": X.copy()}), E=2, device=CPU_DEVICE)
    with pytest.warns(ConstantSeriesWarning, match="xmap: series 2, 3 are constant"):
        pe.xmap(np.stack([X, Z, np.ones(N), np.ones(N)], axis=1), E=2, device=CPU_DEVICE)


def test_compat_ccm_of_a_column_with_itself_runs_as_pyedm():
    """pyEDM maps a column onto itself when asked; the compat layer does too (through its
    general path), while pyedmcl.ccm refuses it."""
    import pyedmcl.compat.pyedm as EDM

    df = pd.DataFrame({"Time": np.arange(1, N + 1), "x": X})
    out = EDM.CCM(dataFrame=df, columns="x", target="x", libSizes="20 60 40", sample=3, E=2,
                  seed=1)
    assert list(out.columns) == ["LibSize", "x:x"] and (out["x:x"] > 0.9).all()


def test_scan_target_two_d_names_shape_and_remedy():
    with pytest.raises(ValueError, match=r"target must be 1-D .*shape \(80, 2\); a scan "
                                         r"predicts one target"):
        pe.predict_interval(X, np.stack([X, Z], axis=1), E=2, max_Tp=2, device=CPU_DEVICE)


def test_constant_column_of_a_state_space_is_named():
    df = pd.DataFrame({"x": X, "flat": np.full(N, 3.0)})
    with pytest.warns(ConstantSeriesWarning, match="^smap: series x column flat is constant"):
        r = pe.smap(df, columns=["x", "flat"], target="x", E=1, theta=1.0, device=CPU_DEVICE)
    assert "flat" in r.notes[0]


# --- the CLI: one line, exit 2 ------------------------------------------------------------

@pytest.fixture(scope="module")
def csvs(tmp_path_factory):
    d = tmp_path_factory.mktemp("meaningless")
    rows = range(N)
    paths = {
        "back": ("year,x,z\n", [f"{2100 - i},{X[i]},{Z[i]}\n" for i in rows]),
        "dup": ("time,x,z\n", [f"{min(i, 40)},{X[i]},{Z[i]}\n" for i in rows]),
        "const": ("time,x,c\n", [f"{i},{X[i]},1.5\n" for i in rows]),
        "twin": ("time,x,x2\n", [f"{i},{X[i]},{X[i]}\n" for i in rows]),
    }
    out = {}
    for k, (head, body) in paths.items():
        p = d / f"{k}.csv"
        p.write_text(head + "".join(body))
        out[k] = str(p)
    return out


def test_cli_refuses_meaningless_input(csvs):
    dev = ["--device", CPU_DEVICE, "-q"]
    _exit_2(*_cli(["simplex", csvs["back"], "-c", "x", "-E", "2", *dev]),
            "time column 'year' is not increasing: data row 2 (2099)", "--time-column")
    _exit_2(*_cli(["ccm", csvs["dup"], "-c", "x", "-t", "z", "-E", "2", "--lib-sizes", "20",
                   "40", *dev]), "repeats the time 40 (data rows 41 and 42")
    _exit_2(*_cli(["simplex", csvs["const"], "-c", "c", "-E", "2", *dev]),
            "series x is constant", "--column c")
    _exit_2(*_cli(["rqa", csvs["const"], "-c", "c", "--radius", "0.1", *dev]),
            "rqa: series x is constant")
    _exit_2(*_cli(["ccm", csvs["const"], "-c", "x", "-t", "x", "-E", "2", "--lib-sizes",
                   "20", "40", *dev]), "--column and --target both name 'x'")
    _exit_2(*_cli(["ccm", csvs["twin"], "-c", "x", "-t", "x2", "-E", "2", "--lib-sizes",
                   "20", "40", *dev]), "x and y are the same series")
    rc, err = _cli(["simplex", csvs["back"], "--no-time", "-c", "x", "-E", "2", *dev])
    assert rc == 0, err  # the year is then a series: the user said so


def test_cli_xmap_warns_of_a_constant_series_and_maps_the_rest(tmp_path):
    """An all-to-all map of many series names a constant one and goes on (exit 0); a
    duplicated series is refused (exit 2)."""
    np.save(tmp_path / "p.npy", np.stack([X, Z, np.ones(N)], axis=1))
    rc, err = _cli(["xmap", str(tmp_path / "p.npy"), "-o", str(tmp_path / "m.zarr"), "--E",
                    "2", "-q", "--device", CPU_DEVICE])
    assert rc == 0 and "warning (ConstantSeriesWarning): xmap: series 2 is constant" in err, err
    np.save(tmp_path / "d.npy", np.stack([X, Z, X], axis=1))
    _exit_2(*_cli(["xmap", str(tmp_path / "d.npy"), "-o", str(tmp_path / "d.zarr"), "--E",
                   "2", "-q", "--device", CPU_DEVICE]), "series '0' and '2' are identical")


def test_a_strided_series_is_made_contiguous_once():
    """A column of a 2-D array (strided) becomes one contiguous float64 copy, whose
    extremes are the column's from the call's memo (not a second pass), and the call's
    answer is the contiguous series' own."""
    from pyedmcl import _extremes
    from pyedmcl.validation import as_series

    panel = np.stack([X, Z, X * 2], axis=1)  # (N, 3): a column is strided
    col = panel[:, 1]
    assert not col.flags.c_contiguous
    with _extremes.call_memo():
        got = _extremes.extremes(col)
        s = as_series(col)
        assert s.flags.c_contiguous and s is not col
        np.testing.assert_array_equal(s, col)
        assert _extremes._MEMO.get()[id(s)] == (s, got)  # the column's values, kept
    a = pe.rqa(col, E=2, radius=0.3, device=CPU_DEVICE)
    b = pe.rqa(np.ascontiguousarray(col), E=2, radius=0.3, device=CPU_DEVICE)
    assert a.measures == b.measures
