"""A tunable kernel family: its template, version, tuning space, buckets and cases.

The tuning database keys entries by the family's ``name`` and ``version`` (declared in
the template's header, ``## version: N``), plus device and problem class. Editing a
comment or moving code into a shared part changes neither, so tuned entries survive
it; a change of the kernel's meaning or parameter set bumps the version, and entries
of other versions are skipped.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any

from ..devices import DeviceInfo
from ..templates import declared_legacy_hashes, declared_version
from .database import lookup
from .space import Params, TuningCase, TuningSpace, pow2_bucket


class TunableKernel(abc.ABC):
    """A kernel family the tuner knows: template, version, space, buckets, cases."""

    name: str
    template: str
    space: TuningSpace
    #: problem size candidates are verified on (ragged on purpose: not a power of two)
    verify_size: int = 1531
    @property
    def version(self) -> int:
        """The kernel version tuning entries are keyed by (the template's ``## version``)."""
        return declared_version(self.template)

    @property
    def legacy_hashes(self) -> frozenset[str]:
        """Text hashes stamped on entries written before versions existed (version 1)."""
        return declared_legacy_hashes(self.template)

    def entry_version(self, entry: dict[str, Any]) -> int | None:
        """The version an entry was made for (legacy hash-stamped entries map to 1)."""
        v = entry.get("version")
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if entry.get("template_hash") in self.legacy_hashes:
            return 1
        return None

    @abc.abstractmethod
    def spec_bucket(self, spec: dict[str, Any]) -> str:
        """Bucket of the specialisation values (e.g. E, metric) a tuning entry applies to."""

    def size_bucket(self, size: int) -> str:
        return pow2_bucket(size)

    @abc.abstractmethod
    def default_specs(self) -> Iterable[dict[str, Any]]:
        """Specialisations the application's tuning command covers by default."""

    def spec_default(self, spec: dict[str, Any], info: DeviceInfo) -> Params:
        """The untuned parameters of ``spec`` on ``info`` (what a launch takes without an
        entry, and the tuner's reference and first candidate): the space's heuristic
        unless a family knows better for some specs."""
        return self.space.default(info)

    def applies(self, spec: dict[str, Any], info: DeviceInfo) -> bool:
        """Whether launches on ``info`` ever use ``spec``'s bucket (the tuning command skips
        the default specs that do not apply to its device)."""
        return True

    @abc.abstractmethod
    def default_sizes(self, info: DeviceInfo, quick: bool = False) -> list[int]:
        """Problem sizes the application's tuning command covers by default on this device."""

    @abc.abstractmethod
    def case(self, backend: Any, spec: dict[str, Any], size: int) -> TuningCase:
        """A runnable problem instance with deterministic data."""

    def params_for(self, backend: Any, spec: dict[str, Any], size: int) -> Params:
        """Launch parameters for ``spec`` at problem ``size`` on ``backend``'s device:
        user DB -> shipped levels -> heuristic (families add device-limit fix-ups)."""
        return lookup(self, backend.info, self.spec_bucket(spec), self.size_bucket(size)).params
