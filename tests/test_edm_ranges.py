"""lib/pred resolution against pyEDM's own CreateIndices/RemoveNan (no device needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pyedmcl.primitives.ranges import parse_ranges, resolve

pyEDM = pytest.importorskip("pyEDM")

CASES = [
    dict(E=3, tau=1, Tp=1, lib="1 100", pred="101 150"),
    dict(E=3, tau=2, Tp=1, lib="1 100", pred="1 100"),
    dict(E=2, tau=1, Tp=3, lib="1 40 61 120", pred="30 90"),
    dict(E=4, tau=1, Tp=0, lib="1 150", pred="1 150"),
    dict(E=2, tau=1, Tp=-2, lib="1 100", pred="101 150"),
    dict(E=3, tau=-1, Tp=1, lib="1 100", pred="101 150"),  # future lags (pyEDM tau > 0)
    dict(E=3, tau=-2, Tp=2, lib="1 60 80 140", pred="1 140"),
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_rows_match_pyedm(case):
    n = 150
    x = np.sin(np.arange(n) * 0.37) + 0.01 * np.arange(n)
    df = pd.DataFrame({"time": np.arange(1, n + 1), "x": x})
    S = pyEDM.Simplex(dataFrame=df, columns="x", target="x", lib=case["lib"], pred=case["pred"],
                      E=case["E"], Tp=case["Tp"], tau=-case["tau"], returnObject=True)
    plan = resolve(n, E=case["E"], tau=case["tau"], Tp=case["Tp"], lib=case["lib"],
                   pred=case["pred"])
    np.testing.assert_array_equal(plan.lib_times, np.asarray(S.lib_i))
    np.testing.assert_array_equal(plan.pred_times, np.asarray(S.pred_i))
    # kernel point j reads s[j], s[j+|tau|], ...: the vector of row t
    span = (case["E"] - 1) * abs(case["tau"])
    pts = plan.pred_points
    assert pts.min() >= 0 and pts.max() + span < n


def test_parse_forms():
    assert parse_ranges("1 10 21 30", "lib", 30) == [(1, 10), (21, 30)]
    assert parse_ranges([1, 10, 21, 30], "lib", 30) == [(1, 10), (21, 30)]
    assert parse_ranges([(1, 10), (21, 30)], "lib", 30) == [(1, 10), (21, 30)]
    assert parse_ranges(None, "lib", 30) == [(1, 30)]


@pytest.mark.parametrize("kw, word", [
    (dict(E=0), "E"), (dict(E=2, knn=0.5), "knn"), (dict(E=2, knn=-1), "knn"),
    (dict(E=2, lib="1 500"), "lib"), (dict(E=2, pred="0 10"), "pred"),
    (dict(E=2, lib="1 10 20"), "lib"), (dict(E=2, lib=""), "lib"), (dict(E=2, tau=0), "tau"),
    (dict(E=30, tau=4), "E"), (dict(E=2, Tp=200), "Tp"), (dict(E=2, knn=40, lib="1 20"), "knn"),
])
def test_bad_input_names_parameter(kw, word):
    with pytest.raises((ValueError, TypeError), match=word):
        resolve(100, **kw)


def _rows_by_masks(n, E, tau, Tp, lib_pairs, pred_pairs):
    """The rows by explicit masks over whole ranges (the straightforward definition
    that resolve's interval arithmetic replaces)."""
    span = (E - 1) * abs(tau)
    emb = (lambda r: (r >= span) & (r < n)) if tau > 0 else (lambda r: (r >= 0) & (r < n - span))
    parts = []
    for i, (a, b) in enumerate(lib_pairs):
        a, b = (a + span, b) if tau > 0 else (a, b - span)
        if Tp < 0:
            a = max(a, a + abs(Tp) - 1)
        elif i == len(lib_pairs) - 1:
            b -= Tp
        parts.append(np.arange(a - 1, b))
    lib = np.concatenate(parts)
    lib = lib[(lib + Tp >= 0) & (lib + Tp < n) & emb(lib)]
    pred = np.concatenate([r[emb(r)] for r in (np.arange(a - 1, b) for a, b in pred_pairs)])
    return lib, pred, bool(np.intersect1d(lib, pred).size)


@pytest.mark.parametrize("seed", range(40))
def test_interval_rows_equal_mask_rows(seed):
    """resolve's rows (interval arithmetic per pair), point lists and observed rows equal
    the mask-based definition: several, overlapping and unordered pairs, both signs of
    tau and Tp."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 200))
    E, tau, Tp = int(rng.integers(1, 5)), int(rng.choice([-3, -1, 1, 2])), int(rng.integers(-3, 4))

    def pairs(k):
        out = []
        for _ in range(k):  # the series' ends often: the boundary cases
            a = 1 if rng.random() < 0.4 else int(rng.integers(1, n - 20))
            b = n if rng.random() < 0.4 else int(rng.integers(a + 15, n + 1))
            out.append((a, b))
        return out

    lib_pairs, pred_pairs = pairs(int(rng.integers(1, 4))), pairs(int(rng.integers(1, 3)))
    try:
        plan = resolve(n, E=E, tau=tau, Tp=Tp, knn=1, lib=[v for p in lib_pairs for v in p],
                       pred=[v for p in pred_pairs for v in p])
    except ValueError:
        pytest.skip("parameters leave too few rows")
    lib, pred, loo = _rows_by_masks(n, E, tau, Tp, lib_pairs, pred_pairs)
    np.testing.assert_array_equal(plan.lib_times, lib)
    np.testing.assert_array_equal(plan.pred_times, pred)
    assert plan.leave_one_out == loo
    off = (E - 1) * tau if tau > 0 else 0
    np.testing.assert_array_equal(plan.lib_points, lib - off)
    np.testing.assert_array_equal(plan.pred_points, pred - off)
    t = pred + Tp
    np.testing.assert_array_equal(plan.observed_rows, np.where((t >= 0) & (t < n), t, -1))
    assert not plan.lib_points.flags.writeable  # cached on the plan: read-only


def test_plans_are_cached_and_immutable():
    """``resolve`` returns the cached plan for the same parameters (plain ints, strings,
    int lists), a new one for other values or spellings, and never caches an error;
    a plan's arrays are read-only (it is shared by every caller)."""
    from pyedmcl.primitives.ranges import resolve
    a = resolve(300, E=3, tau=1, Tp=1, lib="1 150", pred="151 300")
    assert resolve(300, E=3, tau=1, Tp=1, lib="1 150", pred="151 300") is a
    b = resolve(300, E=3, tau=1, Tp=1, lib=[1, 150], pred=[(151, 300)])
    assert resolve(300, E=3, tau=1, Tp=1, lib=[1, 150], pred=[(151, 300)]) is b
    np.testing.assert_array_equal(a.lib_points, b.lib_points)
    np.testing.assert_array_equal(a.pred_points, b.pred_points)
    assert resolve(300, E=4, tau=1, Tp=1, lib="1 150", pred="151 300") is not a
    arr = resolve(300, E=3, lib=np.array([1, 150]), pred=np.array([151, 300]))
    np.testing.assert_array_equal(arr.lib_points, a.lib_points)
    for _ in range(2):  # the error is raised every time
        with pytest.raises(ValueError, match="knn"):
            resolve(300, E=3, knn=400)
    with pytest.raises(ValueError):
        a.lib_points[0] = 5
    with pytest.raises(ValueError):
        a.pred_times[0] = 5
