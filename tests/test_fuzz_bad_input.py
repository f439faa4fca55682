"""Thousands of generated bad inputs thrown at the public API: only clear errors.

Each example breaks exactly one rule (a known-invalid value for one argument, the
rest valid), so the expected outcome is known: a ValueError or TypeError whose
message names the offending parameter. Any other exception, a hang (hypothesis
deadline), or a silent result counts as a failure. Valid controls are mixed in
to make sure the harness does not pass by rejecting everything. Runs on PoCL at
tiny sizes; bounded by ``max_examples`` per test (>= 1,000 bad inputs in all).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyedmcl as pe

SETTINGS = settings(max_examples=300, deadline=20000, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DEVICE = "pocl"
N = 60


def _good_series(n=N):
    return np.sin(np.arange(n) * 0.7) + 0.01 * np.arange(n)


BAD_INTS = st.one_of(st.integers(-10**6, 0), st.integers(10**6, 10**9))
NON_INTS = st.one_of(st.floats(allow_nan=True).filter(lambda f: not (math.isfinite(f) and f.is_integer())),
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
    _expect_clear_error(calls[fn], *SERIES_WORDS)


@SETTINGS
@given(param=st.sampled_from(["E", "tau", "knn", "Tp", "exclusion_radius"]),
       value=st.one_of(BAD_INTS, NON_INTS))
def test_bad_edm_parameters(param, value):
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
    _expect_clear_error(lambda: pe.simplex(_good_series(), E=2, device=DEVICE, **{which: lib}), which)


@settings(max_examples=60, deadline=20000, derandomize=True)
@given(E=st.integers(1, 4), tau=st.integers(1, 3), Tp=st.integers(0, 3))
def test_valid_controls_succeed(E, tau, Tp):
    """The harness must not pass by rejecting everything: valid inputs give finite skill."""
    r = pe.simplex(_good_series(), E=E, tau=tau, Tp=Tp, device=DEVICE)
    assert np.isfinite(r.rho)


@settings(max_examples=150, deadline=20000, derandomize=True)
@given(args=st.sampled_from([
    ["simplex", "missing.csv", "--E", "2"],
    ["rqa", "missing.csv", "--radius", "0.1"],
    ["tune", "nosuchkernel"],
    ["devices", "--bogus"],
    ["nosuchcommand"],
]), device=st.sampled_from([None, "nosuchdevice"]))
def test_cli_bad_usage_exit_2(args, device):
    import contextlib
    import io

    from pyedmcl.cli.main import main

    argv = list(args)
    if device and args[0] in ("simplex", "rqa"):
        argv += ["--device", device]
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 2
    err = buf.getvalue()
    assert "Traceback" not in err and err.strip()
