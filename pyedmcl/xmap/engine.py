"""The row-block worker of the all-to-all cross map, on one device.

An :class:`XmapEngine` uploads the whole data set (N series of n steps) once,
resolves the rows of every E-group once, and then computes any block of rows
``[r0, r1)`` of the N x N rho matrix: for each library series ``i`` of the block
and each E-group ``g`` (the targets whose optimal E is ``E_g``) it builds one
k-NN table, packs it into weights once, and a single fused launch cross-maps every target of the group
from a batch of libraries with rho reduced on the device
(``xmap/xmap_lookup.cl.mako``, the ``xmap_skill`` family of
:mod:`pyedmcl.kernels.xmap`). Only rho comes back.

Matrix convention: ``rho[i, j]`` is the skill of library (embedding of) series
``i`` cross-mapping target series ``j`` with ``E = E[j]``, i.e. pyEDM's CCM column
``"i:j"`` at full library size, which is evidence that ``j`` causes ``i``. This
is what kEDM's ``xmap`` returns.

k-NN tables: the EDM fused kernel (``knn/knn.cl.mako`` through
:mod:`pyedmcl.primitives.knn`) batched over series: ``knn_kernel="batched"`` builds the
tables of a whole batch of library series in one launch with the ``xmap_knn``
family's tuned parameters; ``"edm"`` launches it once per series with the ``knn``
family's parameters (one large table); ``"scan"`` builds every E-group's tables of a
batch of libraries in one pass of the fused multi-E scan (``knn_scan/knn_scan.cl.mako``,
``xmap_scan`` family). The default (None) takes the scan for mixed E on GPUs where it
saves distance work, on CPUs with the scan's private-list variant (:meth:`XmapEngine._use_scan`), else "batched". Every variant gives the
same tables bit for bit (same distance arithmetic, same total neighbour order).

The optimal-E scan of the same series (:meth:`XmapEngine.edim_block`,
:mod:`pyedmcl.xmap.edim_scan`) runs on the engine's panel and launches and takes the
fused scan too (one k-NN program for every E). Every kernel a block or scan launches is built before its first
launch, the distinct programs at once (:meth:`clkernels.Backend.prebuild`). A first-use
map's E-groups on staged target lanes (a GPU's) share one program with K an argument
while their own build behind the job for the next (:meth:`XmapEngine._choose_runtime_k`).

A map's head start (:mod:`pyedmcl.xmap.head_start`) enqueues the tables of a block whose
rows are on the device while the host still prepares the rest of the panel
(:meth:`XmapEngine.tables_ahead`); the block then takes them.

The same engine serves the local multi-device scheduler and Dask workers, and a
block's result depends only on the data and the parameters, never on which
device or batch size computed it (bit-identical across runs on one runtime).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from clkernels import Backend, run_blocked
from clkernels.arrays import gather, gather_request
from clkernels.memory import DeviceOutOfMemory, check_alloc
from clkernels.tuning import lookup

from .._fma import job_fma
from ..kernels.knn import KNN, is_contiguous
from ..kernels.xmap import (
    SCALAR_LAYOUT,
    TABLE_BUDGET_CPU,
    TABLE_BUDGET_GPU,
    XMAP_KNN,
    XMAP_SCAN,
    XMAP_SKILL,
    cpu_layout,
    fixed_shift,
    gpu_layout,
    lane_tile,
    reads_time_major,
    scan_table_budget,
    time_major,
    time_major_pitch,
    wide_targets,
)
from ..primitives.knn import hold
from ..primitives.lookup import ccm_shifts_groups
from ..primitives.ranges import ccm_valid_times, point_offset
from .edim_scan import EdimScan

#: most libraries a batch (one k-NN, pack and skill launch per E-group): on GPUs 128, which
#: fill an H100's launches better than 64 (decision 0099; the map's 128-row blocks,
#: GPU_BLOCK_ROWS); on CPUs 64, the block their map was measured with (decision 0076)
MAX_BATCH_GPU, MAX_BATCH_CPU = 128, 64


#: E-groups on staged target lanes from which a first-use map takes one runtime-K program
#: for them all (:meth:`XmapEngine.kernel_requests`)
RUNTIME_K_GROUPS = 4


#: distance terms (rows x rows x E, summed over the E-groups) of one library's k-NN from
#: which a map makes tables ahead (:meth:`XmapEngine.tables_ahead`): each block costs the
#: host's GIL-bound pass a little Python, and the skill then reads tables no longer in
#: L2, so light k-NN loses (decision 0105: the crossover measured on the H100)
AHEAD_MIN_TERMS = 1 << 25


def ahead_budget(info: Any) -> int:
    """Device bytes a map's tables made ahead may take (:meth:`XmapEngine.tables_ahead`):
    as the fused scan's tables (at most 1/16 of a GPU's memory; N = 5,000 x 3,780, E = 5:
    ~38 MB a block of 125 libraries)."""
    return scan_table_budget(info)


def _staged_lanes(layout: dict) -> bool:
    """Whether a skill layout is staged target lanes (where K may be an argument, KR)."""
    return bool(layout.get("LANES") and layout.get("CM") and layout.get("ST"))


def max_batch(info: Any) -> int:
    """Most libraries of one batch on device ``info`` (tables permitting)."""
    return MAX_BATCH_GPU if info.is_gpu else MAX_BATCH_CPU


@dataclass
class _Group:
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
    #: the targets time-major (n, ntg) on the device, made on first use (LANES skill)
    y_lanes: Any = None
    #: CCM's shift of each target on the device (XmapEngine._upload_shifts), made at
    #: the first skill
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


@dataclass
class _ScanSetup:
    """The fused multi-E scan's inputs, shared by every library batch: one layout (all
    E-groups' rows are the suffixes ``t >= (E-1) tau`` of E=1's contiguous CCM rows)."""

    spec: dict
    params: dict
    nq: int
    kmax: int
    t0: int
    row0: dict  # E -> first scan row of that group's rows
    qt: np.ndarray  # the scan's query times
    qemax: np.ndarray  # per query, the largest E whose history it has
    # the data (None until the first block: the kernels are known before the panel is)
    ints_dev: Any = None
    xp_dev: Any = None  # X padded per series: (N, ldx)
    ldx: int = 0


class XmapEngine:
    """Uploads ``X`` (N, n) once and computes row blocks of the cross-map matrix."""

    def __init__(self, be: Backend, X: np.ndarray, E: np.ndarray | None = None, *, tau: int = 1,
                 Tp: int = 0,
                 real: str = "float", weight: str = "ccm", knn_kernel: str | None = None,
                 knn_params: dict | None = None, fma: bool | None = None,
                 x_dev: Any = None, specialise_later: bool = False):
        """``x_dev``: ``X`` already on this device, flat (e.g. uploaded band by band while
        the host prepared it, :meth:`clkernels.Backend.write_async`); else uploaded here."""
        self.be, self.real, self.weight = be, real, weight
        #: the job's contraction choice (FMA of knn / knn_scan), the same on every device
        #: of a job so that their rows are bit-identical; None: this device's own
        self.fma = int(job_fma([be.info]) if fma is None else bool(fma))
        if knn_kernel not in (None, "batched", "edm", "scan"):
            raise ValueError(f"knn_method={knn_kernel!r} is invalid; allowed: None, 'batched', "
                             "'edm', 'scan'")
        #: None: "scan" where it applies and saves work (:meth:`_use_scan`), else "batched"
        self.knn_choice = knn_kernel
        self.knn = knn_kernel if knn_kernel in ("batched", "edm") else "batched"
        self._scan: _ScanSetup | None = None
        #: fixed k-NN kernel parameters (tests compare variants); None: tuned per launch
        self.knn_params = knn_params
        self.dt = np.float64 if real == "double" else np.float32
        self.acc = "double" if be.info.fp64 else "float"
        self.acc_dt = np.float64 if be.info.fp64 else np.float32
        X = np.ascontiguousarray(X, dtype=self.dt)
        self.X = X
        self.N, self.n = X.shape
        self.tau, self.Tp = int(tau), int(Tp)
        if x_dev is not None and (x_dev.size != X.size or x_dev.dtype != X.dtype):
            raise ValueError(f"x_dev holds {x_dev.size} {x_dev.dtype} values; X is "
                             f"{X.shape} {X.dtype}")
        self.x_dev = be.to_device(X.reshape(-1)) if x_dev is None else x_dev
        self._scratch: dict[tuple, Any] = {}
        self._layouts: dict[tuple, dict] = {}
        #: the skill family's requests and kernels of this engine's launches (its memo)
        self._kernels: dict[tuple, tuple] = {}
        #: whether kernel_requests may run a first-use map's staged E-groups on one
        #: runtime-K program while their own programs build behind the job; the caller then
        #: calls finish_builds() when the job ends
        self.specialise_later = specialise_later
        #: the layout keys (LWG, LB, SPL) of that runtime-K program, its largest K, and the
        #: function that ends the builds behind (None: the groups' own programs)
        self._runtime_k: dict | None = None
        self._k_bound = 0
        self._behind: Callable[[], None] | None = None
        #: whether the map's kernels were built up front (:meth:`kernel_requests`)
        self._prebuilt = False
        #: packed tables made ahead (:meth:`tables_ahead`) by (first library, libraries, E),
        #: and the bytes all tables made ahead took
        self._ahead: dict[tuple[int, int, int], tuple] = {}
        self._ahead_bytes = 0
        self.groups: list[_Group] = []
        self.E = None
        if E is not None:
            self.set_E(E)

    def set_E(self, E) -> None:
        """Embedding dimension of each target series: groups targets by E."""
        E = np.asarray(E, dtype=np.int64)
        if self.E is not None and np.array_equal(E, self.E):
            return
        self.E = E
        self.groups = [self._group(int(e)) for e in np.unique(E)]
        self._scan = None
        self._prebuilt = False
        self._ahead.clear()
        self._ahead_bytes = 0
        self.finish_builds()
        self._runtime_k, self._layouts, self._kernels = None, {}, {}

    # -- setup -------------------------------------------------------------------------------
    def _group(self, E: int, Tp: int | None = None) -> _Group:
        """The E-group's targets and CCM rows at cross-map lag ``Tp`` (None: the
        engine's)."""
        be = self.be
        Tp = self.Tp if Tp is None else int(Tp)
        times = ccm_valid_times(self.n, E, self.tau, Tp)
        M = int(times.size)
        k = E + 1  # CCM's neighbours; too few rows for them is refused (as pyedmcl.ccm)
        if M < k + 1:
            raise ValueError(f"series of {self.n} values leave {M} usable rows for E={E}, "
                             f"tau={self.tau}, Tp={Tp}; needs at least E+2 = {k + 1}")
        off = point_offset(E, self.tau)
        targets = np.flatnonzero(self.E == E).astype(np.int32)
        return _Group(be=be, E=E, k=k, M=M, tshift=off + Tp, targets=targets,
                      contiguous=is_contiguous(times), pts=(times - off).astype(np.int32),
                      obs=(times + Tp).astype(np.int32))

    def _skill_spec(self, k: int, weight: str | None = None) -> dict:
        """The ``xmap_skill`` family's spec (``pack`` and ``xmap_skill``) for tables of k."""
        return {"K": k, "REAL": self.real, "ACC": self.acc, "WEIGHT": weight or self.weight}

    @property
    def _gathers_targets(self) -> bool:
        """Time-major targets are gathered on the device from the panel (element offsets
        within int32), else copied from the host."""
        return self.N * self.n < 2 ** 31

    def _lanes_y(self, g: _Group, tile: int = 1) -> tuple[Any, int]:
        """The group's targets time-major on the device and their row pitch
        (:func:`~pyedmcl.kernels.xmap.time_major`'s layout, rows of whole work-groups of
        ``tile`` targets): what the LANES and VEC=2 skills read. Gathered from the panel
        on the device (no transposing copy on the host and no second upload); made again
        only for a layout whose
        tile the pitch does not hold."""
        if g.y_lanes is not None and g.y_lanes[1] % tile:
            # rows for both layouts (tiles are powers of two: the pitch's largest one
            # holds the earlier layout's)
            tile = math.lcm(tile, g.y_lanes[1] & -g.y_lanes[1])
            g.y_lanes = None
        if g.y_lanes is None:
            ntg = g.targets.size
            ldy = time_major_pitch(ntg, tile)
            if self._gathers_targets:  # gathered on the device from the panel
                cols = np.full(ldy, -1, np.int32)  # -1: padding, zero
                cols[:ntg] = g.targets * self.n
                g.y_lanes = (gather(self.be, self.x_dev, 1, self.n, self.be.to_device(cols),
                                    ldy, 0.0), ldy)
            else:  # element offsets past int32: the host's copy
                yt, ldy = time_major(self.X[g.targets], tile)
                g.y_lanes = (self.be.to_device(yt), ldy)
        return g.y_lanes

    def _buf(self, key: str, shape: tuple[int, ...], dtype) -> Any:
        """A scratch device buffer reused across launches (the queue is in order)."""
        size = math.prod(shape)  # (np.prod: ~3 us a call, per launch)
        have = self._scratch.get(key)
        if have is None or have[1] < size or have[2] != np.dtype(dtype):
            if have is not None:
                self.be.finish()  # never free a buffer that queued kernels still use
            self._scratch[key] = (self.be.empty((size,), dtype), size, np.dtype(dtype))
        return self._scratch[key][0]

    def batch_size(self, M: int, k: int) -> int:
        """Libraries per batch so that their packed tables (and the raw k-NN tables of a
        batched launch) fit the table budget."""
        budget = TABLE_BUDGET_GPU if self.be.info.is_gpu else TABLE_BUDGET_CPU
        per = M * k * (4 + np.dtype(self.acc_dt).itemsize) + M * np.dtype(self.acc_dt).itemsize
        if self.knn == "batched":
            per += M * k * (4 + np.dtype(self.dt).itemsize)
        return int(max(1, min(max_batch(self.be.info), budget // per)))

    # -- steps -------------------------------------------------------------------------------
    def _knn(self, E: int, k: int, size: int, nq_total: int,
             contiguous: bool = False) -> tuple[dict, dict]:
        """(spec, params) of the k-NN kernel: fixed, or tuned for this device (the
        ``xmap_knn`` family for batched launches, ``knn`` for one table per launch);
        ``contiguous``: the library lists are consecutive points (SLIDE may apply)."""
        spec = {"E": E, "TAU": abs(self.tau), "K": k, "METRIC": "euclidean", "REAL": self.real,
                "FMA": self.fma}
        if self.knn_params is not None:
            return spec, self.knn_params
        if self.knn == "batched":
            return spec, XMAP_KNN.params_for(self.be, spec, size, nq_total=nq_total,
                                             contiguous=contiguous)
        return spec, KNN.params_for(self.be, spec, size, contiguous=contiguous)

    def _tables(self, E: int, k: int, c0: int, nb: int, qpts_dev, nq: int, lpts_dev, nl: int,
                radius: int, tidx, tw, tden, weight: str, layout: dict | None = None,
                contiguous: bool = False) -> None:
        """k-NN tables of library series ``c0 .. c0+nb-1`` (series-local kernel points),
        packed into slots ``0 .. nb-1``: one launch for all (batched) or one per series.
        ``layout``: the skill layout that follows (pack is taken from its program)."""
        be, n = self.be, self.n
        spec, p = self._knn(E, k, max(nq, nl), nq * nb, contiguous)
        sspec, kr = self._program_spec(k, weight, layout or {})
        if self.knn == "batched":
            idx = self._buf("idx", (nb, nq, k), np.int32)
            dist = self._buf("dist", (nb, nq, k), self.dt)
            KNN.launch(be, p, spec, self.x_dev, qpts_dev, nq, lpts_dev, nl, nb, radius, idx,
                       dist, xoff=c0 * n, series_stride=n)
            XMAP_SKILL.pack(be, sspec, idx, dist, k, nq * k, 0, nq, nb, 0, tidx, tw, tden,
                            layout, k=kr, memo=self._kernels)
            return
        idx = self._buf("idx", (nq, k), np.int32)
        dist = self._buf("dist", (nq, k), self.dt)
        for b in range(nb):
            KNN.launch(be, p, spec, self.x_dev, qpts_dev, nq, lpts_dev, nl, 1, radius, idx, dist,
                       xoff=(c0 + b) * n, series_stride=n)
            XMAP_SKILL.pack(be, sspec, idx, dist, k, nq * k, 0, nq, 1, b, tidx, tw, tden,
                            layout, k=kr, memo=self._kernels)

    def _layout(self, k: int, weight: str, ntg: int, diag: bool = False) -> dict:
        """The skill's layout for tables of ``k`` and ``ntg`` targets (tuned; a CPU's
        adjusted to the group's size, :func:`~pyedmcl.kernels.xmap.cpu_layout`, a GPU's
        small groups scalar, :func:`~pyedmcl.kernels.xmap.gpu_layout`); looked
        up once per engine (each pack and skill launch asks: ~90 tuning lookups per
        mixed-E map of 100 series, 5 ms of host time beside a 2-core CPU's kernels)."""
        key = (k, weight, ntg, diag)
        if key not in self._layouts:
            spec = self._skill_spec(k, weight)
            if self.be.info.is_gpu and not diag and ntg >= wide_targets(self.be.info):
                spec["WIDE"] = 1  # a wide group: its own tuning bucket (target lanes)
            sp = XMAP_SKILL.layout(self.be, spec, self.n, diag)
            if not self.be.info.is_gpu and not diag:
                sp = cpu_layout(sp, ntg, time_major=self.be.info.runtime == "pocl")
            elif not diag:
                sp = gpu_layout(sp, ntg, self.be.info)
            if reads_time_major(sp) and not self._time_major_fits(ntg, sp):
                sp = dict(SCALAR_LAYOUT)   # the targets read where they lie (the same rho)
            if self._runtime_k and not diag and _staged_lanes(sp):
                sp = dict(sp, KR=1, **self._runtime_k)  # (GPUs: _choose_runtime_k)
            self._layouts[key] = sp
        return dict(self._layouts[key])

    def _time_major_fits(self, ntg: int, sp: dict) -> bool:
        """Whether ``ntg`` targets time-major (:meth:`_lanes_y`, what layout ``sp`` reads)
        fit in one allocation of the device: a panel padded to whole tiles, up to twice
        the targets' own size, which does not shrink with the library batch; where it
        does not fit the skill reads the targets row-major (:data:`SCALAR_LAYOUT`)."""
        nbytes = time_major_pitch(ntg, lane_tile(sp)) * self.n * np.dtype(self.x_dev.dtype).itemsize
        try:
            check_alloc(self.be, nbytes)
        except DeviceOutOfMemory:
            return False
        return True

    def _program_spec(self, k: int, weight: str, sp: dict) -> tuple[dict, int | None]:
        """The spec the skill program of tables of ``k`` with layout ``sp`` is rendered
        with, and the K its launches pass (None: the spec's): staged target lanes with K
        an argument render the largest K of the map's groups (one program for all)."""
        spec = self._skill_spec(k, weight)
        if sp.get("KR") and sp.get("LANES"):
            spec["K"] = self._k_bound
            return spec, k
        return spec, None

    def _skill(self, k: int, weight: str, tidx, tw, tden, nq: int, nb: int, tshift: int,
               tgt_dev, ocol_dev, ntg: int, obs_dev, out, ldo: int, orow: int,
               diag: bool = False, group: _Group | None = None, shift: Any = None) -> None:
        """rho of ``nb`` packed tables into ``out`` (:meth:`~pyedmcl.kernels.xmap.XmapSkillKernel.launch`);
        ``group``: the E-group whose targets are read (time-major where the layout reads
        so) and whose CCM shifts are taken, unless ``shift`` gives them (another lag's
        observations, :mod:`pyedmcl.xmap.lags`)."""
        sp = self._layout(k, weight, ntg, diag)
        spec, kr = self._program_spec(k, weight, sp)
        y, ldy = (self._lanes_y(group, lane_tile(sp)) if reads_time_major(sp)
                  else (self.x_dev, self.n))
        if not fixed_shift(spec, sp):
            shift = None
        elif shift is None:  # CCM's reduction: each target's shift (as pyedmcl.ccm's)
            if group.shift is None:
                self._upload_shifts()
            shift = group.shift
        XMAP_SKILL.launch(self.be, sp, spec, tidx, tw, tden, nq, nb, y, ldy, tshift, tgt_dev,
                          ocol_dev, ntg, obs_dev, out, ldo, orow, diag, k=kr, shift=shift,
                          memo=self._kernels)

    def _upload_shifts(self) -> None:
        """Every E-group's CCM shifts on the device (:func:`ccm_shifts_groups`: one pass
        over the groups, at their first skill; as :func:`ccm_shifts_device` would make
        each)."""
        host = ccm_shifts_groups(self.X, [(g.obs, g.targets) for g in self.groups],
                                 self.be.info.fp64)
        for g, values in zip(self.groups, host, strict=True):
            g.shift = self.be.to_device(values)
            hold(self.be, g.shift)

    # -- fused multi-E tables ------------------------------------------------------------------
    def _use_scan(self) -> bool:
        """The fused scan (``knn_scan/knn_scan.cl.mako``, one pass for E = 1..Emax) builds every
        E-group's tables of a library at once; it applies with past lags (tau > 0),
        pyEDM's K = E + 1 in every group and Emax <= 32, and by default it is used when
        it saves distance work: the per-E kernels add sum(E_g) coordinates per pair, the
        scan Emax (plus a compare per E), so at least two groups and sum(E_g) >= 2 Emax;
        on a CPU also only with the private-list scan or an insertion mode tuned on this
        CPU (see below). Tables are bit-identical either way."""
        from ..kernels.knn_scan import MAX_FUSED_E
        if self.knn_choice in ("batched", "edm") or not self.groups:
            return False
        Es = [g.E for g in self.groups]
        ok = self.tau > 0 and max(Es) <= MAX_FUSED_E and all(g.k == g.E + 1 for g in self.groups)
        if self.knn_choice == "scan":
            if not ok:
                raise ValueError("knn_method='scan' needs tau > 0, E <= 32 and series long "
                                 "enough for E + 1 neighbours in every E-group")
            return True
        return ok and self._scan_pays(Es, int(ccm_valid_times(self.n, 1, self.tau,
                                                                  self.Tp).size))

    def _scan_pays(self, Es: list[int], nq: int) -> bool:
        """Whether the fused scan saves work over the per-E kernels for E-groups ``Es``
        of ``nq`` rows (at E = 1) by default (:meth:`_use_scan`)."""
        if not (len(Es) >= 2 and sum(Es) >= 2 * max(Es)):
            return False
        if self.be.info.is_gpu:
            return True
        # CPUs: with the private-list scan (INS "key"), or with whatever insertion mode
        # tuning measured fastest on this very CPU (a class's borrowed entry was timed
        # on another CPU: it takes the per-E kernels). The local-memory lists with
        # untuned parameters lose to the per-E batched kernel; tuned ones, and the
        # private lists, win (decisions 0049, 0076)
        spec = {"EMAX": max(Es), "TAU": self.tau, "KNN": 0, "METRIC": "euclidean",
                "REAL": self.real}
        if XMAP_SCAN.params_for(self.be, spec, nq, nq)["INS"] == "key":
            return True
        source = lookup(XMAP_SCAN, self.be.info, XMAP_SCAN.spec_bucket(spec),
                        XMAP_SCAN.size_bucket(nq)).source
        return source in ("user", "shipped:device")

    def _scan_setup(self, inputs: bool = True) -> _ScanSetup:
        """The scan's layout and kernel parameters and, with ``inputs``, its padded series on
        the device, read from ``X`` at the first block: the kernels (:meth:`kernel_requests`)
        are known before the panel is complete (a head start's engine is made while the
        host still writes it)."""
        if self._scan is None:
            self._scan = self._scan_layout()
        sc = self._scan
        if inputs and sc.xp_dev is None:
            from ..kernels.knn_scan import KNN_SCAN, batch_inputs, batch_ints, padded_columns
            lanes = KNN_SCAN.padded_lanes(sc.params, sc.nq)
            pad = (sc.spec["EMAX"] - 1) * self.tau
            if self._gathers_targets:  # padded on the device from the panel already there
                cols, sc.ldx = padded_columns(self.n, sc.qt, pad, lanes)
                sc.xp_dev = gather(self.be, self.x_dev, self.n, self.N,
                                   self.be.to_device(cols), sc.ldx, 0.0)
                ints = batch_ints(sc.qt, sc.qemax, lanes)
            else:  # element offsets past int32: the host's padded copy
                xp, ints, sc.ldx = batch_inputs(self.X, sc.qt, sc.qemax, pad, lanes, self.dt)
                sc.xp_dev = self.be.to_device(xp)
            sc.ints_dev = self.be.to_device(self._scan_library(ints, sc))
        return sc

    def _scan_library(self, ints: np.ndarray, sc: _ScanSetup) -> np.ndarray:
        """The scan's int inputs (:func:`~pyedmcl.kernels.knn_scan.batch_ints`): here
        every query row is a library row at each E it has the history for; a lag scan
        narrows the library (:class:`~pyedmcl.xmap.lag_engine.XmapLagEngine`)."""
        return ints

    def _scan_layout(self) -> _ScanSetup:
        be, n, tau = self.be, self.n, self.tau
        emax = max(g.E for g in self.groups)
        qt = ccm_valid_times(n, 1, tau, self.Tp)
        nq = int(qt.size)
        qemax = np.minimum(qt // tau + 1, emax)
        row0 = {}
        for g in self.groups:
            times = ccm_valid_times(n, g.E, tau, self.Tp)
            r = int(np.searchsorted(qt, times[0]))
            if not np.array_equal(qt[r:r + times.size], times):  # pragma: no cover
                raise RuntimeError("CCM rows do not nest across E")
            row0[g.E] = (g.E - 1) * nq + r
        spec = {"EMAX": emax, "TAU": tau, "KNN": 0, "METRIC": "euclidean", "REAL": self.real,
                "FMA": self.fma}
        params = XMAP_SCAN.params_for(be, spec, nq, nq)
        return _ScanSetup(spec, params, nq, emax + 1, int(qt[0]), row0, qt, qemax)

    def _block_scan(self, r0: int, r1: int, out) -> None:
        """Every E-group's rho rows of libraries ``r0 .. r1-1``: per batch of libraries one
        fused scan launch, then per group one pack (the group's E plane and rows) and
        one skill launch."""
        be, sc = self.be, self._scan_setup()
        emax, nq, kmax, split = sc.spec["EMAX"], sc.nq, sc.kmax, sc.params["SPLIT"]
        acc = np.dtype(self.acc_dt).itemsize
        kmax_g, mmax = max(g.k for g in self.groups), max(g.M for g in self.groups)
        per = self._scan_bytes(emax, nq, kmax, split) + mmax * (kmax_g * (4 + acc) + acc)
        budget = scan_table_budget(be.info)
        plane = emax * nq * kmax

        def batch(b0: int, b1: int) -> None:
            nb, c0 = b1 - b0, r0 + b0
            idx, dist = self._scan_libraries(sc, nb, c0)
            self._reserve_tables(nb)
            for g in self.groups:
                tidx, tw, tden = self._tables_bufs(nb, g.M, g.k)
                sp = self._layout(g.k, self.weight, g.targets.size)
                sspec, kr = self._program_spec(g.k, self.weight, sp)
                XMAP_SKILL.pack(be, sspec, idx, dist, kmax, plane, sc.row0[g.E], g.M, nb, 0,
                                tidx, tw, tden, sp, k=kr, memo=self._kernels)
                # table entries are library times: the target value is at time + Tp
                self._skill(g.k, self.weight, tidx, tw, tden, g.M, nb, self.Tp, g.tgt_dev,
                            g.tgt_dev, g.targets.size, g.obs_dev, out, self.N, b0, group=g)

        run_blocked(be, batch, r1 - r0, block=int(max(1, min(max_batch(be.info), budget // per))),
                    parameter="the series length (n) or E",
                    what=f"fused-scan k-NN tables (E=1..{emax}, {nq} rows per library)",
                    nbytes=lambda nb: nb * per)

    # -- public ------------------------------------------------------------------------------
    def block(self, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0 .. r1-1`` of the rho matrix, ``(r1 - r0, N)`` float32."""
        return self.block_async(r0, r1)()

    def block_async(self, r0: int, r1: int, dst: np.ndarray | None = None
                    ) -> Callable[[], np.ndarray]:
        """Enqueue rows ``r0 .. r1-1`` of the rho matrix and their read into ``dst`` (a
        C-contiguous ``(r1 - r0, N)`` float32 host array, e.g. rows of the result
        matrix; None: a new one); returns the function that waits for the rows and
        returns them. The read is queued right behind the block's kernels, so a
        caller that enqueues the next block before waiting for this one leaves the
        device no gap (the queue is in order)."""
        be = self.be
        rows = r1 - r0
        out = be.empty((rows * self.N,), np.float32)
        if dst is not None and dst.shape != (rows, self.N):
            raise ValueError(f"dst must have shape {(rows, self.N)}, got {dst.shape}")

        def fetch() -> Callable[[], np.ndarray]:
            wait = be.to_host_async(out, None if dst is None else dst.reshape(-1))
            return lambda: wait().reshape(rows, self.N)

        self.prebuild(rows)
        if self._use_scan():
            self._block_scan(r0, r1, out)
            return fetch()
        spent = []  # tables made ahead: freed once the block's rows are back
        for g in self.groups:
            def batch(b0: int, b1: int, g=g) -> None:
                # libraries r0+b0 .. r0+b1-1: tables, then their rho rows b0 .. b1-1
                nb, c0 = b1 - b0, r0 + b0
                tables = self._ahead.pop((c0, nb, g.E), None)
                if tables is None:
                    tables = self._tables_bufs(nb, g.M, g.k)
                    self._group_tables(g, c0, nb, *tables)
                else:
                    spent.append(tables)
                self._skill(g.k, self.weight, *tables, g.M, nb, g.tshift, g.tgt_dev,
                            g.tgt_dev, g.targets.size, g.obs_dev, out, self.N, b0, group=g)

            self._batched(batch, rows, g.M, g.k)
        if not spent:
            return fetch()
        wait = fetch()

        def rows_then_free() -> np.ndarray:
            res = wait()
            spent.clear()
            return res
        return rows_then_free

    def prebuild(self, rows: int) -> None:
        """Build every kernel a block of ``rows`` rows launches, once, before the first."""
        if not self._prebuilt:
            self.be.prebuild(self.kernel_requests(rows))
            self._prebuilt = True

    def _group_tables(self, g: _Group, c0: int, nb: int, tidx, tw, tden) -> None:
        """The packed k-NN tables of libraries ``c0 .. c0+nb-1`` for group ``g``."""
        self._tables(g.E, g.k, c0, nb, g.pts_dev, g.M, g.pts_dev, g.M, 0, tidx, tw, tden,
                     self.weight, self._layout(g.k, self.weight, g.targets.size),
                     contiguous=g.contiguous)

    def tables_ahead(self, r0: int, r1: int) -> bool:
        """Enqueue the k-NN tables of block ``r0 .. r1-1`` now, into buffers of their own
        that :meth:`block_async` of that block takes instead of making them: a map's head
        start, while the host still prepares (and uploads) the rest of the panel (only
        these rows need to be on the device; the skill reads every target). False, with
        nothing enqueued, where it does not apply: the fused scan's tables (it reads the
        whole padded panel), a library's k-NN lighter than :data:`AHEAD_MIN_TERMS`, or the
        tables past :func:`ahead_budget`."""
        if self._use_scan() or sum(g.M * g.M * g.E for g in self.groups) < AHEAD_MIN_TERMS:
            return False
        plan = []
        for g in self.groups:
            bs = self.batch_size(g.M, g.k)
            plan += [(g, c0, min(r1, c0 + bs) - c0) for c0 in range(r0, r1, bs)]
        item = np.dtype(self.acc_dt).itemsize
        need = sum(nb * g.M * (g.k * (4 + item) + item) for g, _, nb in plan)
        if self._ahead_bytes + need > ahead_budget(self.be.info):
            return False
        self.prebuild(r1 - r0)
        for g, c0, nb in plan:
            tables = (self.be.empty((nb * g.M * g.k,), np.int32),
                      self.be.empty((nb * g.M * g.k,), self.acc_dt),
                      self.be.empty((nb * g.M,), self.acc_dt))
            self._group_tables(g, c0, nb, *tables)
            self._ahead[(c0, nb, g.E)] = tables
        self._ahead_bytes += need
        self.be.flush()  # (the host is busy with the panel: nothing else would send them)
        return True

    def kernel_requests(self, rows: int) -> list[tuple]:
        """The kernels a block of ``rows`` library rows of the map launches, as
        ``(template, params, name)``: :meth:`block_async` builds them all at once
        (:meth:`clkernels.Backend.prebuild`) before its first launch, so a mixed-E map
        does not build one program per E-group as it reaches each. Per group the pack
        and the skill share one program (pack takes the skill's layout)."""
        be, reqs = self.be, []
        if self.specialise_later and self._behind is None and self._runtime_k is None:
            self._choose_runtime_k()
        scan = self._use_scan()
        if scan:
            reqs += self._scan_requests()
        for g in self.groups:
            if not scan:
                nb = min(max(1, rows), self.batch_size(g.M, g.k))
                spec, p = self._knn(g.E, g.k, g.M, g.M * nb, g.contiguous)
                reqs.append(KNN.request(be, p, spec))
            reqs += self._skill_requests(g)
        return reqs

    def _scan_requests(self) -> list[tuple]:
        """The fused scan's kernels of a batch of libraries (and the padded panel's gather)."""
        from ..kernels.knn_scan import KNN_SCAN
        sc = self._scan_setup(inputs=False)
        reqs = KNN_SCAN.requests(self.be, sc.params, sc.spec)
        if self._gathers_targets:
            reqs.append(gather_request(self.x_dev.dtype))  # the padded panel
        return reqs

    def _skill_requests(self, g: _Group) -> list[tuple]:
        """Group ``g``'s pack and skill (one program) and, where the skill reads targets
        time-major, their gather."""
        sp = self._layout(g.k, self.weight, g.targets.size)
        sspec, _ = self._program_spec(g.k, self.weight, sp)
        reqs = [XMAP_SKILL.request(self.be, sspec, sp, "pack"),
                XMAP_SKILL.request(self.be, sspec, sp, "xmap_skill")]
        if reads_time_major(sp) and self._gathers_targets:
            reqs.append(gather_request(self.x_dev.dtype))  # the targets, time-major
        return reqs

    def _choose_runtime_k(self) -> None:
        """A first-use map's staged E-groups on one program. A GPU's wide E-groups each
        take a program of their own (K unrolled, layout tuned per K bucket): a mixed-E
        map builds ~20, most of its first run. Where at least
        :data:`RUNTIME_K_GROUPS` groups are on staged target lanes and their programs
        are not :meth:`~clkernels.Backend.known`, those groups run on one program with K
        an argument (KR, rendered for their largest K, the largest group's tuned layout;
        the same rho bit for bit) while their own programs build in helper processes
        behind the job (:meth:`~clkernels.Backend.build_behind`; where no helper can, the
        groups build their own programs now), so the next map takes them (decision 0102;
        later runs as before)."""
        lanes = {g.k: sp for g in self.groups
                 if _staged_lanes(sp := self._layout(g.k, self.weight, g.targets.size))}
        if len(lanes) < RUNTIME_K_GROUPS:
            return
        own = [XMAP_SKILL.request(self.be, self._skill_spec(k), sp, name)
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
        """End the builds behind the job (:meth:`_choose_runtime_k`): those under way
        finish, the rest are dropped. Idempotent."""
        if self._behind is not None:
            end, self._behind = self._behind, None
            end()

    def _scan_bytes(self, emax: int, nq: int, kmax: int, split: int) -> int:
        """Device bytes of one library's raw fused-scan tables (SPLIT's partial lists too)."""
        item = np.dtype(self.dt).itemsize
        return emax * nq * kmax * (4 + item) * (1 + (split if split > 1 else 0))

    def _scan_libraries(self, sc: _ScanSetup, nb: int, c0: int) -> tuple[Any, Any]:
        """One fused scan launch of the ``nb`` libraries from ``c0`` (every query, the
        whole library: the map's scan, :meth:`_scan_setup`): its raw tables (index,
        distance)."""
        from ..kernels.knn_scan import KNN_SCAN
        emax, nq, kmax, split = sc.spec["EMAX"], sc.nq, sc.kmax, sc.params["SPLIT"]
        idx, dist, part = self._scan_bufs("s", nb, emax, nq, kmax, split)
        KNN_SCAN.launch(self.be, sc.params, sc.spec, sc.xp_dev, sc.ints_dev, nq, sc.t0, nq, 0,
                        idx, dist, part, nseries=nb, xoff=c0 * sc.ldx, xstride=sc.ldx)
        return idx, dist

    def _scan_bufs(self, tag: str, nb: int, emax: int, nq: int, kmax: int, split: int
                   ) -> tuple[Any, Any, Any]:
        """Raw fused-scan tables of ``nb`` libraries (index, distance) and, with SPLIT > 1,
        the partial lists the merge reads; ``tag`` keeps a caller's buffers apart."""
        shape = (nb, emax, nq, kmax)
        part = None
        if split > 1:
            part = (self._buf(tag + "pidx", (nb, split, emax, nq, kmax), np.int32),
                    self._buf(tag + "pdist", (nb, split, emax, nq, kmax), self.dt))
        return self._buf(tag + "idx", shape, np.int32), self._buf(tag + "dist", shape, self.dt), part

    def _reserve_tables(self, nb: int) -> None:
        """The packed-table buffers at the size of the largest E-group's ``nb`` tables,
        before a batch's first pack: grown group by group, each growth waits for the
        queue (:meth:`_buf`; 18 waits per mixed-E map of 100 series, E 1..10)."""
        mk = max(g.M * g.k for g in self.groups)
        m = max(g.M for g in self.groups)
        self._buf("tidx", (nb * mk,), np.int32)
        self._buf("tw", (nb * mk,), self.acc_dt)
        self._buf("tden", (nb * m,), self.acc_dt)

    def _tables_bufs(self, nb: int, M: int, k: int) -> tuple[Any, Any, Any]:
        """Packed-table scratch buffers for ``nb`` libraries of ``M`` rows. The weights'
        buffer has the accumulation type, which WEIGHT "simplex" packs; "ccm" packs its
        normalised weights in the data type (common/_lookup.mako), never wider, into the
        same buffer, so that maps and scans share it without reallocating."""
        return (self._buf("tidx", (nb, M, k), np.int32), self._buf("tw", (nb, M, k), self.acc_dt),
                self._buf("tden", (nb, M), self.acc_dt))

    def _batched(self, fn, rows: int, M: int, k: int) -> None:
        """``fn(b0, b1)`` over batches of :meth:`batch_size` libraries, smaller ones when
        the tables do not fit in device memory (:func:`clkernels.run_blocked`)."""
        item = np.dtype(self.acc_dt).itemsize
        run_blocked(self.be, fn, rows, block=self.batch_size(M, k),
                    parameter="the series length (n) or E",
                    what=f"cross-map k-NN tables ({M} rows x k={k} per library)",
                    nbytes=lambda nb: nb * M * (k * (4 + item) + item))

    def max_libraries(self) -> int:
        """Most libraries of one batch on this device (tables permitting)."""
        return max_batch(self.be.info)

    @cached_property
    def _edim(self) -> EdimScan:
        return EdimScan(self)

    def edim_block(self, r0: int, r1: int, E_max: int, Tp: int = 1) -> np.ndarray:
        """Simplex rho ``(r1 - r0, E_max)`` of each series of rows ``r0 .. r1-1``
        predicting itself ``Tp`` ahead for E = 1 .. E_max (:class:`.EdimScan`; NaN where
        E does not fit the series)."""
        return self._edim.block(r0, r1, E_max, Tp)
