"""Every E-group's k-NN tables of a map's libraries from one fused multi-E scan.

The per-E kernels add sum(E_g) coordinates per pair of rows, one launch per E-group;
the fused scan (``knn_scan/knn_scan.cl.mako``, the ``xmap_scan`` family's parameters)
adds Emax coordinates once and keeps each E's list as it passes it, for a batch of
libraries in one launch. A :class:`FusedTables` decides whether a map takes it
(:meth:`applies`), prepares its inputs once (:meth:`setup`: the layout of query rows
and the panel padded per series, on the device) and makes a row block's rho through it
(:meth:`block`: per batch one scan, then per E-group one pack of its E plane and one
skill). Tables are the per-E kernels' bit for bit.

The map at many lags scans the lags' union instead (:class:`~pyedmcl.xmap.lag_engine.LagFusedTables`
overrides :meth:`layout` and :meth:`library`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import run_blocked
from clkernels.arrays import gather, gather_request
from clkernels.tuning import lookup

from ..kernels.xmap import XMAP_SCAN, scan_table_budget
from ..primitives.ranges import ccm_valid_times


@dataclass
class ScanSetup:
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


def scan_bytes(dt: Any, emax: int, nq: int, kmax: int, split: int) -> int:
    """Device bytes of one library's raw fused-scan tables of data type ``dt`` (SPLIT's
    partial lists too)."""
    item = np.dtype(dt).itemsize
    return emax * nq * kmax * (4 + item) * (1 + (split if split > 1 else 0))


class FusedTables:
    """The fused scan's tables of one engine's map (module docstring)."""

    def __init__(self, engine: Any):
        """``engine``: the :class:`~pyedmcl.xmap.engine.XmapEngine` whose panel, groups,
        buffers and skill plan the scan uses (it owns this object: no import back)."""
        self.eng = engine
        self._setup: ScanSetup | None = None

    def reset(self) -> None:
        """New E-groups: the layout is made again at the next use."""
        self._setup = None

    def applies(self) -> bool:
        """Whether the map takes the fused scan: with past lags (tau > 0), pyEDM's K = E + 1
        in every group and Emax <= 32, and by default where it saves distance work
        (:meth:`pays`). ``knn_method="scan"`` where it cannot apply is refused by name."""
        from ..kernels.knn_scan import MAX_FUSED_E
        eng = self.eng
        if eng.knn_choice in ("batched", "edm") or not eng.groups:
            return False
        Es = [g.E for g in eng.groups]
        ok = eng.tau > 0 and max(Es) <= MAX_FUSED_E and all(g.k == g.E + 1 for g in eng.groups)
        if eng.knn_choice == "scan":
            if not ok:
                raise ValueError("knn_method='scan' needs tau > 0, E <= 32 and series long "
                                 "enough for E + 1 neighbours in every E-group")
            return True
        return ok and self.pays(Es, int(ccm_valid_times(eng.n, 1, eng.tau, eng.Tp).size))

    def pays(self, Es: list[int], nq: int) -> bool:
        """Whether the fused scan saves work over the per-E kernels for E-groups ``Es``
        of ``nq`` rows (at E = 1) by default: the per-E kernels add sum(E_g) coordinates
        per pair, the scan Emax (plus a compare per E), so at least two groups and
        sum(E_g) >= 2 Emax; on a CPU also only with the private-list scan (INS "key") or
        whatever insertion mode tuning measured fastest on this very CPU (a class's
        borrowed entry was timed on another CPU: it takes the per-E kernels). The
        local-memory lists with untuned parameters lose to the per-E batched kernel;
        tuned ones, and the private lists, win (decisions 0049, 0076)."""
        if not (len(Es) >= 2 and sum(Es) >= 2 * max(Es)):
            return False
        be = self.eng.be
        if be.info.is_gpu:
            return True
        spec = {"EMAX": max(Es), "TAU": self.eng.tau, "KNN": 0, "METRIC": "euclidean",
                "REAL": self.eng.real}
        if XMAP_SCAN.params_for(be, spec, nq, nq)["INS"] == "key":
            return True
        source = lookup(XMAP_SCAN, be.info, XMAP_SCAN.spec_bucket(spec),
                        XMAP_SCAN.size_bucket(nq)).source
        return source in ("user", "shipped:device")

    def setup(self, inputs: bool = True) -> ScanSetup:
        """The scan's layout and kernel parameters and, with ``inputs``, its padded series on
        the device, read from the panel at the first block: the kernels (:meth:`requests`)
        are known before the panel is complete (a head start's engine is made while the
        host still writes it)."""
        if self._setup is None:
            self._setup = self.layout()
        sc, eng = self._setup, self.eng
        if inputs and sc.xp_dev is None:
            from ..kernels.knn_scan import KNN_SCAN, batch_inputs, batch_ints, padded_columns
            be = eng.be
            lanes = KNN_SCAN.padded_lanes(sc.params, sc.nq)
            pad = (sc.spec["EMAX"] - 1) * eng.tau
            if eng.skills.gathers_targets:  # padded on the device from the panel already there
                cols, sc.ldx = padded_columns(eng.n, sc.qt, pad, lanes)
                sc.xp_dev = gather(be, eng.x_dev, eng.n, eng.N, be.to_device(cols), sc.ldx, 0.0)
                ints = batch_ints(sc.qt, sc.qemax, lanes)
            else:  # element offsets past int32: the host's padded copy
                xp, ints, sc.ldx = batch_inputs(eng.X, sc.qt, sc.qemax, pad, lanes, eng.dt)
                sc.xp_dev = be.to_device(xp)
            sc.ints_dev = be.to_device(self.library(ints, sc))
        return sc

    def layout(self) -> ScanSetup:
        """The scan's rows: CCM's rows at E = 1, each E-group's rows a suffix of them."""
        eng = self.eng
        n, tau = eng.n, eng.tau
        emax = max(g.E for g in eng.groups)
        qt = ccm_valid_times(n, 1, tau, eng.Tp)
        nq = int(qt.size)
        qemax = np.minimum(qt // tau + 1, emax)
        row0 = {}
        for g in eng.groups:
            times = ccm_valid_times(n, g.E, tau, eng.Tp)
            r = int(np.searchsorted(qt, times[0]))
            if not np.array_equal(qt[r:r + times.size], times):  # pragma: no cover
                raise RuntimeError("CCM rows do not nest across E")
            row0[g.E] = (g.E - 1) * nq + r
        spec = {"EMAX": emax, "TAU": tau, "KNN": 0, "METRIC": "euclidean", "REAL": eng.real,
                "FMA": eng.fma}
        params = XMAP_SCAN.params_for(eng.be, spec, nq, nq)
        return ScanSetup(spec, params, nq, emax + 1, int(qt[0]), row0, qt, qemax)

    def library(self, ints: np.ndarray, sc: ScanSetup) -> np.ndarray:
        """The scan's int inputs (:func:`~pyedmcl.kernels.knn_scan.batch_ints`): here
        every query row is a library row at each E it has the history for."""
        return ints

    def block(self, r0: int, r1: int, out) -> None:
        """Every E-group's rho rows of libraries ``r0 .. r1-1`` into ``out``: per batch of
        libraries one fused scan launch, then per group one pack (the group's E plane and
        rows) and one skill launch."""
        eng = self.eng
        be, sc, skills = eng.be, self.setup(), eng.skills
        emax, nq, kmax, split = sc.spec["EMAX"], sc.nq, sc.kmax, sc.params["SPLIT"]
        acc = np.dtype(eng.acc_dt).itemsize
        kmax_g, mmax = max(g.k for g in eng.groups), max(g.M for g in eng.groups)
        per = scan_bytes(eng.dt, emax, nq, kmax, split) + mmax * (kmax_g * (4 + acc) + acc)
        plane = emax * nq * kmax

        def batch(b0: int, b1: int) -> None:
            nb, c0 = b1 - b0, r0 + b0
            idx, dist = self.libraries(sc, nb, c0)
            eng.reserve_tables(nb)
            for g in eng.groups:
                tables = eng.tables_bufs(nb, g.M, g.k)
                sp = skills.layout(g.k, eng.weight, g.targets.size)
                skills.pack(g.k, eng.weight, sp, idx, dist, kmax, plane, sc.row0[g.E], g.M, nb,
                            0, *tables)
                # table entries are library times: the target value is at time + Tp
                skills.launch(g.k, eng.weight, *tables, g.M, nb, eng.Tp, g.tgt_dev, g.tgt_dev,
                              g.targets.size, g.obs_dev, out, eng.N, b0, group=g)

        run_blocked(be, batch, r1 - r0,
                    block=int(max(1, min(eng.max_libraries(), scan_table_budget(be.info) // per))),
                    parameter="the series length (n) or E",
                    what=f"fused-scan k-NN tables (E=1..{emax}, {nq} rows per library)",
                    nbytes=lambda nb: nb * per)

    def libraries(self, sc: ScanSetup, nb: int, c0: int) -> tuple[Any, Any]:
        """One fused scan launch of the ``nb`` libraries from ``c0`` (every query, the
        whole library: the map's scan, :meth:`setup`): its raw tables (index, distance)."""
        from ..kernels.knn_scan import KNN_SCAN
        emax, nq, kmax, split = sc.spec["EMAX"], sc.nq, sc.kmax, sc.params["SPLIT"]
        idx, dist, part = self.bufs("s", nb, emax, nq, kmax, split)
        KNN_SCAN.launch(self.eng.be, sc.params, sc.spec, sc.xp_dev, sc.ints_dev, nq, sc.t0, nq,
                        0, idx, dist, part, nseries=nb, xoff=c0 * sc.ldx, xstride=sc.ldx)
        return idx, dist

    def bufs(self, tag: str, nb: int, emax: int, nq: int, kmax: int, split: int
             ) -> tuple[Any, Any, Any]:
        """Raw fused-scan tables of ``nb`` libraries (index, distance) and, with SPLIT > 1,
        the partial lists the merge reads; ``tag`` keeps a caller's buffers apart."""
        buf, dt = self.eng.scratch, self.eng.dt
        shape = (nb, emax, nq, kmax)
        part = None
        if split > 1:
            part = (buf(tag + "pidx", (nb, split, emax, nq, kmax), np.int32),
                    buf(tag + "pdist", (nb, split, emax, nq, kmax), dt))
        return buf(tag + "idx", shape, np.int32), buf(tag + "dist", shape, dt), part

    def requests(self) -> list[tuple]:
        """The fused scan's kernels of a batch of libraries (and the padded panel's gather)."""
        from ..kernels.knn_scan import KNN_SCAN
        eng = self.eng
        sc = self.setup(inputs=False)
        reqs = KNN_SCAN.requests(eng.be, sc.params, sc.spec)
        if eng.skills.gathers_targets:
            reqs.append(gather_request(eng.x_dev.dtype))  # the padded panel
        return reqs
