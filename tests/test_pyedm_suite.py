"""pyEDM's own test suite, run against ``pyedmcl.compat.pyedm`` (issue 21's parity bar).

The ``tests`` folder of the installed pyEDM wheel (55 tests, validation CSVs) is
copied to a temporary folder, its ``import pyEDM as EDM`` lines (test files and
conftest.py) become ``import pyedmcl.compat.pyedm as EDM`` -- nothing else changes
-- and pytest runs it in a subprocess.

pyEDM's conftest reads its validation CSVs from ``dirname(EDM.__file__)/tests/
validation``, i.e. next to the module under test. So the subprocess imports
pyedmcl from a mirror of the package made of symbolic links (the same files) in
which ``compat/tests`` is the copied suite; the suite itself is untouched.

pyEDM itself passes 54 of 55 this way: ``test_embed_from_file`` reads
``../data/circle.csv`` relative to the working directory, which exists only
inside pyEDM's installed folder. The same test fails through compat for the same
reason, so the bar is 54.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyedmcl

SPEC = importlib.util.find_spec("pyEDM")
pytestmark = pytest.mark.skipif(SPEC is None, reason="pyEDM is not installed")

#: the issue's bar is pyEDM's own result on its copied suite: 54 (see the docstring).
#: Ties in the 'circle' data (4 decimals) are decided in scipy KDTree's order, as pyEDM
#: (``compat._state_knn.kdtree_candidates``), so ``test_ccm_nan`` passes too.
REQUIRED_PASSES = 54
#: the only failure allowed (any other failure is a regression)
KNOWN_FAILURES = {"test_embed.py::test_embed_from_file"}
IMPORT = re.compile(r"^import pyEDM as EDM$", re.MULTILINE)


def _copy_suite(dest: Path) -> Path:
    """pyEDM's tests in ``dest/tests``, every ``import pyEDM as EDM`` replaced."""
    src = Path(next(iter(SPEC.submodule_search_locations))) / "tests"
    tests = dest / "tests"
    shutil.copytree(src, tests, ignore=shutil.ignore_patterns("__pycache__"))
    replaced = 0
    for f in tests.glob("*.py"):
        text = f.read_text()
        if IMPORT.search(text):
            f.write_text(IMPORT.sub("import pyedmcl.compat.pyedm as EDM", text))
            replaced += 1
    assert "pyEDM" not in "".join(re.findall(r"^\s*(?:import|from) .*$", "".join(
        f.read_text() for f in tests.glob("*.py")), re.MULTILINE)), "an import of pyEDM is left"
    assert replaced >= 13, f"only {replaced} files imported pyEDM as EDM"
    return tests


def _mirror(dest: Path, tests: Path) -> Path:
    """``dest/pyedmcl``: links to pyedmcl's files, with ``compat/tests`` -> ``tests``."""
    real = Path(pyedmcl.__file__).parent
    pkg = dest / "pyedmcl"
    pkg.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name not in ("compat", "__pycache__"):
            (pkg / entry.name).symlink_to(entry)
    compat = pkg / "compat"
    compat.mkdir()
    for entry in (real / "compat").iterdir():
        if entry.name != "__pycache__":
            (compat / entry.name).symlink_to(entry)
    (compat / "tests").symlink_to(tests)
    return dest


def run_suite(tmp: Path) -> tuple[int, int, str]:
    """(passed, failed, pytest's output) of pyEDM's suite against the compat module."""
    tests = _copy_suite(tmp / "suite")
    root = _mirror(tmp / "root", tests)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(Path(pyedmcl.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-o", "addopts=", "-W", "ignore", "."],
                          cwd=tests, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    got = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|error)", out)}
    return got.get("passed", 0), got.get("failed", 0) + got.get("error", 0), out


def test_pyedm_suite_through_compat(tmp_path):
    passed, failed, out = run_suite(tmp_path)
    assert passed + failed == 55, out[-3000:]
    failures = set(re.findall(r"^FAILED (\S+)", out, re.MULTILINE))
    assert failures == KNOWN_FAILURES, out[-6000:]
    assert passed == REQUIRED_PASSES, out[-6000:]
