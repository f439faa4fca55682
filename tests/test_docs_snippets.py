"""Every code block of README.md and docs/*.md runs, as a reader would run it.

Blocks fenced as ``python`` run in order in one namespace per file; blocks fenced as
``bash``/``sh``/``shell``/``console`` run each command line through ``pyedmcl``'s CLI
in-process (exit code 0 required), in the same scratch folder, so a file written by one
block is there for the next. A block whose first line is the visible comment
``# not run here: <reason>`` (package installs, GPU-only code) is skipped; any other
command than ``pyedmcl ...`` in a shell block must carry that mark. Blocks without a
language or in other languages (directory trees, Mako templates) are displays, not code.
The docs' data are small so that all of this stays a few seconds.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import FAST_BUILD_CPU

ROOT = Path(__file__).resolve().parents[1]
#: PyRQA (docs/from_pyrqa.md) calls a PyOpenCL keyword deprecated since 2022
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyrqa")
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console"}
NOT_RUN = re.compile(r"^\s*#\s*not run here:\s*(\S.*)$")
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")


def code_blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, code, first line number) of every fenced block in ``path``."""
    out, lang, buf, start, indent = [], None, [], 0, ""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if lang is None and m:
            lang, buf, start, indent = m.group(2).lower(), [], i + 1, m.group(1)
        elif lang is not None and line.strip() == "```":
            out.append((lang, "\n".join(buf), start))
            lang = None
        elif lang is not None:
            buf.append(line[len(indent):] if line.startswith(indent) else line)
    assert lang is None, f"{path.name}: unclosed code block from line {start}"
    return out


def _commands(code: str) -> list[str]:
    """Shell lines, comments dropped, backslash continuations joined."""
    lines, cur = [], ""
    for raw in code.splitlines():
        s = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        if cur.strip():
            lines.append(cur.strip())
        cur = ""
    return lines


RUNNABLE = [p for p in FILES if any(lang in PYTHON | SHELL for lang, _, _ in code_blocks(p))]


def test_blocks_are_found():
    """The parser sees the README's blocks (a test that finds nothing proves nothing)."""
    langs = [lang for lang, _, _ in code_blocks(ROOT / "README.md")]
    assert langs.count("python") >= 3 and "bash" in langs


def run_page(path: Path) -> None:
    """Run every runnable block of ``path`` in order, in the working directory."""
    import matplotlib

    matplotlib.use("Agg")
    from pyedmcl.cli.main import main

    ns: dict = {"__name__": f"docs_{path.stem}"}
    for lang, code, line in code_blocks(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        first = code.lstrip().splitlines()[0] if code.strip() else ""
        if NOT_RUN.match(first):
            continue
        if lang in PYTHON:
            exec(compile(code, where, "exec"), ns)  # noqa: S102 - the docs' own code
        elif lang in SHELL:
            for cmd in _commands(code):
                argv = shlex.split(cmd)
                assert argv[0] == "pyedmcl", (
                    f"{where}: {cmd!r} is not a pyedmcl command; mark the block with a first "
                    "line '# not run here: <reason>' if it cannot run in the tests")
                rc = main(argv[1:])
                assert rc == 0, f"{where}: {cmd!r} exited {rc}"


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_every_block_runs(path, tmp_path, monkeypatch):
    """Each page in its scratch folder. A page that uses PyRQA runs in a fresh interpreter,
    as a reader's script would: PyRQA finds its config file relative to the working
    directory at its import, so in a process that imported it elsewhere it fails."""
    monkeypatch.chdir(tmp_path)
    # the docs' calls, not their kernels (every kernel runs on every platform elsewhere):
    # on the CPU runtime that compiles fastest
    monkeypatch.setenv("PYEDMCL_DEVICE", FAST_BUILD_CPU)
    if "pyrqa" not in path.read_text():
        run_page(path)
        return
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p)}
    code = f"from pathlib import Path; from test_docs_snippets import run_page; run_page(Path({str(path)!r}))"
    p = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", code],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]


def test_cli_reference_is_current():
    """docs/cli.md (``python docs/gen_cli.py``) names every command and every option of
    the parser (compared by names: argparse's layout differs between Python versions)."""
    import argparse

    from pyedmcl.cli.main import build_parser

    text = (ROOT / "docs" / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, p in sub.choices.items():
        head = f"## pyedmcl {name}\n"
        if head not in text:
            missing.append(name)
            continue
        section = text.split(head, 1)[1].split("\n## ", 1)[0]
        missing += [f"{name} {o}" for a in p._actions for o in a.option_strings
                    if a.help != argparse.SUPPRESS and o not in section]
    assert not missing, f"regenerate docs/cli.md (python docs/gen_cli.py): {missing}"


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command line verbatim (its second install line), so
    CI tests what a reader runs."""
    readme = (ROOT / "README.md").read_text()
    lines = [ln.strip() for ln in readme.splitlines() if ln.strip().startswith("pip install")]
    test_cmd = next(ln for ln in lines if "pytest" in ln)
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_cmd in ci, f"{test_cmd!r} is not a line of .ci/run"
