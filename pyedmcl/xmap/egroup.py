"""The targets of a cross map that share one embedding dimension (an E-group).

A map groups its target series by their E: every target of a group is cross-mapped
from the same k-NN table of a library (one table per library and E), so the map's
launches, skill layouts and device arrays are per group. :func:`e_group` makes one
from the panel's shape, ``tau`` and the cross-map lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..kernels.knn import is_contiguous
from ..primitives.ranges import ccm_valid_times, point_offset


@dataclass
class EGroup:
    """Targets sharing one E, and the rows CCM uses for that E.

    Its device arrays are uploaded on first use, not with the engine: the map's first
    launch (the k-NN tables) then does not wait for them, and the fused scan never needs
    ``pts_dev`` (2-core CPU: ~5 ms of uploads for ten E-groups before the first launch)."""

    be: Any
    E: int
    k: int
    M: int
    tshift: int
    targets: np.ndarray
    pts: np.ndarray  # kernel points of the library / prediction rows (int32)
    obs: np.ndarray  # observation time of each row (int32)
    #: the library rows are consecutive times (the k-NN rows variant's SLIDE tile applies)
    contiguous: bool = False
    #: the targets time-major (n, ntg) on the device, made on first use (LANES skill,
    #: :meth:`~pyedmcl.xmap.skill_plan.SkillPlan.lanes_y`)
    y_lanes: Any = None
    #: CCM's shift of each target on the device, made at the group's first skill
    #: (:meth:`~pyedmcl.xmap.skill_plan.SkillPlan.upload_shifts`)
    shift: Any = None

    @cached_property
    def pts_dev(self) -> Any:
        return self.be.to_device(self.pts)

    @cached_property
    def obs_dev(self) -> Any:
        return self.be.to_device(self.obs)

    @cached_property
    def tgt_dev(self) -> Any:
        return self.be.to_device(self.targets)


def e_group(be: Any, E_of: np.ndarray, E: int, n: int, tau: int, Tp: int) -> EGroup:
    """The E-group of the targets whose E (``E_of``) is ``E``, with CCM's rows of series
    of ``n`` values at cross-map lag ``Tp``; too few rows for E + 1 neighbours is refused
    (as :func:`pyedmcl.ccm`)."""
    times = ccm_valid_times(n, E, tau, Tp)
    M = int(times.size)
    k = E + 1  # CCM's neighbours
    if M < k + 1:
        raise ValueError(f"series of {n} values leave {M} usable rows for E={E}, "
                         f"tau={tau}, Tp={Tp}; needs at least E+2 = {k + 1}")
    off = point_offset(E, tau)
    targets = np.flatnonzero(E_of == E).astype(np.int32)
    return EGroup(be=be, E=E, k=k, M=M, tshift=off + Tp, targets=targets,
                  contiguous=is_contiguous(times), pts=(times - off).astype(np.int32),
                  obs=(times + Tp).astype(np.int32))
