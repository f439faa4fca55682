"""How long the host is held by an upload enqueued while a kernel runs, per upload kind.

A spin kernel (~8 ms on an H100/H200) is queued; then one upload of each kind and a
small kernel that reads it. Printed per kind: the host's time to make the upload, to
enqueue the kernel behind it, and the wait for the end. NVIDIA's runtime holds the host
at an upload into a busy queue (a queued pageable write; a buffer made with its data, at
its creation or at its first launch) until the kernels before it end; a copy through a
second queue does not (decision 0129, ``Backend.to_device_aside``).

Run:  python bench/upload_beside_kernel.py   (on a machine with an NVIDIA GPU: its platform)
"""

from __future__ import annotations

import time
import warnings

import numpy as np


def main() -> None:
    import pyopencl as cl
    import pyopencl.array as cla

    warnings.simplefilter("ignore")
    plats = cl.get_platforms()
    plat = next((p for p in plats if "NVIDIA" in p.name), None)
    if plat is None:
        raise SystemExit("no NVIDIA OpenCL platform: the probe is about NVIDIA's runtime")
    ctx = cl.Context([plat.get_devices()[0]])
    q = cl.CommandQueue(ctx)
    q2 = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, """
    __kernel void spin(__global float* a, int n) { float v = a[get_global_id(0)];
        for (int i = 0; i < n; i++) v = v * 1.0000001f + 1e-7f; a[get_global_id(0)] = v; }
    __kernel void use(__global const float* b, __global float* out) {
        out[get_global_id(0)] = b[get_global_id(0)] + 1; }""").build()
    kspin, kuse = cl.Kernel(prg, "spin"), cl.Kernel(prg, "use")
    n = 1 << 17
    a = cla.zeros(q, 1 << 20, np.float32)
    out = cla.zeros(q, n, np.float32)
    host = np.full(n, 3.0, np.float32)
    mf = cl.mem_flags

    def spin() -> None:
        kspin(q, (1 << 20,), None, a.data, np.int32(200_000))

    spin()
    q.finish()
    print(f"device: {plat.get_devices()[0].name}")
    for what in ("queued write", "made with its data", "second queue", "no upload"):
        spin()
        q.flush()
        t0 = time.perf_counter()
        wait = None
        if what == "queued write":
            b = cla.to_device(q, host, async_=True).data
        elif what == "made with its data":
            b = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
        elif what == "second queue":
            b = cl.Buffer(ctx, mf.READ_WRITE, host.nbytes)
            wait = [cl.enqueue_copy(q2, b, host, is_blocking=False)]
            q2.flush()
        else:
            b = a.data
        t1 = time.perf_counter()
        kuse(q, (n,), None, b, out.data, wait_for=wait)
        t2 = time.perf_counter()
        q.finish()
        t3 = time.perf_counter()
        ok = what == "no upload" or np.allclose(out.get(), 4.0)
        print(f"  {what:20s} make {1e3 * (t1 - t0):7.3f} ms  enqueue {1e3 * (t2 - t1):7.3f} ms"
              f"  wait {1e3 * (t3 - t2):7.3f} ms  values {'ok' if ok else 'WRONG'}")


if __name__ == "__main__":
    main()
