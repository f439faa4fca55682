"""``pyedmcl demo``: run every analysis on bundled sample data and write a report.

The report folder holds one PNG per analysis, ``results.json`` (every number,
the device and software versions; valid JSON, NaN -> null) and ``index.html`` tying
them together. It is built in a hidden sibling folder and renamed into place when
complete, and carries pyedmcl's ``.pyedmcl-owned`` marker (see :mod:`pyedmcl._outputs`). Data
come from documented models (:mod:`pyedmcl.data`), so the expected answers are
known: the CCM pair has a known causal direction, the network a known graph.
The whole run is sized to finish in well under a minute on a 2-core CPU.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._outputs import atomic_file, dumps_json, write_text_atomic

THETAS = [0.0, 0.1, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    out = {"python": platform.python_version(), "pyedmcl": __version__}
    for pkg in ("numpy", "pyopencl", "mako", "matplotlib", "pocl-binary-distribution"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("the demo report draws plots with matplotlib: "
                          "pip install 'pyedmcl[plot]'") from exc
    return plt


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    _plt().close(fig)
    return path.name


def _floats(a: Any) -> list[float]:
    return [float(v) for v in np.asarray(a, dtype=float).ravel()]


def run_demo(out: str | Path, *, device: Any = None, backend: str | None = None,
             quiet: bool = False, dtype: Any = None, log: Callable[[str], None] | None = None,
             progress: bool | None = None) -> dict[str, Any]:
    """Run the demo into folder ``out``; return the results dictionary (also in results.json).

    ``dtype``: every analysis's precision, float32 (default) or float64. ``progress``: a
    bar over the sections on stderr (``None``: unless ``quiet``).

    The report is built in a hidden sibling folder and renamed to ``out`` once complete,
    so ``out`` never holds half a report; a report already there (one pyedmcl wrote) is
    replaced only then. Any other existing ``out`` (a folder pyedmcl did not write, a
    file, the current directory) is refused with a ``ValueError`` and left alone. Two
    demos into one folder at once: the second is refused
    (:class:`~pyedmcl._outputs.OutputBusyError`).
    """
    from .._outputs import DEMO_REPORT, atomic_dir, check_replaceable, output_lock

    say = log or (lambda s: None if quiet else print(s, flush=True))
    final = Path(out)
    check_replaceable(final, DEMO_REPORT)  # before any work
    _plt()
    with output_lock(final, what="demo report"), atomic_dir(final, DEMO_REPORT) as tmp:
        results, be = _build(tmp, device, backend, dtype,
                             not quiet if progress is None else progress)
    say(f"[demo] report written to {final / 'index.html'} in {results['total_seconds']:.1f} s "
        f"on {be.info.name} ({be.info.runtime})")
    return results


#: demo sections, in order, with the progress bar's label
SECTIONS = (("embed_dimension", "embedding dimension"), ("predict_interval", "prediction interval"),
            ("predict_nonlinear", "nonlinearity"), ("ccm", "CCM"), ("xmap", "all-to-all map"),
            ("network", "direct causal links"), ("rqa", "RQA and recurrence plot"),
            ("rqa_threshold", "RQA against the radius"))

#: the radii of the "RQA vs radius" section (the logistic map lies in [0, 1])
DEMO_RADII = [0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16, 0.2]


def cluster_order(sim: np.ndarray) -> list[int]:
    """Series ordered by average-linkage agglomerative clustering of a similarity matrix.

    The two most similar clusters (mean of the symmetrised similarity over their members,
    diagonal ignored) merge first; the final order lists each merged cluster's members
    together, so related series sit side by side in a heatmap. Deterministic, NumPy only.
    """
    S = np.asarray(sim, dtype=float)
    S = np.nan_to_num((S + S.T) / 2, nan=-np.inf)
    clusters: list[list[int]] = [[i] for i in range(S.shape[0])]
    while len(clusters) > 1:
        best, pair = -np.inf, (0, 1)
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                v = S[np.ix_(clusters[a], clusters[b])].mean()
                if v > best:
                    best, pair = v, (a, b)
        a, b = pair
        clusters[a] = clusters[a] + clusters[b]
        del clusters[b]
    return clusters[0]


def link_auc(rho: np.ndarray, adjacency: np.ndarray) -> float:
    """Probability that a true link j -> i has a higher rho[i, j] than a non-link (ROC AUC,
    Mann-Whitney, ties counted half; the diagonal left out)."""
    n = rho.shape[0]
    off = ~np.eye(n, dtype=bool)
    truth = np.asarray(adjacency).T.astype(bool)[off]  # adjacency[j, i]: j drives i
    score = np.asarray(rho, dtype=float)[off]
    pos, neg = score[truth], score[~truth]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(gt / (pos.size * neg.size))


#: the data of the first three sections
LZ_DATA = "Lorenz (1963) attractor, x coordinate, 1000 points sampled every 0.1 time units"


class _Timed:
    """A section of the report: its dict in ``sections`` (made on entry), the progress
    bar's label while it runs, and its ``seconds`` once it ends without an error."""

    def __init__(self, sections: dict[str, Any], bar: Any, name: str):
        self.sections, self.bar, self.name = sections, bar, name
        sections[name] = {}

    def __enter__(self) -> None:
        self.t = time.perf_counter()
        self.bar.set_description(f"pyedmcl demo: {dict(SECTIONS)[self.name]}")

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.sections[self.name]["seconds"] = round(time.perf_counter() - self.t, 2)
            self.bar.update()


