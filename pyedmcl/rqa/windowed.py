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
    window = check_int(window, "window", 2, n)
    step = window if step is None else check_int(step, "step", 1)
    for name in ("l_min", "v_min", "w_min"):  # a window's lines: at most its own points
        if kwargs.get(name) is not None:
            try:
                check_int(kwargs[name], name, 1, window)
            except ValueError as exc:
                raise ValueError(f"{exc} (no line is longer than a window of {window} "
                                 "embedded points)") from None
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
    rows: list[dict[str, Any]] = []
    bar = None
    if progress and len(bounds) > 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(bounds), desc="windows", unit="window")
    for a, b in bounds:
        try:
            res = one(s[a: b + 1 + span], E=E, tau=tau, **kwargs)
        except ValueError as exc:  # (a rate no radius gives in one window, say): say which
            raise ValueError(f"window ({a}, {b}) of the embedded points: {exc}") from None
        row = {k: res.measures[k] for k in MEASURES}
        radius = float("nan") if np.ndim(res.radius) else res.radius  # FAN: one per column
        row.update(n_recurrences=res.n_recurrences, n_cells=res.n_cells, radius=radius)
        rows.append(row)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    df = pd.DataFrame(rows, index=index, columns=cols).astype(
        {"n_recurrences": np.int64, "n_cells": np.int64})
    df.attrs["method"] = "windows"
    return df


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
