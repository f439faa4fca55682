"""The quick tuning set of ``pyedmcl tune --quick`` and what it costs (shared by the tune
command and the first-use offer, which must not import the CLI's entry module)."""

from __future__ import annotations

#: seconds per case of ``tune --quick`` (no kernel: the quick set)
FIRST_USE_BUDGET_S = 2.0
#: ``tune --quick`` with no kernel: (family, index into its default_specs) of the cases
#: most workloads run -- Simplex/CCM k-NN at E=3 and its lookup, the embedding scan,
#: the all-to-all map's k-NN, skill and scan, RQA's line kernel -- at the family's quick size
QUICK_SET = (("knn", 1), ("lookup", 1), ("knn_scan", 0), ("xmap_knn", 1), ("xmap_skill", 1),
             ("xmap_scan", 0), ("rqa_lines", 0))


#: seconds per case for kernel builds on a first run (measured: the quick set took 21 s
#: on a 2-core AMD EPYC with Intel's runtime and an empty build cache; the allowance
#: leaves room for a loaded or slower machine)
BUILD_ALLOWANCE_S = 2.0


def quick_set_seconds() -> float:
    """Roughly how long ``pyedmcl tune --quick`` takes on a first run (budget and builds)."""
    return (FIRST_USE_BUDGET_S + BUILD_ALLOWANCE_S) * len(QUICK_SET)
