"""Shared test fixtures: every OpenCL platform present, and an Oclgrind checker.

``device`` is parametrised over one device of each runtime present (PoCL, Intel
CPU runtime, NVIDIA/AMD GPUs on a GPU machine); Oclgrind is excluded there (too
slow) and exercised at tiny sizes through :func:`run_under_oclgrind`.
``PYEDMCL_TEST_DEVICES=pocl,intel`` restricts the set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pyedmcl  # noqa: F401  (configures clkernels as pyedmcl, PYEDMCL_* variables)
from clkernels.devices import DeviceUnusableError, list_devices, usable


def _device_params() -> list:
    """One device per runtime present; a runtime whose probe build fails stays in the
    list as a skipped parameter carrying the probe's reason (``PYEDMCL_TEST_DEVICES``
    restricts the set)."""
    want = os.environ.get("PYEDMCL_TEST_DEVICES")
    seen, out = set(), []
    for d in list_devices():
        if d.runtime == "oclgrind" or d.runtime in seen:
            continue
        if want and d.runtime not in want.split(","):
            continue
        seen.add(d.runtime)
        v = usable(d)
        out.append(d.runtime if v.ok else pytest.param(
            d.runtime, id=d.runtime,
            marks=pytest.mark.skip(reason=f"{d.runtime} cannot build kernels: {v.reason}")))
    return out


_DEVICE_PARAMS = _device_params()
#: the runtimes tests run on: those whose probe build passes
TEST_DEVICES = [p for p in _DEVICE_PARAMS if isinstance(p, str)]
#: the device of tests that need "a CPU device", not a particular runtime: PoCL, else
#: the CPU runtime that builds (Intel's where PoCL's LLVM does not know the CPU)
CPU_DEVICE = next((r for r in ("pocl", "intel") if r in TEST_DEVICES), "pocl")
#: the CPU runtime that builds programs fastest: Intel's (the same programs ~2.5x faster
#: than PoCL 3.0 on a 2-core Xeon), else CPU_DEVICE. For tests of host logic (which E
#: take which path, the tune command) that build many programs whose kernels other tests
#: run on every platform
FAST_BUILD_CPU = "intel" if "intel" in TEST_DEVICES else CPU_DEVICE
HAS_OCLGRIND = any(d.runtime == "oclgrind" for d in list_devices())
HAS_GPU = any(d.device_type == "gpu" and d.runtime != "oclgrind" for d in list_devices())
#: the CPU runtimes the device fixture may hold
CPU_RUNTIMES = ("pocl", "intel")


#: both CPU runtimes build here (PoCL's LLVM knows this CPU: AMD's Zen 3 and older, not
#: Zen 4/5 or recent Xeons): the suite's CPU cases are shared out between them
TWO_CPU_RUNTIMES = all(r in TEST_DEVICES for r in CPU_RUNTIMES)


def every_shape(device: str) -> bool:
    """Whether a test of many equivalent shapes of a kernel (layouts, work-group sizes,
    row-block edges: the same results by construction) runs them all on ``device``: on
    GPUs, and on :data:`FAST_BUILD_CPU` where it is the only CPU runtime that builds.
    Otherwise a CPU runtime runs :func:`covering`'s share: each shape is a program of its
    own, and where both CPU runtimes built every shape or a covering few the suite ran far
    past its budget (decision 0172)."""
    if device not in CPU_RUNTIMES:
        return True
    return device == FAST_BUILD_CPU and not TWO_CPU_RUNTIMES


def first_case_only(device: str) -> bool:
    """Whether ``device`` runs each test's first case alone: PoCL where Intel's runtime
    builds too (``PYEDMCL_TEST_EVERY_CASE=1``: never). A test with a list of cases of its
    own runs the first of them there."""
    return (TWO_CPU_RUNTIMES and device in CPU_RUNTIMES and device != FAST_BUILD_CPU
            and not _every_case())


def covering(cases: list, device: str) -> list:
    """``cases`` (tuples, or dicts of parameters): all on a device of :func:`every_shape`
    (or with ``PYEDMCL_TEST_EVERY_CASE=1``), the first alone where
    :func:`first_case_only`, else (:data:`FAST_BUILD_CPU` beside the other CPU runtime)
    :func:`few` of them (every value of every parameter)."""
    if first_case_only(device):
        return list(cases[:1])
    return list(cases) if every_shape(device) else few(cases)


def _every_case() -> bool:
    """``PYEDMCL_TEST_EVERY_CASE=1``: every combination on every runtime."""
    return os.environ.get("PYEDMCL_TEST_EVERY_CASE") == "1"


def _greedy(cases: list, marks: Callable[[Any], set]) -> list:
    """The first of ``cases``, then greedily the case that brings the most ``marks`` not
    yet run, until every mark of every case has run; in the given order."""
    want = set().union(*(marks(c) for c in cases))
    chosen = [0]
    seen = marks(cases[0])
    while seen != want:
        gain = [len(marks(c) - seen) if i not in chosen else -1 for i, c in enumerate(cases)]
        best = gain.index(max(gain))
        chosen.append(best)
        seen |= marks(cases[best])
    return [cases[i] for i in sorted(chosen)]


def few(cases: list) -> list:
    """The first of ``cases`` (tuples, or dicts of parameters) and then, greedily, the
    case that brings the most (position or key, value) pairs not yet run, until every
    value of every parameter has run (a key a dict lacks counts as its own value).
    Deterministic, in the given order; every case with ``PYEDMCL_TEST_EVERY_CASE=1``."""
    if len(cases) <= 1 or _every_case():
        return list(cases)

    def pairs(c) -> set:
        items = c.items() if isinstance(c, dict) else enumerate(c if isinstance(c, tuple)
                                                                  else (c,))
        got = {(k, repr(v)) for k, v in items}
        if isinstance(c, dict):
            keys = set().union(*(d.keys() for d in cases))
            got |= {(k, "absent") for k in keys - c.keys()}
        return got

    return _greedy(cases, pairs)


def pairwise(cases: list, device: str) -> list:
    """``cases`` (tuples: a full product of independent factors) on a GPU, or with
    ``PYEDMCL_TEST_EVERY_CASE=1``; on :data:`FAST_BUILD_CPU`, the first case and then,
    greedily, the case that brings the most pairs of (position, value) not yet run
    together, until every two values of every two positions have run together; on another
    CPU runtime, :func:`covering`'s few. Faults of a product's factors show in one factor
    or where two meet; each case here is a program of its own (seconds to build on a CPU)."""
    if device not in CPU_RUNTIMES or _every_case() or len(cases) <= 1:
        return list(cases)
    if not every_shape(device):
        return covering(cases, device)

    def pairs(c: tuple) -> set:
        one = [(i, repr(v)) for i, v in enumerate(c)]
        return set(one) | {(a, b) for k, a in enumerate(one) for b in one[k + 1:]}

    return _greedy(cases, pairs)


def device_cases(cases: list, ids: list[str] | None = None, gpu_paths: bool = False,
                 gpu_from: int | None = None, pairs: bool = False) -> list:
    """Parameters ``(device, *case)`` for ``@pytest.mark.parametrize`` over the device
    fixture's runtimes and, on each, :func:`covering`'s cases (``ids``: the cases' ids,
    shown after the device's). ``gpu_paths``: the cases are shapes of kernels that only
    GPUs run for users (warp shuffles, diagonal-major cells): GPUs run every shape,
    :data:`FAST_BUILD_CPU` the first and :func:`few` of the others (every value of
    every parameter), another CPU runtime the first shape alone (every kernel there,
    once). ``gpu_from``: the cases from this index on are such shapes, the ones before it
    CPU paths, which every runtime covers. ``pairs``: the cases are a product of
    independent factors, thinned by :func:`pairwise` on CPU runtimes."""
    ids = ids or [str(i) for i in range(len(cases))]
    if gpu_paths:
        gpu_from = 1
    out = []
    for p in _DEVICE_PARAMS:
        dev, marks = (p, ()) if isinstance(p, str) else (p.values[0], p.marks)
        mine = list(cases)
        if gpu_from is not None and dev in CPU_RUNTIMES and not _every_case():
            thin = few(mine) if dev == FAST_BUILD_CPU else []
            mine = mine[:gpu_from] + [c for c in thin if mine.index(c) >= gpu_from]
        here = pairwise(mine, dev) if pairs else covering(mine, dev)
        for c in here:
            i = cases.index(c)
            out.append(pytest.param(dev, *(c if isinstance(c, tuple) else (c,)),
                                    id=f"{dev}-{ids[i]}", marks=marks))
    return out


@pytest.fixture(params=_DEVICE_PARAMS)
def device(request) -> str:
    """A device selector string for each OpenCL runtime present (pocl, intel, nvidia, ...)."""
    return request.param


def covered_items(items: list) -> tuple[list, list]:
    """(kept, dropped): on a CPU runtime that is not :func:`every_shape`'s (PoCL beside
    Intel's runtime), each test function keeps :func:`covering`'s few of its other
    parameters' combinations -- every value of every parameter still runs there, each
    combination on the runtime that builds fastest and on GPUs. A function's cases already
    reduced by :func:`device_cases` pass through unchanged; functions parametrised by the
    device alone keep their one item."""
    groups: dict[tuple, list] = {}
    for it in items:
        cs = getattr(it, "callspec", None)
        dev = cs.params.get("device") if cs is not None else None
        if not isinstance(dev, str) or dev not in CPU_RUNTIMES or every_shape(dev):
            continue
        groups.setdefault((it.path, it.originalname, dev), []).append(it)
    drop = set()
    for group in groups.values():
        cases = [{k: v for k, v in it.callspec.params.items() if k != "device"}
                 for it in group]
        keep = covering(cases, group[0].callspec.params["device"])
        kept_ids = set()
        for c in keep:  # the first item with those parameters
            kept_ids.add(next(id(it) for it, d in zip(group, cases, strict=True) if d == c
                              and id(it) not in kept_ids))
        drop |= {id(it) for it in group if id(it) not in kept_ids}
    return ([it for it in items if id(it) not in drop], [it for it in items if id(it) in drop])


def pytest_collection_modifyitems(config, items):
    """:func:`covered_items` on the whole suite (``PYEDMCL_TEST_EVERY_CASE=1``: every
    combination on every runtime)."""
    if os.environ.get("PYEDMCL_TEST_EVERY_CASE") == "1":
        return
    kept, dropped = covered_items(items)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


#: peers that tests compare with; a machine without them (the GPU host, where they do not
#: install) skips those comparisons, CI installs them with the test extra
OPTIONAL_ORACLES = ("pyunicorn", "pyrqa", "igraph")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test naming a device whose probe build fails (e.g. ``device="pocl"`` where
    PoCL's LLVM does not know the CPU) is skipped with the probe's reason; one whose
    oracle package is not installed is skipped saying so."""
    DeviceUnusableError.last = None
    try:
        return (yield)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in OPTIONAL_ORACLES:
            pytest.skip(f"oracle {exc.name} is not installed (pip install 'pyedmcl[test]')")
        raise
    except Exception as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, DeviceUnusableError):
            # also under pytest.raises(ValueError, match=...), which it would fail
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        pytest.skip(str(cause).split("; devices that work")[0])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """The same for CLI tests, where the error becomes a message and exit code 1: a test
    that fails after a :class:`DeviceUnusableError` was raised in it (in this process, or
    in a CLI subprocess whose message the failure shows) is a skip."""
    rep = yield
    if rep.when == "call" and rep.failed:
        why = str(DeviceUnusableError.last) if DeviceUnusableError.last is not None else None
        if why is None:  # a CLI subprocess: its message, if the test shows it
            text = rep.capstderr + "\n" + rep.longreprtext
            why = next((ln for ln in text.splitlines() if "cannot build kernels:" in ln), None)
        if why is not None:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0,
                            "Skipped: " + why.split("; devices that work")[0])
    return rep


