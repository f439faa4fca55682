"""The autotuner and the tuning database, proven on the real pairwise-distance kernel.

No timing asserts: only structural facts (the default is among the timed
candidates, so the winner can never be slower than the default as measured;
entries are stored, reused, and stale/corrupt ones are ignored with a warning).
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from conftest import FAST_BUILD_CPU

from clkernels import get_backend
from clkernels.tuning import TuningSpace, UserDB, lookup, tune
from clkernels.tuning.database import entry_key
from pyedmcl.kernels.distance import PAIRWISE_DISTANCE, PairwiseDistanceKernel

SPEC = {"E": 5, "TAU": 1, "METRIC": "euclidean", "REAL": "float"}


class _SmallSpace(PairwiseDistanceKernel):
    """The real kernel with a narrower space, so tests stay quick."""

    space = TuningSpace(params={"WG_X": (8, 16, 32), "WG_Y": (1, 2), "RPI": (1, 4),
                                "USE_LOCAL": (0, 1)},
                        heuristic=lambda info: {"WG_X": 16, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0},
                        constraint=PAIRWISE_DISTANCE.space.constraint)


SMALL = _SmallSpace()


def test_tune_stores_and_reuses(device, tmp_path):
    be = get_backend(device)
    res = tune(SMALL, be, SPEC, 512, repeats=2, user_root=tmp_path)
    assert not res.from_db
    assert res.timed >= 2 and not res.rejected
    assert res.best_time_s <= res.default_time_s  # the default is one of the timed candidates
    assert SMALL.space.valid(res.best_params, be.info)
    again = tune(SMALL, be, SPEC, 512, user_root=tmp_path)
    assert again.from_db and again.best_params == res.best_params and again.timed == 0
    choice = lookup(SMALL, be.info, SMALL.spec_bucket(SPEC), SMALL.size_bucket(512), tmp_path)
    assert choice.source == "user" and choice.params == res.best_params
    # a nearby problem size of the same specialisation bucket reuses the entry
    near = lookup(SMALL, be.info, SMALL.spec_bucket({**SPEC, "E": 6}), SMALL.size_bucket(900), tmp_path)
    assert near.source == "user"
    # ... but not a size 64x away: tuned configurations do not transfer that far
    far = lookup(SMALL, be.info, SMALL.spec_bucket(SPEC), SMALL.size_bucket(512 * 64), tmp_path)
    assert far.source != "user"


def test_random_mode_is_time_boxed(tmp_path):
    be = get_backend("pocl")
    res = tune(SMALL, be, SPEC, 256, mode="random", budget_s=0.0, repeats=1, user_root=tmp_path)
    assert res.timed >= 1  # at least the reference always runs
    assert res.best_params == res.default_params or res.timed > 1


def test_tuning_resumes_from_partial(tmp_path, monkeypatch):
    be = get_backend("pocl")
    calls = {"n": 0}
    import clkernels.tuning.tuner as tuner_mod

    real = tuner_mod.time_config

    def flaky(case, backend, params, repeats, best_so_far=float("inf")):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(case, backend, params, repeats, best_so_far)

    monkeypatch.setattr(tuner_mod, "time_config", flaky)
    with pytest.raises(KeyboardInterrupt):
        tune(SMALL, be, SPEC, 256, repeats=1, user_root=tmp_path)
    partial = list((tmp_path / "partial").glob("*.json"))
    assert len(partial) == 1 and len(json.loads(partial[0].read_text())["done"]) == 3
    calls["n"] = 100
    res = tune(SMALL, be, SPEC, 256, repeats=1, user_root=tmp_path)
    n_cands = len(SMALL.space.candidates(be.info))
    assert res.timed == n_cands - 3  # the three already timed were not timed again
    assert not list((tmp_path / "partial").glob("*.json"))


def test_wrong_candidate_is_rejected(tmp_path):
    """A candidate whose output differs from the reference never wins."""
    be = get_backend("pocl")

    class Broken(_SmallSpace):
        def case(self, backend, spec, size):
            inner = super().case(backend, spec, size)

            class Case(type(inner)):
                def output(self_inner):
                    out = inner.output()
                    if self_inner.last["WG_X"] == 32:
                        out = out + 1.0
                    return out

                def run(self_inner, params):
                    self_inner.last = params
                    return inner.run(params)

            c = Case.__new__(Case)
            c.__dict__.update(inner.__dict__)
            return c

    res = tune(Broken(), be, SPEC, 256, repeats=1, user_root=tmp_path)
    assert res.best_params["WG_X"] != 32
    assert any(p["WG_X"] == 32 and "differs" in why for p, why in res.rejected)


def _write_entry(tmp_path, be, **changes):
    udb = UserDB(be.info, tmp_path)
    res = tune(SMALL, be, SPEC, 256, repeats=1, user_root=tmp_path)
    key = entry_key(SMALL.name, SMALL.spec_bucket(SPEC), SMALL.size_bucket(256))
    entry = udb.get(key)
    entry.update(changes)
    udb.put(key, entry)
    return res


@pytest.mark.parametrize("change", [{"version": 999}, {"driver": "0.0-old"},
                                    {"params": {"WG_X": 7, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0}}])
def test_stale_entry_ignored_with_warning(tmp_path, change):
    be = get_backend("pocl")
    _write_entry(tmp_path, be, **change)
    with pytest.warns(RuntimeWarning, match="ignoring"):
        ch = lookup(SMALL, be.info, SMALL.spec_bucket(SPEC), SMALL.size_bucket(256), tmp_path)
    assert ch.source != "user"
    # and tune() re-times instead of trusting it
    res = tune(SMALL, be, SPEC, 256, repeats=1, user_root=tmp_path)
    assert not res.from_db


def test_entry_stamped_with_a_legacy_template_hash_reads_as_version_1(tmp_path):
    """User entries written before versions existed carry the template's text hash; the
    hashes the template declares (``## legacy-hashes``) read as version 1, others are stale."""
    be = get_backend("pocl")
    legacy = sorted(SMALL.legacy_hashes)[0]
    assert SMALL.version == 1
    res = _write_entry(tmp_path, be, version=None, template_hash=legacy)
    ch = lookup(SMALL, be.info, SMALL.spec_bucket(SPEC), SMALL.size_bucket(256), tmp_path)
    assert ch.source == "user" and ch.params == res.best_params
    _write_entry(tmp_path, be, version=None, template_hash="0" * 16)
    with pytest.warns(RuntimeWarning, match="stale"):
        ch = lookup(SMALL, be.info, SMALL.spec_bucket(SPEC), SMALL.size_bucket(256), tmp_path)
    assert ch.source != "user"


def test_corrupted_db_is_ignored(tmp_path):
    be = get_backend("pocl")
    udb = UserDB(be.info, tmp_path)
    udb.path.parent.mkdir(parents=True, exist_ok=True)
    udb.path.write_text("{not json")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ch = lookup(PAIRWISE_DISTANCE, be.info, "float-E5-8", "n1024", tmp_path)
    assert ch.source in ("heuristic",) or ch.source.startswith("shipped")
    assert any("corrupted" in str(x.message) for x in w)
    # the kernel still runs with the fallback
    from pyedmcl.kernels.distance import pairwise_distances

    d = pairwise_distances(np.arange(20.0), E=2, device="pocl")
    assert d.shape == (19, 19)


def test_missing_entry_falls_back_to_heuristic(tmp_path):
    be = get_backend("pocl")
    ch = lookup(SMALL, be.info, "float-E9-16", "n64", tmp_path)
    assert ch.source == "heuristic" and SMALL.space.valid(ch.params, be.info)


def test_cli_tune_then_reads_db(tmp_path, monkeypatch, capsys):
    from pyedmcl.cli.main import main

    monkeypatch.setenv("PYEDMCL_TUNING_DIR", str(tmp_path))
    args = ["tune", "pairwise_distance", "--device", "pocl", "--quick", "--budget", "1",
            "--sizes", "256", "--E", "3", "-q"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "speedup" in first and "(from DB)" not in first
    assert main(args) == 0
    assert "(from DB)" in capsys.readouterr().out
    assert main(["tune", "nosuchkernel"]) == 2


def test_cli_tune_scan_E_sets_its_largest_E(tmp_path, monkeypatch):
    """``tune knn_scan --E 3`` tunes (and records) the scan of E = 1..3: its EMAX, not a
    stray ``E`` beside the default EMAX."""
    from clkernels.tuning.database import UserDB
    from pyedmcl.cli.main import main

    monkeypatch.setenv("PYEDMCL_TUNING_DIR", str(tmp_path))
    assert main(["tune", "knn_scan", "--device", "pocl", "--quick", "--budget", "1",
                 "--sizes", "128", "--E", "3", "-q"]) == 0
    entries = [e for e in UserDB(get_backend("pocl").info, tmp_path).load().values()
               if isinstance(e, dict) and e.get("kernel") == "knn_scan"]
    assert entries and all(e["spec"]["EMAX"] == 3 and "E" not in e["spec"] for e in entries)
    assert all(e["spec_bucket"].startswith("float-E3-4") for e in entries)


def test_merge_device_files_later_run_wins(tmp_path):
    """Per-family tuning runs of one device merge into one shipped file; a re-run replaces."""
    from clkernels.tuning.export import merge_device_files

    def ent(kernel, sb, t):
        return {"kernel": kernel, "spec_bucket": sb, "size_bucket": "n4096", "time_s": t}

    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "dev.json"
    a.write_text(json.dumps({"device": {"name": "X"}, "entries": [ent("knn", "E1", 1.0),
                                                                  ent("smap", "E1", 2.0)]}))
    b.write_text(json.dumps({"device": {"name": "X"}, "entries": [ent("knn", "E1", 0.5)]}))
    assert merge_device_files([a, b], out) == 2
    got = {e["kernel"]: e["time_s"] for e in json.loads(out.read_text())["entries"]}
    assert got == {"knn": 0.5, "smap": 2.0}
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"device": {"name": "X"}, "entries": [ent("smap", "E1", 3.0)]}))
    assert merge_device_files([c], out) == 2  # out's own entries kept, smap replaced
    got = {e["kernel"]: e["time_s"] for e in json.loads(out.read_text())["entries"]}
    assert got == {"knn": 0.5, "smap": 3.0}


