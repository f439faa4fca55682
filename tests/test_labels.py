"""Labelled data in and out (pyedmcl.labels): xarray DataArrays and time-indexed pandas
objects give the unlabelled call's numbers bit for bit, and the results carry the labels.

The oracle of every number is the same call on plain NumPy arrays; the oracle of every
label is the input's own coordinate (indexed by the rows the result reports), so a
label shifted by one row or a series matched to the wrong name fails.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import FAST_BUILD_CPU

import pyedmcl as pe
from pyedmcl import _LABELLED

xr = pytest.importorskip("xarray")

DEV = FAST_BUILD_CPU
N = 96
TIME = pd.date_range("2001-01-01", periods=N, freq="D")


def _coupled(n: int = N) -> np.ndarray:
    """Three series (n, 3): two coupled logistic maps and a sine."""
    a, b = np.empty(n), np.empty(n)
    a[0], b[0] = 0.4, 0.2
    for i in range(n - 1):
        a[i + 1] = a[i] * (3.8 - 3.8 * a[i] - 0.02 * b[i])
        b[i + 1] = b[i] * (3.5 - 3.5 * b[i] - 0.1 * a[i])
    return np.c_[a, b, np.sin(np.arange(n) * 0.37) + 0.01 * np.arange(n) % 0.3]


DATA = _coupled()


def _same(a, b) -> None:
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # NaN == NaN, bit for bit


@pytest.fixture(scope="module")
def da_1d():
    return xr.DataArray(DATA[:, 0], dims="time", coords={"time": TIME}, name="a")


@pytest.fixture(scope="module")
def da_2d():
    return xr.DataArray(DATA, dims=("time", "station"),
                        coords={"time": TIME, "station": ["north", "east", "south"]})


def test_every_labelled_function_takes_allow_irregular():
    """The EDM and RQA entry points all take labelled data: one keyword, off by default."""
    assert {"simplex", "smap", "ccm", "xmap", "rqa", "cross_rqa", "joint_rqa",
            "recurrence_plot", "recurrence_network", "generate", "multiview",
            "embed_dimension", "predict_interval", "predict_nonlinear",
            "predict_exclusion_radius"} <= _LABELLED
    for name in _LABELLED:
        p = inspect.signature(getattr(pe, name)).parameters["allow_irregular"]
        assert p.default is False and p.kind is p.KEYWORD_ONLY, name


def test_simplex_dataarray_indexed_by_time(da_1d):
    r = pe.simplex(da_1d, E=3, device=DEV)
    r0 = pe.simplex(DATA[:, 0], E=3, device=DEV)
    for k in ("predicted", "observed", "times"):
        _same(getattr(r, k), getattr(r0, k))
    assert (r.rho, r.mae, r.rmse) == (r0.rho, r0.mae, r0.rmse)
    df = r.as_dataframe()
    inside = r0.times < N
    # rows inside the data: the coordinate itself; the one past the end: one day later
    assert list(df.index[inside]) == list(TIME[r0.times[inside]])
    assert list(df.index[~inside]) == [TIME[-1] + pd.Timedelta(days=int(k - N + 1))
                                       for k in r0.times[~inside]]
    _same(df["predicted"], r0.predicted)
    assert df.index.name == "time"
    ds = r.as_xarray()
    _same(ds["predicted"].values, r0.predicted)
    np.testing.assert_array_equal(ds["time"].values, df.index.values)
    # unlabelled results keep their row-number column
    assert list(r0.as_dataframe().columns[:1]) == ["time"]


def test_series_with_datetimeindex_and_smap_xarray():
    s = pd.Series(DATA[:, 1], index=TIME)
    r = pe.smap(s, E=2, theta=2.0, device=DEV)
    r0 = pe.smap(DATA[:, 1], E=2, theta=2.0, device=DEV)
    _same(r.predicted, r0.predicted)
    _same(r.coefficients, r0.coefficients)
    df = r.as_dataframe(coefficients=True)
    assert df.index[0] == TIME[r0.times[0]]
    _same(df["C0"], r0.coefficients[:, 0])
    ds = r.as_xarray()
    assert ds["predicted"].dims == ("time",)
    _same(ds["coefficients"].sel(coefficient="C0").values, r0.coefficients[:, 0])


def test_monthly_calendar_is_regular_and_extends_by_month():
    t = pd.date_range("1990-01-01", periods=60, freq="MS")  # steps of 28..31 days
    x = xr.DataArray(DATA[:60, 0], dims="time", coords={"time": t})
    r = pe.simplex(x, E=2, Tp=2, device=DEV)
    assert r.time_index()[-1] == t[-1] + pd.DateOffset(months=2)


def test_xmap_dataframe_labelled_by_columns():
    df = pd.DataFrame(DATA, columns=["a", "b", "c"], index=TIME)
    r = pe.xmap(df, E=3, device=DEV)
    r0 = pe.xmap(DATA, E=3, device=DEV)
    _same(r.rho, r0.rho)
    m = r.as_dataframe()
    assert list(m.index) == list(m.columns) == ["a", "b", "c"]
    assert m.loc["b", "c"] == np.asarray(r0.rho)[1, 2]  # library b cross-maps target c


def test_xmap_2d_dataarray_either_dim_order(da_2d):
    r0 = pe.xmap(DATA, E=3, device=DEV)
    for da in (da_2d, da_2d.transpose("station", "time")):
        r = pe.xmap(da, E=3, device=DEV)
        _same(r.rho, r0.rho)
        assert r.names == ["north", "east", "south"]
        ds = r.as_xarray()
        assert ds.attrs["series_dim"] == "station"
        assert float(ds["rho"].sel(library="east", target="south")) == np.asarray(r0.rho)[1, 2]
        _same(ds["E"].values, r0.E)


def test_ccm_datetimeindex_frame():
    df = pd.DataFrame({"prey": DATA[:, 0], "pred": DATA[:, 1]}, index=TIME)
    kw = dict(E=2, lib_sizes=[20, 60], sample=5, seed=3, device=DEV)
    r = pe.ccm(df["prey"], df["pred"], **kw)
    r0 = pe.ccm(DATA[:, 0], DATA[:, 1], **kw)
    _same(r.rho_xy, r0.rho_xy)
    _same(r.rho_yx, r0.rho_yx)
    assert list(r.as_dataframe().columns) == ["LibSize", "prey:pred", "pred:prey"]
    # the whole frame (pyEDM's form): columns and target named by column
    rm = pe.ccm(df, columns="prey", target="pred", **kw)
    rm0 = pe.ccm(DATA[:, :2], columns=0, target=1, **kw)
    _same(rm.rho_xy, rm0.rho_xy)


def test_rqa_and_recurrence_plot_dataarray(da_1d):
    r = pe.rqa(da_1d, E=2, radius=0.1, device=DEV)
    r0 = pe.rqa(DATA[:, 0], E=2, radius=0.1, device=DEV)
    assert r.measures == r0.measures
    _same(pe.recurrence_plot(da_1d, E=2, radius=0.1, device=DEV),
          pe.recurrence_plot(DATA[:, 0], E=2, radius=0.1, device=DEV))


def _gap(kind: str):
    keep = np.r_[0:40, 41:N]  # day 41 missing
    if kind == "dataarray":
        return xr.DataArray(DATA[keep, 0], dims="time", coords={"time": TIME[keep]})
    if kind == "series":
        return pd.Series(DATA[keep, 0], index=TIME[keep])
    return xr.DataArray(DATA[keep, 0], dims="time", coords={"time": np.arange(N)[keep] * 0.5})


@pytest.mark.parametrize("kind", ["dataarray", "series", "numeric"])
def test_irregular_spacing_refused_unless_allowed(kind):
    x = _gap(kind)
    with pytest.raises(ValueError, match=r"x: time axis 'time' is irregularly spaced: step 40 "
                                         r".*resample.*allow_irregular=True"):
        pe.simplex(x, E=3, device=DEV)
    r = pe.simplex(x, E=3, device=DEV, allow_irregular=True)
    _same(r.predicted, pe.simplex(np.asarray(x), E=3, device=DEV).predicted)


def test_irregular_target_named():
    with pytest.raises(ValueError, match=r"^y: time axis"):
        pe.ccm(DATA[: N - 1, 1], _gap("series"), E=2, lib_sizes=[30], device=DEV)


def test_dataarray_without_time_refused_naming_dims():
    da = xr.DataArray(DATA[:, 0], dims="step")
    with pytest.raises(ValueError, match=r"x is a DataArray with dims \('step',\) and no 'time'"):
        pe.simplex(da, E=3, device=DEV)
    cube = xr.DataArray(np.zeros((N, 2, 2)), dims=("time", "lat", "lon"))
    with pytest.raises(ValueError, match=r"dims \('time', 'lat', 'lon'\).*stack"):
        pe.xmap(cube, E=2, device=DEV)


def test_time_out_of_order_refused():
    da = xr.DataArray(DATA[:, 0], dims="time", coords={"time": TIME[::-1]})
    with pytest.raises(ValueError, match=r"x \(its time coordinate\).*not increasing.*sortby"):
        pe.rqa(da, E=2, radius=0.1, device=DEV)


def test_allow_irregular_must_be_bool():
    with pytest.raises(TypeError, match="allow_irregular must be True or False"):
        pe.simplex(DATA[:, 0], E=3, allow_irregular="yes", device=DEV)


def test_as_xarray_without_xarray_names_the_extra(monkeypatch, da_1d):
    r = pe.simplex(da_1d, E=2, device=DEV)
    monkeypatch.setitem(sys.modules, "xarray", None)
    with pytest.raises(ImportError, match=r'pip install "pyedmcl\[xarray\]"'):
        r.as_xarray()


def test_windowed_rqa_gains_window_times(da_1d):
    kw = dict(E=2, tau=2, radius=0.2, window=30, step=20, device=DEV)
    w = pe.rqa(da_1d, **kw)
    w0 = pe.rqa(DATA[:, 0], **kw)
    assert w.drop(columns=["time_start", "time_end"]).equals(w0)
    start = w0.index.get_level_values("start")
    end = w0.index.get_level_values("end") + 2  # the last point's samples reach (E-1)tau on
    assert list(w["time_start"]) == list(TIME[start])
    assert list(w["time_end"]) == list(TIME[end])


def test_several_targets_named_and_first_column_dates(da_2d):
    r = pe.simplex(da_2d.sel(station="north"), da_2d.sel(station=["east", "south"]), E=3,
                   device=DEV)
    r0 = pe.simplex(DATA[:, 0], DATA[:, 1:].T, E=3, device=DEV)
    _same(r.predicted, r0.predicted)
    ds = r.as_xarray()
    assert list(ds["target"].values) == ["east", "south"]
    _same(ds["predicted"].sel(target="south").values, r0.predicted[1])
    # a first column of datetimes is the time axis, as a DatetimeIndex is
    df = pd.DataFrame({"date": TIME, "a": DATA[:, 0], "b": DATA[:, 1]})
    g = pe.generate(df[["date", "a"]], E=2, steps=2, device=DEV)
    assert list(g.time_index()) == [TIME[-1] + pd.Timedelta(days=k) for k in (1, 2)]
    _same(g.predicted, pe.generate(DATA[:, 0], E=2, steps=2, device=DEV).predicted)


def test_wrapped_functions_pickle_by_name():
    import pickle

    for name in ("generate", "xmap", "simplex"):
        assert pickle.loads(pickle.dumps(getattr(pe, name))) is getattr(pe, name)


def test_recurrence_network_nodes_by_time(da_1d):
    kw = dict(E=2, tau=3, radius=0.2, device=DEV)
    r = pe.recurrence_network(da_1d, **kw)
    r0 = pe.recurrence_network(DATA[:, 0], **kw)
    _same(r.degree, r0.degree)
    df = r.as_dataframe()
    assert list(df.index) == list(TIME[3:])  # node k: its latest sample, k + (E-1) tau
    _same(df["degree"], r0.degree)