@pytest.fixture(autouse=True)
def _isolated_tuning_dir(tmp_path_factory, monkeypatch):
    """Tests never read or write the developer's own tuning database (and each test sees
    the tuning DB's once-per-file-and-key warnings afresh)."""
    from clkernels.tuning import database

    monkeypatch.setenv("PYEDMCL_TUNING_DIR", str(tmp_path_factory.mktemp("tuning")))
    monkeypatch.setattr(database, "_warned", set())


#: lines of Oclgrind's reports (its races read "Read-write data race at local memory
#: address ..." / "Write-write data race ...": the capitalised "Data race" alone matched
#: none of them)
OCLGRIND_ERRORS = ("Invalid read", "Invalid write", "Data race", "data race",
                   "Uninitialized value", "uninitialized", "Work-group divergence",
                   "barrier divergence", "Invalid access", "out-of-bounds", "Oclgrind - ",
                   "error:")
# PyOpenCL's own device queries that OCLGRIND_CHECK_API would flag are not enabled.


def run_under_oclgrind(code: str, timeout: float = 600, ignore_uninitialized: bool = False,
                       unoptimised: bool = False) -> str:
    """Run ``code`` in a subprocess on Oclgrind with its memory/race/uninit checks on.

    Fails the test on any error Oclgrind reports on stderr (the run itself still
    "succeeds" under Oclgrind, so stderr is what counts) and on a non-zero exit.
    ``ignore_uninitialized`` drops only uninitialised-value reports (for a known,
    documented report); invalid accesses and data races still fail. ``unoptimised``
    builds the kernels with ``-cl-opt-disable``: Oclgrind's uninitialised-value plugin
    cannot follow LLVM's ``freeze`` instruction, which its optimiser inserts into some
    kernels (the fused k-NN's), and then reports every later read of their outputs as
    uninitialised; unoptimised, the plugin checks those kernels and their readers.
    """
    if not HAS_OCLGRIND:
        pytest.skip("Oclgrind not installed (pip install 'pyedmcl[oclgrind]')")
    env = dict(os.environ)
    env.update({
        "PYEDMCL_DEVICE": "oclgrind",
        "CLKERNELS_DEVICE": "oclgrind",  # a snippet may run clkernels alone
        "OCLGRIND_DATA_RACES": "1",
        "OCLGRIND_UNINITIALIZED": "1",
        "OCLGRIND_UNINITIALIZED_DEBUG": "0",
        "PYOPENCL_NO_CACHE": "1",
    })
    if unoptimised:
        env["PYEDMCL_BUILD_OPTIONS"] = " ".join(
            filter(None, [env.get("PYEDMCL_BUILD_OPTIONS", ""), "-cl-opt-disable"]))
    if ignore_uninitialized:
        # Oclgrind's uninitialised-value plugin also changes results on that path
        # (seen: an all-zero xmap matrix), so it is off there; bounds/races stay on.
        env.pop("OCLGRIND_UNINITIALIZED")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    bad = [ln for ln in proc.stderr.splitlines() if any(e in ln for e in OCLGRIND_ERRORS)]
    if ignore_uninitialized:  # a documented known report; bounds and races still fail
        bad = [ln for ln in bad if "ninitialized" not in ln]
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stderr[-4000:]}"
    assert not bad, "Oclgrind reported errors:\n" + "\n".join(bad[:40]) + "\n" + proc.stderr[-3000:]
    return proc.stdout


