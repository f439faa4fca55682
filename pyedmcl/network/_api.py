"""Public causal-network names -> the module that defines them (imported lazily by pyedmcl)."""

API = {
    "causal_network": "pyedmcl.network.pipeline",
    "partial_cross_map": "pyedmcl.network.partial",
}
