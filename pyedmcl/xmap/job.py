"""The typed specs of one map: what :func:`pyedmcl.xmap` validated, passed down whole.

* :class:`XmapJob`: the options of the call, validated and resolved (devices, the
  stored choices of a resumed store, the FMA and dtype defaults) before the data is
  read. ``E``, ``tau``, ``Tp``, ``block_rows`` and ``knn_kernel`` are checked against
  the panel (its length and number of series), so they are kept as given here.
* :class:`EngineSpec`: the parameters every :class:`~pyedmcl.xmap.engine.XmapEngine`
  of the map is made with, on every device and Dask worker (the same everywhere, so
  that their rows are bit-identical).
* :class:`Panel`: the data as the kernels read it, and what the host pass found
  (names, shape, E per series, the float32 merge check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .engine import XmapEngine


@dataclass(frozen=True)
class XmapJob:
    """:func:`pyedmcl.xmap`'s options, validated (see the module docstring)."""

    E: Any  # "auto", one int or N ints (resolved against the panel)
    tau: Any
    Tp: Any
    E_max: int
    out: str | Path | None
    block_rows: int | None  # given, or the store's when resuming
    devices: tuple[Any, ...]
    backend: str | None
    scheduler: str | None
    n_workers: int
    overwrite: bool
    progress: bool
    knn_kernel: str | None
    fma: bool
    dtype: np.dtype  # asked for (the store's when resuming); the panel may widen it
    fp64: bool  # every device of the job has fp64
    surrogates: int
    surrogate_method: str
    surrogate_options: dict | None
    seed: int | None  # with surrogates: the store's when resuming, else a fresh one
    method: str = "simplex"  # or "smap" (pyedmcl.xmap.smap_map)
    theta: float | None = None  # S-map's localisation (method "smap" only)
    exclusion_radius: int = 0  # S-map's (method "smap" only)
    #: ``Tp`` as a list or range of lags, as given (checked against the panel's length;
    #: ``Tp`` is then 0): a lag scan (:mod:`pyedmcl.xmap.lags`); None: one map at ``Tp``
    lags: Any = None

    @property
    def in_memory(self) -> bool:
        """The map is returned in memory on this node's devices (no store, no cluster)."""
        return self.out is None and self.scheduler is None


@dataclass(frozen=True)
class EngineSpec:
    """The parameters of every engine of one map (:class:`XmapEngine`'s keywords)."""

    tau: int
    Tp: int
    knn_kernel: str | None
    fma: bool
    real: str = "float"

    def engine(self, be: Any, X: np.ndarray, E: np.ndarray | None, *, x_dev: Any = None,
               specialise_later: bool = False) -> XmapEngine:
        """Device ``be``'s engine of the map over ``X`` (``x_dev``: ``X`` already there)."""
        return XmapEngine(be, X, E, tau=self.tau, Tp=self.Tp, real=self.real,
                          knn_kernel=self.knn_kernel, fma=self.fma, x_dev=x_dev,
                          specialise_later=specialise_later)

    def key(self) -> list[tuple[str, Any]]:
        """The parameters as sorted ``(name, value)`` pairs (a cache key with the data)."""
        return sorted(vars(self).items())


@dataclass(frozen=True)
class HeadAssumption:
    """What a head start assumed of the map (the map takes its engines only if it holds)."""

    X: np.ndarray
    blocks: list[tuple[int, int, int]]
    E: np.ndarray
    spec: EngineSpec

    def holds(self, X: np.ndarray, blocks: Sequence[tuple[int, int, int]], E: np.ndarray,
              spec: EngineSpec) -> bool:
        return (self.X is X and self.blocks == blocks and self.spec == spec
                and np.array_equal(self.E, E))


@dataclass(frozen=True)
class Panel:
    """The map's data after the host pass: ``X`` (N, n) as the kernels read it."""

    X: np.ndarray
    names: list[str] | None
    tau: int
    Tp: int
    E: np.ndarray | None  # None: "auto" (the optimal E is found first)
    real: str
    dtype: np.dtype
    float32_holds: Callable[[], bool]  # False: warned, the map reruns in float64
    start_check: Callable[[], None] | None  # starts a deferred float32 check (run_local)
    on_device: list[Any] | None  # per device of the job, X already there, or None
    writes: list[Any]  # handles of those uploads: held until the map has run
    surrogates: np.ndarray | None  # the surrogate targets' panel
    #: a lag scan's lags (ascending; ``Tp`` the one nearest 0), else None
    lags: np.ndarray | None = None

    @property
    def N(self) -> int:
        return self.X.shape[0]

    @property
    def n(self) -> int:
        return self.X.shape[1]
