"""The kernel-family contract: the registry is the set of families, each one module and
one template folder, and every template part stays at most 250 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyedmcl import kernels

#: modules of pyedmcl/kernels/ that are no family (the package itself)
NOT_FAMILIES = {"__init__"}
#: template folders shared by several families
SHARED = {"common"}
MAX_PART_LINES = 250
KERNELS_DIR = Path(kernels.__file__).resolve().parent


def test_registry_is_the_set_of_family_modules_and_template_folders():
    modules = {p.stem for p in KERNELS_DIR.glob("*.py")} - NOT_FAMILIES
    folders = {p.name for p in kernels.TEMPLATES.iterdir() if p.is_dir()} - SHARED
    assert set(kernels.FAMILIES) == modules == folders
    for fam in kernels.FAMILIES.values():
        assert any(fam.template_dir.glob("*.cl.mako")), fam.name


def test_tune_offers_the_tunable_families_kernels():
    """``pyedmcl tune`` offers each tunable family's kernels (and the tunables above the
    kernels, registered by name); each is the module's instance and renders its folder's
    templates (or reuses another family's, as xmap's k-NN kernels do)."""
    import importlib

    reg = kernels.registry()
    assert list(reg) == kernels.tunable_names()
    for fam in kernels.FAMILIES.values():
        mod = importlib.import_module(fam.module)
        for name, attr in fam.tunables.items():
            assert reg[name] is getattr(mod, attr) and reg[name].name == name
            assert reg[name].template.split("/")[0] in kernels.FAMILIES
    assert kernels.fixed_families() == ["rqa_band", "rqa_density", "rqa_network"]
    assert not set(kernels.fixed_families()) & set(reg)
    with pytest.raises(ValueError, match="knn"):
        kernels.register_tunable("knn", "pyedmcl.kernels.knn:KNN")


def test_template_parts_at_most_250_lines():
    parts = sorted(kernels.TEMPLATES.glob("*/*.mako"))
    assert len(parts) > 20
    long = {p.relative_to(kernels.TEMPLATES).as_posix(): n for p in parts
            if (n := len(p.read_text().splitlines())) > MAX_PART_LINES}
    assert long == {}, f"split these parts (at most {MAX_PART_LINES} lines each): {long}"
