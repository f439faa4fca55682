"""``pyedmcl simplex|ccm|edim`` end to end (results checked against the Python API)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe


def _run(*args):
    p = subprocess.run([sys.executable, "-m", "pyedmcl.cli.main", *args], capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("edmcli")
    x = np.empty(300)
    x[0] = 0.3
    for i in range(299):
        x[i + 1] = 3.9 * x[i] * (1 - x[i])
    y = np.roll(x, 1) ** 2
    pd.DataFrame({"time": np.arange(300), "x": x, "y": y}).to_csv(d / "d.csv", index=False)
    np.save(d / "x.npy", x)
    return d, x, y


def test_simplex_json_csv(data):
    d, x, y = data
    rc, out, err = _run("simplex", str(d / "d.csv"), "-c", "x", "-t", "y", "-E", "2",
                        "--lib", "1 150", "--pred", "151 290", "--device", CPU_DEVICE, "--json")
    assert rc == 0, err
    j = json.loads(out)
    ref = pe.simplex(x, y, E=2, lib="1 150", pred="151 290", device=CPU_DEVICE)
    assert abs(j["rho"] - ref.rho) < 1e-9
    # unquoted rows are the same rows (they were "unrecognized arguments")
    rc, out2, err = _run("simplex", str(d / "d.csv"), "-c", "x", "-t", "y", "-E", "2",
                         "--lib", "1", "150", "--pred", "151", "290", "--device", CPU_DEVICE,
                         "--json")
    assert rc == 0, err
    assert json.loads(out2)["rho"] == j["rho"]


def test_edim_npy_and_ccm(data):
    d, x, y = data
    rc, out, err = _run("edim", str(d / "x.npy"), "--max-E", "4", "--device", CPU_DEVICE, "--json")
    assert rc == 0, err
    j = json.loads(out)
    ref = pe.embed_dimension(x, max_E=4, device=CPU_DEVICE)
    np.testing.assert_allclose(j["rho"], ref.rho, atol=1e-9)
    rc, out, err = _run("ccm", str(d / "d.csv"), "-c", "x", "-t", "y", "-E", "2",
                        "--lib-sizes", "20 100 40", "--sample", "5", "--seed", "1",
                        "--device", CPU_DEVICE, "--json")
    assert rc == 0, err
    j = json.loads(out)
    ref = pe.ccm(x, y, E=2, lib_sizes="20 100 40", sample=5, seed=1, device=CPU_DEVICE)
    np.testing.assert_allclose(j["x:y"], ref.rho_xy, atol=1e-9)
    # unquoted sizes are the same sizes (they were "unrecognized arguments")
    rc, out2, err = _run("ccm", str(d / "d.csv"), "-c", "x", "-t", "y", "-E", "2",
                         "--lib-sizes", "20", "100", "40", "--sample", "5", "--seed", "1",
                         "--device", CPU_DEVICE, "--json")
    assert rc == 0, err
    assert json.loads(out2)["x:y"] == j["x:y"]


def test_ccm_surrogates(data):
    """--surrogates gives the API's p-values and convergence test for the same seed."""
    d, x, y = data
    rc, out, err = _run("ccm", str(d / "d.csv"), "-c", "x", "-t", "y", "-E", "2",
                        "--lib-sizes", "20 100 40", "--sample", "5", "--seed", "1",
                        "--surrogates", "19", "--device", CPU_DEVICE, "--json")
    assert rc == 0, err
    j = json.loads(out)
    ref = pe.ccm(x, y, E=2, lib_sizes="20 100 40", sample=5, seed=1, surrogates=19,
                 device=CPU_DEVICE)
    np.testing.assert_array_equal(j["x:y p"], ref.significance.p_xy)
    np.testing.assert_array_equal(j["y:x p"], ref.significance.p_yx)
    assert j["surrogates"] == 19 and j["convergence"][0]["kendall_tau"] == ref.convergence.tau_xy


def test_bad_input_exit_code_2(data):
    d, _, _ = data
    # the default device: bad input is reported whichever device would have run it
    rc, out, err = _run("simplex", str(d / "d.csv"), "-c", "x", "-E", "0")
    assert rc == 2 and "E" in err
