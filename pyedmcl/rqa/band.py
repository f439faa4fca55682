"""Windowed RQA in one pass over the band of the recurrence matrix.

Window ``k`` is the square ``[kS, kS + W)^2`` of the auto-recurrence matrix (``W``:
window, ``S``: step, ``nw`` windows). The cells the windows cover form the band
``|i - j| < W`` (for ``S < W``); every cell of it is computed once (kernel family
:mod:`pyedmcl.kernels.rqa_band`) instead of once per window holding it (about ``W / S``
times), and each window's histograms are exact:

* each column is walked over the rows of all windows holding it, each diagonal
  ``d >= max(w, 1)`` over the rows whose cell lies in some window; a maximal run
  ``[s, e]`` of the lane is whole in the windows ``k`` with ``kS <= s`` and
  ``e (+ d) <= kS + W - 1`` (and the column inside the window): a contiguous range of
  ``k``, counted by a difference array over ``k``;
* it is cut by the windows whose top (or bottom) row falls inside it: counted in each
  of those windows with the length that window sees (white runs touching a window's
  border are dropped with ``white_border=False``, as a single RQA drops them).

Diagonal lines are those of the upper triangle, doubled, plus the main diagonal as one
line of length ``W`` when ``w = 0`` (as :func:`pyedmcl.rqa.core.rqa` counts them); the
recurrences are the cells of the vertical lines. Host work: a cumulative sum over ``nw x W``.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from clkernels import Backend

from ..kernels.rqa_band import BandSpec, exact_on, launch
from .exact import warn_no_fp64
from .measures import compute_measures
from .result import band_cells

#: lanes per launch (a long launch holds the queue; several keep the devices balanced)
_LANES = 1 << 14
#: difference-histogram bins per pass ((windows + 1) x window int32, three of them on the
#: device); more windows run in several passes over consecutive parts of the series
_HIST_BINS = 1 << 23


def _lanes_on(be: Backend, spec: BandSpec, xs: np.ndarray, thr: float, jobs: list, *,
              W: int, S: int, nw: int, w: int, exact: tuple | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One device's share: ``jobs`` = (mode, lane0, nlanes); its difference histograms.
    ``exact``: (raw float64 series aligned with ``xs``, thr64, bound), see
    :mod:`pyedmcl.rqa.exact`."""
    x = be.to_device(xs)
    ex = None
    if exact is not None and exact_on(spec, be):
        ex = (be.to_device(np.ascontiguousarray(exact[0], dtype=np.float64)), *exact[1:])
    elif spec.exact and spec.real == "float" and not be.info.fp64:
        warn_no_fp64(be.info.name)
    n = (nw + 1) * W
    h = {k: be.zeros(n, np.int32) for k in ("v", "w", "d")}
    for mode, l0, nl in jobs:
        hb, hw = (h["v"], h["w"]) if mode == "vertical" else (h["d"], h["w"])
        launch(be, spec, mode, x, thr, lane0=l0, nlanes=nl, n_windows=nw, w=w, hb=hb, hw=hw,
               exact=ex)
    return tuple(be.to_host(h[k]).astype(np.int64) for k in ("d", "v", "w"))  # type: ignore


