"""The k-NN kernel family (``knn/knn.cl.mako``): fused embedding + distance + top-k.

One launch builds exact k-NN tables (for each query: its k nearest library points
and their distances, in the total order distance, |p - l|, l) of a batch of library
lists or of series; see the template's header for the variants. This module holds
the specialisation space and its rules, :meth:`KnnKernel.params_for` (tuning lookup
and device fix-ups), the launchers (:meth:`KnnKernel.launch`, and
:meth:`KnnKernel.launch_sorted` for CCM's full distance rows) and the tuning case.
The algorithms (:mod:`pyedmcl.primitives.knn` and its users) allocate and call these.
"""

from __future__ import annotations

import json
import threading
from typing import Any, NamedTuple

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo, inline_vector_ops
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from .._fma import job_fma
from ..data import logistic_map
from .distance import e_bucket


def with_fma(be: Backend, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with its FMA value: the job's choice if given, else this device's own.

    One-device calls take :func:`pyedmcl._fma.job_fma` of their device; jobs over several
    devices (the cross map) set FMA in the spec so that every device sums alike.
    """
    if "FMA" in spec:
        return spec
    return {**spec, "FMA": int(job_fma([be.info]))}


#: work-items of a work-group that walk one listed query's library in the range lists on
#: GPUs (``knn/range.cl.mako``, SPLIT): a few hundred queries leave a GPU idle one
#: work-item each (H200, 400 queries x 10,000 points: 1.74 ms a work-item each)
RANGE_SPLIT = 128

#: Library tile order of the k-NN kernels (``ORD`` of knn.cl.mako / knn_scan.cl.mako):
#: 1 visits the tiles nearest in time to a work-group's queries first. The result does
#: not depend on it (the top-k of a total order); a spec value, so A/B runs can pass 0.
TILE_ORDER = 1


def launch_spec(be: Backend, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` completed with the caller-side values of the k-NN templates: FMA
    (:func:`with_fma`), the tile order ORD (:data:`TILE_ORDER` unless given) and the
    data's column count NC (1, a series, unless given); INL (1 on PoCL: /_vecops.mako);
    NEAR (0, full lists, unless given: knn.cl.mako's header)."""
    return {"ORD": TILE_ORDER, "NC": 1, "INL": int(inline_vector_ops(be.info)), "NEAR": 0,
            **with_fma(be, spec)}


def _sorted_params(wg: int) -> Params:
    """Launch values of VARIANT "sorted" (not tuned: only WG matters)."""
    return {"VARIANT": "sorted", "WG": wg, "TILE": 16, "QB": 1, "EA": 0, "INS": "reg",
            "FLAG": 1, "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        return {"VARIANT": "rows", "WG": 128, "TILE": 256, "QB": 1, "EA": 4, "INS": "reg", "FLAG": 1,
                "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}
    # CPUs: explicit SIMD vectors over library points (the cols variant's work-item
    # loop is not vectorised by PoCL 3.0 here; vec measured 2.5-3.5x faster than the
    # tuned cols on PoCL and Intel for one table of 8,192 points, E=5)
    return {"VARIANT": "vec", "WG": 32, "TILE": 512, "QB": 16, "EA": 0, "INS": "reg", "FLAG": 1,
            "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}


#: SLIDE block length (library points per block) that :meth:`KnnKernel.params_for` gives
#: GPUs without a tuned entry for the problem, where the library is contiguous
SLIDE_GPU = 16

#: work-items per compute unit below which a SLIDE layout splits each query's scan (its
#: blocks hold more registers a work-item, so fewer work-items fill a GPU; decision 0141)
SLIDE_FILL_PER_CU = 256

#: a GPU's layout where SLIDE applies and the tuning entry never measured SLIDE (entries
#: from before it): the rows variant on a tile of raw values, blocks of 16 points, each
#: pair's partial sum checked every two coordinates (the same tables bit for bit as any
#: layout; measurements in decisions 0104, 0112 and 0141)
SLIDE_LAYOUT_GPU: Params = {"VARIANT": "rows", "WG": 32, "TILE": 256, "QB": 1, "EA": 2,
                            "INS": "reg", "FLAG": 1, "SPLIT": 1, "QQ": 1, "CB": 0,
                            "SLIDE": 16}


#: the largest window span (E - 1) * TAU the SLIDE option takes (``knn/_slide.mako``'s
#: SPAN_MAX: a block keeps SLIDE + span raw values in registers)
SLIDE_SPAN_MAX = 48


def slide_applies(spec: dict[str, Any], contiguous: bool) -> bool:
    """Whether the rows variant's SLIDE option (``knn/_slide.mako``) can run ``spec``:
    a contiguous library (library index i is point ``lib[0] + i``), one column, a window
    span (E - 1) * TAU of at most :data:`SLIDE_SPAN_MAX`."""
    return (bool(contiguous) and spec.get("NC", 1) == 1
            and (spec["E"] - 1) * abs(spec["TAU"]) <= SLIDE_SPAN_MAX)


def is_contiguous(lpts: np.ndarray) -> bool:
    """Whether every row of the (nbatch, nl) ascending library lists is consecutive points.
    Lists that are (views of) a read-only array owning its data, as a plan's point lists
    (:class:`pyedmcl.primitives.ranges.Plan`, frozen once made), are tested once: a call
    asks twice per launch (its tuning and its launch)."""
    lpts = np.atleast_2d(lpts)
    owner = lpts if lpts.base is None else lpts.base
    key = None
    if (isinstance(owner, np.ndarray) and owner.base is None and not owner.flags.writeable):
        key = (id(owner), lpts.__array_interface__["data"][0], lpts.shape, lpts.strides,
               lpts.dtype.str)
        hit = _contiguous_memo.get(key)
        if hit is not None and hit[0] is owner:
            return hit[1]
    if lpts.shape[1] == 0 or np.any(lpts[:, -1].astype(np.int64) - lpts[:, 0] != lpts.shape[1] - 1):
        got = False
    else:
        got = bool(np.all(np.diff(lpts, axis=1) == 1))
    if key is not None:
        with _contiguous_lock:
            _contiguous_memo[key] = (owner, got)  # (holds the array: its id stays its own)
            while len(_contiguous_memo) > _CONTIGUOUS_MEMO_SIZE:
                _contiguous_memo.pop(next(iter(_contiguous_memo)))
    return got


#: :func:`is_contiguous`'s answers for read-only lists, the oldest dropped first
_CONTIGUOUS_MEMO_SIZE = 32
_contiguous_memo: dict[tuple, tuple[np.ndarray, bool]] = {}
_contiguous_lock = threading.Lock()


def _fits(p: Params, info: DeviceInfo) -> bool:
    if p["WG"] > info.max_work_group_size or p["WG"] > info.max_work_item_sizes[0]:
        return False
    if p["INS"] == "reg" and not p["FLAG"]:
        return False
    if p["INS"] == "mask" and (p["FLAG"] or p["VARIANT"] != "cols" or p["TILE"] > 32):
        return False  # mask: one candidate bit per lane of a tile in a 32-bit word
    if p.get("SPLIT", 1) > 1 and (p["VARIANT"] == "cols" or p["WG"] % p["SPLIT"]):
        return False
    if p["VARIANT"] == "vec" and p.get("SPLIT", 1) > 1 and (p.get("QQ", 1) > 1 or p["SPLIT"] > 8):
        return False  # vec splits a query over at most 8 work-items, one query each
    if (p.get("QQ", 1) > 1 or p.get("CB", 0)) and p["VARIANT"] != "vec":
        return False  # queries per work-item, candidate buffers: vec-variant options
    if p.get("SLIDE", 0) and (p["VARIANT"] != "rows" or p["TILE"] % (p["SLIDE"] * p.get("SPLIT", 1))):
        return False  # a rows option: whole blocks per tile for every split of a query
    if p["VARIANT"] == "vec":
        # QB = library points per explicit SIMD vector; QQ queries per work-item
        return (p["QB"] in (4, 8, 16) and p["TILE"] % p["QB"] == 0 and p["EA"] == 0
                and p["INS"] == "reg" and p["FLAG"] == 1
                and (p["TILE"] * 4 * 33 + p.get("CB", 0) * p["WG"] * 8 * p.get("QQ", 1)
                     + (p["WG"] * 32 * 8 if p.get("SPLIT", 1) > 1 else 0)  # merge lists, K <= 32
                     <= info.local_mem_bytes))
    if p["VARIANT"] == "rows":
        # the tile: E <= 32 coordinates per point, or (SLIDE) TILE + E - 1 raw values
        tile_bytes = (p["TILE"] + 64) * 8 if p.get("SLIDE", 0) else p["TILE"] * 4 * 33
        return (p["QB"] == 1 and p["INS"] == "reg" and p["FLAG"] == 1
                and tile_bytes <= info.local_mem_bytes)
    # cols: TILE is a multiple of WG (R = TILE / WG points per work-item), QB <= WG
    return (p["TILE"] % p["WG"] == 0 and p["TILE"] // p["WG"] <= 4 and 1 < p["QB"] <= min(p["WG"], 32)
            and p["QB"] * p["TILE"] * 4 <= info.local_mem_bytes // 2)


def k_bucket(k: int) -> str:
    for hi in (2, 4, 8, 16, 32, 64):
        if k <= hi:
            return f"K{hi}"
    return "K64+"


class KnnKernel(TunableKernel):
    """Tunable family ``knn``: work-group size WG and library tile TILE."""

    name = "knn"
    template = "knn/knn.cl.mako"
    #: untuned GPUs take SLIDE (measured for one large table: Simplex at L = 2^20)
    slide_untuned_gpu = True
    space = TuningSpace(
        params={"VARIANT": ("rows", "cols", "vec"), "WG": (8, 16, 32, 64, 128, 256),
                "TILE": (16, 32, 64, 128, 256, 512), "QB": (1, 4, 8, 16), "EA": (0, 2, 4, 8),
                "INS": ("reg", "local", "mask"), "FLAG": (0, 1), "SPLIT": (1, 2, 4, 8, 16, 32),
                "QQ": (1, 2), "CB": (0, 4, 8), "SLIDE": (0, 8, 16, 32)},
        heuristic=_heuristic,
        constraint=_fits,
        filled={"SLIDE": 0},  # entries from before SLIDE measured its SLIDE=0 code
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        """REAL, E and K buckets; a NEAR table (knn.cl.mako) by the K it widens and its
        NEAR (its cost is near that of the narrower table, not of its K)."""
        near = int(spec.get("NEAR", 0))
        base = f"{spec.get('REAL', 'float')}-{e_bucket(spec['E'])}-{k_bucket(spec['K'] - near)}"
        return f"{base}-near{near}" if near else base

    def default_specs(self):
        return [{"E": E, "TAU": 1, "K": E + 1, "METRIC": "euclidean", "REAL": "float"}
                for E in (2, 3, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [2048]
        return [8192, 32768] if info.is_gpu else [4096]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _KnnCase(backend, spec, size)

    def params_for(self, be: Backend, spec: dict[str, Any], size: int,
                   nq_total: int | None = None, contiguous: bool = False,
                   bucket_k: int | None = None) -> Params:
        """Launch parameters for ``spec`` at library/query size ``size``: the tuning
        database's (or the heuristic's) choice, fixed up for this launch. ``nq_total``:
        queries of the launch, all batches (few queries split each query's scan over
        several work-items on GPUs); ``contiguous``: every library list is consecutive
        points (:func:`is_contiguous`), which the rows variant's SLIDE option needs;
        ``bucket_k``: the tuning looked up for that many neighbours instead of
        ``spec["K"]`` (the fix-ups still take ``spec["K"]``)."""
        bucket = self.spec_bucket(spec if bucket_k is None else {**spec, "K": bucket_k})
        choice = lookup(self, be.info, bucket, self.size_bucket(size))
        if spec.get("NEAR") and (choice.entry or {}).get("spec_bucket") != bucket:
            # a NEAR table without entries of its own: the tuning of the table it widens
            base = {**spec, "K": spec["K"] - spec["NEAR"], "NEAR": 0}
            choice = lookup(self, be.info, self.spec_bucket(base), self.size_bucket(size))
        p = {"SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0,
             **self.chosen(be.info, choice, spec, contiguous)}
        item = 8 if spec["REAL"] == "double" else 4
        # rows only: the vec variant's SPLIT is tuned (splitting there admits more
        # candidates in all, slower on the H100)
        split_max = 32 if p["VARIANT"] == "rows" else 1
        if be.info.is_gpu and p["SPLIT"] == 1 and nq_total is not None:
            # few queries: split each query's library scan so the GPU fills up (SLIDE's
            # blocks hold more registers a work-item: fewer work-items fill it)
            want = be.info.compute_units * (SLIDE_FILL_PER_CU if p["SLIDE"] else 1024)
            while (p["SPLIT"] < split_max and nq_total * p["SPLIT"] < want
                   and p["WG"] % (2 * p["SPLIT"]) == 0
                   and (p["WG"] * spec["K"] * (item + 4)) <= be.info.local_mem_bytes // 2):
                p = {**p, "SPLIT": 2 * p["SPLIT"]}
        while p["SPLIT"] > 1 and p["WG"] * spec["K"] * (item + 4) > be.info.local_mem_bytes // 2:
            p = {**p, "SPLIT": p["SPLIT"] // 2}  # the partial lists must fit local memory
        if (choice.source == "heuristic" and self.slide_untuned_gpu and be.info.is_gpu
                and p["VARIANT"] == "rows" and p["TILE"] % SLIDE_GPU == 0):
            p = {**p, "SLIDE": SLIDE_GPU}  # untuned GPUs: the raw-value tile where it applies
        while p["SLIDE"] > 8 and p["SLIDE"] * p["SPLIT"] > p["TILE"]:
            p = {**p, "SLIDE": p["SLIDE"] // 2}  # a block per split of a query at least
        if p["SLIDE"] and (p["TILE"] % (p["SLIDE"] * p["SPLIT"]) or not slide_applies(spec, contiguous)):
            p = {**p, "SLIDE": 0}
        # the rows / vec variants' local tile holds E coordinates per point (SLIDE: values)
        while (p["VARIANT"] in ("rows", "vec") and not p["SLIDE"] and p["TILE"] > max(16, p["QB"])
               and p["TILE"] * (spec["E"] + 1) * item > be.info.local_mem_bytes // 2):
            p = {**p, "TILE": p["TILE"] // 2}
        return p

    def chosen(self, info: DeviceInfo, choice: Any, spec: dict[str, Any],
               contiguous: bool) -> Params:
        """The parameters :meth:`params_for` starts from: the lookup's ``choice``
        (:class:`clkernels.tuning.Choice`). On a GPU where SLIDE applies and the choice's
        entry never measured it (entries from before SLIDE), :data:`SLIDE_LAYOUT_GPU`.
        Where the choice is a SLIDE layout this launch cannot take (a window span above
        :data:`SLIDE_SPAN_MAX`, a library not contiguous: :func:`slide_applies`), the
        entry's fastest timed configuration without SLIDE: dropping SLIDE from the winner
        leaves a layout that was never the best one of its own kind (decision 0129)."""
        p = choice.params
        entry = choice.entry
        if (info.is_gpu and entry is not None and "SLIDE" not in (entry.get("params") or {})
                and slide_applies(spec, contiguous)):
            return dict(SLIDE_LAYOUT_GPU)
        if p.get("SLIDE", 0) and not slide_applies(spec, contiguous) and entry:
            timed = []
            for key, t in (entry.get("times") or {}).items():
                try:
                    cand = json.loads(key)
                except (TypeError, ValueError):
                    continue
                if isinstance(cand, dict) and not cand.get("SLIDE", 0) and t is not None:
                    timed.append((float(t), cand))
            if timed:
                return self.space.complete(min(timed, key=lambda c: c[0])[1])
        return p

    def request(self, be: Backend, params: Params, spec: dict[str, Any]) -> tuple:
        """The kernel :meth:`launch` builds, as ``(template, params, name)`` (for
        :meth:`clkernels.Backend.prebuild`)."""
        full = {**launch_spec(be, spec), "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0, **params}
        if full["VARIANT"] != "rows":
            full["NEAR"] = 0  # full lists: the same contract (knn.cl.mako), one source less
        return (self.template, full, "knn")

    def launch(self, be: Backend, params: Params, spec: dict[str, Any], x_dev, q_dev, nq: int,
               l_dev, nl: int, nbatch: int, radius: int, idx_dev, dist_dev, *,
               xoff: int = 0, series_stride: int = 0, lstride: int | None = None):
        """Tables of ``nbatch`` batches into ``idx_dev`` / ``dist_dev`` (nbatch, nq, K).

        Batch ``b`` is library list ``b`` of ``l_dev`` (nbatch, nl); or, with
        ``series_stride`` > 0, series ``b`` of ``x_dev``, i.e. the data from
        ``xoff + b * series_stride`` on, all batches sharing the lists ``q_dev`` /
        ``l_dev`` (points and output indices are then the series' own). ``params`` with
        SLIDE > 0 need contiguous library lists (the caller's check: :func:`is_contiguous`;
        :meth:`params_for` sets SLIDE only then). ``lstride``: library list ``b`` starts
        at ``l_dev[b * lstride]`` (default ``nl``: lists one after another; less: lists
        that overlap, e.g. chunks of one library, :func:`chunk_layout`).
        """
        k = be.kernel(*self.request(be, params, spec))
        params = {"SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0, **params}
        if params["VARIANT"] in ("rows", "vec"):
            qw = params["WG"] // params["SPLIT"] * params["QQ"]
            gx = (nq + qw - 1) // qw * params["WG"]
        else:
            gx = (nq + params["QB"] - 1) // params["QB"] * params["WG"]
        if lstride is None:
            lstride = 0 if series_stride else nl
        return be.launch(k, (gx, nbatch), (params["WG"], 1), x_dev, np.int32(xoff),
                         np.int32(series_stride), q_dev, np.int32(nq), l_dev, np.int32(nl),
                         np.int32(lstride), np.int32(radius), idx_dev, dist_dev)

    def launch_sorted(self, be: Backend, spec: dict[str, Any], wg: int, x_dev, q_dev, nq: int,
                      l_dev, nl: int, acc_dev, fin_dev):
        """Every query's distance to every library point (VARIANT "sorted", kernel
        ``dist_full``): ``acc_dev`` (nq, nl) the raw (squared) values, ``fin_dev`` the
        finished distances; the arithmetic of :meth:`launch`, so the same values."""
        params = _sorted_params(wg)
        k = be.kernel(self.template, {**launch_spec(be, spec), **params}, "dist_full")
        return be.launch(k, (round_up(nl, wg), nq), (wg, 1), x_dev, q_dev, np.int32(nq), l_dev,
                         np.int32(nl), acc_dev, fin_dev)

    def launch_table_distances(self, be: Backend, spec: dict[str, Any], x_dev, q_dev, nq: int,
                               idx_dev, rows: int, k: int, fin_dev):
        """The finished distance from each query to each point of a table ``idx_dev``
        (``rows`` rows of ``k`` kernel points, row r the query ``q_dev[r % nq]``; -1:
        none, +inf) into ``fin_dev`` (VARIANT "sorted", kernel ``dist_table``): the
        arithmetic of :meth:`launch`, so the values a table of this spec would hold."""
        wg = min(64, be.info.max_work_group_size)
        params = _sorted_params(wg)
        kern = be.kernel(self.template, {**launch_spec(be, spec), **params}, "dist_table")
        return be.launch(kern, (round_up(max(rows * k, 1), wg),), (wg,), x_dev, q_dev,
                         np.int32(nq), idx_dev, np.int32(k), np.int32(rows), fin_dev)

    def launch_merge(self, be: Backend, spec: dict[str, Any], nb: int, q_dev, nq: int,
                     in_idx, in_dist, out_idx, out_dist):
        """Merge ``nb`` tables ``(nb, nq, K)`` of accumulated distances (:meth:`launch`
        with ``RAW=1`` over library chunks) into one finished table ``(1, nq, K)``, the
        kernel's total order over all chunks (``knn/merge.cl.mako``)."""
        wg = 64
        k = be.kernel("knn/merge.cl.mako", {"K": spec["K"], "REAL": spec["REAL"],
                                            "METRIC": spec["METRIC"], "NB": nb}, "knn_merge")
        return be.launch(k, (round_up(max(nq, 1), wg),), (wg,), q_dev, np.int32(nq), in_idx,
                         in_dist, out_idx, out_dist)

    @staticmethod
    def bucket_requests(real: str) -> list[tuple]:
        """The kernels :meth:`launch_columns` and :meth:`launch_trim` build (one program),
        as ``(template, params, name)``."""
        return [("knn/bucket.cl.mako", {"REAL": real}, name)
                for name in ("knn_columns", "knn_trim")]

    def launch_columns(self, be: Backend, real: str, x_dev, n: int, E: int, tau: int, EB: int,
                       out_dev):
        """The ``(n, EB)`` coordinate matrix of series ``x_dev`` (``n`` values): row P
        holds ``x[P + j*tau]`` in column j < E where the window fits, zeros elsewhere
        (``knn/bucket.cl.mako``)."""
        kern = be.kernel(*self.bucket_requests(real)[0])
        rows = max(0, n - (E - 1) * tau)
        return be.launch(kern, (round_up(max(n, 1), 64), round_up(EB, 4)), (64, 4), x_dev,
                         np.int32(n), np.int32(rows), np.int32(E), np.int32(tau), np.int32(EB),
                         out_dev)

    def launch_trim(self, be: Backend, real: str, idx_dev, dist_dev, rows: int, ld: int, k: int):
        """Cut every row of a table ``(rows, ld)`` to its first ``k`` entries in place (the
        rest empty slots: -1 / inf, ``knn/bucket.cl.mako``)."""
        wg = 64
        kern = be.kernel(*self.bucket_requests(real)[1])
        return be.launch(kern, (round_up(max(rows, 1), wg),), (wg,), idx_dev, dist_dev,
                         np.int32(rows), np.int32(ld), np.int32(k))

    @staticmethod
    def range_request(E: int, tau: int, real: str) -> tuple:
        """The kernel :meth:`launch_range` builds, as ``(template, params, name)``."""
        return ("knn/range.cl.mako", {"E": E, "TAU": abs(tau), "REAL": real, "SPLIT": 1},
                "knn_range")

    def launch_range(self, be: Backend, real: str, E: int, tau: int, x_dev, l_dev, nl: int,
                     q_dev, lim_dev, nq: int, radius: int, cap: int, out_dev, count_dev):
        """Every library point (``l_dev``, ``nl``) within its query's squared limit
        (``lim_dev``, ``nq``) of the query points ``q_dev``, points within ``radius``
        rows excluded: the first ``cap`` into ``out_dev`` ``(nq, cap)`` and their
        number into ``count_dev`` (``knn/range.cl.mako``)."""
        wg = 64
        kern = be.kernel(*self.range_request(E, tau, real))
        return be.launch(kern, (round_up(max(nq, 1), wg),), (wg,), x_dev, l_dev, np.int32(nl),
                         q_dev, lim_dev, np.int32(nq), np.int32(radius), np.int32(cap), out_dev,
                         count_dev)

    def launch_range_list(self, be: Backend, E: int, tau: int, x_dev, l_dev, nl: int, q_dev,
                          rows_dev, kth_dev, listed_dev, slots: int, width: float, radius: int,
                          cap: int, out_dev, count_dev, split: int | None = None):
        """:meth:`launch_range` for the first ``listed_dev[0]`` slots of a device list
        (query ``rows_dev[s]``, point ``q_dev[rows_dev[s]]``, squared limit ``(kth_dev[s]
        (1 + 2 width))^2``), float64 (``knn/range.cl.mako``'s ``knn_range_list``): on GPUs a
        work-group of :data:`RANGE_SPLIT` a slot (few queries, each a walk of the whole
        library), elsewhere a work-item a slot (``split``: the choice, for tests)."""
        wg = 64
        if split is None:
            split = RANGE_SPLIT if be.info.is_gpu else 1
        kern = be.kernel("knn/range.cl.mako", {"E": E, "TAU": abs(tau), "REAL": "double",
                                               "SPLIT": split}, "knn_range_list")
        size = max(slots, 1) * split if split > 1 else round_up(max(slots, 1), wg)
        return be.launch(kern, (size,), (split if split > 1 else wg,), x_dev, l_dev,
                         np.int32(nl), q_dev, rows_dev, kth_dev, listed_dev, np.int32(slots),
                         np.float64(width), np.int32(radius), np.int32(cap), out_dev, count_dev)

    @staticmethod
    def window_request(real: str, metric: str = "euclidean") -> tuple:
        """The kernel :meth:`launch_window` builds, as ``(template, params, name)``."""
        return ("knn/window.cl.mako", {"REAL": real, "METRIC": metric}, "knn_window")

    def launch_window(self, be: Backend, real: str, q_dev, row0: int, nq: int, nb: int,
                      core: RawLists, edge: RawLists | None, lo: int, hi: int, k: int,
                      out_idx, out_dist, metric: str = "euclidean"):
        """The k-NN tables ``(nb, nq, k)`` of a library window from two lists per query
        (``knn/window.cl.mako``), :class:`RawLists` of accumulated distances (:meth:`launch`
        or the fused scan with ``RAW=1``) of queries ``q_dev[row0 .. row0 + nq - 1]``: the
        core over points that all serve, the edge over every other point (its list
        whole; None: the core alone, finished). The window's library is the core points
        and the edge points ``lo .. hi - 1`` (points as ``q_dev``'s): the table
        :meth:`launch` gives over it, bit for bit, where the core list holds ``k``."""
        wg = 64
        kern = be.kernel(*self.window_request(real, metric))
        lists = []
        for li in (core, edge if edge is not None else RawLists(core.idx, core.dist, 0, 0, 0)):
            lists += [li.idx, li.dist, np.int32(li.k), np.int32(li.ld), np.uint64(li.bstride),
                      np.uint64(li.off), np.int32(li.shift)]
        return be.launch(kern, (round_up(max(nq, 1), wg), nb), (wg, 1), q_dev, np.int32(row0),
                         np.int32(nq), np.int32(lo), np.int32(hi), np.int32(k), *lists,
                         out_idx, out_dist)


class RawLists(NamedTuple):
    """Sorted k-NN lists of accumulated distances on the device for
    :meth:`KnnKernel.launch_window`: query row ``r`` of library ``b`` holds ``k`` entries
    from ``b * bstride + off + r * ld`` (``idx``, ``dist``); entry ``l`` stands for point
    ``l + shift``."""

    idx: Any
    dist: Any
    k: int
    ld: int
    bstride: int
    off: int = 0
    shift: int = 0


def chunk_layout(nl: int, chunks: int) -> tuple[int, int, int]:
    """``(chunks, length, stride)``: ``chunks`` lists of ``length`` library entries, list
    ``b`` from entry ``b * stride``, that cover ``nl`` entries, the last one ending at the
    last entry (lists overlap where ``stride < length``)."""
    chunks = max(1, min(chunks, nl))
    if chunks == 1:
        return 1, nl, nl
    length = -(-nl // chunks)
    stride = (nl - length) // (chunks - 1)
    return chunks, nl - (chunks - 1) * stride, stride


KNN = KnnKernel()


class _KnnCase(TuningCase):
    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        self.be, self.spec = be, dict(spec)
        span = (spec["E"] - 1) * spec["TAU"]
        dt = np.float64 if spec.get("REAL") == "double" else np.float32
        # a chaotic series (logistic map, as the benchmarks use), not iid noise: how
        # often candidates pass the k-th distance, and so the cost of the top-k,
        # depends on the data
        x = logistic_map(size + span, r=3.9, x0=0.4, burn=0).astype(dt)
        self.n = size
        self.x = be.to_device(x)
        self.pts = be.to_device(np.arange(size, dtype=np.int32))
        self.idx = be.empty((size, spec["K"]), np.int32)
        self.dist = be.empty((size, spec["K"]), dt)

    def run(self, params: Params) -> list[Any]:
        return [KNN.launch(self.be, params, self.spec, self.x, self.pts, self.n, self.pts, self.n,
                           1, 0, self.idx, self.dist)]

    def output(self) -> np.ndarray:
        # distances, not indices: a float32 near-tie may legitimately swap two ranks
        # between configurations that contract multiply-adds differently
        return self.be.to_host(self.dist)
