"""A pytest plugin that times every program build of the test suite, by test and runtime.

Where the suite's time goes on a CPU is mostly program builds (decision 0172). This plugin
wraps the PyOpenCL backend's build and adds each build's seconds to the test that asked for
it. Use it as:

    PYTHONPATH=bench:. python -m pytest -q -n 2 -p pytest_build_times \\
        --junitxml=/tmp/suite.xml tests/

Each process (the controller and each xdist worker) writes
``$PYEDMCL_BUILD_TIMES_DIR/builds_<worker>.json`` (default: the working directory) at the
end of the session. The file maps each test's node id to ``[seconds, builds, runtime]``.
Builds in CLI or Oclgrind subprocesses are not counted. Builds served by PyOpenCL's binary
cache are counted, and they are quick.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

_current: dict[str, str | None] = {"test": None}
_builds: dict[str, list[Any]] = {}


def _wrap_builds() -> None:
    from clkernels.backends.pyopencl_backend import PyOpenCLBackend

    build = PyOpenCLBackend._build_quietly

    def timed(self: PyOpenCLBackend, source: str, opts: list[str]) -> Any:
        t0 = time.perf_counter()
        try:
            return build(self, source, opts)
        finally:
            entry = _builds.setdefault(_current["test"] or "<outside a test>",
                                       [0.0, 0, self.info.runtime])
            entry[0] += time.perf_counter() - t0
            entry[1] += 1

    PyOpenCLBackend._build_quietly = timed


def pytest_configure(config: pytest.Config) -> None:
    _wrap_builds()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current["test"] = item.nodeid


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = Path(os.environ.get("PYEDMCL_BUILD_TIMES_DIR", "."))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"builds_{worker}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_builds))
    os.replace(tmp, path)  # whole or not at all
