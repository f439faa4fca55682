"""Importing peer libraries for a benchmark without changing what pyedmcl runs on.

``import kedm`` initialises Kokkos' OpenMP back end, which pins the importing thread
to one core; every thread an OpenCL CPU runtime starts later inherits that mask, so a
benchmark that imports kEDM first measures pyedmcl on one core (2x too slow on 2
cores, ~10x on 16). :func:`import_peer` restores the process's CPU mask after the
import; kEDM's own OpenMP threads keep theirs.
"""

from __future__ import annotations

import os
from types import ModuleType


def import_peer(name: str) -> ModuleType | None:
    """``import name`` with this thread's CPU affinity restored afterwards; None when the
    library is not installed (or fails to import)."""
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        return __import__(name)
    except Exception:
        return None
    finally:
        if mask is not None:
            os.sched_setaffinity(0, mask)
