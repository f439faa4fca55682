"""``.plot()`` (matplotlib, the ``[plot]`` extra) and ``_repr_html_`` (notebooks) for results.

:class:`Displayable` is a mixin of the result classes; the drawing and the HTML live
here so the algorithms stay free of display code. Each result is recognised by its
fields: a skill scan (``parameter``, ``values``, ``rho``), S-map skill per theta
(``thetas``), CCM curves (``lib_sizes``), predictions (``predicted``), RQA (``measures``).
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from . import reading

AXIS = {"E": "embedding dimension E", "Tp": "prediction interval Tp (rows ahead)",
        "exclusion_radius": "exclusion radius (rows)", "theta": "S-map localisation theta"}


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib: pip install 'pyedmcl[plot]'") from exc
    return plt


def _kind(r: Any) -> str:
    if hasattr(r, "measures"):
        return "rqa"
    if hasattr(r, "lib_sizes"):
        return "ccm"
    if hasattr(r, "thetas"):
        return "nonlinear"
    if hasattr(r, "parameter"):
        return "scan"
    if hasattr(r, "predicted"):
        return "prediction"
    raise TypeError(f"no display for {type(r).__name__}")


def _scan_xy(r: Any) -> tuple[str, np.ndarray, np.ndarray]:
    if _kind(r) == "nonlinear":
        return "theta", np.asarray(r.thetas, dtype=float), np.asarray(r.rho, dtype=float)
    return r.parameter, np.asarray(r.values), np.asarray(r.rho, dtype=float)


def _legend(ax: Any) -> None:
    """The legend below the axes (outside the data: it hides no point or tick)."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, frameon=False)


def plot_result(r: Any, ax: Any = None, names: tuple[str, str] = ("x", "y")) -> Any:
    """Draw ``r`` on ``ax`` (a new figure when None); returns the axes. ``names``: the two
    series of a CCM result, for its legend."""
    plt = _pyplot()
    kind = _kind(r)
    if ax is None:  # constrained: the axis labels and the legend below stay inside
        _, ax = plt.subplots(figsize=(5.5, 4.2), layout="constrained")
    if kind in ("scan", "nonlinear"):
        name, x, y = _scan_xy(r)
        ax.plot(x, y, "o-")
        i = int(np.nanargmax(y))
        ax.plot([x[i]], [y[i]], "o", ms=11, mfc="none", mec="C3", label=f"best {name} = {x[i]:g}")
        ax.set(xlabel=AXIS.get(name, name), ylabel="forecast skill rho (observed vs predicted)")
        _legend(ax)
    elif kind == "ccm":
        x, y = names
        ax.plot(r.lib_sizes, r.rho_yx, "o-", label=f"{y} xmap {x} (evidence {x} drives {y})")
        ax.plot(r.lib_sizes, r.rho_xy, "s-", label=f"{x} xmap {y} (evidence {y} drives {x})")
        ax.set(xlabel="library size L (points)", ylabel="cross-map skill rho")
        _legend(ax)
    elif kind == "prediction":
        if np.ndim(r.predicted) != 1:
            raise ValueError("plot() needs a single target; index the result first")
        ax.plot(r.times, r.observed, "-", color="0.3", lw=1, label="observed")
        ax.plot(r.times, r.predicted, "-", color="C1", lw=1, label=f"predicted (rho {reading.rho(r.rho)})")
        ax.set(xlabel="time (row of the input)", ylabel="value (data units)")
        _legend(ax)
    else:  # rqa: the line-length distributions
        for h, lab in ((r.diagonal_hist, "diagonal"), (r.vertical_hist, "vertical")):
            h = np.asarray(h)
            nz = np.flatnonzero(h)
            nz = nz[nz >= 1]  # line lengths start at 1
            if nz.size:
                ax.semilogy(nz, h[nz], ".-", label=f"{lab} lines")
        ax.set(xlabel="line length (steps)", ylabel="number of lines")
        _legend(ax)
    return ax


def _table(rows: list[tuple[str, ...]], head: tuple[str, ...] = ()) -> str:
    """Rows of cells: the first column left-aligned (names), the others right (numbers)."""
    def cells(row: tuple[str, ...], tag: str) -> str:
        return "".join(f"<{tag} style='text-align:{'left' if i == 0 else 'right'}'>"
                       f"{html.escape(c)}</{tag}>" for i, c in enumerate(row))
    th = f"<tr>{cells(head, 'th')}</tr>" if head else ""
    body = "".join("<tr>" + cells(r, "td") + "</tr>" for r in rows)
    return f"<table>{th}{body}</table>"


def html_result(r: Any) -> str:
    """A compact HTML view: a sentence reading the result and its numbers, rounded."""
    kind = _kind(r)
    title = type(r).__name__
    if kind in ("scan", "nonlinear"):
        name, x, y = _scan_xy(r)
        text = (reading.predict_nonlinear(x, y) if name == "theta" else
                reading.embed_dimension(x, y) if name == "E" else
                reading.predict_interval(x, y) if name == "Tp" else "")
        rows = [(f"{v:g}", reading.rho(float(p))) for v, p in zip(x, y, strict=True)]
        tab = _table(rows, (name, "rho"))
    elif kind == "ccm":
        text = reading.ccm(r.lib_sizes, r.rho_xy, r.rho_yx,
                            significance=getattr(r, "significance", None),
                            convergence=getattr(r, "convergence", None))
        rows = [(str(int(L)), reading.rho(a), reading.rho(b))
                for L, a, b in zip(r.lib_sizes, r.rho_yx, r.rho_xy, strict=True)]
        tab = _table(rows, ("library size", "y xmap x", "x xmap y"))
    elif kind == "prediction":
        text = (f"E = {r.E}, tau = {r.tau}, Tp = {r.Tp}: {np.size(r.predicted)} predictions.")
        tab = _table([("rho", reading.rho(float(np.mean(r.rho)))),
                      ("MAE", reading.sig(float(np.mean(r.mae)))),
                      ("RMSE", reading.sig(float(np.mean(r.rmse))))])
    else:
        text = reading.rqa(r.measures)
        rows = [(k, reading.sig(float(v))) for k, v in r.measures.items()]
        rows.append(("radius", reading.sig(float(r.radius))))
        tab = _table(rows, ("measure", "value"))
    return (f"<div><b>{html.escape(title)}</b><p>{html.escape(text)}</p>{tab}</div>")


class Displayable:
    """Mixin: ``result.plot(ax=None)`` draws it, notebooks show ``_repr_html_``."""

    def plot(self, ax: Any = None, names: tuple[str, str] = ("x", "y")) -> Any:
        """Draw this result with matplotlib (on ``ax``, or a new figure); returns the axes.
        ``names`` label a CCM result's two series."""
        return plot_result(self, ax, names)

    def _repr_html_(self) -> str:
        return html_result(self)
