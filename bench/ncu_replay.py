"""Profile one pyedmcl OpenCL kernel with Nsight Compute, through a CUDA replay.

Nsight Compute does not see OpenCL kernels, but NVIDIA's OpenCL program binaries are
PTX: this script captures one launch of a kernel in a real job (its PTX, every argument,
the launch geometry) and replays it through the CUDA driver API (ctypes, no CUDA
toolkit needed to run), where ``ncu`` profiles it like any CUDA kernel. The replay
reads the same data and computes the same output (the script compares it with the
OpenCL launch's); OpenCL's offset registers (``%envreg``: global and group offsets,
always 0 in pyedmcl's launches) are set to 0 in the PTX.

Run on a machine with an NVIDIA GPU (the job's device must be NVIDIA's OpenCL)::

    python bench/ncu_replay.py capture --kernel xmap_skill --job xmap --N 10000 --L 1000 --E 6
    python bench/ncu_replay.py replay                    # times the replay
    python bench/ncu_replay.py replay --maxrreg 64       # ... with the JIT's registers capped
    ncu --section SpeedOfLight --section WarpStateStats --section InstructionStats \\
        python bench/ncu_replay.py replay                # the profile
    python bench/ncu_replay.py sass > skill.sass         # SASS, with CUDA's cuobjdump

``--job``: ``xmap`` (the all-to-all map of ``bench_xmap.panel``, E an int or
``mixed``), ``simplex`` (``pe.simplex`` of one series of length L, E), ``smap`` (the S-map of
noise of length L, E, theta 1, every point a prediction, ``--params`` the kernel's), ``rqa``
(``pe.rqa`` of a Roessler trajectory of L points; its launches are bound ones,
``Backend.launch_bound``, captured alike). ``--skip`` launches of the kernel
are let through first (e.g. a ragged first batch). The capture (``--dir``, default
``ncu_capture``) holds the PTX, the arguments as ``.npy`` files and ``meta.json``.
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# -- capture (OpenCL) ------------------------------------------------------------------------
def _bytes(be, x) -> np.ndarray | None:
    """A buffer argument's contents as bytes (None: not a buffer)."""
    import pyopencl as cl
    import pyopencl.array as cla
    if isinstance(x, cla.Array):
        return np.ascontiguousarray(x.get()).view(np.uint8).reshape(-1)
    if isinstance(x, (cl.Buffer, cl.MemoryObjectHolder)):  # pooled buffers too
        host = np.empty(x.size, np.uint8)
        cl.enqueue_copy(be.queue, host, x)
        return host
    return None


