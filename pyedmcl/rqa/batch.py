"""RQA of many series in one call: every EEG channel, every pixel of a cube.

:func:`rqa_batch` validates the options and picks the device once. Its default path
(``method="batched"``, :mod:`pyedmcl.rqa.batch_lines`) takes every series through the
device in two launches per histogram size class, one work-group per series walking its
whole recurrence matrix (the rqa_lines family's batch modes,
:mod:`pyedmcl.rqa.batch_kernels`), with the host work (float32 preparation, exact-redo
bounds, layout, measures) vectorised over the series of one length; each row equals ``pe.rqa`` of that series bit for bit (the same
cell decisions, lines and measures). Series that path does not take run one at a time
through the very path :func:`pyedmcl.rqa.core.rqa` takes (:class:`Runner`): those longer
than the batch kernels' local histograms hold, and float32 series that ``pe.rqa`` would
run in float64. ``method="series"`` runs every series so (programs built once, options
checked once, the D&R runs' buffers from one pool, :func:`pyedmcl.rqa.dnr.reusing_buffers`);
``method="packed"`` lays series of one length end to end in one band pass
(:mod:`pyedmcl.rqa.batch_packed`). With ``out``, ``block_series``, ``devices`` or
``scheduler`` (or a lazy input) the series run in blocks
(:mod:`pyedmcl.rqa.batch_scale`), each block one call of :func:`rqa_batch` by the same
method.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._outputs import locks_output
from ..validation import (
    check_embedding,
    check_int,
    check_metric,
)
from .batch_inputs import (
    METHODS,
    Columns,
    as_columns,
    check_threshold_choice,
    is_lazy,
    per_series,
    window_columns,
)
from .batch_result import EXTRA, INTEGER
from .batch_result import constant_note as _constant_note
from .batch_result import dataset as _dataset
from .core import (
    _backends_and_dtype,
    _check_common,
    _check_E_tau,
    _rqa_prepared,
    centring,
    check_radius,
    check_rate,
)
from .dnr import reusing_buffers
from .job import RqaJob
from .measures import MEASURES
from .result import RQAResult
from .threshold import check_threshold_rule


class Runner:
    """Validated options shared by every series of a batch or grid; :meth:`run` gives one
    series' :class:`RQAResult` exactly as :func:`pyedmcl.rqa.core.rqa` would."""

    def __init__(self, *, metric: str, theiler_scope: str, white_border: bool,
                 threshold_rule: str, dtype: Any, device: Any, backend: str | None,
                 edge: int | None = None, order: str = "row") -> None:
        self.metric = check_metric(metric)
        self.rule = check_threshold_rule(threshold_rule)
        self.bes, self.dt = _backends_and_dtype(device, None, backend, dtype)
        self.theiler_scope, self.white_border = theiler_scope, bool(white_border)
        self.edge, self.order = edge, order

    def prepare(self, s: np.ndarray) -> tuple[np.dtype, np.ndarray, np.ndarray]:
        """The working dtype and values of series ``s`` (float32: centred; float64 where
        float32 cannot hold it, warned), as :func:`rqa` prepares them, and ``s`` itself
        (what the exact float64 decisions read)."""
        prep = centring([s], ["x"], self.dt, self.bes, common=False, what="rqa")
        return prep.dtype, prep.series[0], s

    def run(self, prepared: tuple[np.dtype, np.ndarray, np.ndarray], *, E: int, tau: int,
            radius: Any, recurrence_rate: Any, theiler: Any, l_min: Any = 2,
            v_min: Any = 2, w_min: Any = 2) -> RQAResult:
        """One series' RQA from its :meth:`prepare`d values."""
        dt, xs, raw = prepared
        n = check_embedding(xs.size, E, tau, "x")
        l_min, v_min, w_min, theiler, edge = _check_common(
            l_min, v_min, w_min, theiler, self.theiler_scope, self.order, self.edge, n)
        return _rqa_prepared(xs, dt, self.bes, RqaJob(
            E=E, tau=tau, n=n, radius=radius, recurrence_rate=recurrence_rate,
            metric=self.metric, theiler=theiler, theiler_scope=self.theiler_scope,
            l_min=l_min, v_min=v_min, w_min=w_min, white_border=self.white_border, edge=edge,
            order=self.order, params=None, threshold_rule=self.rule), raw=raw)


