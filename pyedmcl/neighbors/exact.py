"""``exact``: the fused OpenCL embedding + distance + top-k kernel of :mod:`pyedmcl.primitives.knn`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import NeighborBackend


class ExactBackend(NeighborBackend):
    """Exact k-NN on the OpenCL device (no explicit embedding, O(nq * k) memory)."""

    name = "exact"
    exact = True
    metrics = ("euclidean", "maximum", "manhattan")

    def device_table(self, be: Any, x_dev: Any, n: int, *, E: int, tau: int, k: int,
                     qpts: np.ndarray, lpts: np.ndarray, radius: int, metric: str = "euclidean",
                     real: str = "float", params: Any = None, q_dev: Any = None,
                     l_dev: Any = None, near: int = 0) -> Any:
        from ..primitives.knn import knn_device
        from ..primitives.ranges import MAX_KNN

        self.check_metric(metric)
        nl = np.atleast_2d(lpts).shape[1]
        if k > nl:
            raise ValueError(f"k={k} is larger than the library ({nl} points); allowed: 1 <= k <= {nl}")
        if k > MAX_KNN:
            raise ValueError(f"k={k} is out of range for knn_method='exact'; allowed: "
                             f"1 <= k <= {MAX_KNN} (use 'kdtree' for more)")
        return knn_device(be, x_dev, n, E=E, tau=tau, k=k, qpts=qpts, lpts=lpts, radius=radius,
                          metric=metric, real=real, params=params, q_dev=q_dev,
                          l_dev=l_dev, near=near)
