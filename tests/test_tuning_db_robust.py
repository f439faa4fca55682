"""A tuning database cannot break a run (issue #20, item 5).

Wrong-typed, malformed and stale entries (user file or shipped) are skipped with
one warning naming the file and the key; a truncated file is skipped and rewritten
by the next save; saves are locked and atomic, so two tuners saving at once lose
nothing. Each case once crashed every later call or lost entries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import pyedmcl as pe
from clkernels import get_backend
from clkernels.tuning import UserDB, lookup, tune
from clkernels.tuning.database import entry_key, make_entry
from pyedmcl.kernels.knn import KNN
from pyedmcl.neighbors import auto as A

X = np.sin(np.arange(300) * 0.7) + 0.01 * np.arange(300)
SPEC = {"E": 3, "TAU": 1, "K": 4, "METRIC": "euclidean", "REAL": "float"}


def _db_warnings(w) -> list[str]:
    return [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)
            and "tuning" in str(x.message)]


def _put_knn_entries(info, params) -> UserDB:
    """Entries for the k-NN kernel at every size bucket Simplex on X may look up."""
    udb = UserDB(info)
    default = KNN.space.default(info)
    for size in (128, 256, 512):
        zb = KNN.size_bucket(size)
        udb.put(entry_key(KNN.name, KNN.spec_bucket(SPEC), zb),
                make_entry(KNN, info, KNN.spec_bucket(SPEC), zb, params, 1.0, default, 1.0))
    return udb


@pytest.mark.parametrize("bad", ["float", "bool", "str"])
def test_wrong_typed_entry_is_skipped_with_one_warning(bad):
    be = get_backend("pocl")
    p = dict(KNN.space.default(be.info))
    if bad == "float":
        p = {k: float(v) if isinstance(v, int) else v for k, v in p.items()}  # 32.0 for 32
    elif bad == "bool":
        p["FLAG"] = bool(p["FLAG"])
    else:
        p["WG"] = str(p["WG"])
    ref = pe.simplex(X, E=3, device="pocl").rho
    udb = _put_knn_entries(be.info, p)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r1 = pe.simplex(X, E=3, device="pocl")
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        r2 = pe.simplex(X, E=3, device="pocl")
    msgs = _db_warnings(w)
    assert msgs and all(str(udb.path) in m and "knn/" in m for m in msgs), msgs
    assert len(msgs) == len(set(msgs)) and not _db_warnings(w2)  # once per file + key
    assert r1.rho == r2.rho == ref  # the heuristic's result, as with no entry
    assert not KNN.space.valid(p, be.info)


def test_space_valid_checks_types():
    info = get_backend("pocl").info
    p = KNN.space.default(info)
    assert KNN.space.valid(p, info)
    assert not KNN.space.valid({**p, "WG": float(p["WG"])}, info)
    assert not KNN.space.valid({**p, "FLAG": bool(p["FLAG"])}, info)
    assert not KNN.space.valid([p], info)
    assert KNN.space.valid({**p, "WG": np.int64(p["WG"])}, info)  # numpy ints are ints


@pytest.mark.parametrize("bad", [
    {"times": {"ivf": "fast", "exact": None}},
    {"times": {"ivf": 1.0, "exact": 9.0}, "meets_bound": [1]},
    {"size": -5, "size_bucket": "nope", "spec": {"E": 0}, "spec_bucket": "E0"},
    {"params": {"BACKEND": "gone"}},
    {"version": 0},
])
def test_stale_or_malformed_knn_backend_entry_is_skipped(bad):
    be = get_backend("pocl")
    udb = UserDB(be.info)
    e = {"kernel": A.FAMILY, "version": A.MODEL_VERSION, "level": "device",
         "key": be.info.device_key, "spec_bucket": "E4", "size_bucket": "n256", "size": 256,
         "spec": {"E": 3}, "params": {"BACKEND": "ivf"}, "times": {"ivf": 1.0, "exact": 9.0},
         "recall": {"ivf": 0.9}, **bad}
    udb.put("knn_backend/E4/n256", e)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = A.choose(be.info, L=256, E=3)
        r = pe.simplex(X, E=3, device="pocl", knn_method="auto")
    assert c.source != "user"
    assert np.isfinite(r.rho)
    msgs = _db_warnings(w)
    assert len(msgs) == 1 and str(udb.path) in msgs[0] and "knn_backend/E4/n256" in msgs[0]


def test_malformed_recall_entries_are_skipped():
    info = get_backend("pocl").info
    udb = UserDB(info)
    udb.put("knn_backend_recall/E4/n256", {"recall": 0.5})  # one part short
    udb.put("knn_backend_recall/E4/n256/ivf", {"recall": "high"})
    udb.put("knn_backend_recall/E4/n256/hnsw", {"recall": 0.75})
    with pytest.warns(RuntimeWarning, match="knn_backend_recall/E4/n256"):
        assert A.user_recalls(info) == {("E4", "n256", "hnsw"): 0.75}


def test_truncated_db_is_skipped_then_rewritten(tmp_path):
    be = get_backend("pocl")
    udb = UserDB(be.info, tmp_path)
    udb.path.parent.mkdir(parents=True, exist_ok=True)
    udb.path.write_text('{"format": 1, "entries": {"knn/float-E')
    with pytest.warns(RuntimeWarning, match="corrupted tuning database"):
        ch = lookup(KNN, be.info, KNN.spec_bucket(SPEC), "n256", tmp_path)
    assert ch.source != "user"
    default = KNN.space.default(be.info)
    assert udb.put("k/a/n1", make_entry(KNN, be.info, "a", "n1", default, 1.0, default, 1.0))
    data = json.loads(udb.path.read_text())  # valid JSON again
    assert list(data["entries"]) == ["k/a/n1"]


def test_reused_entry_missing_its_times_is_retuned(tmp_path):
    """tune() reuses a stored winner only if the entry is complete (it once raised KeyError)."""
    from test_tuning import SMALL
    from test_tuning import SPEC as SSPEC

    be = get_backend("pocl")
    tune(SMALL, be, SSPEC, 256, repeats=1, user_root=tmp_path)
    udb = UserDB(be.info, tmp_path)
    key = entry_key(SMALL.name, SMALL.spec_bucket(SSPEC), SMALL.size_bucket(256))
    e = udb.get(key)
    del e["time_s"]
    udb.put(key, e)
    with pytest.warns(RuntimeWarning, match="time_s"):
        res = tune(SMALL, be, SSPEC, 256, repeats=1, user_root=tmp_path)
    assert not res.from_db and res.best_time_s > 0


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from clkernels.tuning.database import UserDB

    class Info:
        device_key = "pocl_fake-device"
        def as_dict(self):
            return {"name": "fake"}

    root, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    db = UserDB(Info(), root)
    for i in range(n):
        assert db.put(f"k/{tag}/n{i}", {"kernel": "k", "i": i, "pad": "x" * 2000})
""")


def test_two_processes_saving_at_once_lose_nothing(tmp_path):
    """Two tuners doing read-modify-write of one file: every entry of both survives."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    n = 60
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "db"), tag, str(n)],
                              stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = list((tmp_path / "db").glob("*.json"))
    assert len(files) == 1
    entries = json.loads(files[0].read_text())["entries"]
    assert len(entries) == 2 * n
    assert not list((tmp_path / "db").glob(".*.tmp"))  # no temporary files left behind
