"""Generic device-array helpers: adopt foreign arrays, convert + check finiteness, gather.

Used to take arrays that already live on a device (``pyopencl.array.Array``; a
dpctl ``usm_ndarray`` or the SYCL backend's :class:`UsmArray`) without a round
trip through the host: metadata (shape, dtype, contiguity) is checked on the
host, values on the device (``templates/convert_check.cl.mako``, one pass that
converts the dtype if asked and min-reduces the index of the first NaN/inf).
Nothing here knows about EDM or RQA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backends.base import Backend, round_up

#: numpy dtype -> OpenCL C scalar type, for the element types kernels may read
CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
          np.dtype(np.int32): "int", np.dtype(np.uint32): "uint",
          np.dtype(np.int64): "long", np.dtype(np.uint64): "ulong",
          np.dtype(np.int16): "short", np.dtype(np.uint16): "ushort",
          np.dtype(np.int8): "char", np.dtype(np.uint8): "uchar"}


@dataclass(frozen=True)
class RawView:
    """A device array seen as (buffer handle, element offset, shape, dtype, C-contiguous)."""

    handle: Any
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    contiguous: bool
    kind: str  # "pyopencl", "usm" (our UsmArray) or "usm_ndarray" (dpctl.tensor)


def is_device_array(obj: Any) -> bool:
    """Whether ``obj`` is a device array of a kind some backend can read."""
    return raw_view(obj) is not None


def raw_view(obj: Any) -> RawView | None:
    """The buffer behind a device array, or None for anything else (host data)."""
    mod = type(obj).__module__
    if mod.startswith("pyopencl"):
        import pyopencl.array as cla

        if isinstance(obj, cla.Array):
            return RawView(obj.base_data, obj.offset // obj.dtype.itemsize, tuple(obj.shape),
                           np.dtype(obj.dtype), bool(obj.flags.c_contiguous), "pyopencl")
    if type(obj).__name__ == "UsmArray" and mod.startswith("clkernels"):
        return RawView(obj.mem, 0, tuple(obj.shape), obj.dtype, True, "usm")
    if hasattr(obj, "usm_data") and hasattr(obj, "sycl_queue"):  # dpctl.tensor.usm_ndarray
        return RawView(obj.usm_data, int(getattr(obj, "_element_offset", 0)), tuple(obj.shape),
                       np.dtype(obj.dtype), bool(obj.flags.c_contiguous), "usm_ndarray")
    return None


def on_backend(be: Backend, obj: Any) -> bool:
    """Whether device array ``obj`` is usable by ``be`` (same OpenCL context / SYCL context)."""
    v = raw_view(obj)
    if v is None:
        return False
    if v.kind == "pyopencl":
        return getattr(be, "context", None) is not None and obj.context == be.context
    queue = getattr(be, "queue", None)
    if be.name != "sycl" or queue is None:
        return False
    if v.kind == "usm":
        return obj.mem.sycl_context == queue.sycl_context
    return obj.sycl_context == queue.sycl_context


def adopt(be: Backend, obj: Any) -> Any | None:
    """``obj`` as ``be``'s own array type sharing its memory (no copy), or None if that
    needs a compacting copy (an offset into a larger buffer, non-contiguous, foreign)."""
    v = raw_view(obj)
    if v is None or not v.contiguous or v.offset or not on_backend(be, obj):
        return None
    if v.kind == "usm_ndarray":
        from .backends.sycl_backend import UsmArray

        return UsmArray(v.handle, v.shape, v.dtype)
    return obj


def native(be: Backend, arr: Any) -> Any:
    """A backend array in the type users hold: pyopencl.array.Array on PyOpenCL; on SYCL a
    dpctl ``usm_ndarray`` where dpctl.tensor is installed, else the backend's UsmArray."""
    if be.name == "sycl":
        try:
            import dpctl.tensor as dpt
        except ImportError:
            return arr
        return dpt.usm_ndarray(arr.shape, dtype=arr.dtype, buffer=arr.mem)
    return arr


def reshape(be: Backend, arr: Any, shape: tuple[int, ...]) -> Any:
    """A contiguous backend array viewed with another shape (no copy)."""
    if be.name == "sycl":
        from .backends.sycl_backend import UsmArray

        assert int(np.prod(shape)) == arr.size
        return UsmArray(arr.mem, tuple(shape), arr.dtype)
    return arr.reshape(shape)


#: buffers kept alive for the process on Oclgrind only: it can apply a released buffer's
#: "uninitialised" shadow state to a new buffer at the same address (false reports).
_OCLGRIND_HOLD: list = []


def _hold(be: Backend, *arrays: Any) -> None:
    if be.info.runtime == "oclgrind":
        _OCLGRIND_HOLD.extend(arrays)


