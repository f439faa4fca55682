"""``pyedmcl devices``: every platform and device, fingerprints, and the default."""

from __future__ import annotations

import argparse
import os


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list OpenCL platforms/devices and the default")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clkernels.devices import (
        DeviceUnusableError,
        default_device,
        list_devices,
        select_device,
        usable,
    )

    from .args import print_json

    devs = list_devices()
    verdicts = {d: usable(d) for d in devs}  # each device's probe build (cached on disk)
    env = os.environ.get("PYEDMCL_DEVICE") or os.environ.get("PYOPENCL_CTX")
    try:
        default, why = default_device(devs)
        chosen = select_device()
    except DeviceUnusableError as exc:
        chosen, why = None, str(exc)
    if env and chosen:
        why = f"PYEDMCL_DEVICE/PYOPENCL_CTX={env!r}"
    if args.json:
        print_json({"devices": [{**d.as_dict(), "builds": verdicts[d].ok,
                                 "probe_failure": verdicts[d].reason if not verdicts[d].ok else None}
                                for d in devs],
                    "default": chosen.selector if chosen else None, "reason": why})
        return 0 if chosen else 1
    print(f"{'sel':<5} {'runtime':<9} {'type':<5} {'CUs':>4} {'MHz':>5} {'local':>7} {'maxWG':>6} "
          f"{'fp64':<4} {'builds':<6}  device / fingerprint")
    for d in devs:
        mark = "*" if chosen and d == chosen else " "
        v = verdicts[d]
        print(f"{mark}{d.selector:<4} {d.runtime:<9} {d.device_type:<5} {d.compute_units:>4} "
              f"{d.clock_mhz:>5} {d.local_mem_bytes // 1024:>6}K {d.max_work_group_size:>6} "
              f"{'yes' if d.fp64 else 'no':<4} {'yes' if v.ok else 'NO':<6}  "
              f"{d.name} [{d.platform_name}]")
        print(f"{'':<51}{d.fingerprint}")
        if not v.ok:
            print(f"{'':<51}probe failed: {v.reason}")
    if chosen:
        print(f"\ndefault (*): {chosen.selector} {chosen.runtime} {chosen.name} — {why}")
        return 0
    print(f"\n{why}")
    return 1
