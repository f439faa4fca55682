"""Iterated forecasts (pyEDM's ``generateSteps``): each forecast is fed back as data.

pyEDM 2.5's ``Simplex.Generate`` / ``SMap.Generate``: the library stays ``lib``; step
``s`` predicts from the row ``lib_end - 1 + s`` (0-based, ``lib_end`` the last library
row, 1-based) of the series grown by the ``s`` earlier forecasts, and appends that
forecast as the series' next value. Each step is one device call of
:func:`~pyedmcl.edm.simplex.simplex` / :func:`~pyedmcl.edm.smap.smap` (k-NN and
lookup, or the local linear fit, on the device); the one new value returns to the
host between steps, because the next query window needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..validation import as_series, check_int
from .ranges import parse_ranges


@dataclass
class GenerateResult:
    """``steps`` generated values; ``times`` are the 0-based rows they are for (the
    prediction row + Tp); ``series`` is the input followed by the generated values."""

    predicted: np.ndarray
    times: np.ndarray
    series: np.ndarray
    method: str
    E: int
    tau: int
    Tp: int


def generate(x, *, E: int, steps: int, tau: int = 1, Tp: int = 1, knn: int | None = None,
             exclusion_radius: int = 0, lib=None, method: str = "simplex",
             theta: float | None = None, dtype: Any = "float32", device: Any = None,
             backend: str | None = None) -> GenerateResult:
    """``steps`` iterated ``Tp``-ahead forecasts of ``x`` from its own embedding.

    ``method``: "simplex" or "smap" (``theta`` required). ``lib``: pyEDM's 1-based
    ``start stop`` pairs (default the whole series); it stays fixed while the series
    grows, as in pyEDM. ``tau > 0`` lags into the past. Other arguments as
    :func:`~pyedmcl.edm.simplex.simplex`.
    """
    s = as_series(x, "x")
    steps = check_int(steps, "steps", 1)
    if method not in ("simplex", "smap"):
        raise ValueError(f"method={method!r} is not one of 'simplex', 'smap'")
    if method == "smap" and theta is None:
        raise ValueError("theta required for method='smap' (e.g. theta=2)")
    pairs = parse_ranges(lib, "lib", s.size)
    flat = [v for p in pairs for v in p]
    end = flat[-1]
    if end < 2:
        raise ValueError(f"lib must end at row 2 or later to generate, got {end}")
    if method == "simplex":
        from .simplex import simplex as fn
        extra: dict = {}
    else:
        from .smap import smap as fn
        extra = {"theta": float(theta)}
    grown = np.concatenate([s, np.full(steps, np.nan)])
    out = np.empty(steps)
    times = np.empty(steps, dtype=np.int64)
    n = s.size
    for k in range(steps):
        row = end - 1 + k  # 0-based prediction row of this step
        res = fn(grown[:n + k], E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                 lib=flat, pred=[row, row + 1], dtype=dtype, device=device, backend=backend,
                 **extra)
        rows = np.asarray(res.pred_times if res.pred_times is not None else np.asarray(res.times) - Tp)
        hit = np.flatnonzero(rows == row)
        value = float(np.asarray(res.predicted)[hit[0]]) if hit.size else np.nan
        out[k], times[k] = value, row + Tp
        grown[n + k] = value
    return GenerateResult(predicted=out, times=times, series=grown, method=method, E=E, tau=tau,
                          Tp=Tp)
