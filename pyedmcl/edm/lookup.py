"""Simplex lookup (weighted average of neighbours' targets) and on-device skill.

``lookup_device`` turns a device k-NN table into predictions for a batch of
targets; ``skill_device`` reduces Pearson rho / MAE / RMSE per prediction row on
the device, so only a few numbers per row come back when only skill is wanted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, round_up

from .knn import DeviceKnn, hold

TEMPLATE = "simplex_lookup.cl.mako"


def _acc(be: Backend) -> str:
    return "double" if be.info.fp64 else "float"


def _wg(be: Backend, gpu: int, cpu: int) -> int:
    return min(gpu if be.info.is_gpu else cpu, be.info.max_work_group_size)


def lookup_device(be: Backend, table: DeviceKnn, y_dev, ldy: int, nt: int, tshift: int, *,
                  weight: str = "simplex", real: str = "float", variance: bool = False
                  ) -> tuple[Any, Any]:
    """Predictions ``(nbatch, nt, nq)`` on the device (and variances if asked).

    Library point ``l`` of the table contributes ``y[j, l + tshift]`` to target ``j``
    (``tshift`` = time offset of kernel point 0 plus Tp).
    """
    wg = _wg(be, 64, 16)
    params = {"K": table.k, "REAL": real, "ACC": _acc(be), "WG": wg, "WEIGHT": weight,
              "VARIANCE": int(variance)}
    k = be.kernel(TEMPLATE, params, "lookup")
    dt = np.float64 if real == "double" else np.float32
    pred = be.empty((table.nbatch, nt, table.nq), dt)
    var = be.empty((table.nbatch, nt, table.nq), dt) if variance else pred
    hold(be, pred, var)
    be.launch(k, (round_up(table.nq, wg), nt, table.nbatch), (wg, 1, 1), table.idx, table.dist,
              np.int32(table.nq), y_dev, np.int32(ldy), np.int32(nt), np.int32(tshift), pred, var)
    return pred, (var if variance else None)


def skill_out(be: Backend, nrows: int):
    """A device array for ``nrows`` skill rows (rho, MAE, RMSE, count) in ACC precision."""
    out = be.empty((nrows, 4), np.float64 if be.info.fp64 else np.float32)
    hold(be, out)
    return out


def skill_device(be: Backend, pred_dev, nrows: int, nq: int, y_dev, ldy: int, nt: int,
                 obs_dev, *, k: int = 1, real: str = "float", out=None, row0: int = 0):
    """``(nrows, 4)`` host array: rho, MAE, RMSE, pair count per prediction row.

    Row ``r`` is compared with target ``r % nt`` at data rows ``obs[q]`` (< 0: none).
    With ``out`` (from :func:`skill_out`) the rows are written to ``out[row0:row0 +
    nrows]`` on the device and nothing is read back (no host sync): callers that
    enqueue several pipelines read ``out`` once at the end.
    """
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
