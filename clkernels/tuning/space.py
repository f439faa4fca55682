"""What a kernel may be tuned over (:class:`TuningSpace`), and how one problem
instance is run (:class:`TuningCase`) so the tuner can check every candidate's
output against the reference configuration's."""

from __future__ import annotations

import abc
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..devices import DeviceInfo

Params = dict[str, Any]


@dataclass
class TuningSpace:
    """Candidate values per parameter, restricted by a device-aware constraint."""

    params: dict[str, tuple[Any, ...]]
    heuristic: Callable[[DeviceInfo], Params]
    constraint: Callable[[Params, DeviceInfo], bool] = field(default=lambda p, d: True)
    #: parameters added after entries were written, each with the value that renders the
    #: code those entries measured: an entry without one reads as having that value
    #: (kept valid, no re-tune and no rewrite of anyone's tuning files)
    filled: dict[str, Any] = field(default_factory=dict)

    def complete(self, params: Params) -> Params:
        """``params`` with the :attr:`filled` values it lacks."""
        return {**{k: v for k, v in self.filled.items() if k not in params}, **params}

    def candidates(self, info: DeviceInfo) -> list[Params]:
        names = list(self.params)
        out = []
        for values in itertools.product(*(self.params[n] for n in names)):
            p = dict(zip(names, values, strict=True))
            if self.constraint(p, info):
                out.append(p)
        return out

    def size(self) -> int:
        """Points of the product of the values (before the constraint)."""
        return math.prod(len(v) for v in self.params.values())

    def at(self, index: int) -> Params:
        """Point ``index`` of the product, in :meth:`candidates`' order (the last name
        varies fastest)."""
        out = {}
        for name in reversed(list(self.params)):
            values = self.params[name]
            index, r = divmod(index, len(values))
            out[name] = values[r]
        return {n: out[n] for n in self.params}

    def shuffled(self, info: DeviceInfo, seed: int = 0) -> Iterator[Params]:
        """Every candidate once, in an order fixed by ``seed``, drawn lazily: point ``(a i +
        b) mod size`` of the product for i = 0, 1, ... (``a`` coprime to the size: a
        permutation), kept where the constraint holds. A time-boxed search stops after a
        few, and a space of millions of points (rqa_lines') is never enumerated."""
        n = self.size()
        rng = random.Random(seed)
        a = rng.randrange(1, n) if n > 1 else 1
        while math.gcd(a, n) != 1:
            a += 1
        b = rng.randrange(n)
        for i in range(n):
            p = self.at((a * i + b) % n)
            if self.constraint(p, info):
                yield p

    def valid(self, params: Params, info: DeviceInfo) -> bool:
        """Known names (a :attr:`filled` one may be missing), values the space allows (of
        the candidates' type: ``32.0`` and ``True`` are not ``32`` and ``1``), and device
        limits respected."""
        if not isinstance(params, dict):
            return False
        params = self.complete(params)
        if set(params) != set(self.params):
            return False
        if self.type_problem(params):
            return False
        if any(params[k] not in v for k, v in self.params.items()):
            return False
        return bool(self.constraint(params, info))

    def type_problem(self, params: Params) -> str | None:
        """Why a value of ``params`` has the wrong type for its parameter (None if none does).

        A tuning file is JSON written by hand or by other versions: ``"WG": 32.0`` compares
        equal to ``32`` but breaks the template (``range(32.0)``), so types are checked,
        not only values.
        """
        for k, v in params.items():
            cands = self.params.get(k)
            if cands is None:
                continue
            kinds = {_kind(c) for c in cands}
            if _kind(v) not in kinds:
                want = " or ".join(sorted(kinds))
                return f"{k}={v!r} has type {type(v).__name__}; {k} takes {want} values {list(cands)}"
        return None

    def default(self, info: DeviceInfo) -> Params:
        p = self.heuristic(info)
        if not self.valid(p, info):  # the heuristic must never pick something illegal
            cands = self.candidates(info)
            if not cands:
                raise RuntimeError(f"no valid tuning candidate on {info.name}")
            p = cands[0]
        return p


def _kind(v: Any) -> str:
    """The JSON-level kind of a parameter value (bool before int: ``True`` is an int)."""
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int"
    if isinstance(v, float | np.floating):
        return "float"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def pow2_bucket(n: int) -> str:
    """Problem-size bucket: the power of two at or above ``n`` (``"n4096"``)."""
    return f"n{1 << max(0, math.ceil(math.log2(max(1, n))))}"


class TuningCase(abc.ABC):
    """One problem instance on one backend: run a configuration, return its output."""

    #: relative / absolute tolerance when comparing a candidate with the reference;
    #: integer outputs are compared exactly.
    rtol: float = 1e-5
    atol: float = 1e-6

    @abc.abstractmethod
    def run(self, params: Params) -> list[Any]:
        """Enqueue the computation with ``params``; return the events to time."""

    @abc.abstractmethod
    def output(self) -> np.ndarray:
        """Host copy of the last run's output."""

    def matches(self, got: np.ndarray, ref: np.ndarray) -> bool:
        if got.shape != ref.shape:
            return False
        if np.issubdtype(ref.dtype, np.integer):
            return bool(np.array_equal(got, ref))
        return bool(np.allclose(got, ref, rtol=self.rtol, atol=self.atol, equal_nan=True))
