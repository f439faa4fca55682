"""Windowed RQA: every measure over sliding epochs of one long record.

Window ``k`` covers the embedded points ``k * step .. k * step + window - 1`` (the CRP
toolbox's windowed RQA), i.e. the raw samples ``k * step .. k * step + window - 1 +
(E - 1) * tau``. Each window is one auto-RQA of its samples, with every option of
:func:`pyedmcl.rqa.core.rqa` (with ``recurrence_rate`` the radius is found per window;
in float32 each window is centred by its own mean), so a row equals ``rqa()`` of that
window exactly.

Computation (``method``):

* ``"band"``: one pass over the band of the matrix the windows cover, every cell computed
  once however many windows hold it (``window / step`` times fewer cells), each window's
  histograms exact from every lane's maximal runs (:mod:`pyedmcl.rqa.band`).
  Needs one threshold for every window and the same working values wherever windows
  share a pass: a fixed radius (``radius``/``threshold_std``), ``neighbourhood="radius"``,
  any ``window`` and ``step``. float64: one pass. float32: each window is prepared as
  ``rqa()`` prepares it (its mean, rounded to a power of two at or below its std,
  subtracted; float64 where float32 would merge its values); consecutive windows
  prepared alike share a pass, so a stationary record takes one or a few passes.
* ``"windows"``: one Divide & Recombine run per window (kernels built once and cached);
  the reference, and the path for everything else (``recurrence_rate``: one radius per
  window; FAN: per-column radii per window; float32 records whose windows are mostly
  centred differently, e.g. a strong trend).
* ``"auto"`` (default): ``"band"`` where it applies, else ``"windows"``.

Windowed cross- and joint-RQA (:func:`windowed_pair`, ``cross_rqa``/``joint_rqa`` with
``window``): the same windows over the embedded points of two series of one length, one
run per window (the band pass walks one series' symmetric band).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..validation import as_series, check_embedding, check_int
from .measures import MEASURES

METHODS = ("auto", "band", "windows")


def window_bounds(n_points: int, window: int, step: int) -> list[tuple[int, int]]:
    """``(first, last)`` embedded point of every whole window (``last`` inclusive)."""
    return [(s, s + window - 1) for s in range(0, n_points - window + 1, step)]


def windowed_rqa(one: Callable[..., Any], x: Any, *, window: Any, step: Any = None,
                 E: Any = 1, tau: Any = 1, progress: bool = False, method: str = "auto",
                 band: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """Every measure per window as a ``pandas.DataFrame`` indexed by the window's first and
    last embedded point (``start``, ``end``); ``step`` defaults to ``window`` (epochs
    that do not overlap). Other keywords as :func:`pyedmcl.rqa.core.rqa`. Columns: the
    measures, ``n_recurrences``, ``n_cells`` and ``radius`` (found per window with
    ``recurrence_rate``; NaN with ``neighbourhood="fan"``, whose radii are per column).
    ``one`` is the single-window analysis (:func:`pyedmcl.rqa.core.rqa`, which calls
    this with itself) and ``band`` the one pass over many windows
    (``pyedmcl.rqa.core._band_windows``, also passed by ``rqa``; None: one run per
    window). ``method``: ``"auto"``, ``"band"`` (one pass over the band; a ValueError
    says why where it cannot run) or ``"windows"`` (one run per window); every method
    gives the same rows. The frame's ``attrs["method"]`` says which one ran."""
    import pandas as pd

    s = as_series(x, "x")
    E, tau = check_int(E, "E", 1, 512), check_int(tau, "tau", 1)
    n = check_embedding(s.size, E, tau, "x")
    window, step = _window_step(window, step, n, kwargs)
    bounds = window_bounds(n, window, step)
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not supported; allowed: {', '.join(METHODS)}")
    index = pd.MultiIndex.from_tuples(bounds, names=["start", "end"])
    cols = [*MEASURES, "n_recurrences", "n_cells", "radius"]
    if method != "windows":
        why = (_band_refusal(window, kwargs) if band is not None
               else "no band runner given (band=)")
        if why is None:
            rows_b = band(s, n, window, step, E, tau, **kwargs)
            if isinstance(rows_b, str):  # why the band cannot give these windows
                if method == "band":
                    raise ValueError(f"method='band' cannot run here: {rows_b}")
            else:
                df = pd.DataFrame(rows_b, index=index, columns=cols).astype(
                    {"n_recurrences": np.int64, "n_cells": np.int64})
                df.attrs["method"] = "band"
                return df
        elif method == "band":
            raise ValueError(f"method='band' cannot run here: {why}")
    span = (E - 1) * tau
    rows = _per_window(bounds, lambda a, b: one(s[a:b], E=E, tau=tau, **kwargs), span,
                       progress)
    df = pd.DataFrame(rows, index=index, columns=cols).astype(
        {"n_recurrences": np.int64, "n_cells": np.int64})
    df.attrs["method"] = "windows"
    return df


