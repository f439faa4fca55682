"""Constant series: named in a warning, and in the result's ``notes``.

Every point of a constant series (constant also after its NaN rows are left out)
coincides with every other: an EDM library of it has no nearest neighbours (ties
decide them alone), a constant target has no correlation (rho is NaN, or pyEDM's 0 in
CCM), and in RQA every pair of points is recurrent at any radius. The functions still
run, as pyEDM does, but say so: a :class:`~pyedmcl.validation.ConstantSeriesWarning`
naming the series, and the same text in ``result.notes``. The CLI refuses such input
instead (exit 2): a number printed there would be read as an answer.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ._extremes import call_memo, extremes, row_extremes

#: why a constant series makes each family's answer meaningless
EDM_WHY = ("the points of a constant series all coincide, so its neighbours are chosen by "
           "tie order alone and its skill means nothing (a constant target's rho is NaN, or "
           "0 in CCM as pyEDM)")
RQA_WHY = ("every pair of points of a constant series is recurrent at any radius (RR = 1), "
           "so its measures describe no dynamics")

#: set while a checked function runs: the calls it makes of others are not checked again
_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("constant_in_call",
                                                                default=False)


def _host(v: Any) -> np.ndarray | None:
    """``v`` as a host array, or None (device arrays, names, anything else)."""
    if v is None or isinstance(v, str | bool | int | np.integer):
        return None
    if hasattr(v, "get") and not isinstance(v, np.ndarray) and not hasattr(v, "to_numpy"):
        return None  # a device array: validated on the device
    try:
        a = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v)
    except Exception:  # noqa: BLE001 - the function itself refuses it with its own error
        return None
    return a if a.dtype.kind in "biuf" and a.size else None


def _names(v: Any) -> list[Any]:
    if isinstance(v, str):
        return v.split()
    if isinstance(v, int | np.integer):
        return [v]
    return list(v)


def _columns(x: Any, a: np.ndarray, picked: Any) -> tuple[list[str], np.ndarray] | None:
    """The columns of 2-D ``a`` (``x``'s values) that ``picked`` names (all if None):
    their labels and the ``(k, L)`` block of them (a view where all are taken)."""
    labels = [str(c) for c in x.columns] if hasattr(x, "columns") else None
    if picked is None:
        idx = list(range(a.shape[1]))
        block = a.T
    else:
        try:
            idx = [labels.index(str(p)) if labels and not isinstance(p, int | np.integer)
                   else int(p) for p in _names(picked)]
        except (ValueError, TypeError):
            return None  # an unknown column: the function refuses it
        idx = [j for j in idx if 0 <= j < a.shape[1]]
        block = a[:, idx].T
    return [labels[j] if labels else str(j) for j in idx], block


def _series(args: dict[str, Any], names: tuple[str, ...],
            multi: bool = True) -> Iterator[tuple[list[str], np.ndarray]]:
    """Each block of host series the call reads, ``(labels, (k, L) values)``: ``names``
    (its series arguments, the first one the library ``x``), with a table's chosen
    ``columns`` and a ``target`` named by column. A single series comes as the array
    given (any shape holding one series), so that its extremes are the call's
    (:mod:`pyedmcl._extremes`)."""
    x = args.get(names[0])
    xa = _host(x)
    for name in names:
        v = args.get(name)
        if name == "target" and v is not None and (isinstance(v, str | int | np.integer)
                                                   or (isinstance(v, list | tuple) and v
                                                       and isinstance(v[0], str))):
            cols = _columns(x, xa, v) if xa is not None and xa.ndim == 2 else None
            if cols is not None:
                yield [f"target {c}" for c in cols[0]], cols[1]
            continue
        if v is x and name != names[0]:
            continue  # the same series passed twice (target = x): named once
        a = xa if v is x else _host(v)
        if a is None or a.ndim > 2:
            continue
        if a.ndim == 1 or 1 in a.shape:
            yield [name], a
        elif not multi:  # state vectors (RQA's embedded=True): not one series
            continue
        elif name == names[0]:
            cols = _columns(x, a, args.get("columns"))
            if cols is not None:
                yield [f"{name} column {c}" for c in cols[0]], cols[1]
        else:  # targets: (n_targets, n) or (n, n_targets)
            n = xa.shape[0] if xa is not None and xa.ndim else a.shape[0]
            rows = a if a.shape[1] == n or a.shape[0] != n else a.T
            yield [f"{name}[{i}]" for i in range(rows.shape[0])], rows


def constant_names(args: dict[str, Any], names: tuple[str, ...],
                   multi: bool = True) -> list[str]:
    """The labels of the constant series among a call's host inputs (NaN left out; an
    all-NaN series is not judged: the function refuses or skips it). Two reductions per
    block; the NaN-aware ones only for the rows that hold a NaN."""
    out: list[str] = []
    for labels, block in _series(args, names, multi):
        if len(labels) == 1:  # one series: its extremes, remembered for the call
            if not block.size:
                continue
            lo, hi = (np.array([v]) for v in extremes(block))
            block = block.reshape(1, -1)
        elif not block.shape[1]:
            continue
        else:  # (remembered for the call: its validation reduces the same rows)
            lo, hi = (v.copy() for v in row_extremes(block))
        gaps = np.flatnonzero(np.isnan(lo) | np.isnan(hi)) if block.dtype.kind == "f" else ()
        if len(gaps):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                lo[gaps], hi[gaps] = (np.nanmin(block[gaps], axis=1),
                                      np.nanmax(block[gaps], axis=1))
        for i in np.flatnonzero(lo == hi):
            if labels[i] not in out:
                out.append(labels[i])
    return out


def note_text(what: str, labels: list[str], why: str) -> str:
    more = f" and {len(labels) - 10} more" if len(labels) > 10 else ""
    verb = "is" if len(labels) == 1 else "are"
    return f"{what}: series {', '.join(labels[:10])}{more} {verb} constant: {why}"


def checks_constant(what: str, names: tuple[str, ...], why: str = EDM_WHY,
                    multi: bool = True) -> Callable:
    """Decorate a public function whose arguments ``names`` are series: a constant one is
    warned of (:class:`~pyedmcl.validation.ConstantSeriesWarning`) before the call and
    named in its result's ``notes`` (a DataFrame result: ``attrs["notes"]``). ``multi``:
    a 2-D argument is several series (columns); else it is state vectors, not judged."""
    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        bind = _binder(sig)

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            if _IN_CALL.get():
                return fn(*a, **kw)
            with call_memo():  # the series' extremes, for the call's later checks
                return checked(*a, **kw)

        def checked(*a: Any, **kw: Any) -> Any:
            note = None
            bound = bind(a, kw)  # (None: the call raises its own argument error)
            if bound is not None:
                labels = constant_names(bound, names, multi)
                if labels:
                    from ._precision import _user_level
                    from .validation import ConstantSeriesWarning

                    note = note_text(what, labels, why)
                    warnings.warn(note, ConstantSeriesWarning, stacklevel=_user_level())
            token = _IN_CALL.set(True)
            try:
                res = fn(*a, **kw)
            finally:
                _IN_CALL.reset(token)
            if note is not None:
                attach_note(res, note)
            return res
        return wrapper
    return deco


def _binder(sig: inspect.Signature) -> Callable[[tuple, dict], dict[str, Any] | None]:
    """``sig.bind(*a, **kw).arguments`` as a function of ``(a, kw)``, None where the call
    does not bind. A signature of plain parameters (no ``*args``, ``**kwargs`` or
    positional-only ones) is bound by a few dictionary steps: the same arguments
    wherever ``bind`` succeeds, ``bind`` itself (and its refusal) elsewhere."""
    params = list(sig.parameters.values())
    P = inspect.Parameter
    plain = all(p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) for p in params)
    positional = [p.name for p in params if p.kind is P.POSITIONAL_OR_KEYWORD]
    names = {p.name for p in params}
    required = [p.name for p in params if p.default is P.empty]

    def slow(a: tuple, kw: dict) -> dict[str, Any] | None:
        try:
            return dict(sig.bind(*a, **kw).arguments)
        except TypeError:
            return None

    def fast(a: tuple, kw: dict) -> dict[str, Any] | None:
        if len(a) > len(positional) or not names.issuperset(kw):
            return slow(a, kw)
        got = dict(zip(positional, a, strict=False))
        if not got.keys().isdisjoint(kw):  # a value twice: bind's error
            return slow(a, kw)
        got.update(kw)
        if any(r not in got for r in required):
            return slow(a, kw)
        return got

    return fast if plain else slow


def attach_note(res: Any, note: str) -> None:
    """Add ``note`` to a result's ``notes`` (a DataFrame's ``attrs["notes"]``)."""
    if hasattr(res, "attrs") and isinstance(getattr(res, "attrs", None), dict):
        res.attrs["notes"] = tuple(res.attrs.get("notes", ())) + (note,)
    elif hasattr(res, "__dict__"):
        res.notes = tuple(getattr(res, "notes", ()) or ()) + (note,)
