"""The RQA line-detection kernel family (``rqa_lines/rqa_lines.cl.mako``).

One launch detects the diagonal, vertical and white vertical lines of one set of
sub-matrices of the recurrence matrix (a row block times a band of lanes), continuing
the runs held in the carryover buffers; ``rqa_accumulate`` folds the launch's 32-bit
histograms into 64-bit totals. The Divide & Recombine schedule that drives these
launches is :mod:`pyedmcl.rqa.dnr`.

Tunables: VEC lanes per work-item, WG work-group size, EDGE sub-matrix edge, BITS
(bit-packed runs, 32/64-row words), PH (private histogram bins), SHARE (diagonals
gathered from the vertical launch's bit words), SYM (upper triangle only), WALK
(run-walk variant; 3: all lanes of a work-item walked at once in vector registers, the
CPU default), PACK (one lane per work-item: a cell's bit from the sign of d - thr, the
GPU default), SHFL (the diagonal words by a barrel shift over warp shuffles, NVIDIA's
default), DMAJ (the cells computed diagonal-major by the diagonal launches, each
coordinate term once per diagonal; NVIDIA's default); the template's header explains
each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo, explicit_vectors_only, inline_vector_ops
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

#: zeros after each series on the device (at least): DMAJ's diagonal launch reads 32 +
#: (E - 1) tau values from a row (rounded up to 16 bytes) or column start inside the
#: series, so up to 35 past its end
SERIES_PAD = 36
#: the carryover buffers of a launch, per mode (horizontal: per row of the matrix)
CARRY_BUFFERS = {"vertical": 3, "diagonal": 1, "horizontal": 2}
#: per lane mode, the mode that finds a row range's carries by walking its lanes up
WARM_MODES = {"vertical": "warmcol", "diagonal": "warmdiag"}
#: levels of row-block boxes a column walk-up skips white blocks by (WBOX: blocks of 32,
#: 1,024 and 32,768 rows; 0: every cell walked). Benchmarks may change it.
WARM_BOX_LEVELS = 3
#: template values of the run's bookkeeping kernels, one small program (MODE collect:
#: folds, open runs, the end of a run; SYM's join as MODE symjoin): they depend on none
_COLLECT_PARAMS = {"E": 1, "TAU": 1, "METRIC": "euclidean", "REAL": "float", "MODE": "collect",
                "VEC": 1, "WG": 1, "HBINS": 1, "JOINT": 0, "THEILER_MATRIX": 0, "WBORDER": 1,
                "BITS": 0, "PH": 0, "CBITS": 0, "VHINT": 0, "SHARE": 0, "SYM": 0, "WALK": 0,
                "FMA": 0, "PERCOL": 0, "UNR": 0, "PACK": 0, "PLANES": 0, "HCH": 0,
                "SHFL": 0, "DPAIR": 0, "WARM": 0, "DMAJ": 0, "EXACT": 0, "NTHR": 1,
                "WBOX": 0, "DSEG": 1}


#: the EXACT template value float32 runs take per device kind (rqa_lines.cl.mako, EXACT):
#: 1, the near cells' bits packed beside the cells' (a shift and an or a cell; a flagged
#: half redoes its near cells), or 2, one near flag per 32-row half (one predicate or a
#: cell; a flagged half redoes all its cells). Benchmarks may change it.
EXACT_KERNEL = {"cpu": 1, "gpu": 2}

#: values the kernels implement (and the tests run) that the tuner does not try: work-groups
#: of 1 and 2 work-items and above 256, SHFL 2 (the shuffles through local memory, which
#: checks the bit moves on any device)
SUPPORTED_BEYOND_SPACE = {"WG": (1, 2, 512, 1024), "SHFL": (2,)}

#: untuned GPUs up to this many embedded points take :data:`GPU_SMALL_EDGE` or, where the
#: diagonal launches are diagonal-major (DMAJ), :data:`GPU_SMALL_DSEG_EDGE` in
#: :data:`GPU_SMALL_DSEG` row segments: fewer row blocks, so fewer launches and fewer
#: waits between the queues of OVL, for the same cells, and with segments a diagonal
#: walk as long as a 4096-row block's. Larger blocks without segments paid off only at
#: small N; beyond this size neither pays (decisions 0093, 0161).
GPU_SMALL_N = 1 << 18
GPU_SMALL_EDGE = 8192
GPU_SMALL_DSEG_EDGE = 16384
GPU_SMALL_DSEG = 4


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        # GPU defaults, each the faster on the H100/H200 at N = 10^5 and ~10^6: the
        # black-start walk (WALK 1) with unrolled halves, one column per work-item (VEC 1,
        # EDGE 4096: enough work-items resident at N = 10^5), overlapped row blocks (OVL,
        # WG 128), sign-bit words (PACK), 4-byte diagonal gathers (PLANES), SYM with the
        # chunked row walk (HCH 32; decision 0081); on NVIDIA also the diagonal words by
        # warp shuffles (SHFL) and one step per black run (DPAIR; decision 0091) and the
        # cells diagonal-major (DMAJ; decision 0118). The figures:
        # bench/results/rqa_measurements_2026-11-28_753d90d.md.
        nv = info.runtime == "nvidia"
        p = {"VEC": 1, "WG": 128, "EDGE": 4096, "BITS": 2, "PH": 0, "SHARE": 1, "SYM": 1,
             "WALK": 1, "UNR": 1, "OVL": 2, "PACK": 1, "PLANES": 1, "HCH": 32,
             "SHFL": int(nv), "DPAIR": 1, "DMAJ": int(nv)}
        if not _local_fits(p, info):  # the row tiles do not fit in local memory: SYM off
            p.update(SYM=0, HCH=0, OVL=1, DMAJ=0)
        return p
    if info.runtime in ("intel", "pocl"):  # AVX-512/AVX2 lane code: the lane-vector walk
        # (0056), 128 private bins (longer white lines are rare; fewer bins to clear and
        # merge). PoCL: with its vector select/any/popcount inline (0078), faster than
        # WALK=1, PH=1024
        return {"VEC": 16, "WG": 4, "EDGE": 4096, "BITS": 2, "PH": 128, "SHARE": 1, "SYM": 1,
                "WALK": 3}
    # other CPU runtimes: the scalar black-start walk
    return {"VEC": 16, "WG": 4, "EDGE": 4096, "BITS": 2, "PH": 1024, "SHARE": 1, "SYM": 1,
            "WALK": 1}


def _walk(params: Params, info: DeviceInfo, wg: int) -> int:
    """WALK template value: given, else the device default (1 on CPUs, 0 on GPUs)."""
    if not params.get("BITS", 0) or _intel_walk_crash(params, info, wg):
        return 0
    walk = int(params.get("WALK", 0 if info.is_gpu else 1))
    if walk == 3 and not _lane_walk_fits(params):
        return 1  # the lane-vector walk needs 64-row words, vector lanes and direct bins
    return walk


def _planes_fit(params: Params, info: DeviceInfo, wg: int) -> bool:
    """PLANES asked for, on a path that can read the column words as 32-bit planes:
    shared words, one lane per work-item, no lane walk."""
    return (bool(params.get("PLANES", 0)) and bool(params.get("SHARE", 0))
            and params["VEC"] == 1 and _walk(params, info, wg) != 3)


def _chunk(params: Params, info: DeviceInfo) -> int:
    """The chunk of SYM's horizontal walk (HCH, 64-column tiles) where it applies: SYM,
    the planes, and an HCH the work-group holds (2..32 dividing 32 and WG); else 0 (the
    whole-row walk). Parameters merged from several sources may name any HCH."""
    hch, wg = int(params.get("HCH", 0)), int(params["WG"])
    ok = 2 <= hch <= 32 and 32 % hch == 0 and wg % hch == 0
    return hch if ok and params.get("SYM", 0) and _planes_fit(params, info, wg) else 0


def _planes(params: Params, info: DeviceInfo, wg: int) -> bool:
    """PLANES template value: asked for, and the column words shared on a path that
    reads them as 32-bit planes (with SYM only where the horizontal walk is chunked)."""
    return _planes_fit(params, info, wg) and (not params.get("SYM", 0)
                                              or _chunk(params, info) > 0)


def _hch(params: Params, info: DeviceInfo, mode: str) -> int:
    """HCH template value: the chunk of the horizontal walk (64-column tiles per work-item)
    where SYM reads 32-row planes; 0 for every other mode and path (their programs do not
    depend on it)."""
    return _chunk(params, info) if mode in ("horizontal", "hjoin") else 0


def _shfl(params: Params, info: DeviceInfo, mode: str) -> int:
    """SHFL template value: the diagonal launch's words by a barrel shift over warp
    shuffles (1: NVIDIA's shfl.sync, the only runtime that has them; 2: through local
    memory, any device) where the column words are read as planes in work-groups of whole
    32-lane warps; else 0 (the gather): every other mode and path, and SHFL=1 on a
    runtime other than NVIDIA's."""
    shfl = int(params.get("SHFL", 0))
    wg = _wg(mode, params, info)
    if mode != "diagonal" or not _planes(params, info, wg) or wg % 32:
        return 0
    return shfl if shfl == 2 or (shfl == 1 and info.runtime == "nvidia") else 0


