"""The row-block worker of the all-to-all map at many lags: one neighbour search a lag set.

A library state's neighbours do not depend on the cross-map lag; a lag only changes which
rows may serve (a library row needs its target ``t + lag`` inside the data, as pyEDM's
``CCM(Tp=lag)``), which rows are predicted, and where the lookup reads the target. So
per library series and E-group one k-NN search over the union of the lags' rows gives
every lag's table (:class:`XmapLagEngine`): the union's table keeps ``K = k + S``
neighbours, S the union rows that some lag leaves out, and a lag's table is the first k
entries of each of its rows that lie in its own rows (``knn/window.cl.mako``; a lag that
keeps every union row packs the first k directly). The knn kernel's order is total
(distance, then ``|p - l|``, then ``l``) and a row's distances do not depend on the
library around them, so those k are the entries, in the order and with the distances,
that the lag's own search gives: every lag's skill is ``pe.xmap(X, Tp=lag)``'s bit for
bit. Lags whose S would exceed :data:`MAX_LAG_K` neighbours in all are cut into chunks
of neighbouring lags, one search each. Then per lag the usual pack and fused skill
(:class:`~pyedmcl.xmap.engine.XmapEngine`'s), rho of block row ``b``, lag ``a`` and
target ``j`` at ``out[(b * n_lags + a) * N + j]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clkernels import Backend, run_blocked
from clkernels.arrays import gather_request

from ..kernels.knn import KNN, is_contiguous
from ..kernels.xmap import TABLE_BUDGET_CPU, TABLE_BUDGET_GPU, XMAP_SKILL, reads_time_major
from ..primitives.lookup import ccm_shifts_groups
from ..primitives.ranges import MAX_KNN, ccm_valid_times, point_offset
from .engine import XmapEngine, _Group, max_batch
from .job import EngineSpec

#: most neighbours of one union table (k + S): lags needing more are cut into chunks
MAX_LAG_K = MAX_KNN


@dataclass
class _LagRows:
    """One lag's rows within its chunk's union: rows ``r0 .. r0 + M - 1`` (their points
    ``lo .. hi - 1``), observed at ``obs``; ``full``: the lag keeps every union row."""

    a: int  # the lag's index in the engine's lags
    lag: int
    r0: int
    M: int
    lo: int
    hi: int
    full: bool
    obs: np.ndarray
    dev: dict = field(default_factory=dict)  # obs, ocol, shift on the device


@dataclass
class _Chunk:
    """Lags of one E-group that share one union table of ``kw`` neighbours a row."""

    pts: np.ndarray  # the union's kernel points (int32, ascending)
    kw: int
    lags: list[_LagRows]
    pts_dev: Any = None

    @property
    def U(self) -> int:
        return int(self.pts.size)

    @property
    def contiguous(self) -> bool:
        return is_contiguous(self.pts)


def _spans(n: int, E: int, tau: int, lags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every embeddable row (ascending) and, per lag, the stretch ``[s, e)`` of them that
    are its CCM rows (:func:`ccm_valid_times`: the target ``t + lag`` inside the data)."""
    emb = ccm_valid_times(n, E, tau, 0)
    lags = np.asarray(lags, np.int64)
    s = np.searchsorted(emb, -lags, "left")
    e = np.searchsorted(emb, n - lags, "left")
    return emb, np.stack([s, np.maximum(s, e)], axis=1)


def _kw(k: int, spans: np.ndarray) -> int:
    """Neighbours of the union table of lags with row stretches ``spans`` (ascending
    lags: both ends non-increasing): ``k`` plus the union rows some lag leaves out, at
    most the union's rows less the query's own."""
    order = np.argsort(spans[:, 0], kind="stable")
    union, end = 0, -1
    for s, e in spans[order]:  # merged stretches
        union += max(0, e - max(s, end)) if end >= 0 else e - s
        end = max(end, e)
    inter = max(0, int(spans[:, 1].min()) - int(spans[:, 0].max()))
    return int(min(k + union - inter, union - 1))


def lag_chunks(n: int, E: int, tau: int, lags: np.ndarray, cap: int = MAX_LAG_K
               ) -> list[list[int]]:
    """``lags`` (ascending) cut into runs of neighbouring lags whose union table keeps at
    most ``cap`` neighbours (a single lag always forms a run: its table is its own)."""
    k = E + 1
    _, spans = _spans(n, E, tau, lags)
    out: list[list[int]] = []
    i = 0
    while i < lags.size:
        j = i + 1
        while j < lags.size and _kw(k, spans[i:j + 1]) <= max(cap, k):
            j += 1
        out.append(list(range(i, j)))
        i = j
    return out


