"""The autotuner: time every candidate configuration, verify it, keep the fastest.

For one (kernel, device, specialisation, problem size):

* the reference configuration (the kernel's heuristic default) runs first and
  its output is the reference every candidate must reproduce (within the case's
  tolerance; integer outputs exactly) — a fast wrong candidate is rejected. The
  check runs on a small ragged instance (``kernel.verify_size``, default 1531
  points) so verifying costs little even when timing a large one;
* each candidate is built, run once as warm-up (never timed: it includes lazy
  compilation and first-touch costs), then timed ``repeats`` times with profiling
  events; its time is the minimum over repeats of the summed event times (a first
  timed run over :data:`HOPELESS` times the best so far is the only one);
* progress is saved after every candidate in a partial file next to the user
  DB, so an interrupted tuning run resumes where it stopped;
* the winner is written to the user DB (atomically). A later call finds it and
  returns without re-timing unless ``force=True``.

``mode="brute"`` (default) times every candidate; ``mode="random"`` times a
random order until ``budget_s`` seconds have passed (the reference always runs).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends import Backend, BuildError
from .database import UserDB, atomic_write_json, entry_key, make_entry, usable
from .family import TunableKernel
from .space import Params


@dataclass
class TuneResult:
    kernel: str
    device: str
    spec_bucket: str
    size_bucket: str
    best_params: Params
    best_time_s: float
    default_params: Params
    default_time_s: float
    timed: int = 0
    rejected: list[tuple[Params, str]] = field(default_factory=list)
    from_db: bool = False

    @property
    def speedup(self) -> float:
        return self.default_time_s / self.best_time_s if self.best_time_s > 0 else float("nan")


def _pkey(p: Params) -> str:
    return json.dumps(p, sort_keys=True)


def _today(kernel: TunableKernel, key: str, info: Any) -> bool:
    """Whether a partial file's candidate ``key`` (:func:`_pkey`) is one of the space's
    today (a valid point; a malformed key is not)."""
    try:
        return kernel.space.valid(json.loads(key), info)
    except (ValueError, RecursionError):
        return False


#: a candidate whose first timed run is this many times slower than the best so far is
#: timed once, not ``repeats`` times: it cannot win (run-to-run noise is far below 3x),
#: and on a GPU one such configuration of RQA at N = 10^6 took minutes a run
HOPELESS = 3.0


def time_config(case: Any, backend: Backend, params: Params, repeats: int,
                best_so_far: float = math.inf) -> float:
    """Minimum over ``repeats`` of the summed profiled time of one run (warm-up excluded);
    a first run slower than :data:`HOPELESS` times ``best_so_far`` is the only one."""
    for ev in case.run(params):  # warm-up
        backend.wait(ev)
    best = math.inf
    for _ in range(repeats):
        evs = case.run(params)
        best = min(best, sum(backend.event_seconds(e) for e in evs))
        if best > HOPELESS * best_so_far:
            break
    return best


def tune(kernel: TunableKernel, backend: Backend, spec: dict[str, Any], size: int, *,
         mode: str = "brute", budget_s: float | None = None, repeats: int = 5,
         force: bool = False, seed: int = 0, user_root: Path | None = None,
         progress: Callable[[int, int | None], None] | None = None) -> TuneResult:
    """Tune ``kernel`` for one specialisation and size on ``backend``'s device. ``progress(i,
    total)``: before candidate ``i`` (``total`` None in random mode, whose candidates are drawn
    until the budget ends)."""
    if mode not in ("brute", "random"):
        raise ValueError(f"mode={mode!r} must be 'brute' or 'random'")
    info = backend.info
    sb, zb = kernel.spec_bucket(spec), kernel.size_bucket(size)
    key = entry_key(kernel.name, sb, zb)
    udb = UserDB(info, user_root)
    if not force:
        hit = udb.get(key)
        if hit is not None and usable(hit, kernel, info, True, str(udb.path), key, timed=True):
            return TuneResult(kernel.name, info.name, sb, zb, hit["params"], hit["time_s"],
                              hit["default_params"], hit["default_time_s"], 0, [], True)

    partial_path = udb.root / "partial" / f"{udb.path.stem}__{key.replace('/', '__')}.json"
    done: dict[str, Any] = {}
    if partial_path.exists() and not force:
        try:
            data = json.loads(partial_path.read_text())
            if data.get("version") == kernel.version:
                done = data.get("done", {})
            # a hand-edited or foreign partial file: keep only well-formed results
            done = {k: v for k, v in done.items() if isinstance(v, str) or
                    (isinstance(v, float) and math.isfinite(v))} if isinstance(done, dict) else {}
        except (OSError, ValueError, AttributeError, RecursionError):
            done = {}

    case = kernel.case(backend, spec, size)
    # Correctness is checked on a small, deliberately ragged problem (cheap to copy
    # back and compare, and it exercises partial work-groups); speed on the real size.
    check = kernel.case(backend, spec, min(size, kernel.verify_size)) if size > kernel.verify_size else case
    default = kernel.spec_default(spec, info)
    # random: drawn lazily until the budget ends (no enumeration of the whole space);
    # brute: every candidate, counted for the progress bar
    drawn = kernel.space.shuffled(info, seed) if mode == "random" else \
        kernel.space.candidates(info)
    cands = itertools.chain([default], (c for c in drawn if c != default))
    total = None if mode == "random" else len(drawn)
    # results of today's candidates only
    done = {k: v for k, v in done.items() if _today(kernel, k, info)}

    for ev in check.run(default):
        backend.wait(ev)
    reference = check.output()

    rejected: list[tuple[Params, str]] = []
    t_start = time.perf_counter()
    timed = 0
    seen = 0
    for i, p in enumerate(cands):
        seen = i + 1
        if progress:
            progress(i, total)
        pk = _pkey(p)
        if pk in done:
            if isinstance(done[pk], str):
                rejected.append((p, done[pk]))
            continue
        if mode == "random" and budget_s is not None and i > 0 and time.perf_counter() - t_start > budget_s:
            break
        try:
            for ev in check.run(p):
                backend.wait(ev)
            if not check.matches(check.output(), reference):
                done[pk] = "output differs from the reference configuration"
            else:
                fastest = min((v for v in done.values() if isinstance(v, float)),
                              default=math.inf)
                done[pk] = time_config(case, backend, p, repeats, fastest)
                timed += 1
        except (BuildError, Exception) as exc:  # a candidate that fails is skipped, not fatal
            first = (str(exc).splitlines() or [""])[0][:200]  # (an assert has no message)
            done[pk] = f"failed: {type(exc).__name__}: {first}"
        if isinstance(done[pk], str):
            rejected.append((p, done[pk]))
        atomic_write_json(partial_path, {"version": kernel.version, "done": done})
    if progress:
        progress(seen, total)

    times = {k: v for k, v in done.items() if isinstance(v, float)}
    if _pkey(default) not in times:
        raise RuntimeError(f"the default configuration of {kernel.name} failed on {info.name}: "
                           f"{done.get(_pkey(default))}")
    best_k = min(times, key=times.__getitem__)
    best = json.loads(best_k)
    entry = make_entry(kernel, info, sb, zb, best, times[best_k], default, times[_pkey(default)],
                       size=size, spec=spec, mode=mode, candidates=seen, timed=len(times),
                       times=times)
    udb.put(key, entry)
    try:
        partial_path.unlink()
    except OSError:
        pass
    return TuneResult(kernel.name, info.name, sb, zb, best, times[best_k], default,
                      times[_pkey(default)], timed, rejected, False)
