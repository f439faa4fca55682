"""Recurrence plots as images, for any N, without holding the N x N matrix.

When N exceeds the image size, each pixel is the density of recurrences in its
``b x b`` block (``b = ceil(N / size)``), computed on the device
(:mod:`pyedmcl.kernels.rqa_density`); memory is O(size^2). Without a radius or
rate, the unthresholded distance plot (block mean distance) is drawn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import run_blocked

from ..constant_series import RQA_WHY, checks_constant
from ..kernels import rqa_density
from ..validation import as_series, check_dtype, check_embedding, check_int, check_metric
from .core import _resolve_thresholds, centred
from .exact import for_run as exact_for_run
from .threshold import check_threshold_rule


@checks_constant("recurrence_plot", ("x", "y"), RQA_WHY, multi=False)
def recurrence_plot(x: Any, y: Any = None, *, E: int = 1, tau: int = 1,
                    radius: float | None = None, recurrence_rate: float | None = None,
                    metric: str = "euclidean", size: int = 1024, path: str | None = None,
                    dtype: Any = "float32", device: Any = None, backend: str | None = None,
                    cmap: str = "binary", return_device: bool = False,
                    threshold_rule: str = "distance") -> Any:
    """The (cross) recurrence plot as a ``(rows, cols)`` float32 image, saved as PNG if ``path``
    (atomically: written to a temporary file next to it, then renamed into place).

    Rows are points of ``y`` (``x`` when ``y`` is None), columns points of ``x``;
    row 0 is drawn at the bottom (time runs up and right). Values: density of
    recurrent cells per pixel block in [0, 1] (thresholded) or the mean distance.
    Device arrays ``x``/``y`` stay on the device (one host copy only to find the radius
    for ``recurrence_rate``); ``return_device=True`` returns the image as a device
    array (see :mod:`pyedmcl.interop`). ``threshold_rule`` decides cells at the radius
    as :func:`pyedmcl.rqa.core.rqa` does.
    """
    from ..interop import backend_for, device_series, output

    be = backend_for((x, y), device, backend)
    dt = check_dtype(dtype, be.info)
    xdev, ydev = device_series(x, be, "x", dt), device_series(y, be, "y", dt)
    if recurrence_rate is not None and (xdev is not None or ydev is not None):
        xdev = ydev = None  # the radius search runs on the host: one documented copy
    sx = as_series(x, "x") if xdev is None else None
    sy = (sx if y is None else as_series(y, "y")) if ydev is None else None
    if y is None:
        ydev = xdev
    raw = (sx, sy)
    if sx is not None and sy is not None:  # float32: centred, one mean for both series
        dt, cs = centred([sx] if y is None else [sx, sy], ["x", "y"][:1 if y is None else 2],
                         dt, [be], common=True, what="recurrence_plot")
        sx, sy = cs[0], cs[-1]
    nx_ = sx.size if sx is not None else int(xdev.shape[0])
    ny_ = sy.size if sy is not None else int(ydev.shape[0])
    metric = check_metric(metric)
    E, tau = check_int(E, "E", 1, 512), check_int(tau, "tau", 1)
    nc = check_embedding(nx_, E, tau, "x")
    nr = check_embedding(ny_, E, tau, "y")
    size = check_int(size, "size", 1, 1 << 15)
    thresholded = radius is not None or recurrence_rate is not None
    ex = None
    if thresholded:
        rule = check_threshold_rule(threshold_rule)
        th = _resolve_thresholds(radius, recurrence_rate, raw[1], None if y is None else raw[0],
                                 E, tau, metric, dt, [be], rule)  # a rate's: float64's
        r_, thr = th.radius, th.thr
        if sx is not None and sy is not None:  # host series: float32's ties as float64's
            ex = exact_for_run(dt, (raw[1], raw[0]), (sy.astype(dt), sx.astype(dt)), r_,
                               metric, rule, E, thr, thr64=th.thr64)
    else:
        thr = 0.0
    b = max(1, -(-max(nr, nc) // size))
    width, height = -(-nc // b), -(-nr // b)
    spec = rqa_density.spec(E, tau, metric, "double" if dt == np.float64 else "float",
                            thresholded, exact=ex is not None)
    xd = be.to_device(sy.astype(dt)) if ydev is None else ydev
    yd = be.to_device(sx.astype(dt)) if xdev is None else xdev
    exd = None
    if ex is not None and rqa_density.exact_on(spec, be):
        exd = (be.to_device(ex.x), be.to_device(ex.y), ex.thr64, ex.b)

    def rows(p0: int, p1: int):  # image rows p0:p1 as a device array
        blk = be.empty((p1 - p0, width), np.float32)
        rqa_density.launch(be, spec, xd, yd, n_rows=nr, n_cols=nc, b=b, width=width, height=p1,
                           thr=thr, out=blk, py0=p0, exact=exd)
        return blk

    what = f"recurrence_plot image ({height} x {width})"
    if return_device:  # the whole image on the device: one block
        out = run_blocked(be, rows, height, minimum=height, what=what,
                          parameter="size (or use return_device=False)")[0]
        if path is None:
            return output(be, out, True)
        img = be.to_host(out)
    else:  # row blocks when the image does not fit on the device (clkernels.memory)
        blocks = run_blocked(be, lambda p0, p1: be.to_host(rows(p0, p1)), height, what=what,
                             parameter="size", nbytes=lambda n: n * width * 4)
        img = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    if path is not None:
        import matplotlib

        matplotlib.use("Agg", force=False)
        from pathlib import Path

        import matplotlib.image as mimg

        from .._outputs import atomic_file

        fmt = Path(path).suffix[1:].lower() or "png"
        with atomic_file(path, what="path") as tmp:  # written whole or not at all
            mimg.imsave(tmp, img, cmap=cmap if thresholded else "viridis", origin="lower",
                        vmin=0.0, vmax=1.0 if thresholded else None, format=fmt)
    return output(be, out, True) if return_device else img
