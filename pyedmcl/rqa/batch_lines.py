"""Many series in two launches: :func:`pyedmcl.rqa_batch`'s default path.

Every series of a batch goes through the device at once (kernel family
:mod:`pyedmcl.kernels.rqa_lines_batch`): the series laid end to end with their offsets,
lengths and thresholds, one work-group per series walking its whole recurrence matrix
(columns in one launch, diagonals in the other), each series' histograms read back as a
row of one array. The host work per series is vectorised over the batch: the float32
preparation, the exact-redo bounds, the measures.

Each row equals ``pe.rqa`` of its series bit for bit:

* Working values: in float32 each series is centred as ``pe.rqa`` centres it (its own
  shift, :func:`pyedmcl._precision._standardise` row by row, checked per series as
  :func:`pyedmcl._precision.prepare` checks one); a series float32 cannot hold (beyond
  float32's range, or merging values) goes the per-series way, which warns and runs it in
  float64, as ``pe.rqa`` does.
* Cells: the batch kernels decide a cell by the single-series kernels' code with the
  series' own float32 and float64 thresholds and bound (:mod:`pyedmcl.rqa.exact`, from
  the series' own largest magnitude): every cell is decided as the float64 path decides
  it.
* Lines: a column is walked over all rows of its series and a diagonal to its series'
  edge, so no run crosses into another series, and the Theiler window is measured on
  each series' own diagonals; the upper diagonals are doubled and the main one added on
  the host as :func:`pyedmcl.rqa.core.mirrored_diagonals` does.
* Measures: :func:`pyedmcl.rqa.measures.measures_of_rows`, each row equal to
  :func:`~pyedmcl.rqa.measures.compute_measures` of that row.

Series longer than the device's local histograms hold
(:func:`pyedmcl.kernels.rqa_lines_batch.max_points`), and the float32 series that fall
back to float64, run one at a time (:class:`pyedmcl.rqa.batch.Runner`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._precision import (
    FLOAT32_MAX_INPUT,
    FLOAT32_MIN_SPREAD,
    MAX_MERGED_FRACTION,
    _standardise,
    merged_beyond,
    standardises,
)
from ..kernels import rqa_lines_batch as kb
from ..kernels.rqa_lines import LineSpec
from ..validation import check_embedding
from .core import _check_common, _resolve_thresholds
from .exact import error_bounds, wanted
from .measures import entropies, measures_of_stats
from .result import band_cells
from .threshold import kernel_threshold


class Taken:
    """What the batched path computed: the positions of its series in the batch, their
    rows as columns (every measure, ``n_recurrences``, ``n_cells``, ``radius``, ``N``,
    ``n_points``), and the positions left to the per-series path."""

    def __init__(self, idx: np.ndarray, columns: dict[str, np.ndarray], rest: list[int]):
        self.idx, self.columns, self.rest = idx, columns, rest


def batched(runner: Any, series: list[np.ndarray], names: list[Any], radii: list[Any],
            rates: list[Any], *, E: int, tau: int, theiler: Any, l_min: Any, v_min: Any,
            w_min: Any) -> Taken:
    """The rows of every series of ``series`` (validated 1-D float64, ``radii[j]`` or
    ``rates[j]`` each) the batched path takes; errors name the series (``names``)."""
    span = (E - 1) * tau
    T = np.fromiter((s.size for s in series), np.int64, len(series))
    n = T - span
    mins = _validated(runner, T, names, E, tau, l_min, v_min, w_min, theiler)
    w = mins[3]
    be = runner.bes[0]
    ok = n <= kb.max_points(be.info)
    dt = runner.dt
    work: dict[int, np.ndarray] = {}  # position -> kernel input (working dtype)
    for t in np.unique(T[ok]):
        idx = np.flatnonzero(ok & (T == t))
        for j, z in zip(idx, _prepared(dt, [series[j] for j in idx]), strict=True):
            if z is not None:
                work[int(j)] = z
    idx = np.array(sorted(work), dtype=np.int64)
    rest = [j for j in range(len(series)) if j not in work]
    if not idx.size:
        return Taken(idx, {}, rest)
    radius, thr, thr64 = _thresholds(runner, [series[j] for j in idx],
                                     [names[j] for j in idx], [radii[j] for j in idx],
                                     [rates[j] for j in idx], E, tau, dt)
    spec = LineSpec(E, tau, runner.metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(runner.theiler_scope == "matrix" and w > 0),
                    white_border=runner.white_border, fma=(runner.rule == "squared"),
                    exact=wanted(dt))
    zs = [work[int(j)] for j in idx]
    exb = None
    if spec.exact:
        A = np.fromiter((float(np.max(np.abs(z))) for z in zs), np.float64, len(zs))
        exb = error_bounds(A, thr64, thr, runner.metric, E)
    cols = _lines(be, spec, zs, [series[j] for j in idx], n[idx], thr, thr64, exb, w,
                  mins[:3])
    cols.update(radius=radius, N=T[idx], n_points=n[idx])
    return Taken(idx, cols, rest)


def _validated(runner: Any, T: np.ndarray, names: list[Any], E: int, tau: int, l_min: Any,
               v_min: Any, w_min: Any, theiler: Any) -> tuple[int, int, int, int]:
    """``(l_min, v_min, w_min, theiler)`` checked for every series of ``T`` samples as
    :meth:`pyedmcl.rqa.batch.Runner.run` checks one (once per distinct length); the
    error of the first series that fails, named."""
    bad: dict[int, str] = {}
    out = None
    for t in np.unique(T):
        try:
            m = check_embedding(int(t), E, tau, "x")
            got = _check_common(l_min, v_min, w_min, theiler, runner.theiler_scope,
                                runner.order, runner.edge, m)
            out = got[:4] if out is None else out
        except ValueError as exc:
            bad[int(t)] = str(exc)
    if bad:
        j = int(np.flatnonzero(np.isin(T, list(bad)))[0])
        raise ValueError(f"X column {names[j]!r}: {bad[int(T[j])]}")
    assert out is not None
    return out


def _prepared(dt: np.dtype, rows: list[np.ndarray]) -> list[np.ndarray | None]:
    """Kernel inputs of series of one length, as :func:`pyedmcl.rqa.core.rqa` prepares
    each (float32: centred by its own shift, cast; float64: as given); None for a float32
    series :func:`pyedmcl._precision.prepare` would run in float64 (it then goes the
    per-series way, which warns as ``pe.rqa`` does)."""
    if dt == np.float64:
        return list(rows)
    if not standardises(dt):
        return [r.astype(dt) for r in rows]
    panel = np.stack(rows)
    aff, z, c = _standardise(panel, False, None, np.float32)
    with np.errstate(invalid="ignore"):
        top = np.fmax.reduce(np.abs(z), axis=1)
        spread = aff.spread if aff.spread is not None else z.std(axis=1)
        fail = (top > FLOAT32_MAX_INPUT) | ((spread > 0) & (spread < FLOAT32_MIN_SPREAD))
    fail |= merged_beyond(z, MAX_MERGED_FRACTION, c) > MAX_MERGED_FRACTION
    return [None if f else c[i] for i, f in enumerate(fail)]


def _thresholds(runner: Any, raws: list[np.ndarray], names: list[Any], radii: list[Any],
                rates: list[Any], E: int, tau: int, dt: np.dtype
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per series: the radius (given, or found for its rate), the kernels' threshold in
    ``dt`` and the float64 path's, as :func:`pyedmcl.rqa.core._resolve_thresholds` gives
    them (a radius's computed once for all series that share it)."""
    S = len(raws)
    radius, thr, thr64 = np.empty(S), np.empty(S), np.empty(S)
    cache: dict[float, tuple[float, float]] = {}
    for k, (raw, r, q) in enumerate(zip(raws, radii, rates, strict=True)):
        if r is not None:
            r = float(r)
            if r not in cache:
                cache[r] = (kernel_threshold(r, runner.metric, dt, runner.rule),
                            kernel_threshold(r, runner.metric, np.float64, runner.rule))
            radius[k], (thr[k], thr64[k]) = r, cache[r]
            continue
        try:
            th = _resolve_thresholds(None, q, raw, None, E, tau, runner.metric, dt,
                                     runner.bes, runner.rule)
        except ValueError as exc:
            raise ValueError(f"X column {names[k]!r}: {exc}") from None
        radius[k], thr[k], thr64[k] = th.radius, th.thr, th.thr64
    return radius, thr.astype(dt), thr64


