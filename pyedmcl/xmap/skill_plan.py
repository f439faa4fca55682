"""How a cross map's skill runs on one device: layouts, programs, target arrays.

The ``xmap_skill`` family (:mod:`pyedmcl.kernels.xmap`) packs a k-NN table into weights
and cross-maps a group of targets from it with rho reduced on the device. A
:class:`SkillPlan` decides, once per engine, how each E-group's pack and skill run:

- the layout (tuned per table width K and group size; a CPU's adjusted to the group,
  a GPU's small groups scalar; targets read time-major only where they fit the device);
- the program: staged target lanes of a first-use map may share one program with K an
  argument while each group's own program builds behind the job (:meth:`choose_runtime_k`);
- the device arrays the skill reads besides the tables: the targets time-major
  (:meth:`lanes_y`) and CCM's per-target shifts (:meth:`upload_shifts`).

It launches the pack and the skill (:meth:`pack`, :meth:`launch`) and lists their kernels
(:meth:`requests`). The map's engine, its optimal-E scan and its lag engine share it, so
they share built kernels and target arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from clkernels.arrays import gather, gather_request
from clkernels.memory import DeviceOutOfMemory, check_alloc

from ..kernels.xmap import (
    SCALAR_LAYOUT,
    XMAP_SKILL,
    cpu_layout,
    fixed_shift,
    gpu_layout,
    lane_tile,
    reads_time_major,
    time_major,
    time_major_pitch,
    wide_targets,
)
from ..primitives.knn import hold
from ..primitives.lookup import ccm_shifts_groups
from .egroup import EGroup

#: E-groups on staged target lanes from which a first-use map takes one runtime-K program
#: for them all (:meth:`SkillPlan.choose_runtime_k`)
RUNTIME_K_GROUPS = 4


def staged_lanes(layout: dict) -> bool:
    """Whether a skill layout is staged target lanes (where K may be an argument, KR)."""
    return bool(layout.get("LANES") and layout.get("CM") and layout.get("ST"))


class SkillPlan:
    """The pack and skill launches of one engine's E-groups (module docstring)."""

    def __init__(self, be: Any, X: np.ndarray, x_dev: Any, *, real: str, acc: str,
                 weight: str):
        """``X``: the panel ``(N, n)`` on the host; ``x_dev``: the same, flat, on ``be``;
        ``real`` / ``acc``: the data and accumulation types; ``weight``: the map's
        weighting ("ccm"; the optimal-E scan passes "simplex" per launch)."""
        self.be, self.X, self.x_dev = be, X, x_dev
        self.N, self.n = X.shape
        self.real, self.acc, self.weight = real, acc, weight
        self.groups: list[EGroup] = []
        self._layouts: dict[tuple, dict] = {}
        #: the family's requests and kernels of this plan's launches (their memo)
        self.kernels: dict[tuple, tuple] = {}
        #: the layout keys (LWG, LB, SPL) of a runtime-K program, its largest K, and the
        #: function that ends the builds behind (None: the groups' own programs)
        self._runtime_k: dict | None = None
        self._k_bound = 0
        self._behind: Callable[[], None] | None = None

    def reset(self, groups: list[EGroup]) -> None:
        """New E-groups: every decision is made again (builds behind the job end)."""
        self.finish_builds()
        self.groups = groups
        self._runtime_k, self._layouts, self.kernels = None, {}, {}

    def spec(self, k: int, weight: str | None = None) -> dict:
        """The family's spec (``pack`` and ``xmap_skill``) for tables of ``k``."""
        return {"K": k, "REAL": self.real, "ACC": self.acc, "WEIGHT": weight or self.weight}

    @property
    def gathers_targets(self) -> bool:
        """Time-major targets (and the fused scan's padded panel) are gathered on the
        device from the panel (element offsets within int32), else copied from the host."""
        return self.N * self.n < 2 ** 31

    def lanes_y(self, g: EGroup, tile: int = 1) -> tuple[Any, int]:
        """The group's targets time-major on the device and their row pitch
        (:func:`~pyedmcl.kernels.xmap.time_major`'s layout, rows of whole work-groups of
        ``tile`` targets): what the LANES and VEC=2 skills read. Gathered from the panel
        on the device (no transposing copy on the host and no second upload); made again
        only for a layout whose tile the pitch does not hold."""
        if g.y_lanes is not None and g.y_lanes[1] % tile:
            # rows for both layouts (tiles are powers of two: the pitch's largest one
            # holds the earlier layout's)
            tile = math.lcm(tile, g.y_lanes[1] & -g.y_lanes[1])
            g.y_lanes = None
        if g.y_lanes is None:
            ntg = g.targets.size
            ldy = time_major_pitch(ntg, tile)
            if self.gathers_targets:  # gathered on the device from the panel
                cols = np.full(ldy, -1, np.int32)  # -1: padding, zero
                cols[:ntg] = g.targets * self.n
                g.y_lanes = (gather(self.be, self.x_dev, 1, self.n, self.be.to_device(cols),
                                    ldy, 0.0), ldy)
            else:  # element offsets past int32: the host's copy
                yt, ldy = time_major(self.X[g.targets], tile)
                g.y_lanes = (self.be.to_device(yt), ldy)
        return g.y_lanes

    def layout(self, k: int, weight: str, ntg: int, diag: bool = False) -> dict:
        """The skill's layout for tables of ``k`` and ``ntg`` targets (tuned; a CPU's
        adjusted to the group's size, :func:`~pyedmcl.kernels.xmap.cpu_layout`, a GPU's
        small groups scalar, :func:`~pyedmcl.kernels.xmap.gpu_layout`); looked up once
        per plan (each pack and skill launch asks: ~90 tuning lookups per mixed-E map of
        100 series, 5 ms of host time beside a 2-core CPU's kernels)."""
        key = (k, weight, ntg, diag)
        if key not in self._layouts:
            be = self.be
            spec = self.spec(k, weight)
            if be.info.is_gpu and not diag and ntg >= wide_targets(be.info):
                spec["WIDE"] = 1  # a wide group: its own tuning bucket (target lanes)
            sp = XMAP_SKILL.layout(be, spec, self.n, diag)
            if not be.info.is_gpu and not diag:
                sp = cpu_layout(sp, ntg, time_major=be.info.runtime == "pocl")
            elif not diag:
                sp = gpu_layout(sp, ntg, be.info)
            if reads_time_major(sp) and not self._time_major_fits(ntg, sp):
                sp = dict(SCALAR_LAYOUT)   # the targets read where they lie (the same rho)
            if self._runtime_k and not diag and staged_lanes(sp):
                sp = dict(sp, KR=1, **self._runtime_k)  # (GPUs: choose_runtime_k)
            self._layouts[key] = sp
        return dict(self._layouts[key])

    def _time_major_fits(self, ntg: int, sp: dict) -> bool:
        """Whether ``ntg`` targets time-major (:meth:`lanes_y`, what layout ``sp`` reads)
        fit in one allocation of the device: a panel padded to whole tiles, up to twice
        the targets' own size, which does not shrink with the library batch; where it
        does not fit the skill reads the targets row-major (:data:`SCALAR_LAYOUT`)."""
        nbytes = time_major_pitch(ntg, lane_tile(sp)) * self.n * np.dtype(self.x_dev.dtype).itemsize
        try:
            check_alloc(self.be, nbytes)
        except DeviceOutOfMemory:
            return False
        return True

    def program_spec(self, k: int, weight: str, sp: dict) -> tuple[dict, int | None]:
        """The spec the skill program of tables of ``k`` with layout ``sp`` is rendered
        with, and the K its launches pass (None: the spec's): staged target lanes with K
        an argument render the largest K of the map's groups (one program for all)."""
        spec = self.spec(k, weight)
        if sp.get("KR") and sp.get("LANES"):
            spec["K"] = self._k_bound
            return spec, k
        return spec, None

    def pack(self, k: int, weight: str, sp: dict, idx, dist, ldk: int, bstride: int,
             row0: int, M: int, nb: int, slot: int, tidx, tw, tden) -> None:
        """Weights of ``nb`` raw k-NN tables of ``M`` rows (row stride ``ldk``, table
        stride ``bstride``, from row ``row0``) into the packed tables' slots ``slot ..``
        (:meth:`~pyedmcl.kernels.xmap.XmapSkillKernel.pack` with layout ``sp``'s program)."""
        sspec, kr = self.program_spec(k, weight, sp)
        XMAP_SKILL.pack(self.be, sspec, idx, dist, ldk, bstride, row0, M, nb, slot, tidx, tw,
                        tden, sp, k=kr, memo=self.kernels)

    def launch(self, k: int, weight: str, tidx, tw, tden, nq: int, nb: int, tshift: int,
               tgt_dev, ocol_dev, ntg: int, obs_dev, out, ldo: int, orow: int,
               diag: bool = False, group: EGroup | None = None, shift: Any = None) -> None:
        """rho of ``nb`` packed tables into ``out`` (:meth:`~pyedmcl.kernels.xmap.XmapSkillKernel.launch`);
        ``group``: the E-group whose targets are read (time-major where the layout reads
        so) and whose CCM shifts are taken, unless ``shift`` gives them (another lag's
        observations, :mod:`pyedmcl.xmap.lags`)."""
        sp = self.layout(k, weight, ntg, diag)
        spec, kr = self.program_spec(k, weight, sp)
        y, ldy = (self.lanes_y(group, lane_tile(sp)) if reads_time_major(sp)
                  else (self.x_dev, self.n))
        if not fixed_shift(spec, sp):
            shift = None
        elif shift is None:  # CCM's reduction: each target's shift (as pyedmcl.ccm's)
            if group.shift is None:
                self.upload_shifts()
            shift = group.shift
        XMAP_SKILL.launch(self.be, sp, spec, tidx, tw, tden, nq, nb, y, ldy, tshift, tgt_dev,
                          ocol_dev, ntg, obs_dev, out, ldo, orow, diag, k=kr, shift=shift,
                          memo=self.kernels)

    def upload_shifts(self) -> None:
        """Every E-group's CCM shifts on the device (:func:`ccm_shifts_groups`: one pass
        over the groups, at their first skill; as :func:`ccm_shifts_device` would make
        each)."""
        host = ccm_shifts_groups(self.X, [(g.obs, g.targets) for g in self.groups],
                                 self.be.info.fp64)
        for g, values in zip(self.groups, host, strict=True):
            g.shift = self.be.to_device(values)
            hold(self.be, g.shift)

    def requests(self, g: EGroup) -> list[tuple]:
        """Group ``g``'s pack and skill (one program) and, where the skill reads targets
        time-major, their gather."""
        sp = self.layout(g.k, self.weight, g.targets.size)
        sspec, _ = self.program_spec(g.k, self.weight, sp)
        reqs = [XMAP_SKILL.request(self.be, sspec, sp, "pack"),
                XMAP_SKILL.request(self.be, sspec, sp, "xmap_skill")]
        if reads_time_major(sp) and self.gathers_targets:
            reqs.append(gather_request(self.x_dev.dtype))  # the targets, time-major
        return reqs

    def choose_runtime_k(self) -> None:
        """A first-use map's staged E-groups on one program. A GPU's wide E-groups each
        take a program of their own (K unrolled, layout tuned per K bucket): a mixed-E
        map builds ~20, most of its first run. Where at least
        :data:`RUNTIME_K_GROUPS` groups are on staged target lanes and their programs
        are not :meth:`~clkernels.Backend.known`, those groups run on one program with K
        an argument (KR, rendered for their largest K, the largest group's tuned layout;
        the same rho bit for bit) while their own programs build in helper processes
        behind the job (:meth:`~clkernels.Backend.build_behind`; where no helper can, the
        groups build their own programs now), so the next map takes them (decision 0102;
        later runs as before). Once per plan: a no-op after it chose or began builds."""
        if self._behind is not None or self._runtime_k is not None:
            return
        lanes = {g.k: sp for g in self.groups
                 if staged_lanes(sp := self.layout(g.k, self.weight, g.targets.size))}
        if len(lanes) < RUNTIME_K_GROUPS:
            return
        own = [XMAP_SKILL.request(self.be, self.spec(k), sp, name)
               for k, sp in lanes.items() for name in ("pack", "xmap_skill")]
        if self.be.known(own):
            return
        behind = self.be.build_behind(own)
        if behind is None:  # nothing would ever build them: the groups build their own now
            return
        top = max(lanes)
        self._runtime_k = {key: lanes[top][key] for key in ("LWG", "LB", "SPL", "TJ", "PR")}
        self._k_bound = top
        self._layouts = {}
        self._behind = behind

    def finish_builds(self) -> None:
        """End the builds behind the job (:meth:`choose_runtime_k`): those under way
        finish, the rest are dropped. Idempotent."""
        if self._behind is not None:
            end, self._behind = self._behind, None
            end()
