"""Render OpenCL C from Mako templates.

A template is named by its path under a template root (``knn/knn.cl.mako``) and
declares, in its header, the specialisation values it needs and its version::

    ## params: E, TAU, METRIC, WG, TILE
    ## version: 2

and :func:`render` refuses to render unless every declared parameter is given
(naming the missing ones), so a forgotten value is an error, not a silently
wrong kernel. Values that shape loops are passed here and become compile-time
constants in the generated source.

Roots: ``clkernels/templates`` (clkernels' own kernels and parts) and the folders an
application adds with :func:`add_template_root`. Shared parts are Mako namespaces
imported by absolute name (``<%namespace name="real" file="/_real.mako"/>``).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import settings

if TYPE_CHECKING:
    from mako.lookup import TemplateLookup

_HERE = Path(__file__).resolve().parent

#: template folders, searched in order: those an application adds (its kernels), then
#: clkernels' own (``clkernels/templates``: fills, gathers, conversions, peak probes)
_ROOTS: list[Path] = [_HERE / "templates"]


def add_template_root(path: str | Path) -> None:
    """Search ``path`` for templates (before clkernels' own); idempotent.

    An application keeps its kernels in its own package data and registers the folder
    once at import; templates there may include clkernels' parts (``/_real.mako``).
    """
    path = Path(path).resolve()
    if path not in _ROOTS:
        _ROOTS.insert(len(_ROOTS) - 1, path)
        _lookup.cache_clear()
        template_path.cache_clear()


def template_dirs() -> list[Path]:
    extra = settings.env("TEMPLATE_DIR")
    dirs = [Path(extra)] if extra else []
    return dirs + list(_ROOTS)


class TemplateParameterError(ValueError):
    """A template was rendered without a parameter it declares."""


@cache
def _lookup() -> TemplateLookup:
    # Mako on first render (its import, with the Pygments plugin it loads, is ~50 ms of
    # every process's start, and most never render a template)
    from mako.lookup import TemplateLookup

    return TemplateLookup(
        directories=[str(d) for d in template_dirs()],
        strict_undefined=True,
        input_encoding="utf-8",
    )


@cache
def template_path(name: str) -> Path:
    for d in template_dirs():
        p = d / name
        if p.is_file():
            return p
    raise FileNotFoundError(f"template {name!r} not found in {[str(d) for d in template_dirs()]}")


@cache
def template_source(name: str) -> str:
    return template_path(name).read_text(encoding="utf-8")


@cache
def declared_version(name: str) -> int:
    """The kernel version a template declares in its header (``## version: 3``; 1 if none).

    Tuning entries are keyed by family name and this version: bump it when the kernel's
    meaning or parameter set changes, never for a comment or a reshuffle into parts.
    """
    m = re.search(r"^##\s*version:\s*(\d+)\s*$", template_source(name), flags=re.MULTILINE)
    return int(m.group(1)) if m else 1


@cache
def declared_legacy_hashes(name: str) -> frozenset[str]:
    """Hashes of the template texts whose tuning entries (stamped by text hash, before
    versions existed) count as version 1: ``## legacy-hashes: 93f704e8c195d8c0``."""
    m = re.search(r"^##\s*legacy-hashes:\s*(.+)$", template_source(name), flags=re.MULTILINE)
    return frozenset(m.group(1).split()) if m else frozenset()


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