def _per_window(bounds: list[tuple[int, int]], run: Callable[[int, int], Any], span: int,
                progress: bool) -> list[dict[str, Any]]:
    """One row per window: ``run(a, b)`` analyses the raw samples ``a:b`` (the window's
    embedded points and the ``span`` samples the last one reaches); a ValueError names
    the window."""
    rows: list[dict[str, Any]] = []
    bar = None
    if progress and len(bounds) > 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(bounds), desc="windows", unit="window")
    for a, b in bounds:
        try:
            res = run(a, b + 1 + span)
        except ValueError as exc:  # (a rate no radius gives in one window, say): say which
            raise ValueError(f"window ({a}, {b}) of the embedded points: {exc}") from None
        rows.append(_row(res))
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return rows


def _row(res: Any) -> dict[str, Any]:
    """A window's row: every measure, the counts and the radius (a pair's radii as
    ``radius_x``, ``radius_y``; FAN's per-column radii as NaN)."""
    row = {k: res.measures[k] for k in MEASURES}
    row.update(n_recurrences=res.n_recurrences, n_cells=res.n_cells)
    if isinstance(res.radius, tuple):  # joint RQA: one radius per series
        row.update(radius_x=float(res.radius[0]), radius_y=float(res.radius[1]))
    else:
        row["radius"] = float("nan") if np.ndim(res.radius) else res.radius
    return row


def windowed_pair(one: Callable[..., Any], x: Any, y: Any, *, window: Any, step: Any = None,
                  E: Any = 1, tau: Any = 1, progress: bool = False, what: str = "cross_rqa",
                  **kwargs: Any) -> Any:
    """Windowed cross- or joint-RQA (the CRP toolbox's window and shift): a
    ``pandas.DataFrame`` of every measure per window, indexed as :func:`windowed_rqa`'s.
    Window ``k`` covers the embedded points ``k * step .. k * step + window - 1`` of
    *both* series (their samples at the same times, so the series must have one length);
    its row is ``one(x[a:b], y[a:b], ...)`` (:func:`pyedmcl.rqa.core.cross_rqa` or
    ``joint_rqa``) on those samples, exactly. Columns: the measures, ``n_recurrences``,
    ``n_cells`` and ``radius`` (joint RQA: ``radius_x`` and ``radius_y``), found per
    window with ``recurrence_rate``. ``what`` names the analysis in errors."""
    import pandas as pd

    sx, sy = as_series(x, "x"), as_series(y, "y")
    if sx.size != sy.size:
        raise ValueError(f"{what} with window= needs x and y of equal length (each window "
                         f"covers the same times of both), got x: {sx.size}, y: {sy.size}")
    E, tau = check_int(E, "E", 1, 512), check_int(tau, "tau", 1)
    n = check_embedding(sx.size, E, tau, "x")
    window, step = _window_step(window, step, n, kwargs)
    bounds = window_bounds(n, window, step)
    rows = _per_window(bounds, lambda a, b: one(sx[a:b], sy[a:b], E=E, tau=tau, **kwargs),
                       (E - 1) * tau, progress)
    index = pd.MultiIndex.from_tuples(bounds, names=["start", "end"])
    radius = ["radius_x", "radius_y"] if what == "joint_rqa" else ["radius"]
    df = pd.DataFrame(rows, index=index, columns=[*MEASURES, "n_recurrences", "n_cells",
                                                  *radius])
    df = df.astype({"n_recurrences": np.int64, "n_cells": np.int64})
    df.attrs["method"] = "windows"
    return df


def _window_step(window: Any, step: Any, n: int, kw: dict[str, Any]) -> tuple[int, int]:
    """``window`` (2 .. ``n`` embedded points) and ``step`` (default ``window``) as ints;
    the minimal line lengths of ``kw`` checked against one window."""
    window = check_int(window, "window", 2, n)
    step = window if step is None else check_int(step, "step", 1)
    for name in ("l_min", "v_min", "w_min"):  # a window's lines: at most its own points
        if kw.get(name) is not None:
            try:
                check_int(kw[name], name, 1, window)
            except ValueError as exc:
                raise ValueError(f"{exc} (no line is longer than a window of {window} "
                                 "embedded points)") from None
    return window, step


#: the band's 32-bit difference bins hold any count of a window of at most this many
#: points (W^2 < 2^31 cells)
MAX_BAND_WINDOW = 46340


def _band_refusal(window: int, kw: dict[str, Any]) -> str | None:
    """Why the one-pass band cannot give these windows (None: it can, given the working
    values of :func:`pyedmcl.rqa.core._band_windows`)."""
    if window > MAX_BAND_WINDOW:
        return f"window={window} > {MAX_BAND_WINDOW} could overflow its 32-bit counts"
    if kw.get("neighbourhood", "radius") != "radius":
        return "neighbourhood='fan' has per-column radii per window"
    if kw.get("recurrence_rate") is not None:
        return "recurrence_rate= finds one radius per window"
    if kw.get("radius") is None:
        return "it needs a fixed radius (radius= or threshold_std=)"
    return None
