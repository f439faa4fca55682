"""Many series in two launches: :func:`pyedmcl.rqa_batch`'s default path.

Every series of a batch goes through the device at once (kernel family
:mod:`pyedmcl.rqa.batch_kernels`): the series laid end to end with their offsets,
lengths and thresholds, one work-group per series walking its whole recurrence matrix
(columns in one launch, diagonals in the other), each series' histograms reduced on the
device to what its measures take. The host work is vectorised over the series of one
length (rows of one 2-D array) and pipelined over packs of series: while the calling
thread prepares a pack (the float32 preparation, the exact-redo bounds), one reader
thread uploads and launches the one before and waits on the device, and a few threads
compute the measures of the launches already read.

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
* Measures: from what the device sums per series (:func:`measures_of_counts`), each
  row equal to :func:`~pyedmcl.rqa.measures.compute_measures` of its histograms.

Series longer than the device's local histograms hold
(:func:`pyedmcl.rqa.batch_kernels.max_points`), and the float32 series that fall
back to float64, run one at a time (:class:`pyedmcl.rqa.batch.Runner`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._bands import cast_rows, map_row_chunks
from .._precision import (
    _CHUNK_VALUES,
    FLOAT32_MAX_INPUT,
    FLOAT32_MIN_SPREAD,
    MAX_MERGED_FRACTION,
    _affine,
    _merged_bound_slab,
    standardises,
)
from ..kernels.rqa_lines import LineSpec
from ..validation import check_embedding
from . import batch_kernels as kb
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


def batched(runner: Any, cols: Any, radii: list[Any], rates: list[Any], *, E: int, tau: int,
            theiler: Any, l_min: Any, v_min: Any, w_min: Any) -> Taken:
    """The rows of the series of ``cols`` (:class:`pyedmcl.rqa.batch_inputs.Columns`,
    ``radii[j]`` or ``rates[j]`` each) the batched path takes; errors name the series.

    A pipeline over packs of at most :data:`PIPELINE_VALUES` values: this thread prepares
    a pack (:func:`_prepared`, the exact-redo bounds) while one reader thread uploads
    and launches the pack before it and waits on the device, and :data:`MEASURE_THREADS`
    threads compute the measures of the launches read (:class:`_Pipeline`)."""
    T, names = cols.lengths, cols.names
    S, span = T.size, (E - 1) * tau
    n = T - span
    mins = _validated(runner, T, names, E, tau, l_min, v_min, w_min, theiler)
    w = mins[3]
    be, dt = runner.bes[0], runner.dt
    ok = n <= kb.max_points(be.info)
    cand = np.flatnonzero(ok)
    if not cand.size:
        return Taken(cand, {}, list(range(S)))
    radius, thr, thr64 = np.empty(S), np.empty(S, dt), np.empty(S)
    radius[cand], thr[cand], thr64[cand] = _thresholds(runner, cols, cand, radii, rates, E,
                                                       tau, dt)
    spec = LineSpec(E, tau, runner.metric, "double" if dt == np.float64 else "float",
                    theiler_matrix=(runner.theiler_scope == "matrix" and w > 0),
                    white_border=runner.white_border, fma=(runner.rule == "squared"),
                    exact=wanted(dt))
    cells = n * n
    if spec.theiler_matrix:
        cells = cells - np.array([band_cells(int(m), w) for m in n], dtype=np.int64)
    pipe = _Pipeline(be, spec, n, thr, thr64, w, mins[:3], cells)
    taken = np.zeros(S, bool)
    with pipe:
        for pack in _packs(T, cand, span):
            pos, raw, z, A = _prepared_pack(dt, cols, pack)
            if pos.size:
                taken[pos] = True
                exb = error_bounds(A, thr64[pos], thr[pos], runner.metric, E) \
                    if spec.exact else None
                pipe.put(pos, raw, z, exb)
    idx = np.flatnonzero(taken)
    out = {k: v[idx] for k, v in pipe.columns().items()}
    out.update(radius=radius[idx], N=T[idx], n_points=n[idx])
    return Taken(idx, out, np.flatnonzero(~taken).tolist())


def _validated(runner: Any, T: np.ndarray, names: list[Any], E: int, tau: int, l_min: Any,
               v_min: Any, w_min: Any, theiler: Any) -> tuple[int, int, int, int]:
    """``(l_min, v_min, w_min, theiler)`` checked for every series of ``T`` samples as
    :meth:`pyedmcl.rqa.batch.Runner.run` checks one (once per distinct length); the
    error of the first series that fails, named."""
    bad: dict[int, str] = {}
    out = None
    for t in np.unique(T).tolist():
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


def _prepared(dt: np.dtype, raw: np.ndarray, lo: np.ndarray, hi: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Kernel inputs of series of one length (rows of ``raw``; ``lo``/``hi``: each row's
    extremes), each as :func:`pyedmcl.rqa.core.rqa` prepares it (float32: centred by its
    own shift, cast; float64: as given): which rows float32 holds (the others, which
    :func:`pyedmcl._precision.prepare` would run in float64 with a warning, go the
    per-series way), the inputs, and (float32) each row's largest magnitude, from its
    extremes (casts and subtractions of one value keep the order of a row's values)."""
    k = raw.shape[0]
    if dt == np.float64:
        return np.ones(k, bool), raw, None
    if not standardises(dt):
        c = cast_rows(raw, np.float32)
        return np.ones(k, bool), c, np.maximum(hi.astype(np.float32), -lo.astype(np.float32)
                                               ).astype(np.float64)
    shift, spread, lost, c = _centred_float32(raw)
    zl, zh = lo - shift, hi - shift  # each row's extremes of z, exactly
    with np.errstate(invalid="ignore"):
        fail = (np.maximum(zh, -zl) > FLOAT32_MAX_INPUT) | \
            ((spread > 0) & (spread < FLOAT32_MIN_SPREAD)) | (lost > MAX_MERGED_FRACTION)
    A = np.maximum(zh.astype(np.float32), -zl.astype(np.float32)).astype(np.float64)
    return ~fail, c, A


