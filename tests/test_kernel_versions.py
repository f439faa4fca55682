"""Tuning entries are keyed by family version: a kernel that renders different code
must carry a new version (or a re-recorded fingerprint, for a layout-only change)."""

from pathlib import Path

from pyedmcl.kernel_fingerprints import problems

#: the recorded fingerprints beside this test (the installed package has no tests/ folder)
RECORDED = Path(__file__).resolve().parent / "data" / "kernel_fingerprints.json"


def test_rendered_kernels_match_their_recorded_version():
    assert problems(RECORDED) == []
