"""Peers used as oracles by the tests and bench/bench_rqa.py (PyRQA, pyunicorn, NumPy).

Not imported by the library. PyRQA runs on the PoCL platform (picked by name, so
the extra platforms clkernels registers do not shift its index).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

PYRQA_METRICS = {"euclidean": "EuclideanMetric", "maximum": "MaximumMetric",
                 "manhattan": "TaxicabMetric"}


def pocl_platform_id(name: str = "Portable Computing Language") -> int:
    """Index of the first OpenCL platform whose name contains ``name``."""
    import pyopencl as cl

    for i, p in enumerate(cl.get_platforms()):
        if name.lower() in p.name.lower():
            return i
    raise RuntimeError(f"OpenCL platform {name!r} not found")


def pyrqa_opencl(platform: str = "Portable Computing Language") -> Any:
    """PyRQA's OpenCL context on ``platform``'s first device, with its config file named by
    absolute path (PyRQA's default is relative to the working directory at import time,
    so it breaks once the process changes directory)."""
    import os

    import pyrqa
    from pyrqa.opencl import OpenCL

    config = os.path.join(os.path.dirname(os.path.abspath(pyrqa.__file__)), "config.ini")
    return OpenCL(platform_id=pocl_platform_id(platform), device_ids=(0,),
                  config_file_path=config)


def pyrqa_run(x: np.ndarray, *, E: int, tau: int, radius: float, metric: str = "euclidean",
              theiler: int = 1, l_min: int = 2, v_min: int = 2, w_min: int = 2,
              dtype: Any = np.float64, y: np.ndarray | None = None, variant: str | None = None,
              optimisations: bool = True, edge_length: int = 10240,
              platform: str = "Portable Computing Language") -> tuple[Any, float]:
    """PyRQA result (and seconds) for auto-RQA, or cross-RQA when ``y`` is given."""
    warnings.filterwarnings("ignore")
    import pyrqa.metric as pm
    from pyrqa.analysis_type import Classic, Cross
    from pyrqa.computation import RQAComputation
    from pyrqa.neighbourhood import FixedRadius
    from pyrqa.settings import Settings
    from pyrqa.time_series import TimeSeries

    ts = TimeSeries(x, embedding_dimension=E, time_delay=tau, dtype=np.dtype(dtype))
    if y is not None:
        ts = (ts, TimeSeries(y, embedding_dimension=E, time_delay=tau, dtype=np.dtype(dtype)))
    settings = Settings(ts, analysis_type=Cross if y is not None else Classic,
                        neighbourhood=FixedRadius(radius),
                        similarity_measure=getattr(pm, PYRQA_METRICS[metric]),
                        theiler_corrector=theiler)
    kw: dict[str, Any] = {"opencl": pyrqa_opencl(platform),
                          "verbose": False, "edge_length": edge_length,
                          "variants_kwargs": {"optimisations_enabled": optimisations}}
    if variant is not None:
        import importlib
        import re

        mod = re.sub(r"(?<!^)(?=[A-Z])", "_", variant).lower()
        m = importlib.import_module(f"pyrqa.variants.rqa.radius.{mod}")
        kw["variants"] = (getattr(m, variant),)
    comp = RQAComputation.create(settings, **kw)
    t = time.perf_counter()
    res = comp.run()
    sec = time.perf_counter() - t
    res.min_diagonal_line_length = l_min
    res.min_vertical_line_length = v_min
    res.min_white_vertical_line_length = w_min
    return res, sec


def pyrqa_measures(res: Any) -> dict[str, float]:
    """PyRQA's own measure values under our names (PyRQA computes them in float32)."""
    return {"RR": res.recurrence_rate, "DET": res.determinism, "L": res.average_diagonal_line,
            "L_max": res.longest_diagonal_line, "DIV": res.divergence,
            "L_entr": res.entropy_diagonal_lines, "LAM": res.laminarity, "TT": res.trapping_time,
            "V_max": res.longest_vertical_line, "V_entr": res.entropy_vertical_lines,
            "W": res.average_white_vertical_line, "W_max": res.longest_white_vertical_line,
            "W_div": res.longest_white_vertical_line_inverse,
            "W_entr": res.entropy_white_vertical_lines,
            "DET_RR": res.ratio_determinism_recurrence_rate,
            "LAM_DET": res.ratio_laminarity_determinism}


