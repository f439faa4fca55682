"""Maps and scans of decimal data decide as float64 does.

xmap and the skill scans have no float32 row check: on a 0.1 grid float32's roundings
chose other k-th neighbours than float64's (xmap rho moved by 3e-2, predict_interval
by 5e-3). A default-dtype call of decimal data runs in float64
(:func:`pyedmcl.xmap.core.decimal_panel`, the scans' inputs); other data keep float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyedmcl as pe


def _panel(L: int = 300, N: int = 4, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.zeros((L, N))
    X[0] = rng.uniform(0.2, 0.8, N)
    for t in range(1, L):
        X[t] = 3.8 * X[t - 1] * (1 - X[t - 1])
        X[t, 1:] = 0.8 * X[t, 1:] + 0.2 * X[t - 1, :-1]
    return X


def test_decimal_panel_maps_as_float64():
    X = _panel()
    Xq = np.round(X * 30) / 10
    np.testing.assert_array_equal(pe.xmap(Xq, E=3).rho, pe.xmap(Xq, E=3, dtype="float64").rho)
    # real-valued data keep float32 (its rho differs from float64's in the last digits)
    assert not np.array_equal(pe.xmap(X, E=3).rho, pe.xmap(X, E=3, dtype="float64").rho)


def test_decimal_panel_detection():
    from pyedmcl.xmap.core import decimal_panel
    X = _panel(L=50)
    assert decimal_panel(np.round(X, 2)) and decimal_panel({"a": np.round(X[:, 0], 1)})
    assert not decimal_panel(X) and not decimal_panel(np.empty((0, 3)))


@pytest.mark.parametrize("scan, kw", [(pe.embed_dimension, {"max_E": 5}),
                                      (pe.predict_interval, {"E": 3, "max_Tp": 5})])
def test_decimal_scans_as_float64(scan, kw):
    x = _panel(L=400, N=1)[:, 0]
    xq = np.round(x * 30) / 10
    np.testing.assert_array_equal(scan(xq, **kw).rho, scan(xq, dtype="float64", **kw).rho)
