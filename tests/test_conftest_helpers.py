"""The suite's own helpers for shapes of a kernel (conftest.covering / device_cases)."""

from __future__ import annotations

import conftest
from conftest import covering, device_cases, few, pairwise


def test_covering_keeps_the_first_case_and_every_value(monkeypatch):
    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")
    cases = [(1, "a", 0), (1, "b", 0), (2, "a", 0), (2, "b", 1), (3, "a", 0)]
    few = covering(cases, "pocl")
    assert few[0] == cases[0] and len(few) < len(cases)
    for i in range(3):
        assert {c[i] for c in few} == {c[i] for c in cases}
    assert covering(cases, "intel") == cases and covering(cases, "nvidia") == cases
    dicts = [{"A": 1}, {"A": 1, "B": 2}, {"A": 3}]
    assert covering(dicts, "pocl") == [{"A": 1}, {"A": 1, "B": 2}, {"A": 3}]  # B absent too


def test_device_cases_take_the_first_gpu_shape_on_another_cpu_runtime(monkeypatch):
    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")
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
    assert ("pocl", 64, 96) in got and ("pocl", 128, 200) not in got


def test_covered_items_thin_each_function_on_another_cpu_runtime(monkeypatch):
    """The suite-wide rule: on a CPU runtime other than the fastest-building one, each
    test function keeps a covering few of its parameter combinations (every value), the
    first included; other runtimes and unparametrised items keep everything."""
    from types import SimpleNamespace

    from conftest import covered_items

    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")

    def item(dev, **params):
        return SimpleNamespace(path="t.py", originalname="test_f",
                               callspec=SimpleNamespace(params={"device": dev, **params}))

    combos = [dict(a=a, b=b) for a in (1, 2, 3) for b in ("x", "y")]
    items = ([item("intel", **c) for c in combos] + [item("pocl", **c) for c in combos]
             + [item("nvidia", **c) for c in combos] + [SimpleNamespace(path="u.py")])
    kept, dropped = covered_items(items)
    assert len(kept) + len(dropped) == len(items) and dropped
    assert all(it.callspec.params["device"] == "pocl" for it in dropped)
    pocl = [it.callspec.params for it in kept if getattr(it, "callspec", None)
            and it.callspec.params["device"] == "pocl"]
    assert pocl[0] == {"device": "pocl", **combos[0]}
    assert {p["a"] for p in pocl} == {1, 2, 3} and {p["b"] for p in pocl} == {"x", "y"}
    assert len(pocl) == 3  # (1, x), then two that bring a new a and b each


def test_pairwise_runs_every_two_values_together(monkeypatch):
    """A product of factors on the fastest-building CPU runtime: every pair of values of
    every two factors in some case, the first case included, fewer cases than the
    product; the product on GPUs and with PYEDMCL_TEST_EVERY_CASE=1; another CPU runtime
    keeps covering's few."""
    import itertools

    monkeypatch.setattr(conftest, "FAST_BUILD_CPU", "intel")
    product = list(itertools.product(("a", "b", "c"), (0, 1), (10, 17), (False, True)))
    got = pairwise(product, "intel")
    assert got[0] == product[0] and len(got) < len(product)
    for i, j in itertools.combinations(range(4), 2):
        assert {(c[i], c[j]) for c in got} == {(c[i], c[j]) for c in product}, (i, j)
    assert pairwise(product, "nvidia") == product
    assert pairwise(product, "pocl") == few(product)
    monkeypatch.setenv("PYEDMCL_TEST_EVERY_CASE", "1")
    assert pairwise(product, "intel") == product and few(product) == product
