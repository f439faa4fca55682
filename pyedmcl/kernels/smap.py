"""The S-map kernel family (``smap/smap.cl.mako`` and its parts in ``templates/smap/``):
specialisation (spec, accumulation), tuning space and case, parameters, launcher.

One launch solves every (prediction point, theta) weighted least-squares problem
of an S-map; see the template's header for the numerics. Tunables: the variant
("item" = one work-item per problem, private accumulators, for CPUs; "group" =
one work-group per problem, Gram entries spread over the work-items, for GPUs)
the work-group size and, for "item", PV: prediction points per work-item, one
per SIMD lane of an OpenCL vector type (explicit vectorisation across problems),
UNROLL of its Gram update ("auto": unrolled while (E+2)(E+3)/2 * PV <= 512;
unrolling larger E runs faster but compiles for tens of seconds) and, with PV 1,
SPLIT: work-items a problem (each streams every SPLIT-th library point; the partial
sums meet in local memory), which multiplies the work-items of a launch by SPLIT for
GPUs, where one work-item a row leaves too few warps to hide memory latency.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

log = logging.getLogger("pyedmcl.smap")

WGS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: work-items a problem of the item variant (PV 1)
SPLITS = (1, 2, 4, 8)
#: edges of the blocks of Gram entries a work-item of the group variant holds in registers
#: ("auto": :func:`group_rb` of E)
RBS = ("auto", 1, 2, 3, 4)


def group_rb(E: int) -> int:
    """The group variant's block edge for ``E`` ("auto"): larger blocks feed more FMAs a
    local load but waste more on the diagonal blocks' lower halves and the padding.
    Chosen from ``bench_smap.py --variant group --rb 1,2,3,4`` on an H200 (RB 2-3 best
    at E = 11, 2-4 alike at 16, 4 at 20; ``bench/results/nvidia-h200/smap_group_rb_*``)
    and on 2 Zen 5 cores with Intel's runtime (RB 4 at E = 20); decision 0156."""
    return 4 if E >= 16 else 3 if E >= 9 else 2


def _rb(params: Params, E: int) -> int:
    """The block edge ``params`` render at this E (1 for the item variant)."""
    rb = params.get("RB", 1)
    if params.get("VARIANT") != "group":
        return 1
    return group_rb(E) if rb == "auto" else rb


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        # the item variant keeps its Gram matrix in registers (the group variant pays two
        # local-memory reads a fp64 FMA); SPLIT 4 gives it 4 work-items a row, so a
        # launch of ~10^4 rows has enough warps per SM to hide the library loads
        for wg in (64, 32, 16):
            p = {"VARIANT": "item", "WG": wg, "PV": 1, "UNROLL": "auto", "SPLIT": 4}
            if _fits(p, info):
                return p
    return {"VARIANT": "item", "WG": 2, "PV": 8, "UNROLL": "auto", "SPLIT": 1}


#: the largest E whose item-variant Gram matrix an untuned GPU keeps in registers: E = 10
#: holds 78 fp64 accumulators (156 32-bit registers) + the augmented vector (24) + ~30
#: others, under NVIDIA's 255 a thread; E = 12 would pass it and spill. Above it the
#: group variant (entries spread over a work-group) is the untuned GPU choice.
ITEM_GPU_E_MAX = 10
#: the untuned GPU choice above ITEM_GPU_E_MAX
GROUP_GPU = {"VARIANT": "group", "WG": 128, "PV": 1, "UNROLL": "auto", "SPLIT": 1, "RB": "auto"}
#: the untuned GPU choice from this E to GEMM_E_MAX where gemm runs (MODE all, fp64
#: sums): 15-25 % faster there on an H200, ~5 % slower at E = 16 (decision 0160)
GEMM_GPU_E_MIN = 17
GEMM_GPU = {"VARIANT": "gemm", "WG": 64, "PV": 1, "UNROLL": "auto", "SPLIT": 1, "RB": 1}


