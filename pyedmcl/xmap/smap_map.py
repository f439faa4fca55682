"""``xmap(..., method="smap", theta=...)``: the all-to-all S-map cross-map matrix.

``rho[i, j]`` is the skill of pyEDM's ``SMap(columns=i, target=j, E=E[j], tau, Tp,
theta, exclusionRadius)`` over the whole series (lib = pred = every row, so each row is
left out of its own library, with its ``exclusion_radius`` neighbourhood in time): the
S-map analogue of the simplex map's CCM at full library size.

Why it batches over targets: S-map's weights ``exp(-theta d / dbar)`` and its local
regressors depend only on the library series, so the weighted normal equations of a
prediction row are the same for every target. The kernel (``smap/smap_xmap.cl.mako``,
:data:`pyedmcl.kernels.smap.SMAP_XMAP`) factors them once per (library, row) and turns
the factor into the row of the hat matrix, ``h_j = w_j^2 (G^-1 e0) . [1, z_j]``; every
target's prediction is then ``sum_j h_j y(t_j + Tp)`` -- one dot product over the
library per target instead of a least-squares problem per pair. The numerics are the
S-map path's (:mod:`pyedmcl.edm.smap`): distances in the storage dtype, everything else
accumulated in float64 (``accumulate="double"``, where the device has fp64; without
fp64 plain float32, predictions within 1e-3 on well-conditioned data: no double-float
variant yet), rows whose scaled system fails the pivot or trace(G^-1) test solved on the
host by SVD least squares (pyEDM's ``lstsq``), all targets of the row at once.

One launch covers a batch of library series of one E-group and all its targets, and a
second reduces every pair's rho on the device, so only rho comes back; a batch with
rows for the host (rank-deficient local fits) brings its predictions back instead, to
complete them there and reduce rho on the host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import get_backend

from .._blas import one_blas_thread
from ..edm.pyedm_kdtree import FarthestDrop, leave_out_farthest
from ..edm.smap_basis import gram_solves, library_basis
from ..edm.smap_host import HOST_THREADS, embed_at
from ..kernels.smap import SMAP_XMAP, acc_dtype
from ..primitives.ranges import resolve
from .scheduler import Progress

#: device bytes one launch's predictions (and hat rows) may take (batch x targets x rows,
#: batch x library x rows in ACC)
OUT_BUDGET_CPU, OUT_BUDGET_GPU = 64 << 20, 512 << 20
#: how a device kind sums the targets: "stream" (in the row's kernel, streaming the
#: library once per 16 targets) or "hat" (the hat rows written, then a GEMM with the
#: targets, for E-groups of at least HAT_MIN_TARGETS). The same sums in the same order
#: either way; "stream" measured faster on CPUs, "hat" on GPUs (decision 0136,
#: ``bench/bench_xmap.py --smap-compare``)
PASS3 = {"cpu": "stream", "gpu": "hat"}
HAT_MIN_TARGETS = 32
#: and series of at most this many points (longer ones: the hat rows, rows x library
#: per library, outgrow their use; H200, 100 series x 8,000 points: "hat" 0.91 s,
#: "stream" 0.67 s; decision 0136)
HAT_MAX_POINTS = 4096
#: elements of one block's (rows x library) and (library x basis x targets) arrays of the
#: host rows solved in the library's orthonormal basis
BASIS_ELEMENTS = 1 << 21


@dataclass
class _Group:
    """Targets sharing one E, with the rows pyEDM's SMap uses for that E (whole series,
    leave-one-out) and the observations their predictions are scored against."""

    E: int
    targets: np.ndarray
    lib_t: np.ndarray
    pred_t: np.ndarray
    obs: np.ndarray  # (targets, rows) float64, NaN where the row's target time is outside
    dev: dict[str, Any]


def check_smap_options(method: Any, theta: Any, exclusion_radius: Any) -> tuple[str, float | None, int]:
    """``method``, ``theta`` and ``exclusion_radius`` of :func:`pyedmcl.xmap` validated:
    theta (>= 0, finite) is required by and only valid with ``method="smap"``; so is a
    non-zero exclusion radius (the simplex map is CCM's, which has none)."""
    from ..validation import check_int

    if method not in ("simplex", "smap"):
        raise ValueError(f"method={method!r} is invalid; allowed: 'simplex', 'smap'")
    R = check_int(exclusion_radius, "exclusion_radius", 0)
    if method == "simplex":
        if theta is not None:
            raise ValueError(f"theta={theta!r} is only valid with method='smap' (the S-map "
                             "localisation); the simplex map takes no theta")
        if R:
            raise ValueError(f"exclusion_radius={exclusion_radius!r} is only valid with "
                             "method='smap'; the simplex map (CCM) excludes only the row itself")
        return method, None, 0
    if theta is None:
        raise ValueError("method='smap' needs theta (the S-map localisation, a finite number >= 0)")
    try:
        th = float(theta)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"theta must be a real number, got {theta!r}") from exc
    if not np.isfinite(th) or th < 0:
        raise ValueError(f"theta={theta!r} is out of range; allowed: finite and >= 0")
    return method, th, R


