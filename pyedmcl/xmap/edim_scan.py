"""The optimal-E scan of every series of a map's row block, on the map's device.

Simplex rho of each series predicting itself ``Tp`` ahead, E = 1 .. E_max, library the
first half of the series and prediction the second (pyEDM ``EmbedDimension`` with
``lib="1 n/2"``, ``pred="n/2+1 n"``: kEDM's ``edim`` split); ``pyedmcl.xmap`` with
``E="auto"`` takes each series' best E from it. An :class:`EdimScan` works on an
:class:`~pyedmcl.xmap.engine.XmapEngine`'s uploaded panel and launches through its
tables, packs and skill (one target per library: the diagonal skill), so a map and its
scan share buffers and built kernels. Where it applies, one fused multi-E scan
(``knn_scan``) gives every E's k-NN table of a batch of series; else one k-NN per E,
every E's kernels built at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import run_blocked
from clkernels.memory import DeviceOutOfMemory

from ..kernels.knn import KNN, is_contiguous
from ..kernels.xmap import XMAP_SCAN, XMAP_SKILL, scan_table_budget
from ..primitives.ranges import resolve
from .fused_tables import scan_bytes


class EdimScan:
    """The optimal-E scan of an engine's series (:meth:`block`)."""

    def __init__(self, engine: Any):
        """``engine``: the :class:`~pyedmcl.xmap.engine.XmapEngine` whose panel and
        launches the scan uses (it owns this object: no import back to it)."""
        self.eng = engine

    def _fused(self, r0: int, r1: int, E_max: int, Tp: int, out, keep: list) -> bool:
        """:meth:`block` through the fused multi-E scan (``knn_scan``, the
        ``xmap_scan`` family's parameters): per batch of series one scan launch gives every
        E's k-NN table, then per E one pack (its E plane) and one diagonal skill launch.
        One k-NN program for every E instead of one per E (a job's first run builds
        them all); the tables, so the skills, are the per-E kernel's bit for bit. False
        (nothing enqueued) where the scan does not apply: ``knn_kernel`` "batched" /
        "edm", tau <= 0, E_max > 32, E_max not fitting the series, or a CPU whose scan
        parameters are not the private-list variant (as :meth:`.FusedTables.applies`)."""
        eng = self.eng
        from ..kernels.knn_scan import KNN_SCAN, MAX_FUSED_E, scan_inputs
        from ..primitives.scan_fused import scan_layout
        if eng.knn_choice in ("batched", "edm") or eng.tau <= 0 or E_max > MAX_FUSED_E:
            return False
        be, n, half = eng.be, eng.n, eng.n // 2
        lay = scan_layout(n, E_max, tau=eng.tau, Tp=Tp, lib=f"1 {half}", pred=f"{half + 1} {n}")
        if lay is None or lay.knn != 0:
            return False
        spec = {"EMAX": E_max, "TAU": eng.tau, "KNN": 0, "METRIC": "euclidean",
                "REAL": eng.real, "FMA": eng.fma}
        nq, nl = lay.qt.size, lay.lemax.size
        params = XMAP_SCAN.params_for(be, spec, nq, nl)
        if not be.info.is_gpu and params["INS"] != "key":
            return False
        kmax, split = E_max + 1, params["SPLIT"]
        # rows of E: the queries with E lags of history (a suffix: qemax is nondecreasing)
        first = {E: int(np.searchsorted(lay.qemax, E)) for E in range(1, E_max + 1)}
        reqs = KNN_SCAN.requests(be, params, spec)
        for E in range(1, E_max + 1):
            sp = eng.skills.layout(E + 1, "simplex", 1, diag=True)
            sspec = eng.skills.spec(E + 1, "simplex")
            reqs += [XMAP_SKILL.request(be, sspec, sp, "pack"),
                     XMAP_SKILL.request(be, sspec, sp, "xmap_skill")]
        be.prebuild(reqs)
        lanes = KNN_SCAN.padded_lanes(params, nl)
        xp0, ints, pad = scan_inputs(eng.X[r0], eng.dt, lanes, emax=E_max, tau=eng.tau,
                                     t0=lay.t0, qt=lay.qt, qemax=lay.qemax, lemax=lay.lemax,
                                     obs=lay.obs)
        ldx = xp0.size
        xp = np.zeros((r1 - r0, ldx), eng.dt)
        xp[:, pad:pad + n] = eng.X[r0:r1]
        try:  # the block's padded series in one buffer; where it does not fit, the per-E
            xp_dev, ints_dev = be.to_device(xp.reshape(-1)), be.to_device(ints)  # path batches
        except DeviceOutOfMemory:
            return False
        obs_dev = {E: be.to_device(lay.obs[first[E]:].astype(np.int32)) for E in first}
        cols = {E: be.to_device(np.array([E - 1], np.int32)) for E in first}
        keep += [xp_dev, ints_dev, *obs_dev.values(), *cols.values()]
        acc = np.dtype(eng.acc_dt).itemsize
        per = scan_bytes(eng.dt, E_max, nq, kmax, split) + nq * (kmax * (4 + acc) + acc)
        plane = E_max * nq * kmax

        def batch(b0: int, b1: int) -> None:
            nb, c0 = b1 - b0, r0 + b0
            idx, dist, part = eng.fused.bufs("e", nb, E_max, nq, kmax, split)
            KNN_SCAN.launch(be, params, spec, xp_dev, ints_dev, nq, lay.t0, nl, lay.radius,
                            idx, dist, part, nseries=nb, xoff=b0 * ldx, xstride=ldx)
            tgt = be.to_device(np.array([c0], np.int32))
            keep.append(tgt)
            for E in range(1, E_max + 1):
                k, m = E + 1, nq - first[E]
                tables = eng.tables_bufs(nb, m, k)
                eng.skills.pack(k, "simplex", eng.skills.layout(k, "simplex", 1, diag=True),
                                idx, dist, kmax, plane, (E - 1) * nq + first[E], m, nb, 0,
                                *tables)
                # table entries are library times: the target value is at time + Tp
                eng.skills.launch(k, "simplex", *tables, m, nb, lay.Tp, tgt, cols[E], 1,
                                  obs_dev[E], out, E_max, b0, diag=True)

        run_blocked(be, batch, r1 - r0,
                    block=int(max(1, min(eng.max_libraries(), scan_table_budget(be.info) // per))),
                    parameter="the series length (n) or max_E",
                    what=f"fused-scan k-NN tables (E=1..{E_max}, {nq} rows per series)",
                    nbytes=lambda nb: nb * per)
        return True

    def block(self, r0: int, r1: int, E_max: int, Tp: int = 1) -> np.ndarray:
        """Simplex rho ``(r1 - r0, E_max)`` of each series predicting itself ``Tp`` ahead,
        library = first half, prediction = second half (pyEDM ``EmbedDimension`` with
        ``lib="1 n/2"``, ``pred="n/2+1 n"``: kEDM's ``edim`` split). NaN where E does
        not fit the series. Batched over series: one k-NN launch, one pack and one
        skill launch per (E, batch of series)."""
        eng = self.eng
        be = eng.be
        n, rows = eng.n, r1 - r0
        out = be.empty((rows * E_max,), np.float32)
        be.fill(out, np.nan)
        half = n // 2
        keep = []  # small per-call buffers stay alive until the queue has used them
        if self._fused(r0, r1, E_max, Tp, out, keep):
            res = be.to_host(out).reshape(rows, E_max)
            be.finish()
            del keep
            return res
        plans = {}
        for E in range(1, E_max + 1):
            try:
                plans[E] = resolve(n, E=E, tau=eng.tau, Tp=Tp, lib=f"1 {half}",
                                   pred=f"{half + 1} {n}")
            except ValueError:
                continue
        reqs = []  # every E's kernels built at once, before the first launch
        for E, plan in plans.items():
            k, nq, nl = plan.knn, plan.pred_points.size, plan.lib_points.size
            nb = min(max(1, rows), eng.batch_size(nq, k))
            spec, p = eng._knn(E, k, max(nq, nl), nq * nb, is_contiguous(plan.lib_points))
            sp = eng.skills.layout(k, "simplex", 1, diag=True)
            sspec = eng.skills.spec(k, "simplex")
            reqs += [KNN.request(be, p, spec), XMAP_SKILL.request(be, sspec, sp, "pack"),
                     XMAP_SKILL.request(be, sspec, sp, "xmap_skill")]
        be.prebuild(reqs)
        for E, plan in plans.items():
            k, nq, nl = plan.knn, plan.pred_points.size, plan.lib_points.size
            q_dev = be.to_device(plan.pred_points)
            l_dev = be.to_device(plan.lib_points)
            obs = np.where(plan.observed_mask, plan.target_times, -1).astype(np.int32)
            obs_dev = be.to_device(obs)
            col = be.to_device(np.array([E - 1], np.int32))

            def batch(b0: int, b1: int, E=E, k=k, nq=nq, nl=nl, plan=plan, q_dev=q_dev,
                      l_dev=l_dev, obs_dev=obs_dev, col=col, keep=keep) -> None:
                nb, c0 = b1 - b0, r0 + b0
                tidx, tw, tden = eng.tables_bufs(nb, nq, k)
                eng._tables(E, k, c0, nb, q_dev, nq, l_dev, nl, plan.exclusion_radius, tidx,
                             tw, tden, "simplex", eng.skills.layout(k, "simplex", 1, diag=True),
                             contiguous=is_contiguous(plan.lib_points))
                tgt = be.to_device(np.array([c0], np.int32))
                keep.extend([q_dev, l_dev, obs_dev, col, tgt])
                eng.skills.launch(k, "simplex", tidx, tw, tden, nq, nb, plan.offset + plan.Tp,
                                  tgt, col, 1, obs_dev, out, E_max, b0, diag=True)

            eng._batched(batch, rows, nq, k)
        res = be.to_host(out).reshape(rows, E_max)
        be.finish()
        del keep
        return res
