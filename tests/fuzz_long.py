"""The long fuzz profile: ``python tests/fuzz_long.py [EXAMPLES_PER_TEST]`` (default 250).

Runs tests/test_fuzz_bad_input.py with ``PYEDMCL_FUZZ_EXAMPLES`` set (CI uses a
few examples per test; this uses hundreds, >= 1,000 generated inputs in all) on
PoCL, then prints the number of generated inputs per test and in total
(recorded in docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    n = sys.argv[1] if len(sys.argv) > 1 else "250"
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts.json"
        env = {**os.environ, "PYEDMCL_FUZZ_EXAMPLES": n, "PYEDMCL_FUZZ_COUNT_FILE": str(counts),
               "PYEDMCL_TEST_DEVICES": os.environ.get("PYEDMCL_TEST_DEVICES", "pocl")}
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              str(here / "test_fuzz_bad_input.py")], env=env, cwd=here.parent)
        if counts.exists():
            data = json.loads(counts.read_text())
            for name, c in sorted(data.items()):
                print(f"{c:6d}  {name}")
            print(f"{sum(data.values()):6d}  generated inputs in all (pytest exit code {rc})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
