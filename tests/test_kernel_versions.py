"""Tuning entries are keyed by family version: a kernel that renders different code
must carry a new version (or a re-recorded fingerprint, for a layout-only change)."""

from pyedmcl.kernels.fingerprints import problems


def test_rendered_kernels_match_their_recorded_version():
    assert problems() == []
