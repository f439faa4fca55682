"""The causal network of an all-to-all map with surrogates, after FDR control.

``rho[i, j]`` (library i cross-maps target j) is evidence that series j drives series
i, so a significant pair is the edge ``j -> i``. Every off-diagonal pair is one test
(its surrogate p-value); Benjamini--Hochberg keeps the expected share of false edges
among the edges returned at ``alpha``.

Resolution: a surrogate p-value is at least ``1 / (n + 1)`` (n surrogates). With m =
N (N - 1) tests, BH can return k edges only if ``1 / (n + 1) <= alpha k / m``: for
N = 100 (m = 9,900) and ~100 true edges at alpha = 0.05, n >= 2,000 surrogates. Give
more surrogates as N grows, or test a chosen subset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..primitives.stats import bh_adjust

#: relative tolerance of the ``q <= alpha`` test (p-values are stored as float32)
F32_TOL = 2.0 ** -22

#: multiple-testing corrections :func:`causal_network` knows
CORRECTIONS = ("bh", "bonferroni", "none")


def _arrays(result_or_store: Any) -> tuple[dict[str, np.ndarray], list[str] | None]:
    if isinstance(result_or_store, str | Path):
        from ..xmap.store import xmap_open
        result_or_store = xmap_open(result_or_store)
    res = result_or_store
    if getattr(res, "p_value", None) is None:
        raise ValueError("causal_network needs an xmap result (or store) computed with "
                         "surrogates: run pe.xmap(X, surrogates=n) (CLI: --surrogates N)")
    arrs = {k: np.asarray(getattr(res, k)[...], dtype=np.float64)
            for k in ("rho", "p_value", "null_mean", "null_q95")}
    return arrs, getattr(res, "names", None)


def causal_network(result_or_store: Any, *, alpha: float = 0.05, method: str = "bh",
                   graph: bool = False) -> Any:
    """The significant edges ``driver -> driven`` of an xmap result with surrogates.

    ``result_or_store``: an :class:`~pyedmcl.xmap.results.XmapResult` from
    ``pe.xmap(X, surrogates=n)`` or the path of its Zarr store (verified on open).
    ``method``: "bh" (Benjamini--Hochberg false discovery rate, default), "bonferroni"
    (family-wise) or "none" (each pair at ``alpha``). Returns a pandas DataFrame edge list
    sorted by ``q_value`` -- columns ``source`` (the driver: target series j), ``target``
    (the driven: library series i), ``rho``, ``p_value``, ``q_value`` (the adjusted
    p-value), ``null_mean``, ``null_q95`` -- or, with ``graph=True``, a
    ``networkx.DiGraph`` of the same edges (needs networkx). Series are named by the
    result's ``names`` (else their column index).
    """
    a = float(alpha) if isinstance(alpha, int | float) else np.nan
    if not 0 < a < 1:
        raise ValueError(f"alpha={alpha!r} is out of range; allowed: 0 < alpha < 1")
    if method not in CORRECTIONS:
        raise ValueError(f"method={method!r} is invalid; allowed: {', '.join(CORRECTIONS)}")
    arrs, names = _arrays(result_or_store)
    N = arrs["rho"].shape[0]
    off = ~np.eye(N, dtype=bool)
    p = np.where(off, arrs["p_value"], np.nan)
    if method == "bh":
        q = bh_adjust(p)
    elif method == "bonferroni":
        q = np.minimum(p * np.isfinite(p).sum(), 1.0)
    else:
        q = p
    # p-values are stored in float32: k / (n + 1) at alpha (e.g. 1/20 at 0.05) must not
    # fail by its float32 rounding, so the comparison allows float32's relative precision
    i, j = np.nonzero(np.isfinite(q) & (q <= a * (1 + F32_TOL)))
    labels = list(names) if names is not None else list(range(N))
    import pandas as pd
    df = pd.DataFrame({"source": [labels[v] for v in j], "target": [labels[v] for v in i],
                       "rho": arrs["rho"][i, j], "p_value": arrs["p_value"][i, j],
                       "q_value": q[i, j], "null_mean": arrs["null_mean"][i, j],
                       "null_q95": arrs["null_q95"][i, j]})
    df = df.sort_values(["q_value", "rho"], ascending=[True, False], kind="stable")
    df = df.reset_index(drop=True)
    if not graph:
        return df
    try:
        import networkx as nx
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError("graph=True needs networkx: pip install networkx "
                                  "(or use the returned edge list)") from exc
    g = nx.DiGraph()
    g.add_nodes_from(labels)
    for row in df.itertuples(index=False):
        g.add_edge(row.source, row.target, rho=row.rho, p_value=row.p_value,
                   q_value=row.q_value, null_mean=row.null_mean, null_q95=row.null_q95)
    return g
