"""File readers (every format, every documented error) and the sample-data models."""

from __future__ import annotations

import io

import numpy as np
import pytest

from pyedmcl.data import (
    coupled_logistic,
    logistic_map,
    logistic_network,
    lorenz63,
    noisy_sine,
    roessler,
)
from pyedmcl.io import read_table


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return rng.standard_normal((50, 3))


def test_csv_with_header_and_selection(tmp_path, frame):
    p = tmp_path / "d.csv"
    p.write_text("time,a,b\n" + "\n".join(f"{i},{r[0]},{r[1]}" for i, r in enumerate(frame)))
    t = read_table(p)
    assert t.names == ["a", "b"] and t.data.shape == (50, 2)  # "time" is the time axis
    np.testing.assert_array_equal(t.time, np.arange(50))
    sel = read_table(p, ["b", "a"])
    np.testing.assert_allclose(sel.data, frame[:, [1, 0]])
    with pytest.raises(ValueError, match="column 'zz' not found.*available: a, b"):
        read_table(p, ["zz"])


def test_npy_h5_zarr_roundtrip(tmp_path, frame):
    np.save(tmp_path / "d.npy", frame)
    np.testing.assert_array_equal(read_table(tmp_path / "d.npy").data, frame)
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["x"] = frame
    np.testing.assert_array_equal(read_table(f"{tmp_path}/d.h5:x").data, frame)
    np.testing.assert_array_equal(read_table(tmp_path / "d.h5").data, frame)
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(str(tmp_path / "d.zarr"), mode="w", shape=frame.shape, dtype="f8")
    z[...] = frame
    np.testing.assert_array_equal(read_table(tmp_path / "d.zarr").data, frame)


def test_stdin_csv(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("x,y\n1,2\n3,4\n"))
    t = read_table("-", ["y"])
    np.testing.assert_array_equal(t.data[:, 0], [2.0, 4.0])


@pytest.mark.parametrize("content,match", [
    ("", "empty"),
    ("a,b\n", "empty"),
    ("a,b\nu,x\nv,y\n", "no numeric column"),
])
def test_bad_csv(tmp_path, content, match):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(ValueError, match=match):
        read_table(p)


def test_text_columns_are_set_aside_until_selected(tmp_path):
    p = tmp_path / "mixed.csv"
    p.write_text("a,label,b\n1,x,3\n2,y,4\n")
    t = read_table(p)
    assert t.names == ["a", "b"] and t.text_columns == ("label",)
    with pytest.raises(ValueError, match="'label' .* is not numeric"):
        read_table(p, ["label"])


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    (tmp_path / "x.parquet").write_text("1")
    with pytest.raises(ValueError, match="unsupported extension"):
        read_table(tmp_path / "x.parquet")
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="shape"):
        read_table(tmp_path / "cube.npy")


def test_models_are_deterministic_and_bounded():
    a, b = coupled_logistic(300), coupled_logistic(300)
    np.testing.assert_array_equal(a, b)
    assert np.all((a > 0) & (a < 1))
    lz = lorenz63(400)
    assert lz.shape == (400, 3) and np.all(np.abs(lz[:, 0]) < 25) and lz[:, 0].std() > 3
    lm = logistic_map(500)
    assert np.all((lm >= 0) & (lm <= 1))
    assert noisy_sine(100).shape == (100,)
    X, A = logistic_network(6, 300)
    assert X.shape == (300, 6) and np.isfinite(X).all() and A.shape == (6, 6)
    assert np.all(np.diag(A) == 0)
    r = roessler(3000)
    np.testing.assert_array_equal(r, roessler(3000))
    # on the attractor (x in about [-9, 12]), oscillating with period ~6 time units
    # (60 samples of dt 0.05 x 2): about 50 upward zero crossings in 3,000 samples
    assert r.shape == (3000,) and -12 < r.min() < -5 and 8 < r.max() < 14
    ups = np.count_nonzero((r[:-1] < 0) & (r[1:] >= 0))
    assert 40 <= ups <= 60


def test_pandas_row_index_column_is_not_a_series(tmp_path):
    """``DataFrame.to_csv()`` writes its row index as an unnamed first column: it is the
    time axis, not a series (xmap mapped it as series 0, rho 0.999999 with itself). An
    unnamed column that is not increasing integers stays a series."""
    import pandas as pd

    df = pd.DataFrame({"x": np.sin(np.arange(30) * 0.4), "y": np.cos(np.arange(30) * 0.3)})
    df.to_csv(tmp_path / "a.csv")
    t = read_table(tmp_path / "a.csv")
    assert t.names == ["x", "y"] and t.data.shape == (30, 2)
    np.testing.assert_array_equal(np.asarray(t.time), np.arange(30))
    df.insert(0, "", np.arange(30)[::-1])  # unnamed but decreasing: data
    df.to_csv(tmp_path / "b.csv", index=False)
    assert read_table(tmp_path / "b.csv").data.shape == (30, 3)


def test_repeated_header_names_are_not_guessed(tmp_path):
    """A name that appears twice in a CSV header is refused when named (pandas would read
    the first as that name and the second as x.1); the other columns and the mangled name
    itself still read."""
    p = tmp_path / "dup.csv"
    p.write_text("t,x,x,y\n0,1,5,9\n1,2,6,8\n2,3,7,7\n")
    t = read_table(p)
    assert t.repeated == ("x",)
    with pytest.raises(ValueError, match="column 'x' appears more than once in the header"):
        read_table(p, ["x"])
    np.testing.assert_array_equal(read_table(p, ["x.1", "y"]).data, [[5, 9], [6, 8], [7, 7]])
    ok = tmp_path / "ok.csv"
    ok.write_text("t,x,y\n0,1,2\n1,2,3\n")
    assert read_table(ok).repeated == ()
