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
