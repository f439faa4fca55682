"""`pyedmcl bench` finds the benchmark driver, installed or in a checkout."""

from __future__ import annotations

import subprocess
import sys

from pyedmcl.cli.bench_cmd import bench_dir


def test_bench_driver_is_found_and_runs_help():
    d = bench_dir()
    for name in ("run_all.py", "bench_edm.py", "bench_rqa.py", "bench_xmap.py", "bench_smap.py",
                 "bench_knn_backends.py"):
        assert (d / name).is_file(), name
    out = subprocess.run([sys.executable, str(d / "run_all.py"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--device" in out and "--only" in out


def test_ncu_replay_clears_only_its_own_capture(tmp_path):
    """bench/ncu_replay.py's capture folder: an earlier capture's files are removed, a
    folder holding anything else (or a file) is refused and left as it was."""
    import pytest
    sys.path.insert(0, str(bench_dir()))
    try:
        from ncu_replay import _clear_capture
    finally:
        sys.path.remove(str(bench_dir()))
    _clear_capture(tmp_path / "new")
    assert (tmp_path / "new").is_dir()
    old = tmp_path / "old"
    old.mkdir()
    for name in ("meta.json", "kernel.ptx", "arg0.npy", "after3.npy"):
        (old / name).write_text("x")
    _clear_capture(old)
    assert list(old.iterdir()) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "meta.json").write_text("x")
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not a capture"):
        _clear_capture(mine)
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "arg0.npy").write_text("keep")  # capture-like name, but no meta.json
    with pytest.raises(SystemExit, match="not a capture"):
        _clear_capture(stray)
    f = tmp_path / "f"
    f.write_text("keep")
    with pytest.raises(SystemExit, match="is a file"):
        _clear_capture(f)
    assert (mine / "notes.txt").read_text() == "keep" and (stray / "arg0.npy").exists()
    assert f.read_text() == "keep"
