"""``auto`` back-end selection: user tuning DB, shipped model, heuristic, tuner family.

The tests run with an isolated tuning directory (conftest), so the user DB is
empty unless a test writes it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import CPU_DEVICE

from clkernels import get_backend
from clkernels.tuning import tune
from clkernels.tuning.database import UserDB, shipped_entries
from pyedmcl.neighbors import BACKENDS, resolve_backend
from pyedmcl.neighbors import auto as A

pytest.importorskip("faiss")
pytest.importorskip("scipy")


def _entry(info, E, L, best, times=None, recall=None):
    return {"kernel": A.FAMILY, "version": A.MODEL_VERSION, "level": "device",
            "key": info.device_key, "spec_bucket": A.e_bucket(E), "size_bucket": f"n{L}",
            "size": L, "spec": {"E": E}, "params": {"BACKEND": best}, "times": times or {},
            "recall": recall or {}}


def test_user_db_entry_drives_the_choice():
    info = get_backend(CPU_DEVICE).info
    db = UserDB(info)
    db.put("knn_backend/E32/n65536", _entry(info, 20, 65536, "hnsw", recall={"hnsw": 0.97}))
    db.put("knn_backend/E1/n1024", _entry(info, 1, 1024, "exact"))
    c = A.choose(info, L=60000, E=20)
    assert (c.backend, c.source, c.expected_recall) == ("hnsw", "user", 0.97)
    assert A.choose(info, L=900, E=1).backend == "exact"
    # nearest entry in (log2 L, log2 E): E=16 is closer to the E=20 entry
    assert A.choose(info, L=65536, E=16).backend == "hnsw"


def test_unavailable_choice_falls_back_to_fastest_installed(monkeypatch):
    info = get_backend(CPU_DEVICE).info
    UserDB(info).put("knn_backend/E32/n65536", _entry(
        info, 20, 65536, "hnsw", times={"hnsw": 1.0, "ivf": 2.0, "kdtree": 3.0, "exact": 9.0}))
    monkeypatch.setattr(A, "available", lambda name: name in ("exact", "kdtree"))
    assert A.choose(info, L=65536, E=20).backend == "kdtree"


@pytest.mark.parametrize("kd, want", [(1.10, "kdtree"), (1.15, "kdtree"), (1.30, "ivf")])
def test_approximate_winner_must_be_clearly_faster(kd, want):
    """An IVF/HNSW winner gives way to an exact back-end timed within EXACT_MARGIN (1.15)
    of it: same speed within run-to-run noise, recall 1."""
    info = get_backend(CPU_DEVICE).info
    UserDB(info).put("knn_backend/E32/n65536", _entry(
        info, 20, 65536, "ivf", times={"ivf": 1.0, "kdtree": kd, "exact": 5.0, "hnsw": 1.5}))
    c = A.choose(info, L=65536, E=20)
    assert c.backend == want
    assert c.expected_recall == 1.0 or want == "ivf"


def test_shipped_model_and_heuristic():
    ours = [e for e in shipped_entries() if e.get("kernel") == A.FAMILY]
    assert ours, "tuning/knn_backend_default.json must ship knn_backend entries"
    assert all(e["params"]["BACKEND"] in BACKENDS and e["version"] == A.MODEL_VERSION
               for e in ours)
    cpu = get_backend(CPU_DEVICE).info
    c = A.choose(cpu, L=50000, E=20)
    assert c.source.startswith("shipped:") and c.backend in BACKENDS
    # a GPU with no entries: the heuristic picks the exact kernel
    gpu = dataclasses.replace(cpu, device_type="gpu", runtime="nvidia", name="Fake GPU 9000",
                              normalised_name="fake-gpu-9000")
    c = A.choose(gpu, L=1 << 20, E=20)
    assert (c.backend, c.source) == ("exact", "heuristic")


def test_resolve_backend_reports_choice_and_options():
    be = get_backend(CPU_DEVICE)
    nb = resolve_backend("auto", be, L=4096, E=20, options={"hnsw": {"ef_search": 99},
                                                            "ivf": {"nprobe": 3}})
    assert nb.info.requested == "auto" and nb.info.source != "requested"
    if nb.name == "hnsw":
        assert nb.options["ef_search"] == 99
    nb = resolve_backend("ivf", be, L=4096, E=20, options={"nprobe": 2, "nlist": 16})
    assert nb.options["nprobe"] == 2 and nb.info.backend == "ivf"


def test_tuner_family_stores_winner_and_recalls():
    be = get_backend(CPU_DEVICE)
    res = tune(A.KNN_BACKEND, be, {"E": 2}, 512, repeats=1)
    assert res.best_params["BACKEND"] in BACKENDS
    c = A.choose(be.info, L=512, E=2)
    assert c.source == "user" and c.backend == res.best_params["BACKEND"]
    rec = A.user_recalls(be.info)
    assert set(b for (_, _, b) in rec) == set(BACKENDS)
    assert all(0.9 <= r <= 1.0 for r in rec.values())
    assert rec[("E2", "n512", "exact")] == 1.0 and rec[("E2", "n512", "kdtree")] == 1.0
    assert np.isfinite(c.expected_recall)
