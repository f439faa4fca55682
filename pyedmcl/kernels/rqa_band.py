"""The windowed-RQA band kernel family (``rqa_band/rqa_band.cl.mako``).

One work-item per lane of the auto-recurrence matrix -- a column, walked over the rows of
every window holding it, or a diagonal ``d = j - i`` -- adds each maximal run of the lane
to the line histograms of every window it lies in, cut as that window cuts it. The
histograms are difference arrays over the window index (``(nw + 1) x W`` int32, index
``k * W + length - 1``); :mod:`pyedmcl.rqa.band` sums them over ``k``. Not tunable: the
runtime picks the work-group size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend

TEMPLATE = "rqa_band/rqa_band.cl.mako"


@dataclass(frozen=True)
class BandSpec:
    """What shapes the generated kernels: embedding, metric, precision, border rules."""

    E: int
    tau: int
    metric: str
    real: str  # "float" | "double"
    fma: bool = False  # Euclidean squares summed by fma() (threshold_rule="squared")
    theiler_matrix: bool = False  # |i - j| < w is not recurrent
    white_border: bool = True  # white runs touching a window's top/bottom are counted

    @property
    def dtype(self) -> type:
        return np.float64 if self.real == "double" else np.float32

    def template_params(self, mode: str) -> dict[str, Any]:
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "FMA": int(self.fma and self.metric == "euclidean"), "MODE": mode,
                "THEILER_MATRIX": int(self.theiler_matrix), "WBORDER": int(self.white_border)}


def launch(backend: Backend, spec: BandSpec, mode: str, x: Any, thr: float, *, lane0: int,
           nlanes: int, window: int, step: int, n_windows: int, w: int, hb: Any,
           hw: Any) -> Any:
    """Enqueue lanes ``lane0 .. lane0 + nlanes - 1`` (columns, or diagonals ``d``) of the
    series ``x`` (device, the spec's dtype) into the difference histograms ``hb`` (black:
    vertical or diagonal lines) and ``hw`` (white vertical lines; unused for diagonals)."""
    k = backend.kernel(TEMPLATE, spec.template_params(mode), f"rqa_band_{mode}")
    return backend.launch(k, (int(nlanes),), None, x, spec.dtype(thr), np.int32(lane0),
                          np.int32(nlanes), np.int32(window), np.int32(step),
                          np.int32(n_windows), np.int32(w), hb, hw)