def _clear_capture(out: Path) -> None:
    """An empty capture folder ``out``: a new one, or an earlier capture's files removed
    (only those: a folder holding anything else is refused, never emptied)."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--dir {out} is a file; choose a folder")
    if out.exists():
        ours = re.compile(r"(arg|after)\d+\.npy|kernel\.ptx|meta\.json")
        names = [p.name for p in out.iterdir()]
        other = [n for n in names if not ours.fullmatch(n)]
        if other or (names and "meta.json" not in names):
            raise SystemExit(f"--dir {out} holds files that are not a capture "
                             f"({', '.join(other[:3]) or 'no meta.json'}); choose another folder")
        for n in names:
            (out / n).unlink()
    out.mkdir(parents=True, exist_ok=True)


def capture(args: argparse.Namespace) -> None:
    import pyopencl as cl

    import pyedmcl as pe
    from clkernels import get_backend

    be = get_backend(args.device)
    if be.info.runtime != "nvidia":
        raise SystemExit(f"{be.info.name} is not NVIDIA's OpenCL: nothing to replay in CUDA")
    out = Path(args.dir)
    seen = [0]
    orig = be.launch

    def launch(kernel, gsize, lsize, *a, **kw):
        ev = orig(kernel, gsize, lsize, *a, **kw)
        if kernel.name != args.kernel or seen[0] < 0:
            return ev
        seen[0] += 1
        if seen[0] <= args.skip:
            return ev
        seen[0] = -1
        be.finish()
        if lsize is None:
            raise SystemExit(f"{args.kernel} was launched without a local size: the replay "
                             "needs the work-group shape")
        _clear_capture(out)
        arg_meta = []
        for i, x in enumerate(a):
            host = _bytes(be, x)
            if host is not None:
                np.save(out / f"arg{i}.npy", host)
                arg_meta.append({"kind": "buffer", "bytes": int(host.nbytes)})
            elif isinstance(x, np.generic):
                arg_meta.append({"kind": "scalar", "dtype": x.dtype.str, "value": x.item()})
            else:
                raise SystemExit(f"argument {i} of {args.kernel} ({type(x).__name__}) cannot "
                                 "be replayed (local memory arguments are not supported)")
        prog = kernel.handle.get_info(cl.kernel_info.PROGRAM)
        (out / "kernel.ptx").write_bytes(prog.get_info(cl.program_info.BINARIES)[0])
        ev2 = orig(kernel, gsize, lsize, *a, **kw)  # timed again, and its output kept
        be.finish()
        for i, x in enumerate(a):
            host = _bytes(be, x)
            if host is not None:
                np.save(out / f"after{i}.npy", host)
        meta = {"kernel": args.kernel, "global": list(gsize), "local": list(lsize),
                "args": arg_meta, "opencl_seconds": be.event_seconds(ev2),
                "device": be.info.name}
        (out / "meta.json").write_text(json.dumps(meta, indent=1))
        print(f"captured {args.kernel}: global {tuple(gsize)}, local {tuple(lsize)}, "
              f"{len(a)} arguments, OpenCL device time {meta['opencl_seconds']:.4f} s -> {out}")
        return ev

    orig_bound = be.launch_bound

    def launch_bound(bound, gsize, lsize, changes=None, **kw):
        # a bound launch (RQA's): its converted arguments, as launch would pass them
        if bound.kernel.name != args.kernel or seen[0] < 0:
            return orig_bound(bound, gsize, lsize, changes, **kw)
        a = list(bound.args)
        for i, x in (changes or {}).items():
            a[i] = be._arg(x)
        kernel = bound.kernel
        if kernel.arg_dtypes != bound.dtypes:
            kernel.handle.set_scalar_arg_dtypes(list(bound.dtypes))
            kernel.arg_dtypes = bound.dtypes
        return launch(kernel, gsize, lsize, *a, **kw)

    be.launch = launch
    be.launch_bound = launch_bound
    if args.job == "xmap":
        from bench_xmap import panel
        X = panel(args.N, args.L)
        E = (np.arange(args.N) % 20 + 1) if args.E == "mixed" else int(args.E)
        pe.xmap(X, E=E, device=be)
    elif args.job == "simplex":
        x = np.cumsum(np.random.default_rng(0).standard_normal(args.L))
        pe.simplex(x, E=int(args.E), device=be)
    elif args.job == "smap":  # noise, theta 1; --params: the kernel's values, e.g. the group RB
        from pyedmcl.edm.smap import smap_core
        x = np.random.default_rng(0).standard_normal(args.L).astype(np.float32)
        E = int(args.E)
        t = np.arange(E - 1, args.L - 1)
        smap_core(x, x, t, t, E=E, tau=1, Tp=1, thetas=np.array([1.0]), knn=None,
                  exclusion_radius=10, ridge=0.0, dtype=np.float32, device=be, backend=None,
                  params=json.loads(args.params) if args.params else None)
    else:
        from pyedmcl.data import roessler
        from pyedmcl.kernels.rqa_lines import RQA_LINES
        params = None
        if args.params:  # the device's defaults with these values changed
            spec = {"E": 3, "REAL": "float", "METRIC": "euclidean"}
            params = {**RQA_LINES.params_for(be, spec, args.L), **json.loads(args.params)}
        pe.rqa(roessler(args.L), E=3, tau=6, recurrence_rate=0.05, device=be, params=params)
    if seen[0] >= 0:
        raise SystemExit(f"the job launched {args.kernel} {seen[0]} times, not more than "
                         f"--skip {args.skip}")


# -- replay (CUDA driver API) ----------------------------------------------------------------
def _driver() -> C.CDLL:
    cu = C.CDLL("libcuda.so.1")
    V, SZ = C.c_void_p, C.c_size_t
    cu.cuCtxCreate_v2.argtypes = [C.POINTER(V), C.c_uint, C.c_int]
    cu.cuModuleLoadData.argtypes = [C.POINTER(V), C.c_char_p]
    cu.cuModuleLoadDataEx.argtypes = [C.POINTER(V), C.c_char_p, C.c_uint, C.POINTER(C.c_int),
                                      C.POINTER(V)]
    cu.cuModuleGetFunction.argtypes = [C.POINTER(V), V, C.c_char_p]
    cu.cuMemAlloc_v2.argtypes = [C.POINTER(C.c_uint64), SZ]
    cu.cuMemcpyHtoD_v2.argtypes = [C.c_uint64, V, SZ]
    cu.cuMemcpyDtoH_v2.argtypes = [V, C.c_uint64, SZ]
    cu.cuLaunchKernel.argtypes = [V, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint,
                                  C.c_uint, C.c_uint, V, C.POINTER(V), V]
    cu.cuEventRecord.argtypes = [V, V]
    cu.cuEventElapsedTime.argtypes = [C.POINTER(C.c_float), V, V]
    cu.cuGetErrorString.argtypes = [C.c_int, C.POINTER(C.c_char_p)]
    cu.cuLinkCreate_v2.argtypes = [C.c_uint, V, V, C.POINTER(V)]
    cu.cuLinkAddData_v2.argtypes = [V, C.c_int, C.c_char_p, SZ, C.c_char_p, C.c_uint, V, V]
    cu.cuLinkComplete.argtypes = [V, C.POINTER(V), C.POINTER(SZ)]
    return cu


def _check(cu: C.CDLL, r: int, what: str) -> None:
    if r != 0:
        s = C.c_char_p()
        cu.cuGetErrorString(r, C.byref(s))
        raise SystemExit(f"CUDA {what}: error {r} ({s.value.decode() if s.value else '?'})")


def _context(cu: C.CDLL) -> C.c_void_p:
    _check(cu, cu.cuInit(0), "init")
    dev = C.c_int()
    _check(cu, cu.cuDeviceGet(C.byref(dev), 0), "device")
    ctx = C.c_void_p()
    _check(cu, cu.cuCtxCreate_v2(C.byref(ctx), 0, dev), "context")
    return ctx


def _ptx(folder: Path) -> bytes:
    """The captured PTX with OpenCL's offset registers set to 0, NUL-terminated."""
    ptx = (folder / "kernel.ptx").read_bytes().rstrip(b"\0")
    return re.sub(rb"%envreg\d+", b"0", ptx) + b"\0"


