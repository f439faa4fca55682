"""The CLI's exit code says whose fault an error is by *where* it arises: every error while
a command checks its arguments and loads its inputs exits 2 with one line naming the
argument (a path too long, a folder given as a file, no permission, text that is not
UTF-8, a reader's own exception), while the same kind of error during the computation
exits 1. Fast: every case fails before a kernel is built (the computation is
monkeypatched where one is reached)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pyedmcl.io
from pyedmcl.cli.main import main as cli_main

LONG = "x" * 5000


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.sin(np.arange(100) * 0.3))
    os.mkdir("adir.csv")
    with open("latin.csv", "wb") as f:
        f.write("time,x\n1,caf\xe9\n2,3\n".encode("latin-1"))
    return tmp_path


def _one_error_line(capsys, *want: str) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert len(err[0]) < 400, err[0]  # a 5,000-character path is shortened
    for w in want:
        assert w in err[0], err[0]
    return err[0]


Q = ["-q"]
BAD_INPUTS = [  # (argv, the argument named, the reason)
    (["simplex", LONG + ".csv", "-E", "2"] + Q, "INPUT", "File name too long"),
    (["ccm", LONG + ".csv", "-E", "2", "--lib-sizes", "10", "20"] + Q, "INPUT",
     "File name too long"),
    (["rqa", LONG + ".csv", "-E", "2", "--rr", "0.1"] + Q, "INPUT", "File name too long"),
    (["crqa", "x.npy", LONG + ".npy", "-E", "2", "--rr", "0.1"] + Q, "INPUT",
     "File name too long"),
    (["xmap", LONG + ".csv", "-o", "o.zarr", "-E", "2"] + Q, "INPUT", "File name too long"),
    (["simplex", "x.npy", "-E", "2", "-o", LONG + ".csv"] + Q, "--out", "File name too long"),
    (["simplex", "x.npy", "-E", "2", "-o", "a/" + "z" * 300 + "/p.csv"] + Q, "--out",
     "File name too long"),
    (["rp", "x.npy", LONG + ".png", "-E", "2", "--rr", "0.1"] + Q, "OUTPUT",
     "File name too long"),
    (["xmap", "x.npy", "-o", LONG + ".zarr", "-E", "2"] + Q, "-o/--out", "File name too long"),
    (["xmap", "--verify", LONG + ".zarr"] + Q, "--verify", "File name too long"),
    (["demo", "-o", LONG] + Q, "-o/--out", "File name too long"),
    (["sample", "lorenz63", "-o", LONG + ".csv", "-n", "20"], "--out", "File name too long"),
    (["tune", "--prune-stale", "adir.csv"], "--prune-stale", "Is a directory"),
    (["simplex", "adir.csv", "-E", "2"] + Q, "adir.csv", "directory"),
    (["rqa", "adir.csv", "-E", "2", "--rr", "0.1"] + Q, "adir.csv", "directory"),
    (["simplex", "latin.csv", "-E", "2"] + Q, "latin.csv", "can't decode"),
    (["tune", "--prune-stale", "latin.csv"], "--prune-stale", "not valid text"),
]


@pytest.mark.parametrize("argv,what,why", BAD_INPUTS, ids=lambda v: " ".join(v)[:40]
                         if isinstance(v, list) else None)
def test_bad_input_exits_2(files, capsys, argv, what, why):
    assert cli_main(argv) == 2
    _one_error_line(capsys, what, why)


@pytest.mark.parametrize("exc", [PermissionError(13, "Permission denied", "data.csv"),
                                 IsADirectoryError(21, "Is a directory", "data.csv"),
                                 RuntimeError("HDF5: truncated file")])
def test_reader_errors_are_the_inputs(files, capsys, monkeypatch, exc):
    """Whatever the reader raises while loading the input: exit 2 naming INPUT."""
    def read_table(*a, **k):
        raise exc
    monkeypatch.setattr(pyedmcl.io, "read_table", read_table)
    for argv in (["simplex", "data.csv", "-E", "2"], ["rqa", "data.csv", "-E", "2", "--rr", "0.1"],
                 ["xmap", "data.csv", "-o", "o.zarr", "-E", "2"]):
        assert cli_main(argv + Q) == 2, argv
        _one_error_line(capsys, "INPUT", str(exc.args[-1] if isinstance(exc, OSError)
                                             else exc))
    assert not os.path.exists("o.zarr")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without permission")
def test_unreadable_input_exits_2(files, capsys):
    p = files / "secret.csv"
    p.write_text("time,x\n" + "".join(f"{i},{np.sin(i)}\n" for i in range(50)))
    p.chmod(0)
    assert cli_main(["simplex", str(p), "-E", "2"] + Q) == 2
    _one_error_line(capsys, "secret.csv", "ermission denied")


def test_oserror_in_the_computation_is_a_runtime_failure(files, capsys, monkeypatch):
    """The same OSError type raised by the computation (not by reading the input): exit 1."""
    import pyedmcl.edm.simplex as simplex_mod

    def simplex(*a, **k):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(simplex_mod, "simplex", simplex)
    assert cli_main(["simplex", "x.npy", "-E", "2"] + Q) == 1
    _one_error_line(capsys, "failed", "Input/output error")
