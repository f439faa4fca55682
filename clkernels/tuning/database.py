"""The tuning database: user entries first, then the shipped ones, then a heuristic.

Lookup order (CLBlast-style, docs/decisions/0021-tuning-database-levels.md):

1. user DB — one JSON file per device in the platformdirs user data dir
   (``<PREFIX>_TUNING_DIR`` overrides, :mod:`clkernels.settings`), written by the tuner;
2. shipped DB — ``tuning/*.json`` in the wheel, with entries at four levels:
   ``device`` (runtime + normalised name), ``arch``, ``vendor_type`` and ``global``;
   between ``device`` and ``arch``, a CPU takes the device entries of the nearest CPU
   class (:mod:`clkernels.cpuclass`: same runtime, vendor and SIMD width, then the
   closest core count), so an unseen CPU starts from a measured neighbour;
3. the kernel's heuristic from device limits.

An entry is used only if it was made for the kernel family's current version and, at
the device level, its driver matches; a stale or corrupted entry is skipped with a
warning, never an error. A missing entry never fails a computation.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from .. import settings
from ..cpuclass import CpuClass, cpu_class
from ..devices import DeviceInfo
from ..userdirs import atomic_write_text
from .space import Params, TuningSpace


class TunedFamily(Protocol):
    """What the database reads of a kernel family (:class:`clkernels.tuning.family.TunableKernel`
    satisfies it): entries are keyed by ``name`` and ``version`` and checked against
    ``space``. Declared here so the database needs nothing of the family module, which
    itself looks its parameters up here."""

    name: str
    space: TuningSpace

    @property
    def version(self) -> int: ...

    def entry_version(self, entry: dict[str, Any]) -> int | None: ...

FORMAT = 1
LEVELS = ("device", "arch", "vendor_type", "global")
#: the lookup order: the CPU-class step (nearest measured CPU) between device and arch
LOOKUP_ORDER = ("device", "cpu_class", "arch", "vendor_type", "global")
_warned: set[tuple[str, str]] = set()
#: how long a save waits for another process's save of the same file (seconds)
LOCK_TIMEOUT_S = 60.0


def warn_once(where: str, key: str, msg: str) -> None:
    """One RuntimeWarning per (file, entry key) per process: a bad entry read on every
    launch must not flood the terminal. ``key`` is ``""`` for the file as a whole."""
    if (where, key) not in _warned:
        _warned.add((where, key))
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def user_tuning_dir() -> Path:
    env = settings.env("TUNING_DIR")
    if env:
        return Path(env)
    return _platform_tuning_dir(settings.app_name())


@cache
def _platform_tuning_dir(app_name: str) -> Path:
    # resolved once: every launch's tuning lookup checks the user file's mtime
    from platformdirs import user_data_dir

    return Path(user_data_dir(app_name, appauthor=False)) / "tuning"


@cache
def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


@cache
def _user_file(root: Path, device_key: str) -> Path:
    """The user tuning file of ``device_key`` under ``root`` (:class:`UserDB`'s path):
    made once, as every launch's lookup asks for it."""
    return root / f"{_safe(device_key)}.json"


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True))


def db_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Any:
    """The inter-process lock guarding read-modify-write of the tuning file ``path``.

    A ``filelock.FileLock`` on ``<path>.lock``: the OS releases it when its holder dies,
    so a crashed tuner never blocks the next one.
    """
    from filelock import FileLock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock", timeout=timeout)


def entry_key(kernel: str, spec_bucket: str, size_bucket: str) -> str:
    return f"{kernel}/{spec_bucket}/{size_bucket}"


@dataclass
class Choice:
    """Parameters chosen for a launch and where they came from."""

    params: Params
    source: str  # "user", "shipped:device", "shipped:arch", ..., "heuristic"
    entry: dict[str, Any] | None = None


