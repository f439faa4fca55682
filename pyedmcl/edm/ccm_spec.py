"""The typed spec of one CCM call's cross mapping, shared by both directions.

:func:`pyedmcl.ccm` validates its options once and builds a :class:`CrossMapSpec`;
each direction (:func:`pyedmcl.edm.ccm._direction`, the lag scan
:func:`pyedmcl.edm.ccm.direction_lags`) and the surrogate null
(:func:`pyedmcl.edm.ccm_null.null_curves`) take it whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CrossMapSpec:
    """What every direction of one CCM call shares, validated."""

    E: int
    tau: int
    Tp: int  # the prediction interval (a lag scan: each lag's own)
    k: int  # neighbours per prediction (capped per library size)
    radius: int  # exclusion radius (rows)
    sizes: np.ndarray  # library sizes
    sample: int  # libraries per size (1 when not random)
    entropy: int  # the call's seed entropy: every size draws from a fresh generator of it
    random: bool  # random libraries (else the first L rows)
    replacement: bool
    neighbors: Any = None  # the k-NN back-end (None: the fused exact kernel)