def pyunicorn_rp(x: np.ndarray, *, E: int, tau: int, radius: float, metric: str = "euclidean"):
    """pyunicorn RecurrencePlot (fixed threshold); it rounds the series to float32."""
    from pyunicorn.timeseries import RecurrencePlot

    m = {"euclidean": "euclidean", "maximum": "supremum", "manhattan": "manhattan"}[metric]
    return RecurrencePlot(np.asarray(x, dtype=np.float64), metric=m, threshold=radius, dim=E,
                          tau=tau, silence_level=3)


def pyunicorn_measures(rp: Any, l_min: int = 2, v_min: int = 2, w_min: int = 2) -> dict[str, float]:
    """The 12 measures pyunicorn shares with us, and RTE from two of them (pyunicorn has
    no normalised recurrence-time entropy: its white-line entropy over ln of its longest
    white line)."""
    w_max, w_entr = rp.max_white_vertlength(), rp.white_vert_entropy(w_min)
    return {"RR": rp.recurrence_rate(), "DET": rp.determinism(l_min),
            "L": rp.average_diaglength(l_min), "L_max": rp.max_diaglength(),
            "L_entr": rp.diag_entropy(l_min), "LAM": rp.laminarity(v_min),
            "TT": rp.trapping_time(v_min), "V_max": rp.max_vertlength(),
            "V_entr": rp.vert_entropy(v_min), "W": rp.average_white_vertlength(w_min),
            "W_max": w_max, "W_entr": w_entr,
            "RTE": w_entr / np.log(w_max) if w_max > 1 else np.nan}


def numpy_reference(x: np.ndarray, y: np.ndarray | None, *, E: int, tau: int, radius: float,
                    metric: str, theiler: int, theiler_scope: str = "lines",
                    white_border: bool = True) -> dict[str, Any]:
    """Full-matrix float64 reference (small N): histograms + recurrence count."""
    def pts(s):
        n = s.size - (E - 1) * tau
        return np.stack([s[m * tau: m * tau + n] for m in range(E)], axis=1)

    a = pts(np.asarray(y if y is not None else x, dtype=np.float64))  # rows
    b = pts(np.asarray(x, dtype=np.float64))  # columns
    diff = a[:, None, :] - b[None, :, :]
    if metric == "euclidean":
        d = (diff * diff).sum(-1)
        R = d < radius * radius
    elif metric == "maximum":
        R = np.abs(diff).max(-1) < radius
    else:
        R = np.abs(diff).sum(-1) < radius
    return matrix_histograms(R, theiler, theiler_scope, white_border)


def matrix_histograms(R: np.ndarray, theiler: int, theiler_scope: str = "lines",
                      white_border: bool = True) -> dict[str, Any]:
    """Line histograms and counts of a given boolean recurrence matrix (rows: points of
    y / rows; columns: points of x), the conventions of :mod:`pyedmcl.rqa.core`."""
    nr, nc = R.shape
    ii, jj = np.indices(R.shape)
    band = np.abs(ii - jj) < theiler
    Rm = R & ~band if theiler_scope == "matrix" else R
    hlen = max(nr, nc)

    def runs(v, value=True):
        out = []
        k = 0
        first = True
        for c in v:
            if c == value:
                k += 1
            else:
                if k:
                    out.append((k, first))
                k = 0
                first = False
            if c != value:
                first = False
        if k:
            out.append((k, None))
        return out

    dh = np.zeros(hlen, np.int64)
    for k in range(-(nr - 1), nc):
        if abs(k) < theiler:
            continue
        for ln, _ in runs(np.diagonal(R, k)):
            dh[ln - 1] += 1
    vh = np.zeros(hlen, np.int64)
    wh = np.zeros(hlen, np.int64)
    for j in range(nc):
        col = Rm[:, j]
        for ln, _ in runs(col):
            vh[ln - 1] += 1
        w_runs = []
        k = 0
        start = 0
        for i, c in enumerate(col):
            if not c:
                if k == 0:
                    start = i
                k += 1
            else:
                if k:
                    w_runs.append((k, start == 0, False))
                k = 0
        if k:
            w_runs.append((k, start == 0, True))
        for ln, top, bottom in w_runs:
            if white_border or not (top or bottom):
                wh[ln - 1] += 1
    n_cells = nr * nc - (int(band.sum()) if theiler_scope == "matrix" else 0)
    return {"diag": dh, "vert": vh, "white": wh, "n_rec": int(Rm.sum()), "n_cells": n_cells}
