"""clkernels' device-to-device copy (``Backend.copy_within``), used by iterated forecasts
to feed a result into the next launch's input without a host round trip, and its
host-to-device writes into part of an array (``Backend.write_async``), which upload a
panel band by band as the host prepares it."""

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


def test_write_async_writes_bands_from_threads(device):
    """Bands of a host array written into one device array at their offsets, from
    several threads at once, behind the queue: the device array is the host array; a
    band that leaves the array, another dtype or a strided band is refused."""
    from concurrent.futures import ThreadPoolExecutor
    be = get_backend(device)
    if not be.writes_async:
        pytest.skip(f"{device} has no asynchronous writes (its queue stays in one thread)")
    host = np.arange(1000, dtype=np.float32).reshape(40, 25)
    dst = be.empty(host.size, np.float32)
    with ThreadPoolExecutor(4) as ex:
        events = list(ex.map(lambda r: be.write_async(dst, host[r:r + 7], r * 25),
                             range(0, 40, 7)))
    np.testing.assert_array_equal(be.to_host(dst), host.reshape(-1))
    del events
    for bad, off in ((host[:2], 999), (host[:1].astype(np.float64), 0), (host[:, :3], 0)):
        with pytest.raises(ValueError, match="do not fit"):
            be.write_async(dst, bad, off)
