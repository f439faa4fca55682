"""clkernels stands alone: it names no application, and an application names itself.

clkernels could be published on its own: its sources never mention pyedmcl, and its
settings (environment-variable prefix, per-user folder names) come from
:func:`clkernels.configure`, which pyedmcl calls on import (``PYEDMCL_*``). Alone, it
reads ``CLKERNELS_*``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import CPU_DEVICE, TEST_DEVICES

import clkernels
from clkernels import settings

REPO = Path(__file__).resolve().parents[1]
needs_cpu = pytest.mark.skipif(CPU_DEVICE not in TEST_DEVICES, reason="no CPU device builds")
#: every setting clkernels reads from the environment (:mod:`clkernels.settings`)
SETTINGS = ("DEVICE", "BACKEND", "NO_PROBE", "QUIET", "BUILD_OPTIONS", "BUILD_NOTICE_S",
            "CACHE_DIR", "TUNING_DIR", "TEMPLATE_DIR", "DEVICE_MEMORY_LIMIT", "MEMORY_POOL",
            "NO_REGISTER", "ICD_DIR", "OWNS_POCL_CACHE")


def test_sources_name_no_application():
    """No file of clkernels (code, templates, docstrings) names pyedmcl or its variables."""
    hits = []
    for p in sorted((REPO / "clkernels").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if re.search("pyedmcl", line, flags=re.IGNORECASE):
                    hits.append(f"{p.relative_to(REPO)}:{i}: {line.strip()}")
    assert hits == []


def test_pyedmcl_configures_its_prefix():
    """Importing pyedmcl (conftest does) keeps every PYEDMCL_* variable's meaning."""
    s = settings.current()
    assert (s.app_name, s.env_prefix) == ("pyedmcl", "PYEDMCL")
    assert [settings.env_name(n) for n in SETTINGS] == [f"PYEDMCL_{n}" for n in SETTINGS]
    # and every one of them is read through settings: none is spelled out in clkernels
    src = "\n".join(p.read_text() for p in (REPO / "clkernels").rglob("*.py"))
    for name in SETTINGS:
        assert re.search(rf'env(_name)?\("{name}"', src) or re.search(rf'flag\("{name}"', src), name


def test_env_reads_the_configured_prefix(monkeypatch):
    monkeypatch.setenv("PYEDMCL_BUILD_NOTICE_S", "2.5")
    monkeypatch.setenv("CLKERNELS_BUILD_NOTICE_S", "9")
    assert clkernels.env("BUILD_NOTICE_S") == "2.5"
    assert clkernels.env("NO_SUCH_SETTING", "x") == "x"
    assert not settings.flag("NO_SUCH_SETTING")


def test_configure_after_registration_warns(monkeypatch):
    """Registration read NO_REGISTER, ICD_DIR and CACHE_DIR under the first settings:
    configuring others afterwards says so; configuring the same ones again is silent."""
    monkeypatch.setattr(settings, "_settings", settings.current())  # restored afterwards
    with pytest.warns(RuntimeWarning, match="after OpenCL runtimes were registered"):
        clkernels.configure(app_name="other", env_prefix="OTHER")
    assert settings.env_name("DEVICE") == "OTHER_DEVICE"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clkernels.configure(**asdict(settings._registered_with))
    assert settings.current() == settings._registered_with


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYEDMCL_", "CLKERNELS_", "DEMO_"))
           and k not in ("PYOPENCL_CTX", "POCL_CACHE_DIR", "OCL_ICD_VENDORS")}
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, **extra}


_ALONE = textwrap.dedent("""
    import json, sys
    import clkernels
    assert "pyopencl" not in sys.modules  # import clkernels loads nothing more
    devs = clkernels.list_devices()
    chosen = clkernels.select_device()
    try:
        clkernels.select_device("no-such-device")
    except clkernels.DeviceSelectionError as e:
        message = str(e)
    from clkernels.userdirs import cache_root
    print(json.dumps({"runtimes": [d.runtime for d in devs], "chosen": chosen.runtime,
                      "prefix": clkernels.env_name("DEVICE"), "message": message,
                      "cache": str(cache_root()),
                      "apps": sorted(m for m in sys.modules if m.startswith("pyedmcl"))}))
""")


@needs_cpu
def test_clkernels_alone_lists_and_selects_devices(tmp_path):
    """A process that imports only clkernels reads CLKERNELS_* (PYEDMCL_* means nothing
    to it), keeps its cache in CLKERNELS_CACHE_DIR, and lists and selects devices."""
    env = _clean_env(CLKERNELS_DEVICE=CPU_DEVICE, CLKERNELS_CACHE_DIR=str(tmp_path / "cache"),
                     PYEDMCL_DEVICE="no-such-device")
    p = subprocess.run([sys.executable, "-c", _ALONE], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert CPU_DEVICE in out["runtimes"] and out["chosen"] == CPU_DEVICE
    assert out["prefix"] == "CLKERNELS_DEVICE" and "CLKERNELS_DEVICE" in out["message"]
    assert out["cache"] == str(tmp_path / "cache") and (tmp_path / "cache" / "probe").is_dir()
    assert out["apps"] == []
    assert "pyedmcl" not in p.stderr.lower()


@needs_cpu
def test_an_application_names_its_prefix(tmp_path):
    """configure(app_name, env_prefix) before use: its variables and its folders."""
    code = "import clkernels; clkernels.configure(app_name='demo', env_prefix='DEMO')\n" + _ALONE
    env = _clean_env(DEMO_DEVICE=CPU_DEVICE, DEMO_CACHE_DIR=str(tmp_path / "demo"),
                     CLKERNELS_DEVICE="no-such-device")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["chosen"] == CPU_DEVICE and out["prefix"] == "DEMO_DEVICE"
    assert "DEMO_DEVICE" in out["message"] and out["cache"] == str(tmp_path / "demo")
