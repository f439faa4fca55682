"""The k-NN table of few queries over a long library, scanned in overlapping chunks by
several work-groups and merged on the device (knn/merge.cl.mako): the single launch's
table bit for bit (rows variant, split scans as the float64 redo runs them)."""

from __future__ import annotations

import numpy as np
import pytest

from clkernels import get_backend
from pyedmcl.kernels.knn import chunk_layout
from pyedmcl.primitives.knn import knn_device, knn_device_chunked

PARAMS = {"VARIANT": "rows", "WG": 16, "SPLIT": 16, "TILE": 16, "EA": 0, "QB": 1, "QQ": 1,
          "CB": 0, "INS": "reg", "FLAG": 1, "SLIDE": 0}


def test_chunk_layout_covers_the_library():
    for nl in (1, 5, 97, 1000, 1001):
        for chunks in (1, 2, 3, 7, 16):
            nb, length, stride = chunk_layout(nl, chunks)
            covered = np.zeros(nl, bool)
            for b in range(nb):
                assert b * stride + length <= nl
                covered[b * stride:b * stride + length] = True
            assert covered.all() and nb <= max(1, min(chunks, nl)) and stride <= length


@pytest.mark.parametrize("real", ["float", "double"])
@pytest.mark.parametrize("E, tau, k, radius, chunks", [(3, 1, 4, 0, 3), (7, 2, 8, 2, 5),
                                                       (2, 3, 3, -1, 8)])
def test_chunked_table_equals_one_launch(device, real, E, tau, k, radius, chunks):
    """A quantised walk (exact ties at every distance, broken by the tie key across
    chunk edges) and a plain one; queries inside and outside the library."""
    be = get_backend(device)
    if real == "double" and not be.info.fp64:
        pytest.skip("no fp64 on this device")
    dt = np.float64 if real == "double" else np.float32
    walk = np.cumsum(np.random.default_rng(E).standard_normal(700))
    npts = walk.size - (E - 1) * tau
    lib = np.arange(5, npts - 3, dtype=np.int32)
    q = np.array([0, 7, 100, 101, 350, npts - 1, 42], np.int32)
    for x in (np.round(walk / 3), walk):
        xd = be.to_device(x.astype(dt))
        one = knn_device(be, xd, x.size, E=E, tau=tau, k=k, qpts=q, lpts=lib, radius=radius,
                         real=real, params=PARAMS)
        got = knn_device_chunked(be, xd, x.size, E=E, tau=tau, k=k, q_dev=be.to_device(q),
                                 nq=q.size, l_dev=be.to_device(lib), nl=lib.size,
                                 radius=radius, chunks=chunks, params=PARAMS, real=real)
        np.testing.assert_array_equal(be.to_host(got.idx), be.to_host(one.idx))
        np.testing.assert_array_equal(be.to_host(got.dist), be.to_host(one.dist))
