"""The windowed-RQA tile kernel family (``rqa_band/rqa_band.cl.mako``).

One work-item per lane (a column or a diagonal) of one ``G x G`` tile of the recurrence
matrix's band: the runs inside the lane go to the tile's histograms, the runs touching
the lane's ends to ``first``/``last`` for the host to join tile by tile
(:mod:`pyedmcl.rqa.band`). Not tunable: the tiles are listed by the host and launched in
batches, the runtime picks the work-group size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend

TEMPLATE = "rqa_band/rqa_band.cl.mako"


@dataclass(frozen=True)
class BandSpec:
    """What shapes the generated kernels: embedding, metric, precision, tile edge."""

    E: int
    tau: int
    metric: str
    real: str  # "float" | "double"
    G: int  # tile edge
    fma: bool = False  # Euclidean squares summed by fma() (threshold_rule="squared")
    theiler_matrix: bool = False  # |i - j| < w is not recurrent

    @property
    def dtype(self) -> type:
        return np.float64 if self.real == "double" else np.float32

    def lanes(self, mode: str) -> int:
        """Lanes per tile: G columns, or the 2G - 1 diagonals crossing it."""
        return self.G if mode == "vertical" else 2 * self.G - 1

    def template_params(self, mode: str) -> dict[str, Any]:
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "FMA": int(self.fma and self.metric == "euclidean"), "G": self.G,
                "MODE": mode, "THEILER_MATRIX": int(self.theiler_matrix)}


@dataclass
class TileSummary:
    """Host copies of one mode's outputs for ``n`` tiles: ``first``/``last`` (tile, lane)
    as ``length | colour << 31``; ``hb``/``hw`` (tile, G) interior black / white run
    histograms (index length - 1); ``nrec`` (tile,) recurrences (vertical only)."""

    first: np.ndarray
    last: np.ndarray
    hb: np.ndarray
    hw: np.ndarray
    nrec: np.ndarray | None


def run_tiles(backend: Backend, spec: BandSpec, mode: str, x: Any, thr: float,
              ta: np.ndarray, tb: np.ndarray, *, w: int = 0, kmin: int = 0,
              max_lanes: int = 1 << 21) -> TileSummary:
    """Summaries of the tiles ``(ta[t], tb[t])`` (tile row / column indices) in ``mode``
    ("vertical" or "diagonal") of the matrix of the series ``x`` (on the device, in the
    spec's dtype). Launched in batches of at most ``max_lanes`` work-items."""
    k = backend.kernel(TEMPLATE, spec.template_params(mode), f"rqa_band_{mode}")
    lanes, g = spec.lanes(mode), spec.G
    n = int(ta.size)
    out = TileSummary(np.empty((n, lanes), np.uint32), np.empty((n, lanes), np.uint32),
                      np.empty((n, g), np.uint32), np.empty((n, g), np.uint32),
                      np.empty(n, np.int64) if mode == "vertical" else None)
    per = max(1, max_lanes // lanes)
    for t0 in range(0, n, per):
        nt = min(per, n - t0)
        first, last = backend.empty(nt * lanes, np.uint32), backend.empty(nt * lanes, np.uint32)
        nrec = backend.empty(nt * lanes if mode == "vertical" else 1, np.uint32)
        hb = backend.zeros(nt * g, np.uint32)
        hw = backend.zeros(nt * g if mode == "vertical" else 1, np.uint32)
        backend.launch(k, (nt * lanes,), None, x, spec.dtype(thr),
                       backend.to_device(np.ascontiguousarray(ta[t0: t0 + nt], np.int32)),
                       backend.to_device(np.ascontiguousarray(tb[t0: t0 + nt], np.int32)),
                       np.int32(nt), np.int32(w), np.int32(kmin), first, last, nrec, hb, hw)
        sl = slice(t0, t0 + nt)
        out.first[sl] = backend.to_host(first).reshape(nt, lanes)
        out.last[sl] = backend.to_host(last).reshape(nt, lanes)
        out.hb[sl] = backend.to_host(hb).reshape(nt, g)
        if mode == "vertical":
            out.hw[sl] = backend.to_host(hw).reshape(nt, g)
            out.nrec[sl] = backend.to_host(nrec).reshape(nt, lanes).sum(axis=1, dtype=np.int64)
        else:
            out.hw[sl] = 0
    return out
