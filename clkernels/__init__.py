"""clkernels — the vendor-neutral OpenCL kernel runtime under pyedmcl.

Devices (enumeration, fingerprints, selection), code generation from Mako
templates, build-once program caches, backends (PyOpenCL, SYCL via dpctl) and the
autotuner with its tuning database. It knows nothing of EDM or RQA.

Importing it registers pip-installed OpenCL runtimes (Intel's CPU runtime) with
the ICD loader before PyOpenCL is imported; import it (or pyedmcl) first.
"""

from .registration import register_platforms

register_platforms()

from .backends import Backend, BuildError, Kernel, Local, get_backend, round_up  # noqa: E402
from .devices import (  # noqa: E402
    DeviceInfo,
    DeviceSelectionError,
    default_device,
    job_fma,
    list_devices,
    normalise_name,
    select_device,
)
from .memory import DeviceMemoryError, run_blocked  # noqa: E402
from .templates import TemplateParameterError, render, template_hash  # noqa: E402

__all__ = [
    "Backend",
    "BuildError",
    "DeviceInfo",
    "DeviceMemoryError",
    "DeviceSelectionError",
    "Kernel",
    "Local",
    "TemplateParameterError",
    "default_device",
    "get_backend",
    "job_fma",
    "list_devices",
    "normalise_name",
    "register_platforms",
    "render",
    "round_up",
    "run_blocked",
    "select_device",
    "template_hash",
]
