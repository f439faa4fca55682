"""The windowed-RQA band kernel family (``rqa_band/rqa_band.cl.mako``).

One work-item per lane of the auto-recurrence matrix -- a column, walked over the rows of
every window holding it, or a diagonal ``d = j - i`` -- adds each maximal run of the lane
to the line histograms of every window it lies in, cut as that window cuts it. The
histograms are difference arrays over the window index (``(nw + 1) x W`` int32, index
``k * W + length - 1``); :mod:`pyedmcl.rqa.band` sums them over ``k``. A work-group first
counts the short lines of the windows it touches in local memory (one global atomic per
non-empty bin instead of two per run). Not tunable: WG 64 lanes per work-group (fewer where the device takes fewer),
diagonal chunks of ``CH = window`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, round_up

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
    window: int = 2
    step: int = 1
    #: float32 with the near cells redone in double (EXACT, on devices with fp64)
    exact: bool = False

    @property
    def dtype(self) -> type:
        return np.float64 if self.real == "double" else np.float32

    def template_params(self, mode: str, wg: int, local_ints: int = 4096,
                        outline: bool = False) -> dict[str, Any]:
        """Template values; ``local_ints``: the local histogram budget (ints); ``outline``:
        keep the run-closing function out of line (GPUs, see the template)."""
        W, S = self.window, self.step
        ch = chunk_rows(W)
        span = (W + wg - 2) if mode == "vertical" else (ch + W - 2)
        nk = span // S + 3  # windows a work-group's runs can touch (diff rows)
        nh = 2 if mode == "vertical" else 1
        lb = min(64, W, local_ints // (nh * nk))
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "FMA": int(self.fma and self.metric == "euclidean"), "MODE": mode,
                "THEILER_MATRIX": int(self.theiler_matrix), "WBORDER": int(self.white_border),
                "W": W, "S": S, "WG": wg, "CH": ch, "NK": nk, "LB": lb if lb >= 4 else 0,
                "OUTLINE": int(outline)}


def local_ints(backend: Backend) -> int:
    """Local histogram budget of a work-group: 16 KiB, at most half the device's."""
    return min(4096, int(backend.info.local_mem_bytes) // 8)


def chunk_rows(window: int) -> int:
    """Rows of a diagonal per work-item (it walks on to finish its last run)."""
    return max(int(window), 64)


def work_group(backend: Backend) -> int:
    return min(64, backend.info.max_work_group_size, backend.info.max_work_item_sizes[0])


def exact_on(spec: BandSpec, backend: Backend) -> int:
    """EXACT template value: asked for, in float32, on a device with fp64."""
    return int(spec.exact and spec.real == "float" and bool(backend.info.fp64))


def launch(backend: Backend, spec: BandSpec, mode: str, x: Any, thr: float, *, lane0: int,
           nlanes: int, n_windows: int, w: int, hb: Any, hw: Any,
           exact: tuple[Any, float, float] | None = None) -> Any:
    """Enqueue lanes ``lane0 .. lane0 + nlanes - 1`` (columns, or diagonals ``d``) of the
    series ``x`` (device, the spec's dtype) into the difference histograms ``hb`` (black:
    vertical or diagonal lines) and ``hw`` (white vertical lines; unused for diagonals).
    ``exact`` (EXACT, :func:`exact_on`): the raw float64 series on the device, the float64
    threshold and the bound (:mod:`pyedmcl.rqa.exact`)."""
    wg = work_group(backend)
    params = spec.template_params(mode, wg, local_ints(backend), outline=backend.info.is_gpu)
    params["EXACT"] = exact_on(spec, backend)
    extra: tuple[Any, ...] = ()
    if params["EXACT"]:
        if exact is None:
            raise ValueError("an EXACT band spec needs exact= (raw series, thr64, bound)")
        extra = (exact[0], np.float64(exact[1]), np.float32(exact[2]))
    k = backend.kernel(TEMPLATE, params, f"rqa_band_{mode}")
    gsz: tuple[int, ...] = (round_up(int(nlanes), wg),)
    lsz: tuple[int, ...] = (wg,)
    if mode == "diagonal":
        rows = (n_windows - 1) * spec.step + spec.window
        gsz, lsz = (gsz[0], -(-rows // chunk_rows(spec.window))), (wg, 1)
    return backend.launch(k, gsz, lsz, x, *extra, spec.dtype(thr), np.int32(lane0),
                          np.int32(nlanes),
                          np.int32(n_windows), np.int32(w), hb, hw)
