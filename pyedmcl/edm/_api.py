"""Public EDM names -> the module that defines them (imported lazily by pyedmcl)."""

API = {
    "simplex": "pyedmcl.edm.simplex",
    "knn_table": "pyedmcl.primitives.knn",
    "ccm": "pyedmcl.edm.ccm",
    "embed_dimension": "pyedmcl.edm.scans",
    "predict_interval": "pyedmcl.edm.scans",
    "predict_exclusion_radius": "pyedmcl.edm.scans",
    "smap": "pyedmcl.edm.smap",
    "predict_nonlinear": "pyedmcl.edm.smap",
    "embed": "pyedmcl.embedding",
    "generate": "pyedmcl.edm.generate",
    "multiview": "pyedmcl.edm.multiview",
}
