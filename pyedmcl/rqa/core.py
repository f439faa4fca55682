"""Public RQA functions: auto-, cross- and joint-RQA by Divide & Recombine.

Conventions (see ``docs`` in each function):

* Embedding: point ``j = (s[j], s[j+tau], ..., s[j+(E-1)tau])`` as in PyRQA and
  pyunicorn, so cell ``(i, j)`` here is cell ``(i, j)`` there.
* Recurrence: ``d(i, j) < radius`` (strict, as both oracles); Euclidean compares
  the squared distance with ``radius**2`` computed in the working precision (no sqrt).
* Theiler window ``w`` (``theiler``): diagonal lines are taken from diagonals with
  ``|i - j| >= w`` only. ``theiler_scope="lines"`` (default; PyRQA's
  ``theiler_corrector`` and pyunicorn, which is ``w = 1``): the window only
  removes diagonals from the diagonal histogram; RR, vertical and white lines use
  the whole matrix (main diagonal included). ``theiler_scope="matrix"`` (CRP
  toolbox): the band ``|i - j| < w`` is removed from the matrix for every
  measure; RR's denominator is then the number of cells outside the band.
* White vertical lines touching the top/bottom border are counted
  (``white_border=True``, PyRQA and pyunicorn); ``False`` drops them (CRP toolbox).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import Backend, get_backend

from .._precision import prepare
from ..kernels.rqa_lines import LineSpec
from ..validation import as_series, check_dtype, check_embedding, check_int, check_metric
from .dnr import Histograms, detect_lines
from .measures import MEASURES, compute_measures


@dataclass
class RQAResult:
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
        return f"RQAResult({body})"


def _trim(h: np.ndarray) -> list[int]:
    nz = np.flatnonzero(h)
    return h[: (nz[-1] + 1) if nz.size else 0].tolist()


def _backends(device: Any, devices: Any, backend: str | None) -> list[Backend]:
    if devices is not None:
        if isinstance(devices, str):
            devices = [d for d in devices.split(",") if d]
        bes = [get_backend(d, backend) for d in devices]
        if not bes:
            raise ValueError("devices= is empty; give at least one device selector")
        return bes
    if device is None:  # the default: among CPU runtimes, the one measured faster here
        from clkernels.runtime_choice import default_for

        from ..kernels.rqa_lines import RQA_LINES
        device = default_for((RQA_LINES,))
    return [get_backend(device, backend)]


def _backends_and_dtype(device: Any, devices: Any, backend: str | None, dtype: Any
                        ) -> tuple[list[Backend], np.dtype]:
    """The devices to run on and a dtype every one of them supports."""
    bes = _backends(device, devices, backend)
    dt = check_dtype(dtype, None)
    for be in bes:
        check_dtype(dt, be.info)
    return bes, dt


def _check_common(l_min: int, v_min: int, w_min: int, theiler: int, theiler_scope: str,
                  order: str, edge: int | None, n: int) -> tuple[int, int, int, int, int | None]:
    """Validated (l_min, v_min, w_min, theiler, edge) as ints (``2.0`` -> 2); a minimum
    line length is at most ``n``, the longest side of the matrix (no line is longer)."""
    n = max(n, 2)  # the defaults (2) stay valid on the tiniest series
    l_min = check_int(l_min, "l_min", 1, n)
    v_min = check_int(v_min, "v_min", 1, n)
    w_min = check_int(w_min, "w_min", 1, n)
    theiler = check_int(theiler, "theiler", 0)
    if theiler_scope not in ("lines", "matrix"):
        raise ValueError(f"theiler_scope={theiler_scope!r} is not supported; allowed: 'lines' "
                         "(PyRQA/pyunicorn) or 'matrix' (CRP toolbox)")
    if order not in ("row", "column"):
        raise ValueError(f"order={order!r} is not supported; allowed: 'row', 'column'")
    if edge is not None:
        edge = check_int(edge, "edge", 1)
    return l_min, v_min, w_min, theiler, edge


def _check_E_tau(E: Any, tau: Any) -> tuple[int, int]:
    """E and tau as ints: integral floats accepted, the rest refused with the range."""
    return check_int(E, "E", 1, 512), check_int(tau, "tau", 1)


def check_radius(radius: Any, name: str = "radius") -> float:
    try:
        r = float(radius)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive number, got {radius!r}") from exc
    if not np.isfinite(r) or r <= 0:
        raise ValueError(f"{name}={radius!r} is out of range; allowed: a finite number > 0")
    return r


def check_rate(rate: Any) -> float:
    try:
        rr = float(rate)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"recurrence_rate must be a number in (0, 1), got {rate!r}") from exc
    if not (0.0 < rr < 1.0):
        raise ValueError(f"recurrence_rate={rate!r} is out of range; allowed: 0 < recurrence_rate < 1")
    return rr


def threshold_value(radius: float, metric: str, dt: np.dtype) -> float:
    """What the kernel compares with: radius**2 (Euclidean, in the working dtype) or radius."""
    r = dt.type(radius)
    return float(r * r) if metric == "euclidean" else float(r)


def centred(series: list[np.ndarray], names: list[str], dt: np.dtype, bes: list[Backend], *,
             common: bool, what: str) -> tuple[np.dtype, list[np.ndarray]]:
    """float32: each series minus its mean (``common``: minus one mean of all, for
    distances *between* series), in float64, so that distances -- and every recurrence
    decision against a radius in data units -- do not depend on where the data sit
    (:mod:`pyedmcl._precision`; may switch the call to float64). float64: as given."""
    prep = prepare(series, dt, all(be.info.fp64 for be in bes), names=names, scale=False,
                   common_shift=common, what=what)
    return prep.dtype, prep.series


def _band_cells(n: int, w: int) -> int:
    """Cells with |i - j| < w in an n x n matrix."""
    if w <= 0:
        return 0
    w = min(w, n)
    return n + 2 * sum(n - k for k in range(1, w))


def rqa(x: Any, *, E: int = 1, tau: int = 1, radius: float | None = None,
        recurrence_rate: float | None = None, metric: str = "euclidean", theiler: int = 1,
        l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
        theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
        devices: Any = None, backend: str | None = None, edge: int | None = None,
        order: str = "row", params: dict[str, Any] | None = None) -> RQAResult:
    """Recurrence quantification analysis of one series by Divide & Recombine.

    Give exactly one of ``radius`` (fixed radius) or ``recurrence_rate`` (the
    radius is chosen so that the recurrence rate is close to it, see
    :func:`pyedmcl.rqa.radius.radius_for_rate`). ``devices`` (a list or a
    comma-separated string of selectors) splits the work over several devices.
    ``edge`` is the sub-matrix edge length (default: tuned per device). Float32
    distances are compared with ``radius**2`` rounded to float32: cells whose
    distance is within float32 rounding of the radius may differ from a float64
    computation (use ``dtype="float64"`` where the device has fp64). In float32 the
    series is centred (its mean subtracted in float64) first: a radius is in data units,
    so distances, not the data's offset, decide (see :mod:`pyedmcl._precision`).
    """
    s = as_series(x, "x")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    n = check_embedding(s.size, E, tau, "x")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler,
                                                       theiler_scope, order, edge, n)
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    dt, (s,) = centred([s], ["x"], dt, bes, common=False, what="rqa")
    radius = _resolve_radius(radius, recurrence_rate, s, None, E, tau, metric, dt, bes)
    w = int(theiler)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(theiler_scope == "matrix" and w > 0),
                    white_border=bool(white_border))
    kmin = max(w, 1)
    xs = s.astype(dt)
    h = detect_lines(bes, xs, xs, threshold_value(radius, metric, dt), spec=spec, n_rows=n,
                     n_cols=n, diag_ranges=[(kmin, n)] if kmin < n else [], w=w, edge=edge,
                     order=order, params=params, symmetric=True)
    diag = 2 * h.diagonal  # the matrix is symmetric: each upper diagonal has a lower twin
    if w == 0:
        diag[n - 1] += 1  # the main diagonal: d(i, i) = 0 < radius, one line of length n
    n_cells = n * n - (_band_cells(n, w) if spec.theiler_matrix else 0)
    return _result(h, diag, n_cells, radius, l_min, v_min, w_min, dict(
        kind="rqa", E=E, tau=tau, metric=metric, theiler=w, theiler_scope=theiler_scope,
        l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt), white_border=white_border,
        n_points=n, devices=h.per_device, launches=h.launches,
        symmetric=h.symmetric))


def cross_rqa(x: Any, y: Any, *, E: int = 1, tau: int = 1, radius: float | None = None,
              recurrence_rate: float | None = None, metric: str = "euclidean", theiler: int = 0,
              l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
              white_border: bool = True, device: Any = None, devices: Any = None,
              backend: str | None = None, edge: int | None = None, order: str = "row",
              params: dict[str, Any] | None = None) -> RQAResult:
    """Cross-RQA of two series (lengths may differ), as PyRQA's cross analysis.

    The cross recurrence matrix has one column per embedded point of ``x`` and one
    row per point of ``y``: vertical (and white) lines run along ``y`` for a fixed
    point of ``x`` (PyRQA's orientation). Diagonal lines are taken on diagonals
    with ``|i - j| >= theiler`` (default 0: every diagonal). RR divides by
    ``n_x * n_y``.
    """
    sx = as_series(x, "x")
    sy = as_series(y, "y")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    nx = check_embedding(sx.size, E, tau, "x")
    ny = check_embedding(sy.size, E, tau, "y")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler, "lines",
                                                       order, edge, max(nx, ny))
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    dt, (sx, sy) = centred([sx, sy], ["x", "y"], dt, bes, common=True, what="cross_rqa")
    radius = _resolve_radius(radius, recurrence_rate, sy, sx, E, tau, metric, dt, bes)
    w = int(theiler)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    white_border=bool(white_border))
    n_rows, n_cols = ny, nx  # rows: points of y; columns: points of x
    if w == 0:
        ranges = [(-(n_rows - 1), n_cols)]
    else:
        ranges = [r for r in ((-(n_rows - 1), -w + 1), (w, n_cols)) if r[1] > r[0]]
    h = detect_lines(bes, sy.astype(dt), sx.astype(dt), threshold_value(radius, metric, dt),
                     spec=spec, n_rows=n_rows, n_cols=n_cols, diag_ranges=ranges, w=w,
                     edge=edge, order=order, params=params)
    return _result(h, h.diagonal.copy(), nx * ny, radius, l_min, v_min, w_min, dict(
        kind="cross_rqa", E=E, tau=tau, metric=metric, theiler=w, l_min=l_min, v_min=v_min,
        w_min=w_min, dtype=str(dt), white_border=white_border, n_points_x=nx, n_points_y=ny,
        devices=h.per_device, launches=h.launches))


def joint_rqa(x: Any, y: Any, *, E: int = 1, tau: int = 1, radius: Any = None,
              metric: str = "euclidean", theiler: int = 1, l_min: int = 2, v_min: int = 2,
              w_min: int = 2, dtype: Any = "float32", theiler_scope: str = "lines",
              white_border: bool = True, device: Any = None, devices: Any = None,
              backend: str | None = None, edge: int | None = None, order: str = "row",
              params: dict[str, Any] | None = None) -> RQAResult:
    """Joint RQA: ``JR = R_x & R_y`` (same length series, same E/tau/metric).

    ``radius`` is one number for both series or a pair ``(r_x, r_y)``.
    """
    sx = as_series(x, "x")
    sy = as_series(y, "y")
    if sx.size != sy.size:
        raise ValueError(f"joint RQA needs series of equal length, got x: {sx.size}, y: {sy.size}")
    metric = check_metric(metric)
    E, tau = _check_E_tau(E, tau)
    n = check_embedding(sx.size, E, tau, "x")
    l_min, v_min, w_min, theiler, edge = _check_common(l_min, v_min, w_min, theiler,
                                                       theiler_scope, order, edge, n)
    if radius is None:
        raise ValueError("radius is required for joint RQA: one number or a pair (r_x, r_y)")
    rx, ry = (radius, radius) if np.ndim(radius) == 0 else tuple(radius)
    rx, ry = check_radius(rx, "radius[0]"), check_radius(ry, "radius[1]")
    bes, dt = _backends_and_dtype(device, devices, backend, dtype)
    dt, (sx,) = centred([sx], ["x"], dt, bes, common=False, what="joint_rqa")
    dt, (sy,) = centred([sy], ["y"], dt, bes, common=False, what="joint_rqa")
    w = int(theiler)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float", joint=True,
                    theiler_matrix=(theiler_scope == "matrix" and w > 0),
                    white_border=bool(white_border))
    kmin = max(w, 1)
    a, b = sx.astype(dt), sy.astype(dt)
    h = detect_lines(bes, a, a, threshold_value(rx, metric, dt), spec=spec, n_rows=n, n_cols=n,
                     diag_ranges=[(kmin, n)] if kmin < n else [], x2=b, y2=b,
                     thr2=threshold_value(ry, metric, dt), w=w, edge=edge, order=order,
                     params=params, symmetric=True)
    diag = 2 * h.diagonal
    if w == 0:
        diag[n - 1] += 1
    n_cells = n * n - (_band_cells(n, w) if spec.theiler_matrix else 0)
    return _result(h, diag, n_cells, (rx, ry), l_min, v_min, w_min, dict(
        kind="joint_rqa", E=E, tau=tau, metric=metric, theiler=w, theiler_scope=theiler_scope,
        l_min=l_min, v_min=v_min, w_min=w_min, dtype=str(dt), n_points=n,
        devices=h.per_device, launches=h.launches, symmetric=h.symmetric))


def _resolve_radius(radius: Any, rate: Any, rows: np.ndarray, cols: np.ndarray | None, E: int,
                    tau: int, metric: str, dt: np.dtype, bes: list[Backend]) -> float:
    if (radius is None) == (rate is None):
        raise ValueError("give exactly one of radius= (fixed radius) or recurrence_rate= "
                         "(fixed recurrence rate)")
    if radius is not None:
        return check_radius(radius)
    from .radius import radius_for_rate

    return radius_for_rate(rows, cols, check_rate(rate), E=E, tau=tau, metric=metric, dtype=dt,
                           backend=bes[0])


def _result(h: Histograms, diag: np.ndarray, n_cells: int, radius: Any, l_min: int, v_min: int,
            w_min: int, settings: dict[str, Any]) -> RQAResult:
    m = compute_measures(h.n_recurrences, n_cells, diag, h.vertical, h.white, l_min, v_min, w_min)
    return RQAResult(m, diag, h.vertical, h.white, h.n_recurrences, n_cells, radius, settings,
                     h.seconds)