def wait_for_done_blocks(out, n: int, alive, timeout: float = 120.0) -> int:
    """Poll an xmap Zarr store until ``n`` row blocks are marked done (or ``alive()``
    turns false, or ``timeout``); returns the count seen. Used to kill jobs mid-way."""
    import time

    import numpy as np
    import zarr

    done, t0 = 0, time.time()
    while time.time() - t0 < timeout and alive():
        time.sleep(0.2)
        try:
            done = int(np.asarray(zarr.open_group(str(out), mode="r")["done"][:]).sum())
        except Exception:  # noqa: BLE001 - store not created yet
            continue
        if done >= n:
            break
    return done


def assert_network_matches_pyunicorn(r, net) -> None:
    """A :func:`pyedmcl.recurrence_network` result equals pyunicorn's RecurrenceNetwork
    ``net``: degrees exactly; densities, clusterings, transitivity and path length to
    1e-12 relative (the same integer counts, summed in another order)."""
    import numpy as np

    assert np.array_equal(r.degree, net.degree())
    assert r.link_density == pytest.approx(net.link_density, rel=1e-12)
    np.testing.assert_allclose(r.local_clustering, net.local_clustering(), rtol=1e-12, atol=0)
    assert r.global_clustering == pytest.approx(net.global_clustering(), rel=1e-12)
    assert r.transitivity == pytest.approx(net.transitivity(), rel=1e-12)
    assert r.average_path_length == pytest.approx(net.average_path_length(), rel=1e-12)


