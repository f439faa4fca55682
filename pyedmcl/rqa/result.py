"""The result of one RQA: every measure plus the line histograms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..display import Displayable
from .dnr import Histograms
from .measures import MEASURES, compute_measures


@dataclass
class RQAResult(Displayable):
    """Every RQA measure (attributes, :meth:`as_dict`) plus the line histograms."""

    measures: dict[str, float]
    diagonal_hist: np.ndarray
    vertical_hist: np.ndarray
    white_hist: np.ndarray
    n_recurrences: int
    n_cells: int
    radius: float
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)

    def __getattr__(self, name: str) -> Any:
        m = self.__dict__.get("measures")
        if m is not None and name in m:
            return m[name]
        raise AttributeError(name)

    def as_dict(self, histograms: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.measures)
        out.update(n_recurrences=self.n_recurrences, n_cells=self.n_cells, radius=self.radius,
                   seconds=self.seconds, settings=self.settings)
        if histograms:
            out.update(diagonal_hist=_trim(self.diagonal_hist), vertical_hist=_trim(self.vertical_hist),
                       white_hist=_trim(self.white_hist))
        return out

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={self.measures[k]:.6g}" for k in MEASURES)
        notes = "".join(f"; note: {n}" for n in self.notes)
        return f"RQAResult({body}{notes})"


def _trim(h: np.ndarray) -> list[int]:
    nz = np.flatnonzero(h)
    return h[: (nz[-1] + 1) if nz.size else 0].tolist()


def band_cells(n: int, w: int) -> int:
    """Cells with |i - j| < w in an n x n matrix."""
    if w <= 0:
        return 0
    w = min(w, n)
    return n + 2 * sum(n - k for k in range(1, w))


def make_result(h: Histograms, diag: np.ndarray, n_cells: int, radius: Any, l_min: int,
                v_min: int, w_min: int, settings: dict[str, Any],
                nonzero: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> RQAResult:
    """The result of one D&R run: ``diag`` is its diagonal histogram as the caller
    completed it (mirror twins, main diagonal), ``n_cells`` RR's denominator; ``nonzero``:
    the nonzero bins of ``diag``, vertical and white, ascending, where known."""
    vert, white = h.vertical, h.white
    if h.used is not None:  # the measures read the bins in use only (N-long passes: ~1 ms at 10^6)
        vert, white = vert[:h.used[1]], white[:h.used[2]]
    m = compute_measures(h.n_recurrences, n_cells, diag, vert, white, l_min, v_min, w_min,
                         nonzero=nonzero)
    return RQAResult(m, diag, h.vertical, h.white, h.n_recurrences, n_cells, radius, settings,
                     h.seconds)
