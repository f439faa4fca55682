"""Windowed cross- and joint-RQA (``window=``/``step=``): each row equals the whole call
on that window's samples bit for bit (float32 and float64), float32 rows equal float64's
(a fixed radius on quantized data: ties at the radius), and a few windows match
pyunicorn's CrossRecurrencePlot / JointRecurrencePlot.

Tolerances: counts and histogram-derived measures exactly; pyunicorn's own ratios to
1e-9 relative (it adds 1e-8 to its denominators).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyedmcl as pe
from pyedmcl.rqa._oracles import matrix_histograms, pyunicorn_measures
from pyedmcl.rqa.measures import MEASURES, compute_measures

E, W, S, R = 2, 90, 70, 0.5


def pair(n: int = 300, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Two related random walks on a 0.1 grid, exact in float32 (pyunicorn rounds its
    input to float32): distances tie at the radius."""
    rng = np.random.default_rng(seed)
    x = np.round(np.cumsum(rng.standard_normal(n)) * 3) / 10
    y = x + np.round(rng.standard_normal(n) * 2) / 10
    return (x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64))


@pytest.fixture(scope="module")
def xy() -> tuple[np.ndarray, np.ndarray]:
    return pair()


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


def _row_is(row, res) -> bool:
    return (all(_same(row[k], res.measures[k]) for k in MEASURES)
            and row["n_recurrences"] == res.n_recurrences and row["n_cells"] == res.n_cells)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_windows_equal_the_call_on_each_window(xy, dtype, device):
    x, y = xy
    df = pe.cross_rqa(x, y, E=E, radius=R, window=W, step=S, dtype=dtype, device=device)
    n = x.size - (E - 1)
    assert list(df.index) == [(a, a + W - 1) for a in range(0, n - W + 1, S)]
    assert df.attrs["method"] == "windows" and (df["radius"] == R).all()
    for a, b in df.index:
        one = pe.cross_rqa(x[a: b + E], y[a: b + E], E=E, radius=R, dtype=dtype,
                           device=device)
        assert _row_is(df.loc[(a, b)], one), (a, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_joint_windows_equal_the_call_on_each_window(xy, dtype, device):
    x, y = xy
    df = pe.joint_rqa(x, y, E=E, radius=(R, 0.4), window=W, step=S, dtype=dtype,
                      device=device)
    assert (df["radius_x"] == R).all() and (df["radius_y"] == 0.4).all()
    for a, b in df.index:
        one = pe.joint_rqa(x[a: b + E], y[a: b + E], E=E, radius=(R, 0.4), dtype=dtype,
                           device=device)
        assert _row_is(df.loc[(a, b)], one), (a, dtype)


def test_float32_windows_decide_as_float64(xy, device):
    """Fixed radii on quantized data (many distances equal to the radius): the float32
    rows equal float64's, measure for measure."""
    x, y = xy
    for fn, radius in ((pe.cross_rqa, R), (pe.joint_rqa, (R, 0.4))):
        d32, d64 = (fn(x, y, E=E, radius=radius, window=W, step=S, theiler=1, dtype=dt,
                       device=device) for dt in ("float32", "float64"))
        for k in d32.index:
            assert all(_same(d32.loc[k, c], d64.loc[k, c]) for c in d64.columns), (fn, k)


def test_cross_windows_match_pyunicorn(xy, device):
    """pyunicorn's CrossRecurrencePlot of a window: its recurrence rate, and the line
    histograms of its matrix (rows: points of y) give our row's every measure."""
    from pyunicorn.timeseries import CrossRecurrencePlot

    x, y = xy
    df = pe.cross_rqa(x, y, E=E, radius=R, window=W, step=S, w_min=1, dtype="float64",
                      device=device)
    for a, b in list(df.index)[:3]:
        cp = CrossRecurrencePlot(x[a: b + E], y[a: b + E], metric="euclidean", threshold=R,
                                 dim=E, tau=1, silence_level=3)
        row = df.loc[(a, b)]
        assert row["RR"] == pytest.approx(cp.cross_recurrence_rate(), rel=1e-12), a
        h = matrix_histograms(np.asarray(cp.recurrence_matrix(), bool).T, 0)
        assert row["n_recurrences"] == h["n_rec"], a
        ref = compute_measures(h["n_rec"], h["n_cells"], h["diag"], h["vert"], h["white"],
                               2, 2, 1)
        assert all(_same(row[k], ref[k]) for k in MEASURES), a


def test_joint_windows_match_pyunicorn(xy, device):
    from pyunicorn.timeseries import JointRecurrencePlot

    x, y = xy
    df = pe.joint_rqa(x, y, E=E, radius=(R, 0.4), window=W, step=S, w_min=1,
                      dtype="float64", device=device)
    for a, b in list(df.index)[:3]:
        jp = JointRecurrencePlot(x[a: b + E], y[a: b + E], metric=("euclidean", "euclidean"),
                                 threshold=(R, 0.4), dim=(E, E), tau=(1, 1), silence_level=3)
        row = df.loc[(a, b)]
        assert row["n_recurrences"] == int(np.asarray(jp.recurrence_matrix()).sum()), a
        for k, v in pyunicorn_measures(jp, 2, 2, 1).items():
            assert row[k] == pytest.approx(v, rel=1e-9, abs=0), (a, k)
    # a fixed rate per series: the radii are found per window
    dr = pe.joint_rqa(x, y, E=E, recurrence_rate=(0.1, 0.2), window=W, step=S,
                      dtype="float64", device=device)
    a, b = dr.index[1]
    jp = JointRecurrencePlot(x[a: b + E], y[a: b + E], metric=("euclidean", "euclidean"),
                             recurrence_rate=(0.1, 0.2), dim=(E, E), tau=(1, 1),
                             silence_level=3)
    assert dr.loc[(a, b), "n_recurrences"] == int(np.asarray(jp.recurrence_matrix()).sum())
    assert dr["radius_x"].nunique() > 1


def test_window_bad_input(xy):
    x, y = xy
    for fn in (pe.cross_rqa, pe.joint_rqa):
        with pytest.raises(ValueError, match="equal length|length"):
            fn(x, y[:-5], E=E, radius=R, window=W)
        with pytest.raises(ValueError, match="window"):
            fn(x, y, E=E, radius=R, step=3)
        with pytest.raises(ValueError, match="window"):
            fn(x, y, E=E, radius=R, window=1)
        with pytest.raises(ValueError, match="step"):
            fn(x, y, E=E, radius=R, window=W, step=0)
        with pytest.raises(ValueError, match="l_min"):
            fn(x, y, E=E, radius=R, window=W, l_min=W + 1)
        with pytest.raises(ValueError, match="scheduler"):
            fn(x, y, E=E, radius=R, window=W, scheduler="tcp://127.0.0.1:1")


def test_cli_crqa_jrqa_windows(tmp_path, capsys, xy):
    from pyedmcl.cli.main import main

    x, y = xy
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    f = [str(tmp_path / "x.npy"), str(tmp_path / "y.npy")]
    assert main(["crqa", *f, "-E", "2", "-r", "0.5", "--window", str(W), "--step", str(S),
                 "--dtype", "float64", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ref = pe.cross_rqa(x, y, E=2, radius=0.5, window=W, step=S, dtype="float64")
    assert [(r["start"], r["end"]) for r in rows] == list(ref.index)
    assert [r["n_recurrences"] for r in rows] == list(ref["n_recurrences"])
    assert main(["jrqa", *f, "-E", "2", "-r", "0.5", "--radius-y", "0.4", "--window", str(W),
                 "--dtype", "float64"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split(",")
    assert head[:3] == ["start", "end", "RR"] and head[-2:] == ["radius_x", "radius_y"]
    assert main(["crqa", *f, "-r", "0.5", "--step", "3"]) == 2
    assert "--window" in capsys.readouterr().err