def assert_rqa_matches_oracle(res, ref) -> None:
    """An RQA result's recurrences and histograms equal the NumPy full-matrix oracle's
    (``pyedmcl.rqa._oracles.numpy_reference``), zero bins past the shorter one aside."""
    assert res.n_recurrences == ref["n_rec"]
    for k, o in (("diagonal_hist", ref["diag"]), ("vertical_hist", ref["vert"]),
                 ("white_hist", ref["white"])):
        h = np.asarray(getattr(res, k), np.int64)
        n = max(h.size, o.size)
        assert np.array_equal(np.pad(h, (0, n - h.size)), np.pad(o, (0, n - o.size))), k


class SlowCheck:
    """A stand-in for the merge check's future: it answers after ``polls`` calls of
    ``done()`` (None: only when asked for the result), so that a test decides when a
    speculating RQA run learns the verdict."""

    def __init__(self, fn, polls):
        self.fn, self.polls, self.value, self.ran = fn, polls, None, False

    def done(self) -> bool:
        if self.polls is None:
            return self.ran
        self.polls -= 1
        return self.polls < 0

    def result(self):
        if not self.ran:
            self.value, self.ran = self.fn(), True
        return self.value


def failing_check(monkeypatch, polls) -> tuple[list, list]:
    """RQA calls made after this run beside a float32 merge check that answers after
    ``polls`` polls (:class:`SlowCheck`), with one launch in flight while it is
    pending. Returns (launches, stopped): the real type of every launch made, and for
    every run the check stopped the number of launches made before it."""
    import importlib

    from pyedmcl import _precision

    dnr = importlib.import_module("pyedmcl.rqa.dnr")
    monkeypatch.setattr(_precision, "_check_pool", lambda: SlowCheckPool(polls))
    monkeypatch.setattr(dnr, "SPECULATION_AHEAD", 1)
    launches, stopped = [], []
    launch = dnr._launch

    def spy(st, ln, m, fold_bins):
        try:
            launch(st, ln, m, fold_bins)
        except dnr.SpeculationFailed:
            stopped.append(len(launches))
            raise
        launches.append(m.spec.real)

    monkeypatch.setattr(dnr, "_launch", spy)
    return launches, stopped


