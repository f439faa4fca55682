"""The row-block worker of the all-to-all map at many lags: one neighbour search a lag set.

A library state's neighbours do not depend on the cross-map lag; a lag only changes which
rows may serve (a library row needs its target ``t + lag`` inside the data, as pyEDM's
``CCM(Tp=lag)``), which rows are predicted, and where the lookup reads the target. The
rows of a lag are one stretch of the embeddable rows, so the lags' rows share a core
(the rows every lag keeps) and differ only at the ends (the edge: the S rows that some
lag leaves out). Per library series and E-group one k-NN search over the core keeps each
query's k nearest core rows, and a search of the edge alone keeps all S of it, both in
the knn kernel's total order (distance, then ``|p - l|``, then ``l``) with accumulated
distances; a lag's table is then the first k of the two lists merged, the edge entries
inside its own rows (``knn/window.cl.mako``), finished as the knn kernel finishes them.
The order is total and a pair's distance does not depend on the library around it, so
those are the entries, in the order and with the distances, of the lag's own search:
every lag's skill is ``pe.xmap(X, Tp=lag)``'s bit for bit (:class:`XmapLagEngine`).
Where every lag keeps the same rows (E lags of history already cut what the lags cut)
one search gives every lag's table, packed once; such E-groups share one fused multi-E
scan where the single-lag map would scan (:meth:`XmapLagEngine._lag_scan`). Lags whose
edge would exceed :data:`MAX_LAG_EDGE` rows are cut into chunks of neighbouring lags,
one search each. Then per lag the usual pack and fused skill
(:class:`~pyedmcl.xmap.engine.XmapEngine`'s), rho of block row ``b``, lag ``a`` and
target ``j`` at ``out[(a * rows + b) * N + j]`` (a block's rows at every lag).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import Backend, run_blocked

from ..kernels.knn import KNN, RawLists, is_contiguous
from ..kernels.xmap import TABLE_BUDGET_CPU, TABLE_BUDGET_GPU, XMAP_SCAN, scan_table_budget
from ..primitives.lookup import ccm_shifts_groups
from ..primitives.ranges import MAX_KNN, ccm_valid_times, point_offset
from .egroup import EGroup
from .engine import XmapEngine, max_batch
from .fused_tables import FusedTables, ScanSetup, scan_bytes
from .job import EngineSpec

#: most edge rows of one chunk of lags (the edge list keeps them all): lags whose rows
#: differ by more are cut into chunks
MAX_LAG_EDGE = MAX_KNN


@dataclass
class _LagRows:
    """One lag's rows within its chunk's union: rows ``r0 .. r0 + M - 1`` (their points
    ``lo .. hi - 1``), observed at ``obs``."""

    a: int  # the lag's index in the engine's lags
    lag: int
    r0: int
    M: int
    lo: int
    hi: int
    obs: np.ndarray
    dev: dict = field(default_factory=dict)  # obs, shift on the device


@dataclass
class _Chunk:
    """Lags of one E-group that share one search: the union of their rows (the queries,
    kernel points ascending), its core (every lag's) and its edge (the rest)."""

    pts: np.ndarray
    core: np.ndarray
    edge: np.ndarray
    lags: list[_LagRows]
    dev: dict = field(default_factory=dict)  # pts, core, edge on the device

    @property
    def U(self) -> int:
        return int(self.pts.size)

    @property
    def S(self) -> int:
        return int(self.edge.size)


def _spans(n: int, E: int, tau: int, lags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every embeddable row (ascending) and, per lag, the stretch ``[s, e)`` of them that
    are its CCM rows (:func:`ccm_valid_times`: the target ``t + lag`` inside the data)."""
    emb = ccm_valid_times(n, E, tau, 0)
    lags = np.asarray(lags, np.int64)
    s = np.searchsorted(emb, -lags, "left")
    e = np.searchsorted(emb, n - lags, "left")
    return emb, np.stack([s, np.maximum(s, e)], axis=1)


def _edge_core(spans: np.ndarray) -> tuple[int, int]:
    """Rows of the union of the stretches ``spans`` that some stretch leaves out (the
    edge), and that every stretch holds (the core)."""
    union, end = 0, -1
    for s, e in spans[np.argsort(spans[:, 0], kind="stable")]:  # merged stretches
        union += e - s if end < 0 else max(0, e - max(s, end))
        end = max(end, e)
    core = max(0, int(spans[:, 1].min()) - int(spans[:, 0].max()))
    return int(union - core), core


def lag_chunks(n: int, E: int, tau: int, lags: np.ndarray, cap: int = MAX_LAG_EDGE
               ) -> list[list[int]]:
    """``lags`` (ascending) cut into runs of neighbouring lags whose rows share a core
    and leave at most ``cap`` edge rows (a single lag always forms a run: it has none)."""
    _, spans = _spans(n, E, tau, lags)
    out: list[list[int]] = []
    i = 0
    while i < lags.size:
        j = i + 1
        while j < lags.size and (edge_core := _edge_core(spans[i:j + 1]))[0] <= cap \
                and edge_core[1] > 0:
            j += 1
        out.append(list(range(i, j)))
        i = j
    return out


def plan_chunks(n: int, E: int, tau: int, lags: np.ndarray, cap: int = MAX_LAG_EDGE
                ) -> list[_Chunk]:
    """The E-group's searches (their union, core and edge) and each lag's rows."""
    off = point_offset(E, tau)
    emb, spans = _spans(n, E, tau, lags)
    chunks = []
    for idx in lag_chunks(n, E, tau, lags, cap):
        keep, core = np.zeros(emb.size, bool), np.zeros(emb.size, bool)
        core[int(spans[idx, 0].max()):int(spans[idx, 1].min())] = True
        for s, e in spans[idx]:
            keep[s:e] = True
        at = np.cumsum(keep) - 1  # an embeddable row's union row
        rows = []
        for a in idx:
            s, e = (int(v) for v in spans[a])
            times, lag = emb[s:e], int(lags[a])
            if not np.array_equal(times, ccm_valid_times(n, E, tau, lag)):  # pragma: no cover
                raise RuntimeError("a lag's CCM rows are not one stretch of the embeddable rows")
            rows.append(_LagRows(a=a, lag=lag, r0=int(at[s]), M=e - s, lo=int(times[0] - off),
                                 hi=int(times[-1] - off + 1), obs=(times + lag).astype(np.int32)))
        pts = (emb - off).astype(np.int32)
        chunks.append(_Chunk(pts=pts[keep], core=pts[core], edge=pts[keep & ~core], lags=rows))
    return chunks


class LagFusedTables(FusedTables):
    """The fused scan of a map at many lags: over the lags' union
    (:meth:`XmapLagEngine._lag_scan`), its library the core's rows."""

    def layout(self) -> ScanSetup:
        """The fused scan's layout over the lags' union (:meth:`XmapLagEngine._lag_scan`); accumulated
        distances (RAW) where a group's lists are merged with its edge."""
        eng = self.eng
        qt, tau, emax = eng._scan_rows, eng.tau, max(eng._scan_Es)
        nq = int(qt.size)
        row0 = {E: (E - 1) * nq + int(np.searchsorted(qt, eng._chunks[E][0].pts[0]
                                                      + point_offset(E, tau)))
                for E in eng._scan_Es}
        spec = {"EMAX": emax, "TAU": tau, "KNN": 0, "METRIC": "euclidean", "REAL": eng.real,
                "FMA": eng.fma}
        params = XMAP_SCAN.params_for(eng.be, spec, nq, nq)
        if any(eng._chunks[E][0].S for E in eng._scan_Es):
            params = {**params, "RAW": 1}
        return ScanSetup(spec, params, nq, emax + 1, int(qt[0]), row0, qt,
                         np.minimum(qt // tau + 1, emax))

    def library(self, ints: np.ndarray, sc: ScanSetup) -> np.ndarray:
        """The scan's library: the core's rows (its lanes' E masks zeroed elsewhere)."""
        out = ints.copy()
        lmask = out[3 * sc.nq:3 * sc.nq + sc.nq]  # (library lane li: time qt[li])
        lmask[~self.eng._scan_core] = 0
        return out


class XmapLagEngine(XmapEngine):
    """Row blocks of the map at every lag of ``lags`` (module docstring): ``block_async``
    gives ``(n_lags, rows, N)``. Built on the engine of the lag nearest 0 (``Tp``: its
    E-groups' targets, layouts and kernels serve every lag)."""

    def __init__(self, be: Backend, X: np.ndarray, E: np.ndarray, lags: np.ndarray,
                 **kwargs: Any):
        self.lags = np.asarray(lags, np.int64)
        super().__init__(be, X, E, **kwargs)
        if self.knn_choice == "scan":
            self.fused.applies()  # refuses what the scan refuses, as the single-lag map
        self._chunks = {g.E: plan_chunks(self.n, g.E, self.tau, self.lags)
                        for g in self.groups}
        self._uploaded = False
        #: the E-groups whose core lists the fused scan makes, its query rows and which of
        #: them are library rows (:meth:`_lag_scan`)
        self._scan_Es, self._scan_rows, self._scan_core = self._lag_scan()

    def _lag_scan(self) -> tuple[list[int], np.ndarray | None, np.ndarray | None]:
        """The E-groups whose core lists come from one fused multi-E scan
        (``knn_scan/knn_scan.cl.mako``), its query rows (the lags' union at E = 1) and
        which of them are library rows (the core at E = 1: at each E the scan then keeps
        the rows of both with E lags of history, the group's union and core), as the
        single-lag map would scan (:meth:`~pyedmcl.xmap.fused_tables.FusedTables.applies`: ``knn_method`` "scan",
        or by default where it saves work); groups whose lags are cut into chunks, and
        the rest where the scan does not apply, take the per-E kernel."""
        from ..kernels.knn_scan import MAX_FUSED_E
        none = [], None, None
        if self.knn_choice in ("batched", "edm") or self.tau <= 0:
            return none
        Es = [g.E for g in self.groups if g.E <= MAX_FUSED_E and len(self._chunks[g.E]) == 1]
        if not Es:
            return none
        emb, spans = _spans(self.n, 1, self.tau, self.lags)
        keep = np.zeros(emb.size, bool)
        for a, e in spans:
            keep[a:e] = True
        rows, core = emb[keep], np.zeros(emb.size, bool)
        core[int(spans[:, 0].max()):int(spans[:, 1].min())] = True
        core = core[keep]
        if not is_contiguous(rows):
            return none
        for E in Es:  # each group's union and core: the scan's rows with E lags of history
            ch, off = self._chunks[E][0], point_offset(E, self.tau)
            hist = rows >= (E - 1) * self.tau
            if not (np.array_equal(rows[hist], ch.pts + off)
                    and np.array_equal(rows[hist & core], ch.core + off)):  # pragma: no cover
                return none
        if self.knn_choice == "scan" or self.fused.pays(Es, int(rows.size)):
            return Es, rows, core
        return none

    def _fused_tables(self) -> LagFusedTables:
        return LagFusedTables(self)

    # -- setup -------------------------------------------------------------------------------
    def _upload_lags(self) -> None:
        """Each chunk's union, core and edge points and each lag's observations and CCM
        shifts on the device (at the first block)."""
        if self._uploaded:
            return
        be = self.be
        pairs = []
        for g in self.groups:
            for ch in self._chunks[g.E]:
                ch.dev.update({w: be.to_device(getattr(ch, w)) for w in ("pts", "core", "edge")
                               if getattr(ch, w).size})
                ch.dev["times"] = be.to_device(ch.pts + point_offset(g.E, self.tau))
                for r in ch.lags:
                    r.dev["obs"] = be.to_device(r.obs)
                    pairs.append((r, g))
        shifts = ccm_shifts_groups(self.X, [(r.obs, g.targets) for r, g in pairs],
                                   be.info.fp64)
        for (r, _), values in zip(pairs, shifts, strict=True):
            r.dev["shift"] = be.to_device(values)
        self._uploaded = True

    def kernel_requests(self, rows: int) -> list[tuple]:
        """The kernels a block launches: the fused scan of the groups it serves, each
        chunk's core (unless scanned) and edge k-NN and the window merge, and every
        group's pack and skill (as :meth:`XmapEngine.kernel_requests`)."""
        be = self.be
        edges = any(ch.S for chunks in self._chunks.values() for ch in chunks)
        reqs = [KNN.window_request(self.real)] if edges else []
        if self.specialise_later:
            self.skills.choose_runtime_k()
        if self._scan_Es:
            reqs += self.fused.requests()
        for g in self.groups:
            for ch in self._chunks[g.E]:  # (a scanned group's core lists are the scan's)
                nb = min(max(1, rows), self._lag_batch_size(g, ch))
                for which in (() if g.E in self._scan_Es else ("core",)) + (
                        ("edge",) if ch.S else ()):
                    spec, p = self._list_params(g, ch, which, nb)
                    reqs.append(KNN.request(be, p, spec))
            reqs += self.skills.requests(g)
        return reqs

    def _lag_bytes(self, g: EGroup, ch: _Chunk) -> int:
        """Device bytes of one library's tables in a chunk: its core and edge lists, a
        lag's merged table and its packed table."""
        item, acc = np.dtype(self.dt).itemsize, np.dtype(self.acc_dt).itemsize
        m = max(r.M for r in ch.lags)
        return (ch.U * (g.k + ch.S) * (4 + item) + m * g.k * (4 + item)
                + m * (g.k * (4 + acc) + acc))

    def _lag_batch_size(self, g: EGroup, ch: _Chunk) -> int:
        budget = TABLE_BUDGET_GPU if self.be.info.is_gpu else TABLE_BUDGET_CPU
        return int(max(1, min(max_batch(self.be.info), budget // self._lag_bytes(g, ch))))

    # -- steps -------------------------------------------------------------------------------
    def _list_params(self, g: EGroup, ch: _Chunk, which: str, nb: int) -> tuple[dict, dict]:
        """(spec, params) of a chunk's ``which`` ("core": the k nearest core rows; "edge":
        every edge row) k-NN launch over ``nb`` libraries; accumulated distances (RAW)
        where a merge follows (the chunk has an edge)."""
        lib = ch.core if which == "core" else ch.edge
        K = g.k if which == "core" else ch.S
        contiguous = is_contiguous(lib)
        spec, p = self._knn(g.E, K, ch.U, ch.U * nb, contiguous)
        if p.get("SLIDE", 0) and not contiguous:  # (fixed parameters: SLIDE needs a stretch)
            p = {**p, "SLIDE": 0}
        return spec, ({**p, "RAW": 1} if ch.S else p)

    def _lists(self, g: EGroup, ch: _Chunk, which: str, c0: int, nb: int) -> RawLists:
        """A chunk's ``which`` lists of libraries ``c0 .. c0+nb-1``, tables ``(nb, U, K)``
        of the union's rows (:meth:`_list_params`), entries kernel points."""
        be, n, U = self.be, self.n, ch.U
        lib = ch.dev[which]
        nl = ch.core.size if which == "core" else ch.S
        spec, p = self._list_params(g, ch, which, nb)
        K = spec["K"]
        idx = self.scratch(which + "idx", (nb, U, K), np.int32)
        dist = self.scratch(which + "dist", (nb, U, K), self.dt)
        if self.knn == "batched":
            KNN.launch(be, p, spec, self.x_dev, ch.dev["pts"], U, lib, nl, nb, 0, idx, dist,
                       xoff=c0 * n, series_stride=n)
        else:
            one_i = self.scratch("oidx", (U, K), np.int32)  # "edm": one table a launch
            one_d = self.scratch("odist", (U, K), self.dt)
            for b in range(nb):
                KNN.launch(be, p, spec, self.x_dev, ch.dev["pts"], U, lib, nl, 1, 0, one_i,
                           one_d, xoff=(c0 + b) * n, series_stride=n)
                be.copy_within(idx, b * U * K, one_i, 0, U * K)
                be.copy_within(dist, b * U * K, one_d, 0, U * K)
        return RawLists(idx, dist, K, K, U * K)

    def _lag_skills(self, g: EGroup, ch: _Chunk, c0: int, nb: int, b0: int,
                    out: tuple[Any, int], core: RawLists | None = None) -> None:
        """Every lag of chunk ``ch``: libraries ``c0 .. c0+nb-1``'s tables and rho rows
        ``b0 .. b0+nb-1`` of ``out`` (:meth:`_lag_rho`). ``core``: the core lists made
        already (the fused scan's: entries are times, the edge's kernel points are
        shifted to them), else made here by the per-E kernel (entries kernel points)."""
        be, k, off = self.be, g.k, point_offset(g.E, self.tau)
        scanned = core is not None
        if core is None:
            core = self._lists(g, ch, "core", c0, nb)
            if not ch.S:  # finished: every lag keeps every row, one table for all
                tables = self.tables_bufs(nb, ch.U, k)
                self._pack(g, core.idx, core.dist, core.ld, core.bstride, 0, ch.U, nb, tables)
                self._lag_rho(g, ch, tables, nb, off, b0, out)
                return
        sh = off if scanned else 0  # points -> the core's coordinates
        edge = None
        if ch.S:
            e = self._lists(g, ch, "edge", c0, nb)
            edge = RawLists(e.idx, e.dist, e.k, e.ld, e.bstride, 0, sh)
        m = max(r.M for r in ch.lags)
        lidx = self.scratch("lidx", (nb, m, k), np.int32)  # (sized for the chunk's lags at once)
        ldist = self.scratch("ldist", (nb, m, k), self.dt)
        self.tables_bufs(nb, m, k)
        qpts = ch.dev["times" if scanned else "pts"]
        for r in ch.lags if edge is not None else ch.lags[:1]:
            r0, M = (r.r0, r.M) if edge is not None else (0, ch.U)
            tables = self.tables_bufs(nb, M, k)
            KNN.launch_window(be, self.real, qpts, r0, M, nb, core, edge, r.lo + sh,
                              r.hi + sh, k, lidx, ldist)
            self._pack(g, lidx, ldist, k, M * k, 0, M, nb, tables)
            # (no edge: one finished table of every row, each lag's)
            self._lag_rho(g, ch, tables, nb, off - sh, b0, out,
                          [r] if edge is not None else None)

    def _pack(self, g: EGroup, idx, dist, ldk: int, bstride: int, row0: int, M: int, nb: int,
              tables: tuple) -> None:
        """Weights of ``nb`` raw tables of ``M`` rows into packed ``tables``
        (:meth:`~pyedmcl.kernels.xmap.XmapSkillKernel.pack`, the group's skill layout)."""
        sp = self.skills.layout(g.k, self.weight, g.targets.size)
        self.skills.pack(g.k, self.weight, sp, idx, dist, ldk, bstride, row0, M, nb, 0, *tables)

    def _lag_rho(self, g: EGroup, ch: _Chunk, tables: tuple, nb: int, toff: int, b0: int,
                 out: tuple[Any, int], lags: list[_LagRows] | None = None) -> None:
        """rho rows ``b0 .. b0+nb-1`` at ``lags`` (default: the chunk's) from packed
        ``tables`` of their rows, whose entries' targets are at ``entry + toff + lag``
        (kernel points: the E-group's offset; times: 0), into ``out`` = (the block's
        device buffer ``(n_lags, rows, N)``, ``rows``)."""
        buf, rows = out
        for r in ch.lags if lags is None else lags:
            self.skills.launch(g.k, self.weight, *tables, r.M, nb, toff + r.lag, g.tgt_dev,
                               g.tgt_dev, g.targets.size, r.dev["obs"], buf, self.N,
                               r.a * rows + b0, group=g, shift=r.dev["shift"])

    def _scan_block(self, r0: int, r1: int, out: tuple[Any, int]) -> None:
        """The scanned E-groups' rho rows of libraries ``r0 .. r1-1`` at every lag: per
        batch of libraries one fused scan (every group's core lists), then per group its
        edge and its lags' tables (:meth:`_lag_skills`); without an edge anywhere the
        scan's tables are every lag's, packed once (as :meth:`~pyedmcl.xmap.fused_tables.FusedTables.block`)."""
        be, sc = self.be, self.fused.setup()
        emax, nq, kmax, split = sc.spec["EMAX"], sc.nq, sc.kmax, sc.params["SPLIT"]
        groups = [g for g in self.groups if g.E in self._scan_Es]
        item, acc = np.dtype(self.dt).itemsize, np.dtype(self.acc_dt).itemsize
        per = scan_bytes(self.dt, emax, nq, kmax, split) + max(
            self._chunks[g.E][0].U * (g.k * (4 + acc) + acc + (g.k + self._chunks[g.E][0].S)
                                       * (4 + item)) for g in groups)
        plane = emax * nq * kmax

        def batch(b0: int, b1: int) -> None:
            nb, c0 = b1 - b0, r0 + b0
            idx, dist = self.fused.libraries(sc, nb, c0)
            self.tables_bufs(nb, max(self._chunks[g.E][0].U for g in groups), emax + 1)
            for g in groups:
                ch = self._chunks[g.E][0]
                if not sc.params.get("RAW", 0):  # no edge: every lag's (entries: times)
                    tables = self.tables_bufs(nb, ch.U, g.k)
                    self._pack(g, idx, dist, kmax, plane, sc.row0[g.E], ch.U, nb, tables)
                    self._lag_rho(g, ch, tables, nb, 0, b0, out)
                    continue
                core = RawLists(idx, dist, g.k, kmax, plane, sc.row0[g.E] * kmax)
                self._lag_skills(g, ch, c0, nb, b0, out, core)

        run_blocked(be, batch, r1 - r0,
                    block=int(max(1, min(max_batch(be.info), scan_table_budget(be.info) // per))),
                    parameter="the series length (n) or E",
                    what=f"fused-scan k-NN tables over lags (E=1..{emax}, {nq} rows per "
                         "library)", nbytes=lambda nb: nb * per)

    # -- public ------------------------------------------------------------------------------
    def block_async(self, r0: int, r1: int, dst: np.ndarray | None = None
                    ) -> Callable[[], np.ndarray]:
        """Enqueue rows ``r0 .. r1-1`` at every lag and their read into ``dst`` (a
        C-contiguous ``(n_lags, r1 - r0, N)`` float32 array; None: a new one); returns
        the function that waits for them (as :meth:`XmapEngine.block_async`)."""
        be, rows, nl = self.be, r1 - r0, self.lags.size
        shape = (nl, rows, self.N)
        if dst is not None and dst.shape != shape:
            raise ValueError(f"dst must have shape {shape}, got {dst.shape}")
        buf = be.empty((rows * nl * self.N,), np.float32)
        out = (buf, rows)
        self.prebuild(rows)
        self._upload_lags()
        if self._scan_Es:
            self._scan_block(r0, r1, out)
        for g in self.groups:
            for ch in [] if g.E in self._scan_Es else self._chunks[g.E]:
                def batch(b0: int, b1: int, g=g, ch=ch) -> None:
                    self._lag_skills(g, ch, r0 + b0, b1 - b0, b0, out)

                per = self._lag_bytes(g, ch)
                run_blocked(be, batch, rows, block=self._lag_batch_size(g, ch),
                            parameter="the series length (n), E or the range of lags",
                            what=f"cross-map k-NN tables over lags ({ch.U} rows x "
                                 f"{g.k + ch.S} neighbours per library)",
                            nbytes=lambda nb, per=per: nb * per)
        wait = be.to_host_async(buf, None if dst is None else dst.reshape(-1))
        return lambda: wait().reshape(shape)

    def tables_ahead(self, r0: int, r1: int) -> bool:
        """No head start at many lags (the tables are the blocks' own)."""
        return False


@dataclass(frozen=True)
class LagEngineSpec:
    """The parameters of every engine of a map at many lags (``base.Tp``: the lag nearest
    0, whose E-groups the engines are built on)."""

    base: EngineSpec
    lags: tuple[int, ...]

    def engine(self, be: Any, X: np.ndarray, E: np.ndarray | None, *, x_dev: Any = None,
               specialise_later: bool = False) -> XmapLagEngine:
        b = self.base
        return XmapLagEngine(be, X, E, np.asarray(self.lags, np.int64), tau=b.tau, Tp=b.Tp,
                             real=b.real, knn_kernel=b.knn_kernel, fma=b.fma, x_dev=x_dev,
                             specialise_later=specialise_later)
