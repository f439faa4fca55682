"""The lookup kernel family (``lookup/simplex_lookup.cl.mako``): space, case, launchers.

One template, three kernels, each with its launcher here:

* ``lookup`` (:meth:`LookupKernel.launch`): Simplex predictions from k-NN tables (the
  weighted average of the neighbours' targets), batched over targets and tables; a
  gather (K table reads and K target reads per prediction, memory-bound) whose
  work-group size WG is tuned.
* ``skill`` (:meth:`LookupKernel.launch_skill`): Pearson rho / MAE / RMSE per
  prediction row reduced on the device; its WG is the width of the reduction tree,
  which fixes the summation order (:func:`ccm_skill_wg`, :func:`skill_wg`).
* ``subset_lookup`` (:meth:`LookupKernel.launch_subset`): CCM's k-NN of sampled
  libraries and lookup fused, from every query's sorted full-library row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo, fuses_despite_pragma, inline_vector_ops
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace

from .knn import k_bucket as _k_bucket

TEMPLATE = "lookup/simplex_lookup.cl.mako"

#: work-group size (number of streams of the pairwise tree) of CCM's rho reduction on
#: every device: pyedmcl.ccm and the all-to-all map (``xmap/xmap_lookup.cl.mako``) share it,
#: so their rho agree bit for bit, and GPUs and CPUs reduce in the same order. Each
#: stream ends in a finish and a merge of shifted sums (five and three float64 divisions
#: a target), which the map pays once per (library, target): at 64 streams they were a
#: fifth of the H100's map. 16, not fewer: Intel's CPU runtime vectorises a work-group's
#: streams 16 wide (fewer are much slower there), and the Simplex skill's 256 on GPUs
#: is slower still (decision 0113)
CCM_SKILL_WG = 16


def pow2_floor(n: int) -> int:
    """The largest power of two not above ``n`` (>= 1): a reduction width a device allows."""
    return 1 << (n.bit_length() - 1)


def ccm_skill_wg(info: DeviceInfo) -> int:
    """CCM's rho reduction width on the device ``info`` (:data:`CCM_SKILL_WG`, or the
    largest power of two the device allows)."""
    return pow2_floor(min(CCM_SKILL_WG, info.max_work_group_size))


def skill_wg(info: DeviceInfo) -> int:
    """The Simplex skill's reduction width: 256 streams on GPUs, 64 on CPUs (a power of
    two the device allows)."""
    return pow2_floor(min(256 if info.is_gpu else 64, info.max_work_group_size))


def acc_type(info: DeviceInfo) -> str:
    """The accumulation type of the lookup kernels on the device ``info``."""
    return "double" if info.fp64 else "float"


class LookupKernel(TunableKernel):
    """Tunable family ``lookup``: work-group size of the Simplex lookup.

    A spec holds ``K`` (neighbours per query), ``REAL`` ("float" / "double"), ``WEIGHT``
    ("simplex" / "ccm": pyEDM's zero-distance rule) and, for :meth:`launch`, ``VARIANCE``
    (0 / 1: also pyEDM's prediction variance).
    """

    name = "lookup"
    template = TEMPLATE
    space = TuningSpace(
        params={"WG": (16, 32, 64, 128, 256, 512)},
        heuristic=lambda info: {"WG": 64 if info.is_gpu else 16},
        constraint=lambda p, info: p["WG"] <= info.max_work_group_size,
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        return f"{spec.get('REAL', 'float')}-{spec.get('WEIGHT', 'simplex')}-{_k_bucket(spec['K'])}"

    def default_specs(self):
        return [{"K": k, "REAL": "float", "WEIGHT": "simplex"} for k in (2, 6, 11, 21)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        return [65536] if info.is_gpu else [16384]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _LookupCase(backend, spec, size)

    def request(self, be: Backend, spec: dict[str, Any], wg: int, name: str) -> tuple:
        """Kernel ``name`` ("lookup", "skill", "subset_lookup") for ``spec`` and work-group
        size ``wg`` as ``(template, params, name)`` (for :meth:`clkernels.Backend.prebuild`;
        "skill" takes WEIGHT "simplex" and VARIANCE 0 as :meth:`launch_skill` does)."""
        if name == "skill":
            spec = {**spec, "WEIGHT": "simplex", "VARIANCE": 0}
        params = {"K": spec["K"], "REAL": spec.get("REAL", "float"), "ACC": acc_type(be.info),
                  "WG": wg, "WEIGHT": spec.get("WEIGHT", "simplex"),
                  "VARIANCE": int(spec.get("VARIANCE", 0)),
                  "INL": int(inline_vector_ops(be.info)),
                  "KS": spec.get("KS", spec["K"]), "CHECK": int(spec.get("CHECK", 0)),
                  "FS": int(spec.get("FS", 0)) if name == "skill" else 0,
                  "RESOLVE": 0, "E": 0, "TAU": 0, "FMA": 0,
                  "NOFUSE": int(fuses_despite_pragma(be.info))}
        if name in ("lookup", "resolve_rows") and spec.get("RESOLVE"):  # (one program)
            params.update(RESOLVE=1, E=int(spec["E"]), TAU=int(spec["TAU"]),
                          FMA=int(spec["FMA"]))
        return (self.template, params, name)

    def _kernel(self, be: Backend, spec: dict[str, Any], wg: int, name: str):
        return be.kernel(*self.request(be, spec, wg, name))

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], idx, dist, nq: int,
               nbatch: int, y_dev, ldy: int, nt: int, tshift: int, pred, var,
               check: tuple | None = None):
        """Predictions ``pred`` ``(nbatch, nt, nq)`` from the k-NN tables ``idx`` /
        ``dist`` ``(nbatch, nq, KS)`` (``spec["KS"]``, default ``K``: the first ``K``
        columns are used) for targets ``0 .. nt-1`` (rows of ``y_dev``, ``ldy`` apart),
        and their variances ``var`` if ``spec["VARIANCE"]`` (else ``var`` is not written;
        pass any buffer). Library point ``l`` contributes ``y[j, l + tshift]`` to target
        ``j``. ``spec["CHECK"]`` (float32, WEIGHT "simplex"): ``check`` is ``(qnorm,
        units, erel, flag, report, cap, seen, ties)``, the query points' norms (float32,
        ``nq``), the targets' units (ACC: each target's tolerance, then each one's span
        (max - min), ``nt`` each, and with RESOLVE each one's shift and scale), ``E + 4``,
        the flags written (uint8, ``(nbatch, nt, nq)``), the report (int32, zeroed by
        the caller: the counts of flagged queries and resolved predictions, the list of
        the first ``cap`` flagged queries and with RESOLVE the list of predictions redone
        in the lookup, :class:`pyedmcl.primitives.lookup.CheckedLookup`) and ``seen``
        (int32 ``1 + cap + nq``, zeroed by the caller where ``nt`` > 1: the resolved
        queries' count and list, each query's marks; any int32 array where ``nt`` is 1)
        and ``ties`` (flag every tie at the K-th place within float32's rounding);
        ``spec["RESOLVE"]`` (with ``spec``'s E, TAU, FMA): ``check`` goes on with ``(x64,
        y64, qpts, recs)``, the float64 call's series and targets, the query points and
        the resolved queries' neighbours (float64, ``1 + 2 K`` a slot of ``seen``'s list;
        any float64 array where ``nt`` is 1); see lookup/_resolve.mako."""
        wg = params["WG"]
        k = self._kernel(be, spec, wg, "lookup")
        extra = ()
        if spec.get("CHECK"):
            qnorm, units, erel, flag, report, cap, seen, ties, *resolve = check
            acc = np.float64 if acc_type(be.info) == "double" else np.float32
            extra = (qnorm, units, acc(erel), flag, report, np.int32(cap), seen, np.int32(ties))
            if spec.get("RESOLVE"):
                extra += tuple(resolve)  # x64, y64, qpts, recs
        return be.launch(k, (round_up(nq, wg), nt, nbatch), (wg, 1, 1), idx, dist,
                         np.int32(nq), y_dev, np.int32(ldy), np.int32(nt), np.int32(tshift),
                         pred, var, *extra)

    def launch_rows(self, be: Backend, params: Params, spec: dict[str, Any], report, cap: int,
                    seen, recs, rows_cap: int, nq: int, nt: int, y64, ldy: int, tshift: int,
                    units, pred, var, p64, v64):
        """Behind a checked lookup of ``spec`` (RESOLVE, one batch, ``nt`` > 1) whose
        resolved predictions overflow their list (``report[1]`` > ``cap``): every target of
        the queries it resolved (``seen``'s list, their neighbours in ``recs``), at most
        ``rows_cap`` of them, weighed in float64 as the lookup's resolve weighs one: the
        predictions (and variances) written into ``pred`` / ``var`` in the kernel's units
        and their float64 values into ``p64`` / ``v64`` ``(rows_cap, nt)`` (the template's
        ``resolve_rows``; a launch that does nothing where the list held them)."""
        wg = params["WG"]
        k = self._kernel(be, spec, wg, "resolve_rows")
        return be.launch(k, (round_up(nt, wg),), (wg,), report, np.int32(cap), seen, recs,
                         np.int32(rows_cap), np.int32(nq), np.int32(nt), y64, np.int32(ldy),
                         np.int32(tshift), units, pred, var, p64, v64)

    def launch_skill(self, be: Backend, wg: int, spec: dict[str, Any], pred_dev, nrows: int,
                     nq: int, y_dev, ldy: int, nt: int, obs_dev, row0: int, out,
                     shift=None):
        """Skill rows (rho, MAE, RMSE, pair count) of the ``nrows`` prediction rows of
        ``pred_dev`` (``nq`` each) into ``out[row0:row0 + nrows]``; row ``r`` is compared
        with target ``r % nt`` at data rows ``obs[q]`` (< 0: none). ``wg``: the
        reduction width (:func:`skill_wg`, :func:`ccm_skill_wg`); ``spec["FS"]``: CCM's
        reduction (streams of one shift each target, ``shift``: a device array of ``nt``)."""
        k = self._kernel(be, {**spec, "WEIGHT": "simplex", "VARIANCE": 0}, wg, "skill")
        extra = (shift,) if spec.get("FS") else ()
        return be.launch(k, (nrows * wg,), (wg,), pred_dev, np.int32(nq), y_dev,
                         np.int32(ldy), np.int32(nt), obs_dev, np.int32(row0), out, *extra)

    def launch_patch(self, be: Backend, real: str, pred, var, nq: int, nt: int,
                     rows_dev, m: int, p64, v64, shift, scale):
        """Write the float64 predictions ``p64`` (and variances ``v64``, if not None)
        ``(nt, m)`` of the queries ``rows_dev`` into ``pred`` / ``var`` ``(nt, nq)`` of
        type ``real`` in the kernel's units (``shift`` / ``scale``: ACC device arrays of
        ``nt``; see the template's ``patch``), from the Simplex skill's program (no
        build of its own)."""
        spec = {"K": 1, "REAL": real, "FS": 0, "WEIGHT": "simplex", "VARIANCE": 0}
        k = self._kernel(be, spec, skill_wg(be.info), "patch")
        wv = v64 is not None
        return be.launch(k, (m, nt), None, pred, var if wv else pred, np.int32(nq), rows_dev,
                         np.int32(m), p64, v64 if wv else p64, shift, scale, np.int32(wv))

    def launch_select(self, be: Backend, report, cap: int, qpts_dev, qsel, rsel):
        """The first ``cap`` flagged queries of a checked lookup (count and list in its
        ``report``) into ``rsel`` (the query, -1 past the count) and ``qsel`` (its point
        from ``qpts_dev``, query 0's for -1): the device redo's queries, no host round
        trip (the template's ``select_flagged``), from the float32 Simplex skill's
        program (no build of its own)."""
        spec = {"K": 1, "REAL": "float", "FS": 0, "WEIGHT": "simplex", "VARIANCE": 0}
        k = self._kernel(be, spec, skill_wg(be.info), "select_flagged")
        return be.launch(k, (cap,), None, report, np.int32(cap), qpts_dev, qsel, rsel)

    def launch_merge(self, be: Backend, idx, dist, lists: int, nq: int, kin: int, k: int,
                     q_dev, oidx, odist, tie):
        """Merge the float64 k-NN tables ``idx`` / ``dist`` ``(lists, nq, kin)`` of library
        lists into ``oidx`` / ``odist`` ``(1, nq, k)`` in the k-NN kernel's order (query
        points ``q_dev``), setting ``tie[0]`` where equal distances among a query's first
        ``k + 1`` hide that order (the template's ``merge_lists``), from the float64
        Simplex skill's program (no build of its own)."""
        spec = {"K": 1, "REAL": "double", "FS": 0, "WEIGHT": "simplex", "VARIANCE": 0}
        kern = self._kernel(be, spec, skill_wg(be.info), "merge_lists")
        return be.launch(kern, (nq,), None, idx, dist, np.int32(lists), np.int32(nq),
                         np.int32(kin), np.int32(k), q_dev, oidx, odist, tie)

    def launch_ties(self, be: Backend, idx, dist, nq: int, ks: int, k: int, width: float,
                    rows, kth, count):
        """List the queries of the float64 k-NN table ``idx`` / ``dist`` ``(1, nq, ks)``
        whose ``k``-th and ``(k + 1)``-th distances lie within ``width`` (relative) of each
        other: their number in ``count[0]`` (int32, zeroed by the caller), the queries in
        ``rows`` and their ``k``-th distances in ``kth`` (``nq`` each, the first ``count``
        written, in no order); the template's ``ties``, from the float64 Simplex skill's
        program (no build of its own)."""
        spec = {"K": 1, "REAL": "double", "FS": 0, "WEIGHT": "simplex", "VARIANCE": 0}
        kern = self._kernel(be, spec, skill_wg(be.info), "ties")
        return be.launch(kern, (nq,), None, idx, dist, np.int32(nq), np.int32(ks),
                         np.int32(k), np.float64(width), rows, kth, count)

    @staticmethod
    def launch_decide(be: Backend, E: int, tau: int, k: int, cap: int, radius: int, x_dev,
                      l_dev, nl: int, q_dev, rows_dev, kth_dev, listed_dev, groups_dev,
                      gcount_dev, slots: int, kq: int, complete: bool, width: float, y_dev,
                      ldy: int, nt: int, tshift: int, out_p, out_v, ostride: int,
                      scatter: bool, rsel):
        """pyEDM's ``k`` Simplex neighbours of the listed tied queries from their range
        lists, weighed as pyEDM weighs them (``lookup/pyedm_decide.cl.mako``): each target's
        prediction (and with ``out_v`` its variance) of a decided slot at ``out[j *
        ostride + (query if scatter else slot)]``, and ``rsel`` (the query of each decided
        slot, -1 elsewhere)."""
        wg = 64
        kern = be.kernel("lookup/pyedm_decide.cl.mako",
                         {"E": E, "TAU": tau, "K": k, "CAP": cap, "RADIUS": radius,
                          "VARIANCE": int(out_v is not None)}, "pyedm_decide")
        return be.launch(kern, (round_up(max(slots, 1), wg),), (wg,), x_dev, l_dev,
                         np.int32(nl), q_dev, rows_dev, kth_dev, listed_dev, groups_dev,
                         gcount_dev, np.int32(slots), np.int32(kq), np.int32(int(complete)),
                         np.float64(width), y_dev, np.int32(ldy), np.int32(nt),
                         np.int32(tshift), out_p, out_p if out_v is None else out_v,
                         np.int32(ostride), np.int32(int(scatter)), rsel)

    def launch_subset(self, be: Backend, wg: int, spec: dict[str, Any], srt, sdist, cnt,
                      nbatch: int, lpts, qpts, nq: int, nl: int, radius: int, y_dev,
                      tshift: int, pred):
        """CCM predictions ``pred`` ``(nbatch, nq)`` of ``nbatch`` sampled libraries:
        ``srt`` / ``sdist`` ``(nq, nl)`` hold every query's full-library positions and
        distances in the k-NN order, ``cnt`` ``(nbatch, nl)`` (uint8) each position's
        multiplicity in each library; ``lpts`` / ``qpts`` the library and query points
        (exclusion ``radius``)."""
        k = self._kernel(be, {**spec, "VARIANCE": 0}, wg, "subset_lookup")
        return be.launch(k, (round_up(nq, wg), nbatch), (wg, 1), srt, sdist, cnt, lpts, qpts,
                         np.int32(nq), np.int32(nl), np.int32(radius), y_dev,
                         np.int32(tshift), pred)


LOOKUP = LookupKernel()


class _LookupCase(TuningCase):
    """A random k-NN table (sorted distances) over ``size`` queries, one target."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        rng = np.random.default_rng(11)
        k, dt = spec["K"], np.float64 if spec.get("REAL") == "double" else np.float32
        self.be, self.spec, self.nq = be, {"WEIGHT": "simplex", **spec, "VARIANCE": 0}, size
        self.idx = be.to_device(rng.integers(0, size, (1, size, k)).astype(np.int32))
        self.dist = be.to_device(np.sort(rng.random((1, size, k)), axis=-1).astype(dt))
        self.y = be.to_device(rng.standard_normal(size + 8).astype(dt))
        self.pred = be.empty((1, 1, size), dt)

    def run(self, params: Params) -> list[Any]:
        return [LOOKUP.launch(self.be, params, self.spec, self.idx, self.dist, self.nq, 1,
                              self.y, self.nq + 8, 1, 1, self.pred, self.pred)]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.pred)