def _lines(be: Any, spec: LineSpec, zs: list[np.ndarray], raws: list[np.ndarray],
           n: np.ndarray, thr: np.ndarray, thr64: np.ndarray, exb: np.ndarray | None,
           w: int, mins: tuple[int, int, int]) -> dict[str, np.ndarray]:
    """Every measure, ``n_recurrences`` and ``n_cells`` of every series from the batch
    launches (series of one histogram size class per launch)."""
    S = len(zs)
    cls = np.array([kb.hist_bins_for(int(m)) for m in n])
    params = kb.batch_params(be.info)
    parts = []
    for c in np.unique(cls):
        idx = np.flatnonzero(cls == c)
        soff, total = kb.layout(np.array([zs[i].size for i in idx]))
        packed = kb.Packed(kb.lay_out([zs[i] for i in idx], soff, total, spec.dtype), soff,
                           n[idx], thr[idx])
        if exb is not None:
            packed.xs64 = kb.lay_out([raws[i] for i in idx], soff, total, np.float64)
            packed.thr64, packed.exb = thr64[idx], exb[idx]
        got = kb.counts(be, spec, params, packed, w=w, hstride=int(n[idx].max()) + 1,
                        minima=mins)
        parts.append((idx, got))
    cells = n * n
    if spec.theiler_matrix:
        cells = cells - np.array([band_cells(int(m), w) for m in n], dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    for idx, got in parts:
        cols = measures_of_counts(got, n[idx], w, mins, cells[idx])
        cols.update(n_recurrences=got.nrec, n_cells=cells[idx])
        for k, v in cols.items():
            if k not in out:
                out[k] = np.empty(S, v.dtype)
            out[k][idx] = v
    return out


def measures_of_counts(c: Any, n: np.ndarray, w: int, mins: tuple[int, int, int],
                       cells: np.ndarray) -> dict[str, np.ndarray]:
    """Every measure of each series from its :class:`~pyedmcl.kernels.rqa_lines_batch.Counts`
    (``n`` embedded points, Theiler window ``w``, ``mins`` = l_min, v_min, w_min, ``cells``
    RR's denominators), bit for bit :func:`~pyedmcl.rqa.measures.compute_measures` of the
    histograms ``pe.rqa`` counts: the upper diagonals doubled (their lower twins) and, with
    ``w = 0``, the main diagonal added as one line of ``n``
    (:func:`pyedmcl.rqa.core.mirrored_diagonals`)."""
    kinds = []
    for q, lm in enumerate(mins):
        st = c.stats[:, q]
        k = {"points_min": st[:, 0], "points_all": st[:, 1], "lines_min": st[:, 2],
             "max": st[:, 3]}
        scale, tail = 1.0, None
        if q == 0:
            scale = 2.0
            main = np.full(n.size, w == 0)
            tail = main & (n >= lm)
            k = {"points_min": 2 * k["points_min"] + n * tail,
                 "points_all": 2 * k["points_all"] + n * main,
                 "lines_min": 2 * k["lines_min"] + tail,
                 "max": np.where(main, n, k["max"])}
        k["entropy"] = entropies(c.vals, c.start[:, q], c.count[:, q], k["lines_min"],
                                 scale, tail)
        kinds.append(k)
    return measures_of_stats(c.nrec, cells, *kinds)
