"""A self-contained index.html for a demo report (no external assets).

Reads like a short paper: the findings first, then one section per analysis with its
data, figure, a plain-language reading and its numbers rounded to their precision
(rho to 3 decimals, measures to 3 significant digits), and a footer with the device,
the time each analysis took and the software versions.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..reading import RQA_MEANING, rho, sig

TITLES = {
    "embed_dimension": "1. Embedding dimension: how many lags reconstruct the dynamics",
    "predict_interval": "2. Prediction interval: how far ahead it is predictable",
    "predict_nonlinear": "3. Nonlinearity: does a state-dependent model forecast better",
    "ccm": "4. Convergent cross mapping: who drives whom",
    "xmap": "5. All-to-all causal map of a network",
    "network": "6. Direct causal links: lags, convergence, partial cross maps",
    "rqa": "7. Recurrence quantification",
    "rqa_threshold": "8. RQA against the radius: how much the threshold matters",
}

CSS = """
body{font-family:Georgia,'Times New Roman',serif;max-width:900px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
.sub{color:#666;margin-top:0}.data{color:#555;font-size:.92em}
.reading{background:#f4f7fb;border-left:4px solid #4a78b5;padding:.5em .8em}
figure{margin:.8em 0}figure img{max-width:100%;border:1px solid #eee}
table{border-collapse:collapse;margin:.6em 0;font-family:sans-serif;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}
td.l,th.l{text-align:left}ul.findings li{margin:.3em 0}
footer{margin-top:2.5em;border-top:1px solid #ddd;font-size:.85em;color:#555}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _row_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _transposed(label: str, xs: list[Any], ys: list[Any], ylabel: str = "rho") -> str:
    """A two-row table: parameter values across, rho below (fits a page width)."""
    head = f"<tr><th class='l'>{_e(label)}</th>" + "".join(f"<th>{_e(x)}</th>" for x in xs) + "</tr>"
    row = f"<tr><td class='l'>{_e(ylabel)}</td>" + "".join(f"<td>{_e(y)}</td>" for y in ys) + "</tr>"
    return f"<table>{head}{row}</table>"


def _numbers(name: str, sec: dict[str, Any]) -> str:
    """The section's numbers, rounded to their precision."""
    if name == "embed_dimension":
        return _transposed("E", [int(e) for e in sec["E"]], [rho(v) for v in sec["rho"]])
    if name == "predict_interval":
        return _transposed("Tp", [int(t) for t in sec["Tp"]], [rho(v) for v in sec["rho"]])
    if name == "predict_nonlinear":
        return _transposed("theta", [f"{t:g}" for t in sec["theta"]], [rho(v) for v in sec["rho"]])
    if name == "ccm":
        return _row_table(["library size", "y xmap x (x drives y?)", "x xmap y (y drives x?)"],
                          [[str(int(L)), rho(a), rho(b)] for L, a, b in
                           zip(sec["lib_sizes"], sec["rho_y_xmap_x"], sec["rho_x_xmap_y"],
                               strict=True)])
    if name == "xmap":
        return ""  # the heatmap is the table; every value is in results.json
    if name == "network":
        return _row_table(["driver", "driven", "cross-map lag", "rho at that lag"],
                          [[f"x{a}", f"x{b}", str(lag), rho(r)] for a, b, lag, r in sec["edges"]])
    if name == "rqa":
        m = sec.get("measures", {})
        rows = [[k, sig(m[k]), RQA_MEANING.get(k, "")] for k in m
                if k in RQA_MEANING]
        t = _row_table(["measure", "value", "what it indicates"], rows)
        return t.replace("<td>", "<td class='l'>").replace("<th>", "<th class='l'>")
    if name == "rqa_threshold":
        shown = [m for m in ("RR", "DET", "LAM", "RTE") if m in sec]
        return _row_table(["radius", *shown],
                          [[sig(r), *(sig(sec[m][i]) for m in shown)]
                           for i, r in enumerate(sec.get("radius", []))])
    return ""


def _finding(name: str, sec: dict[str, Any]) -> str:
    if name == "embed_dimension":
        return f"Lorenz-63 is best embedded with E = {sec['best_E']} (Simplex rho {rho(max(sec['rho']))})."
    if name == "predict_interval":
        return (f"Forecast skill decays from {rho(sec['rho'][0])} (Tp = 1) to "
                f"{rho(sec['rho'][-1])} (Tp = {int(sec['Tp'][-1])}): chaos.")
    if name == "predict_nonlinear":
        from ..reading import is_nonlinear

        nl = is_nonlinear(sec["theta"], sec["rho"])
        return (f"S-map skill peaks at theta = {sec['best_theta']:g}: "
                + ("nonlinear dynamics." if nl else "no sign of nonlinearity."))
    if name == "ccm":
        ok = sec["detected_driver"] == sec["expected_driver"]
        return (f"CCM finds {sec['detected_driver']} driving the other series"
                + (" (the known direction)." if ok else f" (expected {sec['expected_driver']})."))
    if name == "xmap":
        return f"The cross-map matrix ranks true network links first with AUC {sec['link_auc']:.2f}."
    if name == "network":
        return (f"Of a 5-series network's {len(sec['true_edges'])} direct links, "
                f"{sec['true_found']} are found with {sec['false_found']} false ones "
                f"(the pairwise maps alone passed {sec['pairwise_edges']}).")
    if name == "rqa":
        m = sec["measures"]
        return f"The logistic map's recurrences are {sig(100 * m['DET'])}% deterministic (DET)."
    if name == "rqa_threshold" and sec.get("radius"):
        return (f"From radius {sig(sec['radius'][0])} to {sig(sec['radius'][-1])} the "
                f"recurrence rate grows from {sig(100 * sec['RR'][0])}% to "
                f"{sig(100 * sec['RR'][-1])}% and DET from {sig(sec['DET'][0])} to "
                f"{sig(sec['DET'][-1])}.")
    return ""


def write_index(out: Path, results: dict[str, Any]) -> Path:
    """Write ``out/index.html`` for ``results`` (the demo's results dictionary)."""
    dev = results.get("device", {})
    secs = results.get("sections", {})
    figs = results.get("figures", {})
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'><title>pyedmcl demo report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>What EDM and RQA say about five model systems</h1>",
        "<p class='sub'>A pyedmcl demo report. The data come from models whose answers are "
        "known (an attractor's dimension, a causal direction, a network's links), so each "
        "result can be checked against the truth.</p>",
        "<h2>Findings</h2><ul class='findings'>",
        *[f"<li>{_e(_finding(n, s))}</li>" for n, s in secs.items() if _finding(n, s)],
        "</ul>",
    ]
    for name, sec in secs.items():
        parts.append(f"<h2>{_e(TITLES.get(name, name))}</h2>")
        if sec.get("data"):
            parts.append(f"<p class='data'><b>Data:</b> {_e(sec['data'])}.</p>")
        fig = figs.get(name) or (figs.get("recurrence_plot") if name == "rqa" else None)
        if name == "rqa" and figs.get("recurrence_plot"):
            fig = figs["recurrence_plot"]
        if fig:
            parts.append(f"<figure><img src='{_e(fig)}' alt='{_e(name)}'></figure>")
        if sec.get("reading"):
            parts.append(f"<p class='reading'>{_e(sec['reading'])}</p>")
        parts.append(_numbers(name, sec))
    timing = ", ".join(f"{n.replace('_', ' ')} {s.get('seconds', 0):.1f} s"
                       for n, s in secs.items())
    vers = ", ".join(f"{k} {v}" for k, v in results.get("versions", {}).items())
    parts.append(
        "<footer><p>Computed on <b>" + _e(dev.get("name")) + "</b> (" + _e(dev.get("runtime"))
        + ", backend " + _e(dev.get("backend")) + ", " + _e(results.get("dtype", "float32"))
        + f") in {float(results.get('total_seconds', 0)):.1f} s: " + _e(timing)
        + " (first runs include building the kernels).</p><p>" + _e(vers)
        + ". Every number: <a href='results.json'>results.json</a>.</p></footer>")
    parts.append("</body></html>")
    from .._outputs import write_text_atomic

    return write_text_atomic(out / "index.html", "\n".join(parts))
