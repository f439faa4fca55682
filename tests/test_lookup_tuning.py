"""The Simplex lookup as a tunable family: every work-group size in its space gives
the same predictions bit for bit (one work-item per prediction, same arithmetic),
and those equal a NumPy evaluation of the simplex weights (float32, rtol 1e-5)."""

from __future__ import annotations

import numpy as np

from clkernels import get_backend
from pyedmcl.kernels.lookup import LOOKUP, _LookupCase


def test_every_wg_same_predictions(device):
    be = get_backend(device)
    spec = {"K": 6, "REAL": "float", "WEIGHT": "simplex"}
    case = _LookupCase(be, spec, 1000)
    outs = {}
    for wg in LOOKUP.space.params["WG"]:
        if not LOOKUP.space.constraint({"WG": wg}, be.info):
            continue
        be.wait(case.run({"WG": wg})[0])
        outs[wg] = case.output().copy()
    ref = next(iter(outs.values()))
    for wg, got in outs.items():
        np.testing.assert_array_equal(got, ref, err_msg=f"WG={wg}")
    idx, dist, y = (be.to_host(case.idx)[0], be.to_host(case.dist)[0].astype(np.float64),
                    be.to_host(case.y).astype(np.float64))
    w = np.exp(-dist / np.maximum(dist[:, :1], 1e-6))
    want = (w * y[idx + 1]).sum(1) / w.sum(1)  # the case looks up with tshift = 1
    np.testing.assert_allclose(ref[0, 0], want, rtol=1e-5)
