"""Optional SYCL backend through dpctl, running the same OpenCL C.

The rendered source is built with ``dpctl.program.create_program_from_source`` on
an OpenCL-backend SYCL queue that maps to the chosen OpenCL device; buffers are
USM device allocations; scalars are passed as ctypes values.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .. import settings
from ..devices import DeviceInfo
from ..probe import Captured, quiet_build
from .base import Backend, BuildError, Local, save_failed_source

_CTYPES = {
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


class UsmArray:
    """A typed USM device allocation (shape + dtype around dpctl memory)."""

    def __init__(self, mem: Any, shape: tuple[int, ...], dtype: np.dtype):
        self.mem = mem
        self.shape = shape
        self.dtype = np.dtype(dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def get(self) -> np.ndarray:
        return np.frombuffer(self.mem.copy_to_host(), dtype=self.dtype).reshape(self.shape).copy()


class SyclBackend(Backend):
    name = "sycl"

    def __init__(self, info: DeviceInfo):
        super().__init__(info)
        try:
            import dpctl
            import dpctl.memory as dpm
            import dpctl.program as dpp
        except ImportError as exc:  # pragma: no cover - depends on the extra
            extras = settings.current().extras_of
            raise ImportError("the SYCL backend needs dpctl: pip install "
                              + (f"'{extras}[sycl]'" if extras else "dpctl")) from exc
        self._dpm, self._dpp = dpm, dpp
        match = None
        for dev in dpctl.get_devices(backend="opencl"):
            if dev.name.strip() == info.name and (
                (dev.device_type.name == "gpu") == (info.device_type == "gpu")
            ):
                match = dev
                break
        if match is None:
            raise ValueError(
                f"SYCL backend: no OpenCL-backend SYCL device matches {info.name} ({info.runtime}); "
                f"SYCL sees {[d.name for d in dpctl.get_devices()]}"
            )
        self.queue = dpctl.SyclQueue(match, property="enable_profiling")
        self._programs: dict[tuple, Any] = {}

    def _program(self, source: str, options: tuple[str, ...]) -> Any:
        opts = tuple(options) + self.build_options
        key = (source, opts)
        prog = self._programs.get(key)
        if prog is None:
            cap = Captured()
            try:
                with quiet_build(self.info, cap):
                    prog = self._dpp.create_program_from_source(self.queue, source, " ".join(opts))
            except Exception as exc:
                path = save_failed_source(source, str(exc), self.info.fingerprint, cap.text)
                raise BuildError(f"SYCL build failed; rendered source saved to {path}\n{exc}") from exc
            self.build_count += 1
            self._programs[key] = prog
        return prog

    def _get_kernel(self, program: Any, name: str) -> Any:
        return program.get_sycl_kernel(name)

    def empty(self, shape, dtype) -> UsmArray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.check_alloc(shape, dtype)
        nbytes = max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)
        return UsmArray(self._dpm.MemoryUSMDevice(nbytes, queue=self.queue), shape, np.dtype(dtype))

    def to_device(self, array: np.ndarray, *, copy: bool = True) -> UsmArray:
        a = np.ascontiguousarray(array)  # (the copy is made before the call returns)
        out = self.empty(a.shape, a.dtype)
        if a.nbytes:
            out.mem.copy_from_host(a.reshape(-1).view(np.uint8))
        return out

    def fill(self, array: UsmArray, value: float) -> None:
        host = np.full(array.shape, value, dtype=array.dtype)
        if host.nbytes:
            array.mem.copy_from_host(host.reshape(-1).view(np.uint8))

    def to_host(self, array: Any) -> np.ndarray:
        return array.get() if isinstance(array, UsmArray) else np.asarray(array)

    def is_device_array(self, obj: Any) -> bool:
        return isinstance(obj, UsmArray)

    def _arg(self, a: Any) -> Any:
        if isinstance(a, UsmArray):
            return a.mem
        if isinstance(a, Local):
            raise NotImplementedError("dynamic __local arguments are not supported on the SYCL backend; "
                                      "size local memory at compile time in the template")
        if isinstance(a, np.generic):
            return _CTYPES[a.dtype](a.item())
        if a is None:
            return ctypes.c_void_p(0)
        return a

    def launch(self, kernel, global_size, local_size, *args, stream: int = 0,
               wait_for: list[Any] | None = None) -> Any:
        """One queue (``streams`` 1): ``stream`` must be 0; its order covers ``wait_for``."""
        if stream:
            raise ValueError(f"stream={stream}: the SYCL backend has one queue")
        self.check_launch(global_size, local_size)
        # SYCL ranges list the slowest dimension first: reverse OpenCL's (x, y, z) order,
        # so get_global_id(0) in the kernel is the fastest-varying index on both backends.
        gs = list(global_size)[::-1]
        args_ = [self._arg(a) for a in args]
        if local_size is None:  # let the runtime choose the work-group
            return self.queue.submit(kernel.handle, args_, gs)
        return self.queue.submit(kernel.handle, args_, gs, list(local_size)[::-1])

    def wait(self, event: Any) -> None:
        event.wait()

    def event_seconds(self, event: Any) -> float:
        event.wait()
        return (event.profiling_info_end - event.profiling_info_start) * 1e-9

    def finish(self) -> None:
        self.queue.wait()