def _dpair(params: Params, info: DeviceInfo, mode: str) -> int:
    """DPAIR template value: asked for, on the black-start walk (WALK=1) without private
    bins (PH=0, the GPU path); else 0."""
    ok = _walk(params, info, _wg(mode, params, info)) == 1 and not int(params.get("PH", 0))
    return int(bool(params.get("DPAIR", 0)) and ok)


def _dmaj_path(params: Params, info: DeviceInfo) -> bool:
    """DMAJ asked for, on the path that can take it: SYM's chunked row walk (HCH) over
    planes, PACK, the diagonal words' barrel shift (SHFL) in the diagonal launch, and row
    blocks on 32-row boundaries (the row values' 16-byte loads)."""
    return (bool(params.get("DMAJ", 0)) and bool(params.get("SYM", 0))
            and _chunk(params, info) > 0 and bool(params.get("PACK", 0))
            and _shfl(params, info, "diagonal") > 0 and int(params["EDGE"]) % 32 == 0
            and not _pocl_dmaj_crash(params, info))


def _pocl_dmaj_crash(params: Params, info: DeviceInfo) -> bool:
    """PoCL (5.0, LLVM 16, Debian's; its default loop work-group method) corrupts the host's
    heap running DMAJ's diagonal launch with the shuffles through local memory (SHFL 2)
    in work-groups of more than one warp: the process aborts ("corrupted size vs.
    prev_size", "double free") a few launches later. Oclgrind finds no out-of-bounds
    access or race in the same runs, and PoCL's ``POCL_WORK_GROUP_METHOD=cbs`` runs them
    clean: a PoCL fault. DMAJ never runs on PoCL outside explicit parameters (its tuning
    space has no SHFL 2); those take the column-major cells there (same histograms)."""
    return info.runtime == "pocl" and _wg("diagonal", params, info) > 32


def _lane_walk_fits(params: Params) -> bool:
    """WALK=3 (lanes walked together in vector registers) needs BITS=2, VEC >= 2, PH >= 64."""
    return (params.get("BITS", 0) == 2 and int(params.get("VEC", 1)) >= 2
            and int(params.get("PH", 0)) >= 64)


def _intel_walk_crash(params: Params, info: DeviceInfo, wg: int) -> bool:
    """Intel's CPU OpenCL compiler (2024.x) aborts the process building the WALK paths
    with direct private bins (PH at least a bit word: 64 rows, 32 with BITS=1) in
    work-groups of 16 or more (it vectorises over work-items; BITS=1, PH=32, WG=16 with
    VEC 2, 4 or 16 crashed `pyedmcl tune rqa_lines`); those builds use WALK=0 (same
    histograms)."""
    word = 32 if int(params.get("BITS", 0)) == 1 else 64
    return info.runtime == "intel" and wg >= 16 and int(params.get("PH", 0)) >= word


def _gpu_unfit(p: Params, info: DeviceInfo) -> bool:
    """Paths shaped for CPUs that GPU tuning never tries nor takes from a tuning file:
    SYM's whole-row horizontal launch (HCH = 0) has one work-item per 64-row word of a row
    block (EDGE / 64 of them, each walking whole rows: far too few to fill a GPU), and
    private bins (PH > 0) live in off-chip memory on GPUs. Explicit ``params`` still run them (the tests do, at small N)."""
    return info.is_gpu and bool((p.get("SYM", 0) and not _chunk(p, info)) or p.get("PH", 0))