def row_of(res: RQAResult, n_samples: int) -> dict[str, Any]:
    row: dict[str, Any] = {k: res.measures[k] for k in MEASURES}
    row.update(n_recurrences=int(res.n_recurrences), n_cells=int(res.n_cells),
               radius=float(res.radius), N=int(n_samples),
               n_points=int(res.settings.get("n_points", 0)))
    return row


@locks_output("out", what="rqa_batch output")
def rqa_batch(X: Any, *, E: int = 1, tau: int = 1, radius: Any = None,
              recurrence_rate: Any = None, metric: str = "euclidean", theiler: int = 1,
              l_min: int = 2, v_min: int = 2, w_min: int = 2, dtype: Any = "float32",
              theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
              backend: str | None = None, threshold_rule: str = "distance",
              window: int | None = None, step: int | None = None,
              method: str = "batched", allow_irregular: bool = False,
              out: str | Path | None = None, block_series: int | None = None,
              overwrite: bool = False, progress: bool | None = None,
              scheduler: Any = None, n_workers: int = 2, devices: Any = None) -> Any:
    """RQA of every series of ``X``: one row per series, each equal to :func:`pyedmcl.rqa`
    of that series bit for bit.

    ``X``: time down the rows, one series per column (as ``xmap``): a NumPy array
    ``(T, N)`` (or ``(T,)``), a pandas DataFrame (one column per series), or an
    ``xarray.DataArray`` with a ``time`` dimension, every other dimension kept
    (``(time, lat, lon)``: one series per pixel). Series of different lengths are
    NaN-padded at the end (trailing NaN dropped per series; a NaN before a series' last
    value is refused). A time axis must strictly increase and be equally spaced
    (``allow_irregular=True``: treat the rows as equally spaced), as in
    :mod:`pyedmcl.labels`.

    ``radius``: one radius, or one per series (a sequence of ``N``). ``recurrence_rate``:
    one rate (or one per series); the radius is then found per series (column
    ``radius``). Other options as :func:`pyedmcl.rqa`. ``window``/``step``: windowed
    RQA of each series, the rows of :func:`pyedmcl.rqa` with ``window`` (each equal to
    ``pe.rqa`` of the window's samples) indexed by ``(series, start, end)``.

    Returns a ``pandas.DataFrame`` indexed by the column names (positions for NumPy),
    with every measure, ``n_recurrences``, ``n_cells``, ``radius``, ``N`` (the series'
    samples) and ``n_points`` (embedded points); for a DataArray an ``xarray.Dataset`` of
    those over the non-time dimensions (without ``window``). Constant series are warned
    of once (``attrs["notes"]``).

    ``method``: ``"batched"`` (default), every series in two launches, one work-group
    per series (:mod:`pyedmcl.rqa.batch_lines`; series longer than the device's local
    histograms hold, 4,095 embedded points on most devices, and float32 series that
    ``pe.rqa`` runs in float64 run one at a time); ``"series"``, one Divide & Recombine
    run per series (programs built once, options checked once); ``"packed"``, series of
    equal length laid end to end and analysed in one band pass
    (:mod:`pyedmcl.rqa.batch_packed`; needs one fixed radius for all series; a length
    held by one series only runs on its own). All give the same rows; speed:
    ``bench/bench_rqa_batch.py`` and ``docs/rqa_batch.md``. With ``window``:
    ``"batched"`` takes every window of every series as a series of its own;
    ``"series"`` runs ``pe.rqa(..., window=)`` per series; ``"packed"`` is refused.

    In blocks of ``block_series`` series (:mod:`pyedmcl.rqa.batch_scale`; each block one
    call of this function with the same ``method``: the same rows), when one of these is
    given: ``out``, a ``.zarr`` path the rows stream into block by block (rerunning the
    same call resumes it, computing again any block that fails its checksum; other
    parameters or data are refused unless ``overwrite``, which replaces only a store
    pyedmcl wrote; :func:`rqa_batch_open` reads it back); ``devices``, several devices of
    this node (a list or ``"nvidia:0,nvidia:1"``), one thread each; ``scheduler``, a Dask
    scheduler address, ``"local"`` (a LocalCluster of ``n_workers`` processes: put the
    call under ``if __name__ == "__main__":``) or a ``distributed.Client``, blocks as
    tasks, worker ``i`` on device ``devices[i % len(devices)]``. A dask array, or a
    DataArray backed by one, always runs in blocks, read one block at a time (on a
    cluster, by the workers). ``progress``: a bar over the blocks (None: in a notebook
    only). Not with ``window``.
    """
    if out is not None or block_series is not None or scheduler is not None \
            or devices is not None or is_lazy(X):
        from .batch_scale import rqa_batch_blocks

        return rqa_batch_blocks(
            rqa_batch, X, radius=radius, recurrence_rate=recurrence_rate, out=out,
            block_series=block_series, overwrite=overwrite, progress=progress,
            scheduler=scheduler, n_workers=n_workers, devices=devices, device=device,
            backend=backend, allow_irregular=allow_irregular, window=window, step=step,
            E=E, tau=tau, metric=metric, theiler=theiler, l_min=l_min, v_min=v_min,
            w_min=w_min, dtype=dtype, theiler_scope=theiler_scope, white_border=white_border,
            threshold_rule=threshold_rule, method=method)
    import pandas as pd

    cols = as_columns(X, "X", bool(allow_irregular))
    check_threshold_choice(radius, recurrence_rate)
    radii = per_series(radius, len(cols.names), "radius", check_radius)
    rates = per_series(recurrence_rate, len(cols.names), "recurrence_rate", check_rate)
    E, tau = _check_E_tau(E, tau)
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not supported; allowed: "
                         f"{', '.join(map(repr, METHODS))}")
    note = _constant_note(cols)
    if window is not None or step is not None:
        if method == "packed":
            raise ValueError("method='packed' is for whole series; window= runs per series")
        if method == "batched":
            runner = Runner(metric=metric, theiler_scope=theiler_scope,
                            white_border=white_border, threshold_rule=threshold_rule,
                            dtype=dtype, device=device, backend=backend)
            return _windows_batched(runner, cols, radii, rates, note, E=E, tau=tau,
                                    theiler=theiler, window=window, step=step,
                                    minima=dict(l_min=l_min, v_min=v_min, w_min=w_min))
        return _windowed(cols, radii, rates, note, E=E, tau=tau, metric=metric,
                         theiler=theiler, l_min=l_min, v_min=v_min, w_min=w_min, dtype=dtype,
                         theiler_scope=theiler_scope, white_border=white_border,
                         device=device, backend=backend, threshold_rule=threshold_rule,
                         window=window, step=step)
    runner = Runner(metric=metric, theiler_scope=theiler_scope, white_border=white_border,
                    threshold_rule=threshold_rule, dtype=dtype, device=device,
                    backend=backend)
    rows, taken = _rows(runner, cols, radii, rates, method, E=E, tau=tau, theiler=theiler,
                        l_min=l_min, v_min=v_min, w_min=w_min)
    df = pd.DataFrame(_columns(rows, taken), copy=False)
    if cols.dims is not None:
        return _dataset(df, cols, note)
    df.index = pd.Index(cols.names, name="series")
    if note:
        df.attrs["notes"] = (note,)
    return df


