"""Simplex lookup (weighted average of neighbours' targets) and on-device skill.

``lookup_device`` turns a device k-NN table into predictions for a batch of
targets; ``skill_device`` reduces Pearson rho / MAE / RMSE per prediction row on
the device, so only a few numbers per row come back when only skill is wanted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up
from clkernels.devices import DeviceInfo
from clkernels.tuning import Params, TunableKernel, TuningCase, TuningSpace

from .knn import DeviceKnn, _k_bucket, hold

TEMPLATE = "simplex_lookup.cl.mako"


def _acc(be: Backend) -> str:
    return "double" if be.info.fp64 else "float"


def _wg(be: Backend, gpu: int, cpu: int) -> int:
    return min(gpu if be.info.is_gpu else cpu, be.info.max_work_group_size)


class LookupKernel(TunableKernel):
    """Tunable family ``lookup``: work-group size of the Simplex lookup (a gather:
    K table reads and K target reads per prediction, memory-bound)."""

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


LOOKUP = LookupKernel()


class _LookupCase(TuningCase):
    """A random k-NN table (sorted distances) over ``size`` queries, one target."""

    def __init__(self, be: Backend, spec: dict[str, Any], size: int):
        rng = np.random.default_rng(11)
        k, dt = spec["K"], np.float64 if spec.get("REAL") == "double" else np.float32
        self.be, self.spec, self.nq = be, dict(spec), size
        idx = rng.integers(0, size, (1, size, k)).astype(np.int32)
        dist = np.sort(rng.random((1, size, k)), axis=-1).astype(dt)
        self.table = DeviceKnn(be.to_device(idx), be.to_device(dist), 1, size, k)
        self.y = be.to_device(rng.standard_normal(size + 8).astype(dt))
        self.pred = be.empty((1, 1, size), dt)

    def run(self, params: Params) -> list[Any]:
        s = self.spec
        return [_launch_lookup(self.be, params["WG"], self.table, self.y, self.nq + 8, 1, 1,
                               s.get("WEIGHT", "simplex"), s.get("REAL", "float"), False,
                               self.pred, self.pred)]

    def output(self) -> np.ndarray:
        return self.be.to_host(self.pred)


def _launch_lookup(be: Backend, wg: int, table: DeviceKnn, y_dev, ldy: int, nt: int, tshift: int,
                   weight: str, real: str, variance: bool, pred, var):
    params = {"K": table.k, "REAL": real, "ACC": _acc(be), "WG": wg, "WEIGHT": weight,
              "VARIANCE": int(variance)}
    k = be.kernel(TEMPLATE, params, "lookup")
    return be.launch(k, (round_up(table.nq, wg), nt, table.nbatch), (wg, 1, 1), table.idx,
                     table.dist, np.int32(table.nq), y_dev, np.int32(ldy), np.int32(nt),
                     np.int32(tshift), pred, var)


def lookup_device(be: Backend, table: DeviceKnn, y_dev, ldy: int, nt: int, tshift: int, *,
                  weight: str = "simplex", real: str = "float", variance: bool = False
                  ) -> tuple[Any, Any]:
    """Predictions ``(nbatch, nt, nq)`` on the device (and variances if asked).

    Library point ``l`` of the table contributes ``y[j, l + tshift]`` to target ``j``
    (``tshift`` = time offset of kernel point 0 plus Tp).
    """
    spec = {"K": table.k, "REAL": real, "WEIGHT": weight}
    wg = LOOKUP.params_for(be, spec, table.nq * nt * table.nbatch)["WG"]
    dt = np.float64 if real == "double" else np.float32
    pred = be.empty((table.nbatch, nt, table.nq), dt)
    var = be.empty((table.nbatch, nt, table.nq), dt) if variance else pred
    hold(be, pred, var)
    _launch_lookup(be, wg, table, y_dev, ldy, nt, tshift, weight, real, variance, pred, var)
    return pred, (var if variance else None)


def skill_out(be: Backend, nrows: int):
    """A device array for ``nrows`` skill rows (rho, MAE, RMSE, count) in ACC precision."""
    out = be.empty((nrows, 4), np.float64 if be.info.fp64 else np.float32)
    hold(be, out)
    return out


#: work-group size (number of streams of the pairwise tree) of CCM's rho reduction on
#: every device: pyedmcl.ccm and the all-to-all map (``xmap_lookup.cl.mako``) share it,
#: so their rho agree bit for bit, and GPUs and CPUs reduce in the same order. 64, not
#: the Simplex skill's 256 on GPUs: the map runs one reduction per (library, target),
#: and at 256 the trees made the H100's whole map 16% slower (N=5,000 x 3,780, E=5:
#: 1.77 s vs 1.52 s at 64)
CCM_SKILL_WG = 64


def ccm_skill_wg(info: DeviceInfo) -> int:
    """CCM's rho reduction width on the device ``info`` (:data:`CCM_SKILL_WG`, or the
    largest power of two the device allows)."""
    wg = min(CCM_SKILL_WG, info.max_work_group_size)
    return 1 << (wg.bit_length() - 1)


def skill_device(be: Backend, pred_dev, nrows: int, nq: int, y_dev, ldy: int, nt: int,
                 obs_dev, *, k: int = 1, real: str = "float", out=None, row0: int = 0,
                 wg: int | None = None):
    """``(nrows, 4)`` host array: rho, MAE, RMSE, pair count per prediction row.

    Row ``r`` is compared with target ``r % nt`` at data rows ``obs[q]`` (< 0: none).
    With ``out`` (from :func:`skill_out`) the rows are written to ``out[row0:row0 +
    nrows]`` on the device and nothing is read back (no host sync): callers that
    enqueue several pipelines read ``out`` once at the end.
    """
    if wg is None:
        wg = _wg(be, 256, 64)
        wg = 1 << (wg.bit_length() - 1)
    params = {"K": k, "REAL": real, "ACC": _acc(be), "WG": wg, "WEIGHT": "simplex", "VARIANCE": 0}
    kern = be.kernel(TEMPLATE, params, "skill")
    dst = skill_out(be, nrows) if out is None else out
    hold(be, obs_dev)
    be.launch(kern, (nrows * wg,), (wg,), pred_dev, np.int32(nq), y_dev, np.int32(ldy),
              np.int32(nt), obs_dev, np.int32(row0), dst)
    if out is not None:
        return None
    return be.to_host(dst).astype(np.float64)
