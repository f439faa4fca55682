"""Every CLI subcommand x every input format x the documented exit codes (issue #8).

Analysis commands (simplex, smap, ccm, edim, xmap, rqa, crqa, rp) run in process
(``pyedmcl.cli.main.main([...])``) on one tiny data set stored as .csv (named
columns, plus a time column and a text column), .npy, .h5, .zarr and CSV on stdin;
each ``--json`` result is checked against the Python API called on the same
arrays (oracle: the API, itself checked against pyEDM / PyRQA / pyunicorn in the
other test files). All formats hold the same float64 values (CSV round-trips
float64 exactly), so results must match to 1e-12 (skills) or exactly (RQA counts).

Exit codes (pyedmcl/cli/main.py): 0 ok, 2 bad usage or input (unknown column,
empty file, non-numeric column, bad parameter, missing file), 1 runtime failure
(simulated device and build failures). One subprocess runs the console script.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyopencl as cl
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from clkernels import BuildError
from clkernels.backends.pyopencl_backend import PyOpenCLBackend
from pyedmcl.cli.main import main
from pyedmcl.data import coupled_logistic

DEV = CPU_DEVICE
N = 120
XY = coupled_logistic(N)
X, Y = XY[:, 0].copy(), XY[:, 1].copy()
FORMATS = ("csv", "npy", "h5", "zarr", "stdin")
CSV_TEXT = pd.DataFrame({"time": np.arange(N), "x": X, "label": ["a"] * N, "y": Y}).to_csv(index=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[str, str, str]]:
    """format -> (path argument, column of x, column of y)."""
    d = tmp_path_factory.mktemp("climatrix")
    (d / "d.csv").write_text(CSV_TEXT)
    np.save(d / "d.npy", XY)
    h5py = pytest.importorskip("h5py")
    with h5py.File(d / "d.h5", "w") as f:
        f["data"] = XY
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(str(d / "d.zarr"), mode="w", shape=XY.shape, dtype="f8")
    z[...] = XY
    return {"csv": (str(d / "d.csv"), "x", "y"), "npy": (str(d / "d.npy"), "0", "1"),
            "h5": (str(d / "d.h5"), "0", "1"), "zarr": (str(d / "d.zarr"), "0", "1"),
            "stdin": ("-", "x", "y"), "dir": (str(d), "", "")}


def run(argv: list[str], monkeypatch, capsys, stdin: str | None = CSV_TEXT) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------- the matrix

COMMANDS = ("simplex", "smap", "ccm", "edim", "xmap", "rqa", "crqa", "rp")


def argv_for(cmd: str, path: str, cx: str, cy: str, tmp: Path) -> list[str]:
    dev = ["--device", DEV, "--json", "-q"]
    return {
        "simplex": ["simplex", path, "-c", cx, "-t", cy, "-E", 2, "--predictions"],
        "smap": ["smap", path, "-c", cx, "-t", cy, "-E", 2, "--theta", 1.5, "--predictions"],
        "ccm": ["ccm", path, "-c", cx, "-t", cy, "-E", 2, "--lib-sizes", "20 100 40",
                "--sample", 3, "--seed", 1],
        "edim": ["edim", path, "-c", cy, "--max-E", 3],
        "xmap": ["xmap", path, "-o", tmp / "m.zarr", "--E", 2],
        "rqa": ["rqa", path, "--column", cx, "-E", 2, "--radius", 0.2],
        "crqa": ["crqa", path, path, "--column", cx, "--column-y", cy, "-E", 2, "--radius", 0.2],
        "rp": ["rp", path, tmp / "rp.png", "--column", cx, "--cross", path, "--column-y", cy,
               "-E", 2, "--radius", 0.2, "--size", 32],
    }[cmd] + dev


_REF: dict[str, object] = {}


def reference(cmd: str):
    """The Python API's result for ``cmd`` on the arrays (computed once)."""
    if cmd not in _REF:
        _REF[cmd] = {
            "simplex": lambda: pe.simplex(X, Y, E=2, dtype="float32", device=DEV),
            "smap": lambda: pe.smap(X, Y, E=2, theta=1.5, dtype="float32", device=DEV),
            "ccm": lambda: pe.ccm(X, Y, E=2, lib_sizes="20 100 40", sample=3, seed=1,
                                  dtype="float32", device=DEV),
            "edim": lambda: pe.embed_dimension(Y, max_E=3, dtype="float32", device=DEV),
            "xmap": lambda: pe.xmap(XY, E=2, devices=[DEV], progress=False),
            "rqa": lambda: pe.rqa(X, E=2, radius=0.2, device=DEV),
            "crqa": lambda: pe.cross_rqa(X, Y, E=2, radius=0.2, theiler=0, device=DEV),
            "rp": lambda: pe.recurrence_plot(X, Y, E=2, radius=0.2, size=32, device=DEV),
        }[cmd]()
    return _REF[cmd]