class SmapXmapEngine:
    """The S-map cross map of an (N, n) panel on one device: any block of rows ``[r0, r1)``
    of the N x N rho matrix (:meth:`rows`). ``X`` is the panel as the kernel reads it
    (float32 or float64, each series centred); ``raw``: the (N, n) data as given, in
    float64 (default: ``X``), which the observations and the host's SVD rows take, as
    pyEDM (a minimum-norm solution is not shift-invariant, and float32 rounding moves a
    rank-deficient fit); ``accumulate``: "double" (default where the device has fp64)
    or "float"; ``pass3``: how the targets are summed (default :data:`PASS3` of the
    device kind)."""

    def __init__(self, be: Any, X: np.ndarray, E: np.ndarray, *, tau: int, Tp: int,
                 theta: float, exclusion_radius: int = 0, accumulate: str | None = None,
                 raw: np.ndarray | None = None, pass3: str | None = None):
        self.be, self.X = be, np.ascontiguousarray(X)
        self.N, self.n = X.shape
        self.tau, self.Tp, self.theta, self.R = int(tau), int(Tp), float(theta), int(exclusion_radius)
        self.acc = accumulate or ("double" if be.info.fp64 else "float")
        if self.acc == "double" and not be.info.fp64:
            raise ValueError(f"accumulate='double' needs fp64, which device {be.info.name} lacks")
        if X.dtype == np.float64 and self.acc != "double":
            raise ValueError("dtype=float64 needs float64 accumulation")
        self.X_dev = be.to_device(self.X)
        self.pass3 = pass3 or PASS3["gpu" if be.info.is_gpu else "cpu"]
        if self.pass3 not in ("stream", "hat"):
            raise ValueError(f"pass3={pass3!r}; allowed: 'stream', 'hat'")
        self.X64 = np.asarray(self.X if raw is None else raw, dtype=np.float64)
        #: each series' shift from the data as given to the kernel's (its centring):
        #: device predictions are moved back by it, to the host rows' and pyEDM's units
        self.offset = (self.X64 - self.X).mean(axis=1)
        self.groups = [self._group(int(e), np.flatnonzero(E == e)) for e in np.unique(E)]

    def _group(self, E: int, targets: np.ndarray) -> _Group:
        plan = resolve(self.n, E=E, tau=self.tau, Tp=self.Tp, knn=1,
                       exclusion_radius=self.R, max_knn=None)
        lib_t, pred_t = plan.lib_times, plan.pred_times
        if lib_t.size < E + 2:
            raise ValueError(f"E={E} leaves {lib_t.size} library rows of series of {self.n} "
                             f"values (tau={self.tau}, Tp={self.Tp}); S-map needs at least "
                             f"E+2 = {E + 2}")
        obs = np.full((targets.size, pred_t.size), np.nan)
        seen = plan.observed_mask
        obs[:, seen] = self.X64[targets][:, pred_t[seen] + self.Tp]
        be = self.be
        dev = {"lib_t": be.to_device(lib_t.astype(np.int32)),
               "pred_t": be.to_device(pred_t.astype(np.int32)),
               "seen": be.to_device(seen.astype(np.int32)),
               "tgt": be.to_device(targets.astype(np.int32))}
        return _Group(E, targets, lib_t, pred_t, obs, dev)

    def batch_size(self, g: _Group) -> int:
        """Library series one launch of group ``g`` takes (its predictions fit the budget)."""
        budget = OUT_BUDGET_GPU if self.be.info.is_gpu else OUT_BUDGET_CPU
        rows = g.targets.size + (g.lib_t.size if self._pass3(g) == "hat" else 0)
        per = rows * g.pred_t.size * np.dtype(acc_dtype(self.acc)).itemsize
        return max(1, budget // max(1, per))

    def _pass3(self, g: _Group) -> str:
        return ("hat" if self.pass3 == "hat" and g.targets.size >= HAT_MIN_TARGETS
                and self.n <= HAT_MAX_POINTS else "stream")

    def _launch(self, g: _Group, l0: int, l1: int) -> tuple[dict[str, Any], dict[str, Any],
                                                             np.ndarray]:
        """Enqueue group ``g``'s predictions from libraries ``l0..l1-1``: the kernel's
        spec, its arguments (``out_pred`` on the device) and the (l1 - l0, rows) status
        codes (1: the row goes to the host)."""
        be, B = self.be, l1 - l0
        pass3 = self._pass3(g)
        spec = SMAP_XMAP.spec_for(g.E, self.tau, self.X.dtype.type, self.acc, g.targets.size,
                                  be.info, pass3)
        acc = acc_dtype(self.acc)
        n_pred, n_tg, n_lib = g.pred_t.size, g.targets.size, g.lib_t.size
        args = {"X": self.X_dev, "n": self.n, "lib0": l0, **g.dev, "n_lib": n_lib,
                "n_tg": n_tg, "Tp": self.Tp, "theta": self.theta, "excl_r": self.R,
                "knn": n_lib - 1, "out_pred": be.empty(B * n_tg * n_pred, acc),
                "out_status": be.empty(B * n_pred, np.int32),
                "hat": be.empty(B * n_lib * n_pred if pass3 == "hat" else 1, acc)}
        SMAP_XMAP.launch(be, spec, args, n_pred, B)
        if pass3 == "hat":
            SMAP_XMAP.launch_gemm(be, spec, args, n_pred, B)
        status = be.to_host(args["out_status"]).reshape(B, n_pred)
        if np.any(status == 3):  # cannot happen: "all neighbours" drops 0 or 1 point
            raise RuntimeError("S-map cross-map kernel dropped more than one neighbour")
        return spec, args, status

    def _host_predictions(self, g: _Group, l0: int, args: dict[str, Any],
                          status: np.ndarray) -> np.ndarray:
        """A launch's predictions on the host (units of the data as given), its status-1
        rows solved there."""
        B, n_pred = status.shape
        pred = self.be.to_host(args["out_pred"]).astype(np.float64).reshape(
            B, g.targets.size, n_pred)
        pred += self.offset[g.targets][None, :, None]
        libs = np.unique(np.nonzero(status == 1)[0])
        if not libs.size:
            return pred
        import scipy.linalg  # noqa: F401  (imported here once, not in the threads below)
        import scipy.spatial.distance  # noqa: F401

        def library(b: int) -> None:  # writes its own slice of pred alone
            rows = np.flatnonzero(status[b] == 1)
            far = self._farthest(g, l0 + int(b))
            got, solved = self._rows_in_basis(g, l0 + int(b), rows, far)
            pred[b][:, rows[solved]] = got[solved].T
            for row in rows[~solved]:
                pred[b, :, row] = self._row_lstsq(g, l0 + int(b), int(g.pred_t[row]), far)

        # the libraries on threads; BLAS on one thread (pyedmcl._blas): the basis's many
        # small factorisations and solves, and one small SVD a row, cost more on BLAS's own
        # threads than they gain (12 Lorenz components, T 1,000, E 10, 2 cores:
        # 0.92 -> 0.45 s with both)
        threads = min(HOST_THREADS, libs.size)
        with one_blas_thread():
            if threads == 1:
                for b in libs:
                    library(int(b))
            else:
                with ThreadPoolExecutor(max_workers=threads) as pool:
                    for _ in pool.map(library, libs.tolist()):
                        pass
        return pred

    def _farthest(self, g: _Group, lib: int) -> FarthestDrop | None:
        """pyEDM's choice among equally far library points of library series ``lib``
        (:mod:`pyedmcl.edm.pyedm_kdtree`; its tree is built on first use), where it can
        decide."""
        rule = FarthestDrop(embed_at(self.X64[lib], g.lib_t, g.E, self.tau), g.lib_t, g.pred_t,
                            g.lib_t.size - 1, self.R)
        return rule if rule.usable() else None

    def _rows_in_basis(self, g: _Group, lib: int, rows: np.ndarray,
                       far: FarthestDrop | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``rows`` (positions in ``g.pred_t``) of library series ``lib``, every
        target's prediction, solved in the library's orthonormal basis
        (:mod:`pyedmcl.edm.smap_basis`: lstsq's answer to rounding, in blocks of rows, all
        targets as right-hand sides): the (rows, targets) predictions and which rows the
        basis vouched for (the others are :meth:`_row_lstsq`'s)."""
        from scipy.linalg import solve_triangular  # (on first use: ~0.25 s of import)
        from scipy.spatial.distance import cdist

        x, E = self.X64[lib], g.E
        out = np.full((rows.size, g.targets.size), np.nan)
        solved = np.zeros(rows.size, bool)
        XL = embed_at(x, g.lib_t, E, self.tau)
        Y = self.X64[g.targets][:, g.lib_t + self.Tp].T            # (n_lib, targets)
        basis = library_basis(XL) if np.all(np.isfinite(Y)) else None
        if basis is None:
            return out, solved
        n_lib, n_tg = g.lib_t.size, g.targets.size
        tchunk = max(1, BASIS_ELEMENTS // (n_lib * (E + 1)))
        block = max(8, BASIS_ELEMENTS // n_lib)
        for b0 in range(0, rows.size, block):
            r = np.arange(b0, min(rows.size, b0 + block))
            tps = g.pred_t[rows[r]]
            XP = embed_at(x, tps, E, self.tau)
            d = cdist(XP, XL)
            use = np.abs(g.lib_t[None, :] - tps[:, None]) > self.R
            one = np.flatnonzero(use.all(axis=1))  # knn = |lib| - 1: the farthest out
            if one.size:
                sub = use[one]
                leave_out_farthest(sub, d[one] ** 2, tps[one], XP[one], far)
                use[one] = sub
            with np.errstate(all="ignore"):
                dmean = np.where(use, d, 0.0).sum(axis=1) / use.sum(axis=1)
                w = np.ones_like(d) if self.theta == 0 else \
                    np.exp(-(self.theta / dmean)[:, None] * d)
            w = np.where(use, w, 0.0)
            ok = np.all(np.isfinite(w), axis=1) & (np.count_nonzero(w, axis=1) > E + 1)
            w2 = w[ok] ** 2
            good, G = gram_solves(basis, w2)
            idx = r[ok][good]
            if idx.size == 0:
                continue
            w2, G = w2[good], G[good]
            # the prediction point in the basis: [1, x_p] = q_p R0 (p = q_p z, no slopes'
            # cancellation against the intercept)
            qp = solve_triangular(basis.R0, np.column_stack([np.ones(idx.size), XP[ok][good]]).T,
                                  trans="T")                      # (E + 1, rows)
            for t0 in range(0, n_tg, tchunk):
                t1 = min(n_tg, t0 + tchunk)
                QY = basis.Q0[:, :, None] * Y[:, None, t0:t1]        # (n_lib, E + 1, targets)
                rhs = (w2 @ QY.reshape(n_lib, -1)).reshape(idx.size, E + 1, t1 - t0)
                z = np.linalg.solve(G, rhs)                          # (rows, E + 1, targets)
                out[idx, t0:t1] = np.einsum("kr,rkt->rt", qp, z)
            solved[idx] = True
        return out, solved

    def predictions(self, g: _Group, l0: int, l1: int) -> np.ndarray:
        """(l1 - l0, targets, rows) float64 predictions of group ``g`` from libraries
        ``l0..l1-1`` (in the units of the data as given; NaN where no fit exists), the
        ill-conditioned rows solved on the host."""
        _, args, status = self._launch(g, l0, l1)
        return self._host_predictions(g, l0, args, status)

    def rho(self, g: _Group, l0: int, l1: int) -> np.ndarray:
        """(l1 - l0, targets) rho of group ``g`` from libraries ``l0..l1-1``: reduced on
        the device (only rho comes back), except in a launch with rows for the host,
        whose predictions come back to be completed there."""
        spec, args, status = self._launch(g, l0, l1)
        if np.any(status == 1):
            return pearson(self._host_predictions(g, l0, args, status), g.obs)
        B, n_tg = l1 - l0, g.targets.size
        args["out_rho"] = self.be.empty(B * n_tg, acc_dtype(self.acc))
        SMAP_XMAP.launch_rho(self.be, spec, args, g.pred_t.size, B * n_tg)
        return self.be.to_host(args["out_rho"]).astype(np.float64).reshape(B, n_tg)

    def _row_lstsq(self, g: _Group, lib: int, tp: int, far: FarthestDrop | None = None
                   ) -> np.ndarray:
        """Every target's prediction of one row exactly as pyEDM computes it (SVD least
        squares of the weighted local model, all targets as right-hand sides)."""
        x, E, tau = self.X64[lib], g.E, self.tau
        lags = np.arange(E) * tau
        nb = g.lib_t[np.abs(g.lib_t - tp) > self.R]
        XL = x[nb[:, None] - lags]
        xp = x[tp - lags]
        d = np.sqrt(((XL - xp) ** 2).sum(1))
        if nb.size > g.lib_t.size - 1:  # pyEDM's knn = |lib| - 1 drops the farthest
            keep = np.ones((1, nb.size), bool)
            leave_out_farthest(keep, (d ** 2)[None, :], np.array([tp]), xp[None, :], far)
            nb, XL, d = nb[keep[0]], XL[keep[0]], d[keep[0]]
        none = np.full(g.targets.size, np.nan)
        if d.size == 0:
            return none
        with np.errstate(divide="ignore", invalid="ignore"):
            W = np.ones_like(d) if self.theta == 0 else np.exp(-(self.theta / d.mean()) * d)
        A = np.column_stack([W, W[:, None] * XL])
        Y = self.X64[g.targets][:, nb + self.Tp].T
        if not np.all(np.isfinite(A)):
            return none
        with np.errstate(all="ignore"):
            try:
                C = np.linalg.lstsq(A, W[:, None] * Y, rcond=None)[0]
            except np.linalg.LinAlgError:
                return none
        return C[0] + xp @ C[1:]

    def rows(self, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0..r1-1`` of the rho matrix (float32): library series r0..r1-1
        cross-mapping every target, each E-group in batches of libraries."""
        out = np.empty((r1 - r0, self.N), np.float32)
        for g in self.groups:
            step = self.batch_size(g)
            for l0 in range(r0, r1, step):
                l1 = min(r1, l0 + step)
                out[l0 - r0:l1 - r0, g.targets] = self.rho(g, l0, l1)
        return out


def pearson(pred: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Pearson rho of each ``pred[b, t]`` against ``obs[t]`` over the rows where both are
    finite (NaN with fewer than two), in float64, as :func:`numpy.corrcoef` of the pairs."""
    ok = np.isfinite(pred) & np.isfinite(obs)[None]
    cnt = ok.sum(-1)
    p = np.where(ok, pred, 0.0)
    o = np.where(ok, obs[None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        dp = np.where(ok, p - (p.sum(-1) / cnt)[..., None], 0.0)
        do = np.where(ok, o - (o.sum(-1) / cnt)[..., None], 0.0)
        rho = (dp * do).sum(-1) / np.sqrt((dp * dp).sum(-1) * (do * do).sum(-1))
    return np.where(cnt >= 2, rho, np.nan)


def smap_matrix(job: Any, panel: Any, blocks: list[tuple[int, int, int]], E_arr: np.ndarray,
                store: Any, raw: np.ndarray) -> tuple[Any, dict[str, int]]:
    """The S-map map's rho by row blocks on the job's device (a store's pending blocks,
    else all of them in memory) and the blocks it computed; ``raw``: the data as given
    (:class:`SmapXmapEngine`)."""
    be = get_backend(job.devices[0], job.backend)
    eng = SmapXmapEngine(be, panel.X, E_arr, tau=panel.tau, Tp=panel.Tp, theta=job.theta,
                         exclusion_radius=job.exclusion_radius, raw=raw)
    if store is not None:
        pend = set(store.pending())
        todo = [b for b in blocks if b[0] in pend]
    else:
        todo = blocks
        mat = np.empty((panel.N, panel.N), np.float32)
    bar = Progress(len(todo), "xmap smap", job.progress)
    try:
        for b, r0, r1 in todo:
            rows = eng.rows(r0, r1)
            if store is not None:
                store.write_block(b, rows)
            else:
                mat[r0:r1] = rows
            bar.update()
    finally:
        bar.close()
    return (store.rho if store is not None else mat), {be.info.name: len(todo)}


def refuse_smap_options(surrogates: int, scheduler: Any, devices: list[Any]) -> None:
    """What the S-map map does not do (yet): surrogates, a Dask cluster, several devices."""
    if surrogates:
        raise ValueError("surrogates= is not supported with method='smap'; use method='simplex'")
    if scheduler is not None:
        raise ValueError("scheduler= is not supported with method='smap'; it runs on one device")
    if len(devices) > 1:
        raise ValueError(f"devices={devices!r}: method='smap' runs on one device; give one")


def smap_result(job: Any, panel: Any, blocks: list[tuple[int, int, int]], E_arr: np.ndarray,
                store: Any, edim_rho: np.ndarray | None, raw: np.ndarray) -> Any:
    """:func:`pyedmcl.xmap`'s result for ``method="smap"`` (the caller reruns it in float64
    where the panel's float32 check fails, as the simplex map)."""
    from .results import XmapResult

    rho, counts = smap_matrix(job, panel, blocks, E_arr, store, raw)
    return XmapResult(rho=rho, E=E_arr, names=panel.names, edim_rho=edim_rho,
                      path=None if job.out is None else str(job.out), blocks_per_device=counts)
