"""Iterated forecasts (pyEDM's ``generateSteps``): each forecast is fed back as data.

pyEDM 2.5's ``Simplex.Generate`` / ``SMap.Generate``: the library stays ``lib``; step
``s`` predicts from the row ``lib_end - 1 + s`` (0-based, ``lib_end`` the last library
row, 1-based) of the series grown by the ``s`` earlier forecasts, and appends that
forecast as the series' next value. Simplex runs on the device end to end: the series (with room for the forecasts) is
uploaded once, each step enqueues the k-NN of one query window against the fixed
library, the lookup, and a device-to-device copy of the forecast into the series,
so the next window reads it without a host round trip; the forecasts are read back
once at the end (backends without a device copy, e.g. SYCL, take the S-map route).
S-map runs one :func:`~pyedmcl.edm.smap.smap` call per step (its local fit on the
device; the new value returns to the host between steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..constant_series import checks_constant
from ..labels import Labels
from ..primitives.ranges import check_tau, parse_ranges
from ..validation import as_series, check_int


@dataclass
class GenerateResult:
    """``steps`` generated values; ``times`` are the 0-based rows they are for (the
    prediction row + Tp); ``series`` is the input followed by the generated values."""

    predicted: np.ndarray
    times: np.ndarray
    series: np.ndarray
    method: str
    E: int
    tau: int
    Tp: int
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)
    #: the input's time axis where it had labels (:class:`pyedmcl.labels.Labels`)
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "time"

    def time_index(self):
        """The time each generated value is for: the input's time labels extended by
        its step where it had them, else the 0-based rows ``times``."""
        return (self.labels or Labels()).at(self.times)

    def as_dataframe(self):
        """The generated values, indexed by :meth:`time_index`."""
        import pandas as pd

        return pd.DataFrame({"predicted": self.predicted}, index=self.time_index())


@checks_constant("generate", ("x",))
def generate(x, *, E: int, steps: int, tau: int = 1, Tp: int = 1, knn: int | None = None,
             exclusion_radius: int = 0, lib=None, method: str = "simplex",
             theta: float | None = None, dtype: Any = "float32", device: Any = None,
             backend: str | None = None) -> GenerateResult:
    """``steps`` iterated ``Tp``-ahead forecasts of ``x`` from its own embedding.

    ``method``: "simplex" or "smap" (``theta`` required). ``lib``: pyEDM's 1-based
    ``start stop`` pairs (default the whole series); it stays fixed while the series
    grows, as in pyEDM. ``tau > 0`` lags into the past. Other arguments as
    :func:`~pyedmcl.edm.simplex.simplex`. ``dtype="float32"`` (the default) computes in
    float64 where the device has fp64: each forecast feeds back as data, so float32's
    rounding compounds along the generation (logistic map, 300 steps: 7.7e-5 of the
    std off float64 with no step itself off by 1e-5; integer data 1.7 std), and with one
    query per step float64 costs the same.
    """
    s = as_series(x, "x")
    steps = check_int(steps, "steps", 1, 10**7)
    E = check_int(E, "E", 1, s.size)
    tau = check_tau(tau)
    if (E - 1) * abs(tau) >= s.size:
        raise ValueError(f"E={E}, tau={tau} leave no full embedding in {s.size} values; "
                         f"allowed: (E - 1) * |tau| < {s.size}")
    Tp = check_int(Tp, "Tp", -s.size, s.size)
    if method not in ("simplex", "smap"):
        raise ValueError(f"method={method!r} is not one of 'simplex', 'smap'")
    if method == "smap" and theta is None:
        raise ValueError("theta required for method='smap' (e.g. theta=2)")
    dtype = _generation_dtype(dtype, device, backend)
    pairs = parse_ranges(lib, "lib", s.size)
    flat = [v for p in pairs for v in p]
    end = flat[-1]
    if end < 2:
        raise ValueError(f"lib must end at row 2 or later to generate, got {end}")
    if method == "simplex":
        done = _simplex_on_device(s, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                                  lib=flat, steps=steps, dtype=dtype, device=device, backend=backend)
        if done is not None:
            out, times = done
            return GenerateResult(predicted=out, times=times, series=np.concatenate([s, out]),
                                  method=method, E=E, tau=tau, Tp=Tp)
        from .simplex import simplex as fn
        extra: dict = {}
    else:
        from .smap import smap as fn
        extra = {"theta": float(theta)}
    grown = np.concatenate([s, np.full(steps, np.nan)])
    out = np.empty(steps)
    times = np.empty(steps, dtype=np.int64)
    n = s.size
    for k in range(steps):
        row = end - 1 + k  # 0-based prediction row of this step
        res = fn(grown[:n + k], E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius,
                 lib=flat, pred=[row, row + 1], dtype=dtype, device=device, backend=backend,
                 **extra)
        rows = np.asarray(res.pred_times if res.pred_times is not None else np.asarray(res.times) - Tp)
        hit = np.flatnonzero(rows == row)
        value = float(np.asarray(res.predicted)[hit[0]]) if hit.size else np.nan
        out[k], times[k] = value, row + Tp
        grown[n + k] = value
    return GenerateResult(predicted=out, times=times, series=grown, method=method, E=E, tau=tau,
                          Tp=Tp)


def _generation_dtype(dtype: Any, device: Any, backend: str | None) -> Any:
    """The dtype a generation computes in: float64 for float32 where the device has fp64
    (see :func:`generate`), else ``dtype`` as given (validated)."""
    from clkernels import get_backend

    from ..validation import check_dtype

    info = get_backend(device, backend).info
    dt = check_dtype(np.float32 if dtype is None else dtype, info)
    return np.float64 if info.fp64 else dt


def _simplex_on_device(s: np.ndarray, *, E, tau, Tp, knn, exclusion_radius, lib, steps, dtype,
                       device, backend) -> tuple[np.ndarray, np.ndarray] | None:
    """Simplex generation with the feedback on the device; None where the backend has no
    device-to-device copy. float32 centres the input once (its shift maps the forecasts
    back; Simplex's distance floor is in data units, so the input is not scaled)."""
    from clkernels import Backend, get_backend

    from .._precision import prepare
    from ..primitives.knn import hold, knn_device
    from ..primitives.lookup import lookup_device
    from ..primitives.ranges import resolve
    from ..validation import check_dtype

    be = get_backend(device, backend)
    if type(be).copy_within is Backend.copy_within:  # this backend has no device copy
        return None
    dt = check_dtype(np.float32 if dtype is None else dtype, be.info)
    n, end = s.size, lib[-1]
    plan = resolve(n, E=E, tau=tau, Tp=Tp, knn=knn, exclusion_radius=exclusion_radius, lib=lib,
                   pred=[end - 1, end])
    first = np.flatnonzero(plan.pred_times == end - 1)
    if first.size == 0:
        raise ValueError(f"lib ending at row {end} leaves no full embedding to start from "
                         f"(E={E}, tau={tau})")
    q0 = int(plan.pred_points[first[0]])
    prep = prepare([s], dt, be.info.fp64, names=["x"], scale=False, what="generate")
    dt, z, f = prep.dtype, prep.series[0], prep.affine[0]
    real = "double" if dt == np.float64 else "float"
    size = n + steps
    x_dev = be.to_device(np.concatenate([z, np.zeros(steps)]).astype(dt))
    l_dev = be.to_device(np.ascontiguousarray(np.atleast_2d(plan.lib_points), dtype=np.int32))
    hold(be, x_dev, l_dev)
    keep = []
    for k in range(steps):
        q = np.array([q0 + k], dtype=np.int32)
        table = knn_device(be, x_dev, size, E=plan.E, tau=plan.tau, k=plan.knn, qpts=q,
                           lpts=plan.lib_points, radius=plan.exclusion_radius, real=real,
                           q_dev=be.to_device(q), l_dev=l_dev)
        pred_dev, _ = lookup_device(be, table, x_dev, size, 1, plan.offset + plan.Tp, real=real)
        be.copy_within(x_dev, n + k, pred_dev, 0, 1)
        keep.append((table, pred_dev))  # alive until the queue has run them
    grown = be.to_host(x_dev).astype(np.float64)
    keep.clear()
    out = f.back(grown[None, n:])[0]
    return out, np.arange(end - 1, end - 1 + steps) + Tp
