"""Where the gemm variant's moments kernel (``templates/smap/_gemm.mako``) spends its
time: the kernel as built, and timing-only variants of its source, on the arguments of a
real ``pe.smap`` call, one process, device time of each launch (best of 5, interleaved).

The variants change one phase of a library step and give wrong moments (``same=False``);
what each saves is that phase's cost:

* ``no_exp``: the weight without its double ``exp`` (the exponent used as the weight);
* ``no_products``: the products ``b_k b_l`` of the step's points not computed (a stand-in
  stored);
* ``no_fill``: the library points read from global memory at the first step only.

Run:  python bench/smap_gemm_variants.py --device nvidia --T 32000 --E 20
"""

from __future__ import annotations

import argparse
import re

import numpy as np


def _variants(src: str) -> dict[str, str]:
    exp = re.search(r"w = exp\(-sq\[wq\] \* \(acc_t\)d\);", src)
    prod = re.compile(r"B\[l \* (\d+) \+ lid\] = lid < \d+ \? bl\[l \* \d+ \+ ka\] \* "
                      r"bl\[l \* \d+ \+ kb\] : \(acc_t\)0;")
    fill = "const int tj = j < n_lib ? lib_t[j] : 0;"
    if not exp or not prod.search(src) or fill not in src:
        raise SystemExit("the moments kernel's source changed: update the variants")
    out = {"as built": src,
           "no_exp": src.replace(exp.group(0), "w = -sq[wq] * (acc_t)d;"),
           "no_products": prod.sub(r"B[l * \1 + lid] = (acc_t)(ka + kb + l);", src)}
    i = src.index(fill)
    out["no_fill"] = (src[:i] + "if (base == 0) {\n" + src[i:].replace(
        "barrier(CLK_LOCAL_MEM_FENCE);", "}\n        barrier(CLK_LOCAL_MEM_FENCE);", 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="nvidia")
    ap.add_argument("--T", type=int, default=32000)
    ap.add_argument("--E", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    import pyopencl as cl
    import pyopencl.array as cla

    import pyedmcl as pe
    from clkernels import get_backend, templates
    from clkernels.backends import base
    from clkernels.backends import pyopencl_backend as P
    from clkernels.devices import build_options

    cap: dict = {}
    kernel, launch = base.Backend.kernel, P.PyOpenCLBackend.launch

    def spy_kernel(self, template, params, name, options=()):
        if name == "smap_moments":
            cap["src"] = templates.render(template, params)
        return kernel(self, template, params, name, options)

    def spy_launch(self, k, g, loc, *args, **kw):
        if k.name == "smap_moments":
            cap["launch"] = (g, loc, args)
        return launch(self, k, g, loc, *args, **kw)

    base.Backend.kernel, P.PyOpenCLBackend.launch = spy_kernel, spy_launch
    x = np.random.default_rng(1).standard_normal(a.T)
    pe.smap(x, E=a.E, tau=1, Tp=1, theta=1.0, exclusion_radius=10, device=a.device)
    base.Backend.kernel, P.PyOpenCLBackend.launch = kernel, launch
    if "launch" not in cap:
        raise SystemExit("this call did not run the gemm variant (E >= 17 on GPUs)")
    be = get_backend(a.device)
    g, loc, args = cap["launch"]
    S, sums = args[-2], args[-1]
    cargs = [v.data if isinstance(v, cla.Array) else v for v in args]
    q = cl.CommandQueue(be.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    ks = {}
    for name, src in _variants(cap["src"]).items():
        k = cl.Program(be.context, src).build(options=list(build_options(be.info))).smap_moments
        k.set_args(*cargs)
        ks[name] = k
    times: dict[str, list[float]] = {n: [] for n in ks}
    outs = {}
    for rep in range(a.repeat):
        for name, k in ks.items():
            S.fill(0)
            sums.fill(0)
            be.queue.finish()
            ev = cl.enqueue_nd_range_kernel(q, k, g, loc)
            ev.wait()
            times[name].append((ev.profile.end - ev.profile.start) * 1e-6)
            if rep == 0:
                outs[name] = (S.get(), sums.get())
    flops = 2.0 * a.T * a.T * ((a.E + 2) * (a.E + 3) // 2)
    print(f"{be.info.name}: smap_moments, T={a.T} E={a.E}, best of {a.repeat} (ms)")
    for name, ts in times.items():
        same = all(np.array_equal(u, v) for u, v in zip(outs[name], outs["as built"],
                                                         strict=True))
        print(f"  {name:12s} {min(ts):8.3f}  {flops / min(ts) / 1e9:6.2f} TFLOP/s  same={same}")


if __name__ == "__main__":
    main()