def _centred_float32(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row of ``raw`` centred as :func:`pyedmcl._precision.prepare` centres one series
    (:func:`~pyedmcl._precision._affine`'s shift, ``z = x - shift``) and cast to float32,
    and the merge check of :func:`~pyedmcl._precision.merged_beyond` on each: per row the
    shift, the spread, a merged fraction (exact where it exceeds the limit, a bound at
    most the limit elsewhere) and the float32 rows. Chunk by chunk of rows, each through
    every step while in cache (the centred float64 rows are never made: each row's
    subtraction is cast to float32 in the loop that computes it, the float64 difference
    recomputed only for the rows the merge check must sort exactly), by bands of rows on
    threads; every row alone, so the same values as one series' call."""
    k, t = raw.shape
    c = np.empty((k, t), np.float32)
    shift, spread, lost = np.empty(k), np.empty(k), np.empty(k)

    def chunk(r: slice) -> None:
        f = _affine(raw[r], False, None)
        m = f.shift[:, None]
        np.subtract(raw[r], m, out=c[r], casting="same_kind")  # z's float32 cast
        shift[r], spread[r] = f.shift, f.spread
        lost[r] = _merged_bound_slab(lambda o: raw[r][o] - m[o], c[r], MAX_MERGED_FRACTION)[0]

    with np.errstate(invalid="ignore", over="ignore"):
        map_row_chunks(chunk, raw, _CHUNK_VALUES)
    return shift, spread, lost, c


def _thresholds(runner: Any, cols: Any, idx: np.ndarray, radii: list[Any], rates: list[Any],
                E: int, tau: int, dt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per series ``idx`` of ``cols``: the radius (given, or found for its rate), the
    kernels' threshold in ``dt`` and the float64 path's, as
    :func:`pyedmcl.rqa.core._resolve_thresholds` gives them (a radius's once for all
    series that share it)."""
    S = idx.size
    if rates[0] is None:  # radii (rqa_batch takes radii or rates, never both)
        radius = np.asarray(radii, dtype=np.float64)[idx]
        u, inv = np.unique(radius, return_inverse=True)
        t = np.array([[kernel_threshold(float(r), runner.metric, d, runner.rule)
                       for d in (dt, np.float64)] for r in u.tolist()]).reshape(-1, 2)
        return radius, t[inv, 0].astype(dt), t[inv, 1]
    radius, thr, thr64 = np.empty(S), np.empty(S), np.empty(S)
    for k, j in enumerate(idx.tolist()):
        try:
            th = _resolve_thresholds(None, rates[j], cols.panel[j, :cols.lengths[j]], None,
                                     E, tau, runner.metric, dt, runner.bes, runner.rule)
        except ValueError as exc:
            raise ValueError(f"X column {cols.names[j]!r}: {exc}") from None
        radius[k], thr[k], thr64[k] = th.radius, th.thr, th.thr64
    return radius, thr.astype(dt), thr64


def _packs(T: np.ndarray, cand: np.ndarray, span: int
           ) -> list[list[tuple[int, np.ndarray]]]:
    """The series ``cand`` (positions; ``T`` samples each) in packs of at most
    :data:`PIPELINE_VALUES` laid-out values (the kernels' offsets are 32-bit), each a list
    of ``(length, positions)``: series of one histogram size class share packs, and a
    length's series keep their order."""
    room0 = min(PIPELINE_VALUES, kb.MAX_VALUES - kb.LEAD - kb.TAIL)
    by_class: dict[int, list[int]] = {}
    for t in np.unique(T[cand]).tolist():
        by_class.setdefault(kb.hist_bins_for(t - span), []).append(t)
    packs: list[list[tuple[int, np.ndarray]]] = []
    for c in sorted(by_class):
        packs.append([])
        room = room0
        for t in by_class[c]:
            idx = cand[T[cand] == t]
            stride = -(-t // kb.ALIGN) * kb.ALIGN
            a = 0
            while a < idx.size:
                take = min(idx.size - a, room // stride)
                if take == 0:
                    packs.append([])
                    room = room0
                    continue
                packs[-1].append((t, idx[a:a + take]))
                room -= take * stride
                a += take
    return [p for p in packs if p]


def _prepared_pack(dt: np.dtype, cols: Any, pack: list[tuple[int, np.ndarray]]
                   ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]:
    """One pack's series as the kernels take them (:func:`_prepared`, per length): the
    positions float32 holds (the others go the per-series way) and, per length, their
    raw rows, kernel inputs and (float32) largest magnitudes, concatenated."""
    pos, raws, zs, As = [], [], [], []
    for t, idx in pack:
        j0 = int(idx[0])
        whole = t == cols.panel.shape[1]
        if int(idx[-1]) - j0 == idx.size - 1:  # consecutive series: a view of their rows
            raw = cols.panel[j0:j0 + idx.size] if whole else cols.panel[j0:j0 + idx.size, :t]
        else:
            raw = cols.panel[idx, :t]
        keep, z, A = _prepared(dt, raw, cols.lo[idx], cols.hi[idx])
        if not keep.all():
            idx, raw, z, A = idx[keep], raw[keep], z[keep], None if A is None else A[keep]
        if idx.size:
            pos.append(idx)
            raws.append(raw)
            zs.append(z)
            As.append(np.zeros(idx.size) if A is None else A)
    if not pos:
        return np.zeros(0, np.int64), [], [], np.zeros(0)
    return np.concatenate(pos), raws, zs, np.concatenate(As)


class _Pipeline:
    """The device and measure side of :func:`batched`: :meth:`put` hands a prepared
    pack to one reader thread (uploads, launches, reads: the only thread that uses the
    device here), which hands each launch's counts to :data:`MEASURE_THREADS` threads;
    at most :data:`PACKS_AHEAD` packs wait for the reader (their host arrays held).
    :meth:`columns` gives every measure, ``n_recurrences`` and ``n_cells`` by series
    position (rows of the series put)."""

    def __init__(self, be: Any, spec: LineSpec, n: np.ndarray, thr: np.ndarray,
                 thr64: np.ndarray, w: int, mins: tuple[int, int, int], cells: np.ndarray):
        self.be, self.spec, self.n, self.thr, self.thr64 = be, spec, n, thr, thr64
        self.w, self.mins, self.cells = w, mins, cells
        self.params = kb.batch_params(be.info)
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="pyedmcl-reader")
        self.measures = ThreadPoolExecutor(MEASURE_THREADS, thread_name_prefix="pyedmcl-measures")
        self.packs: list[Future] = []
        self.launches: list[tuple[np.ndarray, Future]] = []

    def __enter__(self) -> _Pipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.reader.shutdown(wait=True, cancel_futures=exc[0] is not None)
        self.measures.shutdown(wait=True, cancel_futures=exc[0] is not None)

    def put(self, pos: np.ndarray, raw: list[np.ndarray], z: list[np.ndarray],
            exb: np.ndarray | None) -> None:
        if len(self.packs) >= PACKS_AHEAD:
            self.packs[-PACKS_AHEAD].result()  # (raises the reader's error here)
        self.packs.append(self.reader.submit(self._read, pos, raw, z, exb))

    def _read(self, pos: np.ndarray, raw: list[np.ndarray], z: list[np.ndarray],
              exb: np.ndarray | None) -> None:
        n = self.n[pos]
        packed = kb.Packed(z, kb.block_offsets(z)[0], n, self.thr[pos])
        if exb is not None:
            packed.xs64, packed.thr64, packed.exb = raw, self.thr64[pos], exb
        for s0, got in kb.chunk_counts(self.be, self.spec, self.params, packed, w=self.w,
                                       hstride=int(n.max()) + 1, minima=self.mins):
            at = pos[s0:s0 + got.nrec.size]
            self.launches.append((at, self.measures.submit(
                _launch_columns, got, self.n[at], self.w, self.mins, self.cells[at])))

    def columns(self) -> dict[str, np.ndarray]:
        for f in self.packs:
            f.result()
        out: dict[str, np.ndarray] = {}
        for at, fut in self.launches:
            for k, v in fut.result().items():
                if k not in out:
                    out[k] = np.empty(self.n.size, v.dtype)
                out[k][at] = v
        return out


def _launch_columns(got: Any, n: np.ndarray, w: int, mins: tuple[int, int, int],
                    cells: np.ndarray) -> dict[str, np.ndarray]:
    """One launch's columns: its measures, ``n_recurrences`` and ``n_cells``."""
    cols = measures_of_counts(got, n, w, mins, cells)
    cols.update(n_recurrences=got.nrec, n_cells=cells)
    return cols


#: laid-out values of one pack of the pipeline (:func:`batched`): small enough that a
#: pack's preparation, uploads and measures overlap the others', large enough that its
#: launches fill a device
PIPELINE_VALUES = 1 << 24
#: prepared packs waiting for the reader at most
PACKS_AHEAD = 2
#: threads computing launches' measures beside the reader (each also spreads its
#: entropies over :func:`pyedmcl._bands.map_pieces`' pool)
MEASURE_THREADS = 6


def measures_of_counts(c: Any, n: np.ndarray, w: int, mins: tuple[int, int, int],
                       cells: np.ndarray) -> dict[str, np.ndarray]:
    """Every measure of each series from its :class:`~pyedmcl.rqa.batch_kernels.Counts`
    (``n`` embedded points, Theiler window ``w``, ``mins`` = l_min, v_min, w_min, ``cells``
    RR's denominators), bit for bit :func:`~pyedmcl.rqa.measures.compute_measures` of the
    histograms ``pe.rqa`` counts: the upper diagonals doubled (their lower twins) and, with
    ``w = 0``, the main diagonal added as one line of ``n``
    (:func:`pyedmcl.rqa.core.mirrored_diagonals`)."""
    kinds = []
    tail = np.zeros(c.count.shape, bool)
    for q, lm in enumerate(mins):
        st = c.stats[:, q]
        k = {"points_min": st[:, 0], "points_all": st[:, 1], "lines_min": st[:, 2],
             "max": st[:, 3]}
        if q == 0:
            main = np.full(n.size, w == 0)
            tail[:, 0] = main & (n >= lm)
            k = {"points_min": 2 * k["points_min"] + n * tail[:, 0],
                 "points_all": 2 * k["points_all"] + n * main,
                 "lines_min": 2 * k["lines_min"] + tail[:, 0],
                 "max": np.where(main, n, k["max"])}
        kinds.append(k)
    # the three kinds in one call: their values, end to end, fill c.vals
    ent = entropies(c.vals, c.start, c.count,
                    np.stack([k["lines_min"] for k in kinds], axis=1),
                    np.array([2.0, 1.0, 1.0]), tail)
    for q, k in enumerate(kinds):
        k["entropy"] = ent[:, q]
    return measures_of_stats(c.nrec, cells, *kinds)
