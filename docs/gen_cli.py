"""Write docs/cli.md from the argparse definitions (``python docs/gen_cli.py``).

``tests/test_docs_snippets.py`` fails when docs/cli.md is not what this writes, so the
reference never drifts from the parser.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

OUT = Path(__file__).resolve().parent / "cli.md"


def render() -> str:
    """The CLI reference as Markdown: the overview, then every command's ``--help``."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal width: fix it
    from pyedmcl.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = ["# Command-line reference", "",
             "Generated from the parser by `python docs/gen_cli.py`; `pyedmcl COMMAND --help` "
             "prints the same. Exit codes: 0 ok, 2 bad usage or input (one line naming the "
             "parameter and what is allowed; also input that makes the answer "
             "meaningless: a time column out of order or repeated, a constant series, "
             "the same series twice, see reliability.md), 1 runtime failure (build or "
             "device error; "
             "`PYEDMCL_DEBUG=1` prints the traceback). Progress lines go to stderr when it "
             "is a terminal (`-q` silences them); results go to stdout.", "",
             "| command | what |", "|---|---|"]
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name in sub.choices:
        parts.append(f"| [`{name}`](#pyedmcl-{name}) | {helps.get(name, '')} |")
    for name, p in sub.choices.items():
        parts += ["", f"## pyedmcl {name}", "", "```text", p.format_help().rstrip(), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
