"""First use on an untuned CPU: one stderr line offering ``pyedmcl tune --quick``.

A CPU with no tuning of its own or of its class (:func:`clkernels.tuning.database.
has_class_tuning`) runs the heuristic or vendor-wide defaults, which fit the CPUs they
were derived on. The offer is shown once per device (remembered in the user
tuning directory), only where progress lines are shown (stderr a terminal, no ``-q``),
and never breaks a command: any failure to look is silence.
"""

from __future__ import annotations

import json
import sys

#: commands that never show the offer (they tune, list or benchmark devices themselves)
NO_OFFER = frozenset({"tune", "devices", "bench", "sample"})
MARKER = "tune_offered.json"


def offer_quick_tune(device: str | None, backend: str | None = None, stream=None) -> bool:
    """Print the offer for ``device``'s backend if it is an untuned CPU not offered before;
    True when printed."""
    try:
        from clkernels import get_backend
        from clkernels.tuning.database import atomic_write_json, has_class_tuning, user_tuning_dir

        from .quick_set import quick_set_seconds

        info = get_backend(device, backend).info
        if has_class_tuning(info):
            return False
        path = user_tuning_dir() / MARKER
        seen = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(seen, dict):
            seen = {}
        if info.device_key in seen:
            return False
        print(f"pyedmcl: no tuning measured for this CPU or its class ({info.name}, "
              f"{info.runtime}); `pyedmcl tune --quick` tunes the main kernels in about "
              f"{quick_set_seconds():.0f} s (shown once)", file=stream or sys.stderr)
        seen[info.device_key] = True
        atomic_write_json(path, seen)
        return True
    except Exception:  # noqa: BLE001 - an offer must never break the command
        return False