def check(cmd: str, j: dict, tmp: Path, cx: str, cy: str) -> None:
    ref = reference(cmd)
    if cmd in ("simplex", "smap"):
        for k in ("rho", "mae", "rmse"):
            assert j[k] == pytest.approx(getattr(ref, k), abs=1e-12)
        np.testing.assert_allclose(np.array(j["predicted"], float), ref.predicted, atol=1e-12)
        assert (j["column"], j["target"]) == (cx, cy)
    elif cmd == "ccm":
        np.testing.assert_allclose(j[f"{cx}:{cy}"], ref.rho_xy, atol=1e-12)
        np.testing.assert_allclose(j[f"{cy}:{cx}"], ref.rho_yx, atol=1e-12)
    elif cmd == "edim":
        np.testing.assert_allclose(j["rho"], ref.rho, atol=1e-12)
        assert j["best_E"] == ref.best
    elif cmd == "xmap":
        import zarr

        got = zarr.open_group(str(tmp / "m.zarr"), mode="r")["rho"][...]
        np.testing.assert_allclose(got, np.asarray(ref.rho), atol=1e-6)  # float32 matrix
        assert j["N"] == 2
    elif cmd in ("rqa", "crqa"):
        want = ref.as_dict()
        for k in ("RR", "DET", "L", "L_max", "LAM", "TT", "V_max"):
            if np.isnan(want[k]):  # valid JSON: NaN is written as null
                assert j[k] is None, k
            else:
                assert j[k] == pytest.approx(want[k], rel=1e-12, abs=1e-12), k
    elif cmd == "rp":
        assert j["shape"] == list(ref.shape) and (tmp / "rp.png").stat().st_size > 0
        assert j["mean"] == pytest.approx(float(ref.mean()), abs=1e-7)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cmd", COMMANDS)
def test_command_x_format_matches_api(cmd, fmt, files, tmp_path, monkeypatch, capsys):
    path, cx, cy = files[fmt]
    rc, out, err = run(argv_for(cmd, path, cx, cy, tmp_path), monkeypatch, capsys)
    assert rc == 0, err
    check(cmd, json.loads(out), tmp_path, cx, cy)


# ------------------------------------------------------------------- exit code 2

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cmd", ("simplex", "rqa", "crqa"))
def test_unknown_column_exits_2(cmd, fmt, files, tmp_path, monkeypatch, capsys):
    path, cx, cy = files[fmt]
    bad = "nope" if fmt in ("csv", "stdin") else "9"
    argv = argv_for(cmd, path, bad, cy, tmp_path)
    rc, _, err = run(argv, monkeypatch, capsys)
    assert rc == 2 and (f"'{bad}' not found" in err or "out of range" in err), err


@pytest.mark.parametrize("fmt", ("csv", "stdin"))
@pytest.mark.parametrize("cmd", ("simplex", "ccm", "rqa", "rp"))
def test_non_numeric_column_exits_2(cmd, fmt, files, tmp_path, monkeypatch, capsys):
    path, _, cy = files[fmt]
    rc, _, err = run(argv_for(cmd, path, "label", cy, tmp_path), monkeypatch, capsys)
    assert rc == 2 and "'label'" in err and "not numeric" in err, err


