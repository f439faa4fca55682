"""Write docs/api.md from the docstrings of the public API (``python docs/gen_api.py``)."""

from __future__ import annotations

import inspect
import re
from importlib import import_module
from pathlib import Path

import pyedmcl

MODULES = ["clkernels", "clkernels.devices", "clkernels.backends.base", "clkernels.tuning",
           "clkernels.peak", "pyedmcl.io", "pyedmcl.data", "pyedmcl.compat.pyedm"]


def section(name: str, obj) -> str:
    try:
        # default values that are functions print their address: drop it (stable output)
        sig = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(obj)))
    except (TypeError, ValueError):
        sig = ""
    doc = inspect.getdoc(obj) or "(no docstring)"
    return f"### `{name}{sig}`\n\n{doc}\n"


def main() -> None:
    out = ["# API reference", "", "Generated from docstrings by `docs/gen_api.py`.", "",
           "## `pyedmcl` (public functions)", ""]
    for name in sorted(pyedmcl.__all__):
        out.append(section(f"pyedmcl.{name}", getattr(pyedmcl, name)))
    for modname in MODULES:
        try:
            mod = import_module(modname)
        except ImportError:
            continue
        out += [f"## `{modname}`", "", inspect.getdoc(mod) or "", ""]
        names = getattr(mod, "__all__", None) or [n for n, v in vars(mod).items()
                                                  if not n.startswith("_") and getattr(v, "__module__", "") == modname
                                                  and (inspect.isfunction(v) or inspect.isclass(v))]
        for n in names:
            out.append(section(f"{modname}.{n}", getattr(mod, n)))
    path = Path(__file__).with_name("api.md")
    path.write_text("\n".join(out))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