def _fits(p: Params, info: DeviceInfo) -> bool:
    return (not _gpu_unfit(p, info)
            and (not p.get("SHARE", 0) or p.get("BITS", 0) == 2)
            and (not p.get("SYM", 0) or p.get("SHARE", 0))
            and (not p.get("WALK", 0) or p.get("BITS", 0))
            and (not p.get("UNR", 0) or p.get("BITS", 0))
            and (not p.get("PACK", 0) or (p.get("BITS", 0) and p["VEC"] == 1))
            and (not p.get("PLANES", 0) or (p.get("SHARE", 0) and p["VEC"] == 1
                                            and (not p.get("SYM", 0) or p.get("HCH", 0))))
            and (not p.get("HCH", 0) or (p.get("SYM", 0) and p.get("PLANES", 0)
                                         and p["WG"] % p["HCH"] == 0))
            and (not p.get("OVL", 0) or (p.get("SHARE", 0)
                                         and (not p.get("SYM", 0) or p.get("HCH", 0))))
            and (p.get("OVL", 0) != 2 or (p.get("SYM", 0) and p.get("HCH", 0)))
            and (not p.get("SHFL", 0) or (p.get("PLANES", 0) and p["WG"] % 32 == 0
                                          and (p["SHFL"] == 2 or info.runtime == "nvidia")))
            and (not p.get("DPAIR", 0) or (p.get("WALK", 0) == 1 and not p.get("PH", 0)))
            and (not p.get("DMAJ", 0) or (p.get("SYM", 0) and p.get("HCH", 0) and p.get("PACK", 0)
                                          and p.get("SHFL", 0) and p["EDGE"] % 32 == 0))
            and (p.get("DSEG", 1) == 1 or p.get("DMAJ", 0))
            and (p.get("WALK", 0) != 2 or p.get("PH", 0) >= 64)
            and (p.get("WALK", 0) != 3 or _lane_walk_fits(p))
            and not (p.get("WALK", 0) and _intel_walk_crash(p, info, p["WG"]))
            and p["WG"] <= info.max_work_group_size and p["WG"] <= info.max_work_item_sizes[0]
            and _local_fits(p, info))


def _local_fits(p: Params, info: DeviceInfo) -> bool:
    """A work-group's local memory fits the device: the horizontal launches' two histograms
    and the diagonal's (3 x hist_bins) and the chunked walk's row tiles."""
    return 3 * hist_bins(info) * 4 + _hch_local_bytes(p) <= info.local_mem_bytes


def _hch_local_bytes(p: Params) -> int:
    """Local memory of the chunked horizontal walk: a work-group's HCH-item groups each
    hold 32 rows x (HCH + 1) uint words (a round's transposed half tiles, padded)."""
    hch = int(p.get("HCH", 0))
    return p["WG"] // hch * 32 * (hch + 1) * 4 if hch and p.get("SYM", 0) else 0


def hist_bins(info: DeviceInfo, nthr: int = 1) -> int:
    """Line lengths kept in the work-group-local histogram (longer ones go global); with
    ``nthr`` thresholds per launch (NTHR) each has its own: fewer, so that the launch
    zeroes and merges about as many local bins as one threshold's (a power of two, at
    least 64; the template takes at least PH, the private bins merged into them)."""
    bins = 1024 if info.local_mem_bytes >= 3 * 1024 * 4 * 2 else 256
    while nthr > 1 and bins > 64 and nthr * bins > 1024:
        bins //= 2
    return bins


def _wg(mode: str, params: Params, info: DeviceInfo) -> int:
    """Work-group size of a launch: whole-row horizontal launches (HCH = 0) have only
    edge/64 work-items, each walking whole rows, so one per work-group lets the runtime
    balance them over cores; a GPU's walk-ups, one lane per work-group (:func:`_warm`)."""
    if mode == "horizontal" and not _chunk(params, info):
        return 1
    return _warm(mode, info) or int(params["WG"])


def _warm(mode: str, info: DeviceInfo) -> int:
    """WARM: work-items walking one lane together in a walk-up launch (MODE ``warmcol`` /
    ``warmdiag``): 32 on GPUs, a row each per 32-row step (one work-item per lane holds its
    warp until the longest of its 32 lanes ends), else 0 (one work-item per lane)."""
    return 32 if mode in WARM_MODES.values() and info.is_gpu else 0


