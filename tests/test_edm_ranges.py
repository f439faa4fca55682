"""lib/pred resolution against pyEDM's own CreateIndices/RemoveNan (no device needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pyedmcl.edm.ranges import parse_ranges, resolve

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
