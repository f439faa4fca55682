"""The row-block worker of the all-to-all cross map, on one device.

An :class:`XmapEngine` uploads the whole data set (N series of n steps) once, groups the
targets by their E (:mod:`pyedmcl.xmap.egroup`) and then computes any block of rows
``[r0, r1)`` of the N x N rho matrix: for each batch of library series of the block and
each E-group it makes the k-NN tables, packs them into weights once, and one skill launch
cross-maps every target of the group from the batch with rho reduced on the device (the
``xmap_skill`` family of :mod:`pyedmcl.kernels.xmap`). Only rho comes back.

Matrix convention: ``rho[i, j]`` is the skill of library (embedding of) series
``i`` cross-mapping target series ``j`` with ``E = E[j]``, i.e. pyEDM's CCM column
``"i:j"`` at full library size, which is evidence that ``j`` causes ``i``. This
is what kEDM's ``xmap`` returns.

The engine plans and runs a block; its parts each own one responsibility:

- :class:`~pyedmcl.xmap.skill_plan.SkillPlan`: how each group's pack and skill run
  (layouts, programs, the targets time-major, CCM's shifts);
- :class:`~pyedmcl.xmap.fused_tables.FusedTables`: every group's tables of a batch from
  one fused multi-E scan (``templates/knn_scan/``), where the map takes it;
- :class:`~pyedmcl.xmap.edim_scan.EdimScan`: the optimal-E scan of the same series.

k-NN tables: ``knn_kernel="batched"`` builds the tables of a whole batch of library
series in one launch (the ``xmap_knn`` family's parameters); ``"edm"`` one launch per
series (the ``knn`` family's); ``"scan"`` the fused scan. The default (None) takes the
scan for mixed E where it saves distance work (:meth:`FusedTables.applies`), else
"batched". Every variant gives the same tables bit for bit (same distance arithmetic,
same total neighbour order).

Every kernel a block launches is built before its first launch, the distinct programs at
once (:meth:`clkernels.Backend.prebuild`). A map's head start
(:mod:`pyedmcl.xmap.head_start`) enqueues the tables of a block whose rows are on the
device while the host still prepares the rest of the panel (:meth:`XmapEngine.tables_ahead`).

The same engine serves the local multi-device scheduler and Dask workers, and a
block's result depends only on the data and the parameters, never on which
device or batch size computed it (bit-identical across runs on one runtime).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from clkernels import Backend, run_blocked

from .._fma import job_fma
from ..kernels.knn import KNN
from ..kernels.xmap import TABLE_BUDGET_CPU, TABLE_BUDGET_GPU, XMAP_KNN, scan_table_budget
from .edim_scan import EdimScan
from .egroup import EGroup, e_group
from .fused_tables import FusedTables
from .skill_plan import SkillPlan

#: most libraries a batch (one k-NN, pack and skill launch per E-group): on GPUs 128, which
#: fill an H100's launches better than 64 (decision 0099; the map's 128-row blocks,
#: GPU_BLOCK_ROWS); on CPUs 64, the block their map was measured with (decision 0076)
MAX_BATCH_GPU, MAX_BATCH_CPU = 128, 64


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


def max_batch(info: Any) -> int:
    """Most libraries of one batch on device ``info`` (tables permitting)."""
    return MAX_BATCH_GPU if info.is_gpu else MAX_BATCH_CPU


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
        #: None: "scan" where it applies and saves work (:meth:`FusedTables.applies`), else
        #: "batched"
        self.knn_choice = knn_kernel
        self.knn = knn_kernel if knn_kernel in ("batched", "edm") else "batched"
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
        #: how each E-group's pack and skill run (layouts, programs, target arrays)
        self.skills = SkillPlan(be, X, self.x_dev, real=real, acc=self.acc, weight=weight)
        #: every E-group's tables from one fused multi-E scan, where the map takes it
        self.fused = self._fused_tables()
        #: whether kernel_requests may run a first-use map's staged E-groups on one
        #: runtime-K program while their own programs build behind the job
        #: (:meth:`SkillPlan.choose_runtime_k`); the caller then calls finish_builds()
        #: when the job ends
        self.specialise_later = specialise_later
        #: whether the map's kernels were built up front (:meth:`kernel_requests`)
        self._prebuilt = False
        #: packed tables made ahead (:meth:`tables_ahead`) by (first library, libraries, E),
        #: and the bytes all tables made ahead took
        self._ahead: dict[tuple[int, int, int], tuple] = {}
        self._ahead_bytes = 0
        self.groups: list[EGroup] = []
        self.E = None
        if E is not None:
            self.set_E(E)

    def set_E(self, E) -> None:
        """Embedding dimension of each target series: groups targets by E."""
        E = np.asarray(E, dtype=np.int64)
        if self.E is not None and np.array_equal(E, self.E):
            return
        self.E = E
        self.groups = [e_group(self.be, E, int(e), self.n, self.tau, self.Tp)
                       for e in np.unique(E)]
        self.fused.reset()
        self._prebuilt = False
        self._ahead.clear()
        self._ahead_bytes = 0
        self.skills.reset(self.groups)

    def _fused_tables(self) -> FusedTables:
        """The fused scan of this engine's map (the lag engine's scans the lags' union)."""
        return FusedTables(self)

    # -- setup -------------------------------------------------------------------------------
    def scratch(self, key: str, shape: tuple[int, ...], dtype) -> Any:
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
                radius: int, tidx, tw, tden, weight: str, layout: dict,
                contiguous: bool = False) -> None:
        """k-NN tables of library series ``c0 .. c0+nb-1`` (series-local kernel points),
        packed into slots ``0 .. nb-1``: one launch for all (batched) or one per series.
        ``layout``: the skill layout that follows (pack is taken from its program)."""
        be, n = self.be, self.n
        spec, p = self._knn(E, k, max(nq, nl), nq * nb, contiguous)
        if self.knn == "batched":
            idx = self.scratch("idx", (nb, nq, k), np.int32)
            dist = self.scratch("dist", (nb, nq, k), self.dt)
            KNN.launch(be, p, spec, self.x_dev, qpts_dev, nq, lpts_dev, nl, nb, radius, idx,
                       dist, xoff=c0 * n, series_stride=n)
            self.skills.pack(k, weight, layout, idx, dist, k, nq * k, 0, nq, nb, 0, tidx, tw,
                             tden)
            return
        idx = self.scratch("idx", (nq, k), np.int32)
        dist = self.scratch("dist", (nq, k), self.dt)
        for b in range(nb):
            KNN.launch(be, p, spec, self.x_dev, qpts_dev, nq, lpts_dev, nl, 1, radius, idx, dist,
                       xoff=(c0 + b) * n, series_stride=n)
            self.skills.pack(k, weight, layout, idx, dist, k, nq * k, 0, nq, 1, b, tidx, tw,
                             tden)

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
        if self.fused.applies():
            self.fused.block(r0, r1, out)
            return fetch()
        spent = []  # tables made ahead: freed once the block's rows are back
        for g in self.groups:
            def batch(b0: int, b1: int, g=g) -> None:
                # libraries r0+b0 .. r0+b1-1: tables, then their rho rows b0 .. b1-1
                nb, c0 = b1 - b0, r0 + b0
                tables = self._ahead.pop((c0, nb, g.E), None)
                if tables is None:
                    tables = self.tables_bufs(nb, g.M, g.k)
                    self._group_tables(g, c0, nb, *tables)
                else:
                    spent.append(tables)
                self.skills.launch(g.k, self.weight, *tables, g.M, nb, g.tshift, g.tgt_dev,
                                   g.tgt_dev, g.targets.size, g.obs_dev, out, self.N, b0,
                                   group=g)

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

    def _group_tables(self, g: EGroup, c0: int, nb: int, tidx, tw, tden) -> None:
        """The packed k-NN tables of libraries ``c0 .. c0+nb-1`` for group ``g``."""
        self._tables(g.E, g.k, c0, nb, g.pts_dev, g.M, g.pts_dev, g.M, 0, tidx, tw, tden,
                     self.weight, self.skills.layout(g.k, self.weight, g.targets.size),
                     contiguous=g.contiguous)

    def tables_ahead(self, r0: int, r1: int) -> bool:
        """Enqueue the k-NN tables of block ``r0 .. r1-1`` now, into buffers of their own
        that :meth:`block_async` of that block takes instead of making them: a map's head
        start, while the host still prepares (and uploads) the rest of the panel (only
        these rows need to be on the device; the skill reads every target). False, with
        nothing enqueued, where it does not apply: the fused scan's tables (it reads the
        whole padded panel), a library's k-NN lighter than :data:`AHEAD_MIN_TERMS`, or the
        tables past :func:`ahead_budget`."""
        if self.fused.applies() or sum(g.M * g.M * g.E for g in self.groups) < AHEAD_MIN_TERMS:
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
        if self.specialise_later:
            self.skills.choose_runtime_k()
        scan = self.fused.applies()
        if scan:
            reqs += self.fused.requests()
        for g in self.groups:
            if not scan:
                nb = min(max(1, rows), self.batch_size(g.M, g.k))
                spec, p = self._knn(g.E, g.k, g.M, g.M * nb, g.contiguous)
                reqs.append(KNN.request(be, p, spec))
            reqs += self.skills.requests(g)
        return reqs

    def finish_builds(self) -> None:
        """End the builds behind the job (:meth:`SkillPlan.choose_runtime_k`). Idempotent."""
        self.skills.finish_builds()

    def reserve_tables(self, nb: int) -> None:
        """The packed-table buffers at the size of the largest E-group's ``nb`` tables,
        before a batch's first pack: grown group by group, each growth waits for the
        queue (:meth:`scratch`; 18 waits per mixed-E map of 100 series, E 1..10)."""
        mk = max(g.M * g.k for g in self.groups)
        m = max(g.M for g in self.groups)
        self.scratch("tidx", (nb * mk,), np.int32)
        self.scratch("tw", (nb * mk,), self.acc_dt)
        self.scratch("tden", (nb * m,), self.acc_dt)

    def tables_bufs(self, nb: int, M: int, k: int) -> tuple[Any, Any, Any]:
        """Packed-table scratch buffers for ``nb`` libraries of ``M`` rows. The weights'
        buffer has the accumulation type, which WEIGHT "simplex" packs; "ccm" packs its
        normalised weights in the data type (common/_lookup.mako), never wider, into the
        same buffer, so that maps and scans share it without reallocating."""
        return (self.scratch("tidx", (nb, M, k), np.int32),
                self.scratch("tw", (nb, M, k), self.acc_dt),
                self.scratch("tden", (nb, M), self.acc_dt))

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