def plan_chunks(n: int, E: int, tau: int, lags: np.ndarray, cap: int = MAX_LAG_K
                ) -> list[_Chunk]:
    """The E-group's union tables and each lag's rows in them."""
    k, off = E + 1, point_offset(E, tau)
    emb, spans = _spans(n, E, tau, lags)
    chunks = []
    for idx in lag_chunks(n, E, tau, lags, cap):
        keep = np.zeros(emb.size, bool)
        for s, e in spans[idx]:
            keep[s:e] = True
        union, at = emb[keep], np.cumsum(keep) - 1  # (at: an embeddable row's union row)
        rows = []
        for a in idx:
            s, e = (int(v) for v in spans[a])
            times, lag = emb[s:e], int(lags[a])
            if not np.array_equal(times, ccm_valid_times(n, E, tau, lag)):  # pragma: no cover
                raise RuntimeError("a lag's CCM rows are not one stretch of the embeddable rows")
            rows.append(_LagRows(a=a, lag=lag, r0=int(at[s]), M=e - s, lo=int(times[0] - off),
                                 hi=int(times[-1] - off + 1), full=e - s == union.size,
                                 obs=(times + lag).astype(np.int32)))
        chunks.append(_Chunk(pts=(union - off).astype(np.int32), kw=_kw(k, spans[idx]),
                             lags=rows))
    return chunks


