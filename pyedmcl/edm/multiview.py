"""Multiview embedding (Ye & Sugihara 2016, Science 353:922): rank every D-subset of lags.

From ``m`` columns with ``E`` lags each (``m*E`` lagged coordinates, pyEDM's Embed
order: every column at lag 0, then lag 1, ...), every ``D``-subset is a state space
(``embedded=True``); each is scored by Simplex rho on the ranking rows (the library
itself with ``train_lib``, pyEDM's default, else ``pred``), and the predictions of the
``n_views`` best (default ``floor(sqrt(C(mE, D)))``) are averaged. Each view runs
:func:`~pyedmcl.edm.simplex.simplex` on its state space (k-NN and lookup on the
device; missing values and the first lag rows follow pyEDM's NaN rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from math import comb, floor, sqrt
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..constant_series import checks_constant
from ..labels import Labels
from ..primitives.ranges import check_tau
from ..validation import check_int


@dataclass
class MultiviewResult:
    """``views`` ranked best first with their ranking ``rho``; ``predicted`` the mean
    of the top ``n_views`` views' predictions for rows ``times`` (0-based)."""

    views: list[tuple[str, ...]]
    rho: np.ndarray
    predicted: np.ndarray
    observed: np.ndarray
    times: np.ndarray
    view_predictions: np.ndarray  #: (n_views, n_pred)
    n_combinations: int
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)
    #: the input's time axis where it had labels (:class:`pyedmcl.labels.Labels`)
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "time"

    def time_index(self):
        """The time of each prediction: the input's time labels where it had them,
        else the 0-based rows ``times``."""
        return (self.labels or Labels()).at(self.times)

    def as_dataframe(self):
        """observed and predicted (the top views' mean), indexed by :meth:`time_index`."""
        import pandas as pd

        return pd.DataFrame({"observed": self.observed, "predicted": self.predicted},
                            index=self.time_index())


def lagged(data: pd.DataFrame, columns: list[str], E: int, tau: int) -> pd.DataFrame:
    """``E`` lags of each column, lag-major (``c(t-0)`` for all c, then ``c(t-tau)``, ...)."""
    out = {}
    for i in range(E):
        for c in columns:
            out[f"{c}(t-{i * tau})" if tau > 0 else f"{c}(t+{-i * tau})"] = data[c].shift(i * tau)
    return pd.DataFrame(out)


@checks_constant("multiview", ("x", "target"))
def multiview(x, target, *, E: int, D: int | None = None, tau: int = 1, Tp: int = 1,
              lib=None, pred=None, n_views: int | None = None, train_lib: bool = True,
              exclude_target: bool = False, exclusion_radius: int = 0,
              columns: Any = None, dtype: Any = "float32", device: Any = None,
              backend: str | None = None) -> MultiviewResult:
    """Multiview forecast of ``target`` (a column name of ``x``) from ``x``'s columns.

    ``x``: a DataFrame (or an ``(L, m)`` array; columns then named "0", "1", ...);
    ``columns``: the columns to combine (default all). ``D`` coordinates per view
    (default the number of columns), ``E`` lags of each column, ``tau > 0`` past lags.
    Views are ranked by rho (unrounded; pyEDM ranks rho rounded to 6 digits, which
    orders near-ties differently). ``exclude_target`` leaves the target's own lags out.
    """
    df = x if isinstance(x, pd.DataFrame) else pd.DataFrame(
        np.asarray(x, dtype=np.float64)).rename(columns=str)
    cols = list(df.columns) if columns is None else (
        columns.split() if isinstance(columns, str) else [str(c) for c in columns])
    tgt = str(target)
    for c in cols + [tgt]:
        if c not in df.columns:
            raise ValueError(f"column {c!r} not found; x has {list(df.columns)}")
    E = check_int(E, "E", 1, len(df))
    tau = check_tau(tau)
    if (E - 1) * abs(tau) >= len(df):
        raise ValueError(f"E={E}, tau={tau} leave no full embedding in {len(df)} rows; allowed: "
                         f"(E - 1) * |tau| < {len(df)}")
    use = [c for c in cols if c != tgt] if exclude_target else cols
    if not use:
        raise ValueError("no columns left to combine (exclude_target removed the only one)")
    frame = lagged(df, use, E, tau)
    D = len(cols) if D is None else check_int(D, "D", 1, frame.shape[1])
    D = min(D, frame.shape[1])
    views = list(combinations(frame.columns, D))
    n_views = (max(1, floor(sqrt(len(views)))) if n_views is None
               else check_int(n_views, "n_views", 1, len(views)))
    y = df[tgt].to_numpy(dtype=np.float64)
    from .simplex import simplex

    def run(view, rows):
        return simplex(frame, y, columns=list(view), embedded=True, Tp=Tp, lib=lib, pred=rows,
                       exclusion_radius=exclusion_radius, dtype=dtype, device=device,
                       backend=backend)

    rank_rows = lib if train_lib else pred
    rho = np.array([run(v, rank_rows).rho for v in views], dtype=float)
    order = np.argsort(np.where(np.isnan(rho), -np.inf, rho))[::-1]
    top = [views[i] for i in order[:n_views]]
    res = [run(v, pred) for v in top]
    preds = np.stack([np.asarray(r.predicted, dtype=float) for r in res])
    return MultiviewResult(views=[views[i] for i in order], rho=rho[order],
                           predicted=np.nanmean(preds, axis=0) if preds.size else preds,
                           observed=np.asarray(res[0].observed, dtype=float),
                           times=np.asarray(res[0].times), view_predictions=preds,
                           n_combinations=comb(frame.shape[1], D))