def _rows(runner: Runner, cols: Columns, radii: list[Any], rates: list[Any], method: str, *,
          E: int, tau: int, theiler: Any, **minima: Any) -> tuple[list[Any], Any]:
    """Every series' row: the batched path's columns (``taken``) and the others' rows
    (dicts; None where ``taken`` has it), each series run on its own by :class:`Runner`
    where the method's path does not take it."""
    S = len(cols.names)
    rows: list[dict[str, Any] | None] = [None] * S
    taken = None
    todo: Any = range(S)
    if method == "batched":
        from .batch_lines import batched

        taken = batched(runner, cols, radii, rates, E=E, tau=tau, theiler=theiler, **minima)
        todo = taken.rest
    elif method == "packed":
        common = radii[0] if radii[0] is not None and all(r == radii[0] for r in radii) \
            else None
        if common is None:
            raise ValueError("method='packed' needs one fixed radius for every series "
                             "(radius= a number); per-series radii and recurrence_rate run "
                             "per series")
        _pack(runner, [runner.prepare(s) for s in cols.series], cols.names, rows, E=E,
              tau=tau, radius=check_radius(common), theiler=theiler, **minima)
        todo = [j for j in range(S) if rows[j] is None]
    with reusing_buffers():  # one shape's histograms and carryovers allocated once
        for j in todo:
            s = cols.panel[j, :cols.lengths[j]]  # checked as as_series checks one
            try:  # prepared one at a time: one series' working copy at once
                res = runner.run(runner.prepare(s), E=E, tau=tau, radius=radii[j],
                                 recurrence_rate=rates[j], theiler=theiler, **minima)
            except ValueError as exc:  # say which series
                raise ValueError(f"X column {cols.names[j]!r}: {exc}") from None
            rows[j] = row_of(res, s.size)
    return rows, taken


