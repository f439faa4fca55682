"""Public significance names -> the module that defines them (imported lazily by pyedmcl)."""

API = {
    "surrogates": "pyedmcl.primitives.surrogates",
    "kendall_tau": "pyedmcl.primitives.stats",
}
