"""One series' auto-RQA at several radii (or recurrence rates) from one pass over its cells.

:func:`run_radii` gives, for each (radius or rate), the :class:`RQAResult` that
:meth:`pyedmcl.rqa.batch.Runner.run` gives, bit for bit, but decides the thresholds
together: each threshold is resolved as the single call resolves it (a rate's radius by
:func:`pyedmcl.rqa.radius.rate_threshold`: the distances it searches computed once for
every rate; float32's exact inputs by
:func:`pyedmcl.rqa.exact.for_runs`: its own float64 threshold and bound), then up to
:data:`~pyedmcl.rqa.lines_k.MAX_THRESHOLDS` of them, ascending, go through one
Divide & Recombine pass (:func:`pyedmcl.rqa.dnr_k.detect_lines_k`): every distance is
computed once and decided against each threshold, each keeping its own line walks and
histograms. A threshold no pass can take (not positive in the working dtype, a lone
one, a device path without shared words) runs alone, as the single call does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..kernels.rqa_lines import LineSpec
from ..validation import check_embedding
from .core import _check_common, _resolve_thresholds, auto_result, check_rate
from .dnr import keeping_buffers
from .dnr_k import Thresholds, detect_lines_k
from .exact import for_runs as exact_for_runs
from .lines_k import MAX_THRESHOLDS, PathUnsupported
from .result import RQAResult


def run_radii(runner: Any, prepared: tuple[np.dtype, np.ndarray, np.ndarray], *, E: int,
              tau: int, radii: Sequence[float | None], rates: Sequence[float | None],
              theiler: Any, l_min: Any = 2, v_min: Any = 2, w_min: Any = 2) -> list[RQAResult]:
    """``[runner.run(prepared, radius=r, recurrence_rate=q, ...) for r, q in zip(radii,
    rates)]`` (:class:`pyedmcl.rqa.batch.Runner`; each pair holds one of the two), the
    thresholds that can share a pass decided in one."""
    dt, xs, raw = prepared
    n = check_embedding(xs.size, E, tau, "x")
    l_min, v_min, w_min, w, edge = _check_common(l_min, v_min, w_min, theiler,
                                                  runner.theiler_scope, runner.order,
                                                  runner.edge, n)
    metric, rule = runner.metric, runner.rule
    xs = xs.astype(dt)
    by_rate = iter(_rate_thresholds(radii, rates, raw, E, tau, metric, dt, runner.bes, rule))
    ths = [_resolve_thresholds(r, q, raw, None, E, tau, metric, dt, runner.bes, rule)
           if q is None else next(by_rate) for r, q in zip(radii, rates, strict=True)]
    exs = exact_for_runs(dt, (raw, raw), (xs, xs), metric, E, [th.thr for th in ths],
                         [th.thr64 for th in ths])
    items = list(zip(range(len(ths)), ths, exs, strict=True))  # (index, RateThreshold, Exact)
    spec = LineSpec(E, tau, metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(runner.theiler_scope == "matrix" and w > 0),
                    white_border=runner.white_border, fma=(rule == "squared"),
                    exact=items[0][2] is not None if items else False)
    out: list[RQAResult | None] = [None] * len(items)
    shared = sorted((it for it in items if dt.type(it[1].thr) > 0),
                    key=lambda it: (it[1].thr, it[1].thr64))
    if len(runner.bes) == 1 and runner.order == "row":
        for k in range(0, len(shared), MAX_THRESHOLDS):
            part = shared[k:k + MAX_THRESHOLDS]
            if len(part) < 2:
                continue
            hs = _one_pass(runner, xs, spec, part, n, w, edge)
            for (i, th, _), h in zip(part, hs or (), strict=False):
                out[i] = auto_result(h, spec, n=n, w=w, radius=th.radius, dt=dt,
                                     theiler_scope=runner.theiler_scope, l_min=l_min,
                                     v_min=v_min, w_min=w_min, rule=rule,
                                     recurrence_rate=rates[i], white_border=runner.white_border)
    for i, _, _ in items:  # alone: as the single call runs it
        if out[i] is None:
            out[i] = runner.run(prepared, E=E, tau=tau, radius=radii[i],
                                recurrence_rate=rates[i], theiler=theiler, l_min=l_min,
                                v_min=v_min, w_min=w_min)
    return out  # type: ignore[return-value]


def _rate_thresholds(radii: Sequence[float | None], rates: Sequence[float | None],
                     raw: np.ndarray, E: int, tau: int, metric: str, dt: np.dtype,
                     bes: list[Any], rule: str) -> list[Any]:
    """The radius and thresholds of each rate given (where its radius is None), as the
    single call finds them (:func:`pyedmcl.rqa.radius.rate_threshold`), the distances
    searched computed once for all of them."""
    from .radius import rate_thresholds

    qs = [q for r, q in zip(radii, rates, strict=True) if q is not None]
    for r, q in zip(radii, rates, strict=True):  # the single call's check of the choice
        if q is not None and r is not None:
            _resolve_thresholds(r, q, raw, None, E, tau, metric, dt, bes, rule)
    if not qs:
        return []
    return rate_thresholds(raw, None, [check_rate(q) for q in qs], E=E, tau=tau,
                           metric=metric, dtype=dt, backend=bes[0], rule=rule)


def _one_pass(runner: Any, xs: np.ndarray, spec: LineSpec, part: list[tuple[int, Any, Any]],
              n: int, w: int, edge: int | None) -> list[Any] | None:
    """The histograms of ``part``'s thresholds (ascending) from one pass, or None where
    the device's path cannot take several (they then run one by one)."""
    ex = part[0][2]
    thr = np.array([th.thr for _, th, _ in part], dtype=xs.dtype)
    ts = Thresholds(thr) if ex is None else Thresholds(
        thr, np.array([e.thr64 for _, _, e in part], dtype=np.float64),
        np.array([e.b for _, _, e in part], dtype=np.float32))
    kmin = max(w, 1)
    try:
        with keeping_buffers(runner.bes[0]):  # the K-fold arrays of the last pass again
            return detect_lines_k(runner.bes[0], xs, xs, ts,
                                  spec=dataclasses.replace(spec, nthr=len(part)), n_rows=n,
                                  n_cols=n, diag_ranges=[(kmin, n)] if kmin < n else [],
                                  w=w, edge=edge, symmetric=True, exact=ex)
    except PathUnsupported:
        return None