@dataclass
class LineSpec:
    """What shapes the generated kernel (besides the tunables)."""

    E: int
    tau: int
    metric: str
    real: str  # "float" | "double"
    joint: bool = False
    theiler_matrix: bool = False
    white_border: bool = True
    fma: bool = False  # Euclidean squares summed by fma() (PyRQA's contracted kernels)
    percol: bool = False  # one threshold per column (FAN): the series tuple carries them
    #: float32 with the near cells redone in double (EXACT, where the device has fp64):
    #: the series tuple carries the raw float64 series, thresholds and bounds
    exact: bool = False
    #: thresholds decided per launch (NTHR > 1: their own words, carries and histograms)
    nthr: int = 1

    def exact_on(self, info: DeviceInfo) -> int:
        """EXACT template value: asked for, in float32, on a device with fp64: 2 on GPUs
        (one near flag per 32-row half), 1 elsewhere (near bits per cell), see
        :data:`EXACT_KERNEL`; else 0."""
        if not (self.exact and self.real == "float" and bool(info.fp64)):
            return 0
        return EXACT_KERNEL["gpu" if info.is_gpu else "cpu"]

    @property
    def dtype(self) -> type:
        """The working real type (series, thresholds)."""
        return np.float64 if self.real == "double" else np.float32

    def tuning_spec(self) -> dict[str, Any]:
        """The specialisation values tuning entries are bucketed by."""
        return {"E": self.E, "REAL": self.real, "METRIC": self.metric}

    def takes_dmaj(self) -> bool:
        """Whether the diagonal-major cells (DMAJ) can compute this matrix: the plain
        distance of one pair of series (no JOINT, per-column thresholds, Theiler band or
        fma) with at most 32 carried terms ((E - 1) tau <= 32)."""
        return (not (self.joint or self.percol or self.theiler_matrix or self.fma)
                and (self.E - 1) * self.tau <= 32)

    def dmaj(self, mode: str, params: Params, info: DeviceInfo) -> int:
        """DMAJ template value: 1 for the modes it changes (vertical: the column walk alone;
        diagonal: the cells; horizontal: the words read as two planes) where the path and
        the matrix take it (:func:`_dmaj_path`, :meth:`takes_dmaj`), else 0."""
        return int(mode in ("vertical", "diagonal", "horizontal") and self.takes_dmaj()
                   and _dmaj_path(params, info))

    def template_params(self, mode: str, params: Params, info: DeviceInfo) -> dict[str, Any]:
        if mode in WARM_MODES.values():  # walk-ups: no shared words, planes or lane walks
            params = {"VEC": params["VEC"], "WG": params["WG"]}
        return {"E": self.E, "TAU": self.tau, "METRIC": self.metric, "REAL": self.real,
                "MODE": mode, "VEC": params["VEC"], "WG": _wg(mode, params, info),
                "HBINS": max(hist_bins(info, self.nthr), int(params.get("PH", 0))
                             if self.nthr > 1 else 0), "JOINT": int(self.joint),
                "THEILER_MATRIX": int(self.theiler_matrix), "WBORDER": int(self.white_border),
                "BITS": int(params.get("BITS", 0)), "PH": int(params.get("PH", 0)),
                "CBITS": int(inline_vector_ops(info)),
                "VHINT": int(explicit_vectors_only(info) and params["VEC"] > 1),
                "SHARE": int(params.get("SHARE", 0)),
                "SYM": int(params.get("SYM", 0)), "WALK": _walk(params, info, _wg(mode, params, info)),
                "FMA": int(self.fma and self.metric == "euclidean"), "PERCOL": int(self.percol),
                "UNR": int(params.get("UNR", 0)) if params.get("BITS", 0) else 0,
                "PACK": int(bool(params.get("PACK", 0)) and bool(params.get("BITS", 0))
                            and params["VEC"] == 1),
                "PLANES": int(_planes(params, info, _wg(mode, params, info))),
                "HCH": _hch(params, info, mode), "SHFL": _shfl(params, info, mode),
                "DPAIR": _dpair(params, info, mode), "WARM": _warm(mode, info),
                "DMAJ": self.dmaj(mode, params, info), "EXACT": self.exact_on(info),
                "NTHR": self.nthr, "WBOX": WARM_BOX_LEVELS if mode == "warmcol" else 0,
                "DSEG": self.dseg(mode, params, info)}

    def dseg(self, mode: str, params: Params, info: DeviceInfo) -> int:
        """DSEG template value: DMAJ's diagonal launches in ``params["DSEG"]`` row segments
        (each with its own work-items, joined by MODE djoin), else 1."""
        if mode != "diagonal" or not self.dmaj(mode, params, info):
            return 1
        return int(params.get("DSEG", 1))


