"""Safe outputs (issue #20 items 1, 3, 5): pyedmcl deletes or replaces only what it
wrote, never the working directory; files and report folders are written atomically;
one writer per output (a second job is refused with the holder's pid, a killed job's
lock is taken over); JSON output is valid JSON."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE
from test_xmap import panel

import pyedmcl as pe
from pyedmcl._outputs import (
    DEMO_REPORT,
    MARKER,
    OutputBusyError,
    atomic_dir,
    atomic_file,
    check_replaceable,
    dumps_json,
    lock_paths,
    write_text_atomic,
)
from pyedmcl.cli.main import main as cli_main

zarr = pytest.importorskip("zarr")


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _no_json_constants(s: str):
    def bad(c):
        raise AssertionError(f"invalid JSON constant {c}")
    return json.loads(s, parse_constant=bad)


# -- ownership --------------------------------------------------------------------------------
def test_cli_overwrite_never_deletes_working_directory(tmp_path, monkeypatch, capsys):
    """The issue's data loss: `pyedmcl xmap data.csv -o . --overwrite`."""
    X = panel(L=50, N=3, seed=1)
    pd.DataFrame(X.astype(np.float64), columns=list("abc")).to_csv(tmp_path / "data.csv",
                                                                   index=False)
    (tmp_path / "notes.txt").write_text("my thesis")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    before = _tree(tmp_path)
    for out in (".", "..", str(tmp_path)):
        assert cli_main(["xmap", "../data.csv", "-o", out, "--E", "2", "--overwrite", "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "current directory" in err[0], err
    assert _tree(tmp_path) == before


def test_overwrite_refuses_foreign_folder_and_file(tmp_path):
    X = panel(L=50, N=3, seed=2)
    d = tmp_path / "results"
    d.mkdir()
    (d / "keep.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match="not a pyedmcl xmap store.*no pyedmcl marker.*"
                                         "remove it yourself"):
        pe.xmap(X, E=2, out=d, overwrite=True)
    f = tmp_path / "m.zarr"
    f.write_text("a file")
    with pytest.raises(ValueError, match="is a file"):
        pe.xmap(X, E=2, out=f, overwrite=True)
    assert (d / "keep.csv").read_text() == "1,2\n" and f.read_text() == "a file"
    # a pyedmcl store into which the user put a file of their own: left alone too
    s = tmp_path / "s.zarr"
    pe.xmap(X, E=2, out=s)
    (s / "mine.txt").write_text("x")
    with pytest.raises(ValueError, match=r"pyedmcl did not write \(mine.txt: a file"):
        pe.xmap(X, E=3, out=s, overwrite=True)
    assert (s / "mine.txt").exists()
    (s / "mine.txt").unlink()
    r = pe.xmap(X, E=3, out=s, overwrite=True)  # an owned store is replaced
    np.testing.assert_array_equal(r.rho[:], pe.xmap(X, E=3).rho)
    assert zarr.open_group(str(s), mode="r").attrs["pyedmcl_owned"]["kind"] == "xmap-store"


def test_legacy_store_without_marker_still_replaceable(tmp_path):
    """A store written before the marker existed (only the pyedmcl_xmap attribute)."""
    X = panel(L=50, N=3, seed=3)
    s = tmp_path / "old.zarr"
    pe.xmap(X, E=2, out=s)
    g = zarr.open_group(str(s), mode="r+")
    del g.attrs["pyedmcl_owned"]
    r = pe.xmap(X, E=3, out=s, overwrite=True)
    np.testing.assert_array_equal(r.rho[:], pe.xmap(X, E=3).rho)


def test_check_replaceable_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_replaceable(tmp_path / "new", DEMO_REPORT)  # absent: fine
    (tmp_path / "empty").mkdir()
    check_replaceable(tmp_path / "empty", DEMO_REPORT)  # empty: nothing to lose
    for p in (".", tmp_path, tmp_path.parent, "/"):
        with pytest.raises(ValueError, match="current directory"):
            check_replaceable(p, DEMO_REPORT)
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(ValueError, match="symbolic link"):
        check_replaceable(tmp_path / "link", DEMO_REPORT)
    s = tmp_path / "s.zarr"
    pe.xmap(panel(L=50, N=3, seed=4), E=2, out=s)
    with pytest.raises(ValueError, match="it is a pyedmcl xmap store"):
        check_replaceable(s, DEMO_REPORT)  # ours, but of another kind


def test_demo_refuses_foreign_folder_before_any_work(tmp_path, capsys, monkeypatch):
    import pyedmcl.report.demo as demo

    def no_work(*a, **k):
        raise AssertionError("the analyses ran before the output was checked")

    monkeypatch.setattr(demo, "_build", no_work)
    d = tmp_path / "mine"
    d.mkdir()
    (d / "data.csv").write_text("x\n1\n")
    assert cli_main(["demo", "-o", str(d), "-q"]) == 2
    assert "not a pyedmcl demo report folder" in capsys.readouterr().err
    assert _tree(d) == {"data.csv": b"x\n1\n"}


# -- atomic folders and files -----------------------------------------------------------------
def test_atomic_dir_replaces_only_when_complete(tmp_path):
    out = tmp_path / "report"
    with atomic_dir(out, DEMO_REPORT) as tmp:
        (tmp / "index.html").write_text("v1")
        assert not out.exists()  # built aside
    assert (out / "index.html").read_text() == "v1" and (out / MARKER).is_file()
    with pytest.raises(RuntimeError, match="boom"), atomic_dir(out, DEMO_REPORT) as tmp:
        (tmp / "index.html").write_text("half")
        raise RuntimeError("boom")
    assert (out / "index.html").read_text() == "v1"  # the old report is intact
    killed = tmp_path / ".report.abc123.tmp-dir"  # the partial build of a killed run
    killed.mkdir()
    (killed / MARKER).write_text(json.dumps({"kind": DEMO_REPORT}))
    with atomic_dir(out, DEMO_REPORT) as tmp:
        (tmp / "index.html").write_text("v2")
    assert (out / "index.html").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no leftovers


def test_atomic_file_keeps_old_content_on_failure(tmp_path):
    p = tmp_path / "o.csv"
    write_text_atomic(p, "old\n")
    with pytest.raises(RuntimeError), atomic_file(p) as tmp:
        tmp.write_text("partial")
        raise RuntimeError
    assert p.read_text() == "old\n" and os.listdir(tmp_path) == ["o.csv"]
    assert (p.stat().st_mode & 0o777) == (0o666 & ~_umask())
    with pytest.raises(ValueError, match="is a directory"), atomic_file(tmp_path):
        pass


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_recurrence_plot_png_is_atomic(tmp_path, monkeypatch):
    """A failure while the PNG is being written leaves the previous image whole."""
    import matplotlib.image as mimg

    x = np.sin(np.arange(80) * 0.3)
    p = tmp_path / "rp.png"
    pe.recurrence_plot(x, E=2, radius=0.3, size=16, path=str(p), device=CPU_DEVICE)
    good = p.read_bytes()
    real = mimg.imsave

    def broken(fname, *a, **k):
        real(fname, *a, **k)
        Path(fname).write_bytes(Path(fname).read_bytes()[:20])  # half written ...
        raise OSError("disk full")  # ... then the write fails

    monkeypatch.setattr(mimg, "imsave", broken)
    with pytest.raises(OSError, match="disk full"):
        pe.recurrence_plot(x, E=2, radius=0.2, size=16, path=str(p), device=CPU_DEVICE)
    assert p.read_bytes() == good and os.listdir(tmp_path) == ["rp.png"]


def test_cli_csv_out_is_atomic(tmp_path, monkeypatch):
    x = np.sin(np.arange(80) * 0.3)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "pred.csv"
    out.write_text("previous\n")

    def broken(self, path, *a, **k):
        Path(path).write_text("time,obs")  # a partial CSV, then a crash
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    assert cli_main(["simplex", str(tmp_path / "x.npy"), "-E", "2", "--out", str(out), "-q",
                     "--overwrite", "--device", CPU_DEVICE]) == 1
    assert out.read_text() == "previous\n" and sorted(os.listdir(tmp_path)) == ["pred.csv",
                                                                                "x.npy"]


def test_cli_files_never_replace_the_input_nor_unasked(tmp_path, capsys):
    """A CSV or PNG output that exists is replaced only with --overwrite, and the input
    never: ``simplex data.csv -o data.csv`` replaced the user's data with the result."""
    data = tmp_path / "data.csv"
    rows = "time,x\n" + "".join(f"{i},{np.sin(0.3 * i):.6f}\n" for i in range(120))
    data.write_text(rows)
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"user's picture")
    dev = ["--device", CPU_DEVICE, "-q"]
    for argv in (["simplex", str(data), "-c", "x", "-E", "2", "-o", str(data), "--overwrite"],
                 ["simplex", str(data), "-c", "x", "-E", "2", "-o", str(data)],
                 ["rp", str(data), str(mine), "-c", "x", "-E", "2", "--rr", "0.1"],
                 ["sample", "lorenz63", "-o", str(data), "-n", "20"]):
        assert cli_main(argv + (dev if argv[0] != "sample" else [])) == 2, argv
    err = capsys.readouterr().err
    assert "is the input file" in err and "exists; pass --overwrite" in err
    assert data.read_text() == rows and mine.read_bytes() == b"user's picture"
    out = tmp_path / "pred.csv"
    out.write_text("old\n")
    assert cli_main(["simplex", str(data), "-c", "x", "-E", "2", "-o", str(out),
                     "--overwrite"] + dev) == 0
    assert out.read_text().startswith("time,")
    assert cli_main(["rp", str(data), str(mine), "-c", "x", "-E", "2", "--rr", "0.1",
                     "--overwrite"] + dev) == 0
    assert mine.read_bytes().startswith(b"\x89PNG")


def test_cli_file_outputs_create_folders_and_refuse_unwritable_paths_first(tmp_path, capsys,
                                                                          monkeypatch):
    """A file output's missing folders are made, as a folder output's are (``simplex``
    refused them only when writing, after the work); a path under a file is refused
    before any work."""
    data = tmp_path / "data.csv"
    data.write_text("time,x\n" + "".join(f"{i},{np.sin(0.3 * i):.6f}\n" for i in range(120)))
    dev = ["--device", CPU_DEVICE, "-q"]
    out = tmp_path / "new" / "sub" / "pred.csv"
    assert cli_main(["simplex", str(data), "-c", "x", "-E", "2", "-o", str(out)] + dev) == 0
    assert out.read_text().startswith("time,")
    (tmp_path / "afile").write_text("mine")
    import pyedmcl.io
    monkeypatch.setattr(pyedmcl.io, "read_table", lambda *a, **k: pytest.fail("work started"))
    assert cli_main(["simplex", str(data), "-c", "x", "-E", "2", "-o",
                     str(tmp_path / "afile" / "x" / "p.csv")] + dev) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "mine"


# -- one writer -------------------------------------------------------------------------------
def test_second_job_refused_then_stale_lock_taken_over(tmp_path, capsys):
    """Job A (another process) holds the output; job B is refused with A's pid and start
    time (API and CLI); once A is killed, B takes the stale lock over and runs."""
    X = panel(L=50, N=4, seed=5)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "m.zarr"
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    code = textwrap.dedent(f"""
        import sys, time
        from pyedmcl._outputs import output_lock
        with output_lock({str(out)!r}, what="xmap output"):
            print("locked", flush=True)
            time.sleep(60)
    """)
    a = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert a.stdout.readline().strip() == "locked"
        with pytest.raises(OutputBusyError, match=rf"pid {a.pid} on .*started 20"):
            pe.xmap(X, E=2, out=out)
        assert cli_main(["xmap", str(tmp_path / "x.npy"), "-o", str(out), "--E", "2",
                         "-q"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"pid {a.pid}" in err[0] and "being written" in err[0]
        assert not out.exists()  # B touched nothing
    finally:
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
    assert lock_paths(out)[1].exists()  # A's stale sidecar is still there ...
    r = pe.xmap(X, E=2, out=out)  # ... and its lock died with it
    np.testing.assert_array_equal(r.rho[:], pe.xmap(X, E=2).rho)
    assert not lock_paths(out)[1].exists()  # B's own sidecar is removed when B ends
    assert not lock_paths(out)[0].exists()  # and so is the lock file it took over


def test_same_process_second_writer_refused(tmp_path):
    from pyedmcl._outputs import output_lock

    out = tmp_path / "m.zarr"
    with output_lock(out):
        info = json.loads(lock_paths(out)[1].read_text())
        assert info["pid"] == os.getpid()
        with pytest.raises(OutputBusyError, match=f"pid {os.getpid()}"):
            pe.xmap(panel(L=50, N=3, seed=6), E=2, out=out)
    assert not [p.name for p in tmp_path.iterdir()]  # no lock file left
    with output_lock(out):  # free again
        pass


# -- valid JSON -------------------------------------------------------------------------------
def test_dumps_json_nan_inf_numpy():
    obj = {"a": float("nan"), "b": np.array([1.0, np.inf, -np.inf]), "c": np.float32(2.5),
           "d": (np.int64(3), None), np.int32(4): "k", "e": Path("p")}
    got = _no_json_constants(dumps_json(obj))
    assert got == {"a": None, "b": [1.0, None, None], "c": 2.5, "d": [3, None], "4": "k",
                   "e": "p"}


def test_cli_json_nan_is_null(tmp_path, capsys):
    """RQA with no diagonal lines: DET, L are NaN -> null (was a bare NaN: invalid JSON)."""
    np.save(tmp_path / "r.npy", np.random.default_rng(0).random(50))
    assert cli_main(["rqa", str(tmp_path / "r.npy"), "-E", "2", "--radius", "1e-9", "--json",
                     "--device", CPU_DEVICE]) == 0
    res = _no_json_constants(capsys.readouterr().out)
    assert res["DET"] is None and res["L"] is None and res["RR"] > 0


def test_xmap_unknown_device_makes_no_store(tmp_path, capsys):
    """An unknown device is refused before the store is created (an empty store was left
    behind, which --verify then reported as unwritten blocks)."""
    X = panel(L=40, N=3, seed=2)
    np.save(tmp_path / "x.npy", X)
    for opt in (["--device", "nope"], ["--devices", "nope"], ["--device", "9:9"]):
        out = tmp_path / "m.zarr"
        assert cli_main(["xmap", str(tmp_path / "x.npy"), "-o", str(out), "-E", "2", "-q"]
                        + opt) == 2, opt
        assert not out.exists(), opt
    assert "no device" in capsys.readouterr().err.lower()


def test_cli_warnings_are_one_line(tmp_path, capsys):
    """A warning from a CLI command is one stderr line like its errors (Python's default
    format added the source file and a line of pyedmcl's code)."""
    x = np.sin(np.arange(80) * 0.7) * 1e20  # RQA in float32 cannot hold it: float64
    data = tmp_path / "big.csv"
    data.write_text("time,x\n" + "".join(f"{i},{v:.17g}\n" for i, v in enumerate(x)))
    assert cli_main(["rqa", str(data), "-c", "x", "-E", "2", "--rr", "0.35", "-q",
                     "--device", CPU_DEVICE]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("pyedmcl rqa: warning (PrecisionWarning): x:")


# -- manifests: only what pyedmcl wrote, at any depth -----------------------------------------
@pytest.fixture(scope="module")
def store_panel():
    return panel(L=50, N=5, seed=7)


def _store(path: Path, X, E=2) -> Path:
    pe.xmap(X, E=E, out=path, block_rows=2)
    return path


def test_nested_foreign_files_refused_at_every_depth(tmp_path, store_panel):
    """A user's file anywhere inside a store (not only at its top) stops --overwrite,
    which names it and deletes nothing; once it is moved out the store is replaced."""
    s = _store(tmp_path / "m.zarr", store_panel)
    data = tmp_path / "data.npy"
    np.save(data, store_panel)
    for rel in ("rho/notes.txt", "done/a/r.csv", "rho/c/0/x.txt", "a/b/c/d.txt", ".hidden"):
        f = s / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("mine")
        before = _tree(s)
        with pytest.raises(ValueError, match=rf"did not write \({re.escape(rel)}: a file, "
                                             "not in its manifest\\); nothing was deleted"):
            pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
        assert cli_main(["xmap", str(data), "-o", str(s), "-E", "3", "--overwrite", "-q",
                         "--block-rows", "2"]) == 2
        assert _tree(s) == before, rel
        f.unlink()
    (s / "a" / "b" / "c").rmdir()  # an empty folder of the user's is named too
    with pytest.raises(ValueError, match=r"\(a/: a folder"):
        pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    for d in ("a/b", "a", "done/a"):
        (s / d).rmdir()
    r = pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    np.testing.assert_array_equal(r.rho[:], pe.xmap(store_panel, E=3).rho)


def test_symlink_inside_store_never_followed(tmp_path, store_panel):
    """A symlink inside the store (to a folder or a file outside it, or in place of a
    chunk) is foreign: refused, and neither it nor its target is touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    s = _store(tmp_path / "m.zarr", store_panel)
    chunk = s / "rho" / "c" / "0" / "0"
    assert chunk.is_file()
    saved = chunk.read_bytes()
    for link, target in ((s / "rho" / "lnk", outside), (s / "done" / "f", outside / "precious.txt"),
                         (chunk, outside / "precious.txt")):
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        with pytest.raises(ValueError, match="symbolic link"):
            pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
        assert link.is_symlink() and (outside / "precious.txt").read_text() == "keep"
        link.unlink()
    chunk.write_bytes(saved)
    pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    assert sorted(os.listdir(outside)) == ["precious.txt"]


def test_crash_mid_write_leaves_valid_manifest_and_resumes(tmp_path, store_panel, monkeypatch):
    """A job that dies between two writes of a block leaves a manifest (valid JSON) that
    lists every file on disk; rerunning resumes to a clean run's matrix, and
    --overwrite replaces the cut-off store."""
    from pyedmcl._outputs import MANIFEST, first_foreign
    from pyedmcl.xmap.store import XmapStore

    real, n = XmapStore.write_block, []

    def dies(self, b, rows, extra=None):
        if len(n) == 1:  # the second block: rho written, then the process "dies"
            self.group["rho"][slice(*self.block_range(b)), :] = rows
            raise KeyboardInterrupt
        n.append(b)
        real(self, b, rows, extra)

    s = tmp_path / "m.zarr"
    monkeypatch.setattr(XmapStore, "write_block", dies)
    with pytest.raises(KeyboardInterrupt):
        pe.xmap(store_panel, E=2, out=s, block_rows=2)
    monkeypatch.setattr(XmapStore, "write_block", real)
    man = json.loads((s / MANIFEST).read_text())
    on_disk = {str(p.relative_to(s)) for p in s.rglob("*") if p.is_file()} - {MANIFEST}
    assert on_disk <= set(man["files"]) and man["kind"] == "xmap-store"
    assert first_foreign(s, "xmap-store") is None
    assert pe.xmap_verify(s).incomplete  # cut off indeed
    r = pe.xmap(store_panel, E=2, out=s, block_rows=2)  # resume
    np.testing.assert_array_equal(r.rho[:], pe.xmap(store_panel, E=2).rho)
    # temporaries a killed job leaves (Zarr's and pyedmcl's atomic writes) of listed files
    # do not stop --overwrite; one of a file that is not listed does
    hexs = "0123456789abcdef" * 2
    (s / "rho" / "c" / "9").mkdir()
    (s / "rho" / "c" / "9" / f"0.{hexs}.partial").write_bytes(b"x")
    with pytest.raises(ValueError, match=rf"rho/c/9/0.{hexs}.partial: a file"):
        pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    (s / "rho" / "c" / "9" / f"0.{hexs}.partial").unlink()
    (s / "rho" / "c" / "9").rmdir()
    (s / "rho" / "c" / "1" / f"0.{hexs}.partial").write_bytes(b"x")
    (s / f"zarr.{hexs}.partial").write_bytes(b"x")
    (s / f".{MANIFEST}.k3j2.tmp.json").write_bytes(b"x")
    pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    assert not list(s.rglob("*.partial")) and pe.xmap_verify(s).ok
    # cut off right after the manifest, before the group: recognised as ours, recreated
    t = tmp_path / "t.zarr"
    t.mkdir()
    (t / MANIFEST).write_text(json.dumps({"kind": "xmap-store", "files": ["zarr.json"]}))
    r = pe.xmap(store_panel, E=2, out=t, block_rows=2)
    assert pe.xmap_verify(t).ok


def test_store_without_manifest_judged_by_layout(tmp_path, store_panel):
    """A store of a pyedmcl without manifests: replaced when it is exactly pyedmcl's
    layout, refused (naming the file) otherwise; resuming one gives it a manifest of its
    pyedmcl files only."""
    from pyedmcl._outputs import MANIFEST, read_manifest

    s = _store(tmp_path / "old.zarr", store_panel)
    (s / MANIFEST).unlink()
    (s / "rho" / "c" / "0" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"\(rho/c/0/notes.txt: a file, it has no manifest"):
        pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    assert (s / "rho" / "c" / "0" / "notes.txt").read_text() == "mine"
    pe.xmap(store_panel, E=2, out=s, block_rows=2)  # resume: adopts pyedmcl's files only
    assert "rho/c/0/0" in read_manifest(s) and "rho/c/0/notes.txt" not in read_manifest(s)
    with pytest.raises(ValueError, match=r"notes.txt: a file, not in its manifest"):
        pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)
    (s / "rho" / "c" / "0" / "notes.txt").unlink()
    (s / MANIFEST).unlink()
    r = pe.xmap(store_panel, E=3, out=s, overwrite=True, block_rows=2)  # old clean store
    np.testing.assert_array_equal(r.rho[:], pe.xmap(store_panel, E=3).rho)


def test_report_folder_manifest(tmp_path):
    """A report folder lists its files; a user's file nested in it stops the next build
    before the old report is touched."""
    from pyedmcl._outputs import read_manifest

    out = tmp_path / "report"
    with atomic_dir(out, DEMO_REPORT) as tmp:
        (tmp / "index.html").write_text("v1")
        (tmp / "fig").mkdir()
        (tmp / "fig" / "a.png").write_bytes(b"png")
    assert read_manifest(out) == {"index.html", "fig/a.png", MARKER}
    (out / "fig" / "mine.txt").write_text("x")
    with pytest.raises(ValueError, match=r"\(fig/mine.txt: a file"), \
            atomic_dir(out, DEMO_REPORT) as tmp:
        pytest.fail("the build started")
    (out / "fig" / "mine.txt").unlink()
    with atomic_dir(out, DEMO_REPORT) as tmp:
        (tmp / "index.html").write_text("v2")
    assert _tree(out).keys() == {"index.html", MARKER, ".pyedmcl-manifest.json"}


@pytest.mark.skipif(os.name != "posix", reason="the lock file is removed on POSIX only")
def test_lock_file_removed_under_a_racing_opener(tmp_path, monkeypatch):
    """Job B opens the lock file, then job A (the holder) ends and removes it, and job C
    takes a new one: B's lock on the removed file must not count, so B is refused while C
    holds the output (one writer), and no lock file is left after C."""
    import fcntl
    import threading

    from pyedmcl._outputs import output_lock

    out = tmp_path / "m.zarr"
    real = fcntl.flock
    opened, go = threading.Event(), threading.Event()

    def flock(fd, op):
        if threading.current_thread().name == "B" and not opened.is_set():
            opened.set()  # B has the old file open: let A end and C start
            go.wait(10)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    got: list[str] = []

    def job_b() -> None:
        try:
            with output_lock(out):
                got.append("B wrote")
        except OutputBusyError:
            got.append("B refused")

    b = threading.Thread(target=job_b, name="B")
    with output_lock(out):  # A
        b.start()
        assert opened.wait(10)
    with output_lock(out):  # C, on a new lock file
        go.set()
        b.join(10)
        assert got == ["B refused"]
    assert not [p.name for p in tmp_path.iterdir()]
