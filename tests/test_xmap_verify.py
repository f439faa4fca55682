"""Verified xmap stores (issue #20 item 2): every corruption of a finished store is
caught by ``pe.xmap_verify`` / ``pe.xmap_open`` / ``pyedmcl xmap --verify`` with the
bad block's index, and rerunning the same job recomputes exactly what is damaged so
the matrix equals a clean run bit for bit.

Store: N=8 series, block_rows=3 -> blocks 0 (rows 0-2), 1 (rows 3-5), 2 (rows 6-7).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_xmap import panel

import pyedmcl as pe
from pyedmcl.cli.main import main as cli_main
from pyedmcl.xmap.store import StoreCorruptError

zarr = pytest.importorskip("zarr")

N, BR = 8, 3
KW = {"E": 2, "block_rows": BR}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A finished store (copied per test), its data, and the in-memory reference."""
    X = panel(L=60, N=N, seed=21)
    d = tmp_path_factory.mktemp("clean")
    pe.xmap(X, out=d / "m.zarr", **KW)
    X2 = panel(L=60, N=N, seed=22)
    pe.xmap(X2, out=d / "other.zarr", **KW)
    return X, d, np.asarray(pe.xmap(X, E=2).rho)


def _copy(clean, tmp_path) -> Path:
    out = tmp_path / "m.zarr"
    shutil.copytree(clean[1] / "m.zarr", out)
    return out


def _chunk(out: Path, array: str, b: int) -> Path:
    """The chunk file of block ``b`` in ``array`` (Zarr v3 default keys: c/<i>[/0])."""
    p = out / array / "c" / str(b)
    return p / "0" if p.is_dir() else p


def _flip_file_byte(out):
    f = _chunk(out, "rho", 1)
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0x10
    f.write_bytes(bytes(b))


def _flip_value_bit(out):  # the chunk decodes fine, one float differs in its last bit
    g = zarr.open_group(str(out), mode="r+")
    v = g["rho"][4, 5]
    g["rho"][4, 5] = np.frombuffer((np.float32(v).view(np.uint32) ^ np.uint32(1)).tobytes(),
                                   np.float32)[0]


def _truncate(out):
    f = _chunk(out, "rho", 1)
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])


def _delete(out):
    _chunk(out, "rho", 1).unlink()


def _swap(out):  # blocks 0 and 1 swapped, their checksums too: only the index differs
    for arr in ("rho", "block_sha256"):
        a, b = _chunk(out, arr, 0), _chunk(out, arr, 1)
        da, db = a.read_bytes(), b.read_bytes()
        a.write_bytes(db)
        b.write_bytes(da)


def _copy_from_other(out):  # block 1 and its checksum from a store of other data
    other = out.parent.parent / "other.zarr"
    for arr in ("rho", "block_sha256"):
        shutil.copyfile(_chunk(other, arr, 1), _chunk(out, arr, 1))


def _done_flag(out):  # an unfinished block (garbage rows, no checksum) marked done by hand
    g = zarr.open_group(str(out), mode="r+")
    g["rho"][3:6, :] = 42.0
    g["block_sha256"][1, :] = 0
    g["done"][1] = 1


def _done_flag_value(out):  # a flag that is neither 0 nor 1
    zarr.open_group(str(out), mode="r+")["done"][1] = 7


CORRUPTIONS = {"flipped-bytes-file": _flip_file_byte, "flipped-bit-value": _flip_value_bit,
               "truncated-chunk": _truncate, "deleted-chunk": _delete,
               "swapped-chunks": _swap, "chunk-from-other-store": _copy_from_other,
               "edited-done-flag": _done_flag, "invalid-done-flag": _done_flag_value}
