"""clkernels.select.kth_smallest, the k-th smallest double of a device array selected on
the device, against NumPy's partition (exact: the same value, and the same least) on
every OpenCL platform present: continuous data (the bin narrows to a gather), heavy
ties (every bit decided, no gather), negatives and signed zeros, a bin larger than the
gather cap, and Oclgrind's memory, race and uninitialised-value checks."""

from __future__ import annotations

import numpy as np
import pytest

import clkernels
from clkernels import select


def _cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "squares": (rng.random(200_003) * 6.0) ** 2,
        "grid": np.round(rng.random(50_000) * 3, 1),  # a few values, each many times
        "signed": np.r_[rng.standard_normal(9_999), 0.0, -0.0, 0.0],
        "one": np.array([2.5]),
        "equal": np.full(4_097, 7.0),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_kth_smallest_equals_numpy(device, name):
    be = clkernels.get_backend(device)
    if not be.info.fp64:
        pytest.skip("no fp64 on this device")
    a = _cases()[name]
    d = be.to_device(a)
    for k in sorted({0, 1, a.size // 50, a.size // 2, a.size - 2, a.size - 1} & set(range(a.size))):
        got = select.kth_smallest(be, d, k)
        assert got.value == np.partition(a, k)[k], k
        assert got.least == a.min()
    with pytest.raises(ValueError, match="k=-1 is out of range"):
        select.kth_smallest(be, d, -1)


def test_a_bin_beyond_the_gather_cap_takes_more_passes(device, monkeypatch):
    """Values spread so finely that the first bins hold more than the cap: further
    counting passes narrow the bin before the gather."""
    be = clkernels.get_backend(device)
    if not be.info.fp64:
        pytest.skip("no fp64 on this device")
    monkeypatch.setattr(select, "GATHER_CAP", 16)
    a = 1.0 + np.random.default_rng(5).random(30_000) * 1e-9
    d = be.to_device(a)
    for k in (0, 777, 29_999):
        assert select.kth_smallest(be, d, k).value == np.partition(a, k)[k]


def test_order_keys_order_as_the_values():
    a = np.array([-np.inf, -2.0, -0.0, 0.0, 1e-300, 3.0, np.inf])
    keys = select.order_keys(a)
    assert np.all(np.diff(keys.astype(object)) > 0)
    assert [select.value_of_key(int(k)) for k in keys] == list(a)


def test_oclgrind_clean_select():
    from conftest import run_under_oclgrind

    out = run_under_oclgrind("""
        import numpy as np
        from clkernels import get_backend, select
        be = get_backend("oclgrind")
        a = np.round(np.random.default_rng(1).random(700) * 5, 2)
        d = be.to_device(a)
        for k in (0, 350, 699):
            assert select.kth_smallest(be, d, k).value == np.partition(a, k)[k]
        print("ok")
    """)
    assert out.strip() == "ok"
