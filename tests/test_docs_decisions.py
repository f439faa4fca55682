"""The decision index (docs/decisions/README.md) lists every record once, with its status.

A record whose ``Status:`` line says it is superseded or removed is marked so in the
index, and a row marked so names a record that says it, so a reader of the index knows
which records still describe the code.
"""

from __future__ import annotations

import re
from pathlib import Path

DECISIONS = Path(__file__).parents[1] / "docs" / "decisions"


def _status(path: Path) -> str:
    m = re.search(r"^Status:(.*)$", path.read_text(), re.M)
    assert m, f"{path.name} has no Status: line"
    return m.group(1).strip().lower()


def _rows() -> dict[str, str]:
    rows = {}
    for line in (DECISIONS / "README.md").read_text().splitlines():
        m = re.match(r"\| \[(\d{4})\]\((\d{4}-[^)]+\.md)\) \| ([^|]+) \|", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} listed twice"
            assert (DECISIONS / m.group(2)).is_file(), m.group(2)
            rows[m.group(1)] = m.group(3).strip()
    return rows


def test_every_record_listed_once():
    files = {p.name[:4] for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md")}
    assert set(_rows()) == files


def test_superseded_and_removed_records_are_marked():
    rows = _rows()
    for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"):
        st, row = _status(p), rows[p.name[:4]]
        for word in ("superseded", "removed", "measured, not taken"):
            assert st.startswith(word) == row.startswith(word), (p.name, st, row)