def _columns(rows: list[dict[str, Any] | None], taken: Any) -> dict[str, np.ndarray]:
    """The batch frame's columns: the batched path's (``taken``, its positions ``idx``)
    and the rows of the others (dicts)."""
    S = len(rows)
    out = {c: np.empty(S, np.int64 if c in INTEGER else np.float64) for c in (*MEASURES, *EXTRA)}
    if taken is not None and taken.idx.size:
        for c, a in out.items():
            a[taken.idx] = taken.columns[c]
    for j in (j for j, row in enumerate(rows) if row is not None):
        for c, a in out.items():
            a[j] = rows[j][c]
    return out


def _pack(runner: Runner, prepared: list[tuple[np.dtype, np.ndarray, np.ndarray]],
          names: list[Any], rows: list[dict[str, Any] | None], *, E: int, tau: int,
          radius: float, theiler: Any, **minima: Any) -> None:
    """Fill ``rows`` of the series that go into packs (equal length, prepared alike)."""
    from .batch_packed import packable, packed_rows

    groups: dict[tuple[str, int], list[int]] = {}
    for j, p in enumerate(prepared):
        groups.setdefault((str(p[0]), p[1].size), []).append(j)
    for (_, T), idx in groups.items():
        n = T - (E - 1) * tau
        if not packable(n, check_int(theiler, "theiler", 0), len(idx)):
            continue
        try:
            got = packed_rows(runner, [prepared[j] for j in idx], E=E, tau=tau,
                              radius=radius, theiler=theiler, **minima)
        except ValueError as exc:  # (a minimum beyond n): say which series
            raise ValueError(f"X column {names[idx[0]]!r}: {exc}") from None
        for j, row in zip(idx, got, strict=True):
            row.update(radius=float(radius), N=T, n_points=n)
            rows[j] = row


def _windows_batched(runner: Runner, cols: Columns, radii: list[Any], rates: list[Any],
                     note: str | None, *, E: int, tau: int, theiler: Any, window: Any,
                     step: Any, minima: dict[str, Any]) -> Any:
    """Windowed RQA of every series, every window of every series one series of the
    batched path (:func:`window_columns`): rows as :func:`_windowed`'s, each equal to
    ``pe.rqa`` of the window's samples (which ``pe.rqa(..., window=)`` gives too)."""
    import pandas as pd

    wcols, owners = window_columns(cols, E, tau, window, step, minima)
    at = [j for j, _, _ in owners]
    rows, taken = _rows(runner, wcols, [radii[j] for j in at], [rates[j] for j in at],
                        "batched", E=E, tau=tau, theiler=theiler, **minima)
    out = _columns(rows, taken)
    keys = [str(n) if isinstance(n, tuple) else n for n in cols.names]
    index = pd.MultiIndex.from_tuples([(keys[j], a, b) for j, a, b in owners],
                                      names=["series", "start", "end"])
    df = pd.DataFrame({c: out[c] for c in (*MEASURES, "n_recurrences", "n_cells", "radius")},
                      index=index)
    if note:
        df.attrs["notes"] = (note,)
    return df


def _windowed(cols: Columns, radii: list[Any], rates: list[Any], note: str | None,
              **kw: Any) -> Any:
    """Windowed RQA of every series: :func:`pyedmcl.rqa` with ``window`` per series."""
    import pandas as pd

    from .core import rqa

    parts = []
    for s, label, r, q in zip(cols.series, cols.names, radii, rates, strict=True):
        try:
            part = rqa(s, radius=r, recurrence_rate=q, **kw)
        except ValueError as exc:
            raise ValueError(f"X column {label!r}: {exc}") from None
        parts.append(part)
    keys = [str(n) if isinstance(n, tuple) else n for n in cols.names]
    df = pd.concat(parts, keys=keys, names=["series"])
    if note:
        df.attrs["notes"] = (note,)
    return df
