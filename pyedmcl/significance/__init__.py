"""Significance built on the analyses: the false-discovery-rate-controlled causal network
of an all-to-all map with surrogates (:mod:`.network`, reading an in-memory result or a
store of :mod:`pyedmcl.xmap`).

The null-model code an analysis runs for its own ``surrogates=`` option lives next to
it (CCM's :mod:`pyedmcl.edm.ccm_null`, the all-to-all map's :mod:`pyedmcl.xmap.xmap_null`,
CCM's convergence test :mod:`pyedmcl.edm.convergence`); what several of them share sits
below every analysis (:mod:`pyedmcl.primitives.surrogates`, :mod:`pyedmcl.primitives.stats`).

Guide: docs/significance.md.
"""
