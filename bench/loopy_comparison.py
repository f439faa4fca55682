"""Measure: loopy-generated vs our Mako-templated pairwise-distance kernel.

The evidence behind docs/decisions/0001-kernels-from-mako-templates.md. Needs ``pip install
loopy`` (not a dependency of pyedmcl). Both kernels compute squared Euclidean
distances between delay-embedded points of one series on the same device, in one
process; the script prints both times, the ratio, and the effective bandwidth of
the N x N float32 output write.

    python bench/loopy_comparison.py --device pocl --n 4096 --E 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pyedmcl  # noqa: F401  (configures clkernels; registers runtimes before pyopencl)
from clkernels import get_backend
from pyedmcl.kernels.distance import PAIRWISE_DISTANCE, pairwise_distances


def loopy_kernel(E: int, tau: int, lsize: tuple[int, int]):
    import loopy as lp

    knl = lp.make_kernel(
        "{[i, j, k]: 0 <= i < n and 0 <= j < n and 0 <= k < E}",
        """
        out[i, j] = sum(k, (x[i + k*tau] - x[j + k*tau])**2)
        """,
        [lp.GlobalArg("x", np.float32, shape=("n + (E-1)*tau",)),
         lp.GlobalArg("out", np.float32, shape=("n", "n")), lp.ValueArg("n", np.int32)],
        lang_version=(2018, 2),
    )
    knl = lp.fix_parameters(knl, E=E, tau=tau)
    knl = lp.split_iname(knl, "j", lsize[0], inner_tag="l.0", outer_tag="g.0")
    knl = lp.split_iname(knl, "i", lsize[1], inner_tag="l.1", outer_tag="g.1")
    knl = lp.tag_inames(knl, {"k": "unr"})
    return knl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--E", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    be = get_backend(a.device)
    n, E, tau = a.n, a.E, 1
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.standard_normal(n + (E - 1) * tau)).astype(np.float32)
    spec = {"E": E, "TAU": tau, "METRIC": "euclidean", "REAL": "float", "SQRT": 0}
    params = PAIRWISE_DISTANCE.space.default(be.info)
    xd = be.to_device(x)
    out = be.empty((n, n), np.float32)

    def ours():
        ev = PAIRWISE_DISTANCE.launch(be, params, spec, xd, xd, n, out, n, 0, n, 0, n)
        return be.event_seconds(ev)

    ours()
    t_ours = min(ours() for _ in range(a.repeats))

    import pyopencl as cl

    knl = loopy_kernel(E, tau, (params["WG_X"], params["WG_Y"]))
    t0 = time.perf_counter()
    ex = knl.executor(be.context)
    _, (lout,) = ex(be.queue, x=xd, n=np.int32(n))
    be.finish()
    t_build = time.perf_counter() - t0
    ts = []
    for _ in range(a.repeats):
        evt, _ = ex(be.queue, x=xd, n=np.int32(n), out=out)
        ts.append(be.event_seconds(evt))
    t_loopy = min(ts)
    ref = pairwise_distances(x, E=E, tau=tau, squared=True, device=be)
    np.testing.assert_allclose(lout.get(), ref, rtol=1e-5, atol=1e-4)
    gbs = n * n * 4 / 1e9
    print(f"device {be.info.name} ({be.info.runtime}) n={n} E={E} WG={params}")
    print(f"ours (event time)      {t_ours * 1e3:8.2f} ms  {gbs / t_ours:7.1f} GB/s")
    print(f"loopy (event time)     {t_loopy * 1e3:8.2f} ms  {gbs / t_loopy:7.1f} GB/s  "
          f"(first call incl. codegen+build {t_build:.2f} s)")
    print(f"ratio loopy/ours       {t_loopy / t_ours:8.2f}x")
    del cl


if __name__ == "__main__":
    main()