class RQALinesKernel(TunableKernel):
    """Tunable family: lanes per work-item (VEC), work-group size, sub-matrix edge, and
    OVL, a schedule value that shapes no kernel: SHARE's diagonal launches in a second
    queue of the device, beside the next row block's vertical launch, the column bits
    double-buffered; OVL 2 (SYM with HCH): the chunked row walks and joins in a third
    queue, beside both (:mod:`pyedmcl.rqa.dnr`)."""

    name = "rqa_lines"
    template = "rqa_lines/rqa_lines.cl.mako"
    #: the Divide & Recombine run the tuning case times (the schedule decides how the
    #: launches overlap, so the case tunes what users run); the algorithm layer provides
    #: it (:mod:`pyedmcl.rqa.dnr` sets it when imported, as ``import pyedmcl`` does)
    schedule: Callable[..., Any] | None = None
    space = TuningSpace(
        params={"VEC": (1, 2, 4, 8, 16), "WG": (4, 8, 16, 32, 64, 128, 256),
                "EDGE": (512, 1024, 2048, 4096, 8192, 16384), "BITS": (0, 1, 2), "PH": (0, 32, 64, 128, 1024),
                "SHARE": (0, 1), "SYM": (0, 1), "WALK": (0, 1, 2, 3), "UNR": (0, 1),
                "OVL": (0, 1, 2), "PACK": (0, 1), "PLANES": (0, 1), "HCH": (0, 8, 16, 32),
                "SHFL": (0, 1), "DPAIR": (0, 1), "DMAJ": (0, 1), "DSEG": (1, 2, 4, 8, 16)},
        heuristic=_heuristic,
        constraint=_fits,
        # entries from before UNR / OVL / PACK / PLANES / HCH / SHFL / DPAIR measured the
        # code without them
        filled={"UNR": 0, "OVL": 0, "PACK": 0, "PLANES": 0, "HCH": 0, "SHFL": 0,
                "DPAIR": 0, "DMAJ": 0, "DSEG": 1},
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        e = spec["E"]
        eb = "E1-2" if e <= 2 else "E3-8" if e <= 8 else "E9+"
        return f"{spec.get('REAL', 'float')}-{spec.get('METRIC', 'euclidean')}-{eb}"

    def default_specs(self):
        return [{"E": 5, "TAU": 3, "METRIC": "euclidean", "REAL": "float"}]

    def params_for(self, backend: Backend, spec: dict[str, Any], size: int) -> Params:
        """The tuned parameters, else the heuristic's; an untuned GPU takes
        :data:`GPU_SMALL_EDGE` (with DMAJ :data:`GPU_SMALL_DSEG_EDGE` and
        :data:`GPU_SMALL_DSEG`) up to :data:`GPU_SMALL_N` embedded points."""
        choice = lookup(self, backend.info, self.spec_bucket(spec), self.size_bucket(size))
        if choice.source == "heuristic" and backend.info.is_gpu and size <= GPU_SMALL_N:
            p = choice.params
            if p.get("DMAJ", 0):
                return {**p, "EDGE": max(p["EDGE"], GPU_SMALL_DSEG_EDGE),
                        "DSEG": GPU_SMALL_DSEG}
            return {**p, "EDGE": max(p["EDGE"], GPU_SMALL_EDGE)}
        return choice.params

    def check_params(self, params: Any) -> Params:
        """``params`` given by a caller (``rqa(params=...)``) as a point of :attr:`space`:
        a dict of known names holding VEC, WG and EDGE, each value one the space allows
        (EDGE any positive integer: it shapes no kernel; also the values beyond the
        tuner's the kernels implement, :data:`SUPPORTED_BEYOND_SPACE`), of the space's
        type. Flags left out are off. A ValueError names the parameter and what it
        allows: another value may build a kernel that counts wrongly (VEC 3 did)."""
        if not isinstance(params, dict):
            raise ValueError(f"params must be a dict of rqa_lines tuning parameters, got "
                             f"{type(params).__name__}")
        allowed = self.space.params
        unknown = sorted(str(k) for k in params if k not in allowed)
        if unknown:
            raise ValueError(f"params: unknown name(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(allowed)}")
        missing = [k for k in ("VEC", "WG", "EDGE") if k not in params]
        if missing:
            raise ValueError(f"params lacks {', '.join(missing)}: give a point of the "
                             "rqa_lines tuning space (pyedmcl.kernels.rqa_lines.RQA_LINES"
                             ".space.params names them; flags left out are off)")
        edge = params["EDGE"]
        if isinstance(edge, bool) or not isinstance(edge, int | np.integer) or edge < 1:
            raise ValueError(f"params: EDGE={edge!r} must be a positive integer (rows per "
                             "sub-matrix)")
        rest = {k: v for k, v in params.items() if k != "EDGE"}
        why = self.space.type_problem(rest)
        if why is not None:
            raise ValueError(f"params: {why}")
        for k, v in rest.items():
            ok = sorted({*allowed[k], *SUPPORTED_BEYOND_SPACE.get(k, ())})
            if v not in ok:
                raise ValueError(f"params: {k}={v!r} is not allowed; {k} takes "
                                 f"{', '.join(map(str, ok))}")
        return {k: int(v) for k, v in params.items()}

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [4096]
        return [100_000] if info.is_gpu else [8192]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _LinesCase(backend, spec, size)

    # -- device buffers in the layout the kernels read -------------------------------

    def series(self, backend: Backend, params: Params, spec: LineSpec, x: np.ndarray,
               y: np.ndarray, x2: np.ndarray | None = None,
               y2: np.ndarray | None = None,
               tcol: np.ndarray | None = None, exact: Any = None,
               buffers: Any = None) -> tuple[Any, ...]:
        """Row and column series (x, y, x2, y2) on the device; column series are padded by
        VEC zeros on the left and at least :data:`SERIES_PAD` on the right (a work-item loads
        VEC lanes at once; DMAJ's runs of 32 + (E - 1) tau values), row series by
        :data:`SERIES_PAD` zeros at the end (PACK's 16-byte loads, DMAJ's). A row series that
        is its column series (auto- and joint RQA: ``x is y``) is copied from it on the
        device: one upload instead of two (at N = 946,303 the host's part of each is ~1 ms
        on an H100 host, before the first launch). Without JOINT the second pair is the
        first. PERCOL: the per-column thresholds ``tcol`` follow, padded alike (the
        kernels take them right after y2). EXACT (:meth:`LineSpec.exact_on`): ``exact``
        (:class:`pyedmcl.rqa.exact.Exact`) follows, laid out alike in float64.
        ``buffers``: where the device arrays come from, an object that acts as the
        backend with its own ``to_device`` and ``empty`` (a batch's pool,
        :func:`pyedmcl.rqa.dnr.reusing_buffers`); default the backend itself. The padded
        copies are uploaded as they are (``copy=False``: nothing else holds them)."""
        if buffers is not None:
            backend = buffers
        dt, vec = spec.dtype, params["VEC"]
        yd = backend.to_device(_padded(y, dt, vec, max(vec, SERIES_PAD)), copy=False)
        xd = _rows(backend, x, y, yd, dt, vec)
        extra: tuple[Any, ...] = ()
        if spec.percol:
            if tcol is None:
                raise ValueError("a PERCOL spec needs the per-column thresholds tcol")
            extra = (backend.to_device(_padded(tcol, dt, vec, max(vec, SERIES_PAD)), copy=False),)
        extra = (*extra, *self._exact_inputs(backend, params, spec, exact))
        if not spec.joint:
            return (xd, yd, xd, yd, *extra)
        y2d = backend.to_device(_padded(y2, dt, vec, max(vec, SERIES_PAD)), copy=False)
        return (xd, yd, _rows(backend, x2, y2, y2d, dt, vec), y2d, *extra)

    @staticmethod
    def _exact_inputs(backend: Backend, params: Params, spec: LineSpec, exact: Any
                      ) -> tuple[Any, ...]:
        """EXACT's kernel arguments (common/_exact.mako: args): the raw float64 series,
        per-column float64 thresholds and bounds (PERCOL), thresholds and bounds."""
        if spec.exact and spec.real == "float" and not backend.info.fp64:
            from .._precision import warn_no_fp64

            warn_no_fp64(backend.info.name)
        if not spec.exact_on(backend.info):
            return ()
        if exact is None:
            raise ValueError("an EXACT spec needs the float64 inputs (pyedmcl.rqa.exact.Exact)")
        f8, vec, pad = np.float64, params["VEC"], max(params["VEC"], SERIES_PAD)
        yd = backend.to_device(_padded(exact.y, f8, vec, pad), copy=False)
        out: tuple[Any, ...] = (_rows(backend, exact.x, exact.y, yd, f8, vec), yd)
        if spec.joint:
            y2d = backend.to_device(_padded(exact.y2, f8, vec, pad), copy=False)
            out = (*out, _rows(backend, exact.x2, exact.y2, y2d, f8, vec), y2d)
        else:
            out = (*out, *out)
        if spec.percol:
            out = (*out, backend.to_device(_padded(exact.tcol64, f8, vec, pad), copy=False),
                   backend.to_device(_padded(exact.bcol, np.float32, vec, pad), copy=False))
        return (*out, np.float64(exact.thr64), np.float64(exact.thr264),
                np.float32(exact.b), np.float32(exact.b2))

    def row_boxes(self, backend: Backend, spec: LineSpec, x: Any, n_rows: int) -> Any:
        """The boxes of the row points ``0 .. n_rows - 1`` of ``x`` a column walk-up skips
        white blocks of rows by (WBOX, _warm.mako): per level ``l < WARM_BOX_LEVELS``,
        block ``b`` of ``32^(l+1)`` rows and coordinate ``m``, the least and the largest
        value of ``x[i + m tau]`` over the block's rows, in the kernel's real type (the
        values it reads: its bound on a cell's distance is then one the cell's own
        computation never goes below), level after level, ``(b E + m) 2`` within one.
        ``x``: the row series on the device (:meth:`series`' first array), or a host array
        (uploaded in the spec's dtype). Built on the device (MODE ``boxes``, a launch a
        level, queued before the walk-ups that read them): the host neither computes nor
        waits before a range's first launch (decision 0169)."""
        if isinstance(x, np.ndarray):
            x = backend.to_device(np.ascontiguousarray(x, dtype=spec.dtype))
        k = backend.kernel(self.template, dict(_COLLECT_PARAMS, MODE="boxes", E=spec.E,
                                               TAU=spec.tau, REAL=spec.real), "rqa_row_boxes")
        counts, n = [], n_rows
        for _ in range(WARM_BOX_LEVELS):
            n = -(-n // 32)
            counts.append(n)
        out = backend.scratch(2 * spec.E * sum(counts), spec.dtype)  # level l reads l - 1's
        wg = min(64, backend.info.max_work_group_size)
        src, dst, nsrc = 0, 0, n_rows
        for level, nb in enumerate(counts):
            backend.launch(k, (round_up(nb * spec.E, wg),), (wg,), x, out, np.int32(level),
                           np.int32(nsrc), np.int32(src), np.int32(dst))
            src, dst, nsrc = dst, dst + 2 * spec.E * nb, nb
        return out

    def carry(self, backend: Backend, params: Params, mode: str, n: int,
              zeros: Callable[..., Any] | None = None, copies: int = 1) -> tuple[Any, ...]:
        """Carryover buffers, zeroed on the device, of a band of ``n`` lanes (columns:
        open black run, open white run, recurrence count; diagonals: open run) or,
        horizontal, of ``n`` rows (a row's first and last runs). ``zeros(backend, n,
        dtype)``: where they come from (default: new arrays, :meth:`Backend.zeros`).
        ``copies``: one set per threshold of an NTHR launch, laid end to end."""
        size = (n if mode == "horizontal" else n + params["VEC"]) * copies
        if zeros is None:
            return tuple(backend.zeros(size, np.uint32) for _ in range(CARRY_BUFFERS[mode]))
        return tuple(zeros(backend, size, np.uint32) for _ in range(CARRY_BUFFERS[mode]))

    @staticmethod
    def shared_layout(params: Params, n_rows: int, n_cols: int) -> tuple[int, int]:
        """SHARE: (64-row words per row block, stride of a word's columns) of the column
        bit buffer (zero padding of 64 + VEC columns on both sides)."""
        return (min(params["EDGE"], n_rows) + 63) // 64, n_cols + 2 * (64 + params["VEC"])

    # -- launches ---------------------------------------------------------------------

    def launch(self, backend: Backend, params: Params, spec: LineSpec, mode: str, *,
               row0: int, nrows: int, lane0: int, nlanes: int, stream: int = 0,
               wait_for: list[Any] | None = None, **fixed: Any) -> Any:
        """Enqueue one ``rqa_<mode>`` launch: rows ``row0 .. row0 + nrows - 1`` of lanes
        ``lane0 .. lane0 + nlanes - 1`` (columns, diagonals ``k = j - i``; horizontal: the
        row block's 64-row words, or with HCH its 32-row planes; hjoin: rows of the
        block); ``fixed``: the arguments of :meth:`launcher`. ``stream``, ``wait_for``:
        the backend queue and the events of other queues to follow."""
        go = self.launcher(backend, params, spec, mode, **fixed)
        return go(row0, nrows, lane0, nlanes, stream=stream, wait_for=wait_for)

    def launcher(self, backend: Backend, params: Params, spec: LineSpec, mode: str, *,
                 series: tuple[Any, ...], thr: float, thr2: float, n_rows: int, n_cols: int,
                 w: int, carry0: int, carry: tuple[Any, ...], hist: tuple[Any, ...],
                 sbits: Any = None, sstride: int = 0, skmin: int = 0, hrec: Any = None,
                 qbits: Any = None, kernel: Any = None, thresholds: tuple[Any, ...] = (),
                 boxes: Any = None) -> _Launcher:
        """The ``rqa_<mode>`` launches of one lane band, its arguments bound once: call
        the result with ``(row0, nrows, lane0, nlanes)`` per launch (a D&R run makes ~100
        launches at N = 10^5, each one else paying its argument handling on the host).
        ``carry`` holds the band's carryover buffers, lane ``carry0`` first (see
        :meth:`carry`; horizontal with HCH: none; hjoin: the rows' first and last runs);
        ``hist`` the 32-bit histograms (vertical, horizontal, hjoin: black and white
        vertical lines; diagonal: diagonal lines). SHARE: ``sbits`` (the column words,
        :meth:`shared_layout`), ``skmin`` the lowest diagonal of any diagonal launch.
        HCH: ``hrec`` the pieces of the rows per chunk (:meth:`hrec_words`). DMAJ: ``qbits``
        the second partial planes (``sbits``' layout). ``kernel``:
        this mode's kernel from :meth:`kernel` (else looked up). ``thresholds``: an NTHR
        launch's arguments after the others (the thresholds and their strides). MODE
        ``warmcol``: ``boxes``, the row series' boxes (:meth:`row_boxes`)."""
        k = kernel if kernel is not None else self.kernel(backend, params, spec, mode)
        hch = _hch(params, backend.info, mode)
        per_item = 1 if mode in ("horizontal", "hjoin", *WARM_MODES.values()) else params["VEC"]
        real = spec.dtype
        head = (*series, real(thr), real(thr2), np.int32(n_rows), np.int32(n_cols))
        at = len(head)  # row0, nrows, lane0, nlanes follow
        if hch:  # the chunks of a row block depend on its first row
            carry = (hrec, np.int32(0), *carry)
        shared = () if sbits is None or mode == "hjoin" else (sbits, np.int32(sstride),
                                                               np.int32(skmin))
        if spec.dmaj(mode, params, backend.info):
            if qbits is None:
                raise ValueError(f"a DMAJ {mode} launch needs the second partial planes qbits")
            shared = (*shared, qbits)
        if spec.template_params(mode, params, backend.info)["WBOX"]:
            if boxes is None:
                raise ValueError("a warmcol launch needs the row series' boxes (row_boxes)")
            hist = (*hist, boxes)
        zero = np.int32(0)
        segs, join = spec.dseg(mode, params, backend.info), None
        if segs > 1:  # DSEG: the segments' heads and tails, joined after every launch
            recs = backend.empty(carry[0].shape[0] * 2 * (segs - 1), np.uint32)
            jk = backend.kernel(self.template, dict(_COLLECT_PARAMS, MODE="djoin", DSEG=segs),
                                "rqa_djoin")
            join = backend.bind(jk, carry[0], recs, zero, zero, hist[0])
            carry = (*carry, recs)
        bound = backend.bind(k, *head, zero, zero, zero, zero, np.int32(w), np.int32(carry0),
                             *carry, *hist, *shared, *thresholds)
        return _Launcher(backend, bound, at, per_item, _wg(mode, params, backend.info), hch,
                         hch if mode == "horizontal" else 1, n_cols,
                         _warm(mode, backend.info) or 1, segs, join, carry0)

    @staticmethod
    def hchunks(params: Params, row0: int, n_cols: int) -> int:
        """HCH: chunks of the row block from ``row0`` (its first plane's, the most)."""
        return _chunks(int(params["HCH"]), row0, n_cols)

    def hrec_words(self, params: Params, n_rows: int, n_cols: int) -> int:
        """HCH: 32-bit words of the piece buffer (two per row of a row block and chunk of
        the first row block, which has the most)."""
        return 2 * min(params["EDGE"], n_rows) * max(1, self.hchunks(params, 0, n_cols))

    @staticmethod
    def uses_hch(params: Params, info: DeviceInfo) -> bool:
        """Whether SYM's horizontal launches of ``params`` take the chunked walk and hjoin."""
        return _hch(params, info, "horizontal") > 0

    def kernel(self, backend: Backend, params: Params, spec: LineSpec, mode: str) -> Any:
        """The (built, cached) ``rqa_<mode>`` kernel of ``params`` and ``spec``."""
        return backend.kernel(self.template, spec.template_params(mode, params, backend.info),
                              f"rqa_{mode}")

    def fold(self, backend: Backend, pairs: list[tuple[Any, Any]], n: int,
             stream: int = 0) -> None:
        """Add bins ``0 .. n - 1`` of each 32-bit histogram into its 64-bit total and clear
        them (``pairs``: (h32, h64) device arrays), in the backend queue ``stream``."""
        k = backend.kernel(self.template, _COLLECT_PARAMS, "rqa_accumulate")
        wg = min(64, backend.info.max_work_group_size)
        queue = {"stream": stream} if stream else {}
        for h32, h64 in pairs:
            backend.launch(k, (round_up(n, wg),), (wg,), h32, h64, np.int32(n), **queue)

    def add_runs(self, backend: Backend, runs: Any, n: int, h32: Any, i0: int = 0) -> None:
        """Count the positive lengths of ``runs[i0:i0 + n]`` (a carryover buffer: the runs
        left open after the last row block) into the 32-bit histogram ``h32`` (index
        length - 1), on the device."""
        if n <= 0:
            return
        k = backend.kernel(self.template, _COLLECT_PARAMS, "rqa_add_runs")
        wg = min(64, backend.info.max_work_group_size)
        backend.launch(k, (round_up(n, wg),), (wg,), runs, np.int32(i0), np.int32(n), h32)

    def collect(self, backend: Backend, d: Any, v: Any, w: Any, rows: tuple[Any, Any] | None,
                n: int, cap: int = 0) -> tuple[Any, list[tuple[Any, Any]]]:
        """Make a run's 64-bit totals ready to read (bins ``0 .. n - 1``): ``rows`` (SYM's
        row-walk totals hv, hw) added into ``v`` and ``w`` on the device. Returns a device
        uint32[6]: one past the last nonzero bin of ``d``, ``v`` and ``w`` (0: empty), then
        how many bins of each are nonzero; and with ``cap > 0`` per total (bins uint32,
        counts uint64) device arrays of ``cap`` that hold its nonzero bins where there are
        at most ``cap`` (MODE collect's rqa_sparse), so that the host reads those pairs or
        the bins up to the last nonzero one (:func:`pyedmcl.rqa.dnr.read_totals`)."""
        k = backend.kernel(self.template, _COLLECT_PARAMS, "rqa_collect")
        ext = backend.zeros(6, np.uint32)
        hv, hw = rows if rows is not None else (d, d)  # read only where merged
        wg = min(64, backend.info.max_work_group_size)
        backend.launch(k, (round_up(max(n, 1), wg),), (wg,), d, v, w, hv, hw,
                       np.int32(rows is not None), np.int32(n), ext)
        if cap <= 0:
            return ext, []
        pairs = [(backend.scratch(cap, np.uint32), backend.scratch(cap, np.uint64))
                 for _ in range(3)]
        sk = backend.kernel(self.template, _COLLECT_PARAMS, "rqa_sparse")
        backend.launch(sk, (round_up(max(n, 1), wg),), (wg,), d, v, w, np.int32(n),
                       np.uint32(cap), ext, *(a for pair in pairs for a in pair))
        return ext, pairs

    def count_sums(self, backend: Backend, counts: Any, i0: int, n: int) -> Any:
        """The sum of the uint32 ``counts[i0:i0 + n]`` (a column task's recurrences), as a
        device uint64 array of partial sums (one per 1,024 entries) for the host to add."""
        k = backend.kernel(self.template, _COLLECT_PARAMS, "rqa_count_sums")
        groups = max(1, (n + 1023) // 1024)
        sums = backend.empty(groups, np.uint64)
        backend.launch(k, (groups * 64,), (64,), counts, np.int32(i0), np.int32(n), sums)
        return sums

    def sym_join(self, backend: Backend, col: tuple[Any, Any, Any], rows: tuple[Any, Any],
                 j0: int, nj: int, n: int, diag_black: bool, white_border: bool, hlen: int,
                 hv: Any, hw: Any) -> Any:
        """SYM: join the open runs of columns ``j0 .. j0 + nj - 1`` (``col``: the column
        task's carryovers vr, wr, npts) with their rows' first and last runs (``rows``:
        head, tail) through the diagonal, counting them into the 32-bit histograms
        ``hv``, ``hw``, on the device. Returns the per-work-group sums of ``npts`` (64-bit;
        the recurrences above the diagonal), which the host adds up."""
        k = backend.kernel(self.template, dict(_COLLECT_PARAMS, MODE="symjoin"), "rqa_symjoin")
        groups = max(1, (nj + 63) // 64)
        nsum = backend.empty(groups, np.uint64)
        backend.launch(k, (groups * 64,), (64,), *col, *rows, np.int32(j0), np.int32(nj),
                       np.int32(n), np.int32(diag_black), np.int32(white_border),
                       np.int32(hlen), hv, hw, nsum)
        return nsum


def _chunks(hch: int, row0: int, n_cols: int) -> int:
    """HCH: chunks of ``hch`` 64-column tiles in the row block from ``row0`` (its first
    plane's, the most)."""
    return max(0, ((n_cols + 63) // 64 - (row0 + 1) // 64 + hch - 1) // hch)


def _padded(a: np.ndarray, dt: type, left: int, right: int) -> np.ndarray:
    """``a`` as ``dt`` between ``left`` and ``right`` zeros, cast in one pass."""
    n = len(a)
    out = np.empty(left + n + right, dtype=dt)
    out[:left] = 0
    out[left:left + n] = a
    out[left + n:] = 0
    return out


def _rows(backend: Backend, x: np.ndarray, y: np.ndarray, yd: Any, dt: type, vec: int) -> Any:
    """The row series ``x`` on the device with :data:`SERIES_PAD` zeros after it: copied on
    the device from ``yd`` (``y`` padded, :meth:`RQALinesKernel.series`) where ``x is y``,
    else uploaded."""
    if x is y:
        n = len(x) + SERIES_PAD  # y's right padding holds at least SERIES_PAD zeros
        xd = backend.empty(n, dt)
        try:
            backend.copy_within(xd, 0, yd, vec, n)
            return xd
        except NotImplementedError:  # a backend without device copies
            pass
    return backend.to_device(_padded(x, dt, 0, SERIES_PAD), copy=False)


class _Launcher:
    """One lane band's ``rqa_<mode>`` launches (:meth:`RQALinesKernel.launcher`): per call
    only the rows and lanes (and HCH's chunk count) change."""

    __slots__ = ("backend", "bound", "at", "per_item", "wg", "hch", "per_chunk", "n_cols",
                 "lane_items", "segs", "join", "carry0")

    def __init__(self, backend: Backend, bound: Any, at: int, per_item: int, wg: int,
                 hch: int, per_chunk: int, n_cols: int, lane_items: int = 1, segs: int = 1,
                 join: Any = None, carry0: int = 0):
        self.backend, self.bound, self.at = backend, bound, at
        self.per_item, self.wg = per_item, wg
        self.hch, self.per_chunk, self.n_cols = hch, per_chunk, n_cols
        self.lane_items = lane_items  # WARM: work-items per lane
        self.segs, self.join, self.carry0 = segs, join, carry0  # DSEG: segments, djoin

    def __call__(self, row0: int, nrows: int, lane0: int, nlanes: int, *, stream: int = 0,
                 wait_for: list[Any] | None = None) -> Any:
        at = self.at
        changes = {at: np.int32(row0), at + 1: np.int32(nrows), at + 2: np.int32(lane0),
                   at + 3: np.int32(nlanes)}
        items = (nlanes + self.per_item - 1) // self.per_item * self.lane_items
        if self.hch:  # horizontal: HCH work-items per (plane, chunk); hjoin: per (row, chunk)
            nchm = _chunks(self.hch, row0, self.n_cols)
            items *= nchm * self.per_chunk
            changes[at + 7] = np.int32(nchm)  # after w, carry0 and hrec
        gsz = round_up(max(items, 1), self.wg)
        if self.segs == 1:
            return self.backend.launch_bound(self.bound, (gsz,), (self.wg,), changes,
                                             stream=stream, wait_for=wait_for)
        # DSEG: (lanes, segments), then the segments' runs joined in the same queue
        self.backend.launch_bound(self.bound, (gsz, self.segs), (self.wg, 1), changes,
                                  stream=stream, wait_for=wait_for)
        jwg = min(64, self.backend.info.max_work_group_size)
        return self.backend.launch_bound(
            self.join, (round_up(max(nlanes, 1), jwg),), (jwg,),
            {2: np.int32(lane0 - self.carry0), 3: np.int32(nlanes)}, stream=stream)


RQA_LINES = RQALinesKernel()


class _LinesCase(TuningCase):
    """Auto-RQA of a logistic-map series (E, tau from the spec, RR about 0.1), the whole
    Divide & Recombine run (:attr:`RQALinesKernel.schedule`)."""

    def __init__(self, backend: Backend, spec: dict[str, Any], size: int):
        self.backend = backend
        self.spec = LineSpec(spec["E"], spec["TAU"], spec["METRIC"], spec.get("REAL", "float"))
        n = size + (spec["E"] - 1) * spec["TAU"]
        s = np.empty(n)
        s[0] = 0.4
        for i in range(1, n):
            s[i] = 3.9 * s[i - 1] * (1 - s[i - 1])
        self.x = s
        self.n = size
        self.out: np.ndarray | None = None

    def run(self, params: Params) -> list[Any]:
        if RQA_LINES.schedule is None:
            raise RuntimeError("the rqa_lines tuning case needs its schedule: import pyedmcl.rqa")
        h = RQA_LINES.schedule([self.backend], self.x, self.x, 0.3 ** 2, spec=self.spec,
                         n_rows=self.n, n_cols=self.n, diag_ranges=[(1, self.n)],
                         params=params, symmetric=True)
        self.out = np.concatenate([h.diagonal, h.vertical, h.white, [h.n_recurrences]])
        return h.events

    def output(self) -> np.ndarray:
        assert self.out is not None
        return self.out
