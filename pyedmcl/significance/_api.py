"""Public significance names -> the module that defines them (imported lazily by pyedmcl)."""

API = {
    "surrogates": "pyedmcl.significance.surrogates",
    "causal_network": "pyedmcl.network.pipeline",
    "kendall_tau": "pyedmcl.significance.stats",
    "partial_cross_map": "pyedmcl.network.partial",
}
