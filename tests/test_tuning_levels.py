"""The shipped tuning database: the fallback chain and the derived defaults.

An unknown device (Oclgrind, a SYCL view of a device, a new GPU) must fall back
device -> architecture -> vendor+type -> global -> heuristic, and still compute
the right answer with whatever it gets.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import clkernels.tuning.database as db
from clkernels import get_backend
from clkernels.devices import list_devices
from clkernels.tuning import lookup
from clkernels.tuning.export import derive_defaults, export_device
from pyedmcl.embedding import distance_matrix_reference
from pyedmcl.kernels.distance import PAIRWISE_DISTANCE, pairwise_distances

K = PAIRWISE_DISTANCE
SPEC = {"E": 5, "TAU": 1, "METRIC": "euclidean", "REAL": "float"}
SB, ZB = K.spec_bucket(SPEC), K.size_bucket(2000)
P = {lvl: {"WG_X": wx, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0}
     for lvl, wx in (("device", 8), ("arch", 16), ("vendor_type", 32), ("global", 64))}


def _entries(info, levels):
    keys = {"device": info.device_key, "arch": info.arch_key, "vendor_type": info.vendor_type_key,
            "global": "*"}
    return [{"kernel": K.name, "version": K.version, "level": lvl, "key": keys[lvl],
             "spec_bucket": SB, "size_bucket": ZB, "params": P[lvl],
             **({"device_type": info.device_type} if lvl == "global" else {})} for lvl in levels]


def test_global_default_is_per_device_type(monkeypatch, tmp_path):
    """A global default derived from GPUs is not used on a CPU (nor one from CPUs on a
    GPU): defaults.json keeps one per device type, and the lookup checks it."""
    from clkernels.tuning.export import derive_defaults
    be = get_backend("pocl")
    ents = _entries(be.info, ("global",))
    ents[0]["device_type"] = "gpu"
    monkeypatch.setattr(db, "_shipped", ents)
    monkeypatch.setattr(db, "_lookup_cache", {})
    assert lookup(K, be.info, SB, ZB, tmp_path).source == "heuristic"
    dev = [{"kernel": "k", "version": 1, "level": "device", "spec_bucket": "s",
            "size_bucket": "n1024", "arch_key": f"rt{i}|{t}|a", "vendor_type_key": f"rt{i}|{t}",
            "device_name": f"d{i}", "times": {'{"A": 1}': 1.0 + i, '{"A": 2}': 2.0 - i * 0.9}}
           for i, t in enumerate(("cpu", "gpu"))]
    glob = {e["device_type"]: e["params"] for e in derive_defaults(dev) if e["level"] == "global"}
    assert glob == {"cpu": {"A": 1}, "gpu": {"A": 2}}


@pytest.mark.parametrize("levels,expect", [
    (("device", "arch", "vendor_type", "global"), "device"),
    (("arch", "vendor_type", "global"), "arch"),
    (("vendor_type", "global"), "vendor_type"),
    (("global",), "global"),
    ((), "heuristic"),
])
def test_fallback_chain(monkeypatch, tmp_path, levels, expect):
    be = get_backend("pocl")
    monkeypatch.setattr(db, "_shipped", _entries(be.info, levels))
    monkeypatch.setattr(db, "_lookup_cache", {})
    ch = lookup(K, be.info, SB, ZB, tmp_path)
    assert ch.source == ("heuristic" if expect == "heuristic" else f"shipped:{expect}")
    if expect != "heuristic":
        assert ch.params == P[expect]
    x = np.sin(np.arange(200) * 0.2)
    d = pairwise_distances(x, E=5, squared=True, device=be, params=ch.params)
    np.testing.assert_allclose(d, distance_matrix_reference(x, x, 5, 1), rtol=1e-5, atol=1e-5)


def test_unknown_device_uses_global_and_runs(monkeypatch, tmp_path):
    """Oclgrind has no entry of its own anywhere: it gets the global default."""
    ocl = [d for d in list_devices() if d.runtime == "oclgrind"]
    if not ocl:
        pytest.skip("Oclgrind not installed")
    pocl = get_backend("pocl").info
    ents = _entries(pocl, ("device", "arch", "vendor_type", "global"))
    ents[-1]["device_type"] = ocl[0].device_type  # the global default of its device type
    monkeypatch.setattr(db, "_shipped", ents)
    monkeypatch.setattr(db, "_lookup_cache", {})
    ch = lookup(K, ocl[0], SB, ZB, tmp_path)
    assert ch.source == "shipped:global" and ch.params == P["global"]


def test_shipped_entry_invalid_on_device_is_skipped(monkeypatch, tmp_path):
    be = get_backend("pocl")
    ents = _entries(be.info, ("device", "global"))
    ents[0]["params"] = {"WG_X": 4096, "WG_Y": 8, "RPI": 1, "USE_LOCAL": 0}  # over the WG limit
    monkeypatch.setattr(db, "_shipped", ents)
    monkeypatch.setattr(db, "_lookup_cache", {})
    with pytest.warns(RuntimeWarning, match="not valid"):
        ch = lookup(K, be.info, SB, ZB, tmp_path)
    assert ch.source == "shipped:global"


def test_derive_defaults_minimises_sum_of_time_over_best():
    a, b, c = (json.dumps(p, sort_keys=True) for p in (P["device"], P["arch"], P["global"]))
    dev1 = {"times": {a: 1.0, b: 1.1, c: 3.0}, "arch_key": "pocl|cpu|x", "vendor_type_key": "pocl|cpu"}
    dev2 = {"times": {a: 5.0, b: 2.2, c: 2.0}, "arch_key": "intel|cpu|y", "vendor_type_key": "intel|cpu"}
    base = {"kernel": K.name, "version": 1, "spec_bucket": SB, "size_bucket": ZB,
            "level": "device"}
    out = derive_defaults([{**base, **dev1, "device_name": "d1"}, {**base, **dev2, "device_name": "d2"}])
    glob = [e for e in out if e["level"] == "global"]
    assert len(glob) == 1
    # sums of time/best: a = 1 + 2.5 = 3.5, b = 1.1 + 1.1 = 2.2, c = 3 + 1 = 4 -> b
    assert glob[0]["params"] == P["arch"]
    vt = {e["key"]: e["params"] for e in out if e["level"] == "vendor_type"}
    assert vt == {"pocl|cpu": P["device"], "intel|cpu": P["global"]}


def test_export_device_entries(tmp_path):
    from clkernels.tuning import tune

    be = get_backend("pocl")
    tune(K, be, SPEC, 128, mode="random", budget_s=0.0, repeats=1, user_root=tmp_path / "u")
    out = tmp_path / "ship.json"
    n = export_device(be.info, out, tmp_path / "u")
    data = json.loads(out.read_text())
    assert n == 1 and data["entries"][0]["level"] == "device"
    assert data["entries"][0]["key"] == be.info.device_key and data["entries"][0]["times"]