def _groups(be: Backend, n: int, wg: int) -> int:
    # one element per work-item up to 2**20 groups (measured: a short grid-stride loop
    # over few groups ran 2-4x slower on PoCL, which vectorises across work-items)
    return max(1, min(-(-n // wg), 1 << 20))


def convert_check(be: Backend, obj: Any, dtype: Any = None, *, check: bool = True,
                  copy: bool = False) -> tuple[Any, int]:
    """``(array, first_bad)``: ``obj`` on ``be`` as a contiguous ``dtype`` array, and the
    flat index of its first NaN/inf (-1 if none, or if ``check`` is off / ints).

    Shares ``obj``'s memory when no conversion is needed (and not ``copy``); otherwise one
    device-side pass writes a new array. Only the 4-byte index comes back to the host.
    """
    v = raw_view(obj)
    if v is None or not on_backend(be, obj):
        raise ValueError("convert_check needs a device array on the backend's own context")
    if not v.contiguous:
        raise ValueError("the device array is not C-contiguous; pass a contiguous copy")
    src = v.dtype
    dst = src if dtype is None else np.dtype(dtype)
    if src not in CTYPES or dst not in CTYPES:
        raise TypeError(f"device arrays of dtype {src} cannot be converted to {dst}")
    n = int(np.prod(v.shape))
    if n >= 2**31 - 1:
        raise ValueError(f"device array of {n} elements is too large (limit 2**31 - 2)")
    same = adopt(be, obj) if dst == src and not copy else None
    write = same is None
    check = check and src.kind == "f"
    out = same if same is not None else be.empty(v.shape, dst)
    if n == 0 or (not write and not check):
        return out, -1
    wg = min(256, be.info.max_work_group_size)
    k = be.kernel("convert_check.cl.mako", {"SRC": CTYPES[src], "DST": CTYPES[dst],
                                            "WRITE": int(write), "CHECK": int(check)},
                  "convert_check")
    args: list[Any] = [v.handle, np.uint64(v.offset), np.uint32(n)]
    if write:
        args.append(out)
    bad = None
    if check:
        bad = be.to_device(np.array([n], np.int32))
        args.append(bad)
    _hold(be, out, bad)
    be.launch(k, (_groups(be, n, wg) * wg,), (wg,), *args)
    if bad is None:
        return out, -1
    first = int(be.to_host(bad)[0])
    return out, (-1 if first >= n else first)


def gather_request(dtype: Any) -> tuple[str, dict[str, Any], str]:
    """The kernel :func:`gather` launches for arrays of ``dtype``, as a request of
    :meth:`clkernels.Backend.prebuild`."""
    return ("gather.cl.mako", {"CTYPE": CTYPES[np.dtype(dtype)]}, "gather")


def gather(be: Backend, a: Any, lda: int, rows: int, idx: Any, m: int, fill: float) -> Any:
    """``out[r, i] = a[r * lda + idx[i]]`` (``fill`` where ``idx[i] < 0``): a ``(rows, m)``
    device array of ``a``'s dtype; ``idx`` is an int32 device array of length ``m``."""
    dt = np.dtype(a.dtype)
    out = be.empty((rows, m), dt)
    if rows == 0 or m == 0:
        return out
    wg = min(64, be.info.max_work_group_size)
    k = be.kernel(*gather_request(dt))
    be.launch(k, (round_up(m, wg), rows), (wg, 1), a, np.uint32(lda), idx, np.uint32(m),
              dt.type(fill), out)
    _hold(be, out, idx)
    return out


def affine_rows(be: Backend, a: Any, rows: int, m: int, scale: np.ndarray,
                shift: np.ndarray) -> Any:
    """In place: ``a[r, i] = a[r, i] * scale[r] + shift[r]`` for a contiguous ``(rows, m)``
    float device array (any leading shape of ``rows * m`` elements); returns ``a``. The
    arithmetic runs in double where the device has fp64."""
    dt = np.dtype(a.dtype)
    if rows == 0 or m == 0:
        return a
    acc = np.dtype(np.float64) if be.info.fp64 else np.dtype(np.float32)
    wg = min(64, be.info.max_work_group_size)
    k = be.kernel("affine.cl.mako", {"CTYPE": CTYPES[dt], "ACC": CTYPES[acc]}, "affine_rows")
    s = be.to_device(np.ascontiguousarray(np.broadcast_to(scale, (rows,)), dtype=acc))
    t = be.to_device(np.ascontiguousarray(np.broadcast_to(shift, (rows,)), dtype=acc))
    be.launch(k, (round_up(m, wg), rows), (wg, 1), a, np.uint32(m), s, t)
    _hold(be, s, t)
    return a