def local_bytes(E: int, WG: int, acc_bytes: int = 8, RB: int = 1) -> int:
    """Local memory the group variant needs (its tile, reductions and Gram matrix) with
    register blocks of edge ``RB`` (the tile's rows padded to a multiple of RB; df: the
    parts' (hi, lo) sums counted as fp64)."""
    M = E + 2
    nent = M * (M + 1) // 2
    mb = -(-M // RB)
    nparts = max(1, WG // (mb * (mb + 1) // 2))
    return (max(WG * (mb * RB + (mb * RB + 1) % 2), nent * nparts) + 3 * WG + nent) * acc_bytes + 2 * WG * 4 + E * 8


def split_local_bytes(E: int, WG: int, SPLIT: int, acc_bytes: int = 8) -> int:
    """Local memory the item variant's SPLIT > 1 combination needs (``_split.mako``): 5
    pass-1 values a work-item, one row slot of Gram entries + 3 sums a row (df: an 8-byte
    (hi, lo) pair an entry, as fp64)."""
    if SPLIT == 1:
        return 0
    M = E + 2
    nent = M * (M + 1) // 2
    return (5 * WG + (WG // SPLIT) * (nent + 3)) * acc_bytes


#: the gemm variant's largest E (its entries, (E + 2)(E + 3) / 2, a row of 256)
GEMM_E_MAX = 20


def gemm_entries(E: int) -> int:
    """The gemm variant's Gram entries a row, (E + 2)(E + 3) / 2, padded to a multiple of
    32 (its moments' row stride, _gemm.mako's PT)."""
    M = E + 2
    return 32 * -(-(M * (M + 1) // 2) // 32)


def gemm_scratch_bytes(E: int) -> int:
    """Device scratch of the gemm variant a (row, theta): the moments, three weight sums,
    the scale and the dropped point (:meth:`SMapKernel._launch_gemm`)."""
    return (gemm_entries(E) + 4) * 8 + 4


def gemm_local_bytes(E: int, real_bytes: int = 8) -> int:
    """Local memory of the gemm variant's moments kernel (_gemm.mako: 32 rows, their
    states at an odd stride, 16 library points a step, :func:`gemm_entries` entries; the
    coordinates counted at ``real_bytes``)."""
    M = E + 2
    pt = gemm_entries(E)
    w = 16 * 32 if 16 * pt >= 768 else 768
    return (32 * (E | 1) + 16 * E) * real_bytes + (32 + 16 * M + w + 16 * pt) * 8 + 64 * 4


def gemm_runs(spec: dict[str, Any], info: DeviceInfo) -> bool:
    """Whether the gemm variant takes ``spec`` on this device (MODE all, fp64 sums, E up
    to :data:`GEMM_E_MAX`, its tile in local memory, work-groups of 256)."""
    return (spec.get("MODE") == "all" and spec.get("ACC") == "double" and info.fp64
            and spec["E"] <= GEMM_E_MAX and info.max_work_group_size >= 256
            and gemm_local_bytes(spec["E"], 8 if spec.get("REAL") == "double" else 4)
            <= info.local_mem_bytes)


def _fits(p: Params, info: DeviceInfo, E: int = 20) -> bool:
    if p["WG"] > info.max_work_group_size or p["WG"] > info.max_work_item_sizes[0]:
        return False
    split = p.get("SPLIT", 1)
    if p["VARIANT"] == "gemm":  # pass 1 and the solve take WG; the product 256 work-items
        return (split == 1 and p["PV"] == 1 and p.get("UNROLL", "auto") == "auto"
                and p.get("RB", 1) in (1, "auto") and p["WG"] >= 32 and E <= GEMM_E_MAX
                and info.max_work_group_size >= 256 and gemm_local_bytes(E) <= info.local_mem_bytes)
    if p["VARIANT"] == "group":
        return (split == 1 and p["PV"] == 1 and p.get("UNROLL", "auto") == "auto" and p["WG"] >= 32
                and local_bytes(E, p["WG"], RB=_rb(p, E)) <= info.local_mem_bytes)
    if p.get("RB", 1) not in (1, "auto"):
        return False
    if split > 1 and (p["PV"] != 1 or p["WG"] % split
                      or split_local_bytes(E, p["WG"], split) > info.local_mem_bytes):
        return False
    return p["WG"] <= 64


#: unroll the Gram update of the item variant up to this many (entry x lane) FMAs
UNROLL_MAX = 512


def effective(params: Params, E: int) -> Params:
    """``params`` with PV lowered for large E, keeping the unrolled accumulators <= 2048."""
    nent = (E + 2) * (E + 3) // 2
    pv = params.get("PV", 1)
    while pv > 1 and nent * pv > 2048:
        pv //= 2
    out = {**params, "PV": pv if params["VARIANT"] == "item" else 1,
           "SPLIT": params.get("SPLIT", 1), "RB": _rb(params, E)}
    if out.get("UNROLL", "auto") == "auto":
        out["UNROLL"] = int(nent * out["PV"] <= UNROLL_MAX)
    return out


#: the accumulation precisions the kernel is specialised for (template parameter ACC)
ACCUMULATIONS = ("double", "df", "float")


def accumulation(info: DeviceInfo, requested: str | None = None) -> str:
    """The ACC to run: ``requested``, or "double" where the device has fp64, else "df"."""
    if requested is None:
        return "double" if info.fp64 else "df"
    if requested not in ACCUMULATIONS:
        raise ValueError(f"accumulate={requested!r}; allowed: {', '.join(ACCUMULATIONS)}")
    if requested == "double" and not info.fp64:
        raise ValueError(f"accumulate='double' needs fp64, which device {info.name} lacks")
    return requested


def acc_dtype(acc: str) -> type:
    """NumPy type of the kernel's acc_t (thetas, ridge and the outputs) for ACC ``acc``."""
    return np.float64 if acc == "double" else np.float32


def e_bucket(E: int) -> str:
    for hi in (2, 4, 8, 16, 32):
        if E <= hi:
            return f"E{hi // 2 + 1 if hi > 2 else 1}-{hi}"
    return "E33+"


class SMapKernel(TunableKernel):
    name = "smap"
    template = "smap/smap.cl.mako"
    space = TuningSpace(
        params={"VARIANT": ("item", "group", "gemm"), "WG": WGS, "PV": (1, 2, 4, 8),
                "UNROLL": ("auto", 0, 1), "SPLIT": SPLITS, "RB": RBS},
        heuristic=_heuristic,
        constraint=_fits,
        # entries from before SPLIT and RB measured their SPLIT=1 and RB=1 code
        filled={"SPLIT": 1, "RB": 1},
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        return f"{spec.get('REAL', 'float')}-{spec.get('ACC', 'double')}-{e_bucket(spec['E'])}"

    def default_specs(self):
        return [{"E": E, "TAU": 1, "METRIC": "euclidean", "REAL": "float", "ACC": "double",
                 "MODE": "all"} for E in (2, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [1024]
        return [4096, 10000] if info.is_gpu else [2048]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _SMapCase(backend, spec, size)

    def spec_for(self, E: int, tau: int, real: Any, acc: str, mode: str, nc: int = 1
                 ) -> dict[str, Any]:
        """The specialisation of one S-map: storage type ``real`` (NumPy), ACC, MODE; ``E``
        regressors, ``E / nc`` lags of each of ``nc`` columns (row-major data)."""
        return {"E": E, "TAU": tau, "METRIC": "euclidean",
                "REAL": "double" if real == np.float64 else "float", "ACC": acc, "MODE": mode,
                "NC": nc}

    def params_for(self, backend: Backend, spec: dict[str, Any], size: int) -> Params:
        """Tuned (else :meth:`spec_default`) parameters for ``spec`` at ``size`` library
        points, fitted to spec's E on this device (a tuned E bucket may hold a larger E)."""
        choice = lookup(self, backend.info, self.spec_bucket(spec), self.size_bucket(size))
        params = choice.params if choice.source != "heuristic" else self.spec_default(spec, backend.info)
        return self.fit(params, backend.info, spec["E"])

    def checked_params(self, backend: Backend, spec: dict[str, Any], size: int) -> Params:
        """:meth:`params_for`, once proven on this device (:meth:`solves`): parameters whose
        kernel fails the probe give way to the group variant at the largest work-group
        that fits, whose rows then stay on the device. Intel's CPU runtime (2026.2)
        computes the item variant's Gram matrix wrongly from E = 13 (Oclgrind and the
        group variant do not): every row failed its pivot test and went to the host's
        SVD, with the right answers, far slower (decision 0155). Proven once per device, spec and
        parameters in a process (one small launch); a call whose own rows fail later
        (the fault also depends on the library's size) marks them failed
        (:meth:`mark_failed`)."""
        first = self.params_for(backend, spec, size)
        for p in (first, self.alternative(backend, spec, first)):
            if p is not None and self.solves(backend, spec, p):
                if p is not first:
                    log.info("S-map: %s fails its probe on %s at E=%d; running %s", first,
                             backend.info.name, spec["E"], p)
                return p
        return first

    def alternative(self, backend: Backend, spec: dict[str, Any], params: Params
                    ) -> Params | None:
        """The parameters a launch whose rows failed the device's tests runs again with:
        the group variant at the largest work-group that fits (None where ``params`` are
        those)."""
        group = self.fit({"VARIANT": "group", "WG": max(WGS), "PV": 1, "UNROLL": "auto",
                          "SPLIT": 1, "RB": "auto"}, backend.info, spec["E"])
        return None if dict(params) == group else group

    def mark_failed(self, backend: Backend, spec: dict[str, Any], params: Params) -> None:
        """Remember that ``params`` failed rows the device should solve (later calls take
        :meth:`alternative` at once, :meth:`checked_params`)."""
        _SOLVES[self._key(backend, spec, params)] = False
        log.info("S-map: %s failed a well-conditioned launch on %s at E=%d", params,
                 backend.info.name, spec["E"])

    @staticmethod
    def _key(backend: Backend, spec: dict[str, Any], params: Params) -> tuple:
        return (backend.info.fingerprint, tuple(sorted(spec.items())),
                tuple(sorted(params.items())))

    def solves(self, backend: Backend, spec: dict[str, Any], params: Params) -> bool:
        """Whether the kernel of ``spec`` and ``params`` solves a well-conditioned S-map
        on this device: a global linear fit (theta 0, every row a library of the others)
        of Gaussian noise with 8 (E + 2) rows, whose normal equations are far from
        singular, so at most an eighth of its rows may fail the pivot or trace test
        (none do on a sound kernel), and every row it solves must give the host's
        least-squares prediction (:data:`PROBE_TOL`): Intel's CPU runtime (2026.2)
        computes the item variant wrongly from E = 10 without failing a test, and from
        E = 13 fails every row. Remembered per device, spec and parameters."""
        key = self._key(backend, spec, params)
        if key not in _SOLVES:
            _SOLVES[key] = self._probe(backend, {**spec, "MODE": "all"}, params)
        return _SOLVES[key]

    def _probe(self, backend: Backend, spec: dict[str, Any], params: Params) -> bool:
        E, tau, nc = spec["E"], spec["TAU"], spec.get("NC", 1)
        n, span = max(64, 8 * (E + 2)), (E // nc - 1) * tau
        real = np.float64 if spec.get("REAL") == "double" else np.float32
        acc = acc_dtype(spec["ACC"])
        rng = np.random.default_rng(7)
        t = np.arange(max(span, 0), max(span, 0) + n, dtype=np.int32)  # (tau < 0: lags ahead)
        x = rng.standard_normal((n + abs(span)) * nc).astype(real)
        y = rng.standard_normal(n).astype(real)
        be = backend
        args = {"x": be.to_device(x), "ylib": be.to_device(y),
                "lib_t": be.to_device(t), "n_lib": n, "pred_t": be.to_device(t),
                "thetas": be.to_device(np.zeros(1, acc)), "excl_r": 0, "knn": n - 1,
                "nbr": be.to_device(np.zeros(1, np.int32)), "K": 0, "ridge": 0.0,
                **self.outputs(be, spec, n, 1)}
        self.launch(be, params, spec, args, n, 1)
        status = be.to_host(args["out_status"])
        if np.count_nonzero(status == 1) > n // 8:
            return False
        solved = status == 0
        want = _probe_predictions(x.astype(np.float64), y.astype(np.float64), t, E, tau, nc)
        got = be.to_host(args["out_pred"]).astype(np.float64)
        tol = max(PROBE_TOL[spec["ACC"]], PROBE_TOL["float"] if real == np.float32 else 0.0)
        return bool(np.all(np.abs(got[solved] - want[solved]) <= tol))

    def spec_default(self, spec: dict[str, Any], info: DeviceInfo) -> Params:
        """The heuristic, but on GPUs the group variant above :data:`ITEM_GPU_E_MAX`, and
        gemm from :data:`GEMM_GPU_E_MIN` where it runs."""
        E = spec["E"]
        if info.is_gpu and E >= GEMM_GPU_E_MIN and gemm_runs(spec, info) \
                and _fits(GEMM_GPU, info, E):
            return dict(GEMM_GPU)
        if info.is_gpu and E > ITEM_GPU_E_MAX and _fits(GROUP_GPU, info, E):
            return dict(GROUP_GPU)
        return self.space.default(info)

    def valid_for(self, params: Params, info: DeviceInfo, E: int) -> bool:
        """Whether ``params`` can run this E on this device (local memory grows with E)."""
        return _fits(params, info, E)

    def fit(self, params: Params, info: DeviceInfo, E: int) -> Params:
        """``params`` if they fit this E, else the same variant with the largest WG that does;
        a gemm beyond what it runs (E above :data:`GEMM_E_MAX`, a tile larger than local
        memory: a tuned E bucket of E 17-32 holds both) the group variant, fitted alike."""
        if _fits(params, info, E):
            return params
        for wg in sorted(WGS, reverse=True):
            p = {**params, "WG": wg}
            if _fits(p, info, E):
                return p
        if params["VARIANT"] == "gemm":
            return self.fit({**params, "VARIANT": "group", "RB": "auto"}, info, E)
        return {"VARIANT": "item", "WG": 1, "PV": 1, "UNROLL": "auto", "SPLIT": 1}

    def outputs(self, backend: Backend, spec: dict[str, Any], n_pred: int, n_theta: int
                ) -> dict[str, Any]:
        """Device buffers for one launch's outputs (the ``out_*`` entries of its args)."""
        acc, n = acc_dtype(spec["ACC"]), n_theta * n_pred
        return {"out_pred": backend.empty(n, acc), "out_coef": backend.empty(n * (spec["E"] + 1), acc),
                "out_var": backend.empty(n, acc), "out_status": backend.empty(n, np.int32)}

    def read_outputs(self, backend: Backend, spec: dict[str, Any], args: dict[str, Any],
                     n_pred: int, n_theta: int) -> tuple[np.ndarray, ...]:
        """Host copies of the outputs, (theta, row[, coefficient]): predictions, coefficients
        and variances in float64 (centred on the prediction point), status codes. The four
        reads are enqueued before the first wait (one round trip to the device, not four);
        float64 outputs are returned as read (no copy)."""
        return self.enqueue_reads(backend, spec, args, n_pred, n_theta)()

    def enqueue_reads(self, backend: Backend, spec: dict[str, Any], args: dict[str, Any],
                      n_pred: int, n_theta: int) -> Callable[[], tuple[np.ndarray, ...]]:
        """:meth:`read_outputs` in two steps: the reads enqueued now, the function returned
        waits for them (the host works in between, beside the device)."""
        E = spec["E"]
        names = ("out_pred", "out_coef", "out_var", "out_status")
        reads = [backend.to_host_async(args[n]) for n in names]

        def wait() -> tuple[np.ndarray, ...]:
            pred, coef, var, status = (r() for r in reads)
            return (pred.astype(np.float64, copy=False).reshape(n_theta, n_pred),
                    coef.astype(np.float64, copy=False).reshape(n_theta, n_pred, E + 1),
                    var.astype(np.float64, copy=False).reshape(n_theta, n_pred),
                    status.reshape(n_theta, n_pred))
        return wait

    def launch(self, backend: Backend, params: Params, spec: dict[str, Any], args: dict[str, Any],
               n_pred: int, n_theta: int) -> list[Any]:
        """Enqueue one S-map (``args``: the device buffers and scalars); its launches' events.
        The gemm variant runs the specs it takes (:func:`gemm_runs`); any other spec runs
        the group variant at the same work-group size."""
        if params["VARIANT"] == "gemm":
            if gemm_runs(spec, backend.info):
                return self._launch_gemm(backend, params, spec, args, n_pred, n_theta)
            params = self.fit({**params, "VARIANT": "group", "RB": "auto"}, backend.info, spec["E"])
        params = effective(params, spec["E"])
        k = backend.kernel(self.template, {"NC": 1, **spec, **params}, "smap")
        wg = params["WG"]
        if params["VARIANT"] == "item":
            gsize = (round_up(-(-n_pred // params["PV"]) * params["SPLIT"], wg), n_theta)
        else:
            gsize = (n_pred * wg, n_theta)
        acc = acc_dtype(spec["ACC"])
        return [backend.launch(
            k, gsize, (wg, 1),
            args["x"], args["ylib"], args["lib_t"], np.int32(args["n_lib"]),
            args["pred_t"], np.int32(n_pred), args["thetas"], np.int32(args["excl_r"]),
            np.int32(args["knn"]), args["nbr"], np.int32(args["K"]), acc(args["ridge"]),
            args["out_pred"], args["out_coef"], args["out_var"], args["out_status"])]

    def _launch_gemm(self, be: Backend, params: Params, spec: dict[str, Any],
                     args: dict[str, Any], n_pred: int, n_theta: int) -> list[Any]:
        """The gemm variant's three launches (pass 1, the moments, the solves) and their
        scratch (the rows' scales, dropped points, moments and weight sums; kept in
        ``args`` as ``gemm_scratch``)."""
        params = effective(params, spec["E"])
        full = {"NC": 1, **spec, **params}
        wg, n = params["WG"], n_pred * n_theta
        scales, skips = be.empty(n, np.float64), be.empty(n, np.int32)
        S, sums = be.empty(n * gemm_entries(spec["E"]), np.float64), be.empty(n * 3, np.float64)
        # held with the outputs: a pool must not hand them out while the launches run
        args["gemm_scratch"] = (scales, skips, S, sums)
        i32 = np.int32
        evs = [be.launch(be.kernel(self.template, full, "smap_pass1"), (n_pred * wg, n_theta),
                         (wg, 1), args["x"], args["lib_t"], i32(args["n_lib"]), args["pred_t"],
                         i32(n_pred), args["thetas"], i32(args["excl_r"]), i32(args["knn"]),
                         scales, skips, args["out_status"])]
        evs.append(be.launch(be.kernel(self.template, full, "smap_moments"),
                             (-(-n_pred // 32) * 256, n_theta), (256, 1), args["x"], args["ylib"],
                             args["lib_t"], i32(args["n_lib"]), args["pred_t"], i32(n_pred),
                             i32(args["excl_r"]), scales, skips, args["out_status"], S, sums))
        evs.append(be.launch(be.kernel(self.template, full, "smap_solve"), (n_pred * wg, n_theta),
                             (wg, 1), args["x"], args["pred_t"], i32(n_pred),
                             np.float64(args["ridge"]), S, sums, args["out_pred"],
                             args["out_coef"], args["out_var"], args["out_status"]))
        return evs


#: how far a probe row's prediction may be from the host's, by ACC, and at least "float"'s
#: with float32 storage (the centred coordinates are float32 differences). Unit-variance
#: noise, 8 (E + 2) rows: the normal equations' condition is small, so the rounding stays
#: far below; the faults seen were 1e-2 and more.
PROBE_TOL = {"double": 1e-9, "df": 1e-5, "float": 1e-4}


def _probe_predictions(x: np.ndarray, y: np.ndarray, t: np.ndarray, E: int, tau: int,
                       nc: int) -> np.ndarray:
    """The probe's predictions by host least squares: row r fits y of every other row on
    [1, z - z_r] (its state z: E / nc lags of each of nc columns, pyEDM's Embed order) and
    predicts the intercept."""
    cols = x.reshape(-1, nc)
    Z = np.stack([cols[t - (k // nc) * tau, k % nc] for k in range(E)], axis=1)
    out = np.empty(t.size)
    for r in range(t.size):
        keep = np.arange(t.size) != r
        A = np.column_stack([np.ones(t.size - 1), Z[keep] - Z[r]])
        out[r] = np.linalg.lstsq(A, y[keep], rcond=None)[0][0]
    return out


#: (device, spec, params) -> whether the kernel solved its probe (:meth:`SMapKernel.solves`)
_SOLVES: dict[tuple, bool] = {}

SMAP = SMapKernel()


class _SMapCase(TuningCase):
    """Full-library leave-one-out S-map of a logistic-map series (theta = 2)."""

    def __init__(self, backend: Backend, spec: dict[str, Any], size: int):
        self.backend, self.spec = backend, dict(spec)
        if self.spec.get("ACC") == "double":
            self.spec["ACC"] = accumulation(backend.info)  # what smap() runs on this device
        spec = self.spec
        E, tau = spec["E"], spec["TAU"]
        span = (E - 1) * tau
        x = np.empty(size + span + 1)
        x[0] = 0.4
        for i in range(1, x.size):
            x[i] = 3.8 * x[i - 1] * (1 - x[i - 1])
        real = np.float64 if spec.get("REAL") == "double" else np.float32
        acc = acc_dtype(spec["ACC"])
        t = np.arange(span, span + size, dtype=np.int32)
        y = x[t + 1]
        be = backend
        self.n = size
        self.args = {
            "x": be.to_device((x - x.mean()).astype(real)),
            "ylib": be.to_device((y - y.mean()).astype(real)),
            "lib_t": be.to_device(t), "n_lib": size, "pred_t": be.to_device(t),
            "thetas": be.to_device(np.array([2.0], acc)), "excl_r": 0, "knn": size - 1,
            "nbr": be.to_device(np.zeros(1, np.int32)), "K": 0, "ridge": 0.0,
            **SMAP.outputs(be, spec, size, 1),
        }
        # variants round float32 storage apart (the group variant's centred differences
        # are float32, gemm's shift is fp64), by ~1e-6 of these values at E = 20: as the
        # probe (PROBE_TOL), float32 storage is checked to 1e-4 (faults seen were 1e-2
        # and more), so a tune compares every variant, not only its reference's own
        if acc == np.float64 and real == np.float64:
            self.rtol, self.atol = 1e-8, 1e-8
        elif acc == np.float64:
            self.rtol, self.atol = PROBE_TOL["float"], PROBE_TOL["float"]
        else:
            self.rtol, self.atol = 1e-3, 1e-4

    def run(self, params: Params) -> list[Any]:
        if not SMAP.valid_for(params, self.backend.info, self.spec["E"]):
            raise ValueError("configuration does not fit this E on this device")
        return SMAP.launch(self.backend, params, self.spec, self.args, self.n, 1)

    def output(self) -> np.ndarray:
        return self.backend.to_host(self.args["out_pred"])


# --------------------------------------------------------------------------- cross maps


class SMapXmapKernel:
    """S-map cross maps (``smap/smap_xmap.cl.mako``): a batch of library series, each
    predicting many target series from one factorisation per prediction row (the hat
    matrix row, see the template's header). A fixed kernel: WG from the device kind,
    NTB (targets a pass over the library) from the number of targets."""

    template = "smap/smap_xmap.cl.mako"
    #: work-items a group: CPUs vectorise across rows (one lane each), GPUs fill warps
    WG_CPU, WG_GPU = 16, 64
    #: most targets a pass over the library accumulates (private accumulators; on CPUs
    #: 16 measured best of 8, 16 and 32, decision 0136; GPUs: to tune)
    NTB_MAX_CPU, NTB_MAX_GPU = 16, 16

    def spec_for(self, E: int, tau: int, real: Any, acc: str, n_targets: int,
                 info: DeviceInfo, pass3: str = "stream") -> dict[str, Any]:
        """The specialisation: ``E`` lags of ``tau``, storage ``real`` (NumPy type), ACC
        ("double" or "float"), NTB for ``n_targets`` targets, WG for device ``info``,
        PASS3 ("stream": targets summed in the row's kernel; "hat": hat rows written for
        :meth:`launch_gemm`)."""
        if acc not in ("double", "float"):
            raise ValueError(f"accumulate={acc!r}; the S-map cross map allows 'double' or 'float'")
        cap = self.NTB_MAX_GPU if info.is_gpu else self.NTB_MAX_CPU
        ntb = 1
        while ntb < min(cap, n_targets):
            ntb *= 2
        return {"E": int(E), "TAU": int(tau), "REAL": "double" if real == np.float64 else "float",
                "ACC": acc, "WG": self.WG_GPU if info.is_gpu else self.WG_CPU,
                "NTB": 1 if pass3 == "hat" else ntb, "PASS3": pass3}

    def launch(self, backend: Backend, spec: dict[str, Any], args: dict[str, Any],
               n_pred: int, n_libs: int):
        """Enqueue one launch over ``n_pred`` rows of ``n_libs`` library series."""
        k = backend.kernel(self.template, spec, "smap_xmap")
        wg = spec["WG"]
        acc = acc_dtype(spec["ACC"])
        return backend.launch(
            k, (round_up(n_pred, wg), n_libs), (wg, 1),
            args["X"], np.int32(args["n"]), np.int32(args["lib0"]), args["lib_t"],
            np.int32(args["n_lib"]), args["pred_t"], np.int32(n_pred), args["tgt"],
            np.int32(args["n_tg"]), np.int32(args["Tp"]), acc(args["theta"]),
            np.int32(args["excl_r"]), np.int32(args["knn"]), args["out_pred"],
            args["out_status"], args["hat"])

    #: the GEMM's tile (smap/_xmap_reduce.mako): rows x targets a work-group, its shape
    GEMM_TILE, GEMM_GROUP = (64, 32), (16, 8)

    def launch_gemm(self, backend: Backend, spec: dict[str, Any], args: dict[str, Any],
                    n_pred: int, n_libs: int):
        """Enqueue PASS3 "hat"'s product of the hat rows with the targets (``out_pred``)."""
        k = backend.kernel(self.template, spec, "smap_xmap_gemm")
        (tr, tt), (gr, gt) = self.GEMM_TILE, self.GEMM_GROUP
        gsize = (-(-n_pred // tr) * gr, -(-args["n_tg"] // tt) * gt, n_libs)
        return backend.launch(
            k, gsize, (gr, gt, 1), args["hat"], args["X"], np.int32(args["n"]),
            args["lib_t"], np.int32(args["n_lib"]), np.int32(n_pred), args["tgt"],
            np.int32(args["n_tg"]), np.int32(args["Tp"]), args["out_status"],
            args["out_pred"])


    def launch_rho(self, backend: Backend, spec: dict[str, Any], args: dict[str, Any],
                   n_pred: int, n_pairs: int):
        """Enqueue the rho reduction of ``n_pairs`` (library, target) pairs of a launch's
        predictions (``args["out_pred"]``) into ``args["out_rho"]``."""
        k = backend.kernel(self.template, spec, "smap_xmap_rho")
        wg = spec["WG"]
        return backend.launch(
            k, (n_pairs * wg,), (wg,), args["X"], np.int32(args["n"]), args["pred_t"],
            args["seen"], np.int32(n_pred), args["tgt"], np.int32(args["n_tg"]),
            np.int32(args["Tp"]), args["out_pred"], args["out_rho"])


SMAP_XMAP = SMapXmapKernel()
