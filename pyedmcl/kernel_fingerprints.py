"""Kernel fingerprints: the generated source of sample specialisations, per version.

A family's tuning entries are keyed by its version (``## version: N`` in the template
header). Nothing forces a developer to bump it, so ``tests/data/kernel_fingerprints.json``
records, for each template, its version and the hash of the source rendered for sample
parameter sets (comments and whitespace removed). The test fails when a template renders
different code under the same version:

* the kernel's meaning or parameters changed -> bump ``## version`` (tuning entries of
  the old version are then skipped) and run ``python -m pyedmcl.kernel_fingerprints``;
* only its layout changed (parts, names of locals) -> run the same command; review the
  diff of the JSON file in the commit.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from clkernels.templates import declared_version, render

#: where the test suite keeps the recorded fingerprints (a source checkout)
DEFAULT_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "kernel_fingerprints.json"


def normalised(source: str) -> str:
    """``source`` without C comments and with every run of whitespace one space."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    source = re.sub(r"//[^\n]*", " ", source)
    return " ".join(source.split())


def fingerprint(template: str, params: dict[str, Any]) -> str:
    return hashlib.sha256(normalised(render(template, params)).encode()).hexdigest()[:20]


def problems(path: Path = DEFAULT_PATH) -> list[str]:
    """Templates whose rendered code or version disagrees with the record at ``path``."""
    out = []
    for template, rec in json.loads(Path(path).read_text()).items():
        version = declared_version(template)
        changed = [p for p, h in rec["cases"] if fingerprint(template, p) != h]
        if version != rec["version"]:
            out.append(f"{template}: version {version}, recorded {rec['version']}: run "
                       "python -m pyedmcl.kernel_fingerprints to record the new version")
        elif changed:
            out.append(f"{template}: {len(changed)} of {len(rec['cases'])} sample kernels "
                       f"changed under version {version} (first: {changed[0]}); bump "
                       "'## version' if the kernel's meaning changed, then run python -m "
                       "pyedmcl.kernel_fingerprints")
    return out


def update(path: Path = DEFAULT_PATH) -> None:
    """Re-record every template's version and sample fingerprints at ``path``."""
    data = json.loads(Path(path).read_text())
    for template, rec in data.items():
        rec["version"] = declared_version(template)
        rec["cases"] = [[p, fingerprint(template, p)] for p, _ in rec["cases"]]
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":  # run as a module, ``import pyedmcl`` has added the templates
    update(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH)
