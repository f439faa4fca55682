"""The causal network of a data matrix: pairwise maps, FDR, lag pruning, partial pruning.

1. ``pe.xmap(X, surrogates=n)``: every pair's cross-map skill and surrogate p-value;
   Benjamini--Hochberg (or the ``method`` given) keeps the candidate edges ``j -> i``
   (library i cross-maps target j), :func:`pyedmcl.significance.network.causal_network`'s
   pairwise rule.
2. Lag scan (Ye et al. 2015): each candidate's cross-map skill at every lag of ``lags``
   from library i's one neighbour order (:mod:`.crossmap`); an edge whose skill peaks
   at a positive lag is dropped as a reverse / synchrony artefact (strong forcing makes
   the driven series cross-map its driver's future).
3. Convergence (Sugihara et al. 2012): each remaining edge's skill at its best lag
   must rise from random small libraries (``min_library`` rows, default a twentieth of
   the rows) to the full library, by Fisher's z test at ``alpha`` (:mod:`.convergence`);
   an edge that does not is dropped as nonconvergent (synchrony, a shared driver, or a
   link too weak to resolve).
4. Partial cross maps (Leng et al. 2020, :mod:`.partial`): for each remaining edge
   ``x -> y`` and each z with remaining edges ``z -> y`` and ``x -> z`` or ``z -> x`` (a
   chain through z, or a common driver z), the partial cross map of x -> y given z at
   the pairs' best lags; the edge is dropped as indirect when, for some z, the PCM keeps
   less than ``partial_ratio`` of the plain cross map or is not significant against
   x's surrogates (p > alpha). Every PCM is computed on the graph left by step 3, so the
   order of the triples does not matter.

The decision rule, its thresholds and its assumptions: docs/causal_network.md.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..primitives.ranges import check_lags
from ..validation import check_int, check_seed
from .convergence import (
    SAMPLES,
    convergence_p,
    default_size,
    kendall_convergence,
    ladder,
    subsample_skill,
)
from .crossmap import lag_scan
from .partial import PartialMapper, _real, pcm_table

#: lags scanned by default (Ye et al. scan a few steps each side)
DEFAULT_LAGS = range(-5, 6)
#: the share of the plain cross map a direct link keeps under partial cross mapping
DEFAULT_PARTIAL_RATIO = 0.7


@dataclass
class CausalNetwork:
    """Direct edges of a data matrix and the edges pruned on the way.

    ``edges``: DataFrame ``source``, ``target``, ``lag`` (the cross-map lag of highest
    skill), ``rho`` (the full-library skill at lag 0, the map's), ``rho_lag`` (the skill
    at ``lag``), ``rho_small`` (the mean skill of random small libraries at ``lag``),
    ``conv_p`` (the convergence test's p-value), ``conv_tau`` and ``conv_tau_p``
    (with ``convergence="kendall"``: Kendall's tau of skill against library size and
    its one-sided p-value; else NaN), ``p_value``, ``q_value``. ``pruned``:
    the same columns plus ``reason`` ("reverse", "nonconvergent" or "indirect"), ``via`` (the intermediate of an indirect edge), ``pcm``
    and ``pcm_p``. ``partial``: every partial cross map computed. ``lag_rho``: ``(N, N,
    len(lags))`` skill of library i cross-mapping j at each lag (NaN where not
    scanned). ``xmap``: the all-to-all map with surrogates.
    """

    edges: Any
    pruned: Any
    partial: Any
    lags: np.ndarray
    lag_rho: np.ndarray
    names: list
    xmap: Any = field(default=None, repr=False)

    def plot(self, ax: Any = None, *, truth: Any = None) -> Any:
        """Draw the direct edges (arrows labelled with their lag) on ``ax``; ``truth``
        (an adjacency, ``truth[i, j]``: i drives j) adds the missed true links dashed
        and marks false edges red (needs matplotlib). Returns the axes."""
        from .plot import draw_network
        return draw_network(self, ax, truth=truth)

    def graph(self) -> Any:
        """A ``networkx.DiGraph`` of the direct edges (needs networkx)."""
        try:
            import networkx as nx
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError("graph() needs networkx: pip install networkx") from exc
        g = nx.DiGraph()
        g.add_nodes_from(self.names)
        for row in self.edges.to_dict("records"):
            g.add_edge(row.pop("source"), row.pop("target"), **row)
        return g


def causal_network(result_or_data: Any, *, alpha: float = 0.05, method: str = "bh",
                   graph: bool = False, **data_options: Any) -> Any:
    """The direct causal links of a data matrix, or the significant pairs of an xmap
    result with surrogates.

    **A data matrix** ``X`` (NumPy array or DataFrame, time down the rows, one column per
    series; a DataFrame's column names label the nodes) runs the whole pipeline
    (docs/causal_network.md): pairwise maps with surrogates and FDR (``alpha``,
    ``method``), a lag scan of every candidate edge (dropped when its skill peaks at a
    positive cross-map lag: a reverse / synchrony artefact), and partial cross maps of
    candidate indirect paths (dropped when conditioning on an intermediate removes it).
    Options (keywords): ``E`` ("auto", one int or one per series), ``tau``,
    ``surrogates`` (default 199; ``1 / (surrogates + 1) <= alpha`` is required),
    ``surrogate_method``, ``surrogate_options``, ``seed``, ``lags`` (default -5..5; at
    least one lag <= 0), ``convergence`` (default True or "fisher": drop edges whose
    skill does not rise from ``min_library`` rows, default a twentieth of the rows, to
    the full library, by Fisher's z; "kendall": drop those whose skill does not rise
    with library size over a ladder of sizes from ``min_library`` rows to the full
    library, Kendall's tau > 0 at p <= ``alpha``; False: no convergence step),
    ``partial`` (default: with 3 series or more; True with fewer warns),
    ``partial_ratio`` (default 0.7), ``dtype``, ``device``, ``backend``; for many
    series ``out`` (a Zarr path: the pairwise map and its surrogate null are written
    there by row blocks, and rerunning the same call resumes it with the stored seed,
    giving the same edges; ``overwrite`` replaces only a store pyedmcl wrote),
    ``scheduler`` and ``n_workers`` (a Dask cluster, as :func:`pyedmcl.xmap`: needs
    ``out``; the later stages run here). Returns a
    :class:`CausalNetwork` (``edges``: source, target, lag, rho, rho_lag, p_value,
    q_value; ``pruned``: the same with ``reason``, ``via``, ``pcm``, ``pcm_p``), or with
    ``graph=True`` a ``networkx.DiGraph`` of its direct edges.

    **An xmap result** (``pe.xmap(X, surrogates=n)``) or the path of its Zarr store:
    every pair tested on its own, as
    :func:`pyedmcl.significance.network.causal_network` (a DataFrame edge list sorted by
    ``q_value``: source, target, rho, p_value, q_value, null_mean, null_q95; with
    ``graph=True`` a ``networkx.DiGraph``).
    """
    from ..significance.network import CORRECTIONS
    from ..significance.network import causal_network as pairwise
    if not _is_data(result_or_data):
        if data_options:
            raise TypeError(f"causal_network got {', '.join(sorted(data_options))} with an "
                            "xmap result; these options belong to a data matrix (pass X)")
        return pairwise(result_or_data, alpha=alpha, method=method, graph=graph)
    if method not in CORRECTIONS:
        raise ValueError(f"method={method!r} is invalid; allowed: {', '.join(CORRECTIONS)}")
    net = network_from_data(result_or_data, alpha=alpha, method=method, **data_options)
    return net.graph() if graph else net


def _is_data(obj: Any) -> bool:
    """A data matrix (array, DataFrame or list of series), not an xmap result or the
    path of its store."""
    from pathlib import Path
    if isinstance(obj, str | Path) or hasattr(obj, "rho"):
        return False
    return isinstance(obj, np.ndarray | list) or hasattr(obj, "columns")


def _warn_resolution(N: int, n: int, alpha: float, method: str) -> None:
    """Warn when the correction needs more than 5 edges per series before it can return
    any with n surrogates: BH returns k of m = N (N - 1) tests only if ``1 / (n + 1) <=
    alpha k / m``; Bonferroni any edge only if ``1 / (n + 1) <= alpha / m``."""
    m = N * (N - 1)
    k_min = {"bh": m / (alpha * (n + 1)), "bonferroni": np.inf if (n + 1) * alpha < m else 1}
    k = k_min.get(method, 1)
    if k > 5 * N:
        need = int(np.ceil(m / (alpha * (N if method == "bh" else 1)))) - 1
        warnings.warn(f"surrogates={n} is too few for {N} series with method={method!r} at "
                      f"alpha={alpha}: with {m} pairs an edge needs "
                      + (f"at least {int(np.ceil(k))} pairs at the smallest p-value "
                         f"1/{n + 1}" if method == "bh" else f"p <= {alpha / m:.2g}")
                      + f"; give surrogates >= {need} (or method='none', or test fewer series)",
                      RuntimeWarning, stacklevel=4)


def check_surrogates(n: Any, alpha: float) -> int:
    """``surrogates`` able to reach ``alpha``: the smallest p-value is ``1 / (n + 1)``."""
    n = check_int(n, "surrogates", 1)
    if 1.0 / (n + 1) > alpha:
        need = int(np.ceil(1.0 / alpha - 1 - 1e-9))
        raise ValueError(f"surrogates={n} cannot reach alpha={alpha}: the smallest p-value is "
                         f"1/(surrogates + 1) = {1 / (n + 1):.3g} > alpha; allowed: "
                         f"surrogates >= {need}")
    return n


def network_from_data(X: Any, *, E: Any = "auto", tau: int = 1, surrogates: int = 199,
                      surrogate_method: str = "ebisuzaki", surrogate_options: dict | None = None,
                      seed: int | None = None, alpha: float = 0.05, method: str = "bh",
                      lags: Any = DEFAULT_LAGS, convergence: bool | str = True,
                      min_library: int | None = None, partial: bool | None = None,
                      partial_ratio: float = DEFAULT_PARTIAL_RATIO, dtype: Any = None,
                      device: Any = None, backend: str | None = None, out: Any = None,
                      overwrite: bool = False, scheduler: Any = None,
                      n_workers: int = 2) -> CausalNetwork:
    """:class:`CausalNetwork` of ``X`` (time down the rows, one column per series); see
    :func:`pyedmcl.causal_network`. ``out``, ``overwrite``, ``scheduler``, ``n_workers``
    go to the pairwise map (an xmap Zarr store, resumable; Dask row blocks)."""
    from clkernels import get_backend

    from ..significance.network import causal_network as pairwise
    from ..xmap.core import as_panel, xmap
    P, names = as_panel(X, np.float64)
    N, n = P.shape
    a, surrogates, lag_arr, ratio, partial = _check_options(
        P, alpha, surrogates, lags, partial_ratio, partial, convergence, min_library)
    _warn_resolution(N, surrogates, a, method)
    seed = check_seed(seed)
    if seed is None and out is not None:  # resuming: the store's seed, so the same edges
        from ..xmap.core import _stored_params
        seed = _stored_params(out).get("seed")
    if seed is None:  # one seed for the map's surrogates and the partial maps' alike
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    labels = list(names) if names is not None else list(range(N))
    res = xmap(np.ascontiguousarray(P.T), E=E, tau=tau, surrogates=surrogates,
               surrogate_method=surrogate_method, surrogate_options=surrogate_options,
               seed=seed, dtype=dtype, device=device, backend=backend, out=out,
               overwrite=overwrite, scheduler=scheduler, n_workers=n_workers)
    res.names = labels
    cand = pairwise(res, alpha=a, method=method)
    pos = {lab: i for i, lab in enumerate(labels)}
    src = np.array([pos[s] for s in cand["source"]], dtype=np.int64)
    dst = np.array([pos[t] for t in cand["target"]], dtype=np.int64)
    Z = (P - P.mean(axis=1, keepdims=True)) / np.where(P.std(axis=1) > 0, P.std(axis=1), 1.0)[:, None]
    pm = PartialMapper(get_backend(device, backend), Z, np.asarray(res.E), tau=tau,
                       real=_real(dtype, "causal_network"))
    lag_rho, best, rho_lag = _lag_step(pm, src, dst, lag_arr)
    cand = cand.assign(lag=[int(best[t, s]) for s, t in zip(src, dst, strict=True)],
                       rho_lag=rho_lag)
    reason = np.where(cand["lag"].to_numpy() > 0, "reverse", "").astype(object)
    rho_small = np.full(len(cand), np.nan)
    conv_p = np.full(len(cand), np.nan)
    conv_tau, conv_tau_p = np.full(len(cand), np.nan), np.full(len(cand), np.nan)
    if convergence:
        live = np.flatnonzero(reason == "")
        kendall = convergence == "kendall"
        rho_small[live], conv_p[live], conv_tau[live], conv_tau_p[live] = _convergence_step(
            pm, src[live], dst[live], best, rho_lag[live], min_library, seed, kendall)
        fails = (~((conv_tau[live] > 0) & (conv_tau_p[live] <= a * (1 + 1e-9))) if kendall
                 else ~(conv_p[live] <= a * (1 + 1e-9)))
        reason[live[fails]] = "nonconvergent"
    via = np.full(len(cand), None, dtype=object)
    pcm = np.full(len(cand), np.nan)
    pcm_p = np.full(len(cand), np.nan)
    keep = reason == ""
    table = None
    if partial and keep.any():
        table, pruned_by = _partial_step(pm, P, src[keep], dst[keep], best, surrogates,
                                         surrogate_method, surrogate_options, seed, a, ratio,
                                         labels, lag_arr)
        for e, k in enumerate(np.flatnonzero(keep)):
            if pruned_by[e] is not None:
                z, pc, pp = pruned_by[e]
                reason[k], via[k], pcm[k], pcm_p[k] = "indirect", z, pc, pp
    cand = cand.assign(rho_small=rho_small, conv_p=conv_p, conv_tau=conv_tau,
                       conv_tau_p=conv_tau_p, reason=reason, via=via, pcm=pcm, pcm_p=pcm_p)
    cols = ["source", "target", "lag", "rho", "rho_lag", "rho_small", "conv_p", "conv_tau",
            "conv_tau_p", "p_value", "q_value"]
    direct = cand[cand["reason"] == ""][cols].reset_index(drop=True)
    pruned = cand[cand["reason"] != ""][cols + ["reason", "via", "pcm", "pcm_p"]]
    return CausalNetwork(edges=direct, pruned=pruned.reset_index(drop=True),
                         partial=table, lags=lag_arr, lag_rho=lag_rho, names=labels, xmap=res)


def _check_options(P: np.ndarray, alpha: Any, surrogates: Any, lags: Any, partial_ratio: Any,
                   partial: Any, convergence: Any, min_library: Any
                   ) -> tuple[float, int, np.ndarray, float, bool]:
    """The data-matrix options checked: ``(alpha, surrogates, lags, ratio, partial)``."""
    N, n = P.shape
    if N < 2:
        raise ValueError(f"X has {N} series; causal_network needs at least 2 columns")
    if not np.isfinite(P).all():
        raise ValueError("X has NaN or infinite values; causal_network needs complete series")
    a = float(alpha) if isinstance(alpha, int | float) else np.nan
    if not 0 < a < 1:
        raise ValueError(f"alpha={alpha!r} is out of range; allowed: 0 < alpha < 1")
    surrogates = check_surrogates(surrogates, a)
    lag_arr = check_lags(lags, n // 4, "lags")
    if lag_arr.min() > 0:
        raise ValueError(f"lags={lag_arr.tolist()} has no lag <= 0; allowed: lags including 0 or a "
                         "negative lag (a driver's effect peaks at a non-positive lag: with "
                         "positive lags only, every edge would be dropped as reverse)")
    ratio = float(partial_ratio)
    if not 0 <= ratio <= 1:
        raise ValueError(f"partial_ratio={partial_ratio!r} is out of range; allowed: 0..1")
    if not isinstance(convergence, bool | np.bool_ | str):
        raise TypeError(f"convergence={convergence!r} must be True, False, 'fisher' or "
                        "'kendall'")
    if isinstance(convergence, str) and convergence not in ("fisher", "kendall"):
        raise ValueError(f"convergence={convergence!r} is invalid; allowed: True (Fisher's "
                         "z test), False, 'fisher', 'kendall'")
    if min_library is not None:
        check_int(min_library, "min_library", 6, max(6, n // 2))
    if partial and N < 3:
        warnings.warn(f"partial=True needs at least 3 series (X has {N}); no partial cross "
                      "maps", RuntimeWarning, stacklevel=4)
    return a, surrogates, lag_arr, ratio, N >= 3 and partial is not False


def _lag_step(pm: PartialMapper, src: np.ndarray, dst: np.ndarray, lag_arr: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lag scans of the candidate edges: ``(lag_rho (N, N, lags), best (N, N), rho at
    the best lag per edge)``."""
    N = pm.Z.shape[0]
    lag_rho = np.full((N, N, lag_arr.size), np.nan)
    for i in np.unique(dst):  # one neighbour order per library, every candidate driver
        js = np.unique(src[dst == i])
        lag_rho[i, js] = lag_scan(pm.library(int(i)), pm.Z[js], lag_arr).T
    best = np.full((N, N), 0, dtype=np.int64)
    top = np.full(src.size, np.nan)
    for e, (s, t) in enumerate(zip(src, dst, strict=True)):
        if not np.isnan(lag_rho[t, s]).all():
            m = int(np.nanargmax(lag_rho[t, s]))
            best[t, s], top[e] = lag_arr[m], lag_rho[t, s, m]
    return lag_rho, best, top


def _convergence_step(pm: PartialMapper, src: np.ndarray, dst: np.ndarray, best: np.ndarray,
                      rho_full: np.ndarray, min_library: int | None, seed: int,
                      kendall: bool = False) -> tuple[np.ndarray, ...]:
    """Each edge's mean skill over random small libraries (at its best lag), the
    p-value of its rise to the full library's skill, and (with ``kendall``, else NaN)
    Kendall's tau of skill against library size and its p-value (:mod:`.convergence`)."""
    n = pm.Z.shape[1]
    rho_small = np.full(src.size, np.nan)
    p = np.ones(src.size)
    tau, tau_p = np.full(src.size, np.nan), np.full(src.size, np.nan)
    for i in np.unique(dst):
        lm = pm.library(int(i))
        for lag in np.unique(best[i, src[dst == i]]):
            e = np.flatnonzero((dst == i) & (best[i, src] == lag))
            rows = int(np.count_nonzero((lm.times + lag >= 0) & (lm.times + lag < n)))
            size = min(min_library or default_size(rows, lm.k), rows - 1)
            rng = np.random.default_rng([seed, int(i), int(lag) + n, 0xC0])
            sk = subsample_skill(lm, pm.Z[src[e]], int(lag), size, SAMPLES, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rho_small[e] = np.nanmean(sk, axis=0)
            p[e] = convergence_p(rho_full[e], rho_small[e], size, rows)
            if kendall:  # its own draws: the Fisher test's are those without it
                rng = np.random.default_rng([seed, int(i), int(lag) + n, 0xCD])
                tau[e], tau_p[e] = kendall_convergence(
                    lm, pm.Z[src[e]], int(lag), ladder(size, rows), SAMPLES, rng,
                    rho_full[e], rows)
    return rho_small, p, tau, tau_p


def _partial_step(pm: PartialMapper, P: np.ndarray, src: np.ndarray, dst: np.ndarray,
                  best: np.ndarray, n: int, smethod: str, soptions: dict | None, seed: int,
                  alpha: float, ratio: float, labels: list, lag_arr: np.ndarray
                  ) -> tuple[Any, list]:
    """Partial cross maps of every edge (src -> dst) against every candidate z; returns
    the table and, per edge, None (direct) or ``(z, pcm, p)`` of the z that prunes it
    (the lowest PCM / rho among those that do)."""
    import pandas as pd

    from ..primitives.surrogates import generate
    from ..xmap.xmap_null import series_rng
    edges = set(zip(src.tolist(), dst.tolist(), strict=True))
    triples = []
    for x, y in zip(src.tolist(), dst.tolist(), strict=True):
        for z in range(P.shape[0]):
            if z in (x, y) or (z, y) not in edges or ((x, z) not in edges and (z, x) not in edges):
                continue
            triples.append((x, y, z, int(best[y, x]), int(best[y, z])))
    sur = {}
    for x in sorted({t[0] for t in triples}):
        S = generate(P[x], smethod, n, series_rng(seed, x), **(soptions or {}))
        sd = S.std(axis=1, keepdims=True)
        sur[x] = (S - S.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    t = pcm_table(pm, triples, sur)
    share = np.where(t["rho"] > 0, t["pcm"] / np.where(t["rho"] > 0, t["rho"], 1.0), 0.0)
    cut = (share < ratio) | ~(t["p_value"] <= alpha * (1 + 1e-9))
    by: dict[tuple[int, int], tuple[int, float, float, float]] = {}
    for m, (x, y, z, _, _) in enumerate(triples):
        if cut[m] and ((x, y) not in by or share[m] < by[(x, y)][3]):
            by[(x, y)] = (z, float(t["pcm"][m]), float(t["p_value"][m]), float(share[m]))
    table = pd.DataFrame({"source": [labels[v[0]] for v in triples],
                          "target": [labels[v[1]] for v in triples],
                          "via": [labels[v[2]] for v in triples],
                          "lag_source": [v[3] for v in triples], "lag_via": [v[4] for v in triples],
                          "rho": t["rho"], "pcm": t["pcm"], "share": share,
                          "p_value": t["p_value"], "indirect": cut})
    pruned = [(labels[by[(x, y)][0]],) + by[(x, y)][1:3] if (x, y) in by else None
              for x, y in zip(src.tolist(), dst.tolist(), strict=True)]
    return table, pruned