def rqa_vs_radius(out: Path, series: np.ndarray, dtype: Any, be: Any
                  ) -> tuple[dict[str, Any], str]:
    """The "RQA vs radius" section: :func:`pyedmcl.rqa_grid` of ``series`` over
    :data:`DEMO_RADII` (one run per radius) and its figure, saved in ``out``; returns the
    section's numbers and the figure's file name."""
    import pyedmcl as pe

    g = pe.rqa_grid(series, E=3, tau=1, radius=DEMO_RADII, dtype=dtype, device=be)
    shown = ["RR", "DET", "LAM", "RTE"]
    fig, axs = _plt().subplots(2, 2, figsize=(7.0, 4.8), sharex=True)
    pe.plot_rqa_vs_radius(g, measures=shown, axes=axs, logx=True)
    fig.suptitle(f"RQA measures against the radius ({series.size} steps, E = 3)", fontsize=10)
    name = _save(fig, out / "rqa_vs_radius.png")
    sec = {"data": f"logistic map at r = 3.9, first {series.size} steps, E = 3, tau = 1, "
                   f"{len(DEMO_RADII)} radii in one rqa_grid call",
           "radius": _floats(g["radius"]), **{m: _floats(g[m]) for m in shown},
           "reading": "Every measure depends on the radius: RR grows with it by "
                      "construction, and DET, LAM and the recurrence-time entropy RTE move "
                      "with it. Where a measure changes slowly with the radius its value "
                      "does not hinge on the exact threshold; to compare records, fix the "
                      "recurrence rate rather than the radius."}
    return sec, name


def _network(out: Path, dtype: Any, be: Any) -> tuple[dict[str, Any], str]:
    """The direct-links section: ``pe.causal_network`` on 5 logistic maps coupled as a
    chain with a fork and a bystander; its numbers and its drawing against the true graph."""
    import pyedmcl as pe
    from pyedmcl.data import logistic_graph

    A = np.zeros((5, 5))
    A[0, 1] = A[1, 2] = A[1, 3] = 1
    X = logistic_graph(A, 1000, coupling=0.3, r_range=(3.85, 3.95), seed=3)
    net = pe.causal_network(X, E=2, surrogates=99, seed=1, dtype=dtype, device=be)
    pw = pe.causal_network(net.xmap)
    found = set(zip(net.edges["source"], net.edges["target"], strict=True))
    truth = {(int(a), int(b)) for a, b in zip(*np.nonzero(A), strict=True)}
    reasons = {k: int(v) for k, v in net.pruned["reason"].value_counts().items()}
    fig, ax = _plt().subplots(figsize=(4.6, 4.6))
    net.plot(ax, truth=A)
    ax.set(title="direct links found (label: cross-map lag)")
    name = _save(fig, out / "network.png")
    return {"data": "5 logistic maps coupled as x0 -> x1 -> {x2, x3}, x4 a bystander "
                    "(coupling 0.3), 1000 steps, E = 2, 99 surrogates",
            "true_edges": sorted(truth),
            "edges": [[int(r["source"]), int(r["target"]), int(r["lag"]), float(r["rho_lag"])]
                      for r in net.edges.to_dict("records")],
            "pairwise_edges": len(pw), "pruned": reasons,
            "true_found": len(found & truth), "false_found": len(found - truth),
            "reading": (f"The pairwise maps pass {len(pw)} links at a false-discovery rate "
                        f"of 5%; the lag scans, convergence tests and partial cross maps "
                        f"prune {len(net.pruned)} of them ({', '.join(f'{v} {k}' for k, v in reasons.items()) or 'none'}) "
                        f"and keep {len(found)}: {len(found & truth)} of the "
                        f"{len(truth)} true links and {len(found - truth)} others. Blue: "
                        "found and true; red: found, not true; dashed grey: missed.")}, name


