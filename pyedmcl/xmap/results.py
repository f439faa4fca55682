"""The result of an all-to-all cross map (in memory or backed by its Zarr store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class XmapResult:
    """``rho`` (N, N) float32 (a NumPy array, or the Zarr array when written to ``out``),
    ``E`` (N,) the embedding dimension used for each target, ``names`` of the series.
    With surrogates (``xmap(..., surrogates=n)``): ``p_value``, ``null_mean`` and
    ``null_q95`` (N, N) beside rho (:func:`pyedmcl.causal_network` turns them into edges).
    """

    rho: Any
    E: np.ndarray
    names: list[str] | None = None
    edim_rho: np.ndarray | None = None
    path: str | None = None
    blocks_per_device: dict[str, int] = field(default_factory=dict)
    #: surrogates per target series (None: no surrogate test)
    surrogates: int | None = None
    p_value: Any = None
    null_mean: Any = None
    null_q95: Any = None

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self.rho[...])
        return a if dtype is None else a.astype(dtype)
