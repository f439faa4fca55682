"""Many short series in one pass: the series of a batch laid end to end, each one a window
of the band kernels (:mod:`pyedmcl.rqa.band`).

Series ``k`` (``T`` samples, ``n = T - (E - 1) tau`` embedded points) occupies samples
``kT .. kT + T - 1`` of the packed array, so window ``k`` of ``n`` embedded points at step
``T`` reads exactly its samples: the ``(E - 1) tau`` embedded points that straddle two
series lie between windows and belong to none. The band pass counts each window's lines
inside its own square only (a run is cut at the window's borders, the Theiler window is
measured from each window's own diagonal), so no line crosses from one series into the
next, and every window's histograms are those of ``pe.rqa`` of its series.

Working values: each series is prepared as ``pe.rqa`` prepares it (float32: centred by its
own shift; float64 where float32 cannot hold it), so the packed float32 array holds, series
by series, the very values the single call's kernels read. Series prepared in different
dtypes go in different packs. float32 decisions near the radius are redone in float64 from
the raw series (:mod:`pyedmcl.rqa.exact`); the bound is taken over the whole pack (larger
than one series' bound: more cells redone, the same decisions, those of float64).

Applies to a fixed radius shared by the series of a pack (one threshold per pass) and
series of equal length; everything else runs one Divide & Recombine run per series.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .band import band_passes, band_rows
from .core import _check_common, exact_for_run, kernel_threshold
from .windowed import MAX_BAND_WINDOW


def packable(n: int, theiler: int, count: int) -> bool:
    """Whether ``count`` series of ``n`` embedded points go into one pack."""
    return count >= 2 and 2 <= n <= MAX_BAND_WINDOW and int(theiler) < n


def packed_rows(runner: Any, prepared: list[tuple[np.dtype, np.ndarray, np.ndarray]], *,
                E: int, tau: int, radius: float, theiler: Any, l_min: Any, v_min: Any,
                w_min: Any) -> list[dict[str, Any]]:
    """Rows (every measure, ``n_recurrences``, ``n_cells``) of series of equal length
    prepared alike (``runner.prepare``), in order, from one band pass (or a few, where
    the difference histograms of all windows do not fit one)."""
    dt = prepared[0][0]
    T = prepared[0][1].size
    span = (E - 1) * tau
    n = T - span
    l_min, v_min, w_min, w, _ = _check_common(l_min, v_min, w_min, theiler,
                                              runner.theiler_scope, runner.order, None, n)
    tm = runner.theiler_scope == "matrix" and w > 0
    raw = np.concatenate([p[2] for p in prepared])
    z = np.concatenate([p[1] for p in prepared]).astype(dt)
    thr = kernel_threshold(radius, runner.metric, dt, runner.rule)
    ex = exact_for_run(dt, (raw, raw), (z, z), radius, runner.metric, runner.rule, E, thr)
    rows: list[dict[str, Any]] = []
    for nrec, d, v, wh in band_passes(
            runner.bes, z, thr, E=E, tau=tau, metric=runner.metric,
            real="double" if dt == np.float64 else "float", fma=(runner.rule == "squared"),
            theiler_matrix=tm, w=w, white_border=runner.white_border,
            n_points=len(prepared) * T - span, window=n, step=T,
            exact=None if ex is None else (ex.x, ex.thr64, ex.b)):
        rows += band_rows(nrec, d, v, wh, n, w, tm, l_min, v_min, w_min)
    return rows
