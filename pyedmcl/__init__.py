"""pyedmcl — Empirical Dynamic Modeling and Recurrence Quantification Analysis on OpenCL.

The public API (see docs/api.md) is loaded lazily so ``import pyedmcl`` stays cheap
and each family (EDM, RQA, all-to-all maps) lives in its own subpackage.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import clkernels as _clkernels

# First thing: clkernels reads PYEDMCL_* variables and keeps pyedmcl's per-user folders
# (its submodules register pip-installed OpenCL runtimes before PyOpenCL loads).
_clkernels.configure(app_name="pyedmcl", env_prefix="PYEDMCL",
                     help_hint="see docs/devices.md", extras_of="pyedmcl")

from . import kernels as _kernels  # noqa: E402  (adds pyedmcl's templates and tuning data)
from ._version import __version__ as __version__  # noqa: E402

#: public name -> module that defines it
_API = {
    "embed": "pyedmcl.embedding",
    "pairwise_distances": "pyedmcl.kernels.distance",
    "list_devices": "clkernels.devices",
    "select_device": "clkernels.devices",
}


def _register(names: dict[str, str]) -> None:
    _API.update(names)


for _mod in ("pyedmcl.edm", "pyedmcl.rqa", "pyedmcl.xmap", "pyedmcl.neighbors",
             "pyedmcl.significance", "pyedmcl.network"):
    try:
        _api = import_module(_mod + "._api")
    except ModuleNotFoundError as _exc:  # a family not built yet
        if _exc.name is None or not _exc.name.startswith(_mod):
            raise
        continue
    _register(_api.API)
    for _name, _target in getattr(_api, "TUNABLES", {}).items():  # tunables above kernels
        _kernels.register_tunable(_name, _target)

#: public functions drawing an elapsed-time line with ``progress=True`` (pyedmcl.progress)
_PROGRESS = {
    "simplex": "Simplex", "smap": "S-map", "ccm": "CCM", "embed_dimension": "embedding scan",
    "predict_interval": "Tp scan", "predict_exclusion_radius": "exclusion-radius scan",
    "predict_nonlinear": "theta scan", "rqa": "RQA", "cross_rqa": "cross-RQA",
    "joint_rqa": "joint RQA", "recurrence_plot": "recurrence plot",
}


#: public functions taking labelled data (xarray, time-indexed pandas: pyedmcl.labels)
_LABELLED = {"simplex", "smap", "ccm", "embed_dimension", "predict_interval",
             "predict_exclusion_radius", "predict_nonlinear", "generate", "multiview", "xmap",
             "rqa", "cross_rqa", "joint_rqa", "recurrence_plot", "recurrence_network"}


def _public(name: str, mod: str) -> Any:
    obj = getattr(import_module(mod), name)
    renames = getattr(obj, "__renamed__", None)  # deprecated keywords (pyedmcl._deprecation)
    if name in _LABELLED:
        from .labels import labelled

        obj = labelled(obj)
    if name in _PROGRESS:
        from .progress import with_progress

        obj = with_progress(obj, _PROGRESS[name])
    if name in _LABELLED or name in _PROGRESS:
        if renames:  # translated before the wrappers above bind the signature
            from ._deprecation import renamed_keywords

            obj = renamed_keywords(**renames)(obj)
        obj.__module__, obj.__qualname__ = __name__, name  # pickles as pyedmcl.NAME
        globals()[name] = obj  # one wrapper per name: ``pe.rqa is pe.rqa``
    return obj


# A public function named like its subpackage (``rqa``, ``xmap``) would be shadowed:
# importing ``pyedmcl.rqa`` binds the *package* as the attribute ``pyedmcl.rqa``. Bind
# those functions eagerly so ``pe.rqa(...)`` is always the function.
for _name, _mod in list(_API.items()):
    if _mod.startswith(f"pyedmcl.{_name}.") or _mod == f"pyedmcl.{_name}":
        globals()[_name] = _public(_name, _mod)


def __getattr__(name: str) -> Any:
    mod = _API.get(name)
    if mod is None:
        raise AttributeError(f"module 'pyedmcl' has no attribute {name!r}")
    return _public(name, mod)


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))


__all__ = sorted(_API)
