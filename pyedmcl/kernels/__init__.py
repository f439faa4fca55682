"""The tunable kernel families of pyedmcl, by name (what ``pyedmcl tune`` offers).

Each family is a :class:`clkernels.tuning.TunableKernel`; science modules add
theirs to :data:`REGISTRY` by listing them in :func:`registry`.
"""

from __future__ import annotations

from importlib import import_module

from clkernels.tuning import TunableKernel

#: kernel name -> "module:attribute" of its TunableKernel instance (imported lazily)
_FAMILIES = {
    "pairwise_distance": "pyedmcl.kernels.distance:PAIRWISE_DISTANCE",
    "knn": "pyedmcl.edm.knn:KNN",
    "lookup": "pyedmcl.edm.lookup:LOOKUP",
    "knn_scan": "pyedmcl.edm.scan_fused:KNN_SCAN",
    "smap": "pyedmcl.kernels.smap:SMAP",
    "rqa_lines": "pyedmcl.rqa.dnr:RQA_LINES",
    "knn_backend": "pyedmcl.neighbors.auto:KNN_BACKEND",
    "xmap_knn": "pyedmcl.xmap.tuning:XMAP_KNN",
    "xmap_skill": "pyedmcl.xmap.tuning:XMAP_SKILL",
    "xmap_scan": "pyedmcl.xmap.tuning:XMAP_SCAN",
}


def register(name: str, target: str) -> None:
    _FAMILIES[name] = target


def registry() -> dict[str, TunableKernel]:
    out = {}
    for name, target in _FAMILIES.items():
        mod, _, attr = target.partition(":")
        out[name] = getattr(import_module(mod), attr)
    return out