def _read_json(path: Path) -> dict[str, Any] | None:
    """The parsed file, or None (one warning) if it is unreadable, not JSON, truncated or
    of another format. A corrupted user file is rewritten by the next save."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"format is {data.get('format') if isinstance(data, dict) else '?'}, want {FORMAT}")
        if not isinstance(data.get("entries"), dict | list):
            raise ValueError("no 'entries'")
        return data
    except (OSError, ValueError, RecursionError) as exc:
        warn_once(str(path), "", f"ignoring corrupted tuning database {path}: {exc} "
                  "(the next tuning run rewrites it)")
        return None


class UserDB:
    """The per-user, per-device JSON file the tuner writes."""

    def __init__(self, info: DeviceInfo, root: Path | None = None):
        self.info = info
        self.root = root or user_tuning_dir()
        self.path = _user_file(self.root, info.device_key)

    def load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        data = _read_json(self.path)
        if data is None or not isinstance(data["entries"], dict):
            return {}
        return data["entries"]

    def put(self, key: str, entry: dict[str, Any]) -> bool:
        """Add or replace one entry; True once it is on disk.

        Read-modify-write under :func:`db_lock` and written atomically, so two tuners
        (processes or threads) saving at once both keep their entries, and a crash never
        leaves half a file. A corrupted file is replaced by a fresh one. If the file
        cannot be locked or written (read-only directory, lock held past
        ``LOCK_TIMEOUT_S``), the entry is dropped with a warning: a tuning database
        never breaks a run.
        """
        from filelock import Timeout

        try:
            with db_lock(self.path):
                entries = self.load()
                entries[key] = entry
                atomic_write_json(self.path, {"format": FORMAT, "device": self.info.as_dict(),
                                              "entries": entries})
            return True
        except (OSError, Timeout) as exc:
            warnings.warn(f"tuning entry {key} not saved to {self.path}: {exc}", RuntimeWarning,
                          stacklevel=2)
            return False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.load().get(key)


#: folders of shipped tuning files (``*.json``), added by the application that ships them
_SHIPPED_DIRS: list[Path] = []


def add_shipped_dir(path: str | Path) -> None:
    """Read the shipped tuning entries of ``path/*.json`` too (idempotent)."""
    global _shipped
    path = Path(path).resolve()
    if path not in _SHIPPED_DIRS:
        _SHIPPED_DIRS.append(path)
        _shipped = None
        _lookup_cache.clear()


def shipped_entries() -> list[dict[str, Any]]:
    """Every entry of the shipped tuning files (read once per process).

    An entry of a file with a ``device`` header that has no ``cpu_class`` of its own
    carries the header as ``device_facts``, from which its CPU class is computed.
    """
    global _shipped
    if _shipped is None:
        out: list[dict[str, Any]] = []
        for folder in _SHIPPED_DIRS:
            for f in sorted(folder.glob("*.json")):
                data = _read_json(f)
                if data is None:
                    continue
                ents = data["entries"]
                header = data.get("device")
                for e in (ents.values() if isinstance(ents, dict) else ents):
                    if isinstance(e, dict) and header is not None and "cpu_class" not in e:
                        e = {**e, "device_facts": header}
                    out.append(e)
        _shipped = out
    return _shipped


_shipped: list[dict[str, Any]] | None = None


def level_key(info: DeviceInfo, level: str) -> str:
    return {
        "device": info.device_key,
        "arch": info.arch_key,
        "vendor_type": info.vendor_type_key,
        "global": "*",
    }[level]


def make_entry(kernel: TunedFamily, info: DeviceInfo, spec_bucket: str, size_bucket: str,
               params: Params, time_s: float, default_params: Params, default_time_s: float,
               level: str = "device", **extra: Any) -> dict[str, Any]:
    return {
        "kernel": kernel.name,
        "version": kernel.version,
        "level": level,
        "key": level_key(info, level),
        "driver": info.driver_version,
        "device_name": info.name,
        "spec_bucket": spec_bucket,
        "size_bucket": size_bucket,
        "params": params,
        "time_s": time_s,
        "default_params": default_params,
        "default_time_s": default_time_s,
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **({"cpu_class": cls.as_dict(), "cpu_class_key": cls.key}
           if (cls := info.cpu_class) is not None else {}),
        **extra,
    }


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def malformed(entry: Any, kernel: TunedFamily, *, timed: bool = False) -> str | None:
    """Why ``entry`` is not a well-formed entry of ``kernel`` (None if it is).

    Checks structure and types, not staleness: ``params`` a dict with exactly the
    space's names, each value of its candidates' type (``32.0`` or ``True`` is no
    ``32``; a wrong type once crashed every later launch inside the template), string
    buckets, and with ``timed`` the times and default params :func:`tune` reuses.
    """
    if not isinstance(entry, dict):
        return f"an entry must be a JSON object, got {type(entry).__name__}"
    params = entry.get("params")
    if not isinstance(params, dict):
        return f"'params' must be an object, got {type(params).__name__}"
    problem = kernel.space.type_problem(params)
    if problem:
        return problem
    for f in ("spec_bucket", "size_bucket"):
        if f in entry and not isinstance(entry[f], str):
            return f"{f!r} must be a string, got {entry[f]!r}"
    if timed:
        for f in ("time_s", "default_time_s"):
            if not _is_real(entry.get(f)):
                return f"{f!r} must be a number, got {entry.get(f)!r}"
        dp = entry.get("default_params")
        if not isinstance(dp, dict) or kernel.space.type_problem(dp):
            return f"'default_params' malformed: {dp!r}"
    return None


def usable(entry: Any, kernel: TunedFamily, info: DeviceInfo, check_driver: bool,
           where: str, key: str | None = None, *, timed: bool = False,
           borrowed: bool = False) -> bool:
    """Whether ``entry`` (key ``key`` of file ``where``) may drive a launch on ``info``.

    Malformed, wrong-typed and stale (template, driver) entries are skipped with one
    warning per (file, key) per process, never an exception. ``borrowed``: the entry
    was measured on another device (the CPU-class step), so params invalid here are
    skipped silently, as for derived levels.
    """
    if key is None:
        key = (entry_key(str(entry.get("kernel")), str(entry.get("spec_bucket")),
                         str(entry.get("size_bucket"))) if isinstance(entry, dict) else "?")
    why = malformed(entry, kernel, timed=timed)
    if why is not None:
        warn_once(where, key, f"ignoring malformed tuning entry {key!r} in {where}: {why}")
        return False
    made_for = kernel.entry_version(entry)
    if made_for != kernel.version:
        warn_once(where, key,
                  f"ignoring stale tuning entry {key!r} in {where}: made for {kernel.name} "
                  f"version {made_for if made_for is not None else '?'}, current is "
                  f"{kernel.version}")
        return False
    if check_driver and entry.get("driver") != info.driver_version:
        warn_once(where, key,
                  f"ignoring stale tuning entry {key!r} in {where}: made with driver "
                  f"{entry.get('driver')!r}, this device has {info.driver_version!r}")
        return False
    if not kernel.space.valid(entry["params"], info):
        # derived defaults (arch / vendor+type / global) span devices of other limits,
        # e.g. a CPU winner in the global default: skipping them is expected, not news
        if not borrowed and entry.get("level") in (None, "device", "user"):
            warn_once(where, key, f"ignoring tuning entry {key!r} in {where}: params "
                      f"{entry['params']} are not valid on {info.name}")
        return False
    return True


#: an entry tuned for a size more than this factor away is not used: measured on the
#: H200, a k-NN configuration tuned at L=32,768 ran exact Simplex at L=2^20 in 4.8 s
#: where the device heuristic took 2.3 s.
MAX_SIZE_RATIO = 16.0


def _size_log_distance(a: str, b: str) -> float:
    """|log2(size a / size b)| for ``n<size>`` buckets (0 for equal non-numeric buckets)."""
    try:
        return abs(math.log2(max(float(a.lstrip("n")), 1.0) / max(float(b.lstrip("n")), 1.0)))
    except ValueError:
        return 0.0 if a == b else float("inf")


def _best_match(cands: list[dict[str, Any]], spec_bucket: str, size_bucket: str) -> dict[str, Any] | None:
    """Exact spec bucket required; the nearest problem-size bucket within MAX_SIZE_RATIO wins."""
    limit = math.log2(MAX_SIZE_RATIO)
    same_spec = [e for e in cands if e.get("spec_bucket") in (spec_bucket, "*")
                 and _size_log_distance(str(e.get("size_bucket")), size_bucket) <= limit]
    if not same_spec:
        return None
    return min(same_spec, key=lambda e: (e.get("spec_bucket") == "*",
                                         _size_log_distance(str(e.get("size_bucket")), size_bucket)))


_lookup_cache: dict[tuple, tuple[int, Choice]] = {}


def lookup(kernel: TunedFamily, info: DeviceInfo, spec_bucket: str, size_bucket: str,
           user_root: Path | None = None) -> Choice:
    """Parameters for one launch: user DB -> shipped (device, arch, vendor+type, global) -> heuristic.

    The global level holds one default per device type (CPU, GPU): it never hands a
    GPU's winner to a CPU or the other way round.

    Cached per process; a change of the user DB file (its mtime) invalidates the cache.
    """
    path = _user_file(user_root or user_tuning_dir(), info.device_key)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = -1
    ck = (kernel.name, kernel.version, info.fingerprint, spec_bucket, size_bucket, path)
    cached = _lookup_cache.get(ck)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    choice = _lookup_uncached(kernel, info, spec_bucket, size_bucket, UserDB(info, user_root))
    _lookup_cache[ck] = (stamp, choice)
    return choice


def _lookup_uncached(kernel: TunedFamily, info: DeviceInfo, spec_bucket: str, size_bucket: str,
                     udb: UserDB) -> Choice:
    user = []
    for k, e in udb.load().items():
        mine = (e.get("kernel") == kernel.name if isinstance(e, dict)
                else str(k).startswith(kernel.name + "/"))
        if mine and usable(e, kernel, info, True, str(udb.path), str(k)):
            user.append(e)
    hit = _best_match(user, spec_bucket, size_bucket)
    if hit is not None:
        return Choice(kernel.space.complete(hit["params"]), "user", hit)
    shipped = [e for e in shipped_entries() if isinstance(e, dict) and e.get("kernel") == kernel.name]
    for level in LEVELS:
        key = level_key(info, level)
        cands = [e for e in shipped if e.get("level") == level and e.get("key") == key
                 and (level != "global" or e.get("device_type") == info.device_type)
                 and (level != "device" or same_cpu(e, info))]
        cands = [e for e in cands if usable(e, kernel, info, False, f"shipped tuning/ ({level})")]
        hit = _best_match(cands, spec_bucket, size_bucket)
        if hit is not None:
            return Choice(kernel.space.complete(hit["params"]), f"shipped:{level}", hit)
        if level == "device":
            hit = _nearest_class_match(kernel, info, shipped, spec_bucket, size_bucket)
            if hit is not None:
                return Choice(kernel.space.complete(hit["params"]), "shipped:cpu_class", hit)
    return Choice(kernel.space.default(info), "heuristic")


def entry_cpu_class(entry: dict[str, Any], where: str) -> CpuClass | None:
    """The CPU class ``entry`` was measured on: its stored ``cpu_class``, else the class of
    its file's ``device`` header; None for a non-CPU or unknown device. Malformed class
    data is skipped with one warning."""
    key = entry_key(str(entry.get("kernel")), str(entry.get("spec_bucket")),
                    str(entry.get("size_bucket")))
    try:
        if "cpu_class" in entry:
            return CpuClass.from_dict(entry["cpu_class"])
        facts = entry.get("device_facts")
        return None if facts is None else cpu_class(facts)
    except ValueError as exc:
        warn_once(where, key + "#cpu_class",
                  f"ignoring the CPU class of tuning entry {key!r} in {where}: {exc}")
        return None


def same_cpu(entry: dict[str, Any], info: DeviceInfo) -> bool:
    """Whether a shipped ``device`` entry of this device's key was measured on this very
    CPU. A CPU's device key is its runtime and name, and a cloud VM names several CPUs
    alike ("AMD EPYC" for a Zen 4 and a Zen 5): where both microarchitecture families
    are known and differ, the entry is another CPU's, which the CPU-class step may still
    borrow (measured: the Zen 5's RQA line parameters ran 2.1x slower on a Zen 4 than its
    own). Devices that are no CPU, and entries or devices of unknown family, match."""
    if info.device_type != "cpu":
        return True
    try:
        mine = info.cpu_class
    except ValueError:
        return True
    theirs = entry_cpu_class(entry, "shipped tuning/ (device)")
    if mine is None or theirs is None or not mine.family or not theirs.family:
        return True
    return mine.family == theirs.family


def _nearest_class_match(kernel: TunedFamily, info: DeviceInfo, shipped: list[dict[str, Any]],
                         spec_bucket: str, size_bucket: str) -> dict[str, Any] | None:
    """The device entry of the nearest CPU class that has this problem (see
    :meth:`CpuClass.distance`); None for a device that is no CPU or has no neighbour."""
    try:
        mine = info.cpu_class
    except ValueError:
        return None
    if mine is None:
        return None
    where = "shipped tuning/ (cpu_class)"
    # one group per measured CPU (device key + class: one name can cover core counts)
    groups: dict[tuple[tuple, str, str], list[dict[str, Any]]] = {}
    for e in shipped:
        if e.get("level") != "device" or (e.get("key") == info.device_key and same_cpu(e, info)):
            continue
        theirs = entry_cpu_class(e, where)
        dist = None if theirs is None else mine.distance(theirs)
        if dist is None:
            continue
        groups.setdefault((dist, str(e.get("key")), theirs.key), []).append(e)
    for g in sorted(groups):
        cands = [e for e in groups[g] if usable(e, kernel, info, False, where, borrowed=True)]
        hit = _best_match(cands, spec_bucket, size_bucket)
        if hit is not None:
            return hit
    return None


def has_class_tuning(info: DeviceInfo) -> bool:
    """Whether tuning entries measured on this device or, for a CPU, on a CPU of its class
    exist: the user database, shipped ``device`` entries of this device, or shipped device
    entries the CPU-class step can borrow (:meth:`CpuClass.distance` not None). Devices
    that are no CPU answer True: the question is whether a first-use tune is worth
    offering, and GPUs are tuned by their own names."""
    if info.device_type != "cpu":
        return True
    if UserDB(info).load():
        return True
    shipped = [e for e in shipped_entries() if e.get("level") == "device"]
    if any(e.get("key") == info.device_key for e in shipped):
        return True
    try:
        mine = info.cpu_class
    except ValueError:
        return False
    if mine is None:
        return False
    where = "shipped tuning/ (cpu_class)"
    return any((c := entry_cpu_class(e, where)) is not None and mine.distance(c) is not None
               for e in shipped)
