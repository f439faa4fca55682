"""The typed spec of one recurrence matrix: the options :func:`pyedmcl.rqa` validated.

:func:`pyedmcl.rqa` (and each series of :func:`pyedmcl.rqa_batch`) builds one
:class:`RqaJob` after validation and passes it down whole to the run
(:func:`pyedmcl.rqa.core._rqa_prepared`, :func:`pyedmcl.rqa.fan.fan_rqa`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RqaJob:
    """One matrix's options, validated (ints as ints, the metric's canonical name)."""

    E: int
    tau: int
    n: int  # embedded points
    radius: float | None  # given (or from threshold_std / threshold_max); None: by rate
    recurrence_rate: float | None
    metric: str
    theiler: int
    theiler_scope: str  # "lines" or "matrix"
    l_min: int
    v_min: int
    w_min: int
    white_border: bool
    edge: int | None  # sub-matrix edge (None: tuned)
    order: str  # "row" or "column"
    params: dict[str, Any] | None  # fixed launch parameters of the line kernels
    threshold_rule: str  # as given; checked by the run
    neighbourhood: str = "radius"  # or "fan" (knn nearest per column)
    knn: Any = None  # FAN's neighbours per column (checked by the run)
    scheduler: Any = None  # a Dask scheduler (None: this process's devices)
    n_workers: int = 1
