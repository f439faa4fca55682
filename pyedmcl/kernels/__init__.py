"""The kernel families of pyedmcl: their registry, their templates, the shipped tuning data.

A kernel family is one module here (``pyedmcl/kernels/<family>.py``: specialisation,
launch, and for a tunable family its tuning space and tuning case) and one template
folder (``templates/<family>/`` at the repository root; parts shared by several families
in ``templates/common/``). :data:`FAMILIES` lists every family and the
:class:`clkernels.tuning.TunableKernel` instances it tunes: most tune one kernel, ``xmap``
tunes three (``xmap_knn``, ``xmap_scan``, ``xmap_skill``), the fixed families
(``rqa_band``, ``rqa_density``, ``rqa_network``) none -- their few launch parameters
follow from device limits.

What ``pyedmcl tune`` offers is :func:`registry`: the tunable kernels of the families,
plus tunables that are no kernel family -- a package above adds those with
:func:`register_tunable` (the neighbours' back-end choice, ``knn_backend``: the
``TUNABLES`` of ``pyedmcl/neighbors/_api.py``, added on ``import pyedmcl``), so this
package never names the analyses built on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Family:
    """One kernel family: its module and template folder, and the tunable kernels it
    defines (tuning name -> attribute of the module; empty for a fixed family)."""

    name: str
    tunables: dict[str, str] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return f"{__name__}.{self.name}"

    @property
    def template_dir(self) -> Path:
        return TEMPLATES / self.name

    @property
    def tunable(self) -> bool:
        return bool(self.tunables)


#: every kernel family, by name (= its module and its template folder)
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("distance", {"pairwise_distance": "PAIRWISE_DISTANCE"}),
    Family("knn", {"knn": "KNN"}),
    Family("knn_scan", {"knn_scan": "KNN_SCAN"}),
    Family("lookup", {"lookup": "LOOKUP"}),
    Family("smap", {"smap": "SMAP"}),
    Family("xmap", {"xmap_knn": "XMAP_KNN", "xmap_skill": "XMAP_SKILL",
                    "xmap_scan": "XMAP_SCAN"}),
    Family("rqa_lines", {"rqa_lines": "RQA_LINES"}),
    Family("rqa_band"),
    Family("rqa_density"),
    Family("rqa_network"),
)}

#: tunables that are no kernel family: tuning name -> "module:attribute" (imported lazily)
_OTHER_TUNABLES: dict[str, str] = {}


def register_tunable(name: str, target: str) -> None:
    """Offer ``target`` (``"module:attribute"`` of a :class:`TunableKernel`, imported
    lazily) to ``pyedmcl tune`` as ``name``: for a package above with a tunable choice of
    its own that is no kernel family."""
    if _OTHER_TUNABLES.get(name, target) != target or any(name in f.tunables
                                                          for f in FAMILIES.values()):
        raise ValueError(f"tunable {name!r} is already registered")
    _OTHER_TUNABLES[name] = target


def tunable_names() -> list[str]:
    """The names ``pyedmcl tune`` offers, without importing a family."""
    return [n for f in FAMILIES.values() for n in f.tunables] + list(_OTHER_TUNABLES)


def fixed_families() -> list[str]:
    """The families with nothing to tune (``pyedmcl tune --list`` names them apart)."""
    return [name for name, fam in FAMILIES.items() if not fam.tunable]


def registry() -> dict[str, TunableKernel]:
    """Every tunable, by tuning name: the tunable families' kernels, then the others."""
    out = {name: getattr(import_module(fam.module), attr)
           for fam in FAMILIES.values() for name, attr in fam.tunables.items()}
    for name, target in _OTHER_TUNABLES.items():
        mod, _, attr = target.partition(":")
        out[name] = getattr(import_module(mod), attr)
    return out
