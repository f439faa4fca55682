"""What a user meets first: progress lines, time columns, output formats, flag spellings,
result views (``.plot()``, ``_repr_html_``) and the report's helpers."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pandas as pd
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl import progress
from pyedmcl.io import read_table

# --- progress ---------------------------------------------------------------------------


def test_activity_draws_a_line_and_restores_the_build_notice(monkeypatch, capsys):
    from clkernels import probe, settings

    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.setattr(progress, "LOG_REFRESH_S", 0.05)
    var = settings.env_name("BUILD_NOTICE_S")
    monkeypatch.delenv(var, raising=False)
    with progress.activity("a job", True):
        time.sleep(0.4)
        probe.to_terminal("a note\n")  # another message gets a line of its own
    err = capsys.readouterr().err
    assert "a job [00:00]" in err and "\na note\n" in err
    assert var not in __import__("os").environ and probe._line_prefix is None
    with progress.activity("quiet job", False):
        time.sleep(0.1)
    assert capsys.readouterr().err == ""


def test_api_progress_keyword(capsys):
    sig = inspect.signature(pe.simplex)
    assert sig.parameters["progress"].default is None and pe.simplex is pe.simplex
    x = np.sin(np.arange(300) * 0.3)
    r = pe.simplex(x, E=2, progress=False, device=CPU_DEVICE)
    assert r.rho > 0.9
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        pe.simplex(x, E=2, progress="yes", device=CPU_DEVICE)
    assert progress.resolve(None) is False  # not in a notebook


# --- time columns -----------------------------------------------------------------------

@pytest.mark.parametrize("head,values", [
    ("year", [1900, 1901, 1902, 1903]), ("Date", ["2000-01-01", "2000-01-02", "2000-01-03", "2000-01-04"]),
    ("Time (s)", [0.0, 0.5, 1.0, 1.5]), ("when", ["2000-01-01 10:00", "2000-01-01 11:00",
                                                 "2000-01-01 12:00", "2000-01-01 13:00"]),
])
def test_time_column_guessed(tmp_path, head, values):
    p = tmp_path / "d.csv"
    pd.DataFrame({head: values, "a": [1.0, 2, 3, 4], "b": [4.0, 3, 2, 1]}).to_csv(p, index=False)
    t = read_table(p)
    assert t.names == ["a", "b"] and t.time_name == head
    assert list(t.time) == values
    assert read_table(p, time_column=False).names[-2:] == ["a", "b"]


def test_time_column_not_guessed_for_a_series_and_overrides(tmp_path):
    p = tmp_path / "d.csv"
    pd.DataFrame({"x": [1.0, 2, 3], "label": ["u", "v", "w"], "y": [3.0, 2, 1]}).to_csv(p, index=False)
    t = read_table(p)
    assert t.names == ["x", "y"] and t.time is None
    t = read_table(p, time_column="x")
    assert t.names == ["y"] and list(t.time) == [1.0, 2, 3]
    with pytest.raises(ValueError, match="time column 'y' is not increasing: data row 2"):
        read_table(p, time_column="y")  # a time axis that runs backwards is refused
    with pytest.raises(ValueError, match="time column 'zz' not found"):
        read_table(p, time_column="zz")
    np.save(tmp_path / "d.npy", np.ones((5, 2)))
    with pytest.raises(ValueError, match="applies to CSV input"):
        read_table(tmp_path / "d.npy", time_column="t")


def test_times_past_the_data_are_extrapolated(tmp_path):
    p = tmp_path / "d.csv"
    pd.DataFrame({"Date": ["2000-01-01", "2000-01-03", "2000-01-05"], "a": [1.0, 2, 3]}).to_csv(
        p, index=False)
    assert list(read_table(p).times_at([0, 2, 3])) == ["2000-01-01", "2000-01-05", "2000-01-07"]
    pd.DataFrame({"year": [1990, 1995, 2000], "a": [1.0, 2, 3]}).to_csv(p, index=False)
    assert list(read_table(p).times_at([1, 3, 4])) == [1995, 2005, 2010]


def _cli(argv, capsys):
    from pyedmcl.cli.main import main

    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_outputs_carry_time_values_and_formats_follow_the_extension(tmp_path, capsys):
    x = np.sin(np.arange(120) * 0.7)
    src = tmp_path / "d.csv"
    pd.DataFrame({"year": np.arange(1900, 2020), "x": x}).to_csv(src, index=False)
    rc, out, err = _cli(["simplex", src, "--E", 2, "-o", tmp_path / "s.csv", "-q",
                         "--device", CPU_DEVICE], capsys)
    assert rc == 0, err
    assert "simplex x -> x" in out  # the year is the time axis, not a series
    df = pd.read_csv(tmp_path / "s.csv")
    ref = pe.simplex(x, E=2, device=CPU_DEVICE)
    assert list(df.columns[:1]) == ["year"]
    np.testing.assert_array_equal(df["year"].to_numpy(), 1900 + np.asarray(ref.times))
    np.testing.assert_allclose(df["predicted"].to_numpy(), ref.predicted)
    rc, _, err = _cli(["simplex", src, "-E", 2, "--no-time", "-q", "--device", CPU_DEVICE], capsys)
    assert rc == 0
    for argv, what in ((["simplex", src, "-E", 2, "-o", tmp_path / "r.npy"], "--out"),
                       (["edim", src, "-o", tmp_path / "r.json"], "--out"),
                       (["xmap", src, "-o", tmp_path / "r.npy"], "-o/--out"),
                       (["rp", src, tmp_path / "rp.jpg"], "OUTPUT")):
        rc, _, err = _cli(argv, capsys)
        assert rc == 2 and what in err and "follows the extension" in err, err
        assert not list(tmp_path.glob("r.*")) and not (tmp_path / "rp.jpg").exists()


def test_flags_spelled_alike(capsys):
    from pyedmcl.cli.main import build_parser

    p = build_parser()
    for cmd in ("simplex", "smap", "ccm", "rqa", "crqa", "rp", "xmap"):
        sub = p._subparsers._group_actions[0].choices[cmd]
        opts = {o for a in sub._actions for o in a.option_strings}
        assert {"-E", "--E", "--tau", "-q", "--time-column", "--no-time"} <= opts, cmd
        if cmd in ("simplex", "smap", "ccm", "rqa", "crqa", "rp"):
            assert {"-c", "--column"} <= opts, cmd


# --- result views and report helpers ----------------------------------------------------

def test_results_plot_and_html():
    import matplotlib

    matplotlib.use("Agg")
    x = np.sin(np.arange(400) * 0.37) + 0.3 * np.sin(np.arange(400) * 1.31)
    scan = pe.embed_dimension(x, max_E=4, device=CPU_DEVICE)
    assert isinstance(scan.best, int) and scan.best == int(scan.values[np.argmax(scan.rho)])
    html = scan._repr_html_()
    assert f"highest at E = {scan.best}" in html and "<table>" in html
    ax = scan.plot()
    assert ax.get_xlabel() == "embedding dimension E" and "rho" in ax.get_ylabel()
    q = pe.rqa(x, E=2, recurrence_rate=0.1, device=CPU_DEVICE)
    assert "DET" in q._repr_html_() and q.plot().get_xlabel() == "line length (steps)"
    c = pe.ccm(x, np.roll(x, 1), E=2, lib_sizes=[20, 100], sample=5, seed=1, device=CPU_DEVICE)
    assert "library grows" in c._repr_html_()
    assert "no significance test was run" in c._repr_html_()
    assert c.plot().get_xlabel() == "library size L (points)"
    s = pe.ccm(x, np.roll(x, 1), E=2, lib_sizes=[20, 100], sample=5, seed=1, surrogates=19,
               device=CPU_DEVICE)
    p_yx = float(s.significance.p_yx[-1])
    verdict = "is above its null" if p_yx < 0.05 else "is not above its null"
    assert "Against 19 ebisuzaki surrogates" in s._repr_html_()
    assert f"y xmap x {verdict} at L = 100" in s._repr_html_()


def test_cluster_order_keeps_blocks_together():
    from pyedmcl.report.demo import cluster_order

    rng = np.random.default_rng(0)
    groups = rng.permutation(np.repeat([0, 1, 2], 4))
    sim = np.where(groups[:, None] == groups[None, :], 0.9, 0.1) + 0.01 * rng.random((12, 12))
    order = cluster_order(sim)
    assert sorted(order) == list(range(12))
    labels = groups[order]
    assert sum(labels[i] != labels[i + 1] for i in range(11)) == 2  # three contiguous runs


def test_link_auc_equals_mann_whitney():
    from scipy.stats import mannwhitneyu

    from pyedmcl.report.demo import link_auc

    rng = np.random.default_rng(1)
    n = 7
    A = (rng.random((n, n)) < 0.3).astype(int)
    np.fill_diagonal(A, 0)
    rho = np.round(rng.random((n, n)), 1)  # ties on purpose
    off = ~np.eye(n, dtype=bool)
    truth, score = A.T.astype(bool)[off], rho[off]
    u = mannwhitneyu(score[truth], score[~truth]).statistic
    assert link_auc(rho, A) == pytest.approx(u / (truth.sum() * (~truth).sum()), abs=1e-12)


def test_counted_bar_takes_the_line_from_an_activity(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.02)
    monkeypatch.setattr(progress, "REFRESH_S", 0.02)
    monkeypatch.setattr(progress, "LOG_REFRESH_S", 0.02)
    with progress.activity("outer", True):
        time.sleep(0.1)
        capsys.readouterr()
        with progress.Progress(3, "windows", True, unit="window") as bar:
            time.sleep(0.1)
            during = capsys.readouterr().err
            for _ in range(3):
                bar.update()
        assert progress._open_bars[0] == 0
    assert "outer [" not in during.split("\n", 1)[-1]  # at most the line being cleared


def test_public_functions_pickle():
    """multiprocessing sends functions by name: the wrapped public ones must resolve."""
    import pickle

    for name in ("simplex", "ccm", "rqa", "embed_dimension"):
        fn = getattr(pe, name)
        assert pickle.loads(pickle.dumps(fn)) is fn


def test_time_guess_agrees_with_pyedm_sample_data():
    """pyEDM takes the first column as time unless noTime: every sample it ships with a
    time column is guessed so, and its one file without (circle_noTime) is not."""
    import glob
    import os

    pyEDM = pytest.importorskip("pyEDM")
    files = sorted(glob.glob(os.path.join(os.path.dirname(pyEDM.__file__), "data", "*.csv")))
    assert len(files) >= 5
    for f in files:
        first = pd.read_csv(f, nrows=1).columns[0]
        want = None if "noTime" in f else first
        assert read_table(f).time_name == want, f


def test_nonlinearity_reading_rule():
    from pyedmcl.reading import is_nonlinear

    th = [0, 0.5, 1, 2, 4]
    assert is_nonlinear(th, [0.90, 0.92, 0.95, 0.96, 0.95])       # +0.06 over linear
    assert is_nonlinear(th, [0.997, 0.998, 0.999, 0.9995, 0.999])  # closes most of the gap to 1
    assert not is_nonlinear(th, [0.83, 0.835, 0.839, 0.83, 0.82])  # +0.009 of a 0.17 gap
    assert not is_nonlinear(th, [0.9, 0.89, 0.88, 0.87, 0.86])     # best at theta = 0


def test_import_loads_no_heavy_optional_libraries():
    """``import pyedmcl`` (every script and CLI command pays it) loads neither scipy
    (~0.25 s of its import: the S-map host rows import it on first use), pandas,
    matplotlib nor Mako (with its Pygments plugin: the first render imports it); each comes
    with the first function that needs it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)
    code = ("import sys, pyedmcl; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scipy', 'pandas', 'matplotlib', 'mako', 'pygments'}))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