class XmapLagEngine(XmapEngine):
    """Row blocks of the map at every lag of ``lags`` (module docstring): ``block_async``
    gives ``(rows, n_lags, N)``. Built on the engine of the lag nearest 0 (``Tp``: its
    E-groups' targets, layouts and kernels serve every lag)."""

    def __init__(self, be: Backend, X: np.ndarray, E: np.ndarray, lags: np.ndarray,
                 **kwargs: Any):
        self.lags = np.asarray(lags, np.int64)
        super().__init__(be, X, E, **kwargs)
        if self.knn_choice == "scan":
            self._use_scan()  # refuses what the scan refuses, as the single-lag map
        self._chunks = {g.E: plan_chunks(self.n, g.E, self.tau, self.lags)
                        for g in self.groups}
        self._uploaded = False

    # -- setup -------------------------------------------------------------------------------
    def _upload_lags(self) -> None:
        """Each chunk's union points and each lag's observations, output columns and CCM
        shifts on the device (at the first block)."""
        if self._uploaded:
            return
        be, N = self.be, self.N
        pairs = []
        for g in self.groups:
            for ch in self._chunks[g.E]:
                ch.pts_dev = be.to_device(ch.pts)
                for r in ch.lags:
                    r.dev["obs"] = be.to_device(r.obs)
                    r.dev["ocol"] = be.to_device((g.targets + r.a * N).astype(np.int32))
                    pairs.append((r, g))
        shifts = ccm_shifts_groups(self.X, [(r.obs, g.targets) for r, g in pairs],
                                   be.info.fp64)
        for (r, _), values in zip(pairs, shifts, strict=True):
            r.dev["shift"] = be.to_device(values.astype(self.acc_dt))
        self._uploaded = True

    def kernel_requests(self, rows: int) -> list[tuple]:
        """The kernels a block launches: per E-group each chunk's union k-NN, the window,
        and the group's pack and skill (:meth:`XmapEngine.kernel_requests`' without the
        fused scan)."""
        be, reqs = self.be, [KNN.window_request(self.real)]
        if self.specialise_later and self._behind is None and self._runtime_k is None:
            self._choose_runtime_k()
        for g in self.groups:
            for ch in self._chunks[g.E]:
                nb = min(max(1, rows), self._lag_batch_size(g, ch))
                spec, p = self._knn(g.E, ch.kw, ch.U, ch.U * nb, ch.contiguous)
                reqs.append(KNN.request(be, p, spec))
            sp = self._layout(g.k, self.weight, g.targets.size)
            sspec, _ = self._program_spec(g.k, self.weight, sp)
            reqs += [XMAP_SKILL.request(be, sspec, sp, "pack"),
                     XMAP_SKILL.request(be, sspec, sp, "xmap_skill")]
            if reads_time_major(sp) and self._gathers_targets:
                reqs.append(gather_request(self.x_dev.dtype))
        return reqs

    def _lag_bytes(self, g: _Group, ch: _Chunk) -> int:
        """Device bytes of one library's tables in a chunk: the union table, a lag's
        window and its packed table."""
        item, acc = np.dtype(self.dt).itemsize, np.dtype(self.acc_dt).itemsize
        m = max(r.M for r in ch.lags)
        return ch.U * ch.kw * (4 + item) + m * g.k * (4 + item) + m * (g.k * (4 + acc) + acc)

    def _lag_batch_size(self, g: _Group, ch: _Chunk) -> int:
        budget = TABLE_BUDGET_GPU if self.be.info.is_gpu else TABLE_BUDGET_CPU
        return int(max(1, min(max_batch(self.be.info), budget // self._lag_bytes(g, ch))))

    # -- steps -------------------------------------------------------------------------------
    def _union_tables(self, g: _Group, ch: _Chunk, c0: int, nb: int) -> tuple[Any, Any]:
        """The union k-NN tables ``(nb, U, kw)`` of libraries ``c0 .. c0+nb-1``."""
        be, n, U, kw = self.be, self.n, ch.U, ch.kw
        spec, p = self._knn(g.E, kw, U, U * nb, ch.contiguous)
        idx = self._buf("widx", (nb, U, kw), np.int32)
        dist = self._buf("wdist", (nb, U, kw), self.dt)
        if self.knn == "batched":
            KNN.launch(be, p, spec, self.x_dev, ch.pts_dev, U, ch.pts_dev, U, nb, 0, idx,
                       dist, xoff=c0 * n, series_stride=n)
            return idx, dist
        one_i = self._buf("oidx", (U, kw), np.int32)  # "edm": one table a launch
        one_d = self._buf("odist", (U, kw), self.dt)
        for b in range(nb):
            KNN.launch(be, p, spec, self.x_dev, ch.pts_dev, U, ch.pts_dev, U, 1, 0, one_i,
                       one_d, xoff=(c0 + b) * n, series_stride=n)
            be.copy_within(idx, b * U * kw, one_i, 0, U * kw)
            be.copy_within(dist, b * U * kw, one_d, 0, U * kw)
        return idx, dist

    def _lag_skills(self, g: _Group, ch: _Chunk, c0: int, nb: int, b0: int, out) -> None:
        """Every lag of chunk ``ch``: libraries ``c0 .. c0+nb-1``'s tables and rho rows
        ``b0 .. b0+nb-1`` of ``out``."""
        be, k, ldo = self.be, g.k, self.lags.size * self.N
        widx, wdist = self._union_tables(g, ch, c0, nb)
        m = max(r.M for r in ch.lags)
        lidx = self._buf("lidx", (nb, m, k), np.int32)  # (sized for the chunk's lags at once)
        ldist = self._buf("ldist", (nb, m, k), self.dt)
        self._tables_bufs(nb, m, k)
        sp = self._layout(k, self.weight, g.targets.size)
        sspec, kr = self._program_spec(k, self.weight, sp)
        off = point_offset(g.E, self.tau)
        for r in ch.lags:
            tidx, tw, tden = self._tables_bufs(nb, r.M, k)
            if r.full:  # every union row serves: a row's first k entries are the lag's
                XMAP_SKILL.pack(be, sspec, widx, wdist, ch.kw, ch.U * ch.kw, r.r0, r.M, nb,
                                0, tidx, tw, tden, sp, k=kr, memo=self._kernels)
            else:
                KNN.launch_window(be, self.real, widx, wdist, ch.kw, ch.U, r.r0, r.M, nb,
                                  r.lo, r.hi, k, lidx, ldist)
                XMAP_SKILL.pack(be, sspec, lidx, ldist, k, r.M * k, 0, r.M, nb, 0, tidx, tw,
                                tden, sp, k=kr, memo=self._kernels)
            self._skill(k, self.weight, tidx, tw, tden, r.M, nb, off + r.lag, g.tgt_dev,
                        r.dev["ocol"], g.targets.size, r.dev["obs"], out, ldo, b0, group=g,
                        shift=r.dev["shift"])

    # -- public ------------------------------------------------------------------------------
    def block_async(self, r0: int, r1: int, dst: np.ndarray | None = None
                    ) -> Callable[[], np.ndarray]:
        """Enqueue rows ``r0 .. r1-1`` at every lag and their read into ``dst`` (a
        C-contiguous ``(r1 - r0, n_lags, N)`` float32 array; None: a new one); returns
        the function that waits for them (as :meth:`XmapEngine.block_async`)."""
        be, rows, nl = self.be, r1 - r0, self.lags.size
        shape = (rows, nl, self.N)
        if dst is not None and dst.shape != shape:
            raise ValueError(f"dst must have shape {shape}, got {dst.shape}")
        out = be.empty((rows * nl * self.N,), np.float32)
        self.prebuild(rows)
        self._upload_lags()
        for g in self.groups:
            for ch in self._chunks[g.E]:
                def batch(b0: int, b1: int, g=g, ch=ch) -> None:
                    self._lag_skills(g, ch, r0 + b0, b1 - b0, b0, out)

                per = self._lag_bytes(g, ch)
                run_blocked(be, batch, rows, block=self._lag_batch_size(g, ch),
                            parameter="the series length (n), E or the range of lags",
                            what=f"cross-map k-NN tables over lags ({ch.U} rows x "
                                 f"{ch.kw} neighbours per library)",
                            nbytes=lambda nb, per=per: nb * per)
        wait = be.to_host_async(out, None if dst is None else dst.reshape(-1))
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
