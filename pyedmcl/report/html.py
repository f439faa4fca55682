"""A self-contained index.html for a demo report (no external assets)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

TITLES = {
    "embed_dimension": "Embedding dimension (Simplex skill vs E)",
    "predict_interval": "Prediction interval (Simplex skill vs Tp)",
    "predict_nonlinear": "Nonlinearity (S-map skill vs theta)",
    "ccm": "Convergent cross mapping",
    "xmap": "All-to-all causal map",
    "recurrence_plot": "Recurrence plot",
}


def _table(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
                   for k, v in d.items())
    return f"<table>{rows}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list) and len(v) > 12:
        return json.dumps(v[:12])[:-1] + ", ...]"
    return str(v)


def write_index(out: Path, results: dict[str, Any]) -> Path:
    dev = results.get("device", {})
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>pyedmcl demo report</title>",
        "<style>body{font-family:sans-serif;max-width:960px;margin:auto}"
        "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 6px;"
        "text-align:left;font-size:13px}img{max-width:100%}</style></head><body>",
        "<h1>pyedmcl demo report</h1>",
        f"<p>Device: <b>{html.escape(str(dev.get('name')))}</b> ({html.escape(str(dev.get('runtime')))}, "
        f"backend {html.escape(str(dev.get('backend')))}); total {results.get('total_seconds')} s. "
        "All numbers are in <a href='results.json'>results.json</a>.</p>",
    ]
    for name, sec in results.get("sections", {}).items():
        parts.append(f"<h2>{html.escape(TITLES.get(name, name))}</h2>")
        fig = results.get("figures", {}).get(name)
        if fig:
            parts.append(f"<img src='{html.escape(fig)}' alt='{html.escape(name)}'>")
        flat = {k: v for k, v in sec.items() if k not in ("measures", "rho", "adjacency")
                or not isinstance(v, list | dict)}
        parts.append(_table(flat))
        if name == "rqa":
            parts.append(_table(sec.get("measures", {})))
            rp = results.get("figures", {}).get("recurrence_plot")
            if rp:
                parts.append(f"<h3>{TITLES['recurrence_plot']}</h3><img src='{rp}' alt='recurrence plot'>")
    parts.append("<h2>Software</h2>" + _table(results.get("versions", {})))
    parts.append("</body></html>")
    from .._outputs import write_text_atomic

    return write_text_atomic(out / "index.html", "\n".join(parts))