def replay(args: argparse.Namespace) -> None:
    folder = Path(args.dir)
    meta = json.loads((folder / "meta.json").read_text())
    cu = _driver()
    _context(cu)
    mod, fn = C.c_void_p(), C.c_void_p()
    if args.maxrreg:  # CU_JIT_MAX_REGISTERS (0): the JIT's register budget per thread
        opts, vals = (C.c_int * 1)(0), (C.c_void_p * 1)(args.maxrreg)
        _check(cu, cu.cuModuleLoadDataEx(C.byref(mod), _ptx(folder), 1, opts, vals), "module load")
    else:
        _check(cu, cu.cuModuleLoadData(C.byref(mod), _ptx(folder)), "module load")
    _check(cu, cu.cuModuleGetFunction(C.byref(fn), mod, meta["kernel"].encode()), "function")
    holders, bufs = [], {}
    for i, a in enumerate(meta["args"]):
        if a["kind"] == "buffer":
            host = np.load(folder / f"arg{i}.npy")
            p = C.c_uint64()
            _check(cu, cu.cuMemAlloc_v2(C.byref(p), max(host.nbytes, 1)), "alloc")
            _check(cu, cu.cuMemcpyHtoD_v2(p, C.c_void_p(host.ctypes.data), host.nbytes), "upload")
            bufs[i] = (p, host.nbytes)
            holders.append(p)
        else:
            ct = {"<i4": C.c_int32, "<u4": C.c_uint32, "<i8": C.c_int64, "<u8": C.c_uint64,
                  "<f4": C.c_float, "<f8": C.c_double}[a["dtype"]]
            holders.append(ct(a["value"]))
    ptrs = (C.c_void_p * len(holders))(*[C.cast(C.pointer(h), C.c_void_p) for h in holders])
    g, loc = meta["global"], meta["local"]
    grid = [g[d] // loc[d] for d in range(len(g))] + [1] * (3 - len(g))
    block = list(loc) + [1] * (3 - len(loc))
    e0, e1 = C.c_void_p(), C.c_void_p()
    cu.cuEventCreate(C.byref(e0), 0)
    cu.cuEventCreate(C.byref(e1), 0)
    for _ in range(args.repeat):
        cu.cuEventRecord(e0, None)
        _check(cu, cu.cuLaunchKernel(fn, *grid, *block, 0, None, ptrs, None), "launch")
        cu.cuEventRecord(e1, None)
        _check(cu, cu.cuCtxSynchronize(), "run")
        ms = C.c_float()
        cu.cuEventElapsedTime(C.byref(ms), e0, e1)
        print(f"replay {meta['kernel']}: grid {grid}, block {block}: {ms.value * 1e3:.1f} us "
              f"(OpenCL {meta['opencl_seconds'] * 1e6:.1f} us)")
    same = True
    for i, (p, n) in bufs.items():
        host = np.empty(n, np.uint8)
        _check(cu, cu.cuMemcpyDtoH_v2(C.c_void_p(host.ctypes.data), p, n), "download")
        same &= bool(np.array_equal(host, np.load(folder / f"after{i}.npy")))
    print("buffers after the replay equal the OpenCL launch's" if same else
          "buffers after the replay DIFFER from the OpenCL launch's")


def sass(args: argparse.Namespace) -> None:
    """The captured kernel's SASS: the driver's JIT links the PTX into a cubin, which
    cuobjdump (CUDA toolkit) disassembles."""
    cu = _driver()
    _context(cu)
    ptx = _ptx(Path(args.dir))
    state, cubin, size = C.c_void_p(), C.c_void_p(), C.c_size_t()
    _check(cu, cu.cuLinkCreate_v2(0, None, None, C.byref(state)), "link")
    _check(cu, cu.cuLinkAddData_v2(state, 1, ptx, len(ptx), b"kernel.ptx", 0, None, None),
           "link PTX")
    _check(cu, cu.cuLinkComplete(state, C.byref(cubin), C.byref(size)), "link complete")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(C.string_at(cubin, size.value))
        f.flush()
        tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
        subprocess.run([tool, "-sass", f.name], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("capture", "replay", "sass"))
    ap.add_argument("--dir", default="ncu_capture")
    ap.add_argument("--kernel", default="xmap_skill")
    ap.add_argument("--skip", type=int, default=0, help="launches of the kernel let through")
    ap.add_argument("--job", choices=("xmap", "simplex", "smap", "rqa"), default="xmap")
    ap.add_argument("--device", default="nvidia")
    ap.add_argument("--N", type=int, default=10000)
    ap.add_argument("--L", type=int, default=1000)
    ap.add_argument("--E", default="6")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--maxrreg", type=int, default=0,
                    help="replay: the JIT's register budget per thread (0: its own choice)")
    ap.add_argument("--params", default="",
                    help='rqa: JSON of kernel values over the device defaults, e.g. \'{"PACK": 1}\'; '
                         'smap: JSON of the kernel\'s parameters')
    args = ap.parse_args()
    {"capture": capture, "replay": replay, "sass": sass}[args.mode](args)


if __name__ == "__main__":
    main()