def _build(out: Path, device: Any, backend: str | None, dtype: Any, progress: bool
           ) -> tuple[dict[str, Any], Any]:
    """Every analysis, its figure, reading and numbers, written into the (new) folder ``out``."""
    from clkernels import get_backend
    from pyedmcl.data import logistic_map, lorenz63

    from ..progress import Progress

    be = get_backend(device, backend)
    dev = dict(device, backend=be.name) if (device := be.info.as_dict()) else {}
    results: dict[str, Any] = {"device": dev, "versions": _versions(), "sections": {},
                               "dtype": str(dtype or "float32")}
    sec = results["sections"]
    figures: dict[str, str] = {}
    t_all = time.perf_counter()
    bar = Progress(len(SECTIONS) + 1, "pyedmcl demo", progress, unit="section")

    def timed(name: str) -> _Timed:
        return _Timed(sec, bar, name)

    # 1. embedding dimension, prediction interval, nonlinearity on Lorenz-63 x
    lz = lorenz63(1000, sample_every=10)[:, 0]
    with timed("embed_dimension"):
        part, figures["embed_dimension"] = _embed_dimension(out, lz, dtype, be)
        sec["embed_dimension"].update(part)
    best_E = sec["embed_dimension"]["best_E"]
    with timed("predict_interval"):
        part, figures["predict_interval"] = _predict_interval(out, lz, best_E, dtype, be)
        sec["predict_interval"].update(part)
    with timed("predict_nonlinear"):
        part, figures["predict_nonlinear"] = _predict_nonlinear(out, lz, best_E, dtype, be)
        sec["predict_nonlinear"].update(part)
    # 2. CCM on the coupled logistic pair (x drives y)
    with timed("ccm"):
        part, figures["ccm"] = _ccm(out, dtype, be)
        sec["ccm"].update(part)
    # 3. all-to-all causal map on a logistic network with a known graph
    with timed("xmap"):
        part, figures["xmap"] = _xmap(out, dtype, be)
        sec["xmap"].update(part)
    # 4. direct links of a small known graph (pairwise maps, lags, convergence, partial maps)
    with timed("network"):
        part, figures["network"] = _network(out, dtype, be)
        sec["network"].update(part)
    # 5. RQA + recurrence plot of the logistic map
    with timed("rqa"):
        lm = logistic_map(2000, r=3.9)
        part, figures["recurrence_plot"] = _rqa(out, lm, dtype, be)
        sec["rqa"].update(part)
    with timed("rqa_threshold"):
        part, figures["rqa_threshold"] = rqa_vs_radius(out, lm[:600], dtype, be)
        sec["rqa_threshold"].update(part)

    bar.set_description("pyedmcl demo: writing the report")
    results["figures"] = figures
    results["total_seconds"] = round(time.perf_counter() - t_all, 2)
    write_text_atomic(out / "results.json", dumps_json(results, indent=1))  # NaN -> null
    from .html import write_index

    write_index(out, results)
    bar.update()
    bar.close()
    return results, be


def _embed_dimension(out: Path, lz: np.ndarray, dtype: Any, be: Any) -> tuple[dict[str, Any], str]:
    """The embedding-dimension section of series ``lz``: its numbers and figure's name."""
    import pyedmcl as pe

    from .. import reading

    ed = pe.embed_dimension(lz, max_E=10, tau=1, Tp=1, dtype=dtype, device=be)
    part = dict(data=LZ_DATA, E=_floats(ed.values), rho=_floats(ed.rho), best_E=int(ed.best),
                reading=reading.embed_dimension(ed.values, ed.rho))
    fig, ax = _plt().subplots(figsize=(5.2, 3.4))
    ed.plot(ax)
    ax.set(title="Simplex skill vs E (Tp = 1 step = 0.1 time units)")
    return part, _save(fig, out / "embed_dimension.png")