def test_prune_stale_drops_only_entries_of_old_templates(tmp_path):
    from pyedmcl.cli.tune_cmd import prune_stale

    good = {"kernel": "pairwise_distance", "version": PAIRWISE_DISTANCE.version}
    old = {"kernel": "pairwise_distance", "version": 0}
    gone = {"kernel": "no_such_family", "version": 1}
    f = tmp_path / "device-x.json"
    f.write_text(json.dumps({"format": 1, "device": {"name": "X"}, "entries": [good, old, gone]}))
    assert prune_stale([str(f)]) == [(str(f), 1, 2)]
    data = json.loads(f.read_text())
    assert data["entries"] == [good] and data["device"] == {"name": "X"}


def test_hopeless_candidate_timed_once():
    """A candidate whose first timed run is over HOPELESS x the best so far is not timed
    again (it cannot win); others get every repeat and their minimum."""
    import clkernels.tuning.tuner as tuner_mod

    class Case:
        def __init__(self, seconds):
            self.seconds, self.runs = list(seconds), 0

        def run(self, params):
            self.runs += 1
            return [self.seconds[min(self.runs - 1, len(self.seconds) - 1)]]

    class Backend:
        def wait(self, ev):
            pass

        def event_seconds(self, ev):
            return ev

    slow = Case([9.0, 5.0, 5.0, 5.0])  # warm-up, then 5 s runs against a best of 1 s
    assert tuner_mod.time_config(slow, Backend(), {}, 3, best_so_far=1.0) == 5.0
    assert slow.runs == 2  # the warm-up and one timed run
    close = Case([9.0, 2.5, 2.0, 2.2])  # within 3x: every repeat, their minimum
    assert tuner_mod.time_config(close, Backend(), {}, 3, best_so_far=1.0) == 2.0
    assert close.runs == 4
    first = Case([9.0, 5.0, 4.0, 6.0])  # nothing timed yet: every repeat
    assert tuner_mod.time_config(first, Backend(), {}, 3) == 4.0 and first.runs == 4


