"""The worked example of docs/design.md runs as written: a new kernel family made of one
module, one template folder and one registration line is tuned and gives the right
numbers on every device."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np

DOC = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def _blocks() -> tuple[str, str, str]:
    text = DOC.read_text()
    part = text[text.index("## Adding a kernel family"):]
    mako = re.search(r"```mako\n(.*?)```", part, re.S).group(1)
    py = re.findall(r"```python\n(.*?)```", part, re.S)
    return mako, py[0], py[1]


def test_worked_example_family(tmp_path, device, monkeypatch):
    from clkernels import get_backend
    from clkernels.templates import add_template_root
    from clkernels.tuning import tune
    from pyedmcl import kernels

    template, module, registration = _blocks()
    (tmp_path / "templates" / "embed").mkdir(parents=True)
    (tmp_path / "templates" / "embed" / "embed.cl.mako").write_text(template)
    pkg = tmp_path / "example_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "embed.py").write_text(module)
    add_template_root(tmp_path / "templates")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = re.search(r"^\s*(Family\(.*\)),$", registration, re.M).group(1)
    family = eval(line, {"Family": kernels.Family})
    assert (family.name, family.tunables) == ("embed", {"embed": "EMBED"})
    # the family's module is pyedmcl.kernels.embed: the scratch copy stands in for it
    monkeypatch.setitem(sys.modules, family.module, importlib.import_module("example_pkg.embed"))
    monkeypatch.setitem(kernels.FAMILIES, family.name, family)
    assert family.template_dir.name == "embed"
    monkeypatch.setenv("PYEDMCL_TUNING_DIR", str(tmp_path / "tuning"))
    try:
        fam = kernels.registry()["embed"]
        be = get_backend(device)
        spec = {"E": 4, "TAU": 3, "REAL": "float"}
        res = tune(fam, be, spec, 1000, repeats=1, user_root=tmp_path / "tuning")
        assert res.best_params["WG"] in fam.space.params["WG"]
        assert fam.params_for(be, spec, 1000) == res.best_params  # found in the user DB
        x = np.random.default_rng(0).standard_normal(1009).astype(np.float32)
        out = be.empty(1000 * 4, np.float32)
        fam.launch(be, spec, res.best_params, be.to_device(x), 1000, out)
        got = be.to_host(out).reshape(1000, 4)
        want = np.stack([x[9 - 3 * e: 9 - 3 * e + 1000] for e in range(4)], axis=1)
        np.testing.assert_array_equal(got, want)
    finally:
        sys.modules.pop("example_pkg.embed", None)
        sys.modules.pop("example_pkg", None)
        importlib.invalidate_caches()
