"""clkernels' device-to-device copy (``Backend.copy_within``), used by iterated forecasts
to feed a result into the next launch's input without a host round trip."""

from __future__ import annotations

import numpy as np
import pytest

from clkernels import get_backend


def test_copy_within_copies_a_slice(device):
    be = get_backend(device)
    a = be.to_device(np.arange(10, dtype=np.float64))
    b = be.to_device(np.arange(10.0, 16.0))
    be.copy_within(a, 7, b, 2, 3)
    be.copy_within(a, 0, a, 9, 1)  # within one array
    np.testing.assert_array_equal(be.to_host(a), [14, 1, 2, 3, 4, 5, 6, 12, 13, 14])


def test_copy_within_checks_ranges_and_dtype(device):
    be = get_backend(device)
    a = be.to_device(np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="leave the arrays"):
        be.copy_within(a, 3, a, 0, 2)
    with pytest.raises(ValueError, match="one dtype"):
        be.copy_within(a, 0, be.to_device(np.zeros(4)), 0, 1)
