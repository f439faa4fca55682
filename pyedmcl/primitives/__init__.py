"""The primitives every analysis builds on, below them all (docs/design.md, "Layers").

* :mod:`.ranges` -- kernel points, library/prediction ranges, exclusion radius, limits;
* :mod:`.knn` -- the batched k-NN tables on the device (``pe.knn_table``);
* :mod:`.lookup` -- predictions and skill from a k-NN table (simplex weights, CCM shifts);
* :mod:`.scan_fused` -- the fused k-NN + lookup scan over many embedding dimensions;
* :mod:`.surrogates` -- surrogate series (NumPy, reproducible by seed: ``pe.surrogates``);
* :mod:`.stats` -- p-values, null summaries, Kendall's tau, the convergence fit,
  Benjamini--Hochberg.

They import the kernel families (:mod:`pyedmcl.kernels`) and the helpers at the package
root, never an analysis (edm, rqa, xmap, neighbors) or anything above one.
"""
