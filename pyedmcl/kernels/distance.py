"""Pairwise distances between embedded points (tile kernel), tunable.

Used directly for unthresholded distance plots and as the reference building
block that EDM's k-NN and RQA's line kernels fuse further. It is also the kernel
the autotuner is proven on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up, run_blocked
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace, lookup

from ..validation import as_series, check_dtype, check_embedding, check_int, check_metric


def _heuristic(info: DeviceInfo) -> Params:
    if info.is_gpu:
        return {"WG_X": 64, "WG_Y": 4, "RPI": 2, "USE_LOCAL": 0}
    return {"WG_X": 16, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0}


def _fits(p: Params, info: DeviceInfo) -> bool:
    wg = p["WG_X"] * p["WG_Y"]
    sizes = info.max_work_item_sizes
    return (wg <= info.max_work_group_size and p["WG_X"] <= sizes[0] and p["WG_Y"] <= sizes[1]
            and (not p["USE_LOCAL"] or (p["WG_X"] + 64 * 8) * 8 <= info.local_mem_bytes))


def e_bucket(E: int) -> str:
    for hi in (2, 4, 8, 16, 32):
        if E <= hi:
            return f"E{hi // 2 + 1 if hi > 2 else 1}-{hi}"
    return "E33+"


class PairwiseDistanceKernel(TunableKernel):
    name = "pairwise_distance"
    template = "distance/pairwise_distance.cl.mako"
    space = TuningSpace(
        params={"WG_X": (8, 16, 32, 64, 128, 256), "WG_Y": (1, 2, 4, 8), "RPI": (1, 2, 4, 8),
                "USE_LOCAL": (0, 1)},
        heuristic=_heuristic,
        constraint=_fits,
    )

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        return f"{spec.get('REAL', 'float')}-{e_bucket(spec['E'])}"

    def default_specs(self):
        return [{"E": E, "TAU": 1, "METRIC": "euclidean", "REAL": "float"} for E in (2, 5, 10, 20)]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [2048]
        return [4096, 16384] if info.is_gpu else [2048]

    def case(self, backend: Backend, spec: dict[str, Any], size: int) -> TuningCase:
        return _DistanceCase(backend, spec, size)

    def launch(self, backend: Backend, params: Params, spec: dict[str, Any], x_dev, y_dev,
               n_cols_total: int, out_dev, ld_out: int, row0: int, nrows: int, col0: int,
               ncols: int):
        k = backend.kernel(self.template, {**spec, **params, "SQRT": spec.get("SQRT", 0)},
                           "pairwise_distance")
        gx = round_up(ncols, params["WG_X"])
        gy = round_up((nrows + params["RPI"] - 1) // params["RPI"], params["WG_Y"])
        return backend.launch(k, (gx, gy), (params["WG_X"], params["WG_Y"]), x_dev, y_dev,
                              np.int32(n_cols_total), out_dev, np.int32(ld_out), np.int32(row0),
                              np.int32(nrows), np.int32(col0), np.int32(ncols))


PAIRWISE_DISTANCE = PairwiseDistanceKernel()


class _DistanceCase(TuningCase):
    def __init__(self, backend: Backend, spec: dict[str, Any], size: int):
        self.backend, self.spec = backend, dict(spec)
        span = (spec["E"] - 1) * spec["TAU"]
        rng = np.random.default_rng(1234)
        dt = np.float64 if spec.get("REAL") == "double" else np.float32
        x = np.cumsum(rng.standard_normal(size + span)).astype(dt)
        self.n = size
        self.x = backend.to_device(x)
        self.out = backend.empty((size, size), dt)
        self.rtol, self.atol = (1e-5, 1e-4) if dt == np.float32 else (1e-12, 1e-12)

    def run(self, params: Params) -> list[Any]:
        return [PAIRWISE_DISTANCE.launch(self.backend, params, self.spec, self.x, self.x, self.n,
                                         self.out, self.n, 0, self.n, 0, self.n)]

    def output(self) -> np.ndarray:
        return self.backend.to_host(self.out)


def pairwise_distances(x, y=None, *, E: int, tau: int = 1, metric: str = "euclidean",
                       squared: bool = False, dtype: Any = "float32",
                       device: Any = None, backend: str | None = None,
                       params: Params | None = None, return_device: bool = False) -> Any:
    """All distances between the embedded points of ``x`` and of ``y`` (default ``y = x``).

    Returns an ``(n_x_points, n_y_points)`` host array; Euclidean distances are
    squared if ``squared``. Intended for small inputs (the result is N x M). Device
    arrays in stay on the device; ``return_device=True`` returns the matrix as a device
    array (see :mod:`pyedmcl.interop`).
    """
    from ..interop import backend_for, device_series, output

    be = backend_for((x, y), device, backend)
    metric = check_metric(metric)
    dt = check_dtype(dtype, be.info)
    E = check_int(E, "E", 1, 512)
    tau = check_int(tau, "tau", 1)
    xdev, ydev = device_series(x, be, "x", dt), device_series(y, be, "y", dt)
    xs = as_series(x, "x") if xdev is None else None
    ys = (xs if y is None else as_series(y, "y")) if ydev is None else None
    nx = check_embedding(xs.size if xdev is None else int(xdev.shape[0]), E, tau, "x")
    ny = check_embedding((ys.size if ydev is None else int(ydev.shape[0])) if y is not None
                         else (xs.size if xdev is None else int(xdev.shape[0])), E, tau, "y")
    if xs is not None and ys is not None:  # float32: one common centre (offset-free distances)
        from .._precision import prepare
        prep = prepare([xs] if y is None else [xs, ys], dt, be.info.fp64, names=["x", "y"][:1 + (y is not None)],
                       scale=False, common_shift=True, what="pairwise_distances")
        dt, xs, ys = prep.dtype, prep.series[0], prep.series[-1]
    real = "double" if dt == np.float64 else "float"
    spec = {"E": E, "TAU": tau, "METRIC": metric, "REAL": real,
            "SQRT": int(metric == "euclidean" and not squared)}
    if params is None:
        params = lookup(PAIRWISE_DISTANCE, be.info, PAIRWISE_DISTANCE.spec_bucket(spec),
                        PAIRWISE_DISTANCE.size_bucket(max(nx, ny))).params
    xd = be.to_device(xs.astype(dt)) if xdev is None else xdev
    yd = xd if y is None else (be.to_device(ys.astype(dt)) if ydev is None else ydev)
    if return_device:  # the whole matrix must live on the device: one block
        blocks = run_blocked(be, lambda s, e: _rows(be, params, spec, xd, yd, ny, s, e, dt), nx,
                             minimum=nx, parameter="the series length (or use return_device=False)",
                             what=f"pairwise_distances ({nx} x {ny})")
        return output(be, blocks[0], True)
    # row blocks when the N x M matrix does not fit on the device (clkernels.memory)
    blocks = run_blocked(be, lambda s, e: be.to_host(_rows(be, params, spec, xd, yd, ny, s, e, dt)),
                         nx, parameter="the series length", what=f"pairwise_distances ({nx} x {ny})",
                         nbytes=lambda rows: rows * ny * dt.itemsize)
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def _rows(be: Backend, params: Params, spec: dict[str, Any], xd, yd, ny: int, r0: int, r1: int,
          dt: np.dtype) -> Any:
    """Distance rows ``r0:r1`` (points of x) as a new ``(r1 - r0, ny)`` device array."""
    out = be.empty((r1 - r0, ny), dt)
    PAIRWISE_DISTANCE.launch(be, params, spec, xd, yd, ny, out, ny, r0, r1 - r0, 0, ny)
    return out


#: splitmix64's constants: the counter hash that draws a distance sample's pairs
#: (``distance/sampled_distance.cl.mako``, :func:`hashed_pairs`)
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_M64 = (1 << 64) - 1


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's output function of the uint64 array ``h``, in place (wrapping)."""
    u = np.uint64
    h ^= h >> u(30)
    h *= u(MIX1)
    h ^= h >> u(27)
    h *= u(MIX2)
    h ^= h >> u(31)
    return h


