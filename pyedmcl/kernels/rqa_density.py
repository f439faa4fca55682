"""The recurrence-plot image kernel (``rqa_density/rqa_density.cl.mako``).

One work-item per pixel: the density of recurrent cells in the pixel's ``b x b``
block of the (cross) recurrence matrix, or the block's mean distance (the
unthresholded distance plot). Not tunable: a plot is one launch per image block,
in 8 x 8 work-groups (1 x 1 on devices that take fewer than 64 work-items).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up

TEMPLATE = "rqa_density/rqa_density.cl.mako"


def spec(E: int, tau: int, metric: str, real: str, thresholded: bool,
         exact: bool = False) -> dict[str, Any]:
    """Template values of one plot (``real``: "float" | "double"); ``exact``: float32's
    cells near the threshold redone in double (EXACT, set per device by :func:`launch`)."""
    return {"E": E, "TAU": tau, "METRIC": metric, "REAL": real,
            "THRESHOLDED": int(thresholded), "EXACT": int(exact)}


def exact_on(spec: dict[str, Any], backend: Backend) -> int:
    """EXACT template value: asked for, thresholded, in float32, on a device with fp64."""
    return int(bool(spec.get("EXACT")) and bool(spec["THRESHOLDED"]) and spec["REAL"] == "float"
               and bool(backend.info.fp64))


def _work_group(backend: Backend) -> tuple[int, int]:
    return (8, 8) if backend.info.max_work_group_size >= 64 else (1, 1)


def launch(backend: Backend, spec: dict[str, Any], x: Any, y: Any, *, n_rows: int,
           n_cols: int, b: int, width: int, height: int, thr: float, out: Any,
           py0: int = 0, exact: tuple | None = None) -> Any:
    """Draw image rows ``py0 .. height - 1`` (``width`` pixels of ``b x b`` cells each)
    into ``out`` (a float32 ``(height - py0, width)`` device array), row ``py0`` first.
    ``x``: the row series (``n_rows`` embedded points), ``y``: the column series;
    ``thr``: the threshold (squared radius for Euclidean), unused unthresholded.
    ``exact`` (EXACT, :func:`exact_on`): (raw rows, raw columns on the device, thr64, bound)."""
    wg = _work_group(backend)
    on = exact_on(spec, backend)
    extra: tuple[Any, ...] = ()
    if on:
        if exact is None:
            raise ValueError("an EXACT plot needs exact= (raw series, thr64, bound)")
        extra = (exact[0], exact[1], np.float64(exact[2]), np.float32(exact[3]))
    k = backend.kernel(TEMPLATE, {**spec, "EXACT": on, "WG_X": wg[0], "WG_Y": wg[1]},
                       "rqa_density")
    real = np.float64 if spec["REAL"] == "double" else np.float32
    return backend.launch(k, (round_up(width, wg[0]), round_up(height - py0, wg[1])), wg, x, y,
                          *extra, np.int32(n_rows), np.int32(n_cols), np.int32(b), np.int32(width),
                          np.int32(height), real(thr), out, np.int32(py0))