BAD = {"swapped-chunks": [0, 1]}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corruption_caught_and_repaired(clean, tmp_path, kind):
    X, d, ref = clean
    if kind == "chunk-from-other-store":
        shutil.copytree(d / "other.zarr", tmp_path / "other.zarr")
        out = tmp_path / "a" / "m.zarr"
        shutil.copytree(d / "m.zarr", out)
    else:
        out = _copy(clean, tmp_path)
    assert pe.xmap_verify(out).ok
    CORRUPTIONS[kind](out)
    bad = BAD.get(kind, [1])
    chk = pe.xmap_verify(out)
    assert not chk.ok and chk.bad == bad and chk.incomplete == [] and chk.E_ok
    with pytest.raises(StoreCorruptError, match=r"fail their checksum: (0 \(rows 0-2\), )?"
                                                 r"1 \(rows 3-5\); rerun"):
        pe.xmap_open(out)
    # resume: exactly the bad blocks are recomputed; the matrix equals a clean run
    r = pe.xmap(X, out=out, **KW)
    assert sum(r.blocks_per_device.values()) == len(bad)
    np.testing.assert_array_equal(np.asarray(r.rho[:]), ref)
    assert pe.xmap_verify(out).ok
    np.testing.assert_array_equal(np.asarray(pe.xmap_open(out).rho[:]), ref)


def test_edited_params_recompute_everything(clean, tmp_path):
    """Attributes edited to claim other parameters (Tp=1): no old block is trusted."""
    X, _, _ = clean
    out = _copy(clean, tmp_path)
    g = zarr.open_group(str(out), mode="r+")
    params = dict(g.attrs["pyedmcl_xmap"])
    params["Tp"] = 1
    g.attrs["pyedmcl_xmap"] = params
    chk = pe.xmap_verify(out)
    assert not chk.ok and chk.bad == [0, 1, 2]
    r = pe.xmap(X, Tp=1, out=out, **KW)
    assert sum(r.blocks_per_device.values()) == 3
    np.testing.assert_array_equal(np.asarray(r.rho[:]), np.asarray(pe.xmap(X, E=2, Tp=1).rho))
    assert pe.xmap_verify(out).ok


def test_edited_E_vector_is_recomputed(tmp_path):
    """E='auto': an edited stored E fails its checksum; resume re-derives E and the matrix."""
    X = panel(L=60, N=5, seed=23)
    kw = {"E": "auto", "max_E": 3, "block_rows": 2}
    out = tmp_path / "e.zarr"
    ref = pe.xmap(X, **kw, out=out)
    refE, refrho = np.asarray(ref.E).copy(), np.asarray(ref.rho[:])
    g = zarr.open_group(str(out), mode="r+")
    g["E"][0] = 3 if refE[0] != 3 else 1
    chk = pe.xmap_verify(out)
    assert not chk.E_ok and chk.bad == [0, 1, 2]
    with pytest.raises(StoreCorruptError, match="E vector"):
        pe.xmap_open(out)
    r = pe.xmap(X, **kw, out=out)
    np.testing.assert_array_equal(r.E, refE)
    np.testing.assert_array_equal(np.asarray(r.rho[:]), refrho)
    # the same E came back, so the untouched blocks verified and were kept
    assert r.blocks_per_device == {}
    assert pe.xmap_verify(out).ok


def test_incomplete_store_reported(clean, tmp_path):
    out = _copy(clean, tmp_path)
    zarr.open_group(str(out), mode="r+")["done"][2] = 0  # a job cut off before block 2
    chk = pe.xmap_verify(out)
    assert chk.bad == [] and chk.incomplete == [2] and not chk.ok
    with pytest.raises(StoreCorruptError, match=r"not written yet: 2 \(rows 6-7\)"):
        pe.xmap_open(out)
    r = pe.xmap_open(out, verify=False)  # explicitly unverified access stays possible
    assert r.rho.shape == (N, N)


def test_cli_verify(clean, tmp_path, capsys):
    out = _copy(clean, tmp_path)
    assert cli_main(["xmap", "--verify", str(out)]) == 0
    assert "every checksum matches" in capsys.readouterr().out
    _delete(out)
    assert cli_main(["xmap", "--verify", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 3 blocks fail their checksum: 1 (rows 3-5)" in err[0]
    assert cli_main(["xmap", "--verify", str(out), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False and rep["bad_blocks"] == [1]
    (tmp_path / "junk").mkdir()
    assert cli_main(["xmap", "--verify", str(tmp_path / "junk")]) == 2
    assert "not a pyedmcl xmap store" in capsys.readouterr().err
    assert cli_main(["xmap", "--verify", str(out), "-o", str(out)]) == 2
