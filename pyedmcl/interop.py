"""Device arrays in and out: run where the data already is, without a host round trip.

Inputs. Every public function takes numpy arrays, lists, pandas Series/DataFrames
(EDM and RQA also xarray DataArrays: :mod:`pyedmcl.labels`) and device arrays. On the *device paths* (:func:`pyedmcl.simplex`, the recurrence
plot and :func:`pyedmcl.pairwise_distances`) a ``pyopencl.array.Array`` on the
context of the chosen backend, or on the SYCL backend a dpctl ``usm_ndarray`` /
the backend's ``UsmArray`` on its SYCL context, stays on the device: shape and
dtype are checked from the host-side metadata, finiteness by a reduction kernel
on the device (the same ``ValueError`` as for host data), and a dtype conversion
(e.g. float64 data, float32 computation) runs on the device. With ``device=None``
the backend that owns the array is used. A device array from a context pyedmcl did
not create is refused with a ``ValueError`` (no silent cross-context copy): make it
on the backend's queue (``clkernels.get_backend(...).queue``) or pass ``x.get()``.
Other functions (S-map, CCM, RQA, xmap) take device arrays too, with one
documented copy to the host (their algorithms need the series on the host).

Outputs. ``return_device=True`` returns predictions (Simplex, S-map) and matrices
(recurrence plot, distance matrix) as device arrays of the backend's own type
(``pyopencl.array.Array``; on SYCL a dpctl ``usm_ndarray`` where dpctl.tensor is
installed, else ``UsmArray``) in the computation dtype (float32 unless
``dtype=float64``); scalar skills (rho, MAE, RMSE) stay host numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clkernels import Backend, get_backend
from clkernels.arrays import convert_check, is_device_array, native, on_backend, raw_view, reshape
from clkernels.backends import backend_of

from .validation import nonfinite_message

__all__ = ["backend_for", "device_series", "is_device_array", "output", "to_backend"]


def backend_for(inputs: tuple[Any, ...], device: Any, backend: str | None) -> Backend:
    """The backend to run on: ``device``/``backend`` if given, else the one owning the
    first device array among ``inputs``, else the default device."""
    if device is None and backend is None:
        for x in inputs:
            if is_device_array(x):
                be = backend_of(x)
                if be is None:
                    raise ValueError(
                        "a device array was passed on a context pyedmcl did not create; make it on "
                        "pyedmcl's queue (clkernels.get_backend(...).queue) or pass a host copy "
                        "(x.get())")
                return be
    return get_backend(device, backend)


def device_series(x: Any, be: Backend, name: str, dtype: Any, *, ndim: tuple[int, ...] = (1,),
                  length: int | None = None, allow_nan: bool = False) -> Any | None:
    """``x`` as a validated contiguous ``dtype`` array on ``be`` (no host copy), or None
    when ``x`` is not a device array (then the caller's host path applies).

    1-D series: shape ``(n,)`` (or ``(n, 1)``/``(1, n)``); with ``2 in ndim`` also
    ``(rows, length)``. Errors name ``name`` and match the host validators'.
    """
    v = raw_view(x)
    if v is None:
        return None
    if not on_backend(be, x):
        raise ValueError(
            f"{name} is a device array on another context than the chosen device "
            f"{be.info.name} ({be.info.runtime}, {be.name} backend); pass device=None to run "
            f"where {name} lives, make it on that backend's queue, or pass {name}.get()")
    shape = v.shape
    if len(shape) == 2 and 1 in shape and not (2 in ndim and length is not None
                                                and shape[1] == length and shape[0] == 1):
        shape = (int(np.prod(shape)),)
    if len(shape) not in ndim:
        want = "1-D (a single series)" if ndim == (1,) else "1-D or 2-D (rows, n)"
        raise ValueError(f"{name} must be {want}, got shape {v.shape}")
    if v.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {v.dtype}")
    if int(np.prod(shape)) == 0:
        raise ValueError(f"{name} is empty; a series needs at least one value")
    if length is not None and shape[-1] != length:
        raise ValueError(f"{name} has {shape[-1]} values but x has {length}; they must be equally long")
    if not v.contiguous:
        raise ValueError(f"{name} is a non-contiguous device array; pass a contiguous copy")
    if v.dtype == np.float64 and not be.info.fp64:
        raise ValueError(f"{name} is float64 but device {be.info.name} lacks fp64; convert it to "
                         "float32 first")
    arr, bad = convert_check(be, x, dtype, check=not allow_nan)
    if bad >= 0:
        if len(shape) == 2:
            raise ValueError(nonfinite_message(f"{name}[{bad // shape[1]}]", bad % shape[1]))
        raise ValueError(nonfinite_message(name, bad))
    return arr if tuple(arr.shape) == shape else reshape(be, arr, shape)


def to_backend(be: Backend, host: np.ndarray, dtype: Any) -> Any:
    """A host array uploaded to ``be`` as ``dtype`` (the host path of mixed inputs)."""
    return be.to_device(np.ascontiguousarray(host, dtype=dtype))


def output(be: Backend, arr: Any, return_device: bool, shape: tuple[int, ...] | None = None) -> Any:
    """A result array: the backend's native device array (``return_device``) or a host copy."""
    if shape is not None and tuple(arr.shape) != tuple(shape):
        arr = reshape(be, arr, shape)
    return native(be, arr) if return_device else be.to_host(arr)
