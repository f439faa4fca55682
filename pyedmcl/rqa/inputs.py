"""Input forms of :func:`pyedmcl.rqa.rqa` besides a scalar series: state vectors
(``embedded=True``) and a radius in units of the standard deviation."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import as_series, check_int


def std_of(x: Any, embedded: bool) -> float:
    """Population std of every value given (pyunicorn: ``time_series.std()``)."""
    a = np.asarray(x, dtype=np.float64) if embedded else as_series(x, "x")
    sd = float(a.std())
    if not (np.isfinite(sd) and sd > 0):
        raise ValueError("threshold_std needs a series with positive, finite std")
    return sd


def state_vectors(x: Any, E: Any, tau: Any) -> tuple[np.ndarray, int, int]:
    """``(series, E, tau)`` whose delay embedding is the rows of the 2-D ``x``: the columns
    one after another (column-major), ``tau`` = rows, so point ``i`` is
    ``(s[i], s[i + n], ..., s[i + (E-1) n])`` = row ``i``."""
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    a = np.asarray(x)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.dtype.kind not in "biuf":
        raise ValueError(f"embedded=True needs a 2-D array of state vectors (rows: points, "
                         f"columns: coordinates), got shape {a.shape} of dtype {a.dtype}")
    if (check_int(E, "E", 1, 512), check_int(tau, "tau", 1)) != (1, 1):
        raise ValueError("embedded=True takes E and tau from the state vectors: leave E=1, tau=1")
    n, d = a.shape
    if d > 512 or n < 1:
        raise ValueError(f"embedded=True: {d} coordinates x {n} points is out of range; "
                         "allowed: 1..512 coordinates, at least 1 point")
    s = as_series(np.ascontiguousarray(a.T, dtype=np.float64).reshape(-1), "x")
    return s, d, max(n, 1)
