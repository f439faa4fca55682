"""The tunable kernel families of pyedmcl, by name (what ``pyedmcl tune`` offers).

Each family is a :class:`clkernels.tuning.TunableKernel`. The kernel families of this
package are listed in ``_FAMILIES``; a package above (an analysis with a tunable choice
of its own, e.g. the neighbours' back-end) adds its own with :func:`register` -- the
``FAMILIES`` of its ``_api`` module, registered on ``import pyedmcl`` -- so this package
never names the analyses built on it.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from clkernels.templates import add_template_root
from clkernels.tuning import TunableKernel
from clkernels.tuning.database import add_shipped_dir

_PACKAGE = Path(__file__).resolve().parents[1]


def _data_dir(installed: str, checkout: str) -> Path:
    """A data folder of the repository root, found from an installed wheel first (where
    it is ``pyedmcl/<installed>``, force-included by pyproject.toml), then from a source
    checkout (``<repository>/<checkout>``, beside ``pyedmcl/``)."""
    for path in (_PACKAGE / installed, _PACKAGE.parent / checkout):
        if path.is_dir():
            return path
    raise FileNotFoundError(f"pyedmcl's {checkout}/ folder is neither at {_PACKAGE / installed} "
                            f"(an installed wheel) nor at {_PACKAGE.parent / checkout} (a "
                            "source checkout)")


#: the family templates (``templates/<family>/``, shared parts in ``templates/common/``)
TEMPLATES = _data_dir("_templates", "templates")
#: the shipped tuning database, one JSON file per measured device plus the defaults
TUNING_DB = _data_dir("_tuning", "tuning")
add_template_root(TEMPLATES)
add_shipped_dir(TUNING_DB)

#: kernel name -> "module:attribute" of its TunableKernel instance (imported lazily)
_FAMILIES = {
    "pairwise_distance": "pyedmcl.kernels.distance:PAIRWISE_DISTANCE",
    "knn": "pyedmcl.kernels.knn:KNN",
    "lookup": "pyedmcl.kernels.lookup:LOOKUP",
    "knn_scan": "pyedmcl.kernels.knn_scan:KNN_SCAN",
    "smap": "pyedmcl.kernels.smap:SMAP",
    "rqa_lines": "pyedmcl.kernels.rqa_lines:RQA_LINES",
    "xmap_knn": "pyedmcl.kernels.xmap:XMAP_KNN",
    "xmap_skill": "pyedmcl.kernels.xmap:XMAP_SKILL",
    "xmap_scan": "pyedmcl.kernels.xmap:XMAP_SCAN",
}


def register(name: str, target: str) -> None:
    """Add the family ``target`` (``"module:attribute"``, imported lazily) as ``name``."""
    _FAMILIES[name] = target


def registry() -> dict[str, TunableKernel]:
    out = {}
    for name, target in _FAMILIES.items():
        mod, _, attr = target.partition(":")
        out[name] = getattr(import_module(mod), attr)
    return out
