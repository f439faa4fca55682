"""The xmap kernel family: the all-to-all map's three tunable kernels (``pyedmcl tune
xmap_knn`` / ``xmap_scan`` / ``xmap_skill``).

One family for the three because they exist for the cross map's batching and share its
tuning data (:func:`_mixed_series`) and batch budgets: the k-NN kernels reuse the
``knn`` / ``knn_scan`` templates and launchers, tuned apart on batches of series; the
skill kernel owns the family's template folder, ``templates/xmap/``
(``xmap_lookup.cl.mako``: the kernels ``pack`` and ``xmap_skill``), and its launchers.

* ``xmap_knn``: the EDM k-NN kernel (``knn/knn.cl.mako``) batched over
  library series (one launch builds the tables of many series): the same space
  as the ``knn`` family (VARIANT, WG, TILE, ...), tuned separately because the
  batched problem (many small tables) favours other settings than one large table.
* ``xmap_scan``: the fused multi-E scan (``knn_scan/knn_scan.cl.mako``) batched
  over library series (mixed E: every E-group's tables in one pass): the
  ``knn_scan`` space, tuned on a batch of series (a batch fills a GPU without
  cutting the library: SPLIT 1 is the heuristic there).
* ``xmap_skill``: the fused many-target lookup + rho (``xmap/xmap_lookup.cl.mako``;
  its ``pack`` kernel, which turns k-NN tables into weights, has nothing to tune):
  TJ, the targets sharing one read of a table row, and VEC (those targets as
  the lanes of explicit vectors: CPUs) or PF (the query loop software-pipelined:
  GPUs), or LANES (targets as work-items, LWG per work-group: coalesced reads);
  LMAJ (with LANES), the grid's order: libraries first, so the work-groups on one
  compute unit share their targets' slab in L1 (faster on the H100 for some shapes,
  slower for others: a tuning choice, not a default);
  LB, the libraries of one work-group (the same targets: on GPUs the work-groups
  resident on one SM then gather from fewer target series, which stay in its L1);
  CM (with LANES), pack's table rows in query-class order, so that the rows one
  work-item streams are adjacent; ST (with CM, GPUs), those rows staged in local
  memory CH at a time, read there by every work-item of the library instead of one
  global load per entry and work-item (:func:`staged_rows`); SPL (with ST), the query
  classes' reduction tree cut into subtrees streamed by separate work-items, so that
  groups of a few hundred targets fill a GPU (below :data:`FEW_TARGETS_GPU` a GPU's
  group runs queries as work-items, :func:`gpu_layout`). On GPUs an E-group of at
  least :func:`wide_targets` targets has its own spec bucket ("-wide"; untuned:
  :func:`wide_layout`, staged target lanes; decisions 0080, 0082).
  The reduction's work-group size WG is not tuned: it fixes the reduction order,
  which keeps rho bit-identical to :func:`pyedmcl.ccm` (LANES evaluates the same
  tree per work-item).

Every candidate gives the same output bit for bit (the tuner checks it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo, inline_vector_ops
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from .knn import KNN, SLIDE_LAYOUT_GPU, KnnKernel, slide_applies
from .knn_scan import KNN_SCAN, KnnScanKernel, batch_inputs
from .knn_scan import k_per_e as _ks
from .lookup import acc_type, ccm_skill_wg, pow2_floor

#: bytes of packed tables (indices, weights, weight sums) per batch of libraries
TABLE_BUDGET_GPU = 256 << 20
TABLE_BUDGET_CPU = 32 << 20


def scan_table_budget(info: DeviceInfo) -> int:
    """Bytes for a fused-scan batch (every E plane of its libraries, the partial lists of
    a split scan, the packed tables of one group): larger than the per-E budget, so that
    the scan and the skill launches (one per group and batch) stay large; on GPUs with
    memory to spare up to 1/16 of it (at most 4 GiB; larger batches measured faster on
    the H100, the same matrix)."""
    if not info.is_gpu:
        return TABLE_BUDGET_CPU
    return max(4 * TABLE_BUDGET_GPU, min(info.global_mem_bytes // 16, 4 << 30))


def _k_bucket(k: int) -> str:
    return next((f"K{hi}" for hi in (2, 4, 8, 16, 32) if k <= hi), "K64")


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:  # the batched kernel's tuned choice on the H200 (rows, EA 0)
        return {"VARIANT": "rows", "WG": 16, "TILE": 256, "QB": 1, "EA": 0, "INS": "reg",
                "FLAG": 1, "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}
    # CPUs: explicit float16 vectors over library points (PoCL 3.0 does not vectorise
    # the cols variant's work-item loop here)
    return {"VARIANT": "vec", "WG": 32, "TILE": 512, "QB": 16, "EA": 0, "INS": "reg", "FLAG": 1,
            "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}


def _fits(p: Params, info: DeviceInfo) -> bool:
    # SLIDE: the engine passes whether its library rows are contiguous (CCM's rows are),
    # and the tuning case's are
    return KNN.space.constraint(p, info)


class XmapKnnKernel(KnnKernel):
    """k-NN tables of a batch of library series (``knn/knn.cl.mako``, series batching)."""

    name = "xmap_knn"
    #: many small tables: SLIDE only where a tuned entry chose it, or on GPUs by
    #: :data:`SLIDE_LAYOUT_GPU` (:meth:`chosen`)
    slide_untuned_gpu = False
    space = TuningSpace(params=KNN.space.params, heuristic=_heuristic, constraint=_fits,
                        filled=KNN.space.filled)
    #: a GPU's layout for a batch of contiguous libraries where SLIDE applies and its
    #: entry never measured SLIDE (every GPU entry shipped predates it) or none exists
    #: (the knn family's; decisions 0104, 0112 and 0141)
    SLIDE_LAYOUT_GPU: Params = SLIDE_LAYOUT_GPU

    def chosen(self, info: DeviceInfo, choice: Any, spec: dict[str, Any],
               contiguous: bool) -> Params:
        """:data:`SLIDE_LAYOUT_GPU` on a GPU where SLIDE applies (contiguous libraries,
        a short window span) and the choice did not measure SLIDE (an entry without it, or the
        heuristic); else the choice's parameters."""
        measured = choice.entry is not None and "SLIDE" in choice.entry.get("params", {})
        if info.is_gpu and not measured and slide_applies(spec, contiguous):
            return dict(self.SLIDE_LAYOUT_GPU)
        return choice.params

    def default_specs(self):
        return [{"E": E, "TAU": 1, "K": E + 1, "METRIC": "euclidean", "REAL": "float"}
                for E in (2, 3, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _KnnCase(backend, spec, size)


class _KnnCase(TuningCase):
    nb = 4

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec, self.M = be, {"METRIC": "euclidean", **spec}, size
        n = size + (spec["E"] - 1) * spec["TAU"]
        self.n = n
        rng = np.random.default_rng(5)
        self.x = be.to_device(rng.standard_normal(self.nb * n).astype(np.float32))
        self.pts = be.to_device(np.arange(size, dtype=np.int32))
        self.idx = be.empty((self.nb * size * spec["K"],), np.int32)
        self.dist = be.empty((self.nb * size * spec["K"],), np.float32)

    def run(self, params: Params) -> list[Any]:
        return [KNN.launch(self.be, params, self.spec, self.x, self.pts, self.M, self.pts, self.M,
                           self.nb, 0, self.idx, self.dist, series_stride=self.n)]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.idx)


def _scan_heuristic(info: DeviceInfo) -> Params:
    # CPUs: knn_scan's private lists (INS "key"); Intel's runtime, 2-core Zen 5, batch
    # case E=1..10, n=1,000: 2.3 vs 8.1 ns per (query, library row) for the
    # local-memory lists ("q"); E=1..20 15 vs 33 ns. GPUs: the H100's winners at
    # E 1..10 / 1..20 and 1,024 / 4,096 rows, batches of 64 series, take one tile per
    # 32 work-items (QB 4 at E 1..20, 8 at E 1..10)
    if info.is_gpu:
        return dict(KNN_SCAN.space.heuristic(info), SPLIT=1, TILE=32)
    return dict(KNN_SCAN.space.heuristic(info), SPLIT=1)


class XmapScanKernel(KnnScanKernel):
    """Fused multi-E k-NN tables of a batch of library series (``knn_scan/knn_scan.cl.mako``)."""

    name = "xmap_scan"
    space = TuningSpace(params=KNN_SCAN.space.params, heuristic=_scan_heuristic,
                        constraint=KNN_SCAN.space.constraint, filled=KNN_SCAN.space.filled)

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def params_for(self, be: Backend, spec: dict[str, Any], nq: int, nl: int) -> Params:
        """Tuned parameters fitted to local memory; never an automatic SPLIT (the
        batch of series fills the device)."""
        return self.fitted_params(be, spec, max(nq, nl))

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _ScanBatchCase(backend, self._norm(spec), size)


def _mixed_series(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """``(m, n)`` float32 tuning data: the first half random walks, the rest noisy
    oscillators. The cross map's kernels run at data-dependent speeds (smooth series:
    coalesced target gathers, tight k-NN thresholds early; noisy ones: neither), so
    their tuning cases hold both kinds."""
    walks = np.cumsum(rng.standard_normal((m - m // 2, n)), axis=1)
    t = np.arange(n)[None, :]
    osc = (np.sin(t * rng.uniform(0.05, 0.6, (m // 2, 1)) + rng.uniform(0, 6, (m // 2, 1)))
           + 0.2 * rng.standard_normal((m // 2, n)))
    return np.concatenate([walks, osc]).astype(np.float32)


class _ScanBatchCase(TuningCase):
    """``nb`` series of ``size`` rows, leave-one-out over all rows (the map's CCM), as
    many as the map's scan batches hold (GPUs: up to 64, as the engine's batches: with
    16 libraries splitting each scan could pay, with the real 64 SPLIT=1 is 1.3-3x
    faster on the H100), half random walks, half noisy
    oscillators (:func:`_mixed_series`; the tile order gains on the first, not on
    the second)."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec = be, dict(spec, KNN=0)
        emax, tau = spec["EMAX"], spec["TAU"]
        self.kmax = max(_ks(emax, 0))
        self.dt = np.float64 if spec.get("REAL") == "double" else np.float32
        # one library's tables (indices + distances), twice for a split scan's partials
        per = 2 * emax * size * self.kmax * (4 + np.dtype(self.dt).itemsize)
        self.nb = int(min(64, max(8, scan_table_budget(be.info) // per))) if be.info.is_gpu else 2
        self.qt = np.arange(size, dtype=np.int64)
        self.qemax = np.minimum(self.qt // tau + 1, emax)
        self.pad = (emax - 1) * tau
        self.x = _mixed_series(np.random.default_rng(8), self.nb, size)
        shape = (self.nb, emax, size, self.kmax)
        self.idx, self.dist = be.empty(shape, np.int32), be.empty(shape, self.dt)
        self._dev: dict = {}

    def _inputs(self, params: Params):
        lanes = KNN_SCAN.padded_lanes(params, self.qt.size)
        if lanes not in self._dev:
            xp, ints, ldx = batch_inputs(self.x, self.qt, self.qemax, self.pad, lanes, self.dt)
            self._dev[lanes] = (self.be.to_device(xp), self.be.to_device(ints), ldx)
        return self._dev[lanes]

    def run(self, params: Params) -> list[Any]:
        xp, ints, ldx = self._inputs(params)
        part = None
        if params["SPLIT"] > 1:
            shape = (self.nb, params["SPLIT"]) + tuple(self.idx.shape[1:])
            part = (self.be.empty(shape, np.int32), self.be.empty(shape, self.dt))
        nq = self.qt.size
        return XMAP_SCAN.launch(self.be, params, self.spec, xp, ints, nq, 0, nq, 0, self.idx,
                                self.dist, part, nseries=self.nb, xstride=ldx)

    def output(self) -> np.ndarray:
        return self.be.to_host(self.dist)


def _skill_heuristic(info: DeviceInfo) -> Params:
    # explicit vectors over targets where the runtime does not vectorise the
    # work-item loop itself (PoCL), read time-major (VEC=2: one vector load per time)
    if not info.is_gpu and info.runtime == "pocl":
        return {"TJ": 8, "VEC": 2, "LANES": 0, "LWG": 32, "PF": 0, "LB": 1}
    if info.is_gpu:  # two targets per work-item, two libraries per work-group: the
        # targets of the work-groups on one SM stay in its L1 (the H100's best)
        return {"TJ": 2, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 1, "LB": 2}
    # Intel's CPU runtime vectorises over work-items: targets as work-items (faster than
    # queries as work-items there)
    return {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": 32, "PF": 0, "LB": 1}


def _skill_constraint(p: Params, info: DeviceInfo) -> bool:
    if p["LB"] > 1 and (p["VEC"] or not info.is_gpu or (not p["LANES"] and (
            p["LB"] > 4 or ccm_skill_wg(info) * p["LB"] > info.max_work_group_size))):
        return False  # libraries per work-group: GPUs (L1 sharing)
    if (p.get("LMAJ", 0) or p.get("CM", 0)) and not p["LANES"]:
        return False  # the grid order and table order of the target-lane layout
    if p.get("ST", 0) and not (p.get("CM", 0) and info.is_gpu):
        return False  # staged table rows: a class's rows are one stretch (CM); GPUs
    if not p.get("ST", 0) and p.get("CH", 16) != 16:
        return False  # CH unused: one value only
    if p.get("PR", 0) and not p.get("ST", 0):
        return False  # staged entries as pairs: staged rows only
    if p.get("SPL", 1) > 1 and (not p.get("ST", 0) or split_roots_bytes(p, info) > 16384):
        return False  # subtrees a target: staged rows, their roots in 16 KiB
    if p["LANES"]:  # TJ targets per work-item; LWG x LB is the work-group
        return (p["TJ"] <= 4 and not p["VEC"] and not p["PF"]
                and p["LWG"] * p["LB"] * p.get("SPL", 1) <= info.max_work_group_size)
    if p["PF"]:  # the pipelined query loop: scalar targets, a register per value in flight
        return not p["VEC"] and p["LWG"] == 32 and p["TJ"] <= 4
    if p["VEC"] == 2 and info.is_gpu:
        return False  # time-major vector loads: the CPUs' layout
    # LWG unused: one value only; vector lanes need more than one target
    return p["LWG"] == 32 and (p["TJ"] > 1 or not p["VEC"])


#: streams of the embedding scan's skill reduction (``diag``: each library predicting its
#: own series; the rho that picks each series' E). Its own width, not CCM's: the scan's
#: rho need agree only across devices, and its one-target libraries have no target
#: lanes, so a library's streams are all the work-items there are; the scan runs one
#: small launch per E and batch, whose time is one work-item's stream: more streams,
#: shorter launches
SCAN_SKILL_WG = 64


def scan_skill_wg(info: DeviceInfo) -> int:
    """The embedding scan's reduction width on the device ``info`` (:data:`SCAN_SKILL_WG`,
    or the largest power of two the device allows)."""
    return pow2_floor(min(SCAN_SKILL_WG, info.max_work_group_size))


def fixed_shift(spec: dict[str, Any], params: Params) -> int:
    """Whether a skill reduces as CCM does (``FS``: each target's streams shifted by its
    ``shift``, :func:`pyedmcl.primitives.lookup.ccm_shifts`): WEIGHT "ccm" outside the embedding
    scan, whose layout sets ``FS`` 0 (its own reduction, :data:`SCAN_SKILL_WG`)."""
    return int(params.get("FS", spec.get("WEIGHT", "ccm") == "ccm"))


def wide_targets(info: DeviceInfo) -> int:
    """Targets from which an E-group's skill on the GPU ``info`` is "wide" (the ``-wide``
    spec bucket): with a scan batch of 64 libraries the target-lane layout then fills
    the device (64 x 32 x compute units = 2,048 work-items per unit)."""
    return 32 * info.compute_units


def wide_layout(info: DeviceInfo) -> Params:
    """The untuned layout of a wide skill on a GPU: one target per work-item (LANES),
    the library tables in query-class order (CM) staged in local memory 16 rows at a
    time (ST, CH), one library per work-group of 64 targets, the grid libraries first
    (LMAJ): faster on the H100 than 32 libraries per work-group sharing the targets'
    slab in L1 with the tables read from global memory, the same rho (decisions 0080,
    0082)."""
    lwg = 64 if info.max_work_group_size >= 64 else 32  # values of the tuning space
    return {"TJ": 1, "VEC": 0, "LANES": 1, "LWG": lwg, "PF": 0, "LB": 1, "LMAJ": 1, "CM": 1,
            "ST": 1, "CH": 16}


def split_roots_bytes(p: Params, info: DeviceInfo) -> int:
    """Local memory for the subtree roots of a split skill (SPL > 1): 8 statistics per
    subtree, target and library of the work-group (0 without a split)."""
    spl = int(p.get("SPL", 1))
    if spl <= 1:
        return 0
    return spl * int(p["LB"]) * int(p["LWG"]) * int(p["TJ"]) * 8 * (8 if info.fp64 else 4)


def staged_rows(ch: int, k: int, lb: int, info: DeviceInfo, spl: int = 1,
                fixed: int = 0) -> int:
    """Table rows a staged skill (ST) holds in local memory at once: the layout's CH,
    fewer where the rows of ``k`` entries (a time and a weight each) and weight sums of
    LB libraries x SPL subtrees, beside ``fixed`` bytes (a split's roots), would not fit
    the device's local memory (at most 32 KiB of it, so that two work-groups fit a
    compute unit)."""
    acc = 8 if info.fp64 else 4
    budget = min(info.local_mem_bytes, 32768) - fixed
    per_row = lb * spl * (k * (4 + acc) + acc) + 4 * spl
    return int(max(1, min(ch, budget // per_row)))


#: the layout values of a kernel rendered without tuned ones (``pack``)
_LAYOUT = {"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 64, "PF": 0, "LB": 1, "LMAJ": 0, "CM": 0,
           "ST": 0, "CH": 16, "SPL": 1, "PR": 0}


def offsets_fit(y_dev: Any) -> bool:
    """Whether every byte offset into the target array ``y_dev`` fits 32 bits: a staged
    skill (ST) then stages each table entry as the offset it reads (``O32``)."""
    size, dtype = int(getattr(y_dev, "size", 0)), getattr(y_dev, "dtype", None)
    return dtype is not None and 0 < size * np.dtype(dtype).itemsize <= 1 << 32


def reads_time_major(params: Params) -> bool:
    """Whether a skill layout reads its targets time-major (:func:`time_major`): target
    lanes (LANES) and the vector-lane layout (VEC = 2)."""
    return bool(params["LANES"] or params["VEC"] == 2)


#: time-major rows padded to a multiple of this many values: at 32, each row of float32
#: targets starts on a 128-byte line, so a 32-lane tile's read at any time is one line,
#: not two (a VEC=2 vector load takes TJ <= 16 consecutive targets, within one row
#: either way)
TIME_MAJOR_ALIGN = 32


def time_major_pitch(ntg: int, tile: int = 1) -> int:
    """The row pitch (values) of ``ntg`` targets laid out time-major: a multiple of
    :data:`TIME_MAJOR_ALIGN` and of ``tile`` (:func:`lane_tile`: the targets a layout's
    work-group reads, all of them inside the row)."""
    a = math.lcm(TIME_MAJOR_ALIGN, max(1, int(tile)))
    return -(-ntg // a) * a


def lane_tile(params: Params) -> int:
    """The targets one work-group of a skill layout reads side by side in each time-major
    row, whether or not they exist: LWG x TJ for staged target lanes reading by byte
    offsets (ST, O32: each work-item's TJ targets at constant distances from its first,
    unclamped), else 1 (the last real target stands in for the missing ones)."""
    if params.get("LANES") and params.get("ST") and params.get("O32", 1):
        return int(params["LWG"]) * int(params["TJ"])
    return 1


def time_major(Y: np.ndarray, tile: int = 1) -> tuple[np.ndarray, int]:
    """Series ``Y`` (ntg, n) time-major, ``(n, ldy)``, each row zero-padded to ``ldy``
    (:func:`time_major_pitch` for work-groups of ``tile`` targets): what the LANES and
    VEC=2 skills read."""
    ntg, n = Y.shape
    ldy = time_major_pitch(ntg, tile)
    yt = np.zeros((n, ldy), dtype=Y.dtype)
    yt[:, :ntg] = Y.T
    return yt, ldy


#: local memory a class-major ``pack`` work-group's tile may take (bytes; less where the
#: device has less)
PACK_TILE_BYTES = 24 << 10


def pack_tile(params: Params, info: DeviceInfo) -> int:
    """Rows of each of 8 query classes that a class-major ``pack`` work-group takes (CM;
    0 without): the most of 8, 4, 2, 1 whose tile (8 x that many rows of K entries, an
    index and a weight each, at most 12 bytes, first holding the raw row's index and
    distance, and a weight sum) fits
    :data:`PACK_TILE_BYTES` of the device's local memory (8 up to K = 31, 4 up to 63).
    The 8 classes' queries of a row index are consecutive (their raw rows read
    together); a class's rows are one stretch of the packed table (written whole)."""
    if not params.get("CM", 0):
        return 0
    budget = min(PACK_TILE_BYTES, info.local_mem_bytes)
    row = params["K"] * 12 + 8
    return next((piw for piw in (8, 4, 2) if 8 * piw * row <= budget), 1)


def pack_geometry(nq: int, wg: int, piw: int) -> int:
    """Work-items along a class-major ``pack``'s first dimension: a work-group of
    ``8 * piw`` per tile of 8 query classes (of ``wg``) x ``piw`` rows of each (classes
    hold ``ceil(nq / wg)`` rows at most)."""
    rows = -(-nq // wg)  # the largest class
    return -(-wg // 8) * -(-rows // piw) * 8 * piw


def class_major_rows(nq: int, wg: int) -> np.ndarray:
    """The query of each packed table row in pack's CM order: the queries of class 0
    (q = 0, wg, 2 wg, ...), then class 1, ...: what one work-item of a target-lane
    skill streams is one contiguous stretch of the table."""
    return np.concatenate([np.arange(r, nq, wg) for r in range(min(wg, nq))]).astype(np.int64)


def subtrees(params: Params, wg: int) -> int:
    """Work-items a target and library of a skill layout (SPL): staged layouts only, at
    most one a query class of the ``wg``-class reduction tree."""
    return min(int(params.get("SPL", 1)), wg) if params.get("ST", 0) else 1


def skill_geometry(params: Params, ntg: int, nb: int, wg: int) -> tuple[tuple, tuple]:
    """(global, local) size of ``xmap_skill`` for ``ntg`` targets and ``nb`` libraries:
    target lanes (LANES) or TJ targets per work-group of ``wg`` queries."""
    lb = int(params.get("LB", 1))
    if params["LANES"]:
        tiles, nlg, lwg = -(-ntg // (params["LWG"] * params["TJ"])), -(-nb // lb), params["LWG"]
        nl = lb * subtrees(params, wg)
        if params.get("LMAJ", 0):  # libraries first (_lanes.mako)
            return (nlg * lwg, tiles * nl), (lwg, nl)
        return (tiles * lwg, nlg * nl), (lwg, nl)
    return (-(-ntg // params["TJ"]) * wg, -(-nb // lb) * lb), (wg, lb)


def lanes_for(params: Params, ntg: int) -> int:
    """Work-items per work-group of a target-lane skill (LANES) on a CPU for ``ntg``
    targets: the tuned LWG, lowered to the targets there are (at least 8, a power of
    two) so that a small E-group of a mixed-E map does not run 32 lanes for a few
    targets. Each target is its own work-item, so the result does not change."""
    want = max(8, 1 << max(0, (-(-ntg // params["TJ"]) - 1).bit_length()))
    return int(min(params["LWG"], want))


#: below this many targets a CPU's skill runs one query per work-item: the crossover
#: with target lanes on Intel's runtime (the tuned vector layouts are no faster below it
#: and slow to build, see :func:`cpu_layout`)
FEW_TARGETS = 24

#: the query-per-work-item layout a CPU's small E-groups take instead of target lanes
SCALAR_LAYOUT = {"TJ": 1, "VEC": 0, "LANES": 0, "LWG": 32, "PF": 0, "LB": 1, "LMAJ": 0, "CM": 0,
                 "ST": 0, "CH": 16, "SPL": 1, "PR": 0}


#: below this many targets a GPU's E-group runs queries as work-items, whatever the tuned
#: target-lane layout: a few targets leave most lanes of a tile idle (the crossover on
#: the H100, the same rho; decision 0107; the first use of small groups takes one
#: runtime-K program, :meth:`pyedmcl.xmap.skill_plan.SkillPlan.choose_runtime_k`)
FEW_TARGETS_GPU = 200


def gpu_layout(params: Params, ntg: int, info: DeviceInfo) -> Params:
    """A GPU's skill layout for an E-group of ``ntg`` targets: below
    :data:`FEW_TARGETS_GPU` a target-lane layout gives way to the GPU heuristic's
    (queries as work-items, :func:`_skill_heuristic`); other layouts unchanged. Every
    layout gives the same rho."""
    if ntg < FEW_TARGETS_GPU and params["LANES"]:
        return dict(_LAYOUT, **_skill_heuristic(info))
    return params


def cpu_layout(params: Params, ntg: int, time_major: bool = False) -> Params:
    """A CPU's skill layout for an E-group of ``ntg`` targets: queries as work-items below
    :data:`FEW_TARGETS` whatever the tuned layout, with K a kernel argument (KR: one
    program for every small group; ``time_major``: all the group's targets as the lanes
    of one time-major vector, VEC=2, one program per K), else target lanes (LANES) sized
    to the group (:func:`lanes_for`), other layouts unchanged. Every layout gives the
    same rho. With KR a mixed-E map of small groups builds the fused scan and one skill
    program instead of one per E (fewer builds on a map's first use, the same speed
    after it).

    Small groups are what a mixed-E map has many of, one program each: the tuned vector
    layouts (TJ 8-16 targets per work-group) took 1-3 s each to build on Intel's runtime
    for groups of 2-3 targets, the scalar one a fraction of that, and it ran no slower.
    On PoCL (``time_major``) the scalar layout re-reads each query's table row for every
    target; one time-major vector of them all reads it once (faster there; on Intel's
    runtime no faster, so it keeps the scalar one)."""
    if ntg < FEW_TARGETS:
        if time_major:
            return dict(SCALAR_LAYOUT, TJ=max(2, min(16, 1 << (ntg - 1).bit_length())), VEC=2)
        return dict(SCALAR_LAYOUT, KR=1)
    if not params["LANES"]:
        return params
    return dict(params, LWG=lanes_for(params, ntg))


class XmapSkillKernel(TunableKernel):
    """Fused lookup + rho for TJ targets per work-group, and the table packing before it.

    A spec holds ``K``, ``REAL``, ``WEIGHT`` ("ccm" / "simplex") and, for the tuning
    bucket, ``ACC``. The reduction's width is CCM's
    (:func:`pyedmcl.kernels.lookup.ccm_skill_wg`), so that both reduce in the same
    order and agree bit for bit; the embedding scan's (``diag``) is its own
    (:func:`scan_skill_wg`, the layout's ``WG``).
    """

    name = "xmap_skill"
    template = "xmap/xmap_lookup.cl.mako"
    space = TuningSpace(params={"TJ": (1, 2, 4, 8, 16), "VEC": (0, 1, 2), "LANES": (0, 1),
                                "LWG": (32, 64, 128, 256), "PF": (0, 1), "LB": (1, 2, 4, 8, 16, 32),
                                "LMAJ": (0, 1), "CM": (0, 1), "ST": (0, 1), "CH": (8, 16),
                                "SPL": (1, 2, 4, 8), "PR": (0, 1)},
                        heuristic=_skill_heuristic, constraint=_skill_constraint,
                        filled={"LMAJ": 0, "CM": 0, "ST": 0, "CH": 16, "SPL": 1, "PR": 0})

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        wide = "-wide" if spec.get("WIDE") else ""
        return f"{spec.get('REAL', 'float')}-{spec.get('ACC', 'double')}-{_k_bucket(spec['K'])}{wide}"

    def params_for(self, be: Backend, spec: dict[str, Any], size: int) -> Params:
        """The tuned layout, else :meth:`spec_default`. A wide E-group on a GPU
        (``spec["WIDE"]``: at least :func:`wide_targets` targets) has its own bucket and
        untuned takes :func:`wide_layout`: the scalar layouts tuned for the other buckets
        re-read each table row for a few targets, which a wide group need not do."""
        choice = lookup(self, be.info, self.spec_bucket(spec), self.size_bucket(size))
        if choice.source == "heuristic":
            return self.spec_default(spec, be.info)
        return choice.params

    def spec_default(self, spec: dict[str, Any], info: DeviceInfo) -> Params:
        if spec.get("WIDE") and info.is_gpu:
            return wide_layout(info)
        return self.space.default(info)

    def default_specs(self):
        # the wide buckets after the others (``tune --quick`` indexes this list)
        return ([{"K": K, "REAL": "float", "WEIGHT": "ccm"} for K in (3, 6, 11, 21)]
                + [{"K": K, "REAL": "float", "WEIGHT": "ccm", "WIDE": 1} for K in (3, 6, 11, 21)])

    def applies(self, spec: dict[str, Any], info: DeviceInfo) -> bool:
        """Wide E-groups exist on GPUs only (the engine never flags a CPU's)."""
        return info.is_gpu or not spec.get("WIDE")

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [4096] if info.is_gpu else [1024]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _SkillCase(backend, spec, size)

    def layout(self, be: Backend, spec: dict[str, Any], size: int, diag: bool = False) -> Params:
        """The tuned layout (:meth:`params_for`) with every key set. The diagonal (E-scan)
        mode has one target per library: its layout holds one target slot and no target
        lanes or vector lanes (each would compute that one target again, and build a
        larger program), one library per work-group, and K as a kernel
        argument (KR): one program for every E of the scan instead of one each, the same
        results (the scan's skill is a small part of its work; 20 programs were most of
        an auto-E map's first run), and the scan's own reduction width
        (:data:`SCAN_SKILL_WG`, as ``WG``)."""
        p = self.params_for(be, spec, size)
        out = {"TJ": int(p["TJ"]), "VEC": int(p.get("VEC", 0)), "LANES": int(p.get("LANES", 0)),
               "LWG": int(p.get("LWG", 64)), "PF": int(p.get("PF", 0)), "LB": int(p.get("LB", 1)),
               "LMAJ": int(p.get("LMAJ", 0)), "CM": int(p.get("CM", 0)),
               "ST": int(p.get("ST", 0)), "CH": int(p.get("CH", 16)), "SPL": int(p.get("SPL", 1)),
               "PR": int(p.get("PR", 0))}
        if diag:  # one target per library, one program for every K, the scan's width
            out.update(TJ=1, VEC=0, LANES=0, PF=0, LB=1, LMAJ=0, CM=0, ST=0, CH=16, SPL=1, PR=0,
                       KR=1, WG=scan_skill_wg(be.info), FS=0)
        return out

    def request(self, be: Backend, spec: dict[str, Any], params: Params, name: str) -> tuple:
        """Kernel ``name`` ("pack" or "xmap_skill") of ``spec`` rendered with layout
        ``params`` as ``(template, params, name)`` (for :meth:`clkernels.Backend.prebuild`).
        Both kernels live in every rendering: a pack taken with its skill's layout comes
        from the skill's program, and writes the table order that layout reads (CM)."""
        p = {"K": spec["K"], "REAL": spec.get("REAL", "float"), "ACC": acc_type(be.info),
             "WG": ccm_skill_wg(be.info), "WEIGHT": spec.get("WEIGHT", "ccm"), **_LAYOUT,
             "KR": 0, "O32": 1, "FS": fixed_shift(spec, params), **params,
             "INL": int(inline_vector_ops(be.info))}  # (KR, O32, PIW, FS: not tuned)
        if p["ST"]:
            p["SPL"] = subtrees(p, p["WG"])
            p["CH"] = staged_rows(p["CH"], p["K"], p["LB"], be.info, p["SPL"],
                                  split_roots_bytes(p, be.info))
        else:
            p["CH"], p["SPL"] = _LAYOUT["CH"], 1  # unused: one rendering
        p["PIW"] = pack_tile(p, be.info)
        return (self.template, p, name)

    def _kernel(self, be: Backend, spec: dict[str, Any], params: Params, name: str,
                memo: dict | None = None):
        return self._resolved(be, spec, params, name, memo)[1]

    def _resolved(self, be: Backend, spec: dict[str, Any], params: Params, name: str,
                  memo: dict | None = None) -> tuple[tuple, Any]:
        """:meth:`request` and its kernel; with ``memo`` (a dict that the caller keeps
        for one job on one backend, e.g. a map's engine) remembered there by spec and
        layout: a mixed-E map launches a pack and a skill per E-group and batch
        (N = 10,000 x 1,000, E 1..20: 3,160 launches), and the request and the kernel's
        cache key took ~11 us of host time each (2.5 us remembered), under the GIL that
        a job's device threads share."""
        if memo is None:
            req = self.request(be, spec, params, name)
            return req, be.kernel(*req)
        key = (name, tuple(spec.items()), tuple(params.items()))  # (ints and strings)
        hit = memo.get(key)
        if hit is None:
            req = self.request(be, spec, params, name)
            hit = memo[key] = (req, be.kernel(*req))
        return hit

    def pack(self, be: Backend, spec: dict[str, Any], idx, dist, ldk: int, bstride: int,
             row0: int, nq: int, nb: int, b0: int, tidx, tw, tden, layout: Params | None = None,
             k: int | None = None, memo: dict | None = None):
        """Weights of ``nb`` raw k-NN tables into packed slots ``b0 .. b0+nb-1``.

        Table ``b`` holds rows of ``ldk`` entries from ``b * bstride + row0 * ldk`` on
        (a k-NN table: ``K``, ``nq * K``, 0; one E of a fused scan: ``KMAX``,
        ``EMAX * nq * KMAX``, its first row); the first ``K`` entries of ``nq`` rows
        are packed: ``tidx`` / ``tw`` ``(slots, K, nq)``, ``tden`` ``(slots, nq)``; with
        the layout's CM, rows in query-class order instead (:func:`class_major_rows`),
        ``tidx`` / ``tw`` ``(slots, nq, K)`` and ``tden`` ``(slots, nq)`` by that order.
        ``layout``: the skill layout that follows (its program holds this pack too, so a
        group needs one program, not two, and the table order matches); None: a
        layout-free rendering (k-major). ``k``: with the layout's KR, the tables' K where
        ``spec["K"]`` only bounds it (staged target lanes: one program for every E-group
        of a map, :meth:`pyedmcl.xmap.skill_plan.SkillPlan.choose_runtime_k`); None: ``spec["K"]``.
        ``memo``: as :meth:`_resolved`'s.
        """
        req, kern = self._resolved(be, spec, layout or {}, "pack", memo)
        kr = (np.int32(spec["K"] if k is None else k),) if (layout or {}).get("KR", 0) else ()
        piw = req[1]["PIW"]  # (CM: tiles of 8 query classes x piw rows)
        geo = ((pack_geometry(nq, req[1]["WG"], piw), nb), (8 * piw, 1)) if piw else \
            ((round_up(nq, 64), nb), None)
        return be.launch(kern, *geo, idx, dist, np.int32(nq),
                         np.int32(b0), tidx, tw, tden, np.int32(ldk), np.int32(bstride),
                         np.int32(row0), *kr)

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], tidx, tw, tden,
               nq: int, nb: int, y_dev, ldy: int, tshift: int, tgt, ocol, ntg: int, obs,
               out, ldo: int, orow: int, diag: bool = False, k: int | None = None,
               shift=None, memo: dict | None = None):
        """rho of packed libraries ``0 .. nb-1`` cross-mapping targets ``tgt`` (``ntg``)
        into ``out[(orow + b) * ldo + ocol[j]]`` (float32). ``k``: as :meth:`pack`'s.

        A target's value at time ``i`` is ``y_dev[tgt[j] * ldy + i]``, or with LANES
        ``y_dev[i * ldy + j]`` (the targets time-major); neighbour ``l`` predicts from
        time ``l + tshift``, query ``q`` is observed at time ``obs[q]`` (< 0: none).
        ``diag``: library ``b`` predicts series ``tgt[0] + b`` into column ``ocol[0]``.
        ``shift``: where the skill reduces as CCM (:func:`fixed_shift`), the targets'
        shifts (a device array of ``ntg`` in the accumulation type). ``memo``: as
        :meth:`_resolved`'s.
        """
        if params.get("ST", 0) and not offsets_fit(y_dev):
            params = dict(params, O32=0)  # staged reads by times (64-bit products)
        if reads_time_major(params) and ldy % lane_tile(params):
            raise ValueError(f"ldy={ldy} is not a multiple of the layout's {lane_tile(params)} "
                             "targets a work-group (time_major_pitch(ntg, lane_tile(params)))")
        kern = self._kernel(be, spec, params, "xmap_skill", memo)
        gsize, lsize = skill_geometry(params, ntg, nb, params.get("WG") or ccm_skill_wg(be.info))
        kr = (np.int32(spec["K"] if k is None else k),) if params.get("KR", 0) else ()
        fs = ()
        if fixed_shift(spec, params):
            if shift is None:
                raise ValueError("a CCM skill (FS) needs its targets' shifts (ccm_shifts)")
            fs = (shift,)
        return be.launch(kern, gsize, lsize, tidx, tw, tden, np.int32(nq), y_dev, np.int32(ldy),
                         np.int32(tshift), tgt, ocol, np.int32(ntg), obs, out, np.int32(ldo),
                         np.int32(orow), np.int32(diag), np.int32(nb), *fs, *kr)


class _SkillCase(TuningCase):
    """Libraries x targets as in a row block: real k-NN tables, half of random walks and
    half of noisy oscillators. How well the target gathers coalesce depends on the data:
    in a smooth series a neighbour's time is near the neighbours of the next query, in
    a noisy one it is not (the same layout's time differs by a factor of two between
    them), and uniform random indices favour layouts that lose on real maps; so the case
    has both kinds.
    On GPUs a narrow E-group's case holds 512 targets, the size of a mixed-E map's
    groups (N = 10,000, E 1..20): the layouts' order changes with the group's size."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.nb, self.ntg = (64, 512) if be.info.is_gpu else (4, 64)
        if spec.get("WIDE"):
            # a wide E-group has from wide_targets targets up to the whole panel: tuned at
            # twice the least (a layout tuned at the least is slower on whole panels)
            self.ntg = max(self.ntg, 2 * wide_targets(be.info))
        self.be, self.nq = be, size
        self.spec = {"K": spec["K"], "REAL": "float", "WEIGHT": spec.get("WEIGHT", "ccm")}
        adt = np.float64 if be.info.fp64 else np.float32
        K = spec["K"]
        E = max(1, K - 1)
        rng = np.random.default_rng(6)
        n = size + E
        self.n = n

        y = _mixed_series(rng, self.ntg, n)
        self.y = be.to_device(y)
        self._y_host, self._y_lanes = y, {}  # per lane_tile: as the engine lays them out
        kspec = {"E": E, "TAU": 1, "K": K, "METRIC": "euclidean", "REAL": "float"}
        pts = be.to_device(np.arange(size, dtype=np.int32))
        idx = be.empty((self.nb, size, K), np.int32)
        dist = be.empty((self.nb, size, K), np.float32)
        KNN.launch(be, KNN.space.default(be.info), kspec, be.to_device(_mixed_series(rng, self.nb, n).ravel()),
                   pts, size, pts, size, self.nb, 0, idx, dist, series_stride=n)
        d = be.to_host(dist).astype(adt)
        w = np.exp(-d / np.maximum(d[..., :1], 1e-6))
        den = w.sum(-1)
        if self.spec["WEIGHT"] == "ccm":  # pack's normalised float32 weights
            w = (w / den[..., None]).astype(np.float32)
        # packed as pack writes them: k-major per library, or rows by query class (CM)
        ih = be.to_host(idx)
        self.tidx = be.to_device(np.ascontiguousarray(ih.transpose(0, 2, 1)))
        self.tw = be.to_device(np.ascontiguousarray(w.transpose(0, 2, 1)))
        self.tden = be.to_device(den)
        rows = class_major_rows(size, ccm_skill_wg(be.info))
        self.cm = (be.to_device(np.ascontiguousarray(ih[:, rows])),
                   be.to_device(np.ascontiguousarray(w[:, rows])),
                   be.to_device(np.ascontiguousarray(den[:, rows])))
        self.tgt = be.to_device(np.arange(self.ntg, dtype=np.int32))
        self.obs = be.to_device(np.arange(size, dtype=np.int32) + E - 1)
        self.shift = be.to_device(y[:, E - 1].astype(adt))  # the first observation (FS)
        self.out = be.empty((self.nb * self.ntg,), np.float32)

    def run(self, params: Params) -> list[Any]:
        y, ldy = self.lanes(lane_tile(params)) if reads_time_major(params) else (self.y, self.n)
        tidx, tw, tden = self.cm if params.get("CM", 0) else (self.tidx, self.tw, self.tden)
        return [XMAP_SKILL.launch(self.be, params, self.spec, tidx, tw, tden, self.nq, self.nb,
                                  y, ldy, 0, self.tgt, self.tgt, self.ntg, self.obs, self.out,
                                  self.ntg, 0, shift=self.shift)]

    def lanes(self, tile: int) -> tuple[Any, int]:
        """The targets time-major for work-groups of ``tile`` targets (uploaded once)."""
        if tile not in self._y_lanes:
            yt, ldy = time_major(self._y_host, tile)
            self._y_lanes[tile] = (self.be.to_device(yt), ldy)
        return self._y_lanes[tile]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.out)

    def matches(self, got: np.ndarray, ref: np.ndarray) -> bool:
        return bool(np.array_equal(got, ref, equal_nan=True))


XMAP_KNN = XmapKnnKernel()
XMAP_SCAN = XmapScanKernel()
XMAP_SKILL = XmapSkillKernel()
