"""Recurrence network measures against pyunicorn's RecurrenceNetwork (same recurrence
matrix on quantized float32-representable data, float64): degrees exactly, the
clustering coefficients, transitivity and average path length to 1e-12 relative
(different summation orders of the same integer counts)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_network_matches_pyunicorn

import pyedmcl as pe


def quantized(n: int, seed: int = 2) -> np.ndarray:
    x = np.round(np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 3) / 10
    return x.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("method", ["device", "host"])
@pytest.mark.parametrize("metric", ["euclidean", "maximum"])
def test_network_pyunicorn(metric, method):
    from pyunicorn.timeseries import RecurrenceNetwork

    x = quantized(400)
    um = {"euclidean": "euclidean", "maximum": "supremum"}[metric]
    for kw, ours in (({"threshold": 0.5}, {"radius": 0.5}),
                     ({"recurrence_rate": 0.05}, {"recurrence_rate": 0.05})):
        net = RecurrenceNetwork(x, metric=um, dim=2, tau=1, silence_level=3, **kw)
        r = pe.recurrence_network(x, E=2, metric=metric, dtype="float64", method=method, **ours)
        assert_network_matches_pyunicorn(r, net)


def test_network_disconnected_and_limits():
    """Two far-apart clusters: paths only within each (igraph's unconn=True)."""
    from pyunicorn.timeseries import RecurrenceNetwork

    x = np.concatenate([quantized(60, 1), quantized(60, 3) + 100.0]).astype(np.float32).astype(float)
    net = RecurrenceNetwork(x, metric="euclidean", threshold=0.6, silence_level=3)
    r = pe.recurrence_network(x, radius=0.6, dtype="float64", method="host")
    assert r.average_path_length == pytest.approx(net.average_path_length(), rel=1e-12)
    assert np.isnan(pe.recurrence_network(x, radius=0.6, path_lengths=False,
                                          method="host").average_path_length)
