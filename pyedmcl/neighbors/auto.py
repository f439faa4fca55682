"""``auto``: pick the neighbour back-end from (L, E, device) by measured crossovers.

Where the choice comes from, first hit wins:

1. the user tuning DB of this device — entries of family ``knn_backend``
   written by ``pyedmcl tune knn_backend`` (one per E bucket x library-size
   bucket: the fastest back-end whose Simplex MAPE on Lorenz-63 stays within 1%
   of exact), plus the recall each candidate reached;
2. the shipped model ``tuning/knn_backend_default.json`` (same entry format,
   ``{"format": 1, "entries": [...]}``), at the levels ``device`` -> ``arch`` ->
   ``vendor_type`` -> ``global`` (global entries apply only to devices of the
   entry's ``device_type``);
3. a rule of thumb (``source="heuristic"``, from the PoCL CPU bench): on a GPU
   the exact kernel; on a CPU exact for short series (L <= 1024, or 2048 for
   E > 8), then the k-d tree for E <= 8 and IVF above (CCM: never IVF).

Within a level the entry nearest in ``(log2 L, log2 E)`` wins (E weighs double:
the crossovers move more with E than with L).

Shapes: an entry's ``spec.shape`` says which workload it timed (absent:
``"simplex"``, one library, every point a query). ``"ccm"`` entries time CCM with
each exact back-end and store a cost line per back-end (``cost``: seconds fixed +
seconds per sampled library: the exact kernel's sorted full-library rows are built
once, a k-d tree once per library); ``auto`` for CCM predicts both at the call's
library count and takes the cheaper, so it only ever chooses an exact back-end.
A level without entries of the asked shape is skipped. A choice whose library is not
installed (faiss) falls back to the fastest installed back-end the entry timed.

An approximate back-end (IVF, HNSW) must be clearly faster to be chosen: where an
exact one (the k-d tree, the OpenCL kernel) timed within ``EXACT_MARGIN`` of it,
the exact one is used (recall 1 for the same speed). Measured on the 2-core PoCL
CPU: where IVF and the k-d tree are within ~10% in the model, the two trade
places between runs by up to 30% (IVF's time varies most), so a bare "fastest in
the model run" pick missed the fastest back-end of a later run by up to 1.3x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from clkernels.devices import DeviceInfo
from clkernels.tuning import TunableKernel, TuningCase, TuningSpace
from clkernels.tuning.database import LEVELS, UserDB, level_key, shipped_entries, warn_once

from .base import BACKENDS

FAMILY = "knn_backend"
#: bump when the meaning of an entry changes (stale entries are then ignored)
MODEL_VERSION = 1
#: the quality bound a back-end must meet to be chosen: Simplex MAPE <= (1 + this) x exact
MAPE_BOUND = 0.01
#: an approximate back-end is chosen only if every exact one timed slower by more than this
EXACT_MARGIN = 1.15
EXACT = ("exact", "kdtree")


def e_bucket(E: int) -> str:
    for hi in (1, 2, 4, 8, 16, 32):
        if E <= hi:
            return f"E{hi}"
    return "E32+"


@cache
def available(name: str) -> bool:
    """Whether the library behind a back-end is importable."""
    try:
        if name in ("ivf", "hnsw"):
            import faiss  # noqa: F401
        elif name == "kdtree":
            import scipy.spatial  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class AutoChoice:
    backend: str
    expected_recall: float
    source: str
    entry: dict[str, Any] | None = None


SHAPES = ("simplex", "ccm")


def heuristic(info: DeviceInfo, L: int, E: int, shape: str = "simplex") -> str:
    """Rule of thumb when nothing was measured (kEDM paper's findings, our exact kernel)."""
    if info.is_gpu:
        return "exact"
    if L <= (1024 if E <= 8 else 2048):
        return "exact"
    if shape == "ccm":
        return "kdtree" if E <= 8 and available("kdtree") else "exact"
    if E > 8 and available("ivf"):
        return "ivf"
    return "kdtree" if available("kdtree") else "exact"


def _entry_LE(e: dict[str, Any]) -> tuple[float, float] | None:
    """The entry's (L, E), both finite and >= 1, or None."""
    try:
        L = float(e.get("size") or str(e["size_bucket"]).lstrip("n"))
        E = float((e.get("spec") or {}).get("E") or str(e["spec_bucket"]).lstrip("E").rstrip("+"))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if not (math.isfinite(L) and math.isfinite(E) and L >= 1 and E >= 1):
        return None
    return L, E


def entry_shape(e: dict[str, Any]) -> Any:
    """The workload an entry timed: ``spec.shape``, ``"simplex"`` when absent."""
    spec = e.get("spec")
    return spec.get("shape", "simplex") if isinstance(spec, dict) else "simplex"


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _problem(e: dict[str, Any]) -> str | None:
    """Why an entry of family ``knn_backend`` cannot be used (None if it can)."""
    if KNN_BACKEND.entry_version(e) != MODEL_VERSION:
        return f"stale: made by model version {e.get('version')!r}, current is {MODEL_VERSION}"
    params = e.get("params")
    if not isinstance(params, dict) or params.get("BACKEND") not in BACKENDS:
        return f"'params' must name a back-end of {list(BACKENDS)}, got {params!r}"
    if _entry_LE(e) is None:
        return "its library size / E is missing or not a number >= 1"
    if entry_shape(e) not in SHAPES:
        return f"spec 'shape' must be one of {list(SHAPES)}, got {entry_shape(e)!r}"
    cost = e.get("cost")
    if cost is not None and not (isinstance(cost, dict) and all(
            isinstance(k, str) and isinstance(v, list) and len(v) == 2
            and all(_is_num(t) and t >= 0 for t in v) for k, v in cost.items())):
        return f"'cost' must map back-end names to [fixed s, s per library] >= 0, got {cost!r}"
    if entry_shape(e) == "ccm" and not cost:
        return "a 'ccm' entry needs 'cost'"
    for f, check in (("times", _is_num), ("recall", _is_num), ("meets_bound", lambda v: isinstance(v, bool))):
        v = e.get(f)
        if v is None:
            continue
        if not isinstance(v, dict) or not all(isinstance(k, str) and check(x) for k, x in v.items()):
            return f"{f!r} must map back-end names to {'true/false' if f == 'meets_bound' else 'numbers'}, got {v!r}"
    return None


def _ours(e: Any, where: str = "", key: str | None = None) -> bool:
    """A usable ``knn_backend`` entry; a malformed or stale one is skipped with one warning."""
    if not (isinstance(e, dict) and e.get("kernel") == FAMILY):
        return False
    why = _problem(e)
    if why is None:
        return True
    key = key or f"{FAMILY}/{e.get('spec_bucket')}/{e.get('size_bucket')}"
    warn_once(where, key, f"ignoring {FAMILY} tuning entry {key!r} in {where}: {why}")
    return False


def _nearest(cands: list[dict[str, Any]], L: int, E: int) -> dict[str, Any] | None:
    if not cands:
        return None

    def dist(e):
        Le, Ee = _entry_LE(e)
        return abs(math.log2(max(L, 1)) - math.log2(Le)) + 2 * abs(math.log2(E) - math.log2(Ee))
    return min(cands, key=dist)


def _recall_of(entry: dict[str, Any], name: str) -> float:
    r = (entry.get("recall") or {}).get(name)
    return float(r) if r is not None else float("nan")


def _pick(entry: dict[str, Any]) -> str | None:
    """The entry's winner, or the fastest installed back-end it timed that met the bound;
    an exact back-end within EXACT_MARGIN of an approximate winner replaces it."""
    times = entry.get("times") or {}
    ok = entry.get("meets_bound") or {}
    best = entry["params"]["BACKEND"]
    if not available(best):
        alts = [b for b in sorted(times, key=times.get)
                if available(b) and ok.get(b, b in EXACT)]
        if not alts:
            return None
        best = alts[0]
    if best not in EXACT and best in times:
        near = [b for b in sorted(times, key=times.get)
                if b in EXACT and available(b) and times[b] <= EXACT_MARGIN * times[best]]
        if near:
            return near[0]
    return best


def _pick_cost(entry: dict[str, Any], libraries: int) -> str | None:
    """The installed exact back-end with the smallest predicted time at ``libraries``
    libraries (a cost line of an approximate one is never used: CCM's ``auto`` is exact)."""
    cost = {b: v for b, v in entry["cost"].items() if b in EXACT and available(b)}
    if not cost:
        return None
    return min(cost, key=lambda b: (cost[b][0] + cost[b][1] * max(libraries, 1), b != "exact"))


def candidates(info: DeviceInfo) -> list[tuple[str, list[dict[str, Any]]]]:
    """Entry sets in lookup order: ("user", [...]), ("shipped:device", [...]), ..."""
    out = []
    udb = UserDB(info)
    user = [e for k, e in udb.load().items() if _ours(e, str(udb.path), str(k))]
    out.append(("user", user))
    shipped = [e for e in shipped_entries() if _ours(e, "shipped tuning/")]
    for level in LEVELS:
        key = level_key(info, level)
        es = [e for e in shipped if e.get("level") == level and e.get("key") == key]
        if level == "global":
            es = [e for e in es if e.get("device_type", info.device_type) == info.device_type]
        out.append((f"shipped:{level}", es))
    return out


def choose(info: DeviceInfo, *, L: int, E: int, nq: int | None = None, k: int | None = None,
           shape: str = "simplex", libraries: int = 1) -> AutoChoice:
    """The back-end ``auto`` uses for a library of ``L`` points in dimension ``E``.

    ``shape`` names the workload (``"simplex"``: one library; ``"ccm"``: ``libraries``
    sampled libraries of up to ``L`` points, every row a query); only entries that timed
    that shape are read.
    """
    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not supported; allowed: {', '.join(SHAPES)}")
    for source, es in candidates(info):
        hit = _nearest([e for e in es if entry_shape(e) == shape], L, E)
        if hit is None:
            continue
        name = _pick_cost(hit, libraries) if shape == "ccm" else _pick(hit)
        if name is None:
            continue
        rec = 1.0 if name in ("exact", "kdtree") else _recall_of(hit, name)
        if source == "user" and name not in ("exact", "kdtree"):
            rec = user_recalls(info).get((hit.get("spec_bucket"), hit.get("size_bucket"), name), rec)
        return AutoChoice(name, rec, source, hit)
    name = heuristic(info, L, E, shape)
    return AutoChoice(name, 1.0 if name in ("exact", "kdtree") else float("nan"), "heuristic")


def expected_recall(info: DeviceInfo, name: str, *, L: int, E: int) -> float:
    """Recall measured for back-end ``name`` (default settings) nearest to (L, E); NaN if never."""
    if name in ("exact", "kdtree"):
        return 1.0
    user = user_recalls(info)
    for source, es in candidates(info):
        es = [e for e in es if entry_shape(e) == "simplex"
              and (source == "user" or name in (e.get("recall") or {}))]
        hit = _nearest(es, L, E)
        if hit is None:
            continue
        if source == "user":
            r = user.get((hit.get("spec_bucket"), hit.get("size_bucket"), name))
            if r is None:
                continue
            return float(r)
        return _recall_of(hit, name)
    return float("nan")


# --- ``pyedmcl tune knn_backend``: measure the crossovers on this device ------------------

class HostEvent:
    """A finished host-side timing that quacks like an OpenCL/SYCL profiling event."""

    class _P:
        def __init__(self, ns: int):
            self.start, self.end = 0, ns

    def __init__(self, seconds: float):
        ns = int(seconds * 1e9)
        self.profile = self._P(ns)
        self.profiling_info_start, self.profiling_info_end = 0, ns

    def wait(self) -> None:
        pass


def _installed(p: dict[str, Any], info: DeviceInfo) -> bool:
    return available(p["BACKEND"])


class KnnBackendFamily(TunableKernel):
    """Tuning family ``knn_backend``: which neighbour back-end, per (E bucket, L bucket).

    A candidate is accepted when Simplex (Tp=1, leave-one-out) on Lorenz-63 with
    its k-NN table has MAPE within ``MAPE_BOUND`` of the exact table's; the
    fastest accepted one (wall time of building + querying, table on the device)
    is stored. Each candidate's recall and time are stored alongside
    (``knn_backend_recall/...`` entries) for ``auto``'s reports.
    """

    name = FAMILY
    template = "knn/knn.cl.mako"  # what the 'exact' candidate runs (shown by `tune --list`)
    space = TuningSpace(params={"BACKEND": BACKENDS}, heuristic=lambda info: {"BACKEND": "exact"},
                        constraint=_installed)

    legacy_hashes = frozenset({"knn_backend-v1"})

    @property
    def version(self) -> int:  # entries depend on the selection model, not on one template
        return MODEL_VERSION

    def spec_bucket(self, spec: dict[str, Any]) -> str:
        return e_bucket(int(spec["E"]))

    def default_specs(self):
        return [{"E": 1}, {"E": 20}]

    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        if quick:
            return [4096]
        if info.is_gpu:
            return [1 << p for p in range(12, 19, 2)]
        return [1 << p for p in range(10, 15, 2)]

    def case(self, backend: Any, spec: dict[str, Any], size: int) -> TuningCase:
        return _BackendCase(backend, spec, size)


KNN_BACKEND = KnnBackendFamily()


class _BackendCase(TuningCase):
    def __init__(self, be: Any, spec: dict[str, Any], size: int):
        from .lorenz import lorenz63
        from .recall import mape, simplex_host

        self.be, self.E = be, int(spec["E"])
        self.k = self.E + 1
        n = size + self.E  # L library points with a target one step ahead
        self.y = lorenz63(n)
        self.x_dev = be.to_device(self.y.astype(np.float32))
        self.n = n
        npts = n - (self.E - 1)
        self.pts = np.arange(npts - 1, dtype=np.int32)  # point p predicts y[p + E - 1 + 1]
        self.shift = self.E
        self.obs = self.y[self.pts + self.shift]
        self._mape, self._simplex = mape, simplex_host
        self.ref_idx, ref_dist = self._table("exact")
        self.ref_mape = mape(simplex_host(self.ref_idx, ref_dist, self.y, self.shift), self.obs)
        self.last: tuple[str, float, float] | None = None

    def _table(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        from . import neighbor_backend

        t = neighbor_backend(name).device_table(self.be, self.x_dev, self.n, E=self.E, tau=1,
                                                k=self.k, qpts=self.pts, lpts=self.pts, radius=0)
        self.be.finish()
        return self.be.to_host(t.idx)[0], self.be.to_host(t.dist)[0]

    def run(self, params: dict[str, Any]) -> list[Any]:
        import time

        t0 = time.perf_counter()
        idx, dist = self._table(params["BACKEND"])
        sec = time.perf_counter() - t0
        self._last_table = (params["BACKEND"], idx, dist, sec)
        return [HostEvent(sec)]

    def output(self) -> np.ndarray:
        from .recall import recall

        name, idx, dist, sec = self._last_table
        m = self._mape(self._simplex(idx, dist, self.y, self.shift), self.obs)
        rel = m / self.ref_mape if self.ref_mape > 0 else 1.0
        rec = recall(idx, self.ref_idx)
        ok = rel <= 1.0 + MAPE_BOUND
        self.last = (name, rec, rel)
        zb = KNN_BACKEND.size_bucket(self.pts.size)
        UserDB(self.be.info).put(f"{FAMILY}_recall/{e_bucket(self.E)}/{zb}/{name}", {
            "kernel": f"{FAMILY}_recall", "backend": name, "recall": rec, "relative_mape": rel,
            "time_s": sec, "size": int(self.pts.size), "spec": {"E": self.E}})
        return np.array([1 if ok else 0], np.int32)


def user_recalls(info: DeviceInfo) -> dict[tuple[str, str, str], float]:
    """Recall per (E bucket, size bucket, back-end) measured by ``pyedmcl tune knn_backend``."""
    out = {}
    udb = UserDB(info)
    for key, e in udb.load().items():
        if not str(key).startswith(f"{FAMILY}_recall/"):
            continue
        parts = str(key).split("/")
        rec = e.get("recall") if isinstance(e, dict) else None
        if len(parts) != 4 or not _is_num(rec) or not 0 <= rec <= 1:
            warn_once(str(udb.path), str(key), f"ignoring malformed tuning entry {key!r} in "
                      f"{udb.path}: want key {FAMILY}_recall/<E bucket>/<size bucket>/<back-end> "
                      "and a 'recall' in [0, 1]")
            continue
        out[(parts[1], parts[2], parts[3])] = float(rec)
    return out
