"""Progress reporting: counted bars with an ETA and elapsed-time bars for single jobs.

Two shapes, both drawn by tqdm on stderr and both silent for work that ends within
:data:`DELAY_S` (a bar for a 0.2 s call is noise):

* :class:`Progress` — ``total`` known steps (blocks, library sizes, windows): rate and ETA.
* :func:`activity` — one job without countable steps (a Simplex call, an RQA): a line
  with the job's name and the elapsed time, refreshed by a background thread.

Public functions take ``progress: bool | None``: ``True`` draws, ``False`` never,
``None`` (default) draws only inside a Jupyter notebook (:func:`in_notebook`), where a
long call otherwise looks hung. The CLI draws when stderr is a terminal, unless ``-q``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: bars appear only for work still running after this many seconds
DELAY_S = 1.0
#: refresh period of an :func:`activity` line
REFRESH_S = 0.5
#: ... when stderr is a log file, not a terminal
LOG_REFRESH_S = 10.0

_local = threading.local()
#: counted bars open now (any thread): an activity line gives way to them
_open_bars = [0]
_bars_lock = threading.Lock()


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
    kw.setdefault("file", sys.stderr)
    return tqdm(delay=DELAY_S, dynamic_ncols=True, leave=False, **kw)


class Progress:
    """A counted bar (rate, ETA) over ``total`` steps; a no-op when not ``enabled``.

    Thread-safe ``update``: xmap's device workers report blocks from several threads.
    A thread keeps the elapsed time moving between steps and says "building 12 of 37
    kernels" while builds run (a first step can take minutes on a fresh cache). Inside an
    :func:`activity` (a CLI command), the activity line gives way while this bar is open.
    """

    def __init__(self, total: int, desc: str, enabled: bool, unit: str = "step"):
        self.total, self.done = int(total), 0
        self.enabled = bool(enabled) and self.total > 0
        self.lock = threading.Lock()
        self.bar = None
        if self.enabled:
            from clkernels import probe

            term = _Terminal()
            with _bars_lock:
                _open_bars[0] += 1
            self._hook = probe.set_line_prefix(term.clear_prefix)
            self.bar = _tqdm(total=self.total, desc=desc, unit=unit, file=term)
            self._term, self._stop = term, threading.Event()
            self._ticker = threading.Thread(target=self._tick, name="pyedmcl-progress",
                                            daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        from clkernels import probe

        if self._stop.wait(DELAY_S):
            return
        while True:
            with self.lock:
                bar = self.bar
                if bar is None:
                    return
                bar.set_postfix_str(probe.build_status(), refresh=False)
                bar.refresh()
            if self._stop.wait(REFRESH_S if self._term.tty else LOG_REFRESH_S):
                return

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
            from clkernels import probe

            self._stop.set()
            self._ticker.join()
            with self.lock:
                self.bar.close()
                self.bar = None
            if self._term.drawn:  # tqdm clears only what it knows it printed
                self._term.write("\r\033[K" if self._term.tty else "\n")
            probe.set_line_prefix(self._hook)
            with _bars_lock:
                _open_bars[0] -= 1

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Terminal:
    """A file for tqdm that reaches the terminal also while a kernel build captures
    descriptor 2 (clkernels' quiet builds), so the line keeps moving during builds."""

    def __init__(self) -> None:
        self.drawn = False  # a line without its newline is on screen
        self.tty = sys.stderr.isatty()  # now: a build later points descriptor 2 to a file

    def write(self, text: str) -> int:
        from clkernels import probe

        hook = probe.set_line_prefix(None)  # the bar's own writes need no clean line
        try:
            probe.to_terminal(text)
        finally:
            probe.set_line_prefix(hook)
        self.drawn = bool(text.strip("\r\n ")) and not text.endswith("\n")
        return len(text)

    def clear_prefix(self) -> str:
        """Before another message: erase the drawn line (terminal) or end it (log file)."""
        if not self.drawn:
            return ""
        self.drawn = False
        return "\r\033[K" if self.tty else "\n"

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


def shown() -> bool:
    """Whether this thread is inside a drawn :func:`activity` (a CLI command, or a public
    function called with ``progress=True``): work with countable steps inside it (one
    Simplex per E of a scan) shows a counted :class:`Progress` bar."""
    return bool(getattr(_local, "active", False))


@contextlib.contextmanager
def activity(desc: str, enabled: bool) -> Iterator[None]:
    """An elapsed-time line ``desc [00:12]`` while the block runs (shown after DELAY_S).

    While kernels are being built the line says so (clkernels' own one-line build notice
    is held back meanwhile); other messages (a skipped device) get a clean line of their
    own. Nested activities (a CLI command calling a public function that has its own)
    draw only the outermost line.
    """
    if not enabled or getattr(_local, "active", False):
        yield
        return
    from clkernels import probe, settings

    _local.active = True
    notice_var = settings.env_name("BUILD_NOTICE_S")
    notice_before = os.environ.get(notice_var)
    os.environ[notice_var] = "1e9"  # this line announces builds instead
    term = _Terminal()
    hook_before = probe.set_line_prefix(term.clear_prefix)
    stop = threading.Event()
    bars: list[Any] = []

    def tick() -> None:
        if stop.wait(DELAY_S):
            return
        from tqdm import tqdm

        bar = tqdm(total=None, desc=desc, bar_format="{desc} [{elapsed}]", file=term,
                   leave=False, dynamic_ncols=True, mininterval=0, delay=1e-9)
        bar.start_t -= DELAY_S  # the job began DELAY_S ago (tqdm's own clock)
        bars.append(bar)
        while True:
            if _open_bars[0]:  # a counted bar (with its ETA) has the line
                if term.drawn:
                    term.write("\r\033[K" if term.tty else "\n")
                if stop.wait(REFRESH_S):
                    return
                continue
            status = probe.build_status()
            bar.set_description_str(f"{desc} ({status})" if status else desc, refresh=False)
            bar.refresh()
            if stop.wait(REFRESH_S if term.tty else LOG_REFRESH_S):
                return

    th = threading.Thread(target=tick, name="pyedmcl-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        for bar in bars:
            bar.close()
            if term.drawn:  # tqdm clears only what it knows it printed
                term.write("\r\033[K" if term.tty else "\n")
        probe.set_line_prefix(hook_before)
        _local.active = False
        if notice_before is None:
            os.environ.pop(notice_var, None)
        else:
            os.environ[notice_var] = notice_before


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
