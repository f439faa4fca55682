"""pyedmcl — Empirical Dynamic Modeling and Recurrence Quantification Analysis on OpenCL.

The public API (see DESIGN.md) is loaded lazily so ``import pyedmcl`` stays cheap
and each family (EDM, RQA, all-to-all maps) lives in its own subpackage.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import clkernels as _clkernels  # noqa: F401  (registers pip-installed OpenCL runtimes first)

__version__ = "0.1.0"

#: public name -> module that defines it
_API = {
    "embed": "pyedmcl.embedding",
    "pairwise_distances": "pyedmcl.kernels.distance",
    "list_devices": "clkernels.devices",
    "select_device": "clkernels.devices",
}


def _register(names: dict[str, str]) -> None:
    _API.update(names)


for _mod in ("pyedmcl.edm", "pyedmcl.rqa", "pyedmcl.xmap", "pyedmcl.neighbors"):
    try:
        _register(import_module(_mod + "._api").API)
    except ModuleNotFoundError as _exc:  # a family not built yet
        if _exc.name is None or not _exc.name.startswith(_mod):
            raise

# A public function named like its subpackage (``rqa``, ``xmap``) would be shadowed:
# importing ``pyedmcl.rqa`` binds the *package* as the attribute ``pyedmcl.rqa``. Bind
# those functions eagerly so ``pe.rqa(...)`` is always the function.
for _name, _mod in list(_API.items()):
    if _mod.startswith(f"pyedmcl.{_name}.") or _mod == f"pyedmcl.{_name}":
        globals()[_name] = getattr(import_module(_mod), _name)


def __getattr__(name: str) -> Any:
    mod = _API.get(name)
    if mod is None:
        raise AttributeError(f"module 'pyedmcl' has no attribute {name!r}")
    return getattr(import_module(mod), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))


__all__ = sorted(_API)