def test_random_order_is_a_lazy_permutation(monkeypatch, tmp_path):
    """Random mode draws candidates lazily in a seeded order: every candidate once (a
    permutation of :meth:`TuningSpace.candidates`), another order for another seed, and a
    time-boxed tune never enumerates the space (rqa_lines' has tens of millions of
    points, whose enumeration took a minute of ``tune --quick``)."""
    from pyedmcl.kernels.rqa_lines import RQA_LINES

    be = get_backend(FAST_BUILD_CPU)
    keys = lambda ps: [json.dumps(p, sort_keys=True) for p in ps]  # noqa: E731
    every = keys(SMALL.space.candidates(be.info))
    orders = [keys(SMALL.space.shuffled(be.info, seed)) for seed in (0, 1)]
    assert all(sorted(o) == sorted(every) for o in orders) and orders[0] != orders[1]
    assert [SMALL.space.at(i) for i in range(SMALL.space.size())] == [
        dict(zip(SMALL.space.params, v, strict=True)) for v in itertools.product(
            *SMALL.space.params.values())]
    assert RQA_LINES.space.size() > 10**7
    first = list(itertools.islice(RQA_LINES.space.shuffled(be.info, 0), 5))
    assert all(RQA_LINES.space.valid(p, be.info) for p in first)
    monkeypatch.setattr(type(SMALL.space), "candidates",
                        lambda *a: pytest.fail("random mode enumerated the space"))
    res = tune(SMALL, be, SPEC, 256, mode="random", budget_s=0.0, repeats=1, user_root=tmp_path)
    assert res.timed >= 1
