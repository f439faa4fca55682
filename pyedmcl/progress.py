"""Progress reporting: counted bars with an ETA and elapsed-time bars for single jobs.

Two shapes, both drawn by tqdm on stderr and both silent for work that ends within
:data:`DELAY_S` (a bar for a 0.2 s call is noise):

* :class:`Progress` — ``total`` known steps (blocks, library sizes, windows): rate and ETA.
* :func:`activity` — one job without countable steps (a Simplex call, an RQA): a line
  with the job's name and the elapsed time, refreshed by a background thread.

Public functions take ``progress: bool | None``: ``True`` draws, ``False`` never,
``None`` (default) draws only inside a Jupyter notebook (:func:`in_notebook`), where a
long call otherwise looks hung. The CLI passes ``True`` unless ``-q``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: bars appear only for work still running after this many seconds
DELAY_S = 1.0
#: refresh period of an :func:`activity` line
REFRESH_S = 0.5

_local = threading.local()


def in_notebook() -> bool:
    """True inside a Jupyter kernel (cheap: looks at already-imported modules only)."""
    ip = sys.modules.get("IPython")
    if ip is None or "ipykernel" not in sys.modules:
        return False
    try:
        shell = ip.get_ipython()
    except AttributeError:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def resolve(progress: bool | None) -> bool:
    """``progress`` argument -> draw or not (``None``: only in a notebook)."""
    if progress is None:
        return in_notebook()
    if not isinstance(progress, bool | int):
        raise ValueError(f"progress must be True, False or None, got {progress!r}")
    return bool(progress)


def _tqdm(**kw: Any):
    if in_notebook():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(file=sys.stderr, delay=DELAY_S, dynamic_ncols=True, leave=False, **kw)


class Progress:
    """A counted bar (rate, ETA) over ``total`` steps; a no-op when not ``enabled``.

    Thread-safe ``update``: xmap's device workers report blocks from several threads.
    Inside an :func:`activity`, the activity line is paused while this bar runs.
    """

    def __init__(self, total: int, desc: str, enabled: bool, unit: str = "step"):
        self.total, self.done = int(total), 0
        self.enabled = bool(enabled) and self.total > 0
        self.lock = threading.Lock()
        self.bar = _tqdm(total=self.total, desc=desc, unit=unit) if self.enabled else None

    def update(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            if self.bar is not None:
                self.bar.update(n)

    def set_description(self, desc: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(desc)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def activity(desc: str, enabled: bool) -> Iterator[None]:
    """An elapsed-time line ``desc [12.3s]`` while the block runs (shown after DELAY_S).

    Nested activities (a CLI command calling a public function that has its own) draw
    only the outermost line.
    """
    if not enabled or getattr(_local, "active", False):
        yield
        return
    _local.active = True
    bar = _tqdm(total=None, desc=desc, bar_format="{desc} [{elapsed}]")
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(REFRESH_S):
            bar.refresh()

    th = threading.Thread(target=tick, name="pyedmcl-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        bar.close()
        _local.active = False


def with_progress(fn: Callable[..., Any], desc: str) -> Callable[..., Any]:
    """``fn`` with a keyword-only ``progress: bool | None = None`` drawing an :func:`activity`.

    Used for the public functions whose work is one device job (their own signatures
    stay free of display options); functions with countable steps (``xmap``) take
    ``progress`` themselves.
    """
    if "progress" in inspect.signature(fn).parameters:
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, progress: bool | None = None, **kwargs: Any) -> Any:
        with activity(desc, resolve(progress)):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    extra = inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation="bool | None")
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        params.insert(len(params) - 1, extra)
    else:
        params.append(extra)
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = (fn.__doc__ or "") + (
        "\n\n    ``progress``: draw an elapsed-time line on stderr for calls longer than "
        "1 s (``None``: only in a Jupyter notebook).\n")
    wrapper.__wrapped_progress__ = True  # type: ignore[attr-defined]
    return wrapper
