"""Figures of tabular RQA results (matplotlib, the ``[plot]`` extra, imported on use).

* :func:`plot_rqa_vs_radius`: measures against the threshold, one panel per measure, from
  an :func:`~pyedmcl.rqa.grid.rqa_grid` result with several radii (the "RQA vs epsilon"
  figure drawn to choose a radius); one line per combination of the other swept values.
* :func:`plot_rqa_heatmap`: a per-series heat map from an
  :func:`~pyedmcl.rqa.batch.rqa_batch` result -- series by measures (each measure scaled
  over the series), series by window (a windowed batch, one measure), or a cube's
  per-pixel map (a Dataset, one measure).

The figures draw the values as given (no resampling), so a line's or an image's data are
the table's values: what the tests read back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..display import _pyplot
from .measures import MEASURES

#: the panels of :func:`plot_rqa_vs_radius` by default
RADIUS_MEASURES = ("RR", "DET", "L", "LAM", "TT", "RTE")
#: the columns of a batch heat map by default
HEATMAP_MEASURES = ("RR", "DET", "L", "L_entr", "LAM", "TT", "W", "RTE")
#: columns of a grid or batch row that are neither measures nor swept values
_COUNTS = frozenset({"radius", "n_recurrences", "n_cells", "N", "n_points"})


def _frame(table: Any, name: str) -> Any:
    if type(table).__name__ != "DataFrame":
        raise TypeError(f"{name} must be a pandas DataFrame (an rqa_grid or rqa_batch result), "
                        f"got {type(table).__name__}")
    return table


def _measures(measures: Any, have: Any, default: tuple[str, ...]) -> list[str]:
    """The measures to draw: given (a name or a sequence), else the defaults present."""
    if measures is None:
        return [m for m in default if m in have]
    names = [measures] if isinstance(measures, str) else list(measures)
    bad = [m for m in names if m not in MEASURES or m not in have]
    if not names or bad:
        raise ValueError(f"measures={measures!r}: {', '.join(map(str, bad)) or 'empty'} not "
                         f"in the table; allowed: {', '.join(m for m in MEASURES if m in have)}")
    return names


def plot_rqa_vs_radius(grid: Any, *, measures: Any = None, axes: Any = None,
                       logx: bool = False) -> Any:
    """Measures against the radius from an :func:`pyedmcl.rqa_grid` result: one panel per
    measure (default ``RR, DET, L, LAM, TT, RTE``), one line per combination of the grid's
    other swept values (``E``, ``tau``, ``theiler``, minima, ``recurrence_rate``; a
    ``series`` column or index of a grid over several series), each through its radii in
    increasing order. ``axes``: one matplotlib Axes per measure (default: a new figure);
    ``logx``: a logarithmic radius axis. Returns the Axes (a list, one per measure)."""
    df = _frame(grid, "grid")
    if "radius" not in df.columns:
        raise ValueError("grid has no 'radius' column; pass an rqa_grid result (several "
                         "radius= or recurrence_rate= values)")
    if type(df.index).__name__ != "RangeIndex":
        df = df.reset_index()  # series names (a grid over a batch) become a column
    names = _measures(measures, df.columns, RADIUS_MEASURES)
    keys = [c for c in df.columns if c not in MEASURES and c not in _COUNTS
            and df[c].nunique(dropna=False) > 1]
    plt = _pyplot()
    if axes is None:
        ncols = min(3, len(names))
        fig, grid_axes = plt.subplots(math.ceil(len(names) / ncols), ncols, squeeze=False,
                                      figsize=(3.3 * ncols, 2.6 * math.ceil(len(names) / ncols)),
                                      layout="constrained", sharex=True)
        axs = list(grid_axes.ravel())
        for i, ax in enumerate(axs[len(names):], start=len(names)):
            ax.set_visible(False)  # the panel above keeps its radius tick labels
            axs[i - ncols].xaxis.set_tick_params(labelbottom=True)
        axs = axs[:len(names)]
    else:
        axs = [axes] if hasattr(axes, "plot") else list(np.ravel(axes))
        if len(axs) != len(names):
            raise ValueError(f"axes holds {len(axs)} Axes for {len(names)} measures; give one "
                             "per measure")
    groups = list(df.groupby(keys, sort=True, dropna=False)) if keys else [((), df)]
    for ax, m in zip(axs, names, strict=True):
        for key, part in groups:
            part = part.sort_values("radius", kind="stable")
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{k} = {v:g}" if isinstance(v, float | int | np.number)
                              else f"{k} = {v}" for k, v in zip(keys, key, strict=True))
            ax.plot(part["radius"].to_numpy(float), part[m].to_numpy(float), "o-", ms=3,
                    label=label or None)
        ax.set(ylabel=m, xscale="log" if logx else "linear")
        if ax.xaxis.get_tick_params()["labelbottom"]:  # (shared axes: the bottom ones)
            ax.set_xlabel("radius (threshold)")
    if keys and len(groups) > 1:
        axs[0].legend(fontsize=7, frameon=False)
    return axs


def plot_rqa_heatmap(result: Any, *, measure: str | None = None, measures: Any = None,
                     ax: Any = None, cmap: str = "viridis", annotate: bool | None = None) -> Any:
    """A heat map of an :func:`pyedmcl.rqa_batch` result; returns the Axes.

    * a DataFrame indexed by series: series (rows) by ``measures`` (columns; default
      ``RR, DET, L, L_entr, LAM, TT, W, RTE``), each measure scaled to [0, 1] over the series
      (its minimum to its maximum; a measure equal on every series at 0.5) so measures of
      different units share one colour scale; ``annotate`` writes the values themselves
      in the cells (default: up to 200 cells);
    * a windowed batch (index ``series, start, end``) and one ``measure``: series by
      window (the window's first embedded point), in the measure's units;
    * an ``xarray.Dataset`` of a cube and one ``measure``: its per-pixel map over the two
      non-time dimensions (rows the first, columns the second; one dimension: as a
      DataFrame of series), the first coordinate at the bottom (as ``xarray``'s ``plot``).

    NaN cells (a measure with nothing to count) are drawn grey."""
    if type(result).__name__ == "Dataset":
        return _dataset_map(result, measure, measures, ax, cmap, annotate)
    df = _frame(result, "result")
    plt = _pyplot()
    names = list(df.index.names)
    if names[-2:] == ["start", "end"]:  # windowed: one measure, series by window
        m = _measures(measure or "DET", df.columns, ())[0]
        if measures is not None:
            raise ValueError("a windowed batch draws one measure=, not measures=")
        table = df[m].droplevel("end").unstack("start") if len(names) == 3 else \
            df[m].droplevel("end").to_frame().T
        return _draw(plt, table.to_numpy(float), [str(s) for s in table.index],
                     [str(c) for c in table.columns], ax, cmap, m, "window start (embedded point)",
                     "series", bool(annotate))
    if measure is not None:
        measures = [measure] if measures is None else measures
    cols = _measures(measures, df.columns, HEATMAP_MEASURES)
    values = df[cols].to_numpy(float)
    lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(hi > lo, (values - lo) / np.where(hi > lo, hi - lo, 1.0), 0.5)
    scaled[np.isnan(values)] = np.nan
    ax = _draw(plt, scaled, [str(s) for s in df.index], cols, ax, cmap,
               "scaled per measure (min to max)", "measure",
               df.index.name or "series",
               values.size <= 200 if annotate is None else bool(annotate), values)
    return ax


def _dataset_map(ds: Any, measure: str | None, measures: Any, ax: Any, cmap: str,
                 annotate: bool | None) -> Any:
    dims = list(ds.sizes)
    if len(dims) == 1:  # one series dimension: a table of series
        return plot_rqa_heatmap(ds.to_dataframe(), measure=measure, measures=measures, ax=ax,
                                cmap=cmap, annotate=annotate)
    if measures is not None:
        raise ValueError("a Dataset map draws one measure=, not measures=")
    m = _measures(measure or "DET", list(ds.data_vars), ())[0]
    da = ds[m]
    if da.ndim != 2:
        raise ValueError(f"a map needs two dimensions, {m} has {da.dims}; select the others "
                         "first (ds.isel(...))")
    r, c = da.dims
    return _draw(_pyplot(), da.to_numpy().astype(float), [f"{v}" for v in da[r].values],
                 [f"{v}" for v in da[c].values], ax, cmap, m, c, r, bool(annotate),
                 origin="lower")


def _draw(plt: Any, img: np.ndarray, rows: list[str], cols: list[str], ax: Any, cmap: str,
          label: str, xlabel: str, ylabel: str, annotate: bool,
          text: np.ndarray | None = None, origin: str = "upper") -> Any:
    """``img`` (rows by columns) as an image with its tick labels and a colour bar; row 0
    at the top (``origin="lower"``: at the bottom, a map's coordinates growing upwards)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(cols) + 2.5),
                                      max(2.5, 0.28 * len(rows) + 1.5)), layout="constrained")
    cm = plt.get_cmap(cmap).with_extremes(bad="0.85")
    im = ax.imshow(np.ma.masked_invalid(img), cmap=cm, aspect="auto",
                   interpolation="nearest", origin=origin)
    step_c = max(1, len(cols) // 20)
    step_r = max(1, len(rows) // 30)
    ax.set_xticks(range(0, len(cols), step_c), cols[::step_c],
                  rotation=45 if len(cols) > 6 else 0)
    ax.set_yticks(range(0, len(rows), step_r), rows[::step_r])
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.figure.colorbar(im, ax=ax, label=label)
    if annotate:
        vals = img if text is None else text
        for (i, j), v in np.ndenumerate(vals):
            if np.isfinite(v):  # white on the dark half of the colour map
                dark = np.isfinite(img[i, j]) and float(im.norm(img[i, j])) < 0.5
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=6,
                        color="w" if dark else "k")
    return ax
