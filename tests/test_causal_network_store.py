"""causal_network on a Zarr store: an interrupted pairwise map resumes with the stored
seed and gives the same edges as one uninterrupted run; overwrite replaces only what
pyedmcl wrote; on a Dask LocalCluster the edges equal one device's."""

from __future__ import annotations

import pandas as pd
import pytest
from test_causal_direct import _graph

import pyedmcl as pe

zarr = pytest.importorskip("zarr")


@pytest.fixture(scope="module")
def chain():
    return _graph([(0, 1), (1, 2)], 3, 300, 0.3, 11)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.edges, b.edges)
    pd.testing.assert_frame_equal(a.pruned, b.pruned)


def test_interrupted_store_resumes_to_the_same_edges(chain, tmp_path):
    ref = pe.causal_network(chain, E=2, surrogates=39, seed=7)
    assert len(ref.edges) >= 1 and len(ref.pruned) >= 1
    out = tmp_path / "net.zarr"
    first = pe.causal_network(chain, E=2, surrogates=39, seed=7, out=out)
    _same(first, ref)
    g = zarr.open_group(str(out), mode="r+")
    done = g["done"][:]
    done[::2] = 0  # an interruption: half the blocks never marked done
    g["done"][:] = done
    assert pe.xmap_verify(out).incomplete  # the store now needs a resume
    again = pe.causal_network(chain, E=2, surrogates=39, out=out)  # the stored seed
    _same(again, ref)
    assert pe.xmap_verify(out).ok


def test_overwrite_keeps_a_nested_user_file(chain, tmp_path):
    out = tmp_path / "net.zarr"
    pe.causal_network(chain, E=2, surrogates=39, seed=7, out=out)
    with pytest.raises(ValueError, match="parameters differ"):
        pe.causal_network(chain, E=2, surrogates=59, seed=7, out=out)
    (out / "rho" / "notes").mkdir()
    (out / "rho" / "notes" / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="did not write"):
        pe.causal_network(chain, E=2, surrogates=59, seed=7, out=out, overwrite=True)
    assert (out / "rho" / "notes" / "mine.txt").read_text() == "keep"


def test_dask_local_cluster_equals_one_device(chain, tmp_path):
    pytest.importorskip("distributed")
    ref = pe.causal_network(chain, E=2, surrogates=39, seed=7)
    net = pe.causal_network(chain, E=2, surrogates=39, seed=7, out=tmp_path / "d.zarr",
                            scheduler="local", n_workers=2)
    _same(net, ref)