class SlowCheckPool:
    """A stand-in for :func:`pyedmcl._precision._check_pool`'s executor: each check it
    is given answers as :class:`SlowCheck` does after ``polls`` polls."""

    def __init__(self, polls):
        self.polls = polls

    def submit(self, fn):
        return SlowCheck(fn, self.polls)


class GpuInfo:
    """The fields of an H100's DeviceInfo that the RQA heuristics and constraints read."""

    is_gpu = True
    runtime = "nvidia"
    max_work_group_size = 1024
    max_work_item_sizes = (1024, 1024, 64)
    local_mem_bytes = 48 * 1024


def rqa_template_params(**values) -> dict:
    """Every value the rqa_lines template declares, for rendering tests: a float32
    Euclidean E = 2 kernel with every option off, ``values`` over it."""
    base = {"E": 2, "TAU": 1, "METRIC": "euclidean", "REAL": "float", "MODE": "vertical",
            "VEC": 1, "WG": 32, "HBINS": 8, "JOINT": 0, "THEILER_MATRIX": 0, "WBORDER": 1,
            "BITS": 2, "PH": 0, "CBITS": 0, "VHINT": 0, "SHARE": 0, "SYM": 0, "WALK": 0, "FMA": 0,
            "PERCOL": 0, "UNR": 0, "PACK": 0, "PLANES": 0, "HCH": 0, "SHFL": 0, "DPAIR": 0,
            "WARM": 0, "DMAJ": 0, "EXACT": 0, "NTHR": 1, "WBOX": 0, "DSEG": 1}
    return dict(base, **values)

