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
             quiet: bool = False, dtype: Any = None, log: Callable[[str], None] | None = None
             ) -> dict[str, Any]:
    """Run the demo into folder ``out``; return the results dictionary (also in results.json).

    ``dtype``: every analysis's precision, float32 (default) or float64.

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
        results, be = _build(tmp, device, backend, dtype, say)
    say(f"[demo] report written to {final / 'index.html'} in {results['total_seconds']:.1f} s "
        f"on {be.info.name} ({be.info.runtime})")
    return results


def _build(out: Path, device: Any, backend: str | None, dtype: Any,
           say: Callable[[str], None]
           ) -> tuple[dict[str, Any], Any]:
    """Every analysis, its figure and numbers, written into the (new, empty) folder ``out``."""
    import pyedmcl as pe
    from clkernels import get_backend
    from pyedmcl.data import coupled_logistic, logistic_map, logistic_network, lorenz63

    plt = _plt()
    be = get_backend(device, backend)
    dev = dict(device, backend=be.name) if (device := be.info.as_dict()) else {}
    results: dict[str, Any] = {"device": dev, "versions": _versions(), "sections": {}}
    sec = results["sections"]
    figures: dict[str, str] = {}
    t_all = time.perf_counter()

    def timed(name: str):
        class _T:
            def __enter__(self_inner):
                self_inner.t = time.perf_counter()
                say(f"[demo] {name} ...")

            def __exit__(self_inner, *exc):
                if exc[0] is None:
                    sec[name]["seconds"] = round(time.perf_counter() - self_inner.t, 3)
        sec[name] = {}
        return _T()

    # 1. embedding dimension, prediction interval, nonlinearity on Lorenz-63 x
    lz = lorenz63(1000, sample_every=10)[:, 0]
    with timed("embed_dimension"):
        ed = pe.embed_dimension(lz, max_E=10, tau=1, Tp=1, dtype=dtype, device=be)
        best_E = int(ed.values[int(np.argmax(ed.rho))])
        sec["embed_dimension"].update(data="lorenz63 x, n=1000, sampled every 0.1 time units", E=_floats(ed.values),
                                      rho=_floats(ed.rho), best_E=best_E)
        fig, ax = plt.subplots(figsize=(5, 3.4))
        ax.plot(ed.values, ed.rho, "o-")
        ax.set(xlabel="E", ylabel="Simplex rho (Tp=1)", title=f"Embedding dimension (best E={best_E})")
        figures["embed_dimension"] = _save(fig, out / "embed_dimension.png")
    with timed("predict_interval"):
        pi = pe.predict_interval(lz, E=best_E, max_Tp=10, dtype=dtype, device=be)
        sec["predict_interval"].update(Tp=_floats(pi.values), rho=_floats(pi.rho))
        fig, ax = plt.subplots(figsize=(5, 3.4))
        ax.plot(pi.values, pi.rho, "o-")
        ax.set(xlabel="Tp", ylabel="Simplex rho", title=f"Prediction interval (E={best_E})")
        figures["predict_interval"] = _save(fig, out / "predict_interval.png")
    with timed("predict_nonlinear"):
        nl = pe.predict_nonlinear(lz, E=best_E, thetas=THETAS, dtype=dtype, device=be)
        sec["predict_nonlinear"].update(theta=_floats(nl.thetas), rho=_floats(nl.rho),
                                        best_theta=float(nl.thetas[int(np.argmax(nl.rho))]))
        fig, ax = plt.subplots(figsize=(5, 3.4))
        ax.plot(nl.thetas, nl.rho, "o-")
        ax.set(xlabel="theta", ylabel="S-map rho", title="Nonlinearity (rho rising with theta)")
        figures["predict_nonlinear"] = _save(fig, out / "predict_nonlinear.png")

    # 2. CCM on the coupled logistic pair (x drives y)
    with timed("ccm"):
        xy = coupled_logistic(1000)
        sizes = list(range(20, 401, 40))
        cc = pe.ccm(xy[:, 0], xy[:, 1], E=2, lib_sizes=sizes, sample=30, seed=7, dtype=dtype,
                    device=be, surrogates=49)
        sig, conv = cc.significance, cc.convergence
        # rho_yx: y's embedding cross-maps x -> evidence that x drives y.
        sec["ccm"].update(data="coupled logistic maps, Sugihara et al. 2012 (x drives y)",
                          lib_sizes=_floats(cc.lib_sizes), rho_x_xmap_y=_floats(cc.rho_xy),
                          rho_y_xmap_x=_floats(cc.rho_yx),
                          detected_driver="x" if cc.rho_yx[-1] > cc.rho_xy[-1] else "y",
                          expected_driver="x", surrogates=f"{sig.n} {sig.method}",
                          p_y_xmap_x=_floats(sig.p_yx), p_x_xmap_y=_floats(sig.p_xy),
                          kendall_tau_y_xmap_x=conv.tau_yx, kendall_p_y_xmap_x=conv.p_yx,
                          kendall_tau_x_xmap_y=conv.tau_xy, kendall_p_x_xmap_y=conv.p_xy)
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for d, mark, lab in (("yx", "o-", "y xmap x (x drives y)"),
                             ("xy", "s-", "x xmap y (y drives x)")):
            line, = ax.plot(cc.lib_sizes, getattr(cc, f"rho_{d}"), mark, label=lab)
            lo, hi = sig.band(d)  # the surrogates' 5-95% band: the null
            ax.fill_between(cc.lib_sizes, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        ax.set(xlabel="library size", ylabel="cross-map rho", title="CCM convergence")
        ax.legend()
        figures["ccm"] = _save(fig, out / "ccm.png")

    # 3. all-to-all causal map on a logistic network with a known graph
    if hasattr(pe, "xmap") or "xmap" in dir(pe):
        with timed("xmap"):
            X, A = logistic_network(8, 600)
            M = pe.xmap(X, E=3, tau=1, Tp=0, dtype=dtype, device=be, surrogates=199, seed=1)
            rho = np.asarray(getattr(M, "rho", M), dtype=float)
            edges = pe.causal_network(M)  # BH at 0.05: edge j -> i where rho[i, j] beats its null
            sec["xmap"].update(data="8 logistic maps on a random directed graph",
                               rho=rho.tolist(), adjacency=A.tolist(),
                               note="rho[i, j]: library i cross-maps target j "
                                    "(high when j drives i)",
                               edges_fdr_0_05=[[int(a), int(b)] for a, b in
                                               zip(edges["source"], edges["target"], strict=True)],
                               p_value=np.asarray(M.p_value, dtype=float).tolist())
            fig, axs = plt.subplots(1, 2, figsize=(8, 3.6))
            im = axs[0].imshow(rho, vmin=0, vmax=1, cmap="viridis")
            axs[0].set(title="cross-map rho", xlabel="target j", ylabel="library i")
            fig.colorbar(im, ax=axs[0])
            axs[1].imshow(A.T, cmap="Greys")
            axs[1].plot(edges["source"], edges["target"], "o", mfc="none", mec="tab:red",
                        ms=11, label="found (199 surrogates, FDR 0.05)")
            axs[1].set(title="true graph (j drives i)", xlabel="j", ylabel="i")
            axs[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7)
            figures["xmap"] = _save(fig, out / "xmap.png")

    # 4. RQA + recurrence plot of the logistic map
    with timed("rqa"):
        lm = logistic_map(2000, r=3.9)
        rq = pe.rqa(lm, E=3, tau=1, recurrence_rate=0.05, dtype=dtype, device=be)
        measures = {k: float(v) for k, v in rq.as_dict().items()
                    if isinstance(v, int | float | np.floating | np.integer)}
        sec["rqa"].update(data="logistic map r=3.9, n=2000, E=3, tau=1, RR target 0.05",
                          measures=measures)
        pe.recurrence_plot(lm[:1000], E=3, tau=1, recurrence_rate=0.05, size=512,
                           path=str(out / "recurrence_plot.png"), dtype=dtype, device=be)
        figures["recurrence_plot"] = "recurrence_plot.png"

    results["figures"] = figures
    results["total_seconds"] = round(time.perf_counter() - t_all, 3)
    write_text_atomic(out / "results.json", dumps_json(results, indent=1))  # NaN -> null
    from .html import write_index

    write_index(out, results)
    return results, be
