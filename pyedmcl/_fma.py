"""Whether a job's distance sums fuse multiply-adds: pyedmcl's bit-identity policy.

OpenCL's ``fma()`` is correctly rounded on every device, so results agree bit for bit
across the devices of a job as long as they all make the same choice. GPUs run it as
one instruction (faster), PoCL as a library call (2-9x slower). The kernels take the
choice as their ``FMA`` template value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from clkernels.devices import DeviceInfo


def job_fma(infos: Iterable[DeviceInfo]) -> bool:
    """Whether a job's kernels fuse multiply-adds with ``fma()`` (the FMA template value).

    Default: on when every device of the job is a GPU. ``PYEDMCL_FMA=0`` / ``1`` forces
    it off / on (e.g. to compare a GPU's results bit for bit with a CPU's).
    """
    env = os.environ.get("PYEDMCL_FMA", "auto").strip().lower()
    if env in ("0", "off", "false", "no"):
        return False
    if env in ("1", "on", "true", "yes"):
        return True
    if env not in ("", "auto"):
        raise ValueError(f"PYEDMCL_FMA={env!r} is invalid; allowed: auto, 0, 1")
    infos = list(infos)
    return bool(infos) and all(i.is_gpu for i in infos)
