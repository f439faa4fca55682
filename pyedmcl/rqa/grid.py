"""RQA over a grid of parameters: every combination of E, tau, radius (or rate), Theiler
window and minimal line lengths of one series, one tidy row per combination.

Work is shared where the results allow it, each row still equal to the single
:func:`pyedmcl.rqa` call bit for bit:

* the series is validated and prepared (float32 centring and its check) once;
* every radius (or rate) of one (E, tau, theiler) is decided in the same Divide &
  Recombine pass over the cells (:mod:`pyedmcl.rqa.radii`): each distance is computed
  once and compared with every threshold, each threshold keeping its own line walks and
  histograms (float32: each its own float64 decisions of the cells near it); a rate's
  radius is found first, as the single call finds it;
* ``l_min``, ``v_min`` and ``w_min`` only select bins of the same three histograms, so
  every combination of them is derived on the host from that pass's histograms
  (:func:`pyedmcl.rqa.measures.compute_measures`, as the single call does);
* programs are built once per (E, tau, number of thresholds) shape and cached by the
  kernel family.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np

from ..constant_series import RQA_WHY, note_text
from ..validation import ConstantSeriesWarning, as_series
from .batch import Runner, check_threshold_choice
from .core import _check_E_tau, check_radius, check_rate
from .measures import MEASURES, compute_measures
from .radii import run_radii

#: the parameters a grid may sweep (each a scalar or a list)
SWEPT = ("E", "tau", "radius", "recurrence_rate", "theiler", "l_min", "v_min", "w_min")


def _values(value: Any, name: str) -> list[Any]:
    """``value`` as a list of grid values: one value, or a 1-D sequence of them; an empty
    list, a nested one or a mapping is refused naming ``name``."""
    if isinstance(value, dict | set):
        raise TypeError(f"{name} must be one value or a list of values (a grid), got "
                        f"{type(value).__name__}")
    if value is None or isinstance(value, str):
        return [value]
    try:
        ndim = np.ndim(value)
    except ValueError:  # a ragged nesting
        ndim = -1
    if ndim == 0:
        return [value]
    if ndim != 1:
        raise ValueError(f"{name} must be one value or a flat list of values (a grid), got "
                         + (f"shape {np.shape(value)}" if ndim > 1 else "a ragged nesting"))
    vals = list(value)
    if not vals:
        raise ValueError(f"{name}=[] is an empty grid; give at least one value")
    return vals


def rqa_grid(x: Any, *, E: Any = 1, tau: Any = 1, radius: Any = None,
             recurrence_rate: Any = None, theiler: Any = 1, l_min: Any = 2, v_min: Any = 2,
             w_min: Any = 2, metric: str = "euclidean", dtype: Any = "float32",
             theiler_scope: str = "lines", white_border: bool = True, device: Any = None,
             backend: str | None = None, threshold_rule: str = "distance",
             max_combinations: int = 1000) -> Any:
    """RQA of one series ``x`` for every combination of the swept parameters.

    ``E``, ``tau``, ``radius`` (or ``recurrence_rate``), ``theiler``, ``l_min``, ``v_min``
    and ``w_min`` are each a scalar or a list; the grid is their product (at most
    ``max_combinations`` rows, default 1,000: raise it to run a larger grid). Other
    options as :func:`pyedmcl.rqa`. Each row equals ``pe.rqa(x, ...)`` with that
    combination bit for bit. One D&R pass per (E, tau, theiler) decides every radius (or
    rate; up to 16 per pass), the line-length minima derived from its histograms.

    Returns a ``pandas.DataFrame``, one row per combination: the swept parameters
    (``radius`` the one used: found per row for ``recurrence_rate``, which is then a
    column too), every measure, ``n_recurrences`` and ``n_cells``. A constant series is
    warned of (``attrs["notes"]``).
    """
    check_threshold_choice(radius, recurrence_rate)
    grid = {k: _values(v, k) for k, v in (("E", E), ("tau", tau), ("radius", radius),
                                          ("recurrence_rate", recurrence_rate),
                                          ("theiler", theiler), ("l_min", l_min),
                                          ("v_min", v_min), ("w_min", w_min))}
    if isinstance(max_combinations, bool) or not isinstance(max_combinations, int | np.integer) \
            or max_combinations < 1:
        raise ValueError(f"max_combinations={max_combinations!r} is out of range; allowed: "
                         "an integer >= 1")
    total = int(np.prod([len(v) for v in grid.values()]))
    if total > max_combinations:
        sizes = ", ".join(f"{k}: {len(v)}" for k, v in grid.items() if len(v) > 1)
        raise ValueError(f"the grid has {total} combinations ({sizes}), more than "
                         f"max_combinations={max_combinations}; raise max_combinations or "
                         "sweep fewer values")
    for r in grid["radius"]:
        if r is not None:
            check_radius(r)
    for q in grid["recurrence_rate"]:
        if q is not None:
            check_rate(q)
    pairs = [_check_E_tau(e, t) for e, t in itertools.product(grid["E"], grid["tau"])]
    s = as_series(x, "x")
    note = None
    if s.size and s.min() == s.max():  # warned once, as pe.rqa warns
        note = note_text("rqa_grid", ["x"], RQA_WHY)
        warnings.warn(note, ConstantSeriesWarning, stacklevel=2)
    runner = Runner(metric=metric, theiler_scope=theiler_scope, white_border=white_border,
                    threshold_rule=threshold_rule, dtype=dtype, device=device,
                    backend=backend)
    prepared = runner.prepare(s)
    rows = []
    minima = list(itertools.product(grid["l_min"], grid["v_min"], grid["w_min"]))
    thresholds = list(itertools.product(grid["radius"], grid["recurrence_rate"]))
    runs = {}
    for (p, (e, t)), (iw, w) in itertools.product(enumerate(pairs), enumerate(grid["theiler"])):
        # every radius (rate) of (E, tau, theiler) from one pass over the cells (its minima
        # checked as the single call checks them); the measures of every minimum are
        # derived from the histograms below
        got = run_radii(runner, prepared, E=e, tau=t, radii=[r for r, _ in thresholds],
                        rates=[q for _, q in thresholds], theiler=w, l_min=minima[0][0],
                        v_min=minima[0][1], w_min=minima[0][2])
        runs.update({(p, k, iw): res for k, res in enumerate(got)})
    for (p, (e, t)), (k, (_r, q)), (iw, _w) in itertools.product(
            enumerate(pairs), enumerate(thresholds), enumerate(grid["theiler"])):
        res = runs[(p, k, iw)]
        for l_, v_, w_ in minima:
            # the pass's own minima: its result's measures (the single call's)
            m = ({k: res.measures[k] for k in MEASURES} if (l_, v_, w_) == minima[0]
                 else _measures(res, l_, v_, w_, res.settings["n_points"]))
            row = {"E": e, "tau": t, "radius": float(res.radius)}
            if q is not None:
                row["recurrence_rate"] = q
            row.update(theiler=res.settings["theiler"], l_min=int(l_), v_min=int(v_),
                       w_min=int(w_))
            row.update(m)
            row.update(n_recurrences=int(res.n_recurrences), n_cells=int(res.n_cells))
            rows.append(row)
    df = _frame(rows)
    if note:
        df.attrs["notes"] = (note,)
    return df


def _frame(rows: list[dict[str, Any]]) -> Any:
    """The rows as a DataFrame (counts as int64): from columns where every row has the
    same keys (a fifth of the time of inferring the frame from the dicts), else from the
    dicts (a rate's column only in some rows: missing values NaN)."""
    import pandas as pd

    keys = list(rows[0]) if rows else []
    if all(list(r) == keys for r in rows):
        df = pd.DataFrame({k: [r[k] for r in rows] for k in keys})
    else:
        df = pd.DataFrame(rows)
    counts = {c: np.int64 for c in ("n_recurrences", "n_cells") if df[c].dtype != np.int64}
    return df.astype(counts) if counts else df  # (astype copies the whole frame)


def _measures(res: Any, l_min: Any, v_min: Any, w_min: Any, n: int) -> dict[str, float]:
    """Every measure of ``res``'s histograms at these minima, as the single call computes
    them (the minima validated as it validates them)."""
    from .core import _check_common

    l_min, v_min, w_min, _, _ = _check_common(l_min, v_min, w_min, 0, "lines", "row", None, n)
    m = compute_measures(res.n_recurrences, res.n_cells, res.diagonal_hist,
                         res.vertical_hist, res.white_hist, l_min, v_min, w_min)
    return {k: m[k] for k in MEASURES}
