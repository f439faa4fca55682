"""A pytest plugin that times every program build of the test suite, by test and runtime.

Where the suite's time goes on a CPU is mostly program builds (decision 0172). This plugin
wraps the PyOpenCL backend's build and adds each build's seconds to the test that asked for
it. Use it as:

    PYTHONPATH=bench:. python -m pytest -q -n 2 -p pytest_build_times \\
        --junitxml=/tmp/suite.xml tests/

Each process (the controller and each xdist worker) writes
``$PYEDMCL_BUILD_TIMES_DIR/builds_<worker>.json`` (default: the working directory) at the
end of the session. Its ``tests`` map each test's node id to ``[seconds, builds, runtime]``;
its ``builds`` list every build as ``[test, runtime, source hash, options, seconds]``, and
its ``sources`` give the template and parameters each rendered source hash came from, so
that the programs tests share, and the parameters that keep them apart, can be counted.
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
#: each build in order: [test, runtime, source hash, options, seconds]
_programs: list[list[Any]] = []
#: source hash -> [template name, its parameters] for the sources rendered from a template
_sources: dict[str, list[Any]] = {}


def _wrap_builds() -> None:
    import clkernels.backends.base as base
    import clkernels.templates as templates
    from clkernels.backends.pyopencl_backend import PyOpenCLBackend

    build = PyOpenCLBackend._build_quietly
    render = templates.render

    def timed(self: PyOpenCLBackend, source: str, opts: list[str]) -> Any:
        t0 = time.perf_counter()
        try:
            return build(self, source, opts)
        finally:
            seconds = time.perf_counter() - t0
            test = _current["test"] or "<outside a test>"
            entry = _builds.setdefault(test, [0.0, 0, self.info.runtime])
            entry[0] += seconds
            entry[1] += 1
            _programs.append([test, self.info.runtime, templates.source_hash(source),
                              " ".join(opts), seconds])

    def rendered(name: str, params: dict[str, Any]) -> str:
        source = render(name, params)
        _sources.setdefault(templates.source_hash(source),
                            [name, {k: repr(v) for k, v in params.items()}])
        return source

    PyOpenCLBackend._build_quietly = timed
    templates.render = rendered
    base.render = rendered  # (the backends call it by the name they imported)


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
    tmp.write_text(json.dumps({"tests": _builds, "builds": _programs, "sources": _sources}))
    os.replace(tmp, path)  # whole or not at all
