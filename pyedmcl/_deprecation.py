"""Renamed keywords of the public API: the old name keeps working for one release.

A function decorated with ``@renamed_keywords(k="knn")`` shows (``inspect.signature``,
``help()``, docs/api.md) only the new name; a call with the old one gets a
:class:`DeprecationWarning` naming the new keyword and runs as if the new one was given.
Giving both is a ``TypeError``. ``RENAMED`` lists every alias, so the next release can
drop them all (the test ``tests/test_api_conventions.py`` checks the list). The wrapper's
``__renamed__`` holds its aliases so that an outer wrapper binding the signature (labelled
data, progress lines: ``pyedmcl._public``) can translate them first.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: ``(function name, old keyword) -> new keyword`` for every deprecated alias
RENAMED: dict[tuple[str, str], str] = {}


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Accept each ``old=new`` keyword alias with a DeprecationWarning (one release)."""

    def decorate(fn: F) -> F:
        name = fn.__name__
        for old, new in renames.items():
            RENAMED[(name, old)] = new

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{name}() got both {old}= and {new}=; pass {new}= only "
                                        f"({old}= is its deprecated alias)")
                    warnings.warn(f"{name}({old}=...) is deprecated, use {name}({new}=...); "
                                  f"{old}= is accepted until the next release",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        wrapper.__renamed__ = {**getattr(fn, "__renamed__", {}), **renames}  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