def band_histograms(bes: list[Backend], xs: np.ndarray, thr: float, *, E: int, tau: int,
                    metric: str, real: str, fma: bool, theiler_matrix: bool, w: int,
                    white_border: bool, n_points: int, window: int, step: int,
                    exact: tuple | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per window the recurrences ``(nw,)`` and the diagonal, vertical and white
    histograms ``(nw, window)`` (index length - 1) of the auto-recurrence matrix of
    ``xs`` (working dtype, ``n_points`` embedded points), each equal to
    :func:`pyedmcl.rqa.core.rqa` of the window's samples when the working values are the
    same in every window (float64). Lanes are split over ``bes``."""
    parts = list(band_passes(bes, xs, thr, E=E, tau=tau, metric=metric, real=real, fma=fma,
                             theiler_matrix=theiler_matrix, w=w, white_border=white_border,
                             n_points=n_points, window=window, step=step, exact=exact))
    nrec, d, v, wh = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return nrec, d, v, wh


def band_passes(bes: list[Backend], xs: np.ndarray, thr: float, *, E: int, tau: int,
                metric: str, real: str, fma: bool, theiler_matrix: bool, w: int,
                white_border: bool, n_points: int, window: int, step: int,
                exact: tuple | None = None
                ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`band_histograms` pass by pass: consecutive groups of windows (as many as
    :data:`_HIST_BINS` difference bins hold), each one pass over its part of the series.
    ``exact`` (float32): ``(raw, thr64, bound)``, the float64 series aligned with ``xs``
    from which the near cells are redone (:mod:`pyedmcl.rqa.exact`)."""
    W, S = int(window), int(step)
    nw = (n_points - W) // S + 1
    span = (E - 1) * tau
    per = max(1, _HIST_BINS // W - 1)  # windows per pass: (per + 1) x W difference bins
    for ka in range(0, nw, per):
        kb = min(nw, ka + per)
        a = ka * S
        end = a + (kb - ka - 1) * S + W + span
        ex = None if exact is None else (exact[0][a:end], *exact[1:])
        yield _one_pass(bes, xs[a:end], thr, E=E, tau=tau,
                        metric=metric, real=real, fma=fma, theiler_matrix=theiler_matrix,
                        w=w, white_border=white_border, nw=kb - ka, W=W, S=S, exact=ex)


def _one_pass(bes: list[Backend], xs: np.ndarray, thr: float, *, E: int, tau: int,
              metric: str, real: str, fma: bool, theiler_matrix: bool, w: int,
              white_border: bool, nw: int, W: int, S: int, exact: tuple | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`band_histograms` of the ``nw`` windows of ``xs`` (window 0 at its start)."""
    spec = BandSpec(E, tau, metric, real, fma=fma, theiler_matrix=theiler_matrix,
                    white_border=white_border, window=W, step=S, exact=exact is not None)
    kmin = max(w, 1)
    ncols = (nw - 1) * S + W
    jobs = [("vertical", l0, min(_LANES, ncols - l0)) for l0 in range(0, ncols, _LANES)]
    jobs += [("diagonal", l0, min(_LANES, W - l0)) for l0 in range(kmin, W, _LANES)]
    share = [jobs[i:: len(bes)] for i in range(len(bes))]
    kw = dict(W=W, S=S, nw=nw, w=w, exact=exact)
    if len(bes) == 1:
        parts = [_lanes_on(bes[0], spec, xs, thr, share[0], **kw)]
    else:
        with ThreadPoolExecutor(len(bes)) as pool:
            parts = list(pool.map(lambda bj: _lanes_on(bj[0], spec, xs, thr, bj[1], **kw),
                                  zip(bes, share, strict=True)))
    d, v, wh = (np.cumsum(sum(p[i] for p in parts).reshape(nw + 1, W), axis=0)[:nw]
                for i in range(3))
    d = 2 * d
    if w == 0:
        d[:, W - 1] += 1  # the main diagonal: one line of length W
    nrec = v @ np.arange(1, W + 1, dtype=np.int64)
    return nrec, d, v, wh


def band_rows(nrec: np.ndarray, d: np.ndarray, v: np.ndarray, wh: np.ndarray, W: int, w: int,
              theiler_matrix: bool, l_min: int, v_min: int, w_min: int
              ) -> list[dict[str, float]]:
    """Every measure per window from the histograms of :func:`band_passes`."""
    n_cells = W * W - (band_cells(W, w) if theiler_matrix else 0)
    rows = []
    for k in range(nrec.size):
        row = compute_measures(int(nrec[k]), n_cells, d[k], v[k], wh[k], l_min, v_min, w_min)
        row.update(n_recurrences=int(nrec[k]), n_cells=n_cells)
        rows.append(row)
    return rows
