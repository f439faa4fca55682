"""Direct causal links among many series: time-delayed cross mapping (lag scans),
partial cross mapping, and the pipeline of :func:`pyedmcl.causal_network` on a data
matrix (pairwise maps with surrogates, FDR, lag pruning, partial pruning).

* ``pe.ccm(..., Tp=[...])`` (:func:`pyedmcl.edm.ccm.direction_lags`) -- CCM at many
  lags from one neighbour order per direction;
* :mod:`.crossmap` -- full-library cross-map predictions of many targets and lags from
  one library's neighbour order (what the network's scans and partial maps need);
* :mod:`.partial` -- partial cross mapping (Leng et al. 2020) with a surrogate null;
* :mod:`.pipeline` -- the network on a data matrix.

Guide: docs/causal_network.md.
"""
