"""`pyedmcl demo` (the README's main job) writes a complete, plausible report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CPU_DEVICE

pytest.importorskip("matplotlib")


def test_demo_report(tmp_path):
    from pyedmcl.cli.main import main

    out = tmp_path / "report"
    assert main(["demo", "-o", str(out), "-q", "--device", CPU_DEVICE]) == 0
    for name in ("index.html", "results.json", "embed_dimension.png", "predict_interval.png",
                 "predict_nonlinear.png", "ccm.png", "xmap.png", "network.png",
                 "recurrence_plot.png", "rqa_vs_radius.png"):
        f = out / name
        assert f.exists() and f.stat().st_size > 200, name
    res = json.loads((out / "results.json").read_text())
    assert res["device"]["runtime"] == CPU_DEVICE and "pyedmcl" in res["versions"]
    sec = res["sections"]
    assert set(sec) >= {"embed_dimension", "predict_interval", "predict_nonlinear", "ccm", "xmap", "rqa"}
    # Lorenz-63 is low-dimensional and predictable: high skill at the best E.
    assert 1 <= sec["embed_dimension"]["best_E"] <= 10 and max(sec["embed_dimension"]["rho"]) > 0.9
    # Skill falls with the prediction horizon on a chaotic system.
    tp_rho = sec["predict_interval"]["rho"]
    assert tp_rho[0] > tp_rho[-1]
    # The known causal direction wins: x drives y, so y's manifold cross-maps x better,
    # and CCM skill converges (grows with library size).
    ccm = sec["ccm"]
    assert ccm["detected_driver"] == ccm["expected_driver"] == "x"
    assert ccm["rho_y_xmap_x"][-1] > ccm["rho_y_xmap_x"][0]
    rho = np.array(sec["xmap"]["rho"])
    assert rho.shape == (8, 8) and np.all(np.isfinite(rho))
    net = sec["network"]  # the chain with a fork: most true links, few false ones
    assert net["true_found"] >= 2 and net["false_found"] <= 1
    assert net["pairwise_edges"] > net["true_found"] + net["false_found"]
    assert "network.png" in (out / "index.html").read_text()
    m = sec["rqa"]["measures"]
    assert abs(m["RR"] - 0.05) < 0.01 and 0 < m["DET"] <= 1 and m["L_max"] >= 2
    # RQA against the radius: one row per radius; the recurrence rate grows with it
    th = sec["rqa_threshold"]
    assert len(th["radius"]) == len(th["RR"]) == len(th["RTE"]) >= 4
    assert np.all(np.diff(th["radius"]) > 0) and np.all(np.diff(th["RR"]) > 0)
    assert all(0 <= v <= 1 for v in th["RTE"])
    html = (out / "index.html").read_text()
    assert "ccm.png" in html and "results.json" in html and "rqa_vs_radius.png" in html
    # built aside and renamed into place (no temporaries left), marked as pyedmcl's
    assert json.loads((out / ".pyedmcl-owned").read_text())["kind"] == "demo-report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no lock file left
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
