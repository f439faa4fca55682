"""Thousands of generated bad inputs thrown at the public API: only clear errors.

Each example breaks exactly one rule (a known-invalid value for one argument, the
rest valid), so the expected outcome is known: a ValueError or TypeError whose
message names the offending parameter. Any other exception, a hang (hypothesis
deadline), or a silent result counts as a failure. Valid controls are mixed in
to make sure the harness does not pass by rejecting everything. Runs on PoCL at
tiny sizes.

Profiles: on CI each test draws ``PYEDMCL_FUZZ_EXAMPLES`` examples (default 12: a
few seconds in all); ``python tests/fuzz_long.py`` runs the long profile (hundreds
per test, >= 1,000 bad inputs in all) and prints how many inputs were generated
(see docs/reliability.md). Generated inputs are counted per test and written to
``PYEDMCL_FUZZ_COUNT_FILE`` when it is set.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from collections import Counter

import numpy as np
import pytest
from conftest import CPU_DEVICE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyedmcl as pe

EXAMPLES = int(os.environ.get("PYEDMCL_FUZZ_EXAMPLES", "12"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=20000, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
#: generated inputs per test (the long run reports the total)
COUNTS: Counter[str] = Counter()


def _count(name: str) -> None:
    COUNTS[name] += 1


@pytest.fixture(scope="module", autouse=True)
def _write_counts():
    yield
    path = os.environ.get("PYEDMCL_FUZZ_COUNT_FILE")
    if path:
        with open(path, "w") as f:
            json.dump(dict(COUNTS), f, indent=1)


DEVICE = CPU_DEVICE
N = 60


def _good_series(n=N):
    return np.sin(np.arange(n) * 0.7) + 0.01 * np.arange(n)


BAD_INTS = st.one_of(st.integers(-10**6, 0), st.integers(10**6, 10**9))
# integral floats (2.0) are valid integers (test_integral_floats_are_integers); every
# other float, numpy float, bool, digit string, None and list is not
NON_INTS = st.one_of(st.floats(allow_nan=True).filter(lambda f: not (math.isfinite(f) and f.is_integer())),
                     st.floats(-100, 100).map(np.float32).filter(lambda f: not float(f).is_integer()),
                     st.booleans(), st.integers(0, 9).map(str),
                     st.text(max_size=3), st.none(), st.lists(st.integers(), max_size=2))


@st.composite
def bad_series(draw):
    kind = draw(st.sampled_from(["nan", "inf", "short", "2d", "str", "empty", "obj"]))
    x = _good_series()
    if kind == "nan":
        x[draw(st.integers(0, N - 1))] = np.nan
    elif kind == "inf":
        x[draw(st.integers(0, N - 1))] = draw(st.sampled_from([np.inf, -np.inf]))
    elif kind == "short":
        x = x[: draw(st.integers(1, 3))]
    elif kind == "2d":
        x = np.ones((draw(st.integers(2, 4)), draw(st.integers(2, 4)), 2))
    elif kind == "str":
        x = np.array(["a"] * N)
    elif kind == "empty":
        x = np.array([], dtype=float)
    else:
        x = np.array([object()] * 5, dtype=object)
    return kind, x


def _expect_clear_error(fn, *names):
    with pytest.raises((ValueError, TypeError)) as ei:
        fn()
    msg = str(ei.value)
    assert msg and any(n in msg for n in names), f"error does not name {names}: {msg!r}"


SERIES_WORDS = ("x", "NaN", "inf", "short", "empty", "1-D", "numbers", "dtype", "values", "series")


@SETTINGS
@given(bad=bad_series(), fn=st.sampled_from(["simplex", "smap", "embed_dimension", "rqa", "ccm"]))
def test_bad_series(bad, fn):
    _count('test_bad_series')
    kind, x = bad
    if kind == "short" and fn == "rqa":
        x = x[:1] if x.size > 1 else x  # rqa with E=3 needs >= 3 values
    calls = {
        "simplex": lambda: pe.simplex(x, E=3, device=DEVICE),
        "smap": lambda: pe.smap(x, E=3, theta=1.0, device=DEVICE),
        "embed_dimension": lambda: pe.embed_dimension(x, max_E=4, device=DEVICE),
        "rqa": lambda: pe.rqa(x, E=3, radius=0.5, device=DEVICE),
        "ccm": lambda: pe.ccm(x, _good_series(len(x)) if x.ndim == 1 and x.dtype.kind == "f" else x,
                              E=3, lib_sizes=[10, 20], sample=2, seed=1, device=DEVICE),
    }
    if kind == "nan" and fn in ("simplex", "smap", "ccm"):
        calls[fn]()  # missing data, not bad input: pyEDM's NaN rules (test_multivariate.py)
        return
    _expect_clear_error(calls[fn], *SERIES_WORDS)


@SETTINGS
@given(param=st.sampled_from(["E", "tau", "knn", "Tp", "exclusion_radius"]),
       value=st.one_of(BAD_INTS, NON_INTS))
def test_bad_edm_parameters(param, value):
    _count('test_bad_edm_parameters')
    if param == "Tp" and isinstance(value, int) and abs(value) < N:
        value = 10**7  # small negative Tp is legal (hindcasting)
    if param == "knn" and (value is None or (value == 0 and not isinstance(value, bool | str))):
        value = -1  # knn=0 means "the default, E+1", as in pyEDM
    if param == "tau" and isinstance(value, int) and -N < value < 0:
        value = 0  # negative tau (future lags, pyEDM's positive tau) is legal; 0 is not
    if param == "exclusion_radius" and isinstance(value, int) and 0 <= value < 10**6:
        value = -1 - value
    kw = {"E": 3, "tau": 1, "Tp": 1, "knn": None, "exclusion_radius": 0, param: value}
    x = _good_series()
    _expect_clear_error(lambda: pe.simplex(x, device=DEVICE, **kw), param)


@SETTINGS
@given(param=st.sampled_from(["radius", "recurrence_rate", "E", "tau", "l_min", "theiler", "metric"]),
       value=st.one_of(st.floats(-1e6, 0.0), st.floats(1.0, 1e6), st.just(float("nan")),
                       st.text(max_size=4), st.integers(-100, 0)))
def test_bad_rqa_parameters(param, value):
    _count('test_bad_rqa_parameters')
    kw = {"E": 2, "tau": 1, "radius": 0.3}
    if param == "recurrence_rate":
        kw.pop("radius")
        if isinstance(value, float) and 0 < value < 1:
            value = 1.5
    if param == "radius" and isinstance(value, float) and value > 0 and math.isfinite(value):
        value = -value
    if param in ("E", "tau", "l_min") and isinstance(value, float) and value.is_integer() and value > 0:
        value = -value
    if param == "theiler" and isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        value = -1.5
    if param == "metric" and not isinstance(value, str):
        value = "no-such-metric"
    if param == "metric" and value.lower() in ("euclidean", "maximum", "manhattan", "l1", "l2"):
        value = value + "x"
    kw[param] = value
    _expect_clear_error(lambda: pe.rqa(_good_series(), device=DEVICE, **kw),
                        param, "E", "tau", "metric", "radius", "rate")


@SETTINGS
@given(lib=st.one_of(st.just([]), st.just("1"), st.tuples(st.integers(-50, 0), st.integers(1, 40)).map(list),
                     st.tuples(st.integers(1, 30), st.integers(N + 1, 10**6)).map(list),
                     st.tuples(st.integers(30, 59), st.integers(1, 29)).map(list),
                     st.text(alphabet="ab ,", min_size=1, max_size=5)),
       which=st.sampled_from(["lib", "pred"]))
def test_bad_ranges(lib, which):
    _count('test_bad_ranges')
    _expect_clear_error(lambda: pe.simplex(_good_series(), E=2, device=DEVICE, **{which: lib}), which)


@settings(max_examples=max(5, EXAMPLES // 4), deadline=20000, derandomize=True)
@given(E=st.integers(1, 4), tau=st.integers(1, 3), Tp=st.integers(0, 3))
def test_valid_controls_succeed(E, tau, Tp):
    """The harness must not pass by rejecting everything: valid inputs give finite skill."""
    _count('test_valid_controls_succeed')
    r = pe.simplex(_good_series(), E=E, tau=tau, Tp=Tp, device=DEVICE)
    assert np.isfinite(r.rho)


@settings(max_examples=max(5, EXAMPLES // 2), deadline=20000, derandomize=True)
@given(args=st.sampled_from([
    ["simplex", "missing.csv", "--E", "2"],
    ["rqa", "missing.csv", "--radius", "0.1"],
    ["tune", "nosuchkernel"],
    ["devices", "--bogus"],
    ["nosuchcommand"],
]), device=st.sampled_from([None, "nosuchdevice"]))
def test_cli_bad_usage_exit_2(args, device):
    _count('test_cli_bad_usage_exit_2')
    from pyedmcl.cli.main import main

    argv = list(args)
    if device and args[0] in ("simplex", "rqa"):
        argv += ["--device", device]
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 2
    err = buf.getvalue()
    assert "Traceback" not in err and err.strip()


# --- every public entry point: integer parameters --------------------------------------

_X = _good_series()
_Y = np.cos(np.arange(N) * 0.5)
_P = np.stack([_X, _Y, _X * _Y], axis=1)
#: entry point -> (call with keyword overrides, its integer parameters and a valid value)
ENTRY = {
    "simplex": (lambda **k: pe.simplex(_X, device=DEVICE, **{"E": 2, **k}), {"E": 2, "tau": 1, "knn": 3}),
    "smap": (lambda **k: pe.smap(_X, theta=1.0, device=DEVICE, **{"E": 2, **k}), {"E": 2, "Tp": 1}),
    "ccm": (lambda **k: pe.ccm(_X, _Y, lib_sizes=[10, 20], device=DEVICE,
                                **{"E": 2, "sample": 2, "seed": 1, **k}),
            {"E": 2, "sample": 2, "seed": 1, "exclusion_radius": 0}),
    "embed_dimension": (lambda **k: pe.embed_dimension(_X, device=DEVICE, **{"max_E": 3, **k}),
                        {"max_E": 3, "tau": 1, "Tp": 1, "exclusion_radius": 0}),
    "predict_interval": (lambda **k: pe.predict_interval(_X, device=DEVICE, **{"E": 2, "max_Tp": 2, **k}),
                         {"E": 2, "max_Tp": 2}),
    "predict_exclusion_radius": (lambda **k: pe.predict_exclusion_radius(
        _X, radii=[0, 1], device=DEVICE, **{"E": 2, **k}), {"E": 2, "Tp": 1}),
    "predict_nonlinear": (lambda **k: pe.predict_nonlinear(_X, thetas=[0, 1], device=DEVICE,
                                                           **{"E": 2, **k}), {"E": 2, "tau": 1}),
    "generate": (lambda **k: pe.generate(_X, device=DEVICE, **{"E": 2, "steps": 3, **k}),
                 {"E": 2, "steps": 3, "tau": 1, "Tp": 1}),
    "multiview": (lambda **k: pe.multiview(_P, "0", lib=[1, 30], pred=[31, 60], device=DEVICE,
                                           **{"E": 2, "D": 2, **k}),
                  {"E": 2, "D": 2, "tau": 1, "n_views": 2}),
    "knn_table": (lambda **k: pe.knn_table(_X, device=DEVICE, **{"E": 2, **k}),
                  {"E": 2, "knn": 3, "exclusion_radius": 0}),
    "knn_search": (lambda **k: pe.knn_search(_X, knn_method="exact", device=DEVICE, **{"E": 2, **k}),
                   {"E": 2, "knn": 3}),
    "measure_recall": (lambda **k: pe.measure_recall(_X, knn_method="exact", device=DEVICE,
                                                     **{"E": 2, "sample": 10, **k}),
                       {"E": 2, "sample": 10, "seed": 0}),
    "embed": (lambda **k: pe.embed(_X, **{"E": 2, **k}), {"E": 2, "tau": 1}),
    "pairwise_distances": (lambda **k: pe.pairwise_distances(_X, device=DEVICE, **{"E": 2, **k}),
                           {"E": 2, "tau": 1}),
    "rqa": (lambda **k: pe.rqa(_X, radius=0.5, device=DEVICE, **{"E": 2, **k}),
            {"E": 2, "tau": 1, "theiler": 1, "l_min": 2, "v_min": 2, "w_min": 2, "edge": 16}),
    "cross_rqa": (lambda **k: pe.cross_rqa(_X, _Y, radius=0.5, device=DEVICE, **{"E": 2, **k}),
                  {"E": 2, "l_min": 2, "theiler": 0}),
    "joint_rqa": (lambda **k: pe.joint_rqa(_X, _Y, radius=0.5, device=DEVICE, **{"E": 2, **k}),
                  {"E": 2, "w_min": 2}),
    "recurrence_plot": (lambda **k: pe.recurrence_plot(_X, radius=0.5, device=DEVICE, **{"E": 2, **k}),
                        {"E": 2, "size": 16}),
    "xmap": (lambda **k: pe.xmap(_P, device=DEVICE, **{"E": 2, **k}), {"E": 2, "Tp": 0, "max_E": 3}),
}
ENTRY_PARAMS = [(f, p) for f, (_, ps) in ENTRY.items() for p in ps]
#: values out of range for every integer parameter above (negative where the parameter
#: allows 0, e.g. theiler; beyond any series length for sizes)
OUT_OF_RANGE = st.one_of(st.integers(-10**6, -2), st.integers(10**7, 10**12))


def _summary(r):
    for a in ("rho", "rho_xy", "RR", "values"):
        if hasattr(r, a):
            return np.asarray(getattr(r, a), dtype=float).ravel()
    if hasattr(r, "rho_matrix"):
        return np.asarray(r.rho_matrix).ravel()
    if isinstance(r, tuple):
        return np.asarray(r[-1], dtype=float).ravel()
    for a in ("distances", "matrix"):
        if hasattr(r, a):
            return np.asarray(getattr(r, a), dtype=float).ravel()
    return np.asarray(r, dtype=float).ravel()


@SETTINGS
@given(fp=st.sampled_from(ENTRY_PARAMS), value=st.one_of(NON_INTS, OUT_OF_RANGE))
def test_every_entry_point_refuses_bad_integers(fp, value):
    """A non-integral, boolean, string or out-of-range value of any integer parameter of
    any public function: a ValueError/TypeError naming it, never a crash or a silent run."""
    _count("test_every_entry_point_refuses_bad_integers")
    fn, param = fp
    if param in ("seed", "knn", "edge") and value is None:
        value = -7  # None is valid there (fresh entropy, the default knn / edge)
    if param == "Tp" and isinstance(value, int) and not isinstance(value, bool) and value < 0 \
            and fn != "predict_exclusion_radius":
        value = -value  # small negative Tp is legal; huge positive is not
    if param == "exclusion_radius" and fn in ("knn_table", "ccm") and value == -1:
        value = -2  # -1 means "no exclusion" there
    if param in ("theiler", "edge", "exclusion_radius") and isinstance(value, int) and value > 0:
        value = -5 - value  # a window, edge or radius wider than the data is legal (clamped)
    if param == "seed" and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        value = -value  # any seed >= 0 is valid
    if param == "sample" and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        # measure_recall clamps sample to the points there are; CCM's bound is the host
        # memory, so ask for far more than any machine has
        value = 0 if fn == "measure_recall" else 10**12
    call = ENTRY[fn][0]
    _expect_clear_error(lambda: call(**{param: value}), param)


@settings(max_examples=max(5, EXAMPLES // 2), deadline=20000, derandomize=True)
@given(fp=st.sampled_from(ENTRY_PARAMS), kind=st.sampled_from(["float", "np.float32", "np.int64"]))
def test_integral_floats_are_integers(fp, kind):
    """``E=2.0`` (or a numpy scalar) gives exactly the result of ``E=2``: accepted, not
    truncated, not a crash inside a template."""
    _count("test_integral_floats_are_integers")
    fn, param = fp
    call, params = ENTRY[fn]
    good = params[param]
    conv = {"float": float, "np.float32": np.float32, "np.int64": np.int64}[kind]
    ref, got = _summary(call(**{param: good})), _summary(call(**{param: conv(good)}))
    np.testing.assert_array_equal(got, ref)


# --- the CLI: broken files of every input format, bad option values -----------------------

def _cli(argv, stdin_text: str | None = None) -> tuple[int, str]:
    from pyedmcl.cli.main import main

    err = io.StringIO()
    old = sys.stdin
    try:
        if stdin_text is not None:
            sys.stdin = io.StringIO(stdin_text)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(argv)
    finally:
        sys.stdin = old
    return rc, err.getvalue()


def _assert_exit_2(rc: int, err: str, what) -> None:
    assert rc == 2, (what, rc, err)
    assert "Traceback" not in err and err.strip(), (what, err)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "error" in lines[0], (what, err)


@st.composite
def broken_file(draw):
    """(suffix, writer) of a broken input: junk bytes, truncated or wrong-shaped data."""
    fmt = draw(st.sampled_from(["csv", "npy", "h5", "zarr", "stdin"]))
    junk = draw(st.binary(min_size=0, max_size=64))
    kind = draw(st.sampled_from(["junk", "truncated", "shape", "values"]))
    return fmt, kind, junk, draw(st.integers(1, 6))


def _write_broken(root, fmt, kind, junk, k):
    """Write the broken input under ``root``; return (path argument, stdin text or None)."""
    import shutil

    if fmt in ("csv", "stdin"):
        if kind == "junk":
            text = junk.decode("latin-1")
        elif kind == "truncated":
            text = "a,b\n" + "\n".join(f"{i},{i * 0.5}" for i in range(k)) + "\n,1"  # cut row
        elif kind == "shape":
            text = "a\n" + "\n".join(["x"] * (k + 5))
        else:
            text = "a,b\n" + "\n".join(f"{v},{v}" for v in ["nan", "inf", "1e999", "", "-"][: k % 5 + 1] * 8)
        if fmt == "stdin":
            return "-", text
        path = root / "in.csv"
        path.write_bytes(text.encode("latin-1"))
        return str(path), None
    if fmt == "npy":
        path = root / "in.npy"
        if kind == "junk":
            path.write_bytes(junk)
        elif kind == "truncated":
            buf = io.BytesIO()
            np.save(buf, np.arange(50.0))
            path.write_bytes(buf.getvalue()[: 40 + k * 8])
        elif kind == "shape":
            np.save(path, np.ones((3, 3, k)))
        else:
            np.save(path, np.array(["a"] * 30) if k % 2 else np.full(30, np.nan))
        return str(path), None
    if fmt == "h5":
        h5py = pytest.importorskip("h5py")
        path = root / "in.h5"
        if kind in ("junk", "truncated"):
            path.write_bytes(b"\x89HDF\r\n\x1a\n" * (kind == "truncated") + junk)
        else:
            with h5py.File(path, "w") as f:
                if kind == "shape":
                    f["x"] = np.ones((2, 2, k))
                else:
                    f["x"] = np.full(30, np.inf)
        return str(path), None
    zarr = pytest.importorskip("zarr")
    path = root / "in.zarr"
    shutil.rmtree(path, ignore_errors=True)
    if kind in ("junk", "truncated"):
        path.mkdir()
        (path / "zarr.json").write_bytes(junk if kind == "junk" else b'{"zarr_format": 3, "node_type": "arr')
    else:
        zarr.save_array(str(path), np.ones((2, 2, k)) if kind == "shape" else np.full(30, np.nan))
    return str(path), None


CLI_COMMANDS = [["simplex", "{p}", "-E", "2"], ["rqa", "{p}", "-E", "2", "--radius", "0.5"],
                ["edim", "{p}", "--max-E", "3"], ["crqa", "{p}", "{p}", "--radius", "0.5"]]


@SETTINGS
@given(bad=broken_file(), cmd=st.sampled_from(CLI_COMMANDS))
def test_cli_broken_files_exit_2(tmp_path_factory, bad, cmd):
    """Broken .csv/.npy/.h5/.zarr files and stdin: exit 2 with one line, no traceback."""
    _count("test_cli_broken_files_exit_2")
    fmt, kind, junk, k = bad
    root = tmp_path_factory.mktemp("fuzz")
    p, stdin_text = _write_broken(root, fmt, kind, junk, k)
    if cmd[0] == "crqa" and p == "-":
        cmd = ["crqa", "-", "-", "--radius", "0.5"]
    argv = [a.replace("{p}", p) for a in cmd] + ["--device", DEVICE]
    rc, err = _cli(argv, stdin_text)
    _assert_exit_2(rc, err, (fmt, kind, argv))


OPTIONS = {"simplex": ["-E", "--tau", "--Tp", "--knn", "--exclusion-radius"],
           "rqa": ["-E", "--tau", "--radius", "--rr", "--theiler", "--l-min"],
           "edim": ["--max-E", "--tau", "--Tp"],
           "ccm": ["-E", "--sample", "--seed", "--lib-sizes"]}
BAD_OPTION_VALUES = st.one_of(st.sampled_from(["1.5", "nan", "inf", "-inf", "x", "", "0x10", "1e400",
                                               "-5", "0", "10000000000", "1e-300", "2 3"]),
                              st.text(alphabet="0123456789.-e x", max_size=6))


@SETTINGS
@given(cmd=st.sampled_from(sorted(OPTIONS)), data=st.data())
def test_cli_bad_option_values_exit_2(tmp_path_factory, cmd, data):
    """Bad numbers for numeric options: exit 2 and one line (or a valid run, when the
    drawn text happens to be a legal value: then the result must be exit 0)."""
    _count("test_cli_bad_option_values_exit_2")
    opt = data.draw(st.sampled_from(OPTIONS[cmd]))
    value = data.draw(BAD_OPTION_VALUES)
    root = tmp_path_factory.mktemp("opt")
    path = root / "in.csv"
    path.write_text("a,b\n" + "\n".join(f"{_X[i]},{_Y[i]}" for i in range(N)))
    base = {"simplex": [cmd, str(path), "-E", "2"], "rqa": [cmd, str(path), "-E", "2", "--radius", "0.5"],
            "edim": [cmd, str(path), "--max-E", "3"],
            "ccm": [cmd, str(path), "--column", "a", "--target", "b", "-E", "2", "--lib-sizes", "10 20",
                    "--sample", "2"]}[cmd]
    if opt in base:  # replace the option's valid value
        i = base.index(opt)
        base = base[:i] + base[i + 2:]
    if opt == "--rr":
        base = [a for a in base if a not in ("--radius", "0.5")]
    argv = base + [f"{opt}={value}", "--device", DEVICE, "-q"]
    rc, err = _cli(argv)
    if rc == 0:
        return  # a legal value (e.g. "-5" for --Tp): ran normally
    _assert_exit_2(rc, err, argv)
