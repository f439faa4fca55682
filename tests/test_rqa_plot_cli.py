"""Recurrence-plot images (block density vs NumPy) and the rqa / crqa / rp CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl.cli.main import main


def _series(n: int) -> np.ndarray:
    t = np.arange(n)
    return np.sin(t * 0.21) + 0.3 * np.sin(t * 0.057)


def test_rp_block_density_matches_numpy(device, tmp_path):
    x = _series(203)  # 202 points: blocks of 51 with a short last block
    img = pe.recurrence_plot(x, E=2, tau=1, radius=0.25, size=4, dtype="float64", device=device,
                             path=str(tmp_path / "rp.png"))
    a = np.stack([x[:-1], x[1:]], axis=1)
    R = (((a[:, None] - a[None]) ** 2).sum(-1) < 0.0625).astype(float)
    b = 51
    ref = np.array([[R[i:i + b, j:j + b].mean() for j in range(0, 202, b)] for i in range(0, 202, b)])
    assert img.shape == (4, 4)
    np.testing.assert_allclose(img, ref, rtol=1e-6, atol=1e-7)  # float32 image of exact counts
    assert (tmp_path / "rp.png").stat().st_size > 0
    full = pe.recurrence_plot(x, E=2, tau=1, radius=0.25, size=1024, dtype="float64",
                              device=device)
    np.testing.assert_array_equal(full, R)
    dist = pe.recurrence_plot(x[:50], E=2, size=1024, dtype="float64", device=device)
    d = np.sqrt(((a[:49, None] - a[None, :49]) ** 2).sum(-1))
    np.testing.assert_allclose(dist, d, rtol=1e-6, atol=1e-6)


def test_cli_rqa_crqa_rp(tmp_path, capsys):
    x = _series(400)
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "y.csv", np.c_[np.arange(300), x[:300] * 0.9], delimiter=",",
               header="t,value", comments="")
    assert main(["rqa", str(tmp_path / "x.npy"), "-E", "2", "-r", "0.2", "--json",
                 "--device", CPU_DEVICE, "--dtype", "float64"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = pe.rqa(x, E=2, radius=0.2, device=CPU_DEVICE, dtype="float64")
    for k in ("RR", "DET", "L", "L_max", "LAM", "TT", "V_max", "W", "W_max", "L_entr"):
        assert out[k] == pytest.approx(ref.measures[k], rel=1e-12)
    assert main(["crqa", str(tmp_path / "x.npy"), str(tmp_path / "y.csv"), "-r", "0.2",
                 "--json", "--device", CPU_DEVICE, "--column", "value"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["RR"] < 1
    assert main(["rp", str(tmp_path / "x.npy"), str(tmp_path / "rp.png"), "-r", "0.2",
                 "--size", "100", "--device", CPU_DEVICE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["shape"] == [100, 100]
    assert main(["rqa", str(tmp_path / "x.npy"), "--rr", "1.5", "--device", CPU_DEVICE]) == 2
    assert "recurrence_rate" in capsys.readouterr().err
