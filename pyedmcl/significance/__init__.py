"""Significance of cross-map skill: surrogate series, surrogate nulls of CCM and of the
all-to-all map, convergence tests, and the false-discovery-rate-controlled causal network.

* :mod:`.surrogates` -- surrogate series (shuffle, Ebisuzaki phase randomisation,
  pyEDM's seasonal, twin surrogates), NumPy only, reproducible by seed;
* :mod:`.ccm_null` -- CCM's surrogate null on the device (one k-NN table per sampled
  library, all surrogate targets cross-mapped from it);
* :mod:`.xmap_null` -- the all-to-all map's null (surrogates as extra target series of
  the unchanged engine);
* :mod:`.stats` -- p-values, null summaries, Kendall's tau with its normal-approximation
  p-value, the convergence fit, Benjamini--Hochberg;
* :mod:`.convergence` -- CCM's convergence test (``CCMResult.convergence``);
* :mod:`.network` -- :func:`causal_network` from an all-to-all map with surrogates.

Guide: docs/significance.md.
"""
