"""Windowed RQA (per window: rqa() of the window exactly, pyunicorn on each window) and
joint RQA with fixed recurrence rates (pyunicorn's JointRecurrencePlot), CLI included.

Counts and histograms exactly; ratios vs pyunicorn to 1e-9 relative (it adds 1e-8 to
its denominators).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.rqa._oracles import pyunicorn_measures, pyunicorn_rp
from pyedmcl.rqa.measures import MEASURES


def quantized(n: int, seed: int = 3) -> np.ndarray:
    x = np.round(np.cumsum(np.random.default_rng(seed).standard_normal(n)) * 3) / 10
    return x.astype(np.float32).astype(np.float64)


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


def test_windows_match_single_rqa_and_pyunicorn(device):
    x = quantized(703)
    E, W, S = 3, 200, 150
    df = pe.rqa(x, E=E, radius=0.5, window=W, step=S, w_min=1, dtype="float64", device=device)
    n = x.size - (E - 1)
    starts = list(range(0, n - W + 1, S))
    assert list(df.index) == [(a, a + W - 1) for a in starts]
    for (a, b), row in df.iterrows():
        sub = x[a: b + 1 + (E - 1)]
        one = pe.rqa(sub, E=E, radius=0.5, w_min=1, dtype="float64", device=device)
        assert all(_same(row[k], one.measures[k]) for k in MEASURES), a
        rp = pyunicorn_rp(sub, E=E, tau=1, radius=0.5)
        assert row["n_recurrences"] == int(rp.R.sum()), a
        for k, v in pyunicorn_measures(rp, 2, 2, 1).items():
            assert row[k] == pytest.approx(v, rel=1e-9, abs=0), (a, k)


def test_windows_fixed_rate_per_window(device):
    from pyunicorn.timeseries import RecurrencePlot

    x = quantized(500, seed=7)
    df = pe.rqa(x, E=2, recurrence_rate=0.05, window=150, step=170, dtype="float64",
                device=device)
    assert len(df) == 3
    for (a, b), row in df.iterrows():
        rp = RecurrencePlot(x[a: b + 2], metric="euclidean", recurrence_rate=0.05, dim=2, tau=1,
                            silence_level=3)
        assert row["n_recurrences"] == int(rp.R.sum()), a
    assert df["radius"].nunique() > 1  # found per window


def test_window_bad_values():
    x = np.arange(50.0)
    for kw, name in (({"window": 1}, "window"), ({"window": 51}, "window"),
                     ({"window": 10, "step": 0}, "step"), ({"step": 3}, "window")):
        with pytest.raises(ValueError, match=name):
            pe.rqa(x, radius=1.0, **kw)


def test_joint_fixed_rate_pyunicorn(device):
    from pyunicorn.timeseries import JointRecurrencePlot

    x, y = quantized(400, 1), quantized(400, 2)
    for metric, um in (("euclidean", "euclidean"), ("maximum", "supremum")):
        jr = JointRecurrencePlot(x, y, metric=(um, um), recurrence_rate=(0.1, 0.2), dim=(2, 2),
                                 tau=(1, 1), silence_level=3)
        res = pe.joint_rqa(x, y, E=2, recurrence_rate=(0.1, 0.2), metric=metric,
                           dtype="float64", device=device)
        assert res.n_recurrences == int(jr.JR.sum()), metric
        assert len(res.radius) == 2


def test_joint_needs_one_of_radius_or_rate():
    x = np.arange(30.0)
    with pytest.raises(ValueError, match="exactly one"):
        pe.joint_rqa(x, x, radius=1.0, recurrence_rate=0.1)
    with pytest.raises(ValueError, match="pair"):
        pe.joint_rqa(x, x, radius=(1.0, 2.0, 3.0))


def test_cli_window_and_jrqa(tmp_path, capsys):
    from pyedmcl.cli.main import main

    x, y = quantized(400, 1), quantized(400, 2)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    assert main(["rqa", str(tmp_path / "x.npy"), "-E", "2", "-r", "0.5", "--window", "100",
                 "--step", "100", "--dtype", "float64", "-q", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    df = pe.rqa(x, E=2, radius=0.5, window=100, step=100, dtype="float64")
    assert [r["start"] for r in rows] == [a for a, _ in df.index]
    assert [r["n_recurrences"] for r in rows] == list(df["n_recurrences"])
    assert main(["jrqa", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "-E", "2", "--rr",
                 "0.1", "--rr-y", "0.2", "--dtype", "float64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = pe.joint_rqa(x, y, E=2, recurrence_rate=(0.1, 0.2), dtype="float64")
    assert out["n_recurrences"] == ref.n_recurrences
    # the text output's radius line: the pair of radii found for the two rates
    assert main(["jrqa", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "-E", "2", "--rr",
                 "0.1", "--rr-y", "0.2", "--dtype", "float64"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("radius")]
    assert line == [f"radius   {ref.radius[0]:.10g} {ref.radius[1]:.10g}"]
    # a bad value's error names the flag the user typed
    assert main(["jrqa", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--rr", "0.1",
                 "--rr-y", "1.5"]) == 2
    assert "--rr-y=1.5 is out of range" in capsys.readouterr().err


def test_cross_every_measure_pyrqa_default_theiler(device):
    """Cross-RQA: every measure PyRQA reports, with PyRQA's Theiler corrector left at its
    default (1: PyRQA applies it to cross analyses too)."""
    from conftest import CPU_DEVICE

    from clkernels import select_device
    from pyedmcl.rqa._oracles import pyrqa_measures, pyrqa_run

    x, y = quantized(500, 1), quantized(420, 2)
    pr, _ = pyrqa_run(x, y=y, E=2, tau=1, radius=0.5, theiler=1,
                      platform=select_device(CPU_DEVICE).platform_name)
    r = pe.cross_rqa(x, y, E=2, radius=0.5, theiler=1, dtype="float64",
                     threshold_rule="squared", device=device)
    assert r.n_recurrences == int(pr.number_of_recurrence_points)
    for k, v in pyrqa_measures(pr).items():  # PyRQA reports float32
        assert r.measures[k] == pytest.approx(float(v), rel=2e-6), k
    r0 = pe.cross_rqa(x, y, E=2, radius=0.5, dtype="float64", threshold_rule="squared",
                      device=device)  # our default theiler=0 keeps the i == j diagonal
    assert r0.diagonal_hist.sum() > r.diagonal_hist.sum()


def test_cli_fan_std_and_network(tmp_path, capsys):
    from pyedmcl.cli.main import main

    x = quantized(300, 1)
    np.save(tmp_path / "x.npy", x)
    f = str(tmp_path / "x.npy")
    assert main(["rqa", f, "-E", "2", "--knn", "8", "--dtype", "float64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_recurrences"] == pe.rqa(x, E=2, neighbourhood="fan", knn=8,
                                          dtype="float64").n_recurrences
    assert main(["rqa", f, "-E", "2", "--threshold-std", "0.2", "--dtype", "float64",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["radius"] == pytest.approx(0.2 * x.std())
    assert main(["rn", f, "-E", "2", "-r", "0.5", "--dtype", "float64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    net = pe.recurrence_network(x, E=2, radius=0.5, dtype="float64")
    assert out["n_links"] == net.n_links and out["transitivity"] == net.transitivity
    assert main(["rqa", f, "--knn", "8", "-r", "0.5"]) == 2  # bad input: one line on stderr
    assert "knn" in capsys.readouterr().err
