"""First use on an untuned CPU: the one-line offer of ``pyedmcl tune --quick`` and the
quick set itself (issue 27 item 3). The tuning directory is isolated per test (conftest)."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from conftest import CPU_DEVICE, FAST_BUILD_CPU

from clkernels import get_backend
from clkernels.tuning.database import UserDB, has_class_tuning
from pyedmcl.cli import tune_offer
from pyedmcl.cli.main import main


def test_has_class_tuning():
    real = get_backend(CPU_DEVICE).info
    # an unseen CPU of an unknown runtime: nothing of its own or its class
    alien = dataclasses.replace(real, runtime="fakecl", name="Fake CPU 1",
                                normalised_name="fake-cpu-1", device_type="cpu")
    assert not has_class_tuning(alien)
    UserDB(alien).put("knn/E4/n2048", {"kernel": "knn", "params": {}})
    assert has_class_tuning(alien)  # a user entry counts
    assert has_class_tuning(dataclasses.replace(alien, name="Fake GPU", device_type="gpu",
                                                normalised_name="fake-gpu"))


def test_offer_once_and_never_with_q(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("clkernels.tuning.database.has_class_tuning", lambda info: False)
    err = io.StringIO()
    assert tune_offer.offer_quick_tune(CPU_DEVICE, stream=err)
    line = err.getvalue()
    assert line.count("\n") == 1 and "pyedmcl tune --quick" in line
    assert not tune_offer.offer_quick_tune(CPU_DEVICE, stream=err)  # once per device
    (tmp_path / "d.csv").write_text("x\n" + "\n".join(map(str, np.sin(np.arange(60) * 0.3))))
    argv = ["simplex", str(tmp_path / "d.csv"), "-c", "x", "-E", "2", "--device", CPU_DEVICE,
            "--json"]
    monkeypatch.setattr(tune_offer, "MARKER", "other_marker.json")
    # shown where progress lines are: stderr a terminal and no -q
    monkeypatch.setattr("pyedmcl.cli.main.show_progress", lambda args: not args.quiet)
    capsys.readouterr()
    assert main([*argv, "-q"]) == 0
    assert "tune --quick" not in capsys.readouterr().err
    assert main(argv) == 0
    assert capsys.readouterr().err.count("tune --quick") == 1


@pytest.mark.slow
def test_quick_set_runs_and_stores(capsys, tmp_path):
    """``tune --quick`` alone: every case of the quick set tuned once, winners stored and,
    with ``--export``, written as a shipped file."""
    import json

    from pyedmcl.cli.tune_cmd import QUICK_SET

    out_file = tmp_path / "device.json"
    assert main(["tune", "--quick", "--budget", "0.2", "--device", FAST_BUILD_CPU, "-q",
                 "--export", str(out_file)]) == 0
    out = capsys.readouterr().out
    for fam, _ in QUICK_SET:
        assert fam in out
    assert len(UserDB(get_backend(FAST_BUILD_CPU).info).load()) >= len(QUICK_SET)
    kernels = {e["kernel"] for e in json.loads(out_file.read_text())["entries"]}
    assert {fam for fam, _ in QUICK_SET} <= kernels