def _empty_inputs(d: Path) -> dict[str, str]:
    import h5py
    import zarr

    (d / "e.csv").write_text("")
    (d / "h.csv").write_text("x,y\n")
    np.save(d / "e.npy", np.zeros(0))
    with h5py.File(d / "e.h5", "w") as f:
        f["data"] = np.zeros((0, 2))
    zarr.open_array(str(d / "e.zarr"), mode="w", shape=(0, 2), dtype="f8")
    return {"csv": d / "e.csv", "csv-header-only": d / "h.csv", "npy": d / "e.npy",
            "h5": d / "e.h5", "zarr": d / "e.zarr", "stdin": "-"}


@pytest.mark.parametrize("fmt", ("csv", "csv-header-only", "npy", "h5", "zarr", "stdin"))
@pytest.mark.parametrize("cmd", ("simplex", "edim", "xmap", "rqa"))
def test_empty_input_exits_2(cmd, fmt, tmp_path, monkeypatch, capsys):
    path = _empty_inputs(tmp_path)[fmt]
    rc, _, err = run(argv_for(cmd, path, "0", "0", tmp_path)[:2] + {
        "simplex": ["-E", 2], "edim": [], "xmap": ["-o", tmp_path / "o.zarr"], "rqa": ["--radius", 1],
    }[cmd] + ["--device", DEV], monkeypatch, capsys, stdin="")
    assert rc == 2 and "empty" in err, err


@pytest.mark.parametrize("argv,match", [
    (["simplex", "{csv}", "-c", "x", "-E", 0], "E=0"),
    (["simplex", "{csv}", "-c", "x", "-E", 2, "--Tp", -500], "Tp"),
    (["smap", "{csv}", "-c", "x", "-E", 2, "--theta", -1], "theta"),
    (["ccm", "{csv}", "-c", "x", "-t", "y", "-E", 2, "--lib-sizes", "abc"], "lib_sizes"),
    (["ccm", "{csv}", "-c", "x", "-E", 2, "--lib-sizes", "20 40"], "--target"),
    (["edim", "{csv}", "--max-E", 0], "max_E"),
    (["xmap", "{csv}", "-o", "{tmp}/x.zarr", "--E", 0], "E"),
    (["rqa", "{csv}", "--radius", -1], "radius"),
    (["rqa", "{csv}", "--radius", 0.2, "--metric", "cosine"], "metric"),
    (["crqa", "{csv}", "{csv}", "--column", "x", "--rr", 2], "recurrence_rate"),
    (["rp", "{csv}", "{tmp}/a.png", "--size", 0, "--radius", 0.2], "size"),
    (["simplex", "{tmp}/missing.csv", "-E", 2], "does not exist"),
    (["simplex", "{tmp}/data.parquet", "-E", 2], "unsupported extension"),
    (["simplex", "{csv}", "-E", 2, "--device", "nosuchdevice"], "nosuchdevice"),
    (["tune", "nosuchkernel"], "unknown kernel"),
    (["simplex", "{csv}"], "-E"),                 # argparse: missing required option
    (["nosuchcommand"], "invalid choice"),         # argparse: unknown subcommand
    (["rqa", "{csv}", "--radius", "x"], "--radius: 'x' is not a number"),
])
def test_bad_parameter_exits_2(argv, match, files, tmp_path, monkeypatch, capsys):
    (tmp_path / "data.parquet").write_text("1")
    argv = [str(a).format(csv=files["csv"][0], tmp=tmp_path) for a in argv]
    if "--device" not in argv and argv[0] not in ("tune", "nosuchcommand"):
        argv += ["--device", DEV]
    rc, _, err = run(argv, monkeypatch, capsys)
    assert rc == 2 and match in err, err


# ------------------------------------------------------------------- exit code 1

