"""Restamping tuning entries across a template edit (clkernels.tuning.restamp).

An entry moves to the current template hash only when every configuration it
holds renders byte-identical source from the old text and the current one.
"""
from clkernels.templates import template_hash, template_source, text_hash
from clkernels.tuning.restamp import restamp_entries

SPEC = {"E": 3, "TAU": 1, "K": 4, "METRIC": "euclidean", "REAL": "float"}
OLD_PARAMS = {"VARIANT": "vec", "WG": 8, "TILE": 32, "QB": 8, "EA": 0, "INS": "reg", "FLAG": 1,
              "SPLIT": 1}


def _entry(old_text: str) -> dict:
    h = text_hash(old_text)
    key = '{"EA": 0, "FLAG": 1, "INS": "reg", "QB": 8, "SPLIT": 1, "TILE": 32, "VARIANT": "vec", "WG": 8}'
    return {"kernel": "knn", "template_hash": h, "spec": SPEC, "params": dict(OLD_PARAMS),
            "default_params": dict(OLD_PARAMS), "times": {key: 1.0}}


def test_restamp_same_code_gets_new_hash_and_defaults():
    # the old text: the current one without its new parameters, plus a Mako comment
    old = template_source("knn.cl.mako").replace(
        "## params: E, TAU, K, METRIC, REAL, WG, TILE, VARIANT, QB, EA, INS, FLAG, SPLIT, QQ, CB, FMA, ORD",
        "## params: E, TAU, K, METRIC, REAL, WG, TILE, VARIANT, QB, EA, INS, FLAG, SPLIT\n## old")
    assert old != template_source("knn.cl.mako")
    e = _entry(old)
    done, stale = restamp_entries([e], "knn.cl.mako", {"knn"}, old, {"QQ": 1, "CB": 0},
                                  {"FMA": 0, "ORD": 0})
    assert (done, stale) == (1, 0)
    assert e["template_hash"] == template_hash("knn.cl.mako")
    assert e["params"]["QQ"] == 1 and e["params"]["CB"] == 0
    # a new problem parameter is recorded in the spec, never in the tuned params
    assert e["spec"]["FMA"] == 0 and "FMA" not in e["params"] and e["spec"]["ORD"] == 0
    assert e["default_params"]["CB"] == 0
    assert all('"CB": 0' in k and '"QQ": 1' in k for k in e["times"])


def test_restamp_changed_code_stays_stale():
    old = template_source("knn.cl.mako").replace("2 * (l > p ? l - p : p - l) + (l > p)",
                                                 "2 * (l > p ? l - p : p - l) + (l < p)")
    assert old != template_source("knn.cl.mako")
    e = _entry(old)
    before = dict(e)
    done, stale = restamp_entries([e], "knn.cl.mako", {"knn"}, old, {"QQ": 1, "CB": 0},
                                  {"FMA": 0, "ORD": 0})
    assert (done, stale) == (0, 1)
    assert e == before


def test_restamp_new_problem_parameter_must_render_the_old_code():
    """FMA=1 (fma() in the distance) is not the old code: entries stay stale."""
    # the old text: the current one before FMA was passed to the metric
    old = template_source("knn.cl.mako").replace(", FMA)", ")").replace(", QQ, CB, FMA, ORD\n",
                                                                         ", QQ, CB, ORD\n")
    assert old != template_source("knn.cl.mako")
    e = _entry(old)
    done, stale = restamp_entries([e], "knn.cl.mako", {"knn"}, old, {"QQ": 1, "CB": 0},
                                  {"FMA": 1, "ORD": 0})
    assert (done, stale) == (0, 1)
    assert restamp_entries([_entry(old)], "knn.cl.mako", {"knn"}, old, {"QQ": 1, "CB": 0},
                           {"FMA": 0, "ORD": 0}) == (1, 0)
