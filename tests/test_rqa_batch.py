"""pe.rqa_batch and pe.rqa_grid: every row equals pe.rqa of that series / combination bit
for bit (the oracle: the single call, itself checked against pyunicorn and PyRQA in
test_rqa_oracles.py); inputs (NumPy, pandas, xarray cubes, NaN padding) and bad input.

Exact equality of every measure (NaN where both are NaN), no tolerance.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest

import pyedmcl as pe
from pyedmcl.rqa.measures import MEASURES

T, N = 160, 4


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


def _equal_row(res, row) -> bool:
    return all(_same(res.measures[k], row[k]) for k in MEASURES) and \
        res.n_recurrences == row["n_recurrences"] and res.radius == row["radius"]


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    x = np.random.default_rng(7).standard_normal((T, N)).cumsum(axis=0)
    x[T - 30:, 2] = np.nan  # a shorter series, NaN padded at the end
    return x


def _col(X: np.ndarray, j: int) -> np.ndarray:
    return X[~np.isnan(X[:, j]), j]


@pytest.mark.parametrize("dtype,method,scope,tau", [("float32", "series", "lines", 2),
                                                    ("float32", "packed", "lines", 2),
                                                    ("float64", "packed", "matrix", 1),
                                                    ("float32", "batched", "matrix", 1),
                                                    ("float64", "batched", "lines", 2)])
def test_batch_rows_equal_single_calls(X, dtype, method, scope, tau):
    """Three series of one length go into one pack (packed), the shorter one runs on its
    own; batched: all four in one pair of launches."""
    df = pe.rqa_batch(X, E=3, tau=tau, radius=1.5, theiler=2, dtype=dtype, method=method,
                      theiler_scope=scope)
    assert list(df.index) == list(range(N))
    assert list(df["N"]) == [T, T, T - 30, T]
    for j in range(N):
        one = pe.rqa(_col(X, j), E=3, tau=tau, radius=1.5, theiler=2, dtype=dtype,
                     theiler_scope=scope)
        assert _equal_row(one, df.iloc[j]), j
        assert df.iloc[j]["n_points"] == one.settings["n_points"]


@pytest.mark.parametrize("opts,method", [
    (dict(E=2), "packed"),
    (dict(E=1, theiler=0, white_border=False, metric="maximum", threshold_rule="squared",
          theiler_scope="matrix", l_min=3, w_min=1), "packed"),
    (dict(E=2), "batched"),
    (dict(E=3, tau=2, theiler=0, white_border=False, metric="manhattan",
          threshold_rule="squared", l_min=3, w_min=1), "batched")])
def test_packed_float32_on_ties(opts, method):
    """Quantized data, the radius a grid multiple: many cells on the threshold, decided in
    float64 in the pack (its bound taken over all series; batched: each series' own) as
    in each single call."""
    rng = np.random.default_rng(11)
    Q = np.round(rng.standard_normal((150, 5)).cumsum(axis=0) * 3) / 10 + 40.0
    Q[:, 4] = 7.0  # a constant series, in the pack too
    with pytest.warns(pe.validation.ConstantSeriesWarning):
        df = pe.rqa_batch(Q, radius=0.5, method=method, **opts)
    for j in range(5):
        with pytest.warns() if j == 4 else contextlib.nullcontext():
            one = pe.rqa(Q[:, j], radius=0.5, **opts)
        assert _equal_row(one, df.iloc[j]), j


def test_batch_rate_and_per_series_radii(X):
    df = pe.rqa_batch(X, E=2, recurrence_rate=0.05)
    radii = [1.0, 1.5, 2.0, 0.7]
    dr = pe.rqa_batch(X, E=2, radius=radii)
    for j in range(N):
        assert _equal_row(pe.rqa(_col(X, j), E=2, recurrence_rate=0.05), df.iloc[j]), j
        assert _equal_row(pe.rqa(_col(X, j), E=2, radius=radii[j]), dr.iloc[j]), j
    assert len(set(df["radius"])) == N  # one radius found per series


def test_batch_dataframe_names_and_windows(X):
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    df = pe.rqa_batch(frame, E=2, radius=1.0)
    assert list(df.index) == ["a", "b", "c", "d"]
    dated = frame.set_index(pd.date_range("2020-01-01", periods=T, freq="D"))
    assert pe.rqa_batch(dated, E=2, radius=1.0).equals(df)
    dw = pe.rqa_batch(frame, E=2, radius=1.0, window=60, step=40)
    for name, j in (("a", 0), ("c", 2)):
        one = pe.rqa(_col(X, j), E=2, radius=1.0, window=60, step=40)
        part = dw.loc[name]
        assert list(part.index) == list(one.index)
        for k in MEASURES:
            assert all(_same(a, b) for a, b in zip(part[k], one[k], strict=True)), (name, k)


def test_batch_cube_to_maps(X):
    xr = pytest.importorskip("xarray")
    cube = X[:, :4].reshape(T, 2, 2)
    da = xr.DataArray(cube, dims=("time", "lat", "lon"),
                      coords={"lat": [10.0, 20.0], "lon": [1.0, 2.0]})
    ds = pe.rqa_batch(da.transpose("lon", "time", "lat"), E=2, radius=1.0)
    assert ds["RR"].dims == ("lon", "lat")  # the input's order, time left out
    ds = ds.transpose("lat", "lon")
    assert list(ds["lat"].values) == [10.0, 20.0]
    flat = pe.rqa_batch(X, E=2, radius=1.0)
    assert np.array_equal(ds["DET"].values.reshape(-1), flat["DET"].to_numpy(),
                          equal_nan=True)
    with pytest.raises(ValueError, match="X is a DataArray .* no 'time' dimension"):
        pe.rqa_batch(da.rename(time="t"), E=2, radius=1.0)
    timed = da.assign_coords(time=np.r_[0:T - 1, T + 5].astype(float))
    with pytest.raises(ValueError, match="irregular|equally spaced|step"):
        pe.rqa_batch(timed, E=2, radius=1.0)
    assert pe.rqa_batch(timed, E=2, radius=1.0, allow_irregular=True).equals(
        pe.rqa_batch(da, E=2, radius=1.0))


def test_grid_rows_equal_single_calls(X):
    x = _col(X, 0)
    df = pe.rqa_grid(x, E=[2, 3], radius=[1.0, 2.0], theiler=[0, 1], l_min=[2, 3], v_min=3)
    assert len(df) == 16
    for _, r in df.iterrows():
        one = pe.rqa(x, E=int(r.E), radius=r.radius, theiler=int(r.theiler),
                     l_min=int(r.l_min), v_min=3)
        assert _equal_row(one, r), dict(r)
    with pytest.warns(pe.validation.ConstantSeriesWarning):
        dc = pe.rqa_grid(np.full(50, 3.0), E=2, radius=[0.5, 1.0])
    assert list(dc["RR"]) == [1.0, 1.0] and dc.attrs["notes"]
    dq = pe.rqa_grid(x, E=2, recurrence_rate=[0.05, 0.1])
    for _, r in dq.iterrows():
        assert _equal_row(pe.rqa(x, E=2, recurrence_rate=r.recurrence_rate), r)


def test_bad_input_names_the_argument(X):
    with pytest.raises(ValueError, match="radius has 3 values for 4 series"):
        pe.rqa_batch(X, radius=[1.0, 2.0, 3.0])
    bad = X.copy()
    bad[10, 1] = np.nan
    with pytest.raises(ValueError, match="X column 1 has a NaN at row 10"):
        pe.rqa_batch(bad, radius=1.0)
    with pytest.raises(ValueError, match="exactly one of radius"):
        pe.rqa_batch(X, radius=1.0, recurrence_rate=0.1)
    with pytest.raises(ValueError, match="method='packed' needs one fixed radius"):
        pe.rqa_batch(X, recurrence_rate=0.1, method="packed")
    with pytest.raises(ValueError, match="method='fast' is not supported"):
        pe.rqa_batch(X, radius=1.0, method="fast")
    with pytest.raises(ValueError, match="X has shape"):
        pe.rqa_batch(np.zeros((3, 3, 3)), radius=1.0)
    x = _col(X, 0)
    with pytest.raises(ValueError, match=r"E=\[\] is an empty grid"):
        pe.rqa_grid(x, E=[], radius=1.0)
    with pytest.raises(ValueError, match="max_combinations=4"):
        pe.rqa_grid(x, E=[2, 3], radius=[1.0, 2.0, 3.0], max_combinations=4)
    with pytest.raises(ValueError, match="l_min"):
        pe.rqa_grid(x, radius=1.0, l_min=[2, 10**6])


def test_cli_all_columns_and_grid(X, tmp_path, capsys):
    import json

    from pyedmcl.cli.main import main

    path = tmp_path / "x.csv"
    pd.DataFrame(X, columns=["a", "b", "c", "d"]).to_csv(path, index=False)
    out = tmp_path / "batch.csv"
    assert main(["rqa", str(path), "--all-columns", "-E", "2", "--radius", "1.0",
                 "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert list(got["series"]) == ["a", "b", "c", "d"]
    one = pe.rqa(_col(X, 2), E=2, radius=1.0)
    assert got.loc[2, "DET"] == pytest.approx(one.DET, rel=1e-15)  # CSV text round trip
    capsys.readouterr()
    assert main(["rqa", str(path), "-c", "a", "-E", "2,3", "--radius", "0.5,1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["E"], r["radius"]) for r in rows] == [(2, 0.5), (2, 1.0), (3, 0.5), (3, 1.0)]
    assert rows[3]["RR"] == pe.rqa(_col(X, 0), E=3, radius=1.0).RR
    assert main(["rqa", str(path), "--all-columns", "-E", "2,3", "--radius", "1"]) == 2
    assert main(["rqa", str(path), "--all-columns", "-E", "2", "--radius", "1", "--method",
                 "packed", "--out", str(out), "--overwrite"]) == 0
    assert pd.read_csv(out).equals(got)
    assert main(["rqa", str(path), "--radius", "1", "--out", str(out)]) == 2  # one series
    assert main(["rqa", str(path), "--all-columns", "--radius", "1", "--out",
                 str(out)]) == 2  # exists: refused, the file kept
    assert "--out" in capsys.readouterr().err


def test_batch_reused_buffers_are_zeroed_again():
    """A batch reuses one shape's histograms and carryovers from series to series
    (pyedmcl.rqa.dnr.reusing_buffers): a dense series followed by sparse ones, of
    lengths that come and go, still gives every row as its own pe.rqa call; and a
    pooled array comes back zeroed."""
    from clkernels import get_backend
    from pyedmcl.rqa import dnr

    rng = np.random.default_rng(3)
    dense = np.sin(np.arange(T) * 0.3)  # long lines: many counts in every histogram
    cols = [dense, rng.standard_normal(T), rng.standard_normal(T - 40), dense * 0.5,
            rng.standard_normal(T)]
    Xb = np.full((T, len(cols)), np.nan)
    for j, c in enumerate(cols):
        Xb[:c.size, j] = c
    df = pe.rqa_batch(Xb, E=2, tau=1, radius=0.3, method="series")
    for j, c in enumerate(cols):
        assert _equal_row(pe.rqa(c, E=2, tau=1, radius=0.3), df.iloc[j]), j
    be = get_backend(None)
    if be.info.runtime == "oclgrind":
        return
    with dnr.reusing_buffers():
        a = dnr._zeros(be, 37, np.uint32)
        be.fill(a, 5)
        dnr._give_back(be)
        b = dnr._zeros(be, 37, np.uint32)
        assert b is a and not be.to_host(b).any()
        assert dnr._zeros(be, 37, np.uint32) is not a  # taken: a new one


def test_batched_mixes_its_series_with_per_series_runs(device, monkeypatch):
    """On every CPU runtime: series of many lengths (word borders, a 2-point one), per-series
    radii or a rate, a series too long for the batch kernels' histograms and one float32
    cannot hold (both run by D&R, the latter in float64 with its warning, as pe.rqa), the
    others one launch each, in packs of two: every row equals pe.rqa's, and the frame equals
    method='series''s."""
    from pyedmcl._precision import PrecisionWarning
    from pyedmcl.rqa import batch_kernels as rqa_lines_batch

    rng = np.random.default_rng(5)
    lens = [200, 66, 65, 64, 3, 120, 180]
    Xm = np.full((200, len(lens)), np.nan)
    for j, t in enumerate(lens):
        Xm[:t, j] = rng.standard_normal(t).cumsum()
    Xm[:120, 5] = np.where(np.arange(120) % 2, 0.0, 1e6) + rng.random(120) * 1e-4  # merges
    monkeypatch.setattr(rqa_lines_batch, "max_points", lambda info: 150)  # 199: D&R
    monkeypatch.setattr(rqa_lines_batch, "CHUNK_BYTES", 12 * 100)  # one series a launch
    monkeypatch.setattr(rqa_lines_batch, "MAX_VALUES", 128 + 2 * 68)  # two series a pack
    from pyedmcl.rqa.batch import Runner

    alone = []
    run = Runner.run
    monkeypatch.setattr(Runner, "run", lambda self, p, **kw: alone.append(1) or run(self, p, **kw))
    for kw, keep in ((dict(radius=[1.0, 0.5, 2.0, 1.0, 1.0, 5e-5, 1.5]), range(7)),
                     (dict(recurrence_rate=0.07), [0, 1, 2, 3, 5, 6])):  # (2 points: no)
        Xk = Xm[:, list(keep)]
        alone.clear()
        with pytest.warns(PrecisionWarning):
            df = pe.rqa_batch(Xk, E=2, device=device, **kw)
        assert len(alone) == 3  # 0 and 6 (too long), 5 (float64)
        with pytest.warns(PrecisionWarning):
            assert df.equals(pe.rqa_batch(Xk, E=2, device=device, method="series", **kw))
        for i, j in enumerate(keep):
            one_kw = {k: (v[j] if isinstance(v, list) else v) for k, v in kw.items()}
            with pytest.warns(PrecisionWarning) if j == 5 else contextlib.nullcontext():
                one = pe.rqa(Xm[:lens[j], j], E=2, device=device, **one_kw)
            assert _equal_row(one, df.iloc[i]), (kw, j)


def test_batched_windows_equal_per_series_windows():
    """Every window of every series one series of the batched path: the frame of
    method='series' (pe.rqa(window=) per series: one band pass, or one run per window
    with a rate), quantized float32 data and mixed lengths included; errors name the
    series and the window."""
    rng = np.random.default_rng(8)
    Q = np.round(rng.standard_normal((140, 3)).cumsum(axis=0) * 3) / 10 + 5.0
    Q[100:, 1] = np.nan
    for kw in (dict(radius=[0.5, 0.4, 0.6], theiler=0, white_border=False),
               dict(recurrence_rate=0.1, tau=2)):
        got = pe.rqa_batch(Q, E=2, window=40, step=25, **kw)
        assert got.equals(pe.rqa_batch(Q, E=2, window=40, step=25, method="series", **kw))
    with pytest.raises(ValueError, match="X column 1: window=120 is out of range"):
        pe.rqa_batch(Q, E=2, radius=0.5, window=120)
    with pytest.raises(ValueError, match=r"X column 0, window \(0, 9\) of the embedded"):
        pe.rqa_batch(Q, E=2, recurrence_rate=0.001, window=10)


def test_batched_unchecked_and_unstandardised_as_the_single_calls():
    """Within exact.unchecked() (no float64 redo) and _precision.unstandardised() (no
    centring) the batched rows are still those of the single calls."""
    from pyedmcl._precision import unstandardised
    from pyedmcl.rqa.exact import unchecked

    rng = np.random.default_rng(9)
    Q = np.round(rng.standard_normal((120, 3)).cumsum(axis=0) * 3) / 10 + 7.0
    seen = []
    for ctxs in ((unchecked,), (unchecked, unstandardised)):
        with contextlib.ExitStack() as stack:
            for c in ctxs:
                stack.enter_context(c())
            got = pe.rqa_batch(Q, E=2, radius=0.5)
            assert got.equals(pe.rqa_batch(Q, E=2, radius=0.5, method="series")), ctxs
            seen.append(got)
    assert not seen[0].equals(seen[1])  # (float32 ties decided on other values)


def test_batched_pipeline_raises_the_readers_error(monkeypatch):
    """An error on the pipeline's reader thread (a device failure while a later pack is
    being prepared) reaches the caller as itself, and the call does not hang."""
    from pyedmcl.rqa import batch_kernels as B
    from pyedmcl.rqa import batch_lines as bl

    monkeypatch.setattr(bl, "PIPELINE_VALUES", 2 * 164)  # two series of 160 a pack
    real, seen = B.chunk_counts, []

    def failing(*args, **kw):
        seen.append(1)
        if len(seen) == 2:
            raise RuntimeError("device lost")
        yield from real(*args, **kw)

    monkeypatch.setattr(B, "chunk_counts", failing)
    X = np.random.default_rng(3).standard_normal((160, 7)).cumsum(axis=0)
    with pytest.raises(RuntimeError, match="device lost"):
        pe.rqa_batch(X, E=2, radius=1.0)
    assert 2 <= len(seen) <= 3  # at most the pack queued behind the failure was read
