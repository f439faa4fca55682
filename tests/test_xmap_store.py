"""Zarr output of pe.xmap: attributes, resume after SIGKILL, half-written blocks,
refusal of foreign stores, bounded host memory, input formats and the CLI.

Every resumed / streamed matrix must be bit-identical to the in-memory run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import wait_for_done_blocks
from test_xmap import mixed_E, panel

import pyedmcl as pe
from pyedmcl.cli.main import main as cli_main

zarr = pytest.importorskip("zarr")


def test_zarr_attrs_and_no_recompute(tmp_path):
    X = panel(L=70, N=9, seed=4)
    ref = pe.xmap(X, E="auto", max_E=3)
    out = tmp_path / "m.zarr"
    r = pe.xmap(X, E="auto", max_E=3, out=out, block_rows=4)
    np.testing.assert_array_equal(r.rho[:], ref.rho)
    g = zarr.open_group(str(out), mode="r")
    a = g.attrs["pyedmcl_xmap"]
    assert (a["N"], a["L"], a["tau"], a["Tp"], a["E"], a["E_max"]) == (9, 70, 1, 0, "auto", 3)
    assert g.attrs["pyedmcl_version"] == pe.__version__
    assert g["rho"].chunks == (4, 9)
    np.testing.assert_array_equal(g["E"][:], ref.E)
    assert g["done"][:].tolist() == [1, 1, 1]
    again = pe.xmap(X, E="auto", max_E=3, out=out)  # block_rows taken from the store
    assert again.blocks_per_device == {}  # everything was done: nothing recomputed
    np.testing.assert_array_equal(again.E, ref.E)


def test_half_written_block_is_recomputed(tmp_path):
    X = panel(L=60, N=7, seed=6)
    ref = pe.xmap(X, E=2).rho
    out = tmp_path / "h.zarr"
    pe.xmap(X, E=2, out=out, block_rows=3)
    g = zarr.open_group(str(out), mode="r+")
    g["rho"][3:5, :] = 42.0  # a block cut off mid-write: data changed, marker not set
    g["done"][1] = 0
    r = pe.xmap(X, E=2, out=out, block_rows=3)
    assert sum(r.blocks_per_device.values()) == 1
    np.testing.assert_array_equal(r.rho[:], ref)


def test_foreign_store_refused_unless_overwrite(tmp_path):
    X = panel(L=60, N=4)
    out = tmp_path / "o.zarr"
    pe.xmap(X, E=2, out=out)
    with pytest.raises(ValueError, match=r"Tp=0 \(now 1\).*overwrite"):
        pe.xmap(X, E=2, Tp=1, out=out)
    with pytest.raises(ValueError, match="data_sha256"):
        pe.xmap(X + 1, E=2, out=out)
    r = pe.xmap(X, E=2, Tp=1, out=out, overwrite=True)
    np.testing.assert_array_equal(r.rho[:], pe.xmap(X, E=2, Tp=1).rho)
    (tmp_path / "junk.zarr").mkdir()
    with pytest.raises(ValueError, match="not a pyedmcl xmap store"):
        pe.xmap(X, E=2, out=tmp_path / "junk.zarr")


def test_sigkill_mid_job_then_resume_bit_identical(tmp_path):
    """A job killed by SIGKILL after some blocks resumes to the same matrix."""
    X = panel(L=80, N=24, seed=8)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "k.zarr"
    # slow each block down so the kill lands mid-job
    script = textwrap.dedent(f"""
        import time, numpy as np, pyedmcl as pe
        from pyedmcl.xmap.store import XmapStore
        _w = XmapStore.write_block
        def slow(self, b, rows):
            _w(self, b, rows); time.sleep(0.4)
        XmapStore.write_block = slow
        pe.xmap(np.load({str(tmp_path / 'x.npy')!r}), E={mixed_E(24).tolist()}, out={str(out)!r},
                block_rows=2)
    """)
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    done = 0
    try:
        done = wait_for_done_blocks(out, 3, lambda: proc.poll() is None)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert 3 <= done < 12, f"kill did not land mid-job (done={done})"
    r = pe.xmap(X, E=mixed_E(24), out=out, block_rows=2)
    assert 0 < sum(r.blocks_per_device.values()) <= 12 - done
    np.testing.assert_array_equal(r.rho[:], pe.xmap(X, E=mixed_E(24)).rho)


def test_memory_bounded_streaming(tmp_path):
    """An N x N matrix larger than the host-memory limit still completes to Zarr."""
    N, L = 1400, 20
    # 2 MiB of Python/NumPy allocations, a quarter of the 7.5 MiB matrix: the panel's own
    # float64 copies (standardisation, checksum: O(N L)) fit, N x N rows held at once do not
    limit = 2 << 20
    assert N * N * 4 > 3.5 * limit
    X = panel(L=L, N=N, seed=9)
    out = tmp_path / "big.zarr"
    pe.xmap(X[:, :4], E=2)  # build kernels before measuring
    tracemalloc.start()
    try:
        r = pe.xmap(X, E=2, out=out, block_rows=16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak host allocations {peak} B >= limit {limit} B"
    rows = r.rho[1200:1216]
    c = pe.ccm(X[:, 1210], X[:, 5], E=2, lib_sizes=[L], random=False)
    assert rows[10, 5] == np.float32(c.rho_xy[0])
    assert np.isfinite(r.rho[:]).all()


@pytest.mark.parametrize("fmt", ["npy", "csv", "h5", "zarr"])
def test_cli_input_formats(tmp_path, fmt, capsys):
    X = panel(L=60, N=5, seed=10)
    src = tmp_path / f"in.{fmt}"
    if fmt == "npy":
        np.save(src, X)
    elif fmt == "csv":
        df = pd.DataFrame(X.astype(np.float64), columns=list("abcde"))
        df.insert(0, "time", np.arange(60))
        df.to_csv(src, index=False, float_format="%.9g")
    elif fmt == "h5":
        h5py = pytest.importorskip("h5py")
        with h5py.File(src, "w") as f:
            f["panel"] = X
    else:
        zarr.save_array(str(src), X)
    out = tmp_path / "o.zarr"
    rc = cli_main(["xmap", str(src), "-o", str(out), "--E", "3", "--block-rows", "2", "-q",
                   "--json"])
    assert rc == 0
    assert '"N": 5' in capsys.readouterr().out
    got = zarr.open_group(str(out), mode="r")["rho"][:]
    np.testing.assert_array_equal(got, pe.xmap(X, E=3).rho)
    # same job again with other parameters: refused (exit 2) unless --overwrite
    assert cli_main(["xmap", str(src), "-o", str(out), "--E", "2", "-q"]) == 2
    assert cli_main(["xmap", str(src), "-o", str(out), "--E", "2", "-q", "--overwrite"]) == 0


def test_cli_bad_input(tmp_path):
    np.save(tmp_path / "one.npy", np.ones((40, 1)))
    assert cli_main(["xmap", str(tmp_path / "one.npy"), "-o", str(tmp_path / "o.zarr")]) == 2
    (tmp_path / "x.txt").write_text("1,2\n")
    assert cli_main(["xmap", str(tmp_path / "x.txt"), "-o", str(tmp_path / "o.zarr")]) == 2
    assert cli_main(["xmap", str(tmp_path / "nope.npy"), "-o", str(tmp_path / "o.zarr")]) == 2
