"""RQA figures (Agg backend): the drawn data are the table's values.

``plot_rqa_vs_radius``: each panel's lines hold the grid's radii (increasing) and that
measure's values, one line per other swept value; ``plot_rqa_heatmap``: the image holds
the batch's values (scaled per measure), a windowed batch's series by window, a cube's
per-pixel map. Exact equality: the figures copy the values.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RADII = [0.4, 0.2, 0.3]  # not sorted: the lines are


@pytest.fixture(scope="module")
def series() -> np.ndarray:
    rng = np.random.default_rng(11)
    return np.sin(np.arange(240) * 0.4) + 0.3 * rng.standard_normal(240)


@pytest.fixture(scope="module")
def grid(series):
    return pe.rqa_grid(series, E=[2, 3], radius=RADII, device=CPU_DEVICE)


@pytest.fixture(scope="module")
def batch():
    X = np.random.default_rng(12).standard_normal((160, 4)).cumsum(axis=0)
    return X, pe.rqa_batch(X, E=2, radius=1.0, device=CPU_DEVICE)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_vs_radius_lines_are_the_grid(grid):
    axs = pe.plot_rqa_vs_radius(grid, measures=["RR", "DET", "RTE"])
    assert len(axs) == 3
    for ax, m in zip(axs, ["RR", "DET", "RTE"], strict=True):
        assert ax.get_ylabel() == m and len(ax.lines) == 2
        for line, E in zip(ax.lines, [2, 3], strict=True):
            part = grid[grid["E"] == E].sort_values("radius")
            assert line.get_label() == f"E = {E}"
            assert np.array_equal(line.get_xdata(), part["radius"].to_numpy())
            assert np.array_equal(line.get_ydata(), part[m].to_numpy(), equal_nan=True)


def test_vs_radius_one_line_given_axes_and_defaults(grid):
    one = grid[grid["E"] == 2]
    fig, ax = plt.subplots()
    (got,) = pe.plot_rqa_vs_radius(one, measures="LAM", axes=ax, logx=True)
    assert got is ax and len(ax.lines) == 1 and ax.get_xscale() == "log"
    assert np.array_equal(ax.lines[0].get_ydata(), one.sort_values("radius")["LAM"].to_numpy())
    axs = pe.plot_rqa_vs_radius(one)  # the default panels
    assert [a.get_ylabel() for a in axs] == ["RR", "DET", "L", "LAM", "TT", "RTE"]


def test_vs_radius_bad_input(grid, batch):
    with pytest.raises(ValueError, match="measures"):
        pe.plot_rqa_vs_radius(grid, measures=["DET", "NOPE"])
    with pytest.raises(TypeError, match="grid"):
        pe.plot_rqa_vs_radius(grid.to_dict())
    with pytest.raises(ValueError, match="radius"):
        pe.plot_rqa_vs_radius(grid.drop(columns="radius"))
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="axes"):
        pe.plot_rqa_vs_radius(grid, measures=["RR", "DET"], axes=ax)


def test_heatmap_of_a_batch_scales_each_measure(batch):
    _, df = batch
    cols = ["RR", "DET", "LAM", "RTE"]
    ax = pe.plot_rqa_heatmap(df, measures=cols)
    img = ax.images[0].get_array()
    v = df[cols].to_numpy(float)
    assert np.allclose(img, (v - v.min(0)) / (v.max(0) - v.min(0)), rtol=0, atol=1e-15)
    assert [t.get_text() for t in ax.get_xticklabels()] == cols
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2", "3"]
    assert len(ax.texts) == v.size  # small: the values written in the cells
    assert ax.texts[0].get_text() == f"{v[0, 0]:.3g}"


def test_heatmap_of_a_windowed_batch(batch):
    X, _ = batch
    dw = pe.rqa_batch(X, E=2, radius=1.0, window=50, step=40, device=CPU_DEVICE)
    ax = pe.plot_rqa_heatmap(dw, measure="DET")
    img = np.ma.filled(ax.images[0].get_array(), np.nan)
    for i in range(X.shape[1]):
        assert np.array_equal(img[i], dw.loc[i, "DET"].to_numpy(), equal_nan=True)
    assert ax.get_xlabel().startswith("window start")
    with pytest.raises(ValueError, match="measure"):
        pe.plot_rqa_heatmap(dw, measure="DET", measures=["RR"])


def test_heatmap_of_a_cube():
    xr = pytest.importorskip("xarray")
    cube = np.random.default_rng(13).standard_normal((120, 2, 3)).cumsum(axis=0)
    da = xr.DataArray(cube, dims=("time", "lat", "lon"),
                      coords={"lat": [10.0, 20.0], "lon": [0.0, 1.0, 2.0]})
    ds = pe.rqa_batch(da, E=2, radius=1.0, device=CPU_DEVICE)
    ax = pe.plot_rqa_heatmap(ds, measure="LAM")
    assert np.array_equal(ax.images[0].get_array(), ds["LAM"].to_numpy())
    assert ax.images[0].origin == "lower" and (ax.get_ylabel(), ax.get_xlabel()) == ("lat", "lon")
    with pytest.raises(ValueError, match="measure"):
        pe.plot_rqa_heatmap(ds, measure="n_cells")
    with pytest.raises(ValueError, match="two dimensions"):
        pe.plot_rqa_heatmap(ds.expand_dims(band=[1, 2]), measure="LAM")


def test_without_matplotlib(grid, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pyedmcl\[plot\]"):
        pe.plot_rqa_vs_radius(grid)
