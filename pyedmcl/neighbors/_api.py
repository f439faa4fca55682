"""Public neighbour-search names -> defining module (imported lazily by pyedmcl)."""

API = {
    "knn_search": "pyedmcl.neighbors",
    "measure_recall": "pyedmcl.neighbors.recall",
}

#: tunables this package adds to ``pyedmcl tune`` (:func:`pyedmcl.kernels.register_tunable`):
#: the back-end choice is tuned like a kernel, but it is the neighbours', not a kernel family
TUNABLES = {
    "knn_backend": "pyedmcl.neighbors.auto:KNN_BACKEND",
}