@pytest.mark.parametrize("failure", ("device", "build"))
@pytest.mark.parametrize("cmd", COMMANDS)
def test_runtime_failure_exits_1(cmd, failure, files, tmp_path, monkeypatch, capsys):
    def device_failure(self, *a, **k):
        raise cl.RuntimeError("simulated device failure: CL_OUT_OF_RESOURCES")

    def build_failure(self, *a, **k):
        raise BuildError("simulated build failure")

    if failure == "device":
        monkeypatch.setattr(PyOpenCLBackend, "launch", device_failure)
    else:
        monkeypatch.setattr(PyOpenCLBackend, "kernel_from_source", build_failure)
        monkeypatch.setattr(PyOpenCLBackend, "kernel", lambda self, *a, **k: build_failure(self))
    path, cx, cy = files["csv"]
    rc, out, err = run(argv_for(cmd, path, cx, cy, tmp_path), monkeypatch, capsys)
    assert rc == 1 and f"simulated {failure} failure" in err, err
    assert out == ""


# ------------------------------------------------------------------- the other commands

def test_devices_lists_pocl(monkeypatch, capsys):
    rc, out, _ = run(["devices", "--json"], monkeypatch, capsys)
    assert rc == 0
    j = json.loads(out)
    assert any(d["runtime"] == "pocl" for d in j["devices"]) and j["default"]
    rc, out, _ = run(["devices"], monkeypatch, capsys)
    assert rc == 0 and "pocl" in out


def test_tune_list_and_usage(monkeypatch, capsys):
    """Tuning itself is covered by tests/test_tuning.py; here the CLI contract."""
    from pyedmcl.kernels import registry

    rc, out, _ = run(["tune", "--list"], monkeypatch, capsys)
    assert rc == 0 and all(name in out for name in registry())
    rc, _, err = run(["tune"], monkeypatch, capsys)
    assert rc == 2 and "name a kernel family" in err


def test_demo_exit_codes(monkeypatch, capsys, tmp_path):
    """The real demo runs in tests/test_demo.py; here only its CLI contract."""
    seen = {}

    def fake(out, **kw):
        seen.update(out=out, **kw)
        return {"report": str(Path(out) / "index.html")}

    monkeypatch.setattr("pyedmcl.report.demo.run_demo", fake)
    rc, out, _ = run(["demo", "-o", tmp_path / "r", "--device", DEV, "--json"], monkeypatch, capsys)
    assert rc == 0 and json.loads(out)["report"].endswith("index.html") and seen["device"] == DEV

    def broken(out, **kw):
        raise cl.RuntimeError("simulated device failure")

    monkeypatch.setattr("pyedmcl.report.demo.run_demo", broken)
    rc, _, err = run(["demo", "-o", tmp_path / "r"], monkeypatch, capsys)
    assert rc == 1 and "simulated device failure" in err


@pytest.mark.parametrize("child_rc,want", [(0, 0), (2, 2), (1, 1), (-9, 1)])
def test_bench_passes_arguments_and_maps_exit_codes(child_rc, want, monkeypatch, capsys):
    calls = []

    def fake_call(cmd):
        calls.append(cmd)
        return child_rc

    monkeypatch.setattr("pyedmcl.cli.bench_cmd.subprocess.call", fake_call)
    rc, _, _ = run(["bench", "--device", DEV, "--only", "edm", "--timeout", 5], monkeypatch, capsys)
    assert rc == want
    assert calls[0][1].endswith("run_all.py") and calls[0][-2:] == ["--only", "edm"]
    assert "--device" in calls[0] and DEV in calls[0]


def test_console_script_smoke():
    """The installed ``pyedmcl`` script (this checkout first on the path), real stdin."""
    exe = Path(sys.executable).with_name("pyedmcl")
    if not exe.exists():
        pytest.skip("console script not installed")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    p = subprocess.run([str(exe), "simplex", "-", "-c", "x", "-t", "y", "-E", "2", "--device", DEV,
                        "--json"], input=CSV_TEXT, capture_output=True, text=True, timeout=120,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rho"] == pytest.approx(reference("simplex").rho, abs=1e-12)
    p = subprocess.run([str(exe), "simplex", "-", "-c", "nope", "-E", "2", "--device", DEV],
                       input=CSV_TEXT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 2 and "'nope' not found" in p.stderr
