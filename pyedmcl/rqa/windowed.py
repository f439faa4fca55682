"""Windowed RQA: every measure over sliding epochs of one long record.

Window ``k`` covers the embedded points ``k * step .. k * step + window - 1`` (the CRP
toolbox's windowed RQA), i.e. the raw samples ``k * step .. k * step + window - 1 +
(E - 1) * tau``. Each window is one auto-RQA of its samples, with every option of
:func:`pyedmcl.rqa.core.rqa` (with ``recurrence_rate`` the radius is found per window;
in float32 each window is centred by its own mean), so a row equals ``rqa()`` of that
window exactly.

Computation: one Divide & Recombine run per window (its own launches, kernels built
once and cached), not yet the single pass over the band of the matrix the windows
cover, which would share the cells of overlapping windows (``window / step`` times
fewer cells for ``step << window``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..validation import as_series, check_embedding, check_int
from .measures import MEASURES


def window_bounds(n_points: int, window: int, step: int) -> list[tuple[int, int]]:
    """``(first, last)`` embedded point of every whole window (``last`` inclusive)."""
    return [(s, s + window - 1) for s in range(0, n_points - window + 1, step)]


def windowed_rqa(one: Callable[..., Any], x: Any, *, window: Any, step: Any = None,
                 E: Any = 1, tau: Any = 1, progress: bool = False, **kwargs: Any) -> Any:
    """Every measure per window as a ``pandas.DataFrame`` indexed by the window's first and
    last embedded point (``start``, ``end``); ``step`` defaults to ``window`` (epochs
    that do not overlap). Other keywords as :func:`pyedmcl.rqa.core.rqa`. Columns: the
    measures, ``n_recurrences``, ``n_cells`` and ``radius`` (found per window with
    ``recurrence_rate``; NaN with ``neighbourhood="fan"``, whose radii are per column).
    ``one`` is the single-window analysis (:func:`pyedmcl.rqa.core.rqa`, which calls
    this with itself)."""
    import pandas as pd

    s = as_series(x, "x")
    E, tau = check_int(E, "E", 1, 512), check_int(tau, "tau", 1)
    n = check_embedding(s.size, E, tau, "x")
    window = check_int(window, "window", 2, n)
    step = window if step is None else check_int(step, "step", 1)
    bounds = window_bounds(n, window, step)
    span = (E - 1) * tau
    rows: list[dict[str, Any]] = []
    bar = None
    if progress and len(bounds) > 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(bounds), desc="windows", unit="window")
    for a, b in bounds:
        res = one(s[a: b + 1 + span], E=E, tau=tau, **kwargs)
        row = {k: res.measures[k] for k in MEASURES}
        radius = float("nan") if np.ndim(res.radius) else res.radius  # FAN: one per column
        row.update(n_recurrences=res.n_recurrences, n_cells=res.n_cells, radius=radius)
        rows.append(row)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    index = pd.MultiIndex.from_tuples(bounds, names=["start", "end"])
    return pd.DataFrame(rows, index=index,
                        columns=[*MEASURES, "n_recurrences", "n_cells", "radius"]).astype(
        {"n_recurrences": np.int64, "n_cells": np.int64})