def hash_key(seed: int) -> int:
    """The 64-bit key a sample of ``seed`` hashes its pair numbers with (splitmix64's
    output function of the seed)."""
    return int(_mix(np.array([(int(seed) * GOLDEN) & _M64], np.uint64))[0])


def hashed_pairs(key: int, s0: int, n: int, nr: int, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``s0 .. s0 + n - 1`` of the sample of ``key``: (row point, column point) of
    ``nr`` x ``nc``, as ``sampled_distance`` draws them (h = splitmix64's output of ``key +
    s GOLDEN``; i = (h >> 32) nr >> 32, j = (h mod 2^32) nc >> 32)."""
    u = np.uint64
    h = _mix(u(key) + np.arange(s0, s0 + n, dtype=u) * u(GOLDEN))
    i = ((h >> u(32)) * u(nr)) >> u(32)
    h &= u(0xFFFFFFFF)
    h *= u(nc)
    h >>= u(32)
    return i.astype(np.intp), h.astype(np.intp)


def takes_sampled_distances(be: Backend | None) -> bool:
    """Whether ``be`` computes a sample's distances (:func:`sampled_distances`): a device
    with fp64 that is not a simulator."""
    return be is not None and bool(be.info.fp64) and be.info.runtime != "oclgrind"


def sampled_distances(be: Backend, rows: np.ndarray, cols: np.ndarray, key: int, n: int,
                      E: int, tau: int, metric: str, on_device: bool = False) -> Any:
    """The float64 distances (Euclidean: squared) of pairs ``0 .. n - 1`` of the sample of
    ``key`` (:func:`hashed_pairs`) between the embedded points of ``rows`` and ``cols``
    (float64 series; ``cols is rows``: one upload), computed on ``be`` as the host's
    :func:`pyedmcl.rqa.distances.sampled_dist` computes them: the same values bit for bit;
    ``on_device``: left on the device (a device array) instead of read back."""
    nr = rows.size - (E - 1) * tau
    nc = cols.size - (E - 1) * tau
    k = be.kernel("distance/sampled_distance.cl.mako", {"E": E, "TAU": tau, "METRIC": metric},
                  "sampled_distance")
    rd = be.to_device(np.ascontiguousarray(rows, np.float64))
    cd = rd if cols is rows else be.to_device(np.ascontiguousarray(cols, np.float64))
    out = be.empty(n, np.float64)
    wg = min(256, be.info.max_work_group_size)
    be.launch(k, (round_up(max(n, 1), wg),), (wg,), rd, cd, np.uint64(key), np.uint32(nr),
              np.uint32(nc), np.int32(0), np.int32(n), out)
    return out if on_device else be.to_host(out)
