"""Render OpenCL C from the Mako templates in templates/.

One template per operator. A template declares the specialisation values it
needs in a leading comment line::

    ## params: E, TAU, METRIC, WG, TILE

and :func:`render` refuses to render unless every declared parameter is given
(naming the missing ones), so a forgotten value is an error, not a silently
wrong kernel. Values that shape loops are passed here and become compile-time
constants in the generated source.

Templates are found in the installed wheel (``clkernels/_data/templates``) or,
in a source checkout, in the top-level ``templates/`` folder.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from mako.lookup import TemplateLookup

_HERE = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """Folder of shipped data (``templates`` or ``tuning``), installed or in a checkout."""
    installed = _HERE / "_data" / kind
    if installed.is_dir():
        return installed
    checkout = _HERE.parent / kind
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"pyedmcl data folder {kind!r} not found next to {_HERE}")


def template_dirs() -> list[Path]:
    extra = os.environ.get("PYEDMCL_TEMPLATE_DIR")
    dirs = [Path(extra)] if extra else []
    return dirs + [data_dir("templates")]


class TemplateParameterError(ValueError):
    """A template was rendered without a parameter it declares."""


@cache
def _lookup() -> TemplateLookup:
    return TemplateLookup(
        directories=[str(d) for d in template_dirs()],
        strict_undefined=True,
        input_encoding="utf-8",
    )


def template_path(name: str) -> Path:
    for d in template_dirs():
        p = d / name
        if p.is_file():
            return p
    raise FileNotFoundError(f"template {name!r} not found in {[str(d) for d in template_dirs()]}")


@cache
def template_source(name: str) -> str:
    return template_path(name).read_text(encoding="utf-8")


def text_hash(text: str) -> str:
    """Hash of a template text (what tuning entries record as ``template_hash``)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def template_hash(name: str) -> str:
    """Hash of the template text: tuning entries made from another text are stale."""
    return text_hash(template_source(name))


@cache
def declared_params(name: str) -> tuple[str, ...]:
    m = re.search(r"^##\s*params:\s*(.+)$", template_source(name), flags=re.MULTILINE)
    if not m:
        return ()
    return tuple(p.strip() for p in m.group(1).split(",") if p.strip())


def _freeze(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


_render_cache: dict[tuple, str] = {}


def render(name: str, params: dict[str, Any]) -> str:
    """Render template ``name`` with specialisation ``params`` (cached per value set)."""
    key = (name, _freeze(params))
    src = _render_cache.get(key)
    if src is not None:
        return src
    missing = [p for p in declared_params(name) if p not in params]
    if missing:
        raise TemplateParameterError(
            f"template {name!r} needs parameter(s) {', '.join(missing)}; "
            f"it declares {', '.join(declared_params(name))}, got {', '.join(sorted(params))}"
        )
    try:
        src = _lookup().get_template(name).render(**params)
    except NameError as exc:  # strict_undefined: a name the header forgot to declare
        raise TemplateParameterError(f"template {name!r}: {exc}") from exc
    _render_cache[key] = src
    return src


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]
