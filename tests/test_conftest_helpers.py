"""The suite's own helpers for shapes of a kernel (conftest.covering / device_cases), with
one CPU runtime that builds (every shape there) and with both (Intel's runtime a covering
few, PoCL the first case)."""

from __future__ import annotations

import conftest
import pytest
from conftest import covering, device_cases, few, pairwise


@pytest.fixture
def two_cpu_runtimes(monkeypatch):
    """Both CPU runtimes build; Intel's is the faster-building one."""
    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")
    monkeypatch.setattr(conftest, "TWO_CPU_RUNTIMES", True)


@pytest.fixture
def one_cpu_runtime(monkeypatch):
    """Intel's runtime is the only CPU runtime that builds (PoCL's LLVM does not know the CPU)."""
    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")
    monkeypatch.setattr(conftest, "TWO_CPU_RUNTIMES", False)


CASES = [(1, "a", 0), (1, "b", 0), (2, "a", 0), (2, "b", 1), (3, "a", 0)]


def test_covering_keeps_the_first_case_and_every_value(two_cpu_runtimes):
    got = covering(CASES, "intel")
    assert got[0] == CASES[0] and len(got) < len(CASES)
    for i in range(3):
        assert {c[i] for c in got} == {c[i] for c in CASES}
    assert covering(CASES, "pocl") == CASES[:1]
    assert covering(CASES, "nvidia") == CASES
    dicts = [{"A": 1}, {"A": 1, "B": 2}, {"A": 3}]
    assert covering(dicts, "intel") == [{"A": 1}, {"A": 1, "B": 2}, {"A": 3}]  # B absent too


def test_covering_runs_every_case_on_the_only_cpu_runtime(one_cpu_runtime, monkeypatch):
    assert covering(CASES, "intel") == CASES and covering(CASES, "nvidia") == CASES
    monkeypatch.setattr(conftest, "TWO_CPU_RUNTIMES", True)
    monkeypatch.setenv("PYEDMCL_TEST_EVERY_CASE", "1")
    assert covering(CASES, "pocl") == CASES and covering(CASES, "intel") == CASES


def test_device_cases_take_the_first_gpu_shape_on_another_cpu_runtime(two_cpu_runtimes,
                                                                      monkeypatch):
    monkeypatch.setattr(conftest, "_DEVICE_PARAMS", ["intel", "pocl", "nvidia"])
    cases = [(32, 512), (64, 96), (128, 200)]
    got = [p.id for p in device_cases(cases, ["a", "b", "c"], gpu_paths=True)]
    assert got == ["intel-a", "intel-b", "intel-c", "pocl-a", "nvidia-a", "nvidia-b", "nvidia-c"]
    # the fastest-building CPU runtime: every value of every parameter, not every shape
    shapes = [(32, 512), (64, 512), (64, 96), (128, 96)]
    got = [p.id for p in device_cases(shapes, list("abcd"), gpu_paths=True)]
    assert got == ["intel-a", "intel-c", "intel-d", "pocl-a",
                   "nvidia-a", "nvidia-b", "nvidia-c", "nvidia-d"]
    got = [p.values for p in device_cases(cases, gpu_from=2)]
    assert ("intel", 64, 96) in got and ("intel", 128, 200) in got
    assert [v for v in got if v[0] == "pocl"] == [("pocl", 32, 512)]


def test_device_cases_every_cpu_path_on_the_only_cpu_runtime(one_cpu_runtime, monkeypatch):
    monkeypatch.setattr(conftest, "_DEVICE_PARAMS", ["intel", "nvidia"])
    shapes = [(32, 512), (64, 512), (64, 96), (128, 96)]
    got = [p.id for p in device_cases(shapes, list("abcd"), gpu_from=2)]
    assert got == ["intel-a", "intel-b", "intel-c", "intel-d",
                   "nvidia-a", "nvidia-b", "nvidia-c", "nvidia-d"]


def _items(devices: tuple[str, ...]):
    from types import SimpleNamespace

    def item(dev, **params):
        return SimpleNamespace(path="t.py", originalname="test_f",
                               callspec=SimpleNamespace(params={"device": dev, **params}))

    combos = [dict(a=a, b=b) for a in (1, 2, 3) for b in ("x", "y")]
    return combos, ([item(d, **c) for d in devices for c in combos]
                    + [SimpleNamespace(path="u.py")])


def test_covered_items_share_each_function_out_between_two_cpu_runtimes(two_cpu_runtimes):
    """The suite-wide rule where both CPU runtimes build: on Intel's runtime each test
    function keeps a covering few of its parameter combinations (every value, the first
    included), on PoCL the first alone; GPUs and unparametrised items keep everything."""
    from conftest import covered_items

    combos, items = _items(("intel", "pocl", "nvidia"))
    kept, dropped = covered_items(items)
    assert len(kept) + len(dropped) == len(items)

    def params(dev):
        return [it.callspec.params for it in kept if getattr(it, "callspec", None)
                and it.callspec.params["device"] == dev]

    intel = params("intel")
    assert intel[0] == {"device": "intel", **combos[0]}
    assert {p["a"] for p in intel} == {1, 2, 3} and {p["b"] for p in intel} == {"x", "y"}
    assert len(intel) == 3  # (1, x), then two that bring a new a and b each
    assert params("pocl") == [{"device": "pocl", **combos[0]}]
    assert len(params("nvidia")) == len(combos) and any(it.path == "u.py" for it in kept)


def test_covered_items_keep_everything_on_the_only_cpu_runtime(one_cpu_runtime):
    from conftest import covered_items

    _, items = _items(("intel", "nvidia"))
    kept, dropped = covered_items(items)
    assert kept == items and not dropped


def test_pairwise_runs_every_two_values_together(one_cpu_runtime, monkeypatch):
    """A product of factors on the only CPU runtime: every pair of values of every two
    factors in some case, the first case included, fewer cases than the product; the
    product on GPUs and with PYEDMCL_TEST_EVERY_CASE=1. Where both CPU runtimes build,
    covering's share: a few on Intel's runtime, the first case on PoCL."""
    import itertools

    product = list(itertools.product(("a", "b", "c"), (0, 1), (10, 17), (False, True)))
    got = pairwise(product, "intel")
    assert got[0] == product[0] and len(got) < len(product)
    for i, j in itertools.combinations(range(4), 2):
        assert {(c[i], c[j]) for c in got} == {(c[i], c[j]) for c in product}, (i, j)
    assert pairwise(product, "nvidia") == product
    monkeypatch.setattr(conftest, "TWO_CPU_RUNTIMES", True)
    assert pairwise(product, "intel") == few(product)
    assert pairwise(product, "pocl") == product[:1]
    monkeypatch.setenv("PYEDMCL_TEST_EVERY_CASE", "1")
    assert pairwise(product, "intel") == product and few(product) == product
