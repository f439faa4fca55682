"""Carry tuning entries across a template edit that leaves their kernels unchanged.

An entry is tied to its template's text by ``template_hash``: any edit makes it
stale, which is right when the edit changes what the entry's configuration
compiles to, and wasteful when it only adds a new parameter whose default renders
the old code. ``restamp`` re-renders each stale entry's configuration (its tuned
``params``, ``default_params`` and every timed candidate, with the entry's own
``spec``) from the old template text and from the current one, with ``--default``
values for the new parameters; only when every rendered source is byte-identical
does the entry get the current hash and the new parameters (in ``params``,
``default_params`` and the keys of ``times``). ``--spec`` names a new problem
parameter instead (one the callers pass, e.g. knn's FMA): it is rendered the same way
and recorded in the entry's ``spec``. Anything else stays stale. Run as::

    python -m clkernels.tuning.restamp knn.cl.mako --old-rev HEAD --default QQ=1 tuning/device-*.json
    python -m clkernels.tuning.export tuning/device-*.json --out tuning/defaults.json
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path
from typing import Any

from mako.template import Template

from ..templates import _lookup, template_hash, template_path, text_hash
from .database import atomic_write_json


def _old_text(template: str, rev: str) -> str:
    path = template_path(template)
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path.parent,
                          capture_output=True, text=True, check=True).stdout.strip()
    rel = path.resolve().relative_to(Path(root).resolve())
    return subprocess.run(["git", "show", f"{rev}:{rel.as_posix()}"], cwd=root,
                          capture_output=True, text=True, check=True).stdout


def restamp_entries(entries: list[dict[str, Any]], template: str, kernels: set[str],
                    old_text: str, defaults: dict[str, Any],
                    spec_defaults: dict[str, Any] | None = None) -> tuple[int, int]:
    """Restamp ``entries`` (in place) of ``kernels``; returns (restamped, left stale).

    ``defaults``: new tuned parameters (added to the entry's configurations);
    ``spec_defaults``: new problem parameters (added to the entry's ``spec``, the
    record of what was tuned; callers pass them at run time, not the tuner).
    """
    spec_defaults = spec_defaults or {}
    old_hash = text_hash(old_text)
    new_hash = template_hash(template)
    old = Template(text=old_text, uri=f"restamp-old-{template}", lookup=_lookup(),
                   strict_undefined=True)
    new = _lookup().get_template(template)
    done = stale = 0
    for e in entries:
        if e.get("kernel") not in kernels or e.get("template_hash") != old_hash:
            continue
        if not isinstance(e.get("spec"), dict):  # derived defaults: re-derive them instead
            stale += 1
            continue
        configs = [e["params"], e.get("default_params") or e["params"]]
        configs += [json.loads(k) for k in (e.get("times") or {})]
        same = True
        for p in configs:
            full = {**defaults, **spec_defaults, **e["spec"], **p}  # old text ignores new names
            if old.render(**full) != new.render(**full):
                same = False
                break
        if not same:
            stale += 1
            continue
        e["template_hash"] = new_hash
        e["spec"] = {**spec_defaults, **e["spec"]}
        e["params"] = {**defaults, **e["params"]}
        if e.get("default_params"):
            e["default_params"] = {**defaults, **e["default_params"]}
        if e.get("times"):
            e["times"] = {json.dumps({**defaults, **json.loads(k)}, sort_keys=True): v
                          for k, v in e["times"].items()}
        done += 1
    return done, stale


def _assignments(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in items:
        name, _, val = d.partition("=")
        try:
            out[name] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            out[name] = val
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("template", help="template file name, e.g. knn.cl.mako")
    ap.add_argument("files", nargs="+", type=Path, help="shipped tuning files to update in place")
    ap.add_argument("--old-rev", default="HEAD", help="git revision holding the old template text")
    ap.add_argument("--kernel", action="append", default=None,
                    help="tuning family names using the template (default: all entries' kernels)")
    ap.add_argument("--default", action="append", default=[], metavar="NAME=VALUE",
                    help="value of a new parameter that renders the old code (Python literal)")
    ap.add_argument("--spec", action="append", default=[], metavar="NAME=VALUE",
                    help="value of a new problem (spec) parameter that renders the old code")
    a = ap.parse_args(argv)
    defaults, spec_defaults = _assignments(a.default), _assignments(a.spec)
    old_text = _old_text(a.template, a.old_rev)
    for f in a.files:
        data = json.loads(f.read_text())
        kernels = set(a.kernel) if a.kernel else {e.get("kernel") for e in data["entries"]}
        done, stale = restamp_entries(data["entries"], a.template, kernels, old_text, defaults,
                                      spec_defaults)
        if done:
            atomic_write_json(f, data)
        print(f"{f}: {done} restamped, {stale} left stale (their code changed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