def _predict_interval(out: Path, lz: np.ndarray, best_E: int, dtype: Any, be: Any
                      ) -> tuple[dict[str, Any], str]:
    """The prediction-interval section (Simplex skill against Tp at ``best_E``)."""
    import pyedmcl as pe

    from .. import reading

    pi = pe.predict_interval(lz, E=best_E, max_Tp=10, dtype=dtype, device=be)
    part = dict(data=LZ_DATA, E=best_E, Tp=_floats(pi.values), rho=_floats(pi.rho),
                reading=reading.predict_interval(pi.values, pi.rho))
    fig, ax = _plt().subplots(figsize=(5.2, 3.4))
    ax.plot(pi.values, pi.rho, "o-")
    ax.set(xlabel="prediction interval Tp (steps of 0.1 time units)",
           ylabel="forecast skill rho", title=f"Simplex skill vs horizon (E = {best_E})")
    return part, _save(fig, out / "predict_interval.png")


def _predict_nonlinear(out: Path, lz: np.ndarray, best_E: int, dtype: Any, be: Any
                       ) -> tuple[dict[str, Any], str]:
    """The nonlinearity section (S-map skill against theta at ``best_E``)."""
    import pyedmcl as pe

    from .. import reading

    nl = pe.predict_nonlinear(lz, E=best_E, thetas=THETAS, dtype=dtype, device=be)
    part = dict(data=LZ_DATA, E=best_E, theta=_floats(nl.thetas), rho=_floats(nl.rho),
                best_theta=float(nl.thetas[int(np.argmax(nl.rho))]),
                reading=reading.predict_nonlinear(nl.thetas, nl.rho))
    fig, ax = _plt().subplots(figsize=(5.2, 3.4))
    nl.plot(ax)
    ax.set(title=f"S-map skill vs localisation (E = {best_E}, Tp = 1)")
    return part, _save(fig, out / "predict_nonlinear.png")


def _ccm(out: Path, dtype: Any, be: Any) -> tuple[dict[str, Any], str]:
    """The CCM section: the coupled logistic pair (x drives y), with a surrogate null."""
    import pyedmcl as pe
    from pyedmcl.data import coupled_logistic

    from .. import reading

    xy = coupled_logistic(1000)
    sizes = list(range(20, 401, 40))
    cc = pe.ccm(xy[:, 0], xy[:, 1], E=2, lib_sizes=sizes, sample=30, seed=7, dtype=dtype,
                device=be, surrogates=49)
    sig, conv = cc.significance, cc.convergence
    # rho_yx: y's embedding cross-maps x -> evidence that x drives y.
    part = dict(data="two coupled logistic maps (Sugihara et al. 2012): x drives y "
                     "(coupling 0.1), y feeds back weakly on x (0.02); E = 2, "
                     "30 random libraries per size",
                lib_sizes=_floats(cc.lib_sizes), rho_x_xmap_y=_floats(cc.rho_xy),
                rho_y_xmap_x=_floats(cc.rho_yx),
                detected_driver="x" if cc.rho_yx[-1] > cc.rho_xy[-1] else "y",
                expected_driver="x", surrogates=f"{sig.n} {sig.method}",
                p_y_xmap_x=_floats(sig.p_yx), p_x_xmap_y=_floats(sig.p_xy),
                kendall_tau_y_xmap_x=conv.tau_yx, kendall_p_y_xmap_x=conv.p_yx,
                kendall_tau_x_xmap_y=conv.tau_xy, kendall_p_x_xmap_y=conv.p_xy,
                reading=reading.ccm(cc.lib_sizes, cc.rho_xy, cc.rho_yx,
                                    significance=sig, convergence=conv))
    fig, ax = _plt().subplots(figsize=(5.2, 3.4))
    cc.plot(ax)
    for d, color in (("yx", "C0"), ("xy", "C1")):
        lo, hi = sig.band(d)  # the surrogates' 5-95% band: the null
        ax.fill_between(cc.lib_sizes, lo, hi, color=color, alpha=0.2, lw=0)
    ax.set(title=f"CCM convergence (bands: 5-95% of {sig.n} surrogates)")
    return part, _save(fig, out / "ccm.png")


