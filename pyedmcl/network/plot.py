"""A drawing of a :class:`~.pipeline.CausalNetwork`: nodes on a circle, the direct edges
as arrows labelled with their cross-map lag, and (given the true graph) the true links
it missed as dashed grey arrows and the edges it found that are not true in red."""

from __future__ import annotations

from typing import Any

import numpy as np


def draw_network(net: Any, ax: Any = None, *, truth: Any = None) -> Any:
    """Draw ``net``'s direct edges on ``ax`` (a new figure's axes when None) and return
    the axes. ``truth``: an ``(N, N)`` adjacency (``truth[i, j]`` nonzero: series i
    drives series j, in the order of ``net.names``) to mark misses and false edges."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 4.6))
    names = list(net.names)
    N = len(names)
    ang = np.pi / 2 - 2 * np.pi * np.arange(N) / max(N, 1)
    xy = np.column_stack([np.cos(ang), np.sin(ang)])
    pos = {lab: i for i, lab in enumerate(names)}
    T = None if truth is None else np.asarray(truth) != 0
    if T is not None and T.shape != (N, N):
        raise ValueError(f"truth has shape {T.shape}; needs ({N}, {N}) for {N} series")
    found = set()
    for row in net.edges.to_dict("records"):
        i, j = pos[row["source"]], pos[row["target"]]
        found.add((i, j))
        wrong = T is not None and not T[i, j]
        _arrow(ax, FancyArrowPatch, xy[i], xy[j], "tab:red" if wrong else "tab:blue", "-")
        mid = 0.55 * xy[i] + 0.45 * xy[j] + 0.06 * _normal(xy[i], xy[j])
        ax.text(*mid, f"{int(row['lag'])}", fontsize=8, ha="center", va="center",
                color="tab:red" if wrong else "tab:blue")
    if T is not None:
        for i, j in zip(*np.nonzero(T), strict=True):
            if (int(i), int(j)) not in found:
                _arrow(ax, FancyArrowPatch, xy[i], xy[j], "0.6", "--")
    for k, lab in enumerate(names):
        ax.add_patch(plt.Circle(xy[k], 0.11, color="white", ec="0.2", zorder=3))
        ax.text(*xy[k], str(lab), ha="center", va="center", fontsize=9, zorder=4)
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", xticks=[], yticks=[])
    for side in ax.spines.values():
        side.set_visible(False)
    return ax


def _normal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = b - a
    return np.array([-d[1], d[0]]) / max(float(np.hypot(*d)), 1e-9)


def _arrow(ax: Any, patch: Any, a: np.ndarray, b: np.ndarray, color: str, style: str) -> None:
    """An arrow a -> b, bent slightly so that a -> b and b -> a stay apart."""
    ax.add_patch(patch(tuple(a), tuple(b), arrowstyle="-|>", mutation_scale=12, color=color,
                       linestyle=style, lw=1.4, shrinkA=14, shrinkB=14,
                       connectionstyle="arc3,rad=0.12", zorder=2))
