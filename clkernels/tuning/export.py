"""Turn tuning runs into the shipped database, and derive its default levels.

``export_device(info, out)`` copies this device's user entries into a shipped
file at level ``device``. ``derive_defaults(files, out)`` reads every shipped
device-level entry and writes, per (kernel, specialisation bucket, size bucket),
CLBlast-style defaults for the ``arch``, ``vendor_type`` and ``global`` levels: the
configuration with the smallest *sum of time-over-best* across the devices of
that group, among configurations timed on all of them (each entry keeps the
time of every candidate it timed). Run as::

    python -m clkernels.tuning.export tuning/device-*.json --out tuning/defaults.json
    python -m clkernels.tuning.export run1.json run2.json --merge --out tuning/device-x.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..devices import DeviceInfo
from .database import FORMAT, UserDB, atomic_write_json


def export_device(info: DeviceInfo, out: Path, user_root: Path | None = None) -> int:
    """Write this device's user entries to ``out`` as shipped ``device``-level entries."""
    entries = []
    for e in UserDB(info, user_root).load().values():
        if not isinstance(e, dict) or "params" not in e:
            continue
        entries.append({**e, "level": "device", "key": info.device_key,
                        "arch_key": info.arch_key, "vendor_type_key": info.vendor_type_key})
    atomic_write_json(out, {"format": FORMAT, "device": info.as_dict(), "entries": entries})
    return len(entries)


def _group_best(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Params minimising the sum over entries of time/best, among params timed everywhere."""
    tables = [e.get("times") or {} for e in entries]
    common = set(tables[0]).intersection(*tables[1:]) if tables else set()
    if not common:
        return None
    bests = [min(t.values()) for t in tables]
    score = {p: sum(t[p] / b for t, b in zip(tables, bests, strict=True)) for p in common}
    best = min(score, key=score.__getitem__)
    return {"params": json.loads(best), "score": score[best] / len(entries),
            "devices": [e.get("device_name") for e in entries]}


def derive_defaults(device_entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for e in device_entries:
        if e.get("level") != "device":
            continue
        # global defaults are per device type: a GPU's winner is no default for a CPU
        # (seen: the H100's RQA entry made PoCL 2.9x slower than its own heuristic)
        dtype = str(e.get("vendor_type_key") or "").rpartition("|")[2] or None
        base = (e["kernel"], e["version"], e["spec_bucket"], e["size_bucket"])
        groups[("arch", e.get("arch_key"), None, *base)].append(e)
        groups[("vendor_type", e.get("vendor_type_key"), None, *base)].append(e)
        groups[("global", "*", dtype, *base)].append(e)
    out = []
    for (level, key, dtype, kernel, ver, sb, zb), ents in sorted(groups.items(),
                                                               key=lambda kv: str(kv[0])):
        best = _group_best(ents)
        if best is None or key is None or (level == "global" and dtype is None):
            continue
        ent = {"kernel": kernel, "version": ver, "level": level, "key": key,
               "spec_bucket": sb, "size_bucket": zb, "params": best["params"],
               "mean_time_over_best": round(best["score"], 4), "from_devices": best["devices"]}
        if level == "global":
            ent["device_type"] = dtype
        out.append(ent)
    return out


def merge_device_files(files: list[Path], out: Path) -> int:
    """Merge runs of one device (e.g. one tuning call per family) into one shipped file.

    Later files win per (kernel, specialisation bucket, size bucket); entries of
    ``out`` itself (when it exists) come first, so a re-tune replaces what it re-timed.
    """
    runs = ([out] if out.exists() else []) + list(files)
    device: dict[str, Any] | None = None
    merged: dict[tuple, dict[str, Any]] = {}
    for f in runs:
        data = json.loads(f.read_text())
        device = data.get("device", device)
        e = data.get("entries", [])
        for ent in (e.values() if isinstance(e, dict) else e):
            merged[(ent["kernel"], ent["spec_bucket"], ent["size_bucket"])] = ent
    atomic_write_json(out, {"format": FORMAT, "device": device,
                            "entries": [merged[k] for k in sorted(merged)]})
    return len(merged)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="shipped device-level JSON files")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--merge", action="store_true",
                    help="merge the files (runs of ONE device) into --out instead of deriving defaults")
    a = ap.parse_args(argv)
    if a.merge:
        n = merge_device_files(a.files, a.out)
        print(f"{n} device entries -> {a.out}")
        return 0
    ents: list[dict[str, Any]] = []
    for f in a.files:
        data = json.loads(f.read_text())
        e = data.get("entries", [])
        ents.extend(e.values() if isinstance(e, dict) else e)
    derived = derive_defaults(ents)
    atomic_write_json(a.out, {"format": FORMAT, "entries": derived})
    print(f"{len(derived)} default entries from {len(ents)} device entries -> {a.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
