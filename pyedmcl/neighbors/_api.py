"""Public neighbour-search names -> defining module (imported lazily by pyedmcl)."""

API = {
    "knn_search": "pyedmcl.neighbors",
    "measure_recall": "pyedmcl.neighbors.recall",
}