def _xmap(out: Path, dtype: Any, be: Any) -> tuple[dict[str, Any], str]:
    """The all-to-all section: a logistic network with a known graph, its map, the links
    that pass the surrogate null (FDR 0.05) and how well rho ranks the true links."""
    import pyedmcl as pe
    from pyedmcl.data import logistic_network

    X, A = logistic_network(8, 600)
    M = pe.xmap(X, E=3, tau=1, Tp=0, dtype=dtype, device=be, surrogates=199, seed=1)
    rho = np.asarray(getattr(M, "rho", M), dtype=float)
    edges = pe.causal_network(M)  # BH at 0.05: edge j -> i where rho[i, j] beats its null
    order = cluster_order(rho)
    auc = link_auc(rho, A)
    part = dict(data="8 logistic maps coupled along a random directed graph "
                     f"({int(np.sum(A))} links), 600 steps, E = 3",
                rho=rho.tolist(), adjacency=A.tolist(), order=order, link_auc=auc,
                note="rho[i, j]: library i cross-maps target j (high when j drives i)",
                edges_fdr_0_05=[[int(a), int(b)] for a, b in
                                zip(edges["source"], edges["target"], strict=True)],
                p_value=np.asarray(M.p_value, dtype=float).tolist(),
                reading=(f"A true link j -> i gets a higher rho[i, j] than a "
                         f"non-link in {100 * auc:.0f}% of pairs (ROC AUC "
                         f"{auc:.2f}; 50% is chance). {len(edges)} links pass "
                         "199 surrogates at a false-discovery rate of 5% (circled). "
                         "Series are ordered by clustering of rho; the diagonal "
                         "(a series mapping itself) is left blank."))
    return part, _xmap_figure(out, rho, A, order, edges)


def _xmap_figure(out: Path, rho: np.ndarray, A: np.ndarray, order: list[int], edges: Any
                 ) -> str:
    """The map (clustered, diagonal blank) beside the true links, the found ones circled."""
    plt = _plt()
    fig, axs = plt.subplots(1, 2, figsize=(9.5, 4.0))
    shown = rho[np.ix_(order, order)].copy()
    np.fill_diagonal(shown, np.nan)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    off = shown[np.isfinite(shown)]
    im = axs[0].imshow(shown, cmap=cmap, vmin=float(np.min(off)), vmax=float(np.max(off)))
    ticks = range(len(order))
    names = [f"s{i}" for i in order]
    for a in axs:
        a.set_xticks(list(ticks), names)
        a.set_yticks(list(ticks), names)
    axs[0].set(title="cross-map skill rho[i, j]", xlabel="target series j (cause?)",
               ylabel="library series i (effect?)")
    fig.colorbar(im, ax=axs[0], label="rho")
    truth = np.asarray(A).T[np.ix_(order, order)].astype(float)
    np.fill_diagonal(truth, np.nan)
    gmap = plt.get_cmap("Greys").with_extremes(bad="0.85")
    axs[1].imshow(truth, cmap=gmap, vmin=0, vmax=1.3)
    pos = {int(s): i for i, s in enumerate(order)}
    axs[1].plot([pos[int(j)] for j in edges["source"]], [pos[int(i)] for i in edges["target"]],
                "o", mfc="none", mec="tab:red", ms=11, label="found (FDR 0.05)")
    axs[1].set(title="true links (black: j drives i)", xlabel="driver j", ylabel="driven i")
    axs[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7)
    return _save(fig, out / "xmap.png")


def _rqa(out: Path, lm: np.ndarray, dtype: Any, be: Any) -> tuple[dict[str, Any], str]:
    """The RQA section of the logistic map ``lm`` and its recurrence plot's figure."""
    import pyedmcl as pe

    from .. import reading

    rq = pe.rqa(lm, E=3, tau=1, recurrence_rate=0.05, dtype=dtype, device=be)
    measures = {k: float(v) for k, v in rq.as_dict().items()
                if isinstance(v, int | float | np.floating | np.integer)}
    part = dict(data="logistic map at r = 3.9 (chaotic), 2000 steps, E = 3, tau = 1, "
                     "radius chosen for a 5% recurrence rate",
                measures=measures, reading=reading.rqa(measures))
    n_rp = 500
    img = np.asarray(pe.recurrence_plot(lm[:n_rp], E=3, tau=1, recurrence_rate=0.05,
                                        size=512, dtype=dtype, device=be))
    n_vec = n_rp - 2
    fig, ax = _plt().subplots(figsize=(4.6, 4.3))
    ax.imshow(img, cmap="binary", origin="lower", extent=(0, n_vec, 0, n_vec),
              interpolation="nearest", vmin=0, vmax=1)
    ax.set(xlabel="time i (steps)", ylabel="time j (steps)",
           title=f"Recurrence plot, first {n_rp} steps")
    return part, _save(fig, out / "recurrence_plot.png")
