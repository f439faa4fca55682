"""pe.rqa_batch in blocks of series (pyedmcl.rqa.batch_scale): in memory, into a resumable
Zarr store, over several devices and on a Dask LocalCluster -- every result equal to the
one-call, one-device batch bit for bit (itself equal to pe.rqa per series:
test_rqa_batch.py). Interrupted (Ctrl-C, SIGKILL) and damaged stores resume to the same
rows. Bad input: errors naming the argument.

Exact equality (``DataFrame.equals``: values, dtypes, index), no tolerance.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pyedmcl as pe
from pyedmcl.rqa import batch_scale
from pyedmcl.validation import ConstantSeriesWarning

zarr = pytest.importorskip("zarr")

T, N = 120, 9


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    x = np.random.default_rng(5).standard_normal((T, N)).cumsum(axis=0)
    x[T - 25:, 2] = np.nan  # a shorter series
    x[:, 6] = 3.0  # a constant one
    return x


@pytest.fixture(scope="module")
def ref(X) -> pd.DataFrame:
    with pytest.warns(ConstantSeriesWarning):
        return pe.rqa_batch(X, E=2, radius=1.0)


def _batch(X, **kw):
    with pytest.warns(ConstantSeriesWarning):
        return pe.rqa_batch(X, E=2, radius=1.0, **kw)


def _done(path) -> int:
    return int(np.asarray(zarr.open_group(str(path), mode="r")["done"][:]).sum())


def test_blocks_and_store_equal_the_one_call(X, ref, tmp_path):
    got = _batch(X, block_series=2)
    assert got.equals(ref) and got.attrs["notes"] == ref.attrs["notes"]
    # the blocks run the method asked for (the default: batched), each the same rows
    assert _batch(X, block_series=4, method="series").equals(ref)
    out = tmp_path / "b.zarr"
    got = _batch(X, out=out, block_series=4)
    assert got.equals(ref) and _done(out) == 3
    back = pe.rqa_batch_open(out)
    assert back.equals(ref) and back.attrs["notes"] == ref.attrs["notes"]
    from pyedmcl._outputs import RQA_BATCH_STORE, check_replaceable
    check_replaceable(out, RQA_BATCH_STORE)  # every file inside is pyedmcl's (its manifest)
    # per-series radii and names; the same call resumes (nothing left to compute)
    frame = pd.DataFrame(np.delete(X, 6, axis=1), columns=list("abcdefgh"))
    radii = np.linspace(0.6, 1.6, 8)
    one = pe.rqa_batch(frame, E=2, radius=radii)
    assert pe.rqa_batch(frame, E=2, radius=radii, out=tmp_path / "r.zarr",
                        block_series=3).equals(one)
    assert pe.rqa_batch(frame, E=2, radius=radii, out=tmp_path / "r.zarr").equals(one)
    assert list(pe.rqa_batch_open(tmp_path / "r.zarr").index) == list("abcdefgh")
    # another job on the store is refused naming what differs; overwrite replaces it
    with pytest.raises(ValueError, match=r"parameters differ: .*radius"):
        pe.rqa_batch(frame, E=2, radius=1.0, out=tmp_path / "r.zarr")
    assert pe.rqa_batch(frame, E=2, radius=1.0, out=tmp_path / "r.zarr",
                        overwrite=True).equals(pe.rqa_batch(frame, E=2, radius=1.0))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a pyedmcl rqa_batch store|carries no pyedmcl"):
        pe.rqa_batch(frame, E=2, radius=1.0, out=tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").exists()


def test_interrupted_and_damaged_store_resumes(X, ref, tmp_path, monkeypatch):
    """Ctrl-C after two blocks keeps them; a damaged block is computed again; only the
    blocks left are computed on resume."""
    out = tmp_path / "i.zarr"
    real = batch_scale.block_rows
    calls: list[int] = []
    armed = [True]

    def stop_third(run, values, *a, **kw):
        calls.append(values.shape[1])
        if armed[0] and len(calls) == 3:
            raise KeyboardInterrupt
        return real(run, values, *a, **kw)

    monkeypatch.setattr(batch_scale, "block_rows", stop_third)
    with pytest.raises(KeyboardInterrupt), pytest.warns(ConstantSeriesWarning):
        pe.rqa_batch(X, E=2, radius=1.0, out=out, block_series=2)
    assert _done(out) == 2
    with pytest.raises(ValueError, match=r"blocks \[2, 3, 4\] are not written yet"):
        pe.rqa_batch_open(out)
    g = zarr.open_group(str(out), mode="r+")
    g["measures"][1, 0] = 0.123  # block 0: its checksum fails now
    calls.clear()
    armed[0] = False
    assert _batch(X, out=out).equals(ref)  # block_series: the store's
    assert len(calls) == 4  # blocks 0 (damaged), 2, 3, 4
    assert pe.rqa_batch_open(out).equals(ref)


def test_sigkill_mid_job_then_resume(X, ref, tmp_path):
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "k.zarr"
    script = textwrap.dedent(f"""
        import time, warnings, numpy as np, pyedmcl as pe
        from pyedmcl.rqa.batch_store import BatchStore
        _w = BatchStore.write_block
        def slow(self, b, *rows):
            _w(self, b, *rows); time.sleep(0.5)
        BatchStore.write_block = slow
        warnings.simplefilter("ignore")
        pe.rqa_batch(np.load({str(tmp_path / 'x.npy')!r}), E=2, radius=1.0, out={str(out)!r},
                     block_series=1)
    """)
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    from conftest import wait_for_done_blocks
    try:
        done = wait_for_done_blocks(out, 2, lambda: proc.poll() is None)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert 2 <= done < N, f"the kill did not land mid-job (done={done})"
    assert _batch(X, out=out).equals(ref)


def test_devices_threads_equal(X, ref):
    """Two device contexts (two threads taking blocks from one queue)."""
    from clkernels import get_backend
    from pyedmcl.rqa.core import _backends

    be = _backends(None, None, None)[0]
    twin = type(be)(be.info)  # a context of its own: the second "device"
    got = _batch(X, devices=[be, twin], block_series=1)
    assert got.equals(ref)
    assert get_backend(be) is be


def test_dataarray_lazy_and_cube_store(X, tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    cube = X[:, :8].reshape(T, 2, 4)
    da = xr.DataArray(cube, dims=("time", "lat", "lon"),
                      coords={"lat": [5.0, 6.0], "lon": [0.0, 1.0, 2.0, 3.0]})
    with pytest.warns(ConstantSeriesWarning):
        one = pe.rqa_batch(da, E=2, radius=1.0)
    lazy = da.chunk({"lat": 1, "lon": 2})  # read one block at a time
    with pytest.warns(ConstantSeriesWarning, match=r"\(1, 2\)"):
        got = pe.rqa_batch(lazy, E=2, radius=1.0, out=tmp_path / "c.zarr", block_series=3)
    assert got.identical(one)
    back = pe.rqa_batch_open(tmp_path / "c.zarr")
    assert back.identical(one)
    bad = cube.copy()
    bad[7, 1, 3] = np.nan
    with pytest.raises(ValueError, match=r"X column \(1, 3\) has a NaN at row 7"):
        pe.rqa_batch(xr.DataArray(bad, dims=("time", "lat", "lon")).chunk({"lat": 1}), E=2,
                     radius=1.0, block_series=3)
    with pytest.raises(ValueError, match="X is a DataArray .* no 'time' dimension"):
        pe.rqa_batch(lazy.rename(time="t"), E=2, radius=1.0, block_series=3)
    # a dask array runs in blocks even without a block option
    import dask.array

    with pytest.warns(ConstantSeriesWarning):
        flat = pe.rqa_batch(dask.array.from_array(X, chunks=(T, 4)), E=2, radius=1.0)
    with pytest.warns(ConstantSeriesWarning):
        assert flat.equals(pe.rqa_batch(X, E=2, radius=1.0))
    with pytest.raises(ValueError, match=r"X is a dask array of shape \(3, 3, 3\)"):
        pe.rqa_batch(dask.array.zeros((3, 3, 3)), radius=1.0)


def test_dask_local_cluster_equals_one_device(X, ref, tmp_path):
    """A LocalCluster of 2 in-process workers (each its own device context): the rows of
    the one-device batch, in memory, into a store, and from a lazy cube the workers read."""
    distributed = pytest.importorskip("distributed")
    xr = pytest.importorskip("xarray")
    cube = xr.DataArray(X[:, :8].reshape(T, 4, 2), dims=("time", "y", "x"))
    with pytest.warns(ConstantSeriesWarning):
        one = pe.rqa_batch(cube, E=2, radius=1.0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert _batch(X, scheduler=client, block_series=2).equals(ref)
        out = tmp_path / "d.zarr"
        assert _batch(X, scheduler=client, out=out, devices=[None]).equals(ref)
        assert _done(out) == 5  # 9 series, 2 workers: blocks of 2 (4 per worker)
        with pytest.warns(ConstantSeriesWarning):
            got = pe.rqa_batch(cube.chunk({"y": 1}), E=2, radius=1.0, scheduler=client,
                               block_series=3)
        assert got.identical(one)
        with pytest.raises(ValueError, match=r"X column 0: x has 120 values, too short"):
            pe.rqa_batch(X, E=200, radius=1.0, scheduler=client)


def test_bad_input_names_the_argument(X):
    with pytest.raises(ValueError, match=r"radius\[3\] is None"):
        pe.rqa_batch(X[:, :4], radius=[1.0, 2.0, 3.0, None])
    with pytest.raises(ValueError, match=r"radius\[1\]=-2.0 is out of range; allowed"):
        pe.rqa_batch(X[:, :4], radius=[1.0, -2.0, 3.0, 1.0])
    with pytest.raises(ValueError, match="recurrence_rate has 2 values for 9 series"):
        pe.rqa_batch(X, recurrence_rate=[0.1, 0.2])
    with pytest.raises(ValueError, match="radius has 2 values for 9 series"):
        pe.rqa_batch(X, radius=[0.1, 0.2], block_series=2)
    with pytest.raises(ValueError, match="radius must be one number or one per series"):
        pe.rqa_batch(X, radius=[[1.0] * 9])
    with pytest.raises(TypeError, match="radius must be one number or a sequence"):
        pe.rqa_batch(X, radius={"a": 1.0})
    with pytest.raises(ValueError, match="block_series=0 is out of range"):
        pe.rqa_batch(X, radius=1.0, block_series=0)
    with pytest.raises(ValueError, match="n_workers=0 is out of range"):
        pe.rqa_batch(X, radius=1.0, scheduler="local", n_workers=0)
    with pytest.raises(ValueError, match="scheduler=5 is not supported"):
        pe.rqa_batch(X, radius=1.0, scheduler=5)
    with pytest.raises(ValueError, match="window=/step= run in one process"):
        pe.rqa_batch(X, radius=1.0, block_series=2, window=50)
    with pytest.raises(ValueError, match="metric='cosine' is not supported"):
        pe.rqa_batch(X, radius=1.0, block_series=2, metric="cosine")
    x = X[:, 0]
    with pytest.raises(ValueError, match=r"radius must be one value or a flat list .*\(1, 2\)"):
        pe.rqa_grid(x, radius=[[1.0, 2.0]])
    with pytest.raises(TypeError, match="E must be one value or a list of values"):
        pe.rqa_grid(x, E={2, 3}, radius=1.0)
    with pytest.raises(ValueError, match=r"1100 combinations .* max_combinations=1000"):
        pe.rqa_grid(x, E=list(range(1, 11)), tau=list(range(1, 11)), radius=1.0,
                    l_min=list(range(2, 13)))
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"v": (("time", "px"), X)})
    with pytest.raises(TypeError, match="X is an xarray Dataset; give one of its variables"):
        pe.rqa_batch(ds, radius=1.0)


def test_cli_zarr_interrupted_then_resumed(X, tmp_path, capsys, monkeypatch):
    from pyedmcl.cli.main import main

    frame = pd.DataFrame(X, columns=[f"s{j}" for j in range(N)])
    path = tmp_path / "x.csv"
    frame.to_csv(path, index=False)
    from pyedmcl.io import read_table
    t = read_table(path)  # the series as the CLI reads them
    data = pd.DataFrame(t.data, columns=t.names)
    out = tmp_path / "o.zarr"
    argv = ["rqa", str(path), "--all-columns", "-E", "2", "--radius", "1.0", "--out",
            str(out), "--block-series", "3"]
    real = batch_scale.block_rows
    calls = []

    def stop_second(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(batch_scale, "block_rows", stop_second)
    assert main(argv) == 130
    assert _done(out) == 1
    monkeypatch.setattr(batch_scale, "block_rows", real)
    capsys.readouterr()
    assert main(argv) == 0
    io = capsys.readouterr()
    assert "wrote" in io.out and "series s6 is constant" in io.err  # noted, not fatal
    with pytest.warns(ConstantSeriesWarning):
        assert pe.rqa_batch_open(out).equals(pe.rqa_batch(data, E=2, radius=1.0))
    assert main(["rqa", str(path), "-c", "s0", "-E", "2,3", "--radius", "1", "--out",
                 str(tmp_path / "g.zarr")]) == 2
    assert main(["rqa", str(path), "-c", "s0", "-E", "2,3,4,5", "--radius", "1,2,3",
                 "--max-combinations", "10"]) == 2
    err = capsys.readouterr().err
    assert "a .zarr store is for --all-columns" in err
    assert "more than --max-combinations 10" in err
    assert main(["rqa", str(path), "-E", "2", "--radius", "1", "--block-series", "3"]) == 2
    assert "--block-series is for --all-columns" in capsys.readouterr().err
