"""Dask clients of every job (:func:`connect`), and a LocalCluster for ``scheduler="local"``,
refused at once from an unguarded script.

A LocalCluster starts its workers by *spawning* Python processes (Dask's default
``distributed.worker.multiprocessing-method``), and a spawned process imports the
parent's main script again, from the top. A script that calls ``pe.xmap(...,
scheduler="local")`` at its top level, outside ``if __name__ == "__main__":``, therefore
makes every worker run the call again: each tries to start a cluster of its own, Dask
prints "Nanny failed to start" after a hundred lines of tracebacks, and the re-run jobs
collide on their own output. :func:`unguarded_main_line` finds that case before any
process starts -- the line of the main script that leads to this call, when it lies
outside such a block -- and :func:`local_cluster` then raises one clear error naming the
line and the fix.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable
from typing import Any

GUARD_HELP = ('put the code that runs it under `if __name__ == "__main__":` (Dask starts '
              "its worker processes by importing your script again, from the top); see "
              "docs/dask.md for a complete script")


class UnguardedMainError(RuntimeError):
    """``scheduler="local"`` was used from a script's top level without a main guard."""


def _guarded_ranges(tree: ast.Module) -> list[tuple[int, int]]:
    """Line ranges of the module-level ``if __name__ == "__main__":`` bodies."""
    out = []
    for node in tree.body:
        if not isinstance(node, ast.If):
            continue
        t = node.test
        if (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)
                and {_name(t.left), _name(t.comparators[0])} == {"__name__", "'__main__'"}):
            out.append((node.body[0].lineno, max(getattr(n, "end_lineno", n.lineno) or n.lineno
                                                 for n in node.body)))
    return out


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return repr(node.value)
    return ""


def unguarded_main_line(start_method: str | None = None) -> tuple[str, int] | None:
    """(script, line) of the main script's top-level line that leads to this call, when
    worker processes would run it again (it lies outside every main guard and workers
    are spawned, not forked); None otherwise (an interactive session, ``python -c``, a
    guarded call, a forking start method, a script whose source cannot be read)."""
    if start_method is None:
        try:
            import dask

            start_method = dask.config.get("distributed.worker.multiprocessing-method",
                                           "spawn")
        except ImportError:
            start_method = "spawn"
    if start_method == "fork":
        return None
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not str(path).endswith(".py"):
        return None
    frame: Any = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main)
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # the call does not come from the script's top level
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    if any(lo <= line <= hi for lo, hi in _guarded_ranges(tree)):
        return None
    return str(path), line


def check_main_guard(what: str = "scheduler='local'") -> None:
    """:class:`UnguardedMainError` where worker processes would re-run the calling script
    (:func:`unguarded_main_line`); called where ``scheduler="local"`` is first seen, before
    any output is made."""
    where = unguarded_main_line()
    if where is not None:
        raise UnguardedMainError(f"{what} was called from line {where[1]} of {where[0]}, "
                                 f"outside `if __name__ == \"__main__\":`: {GUARD_HELP}")


def local_cluster(n_workers: int, what: str = "scheduler='local'") -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes
    (no dashboard), after :func:`check_main_guard`."""
    import distributed

    check_main_guard(what)
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                    processes=True, dashboard_address=None)


def connect(scheduler: Any, n_workers: int) -> tuple[Any, Any, bool]:
    """``(client, cluster, own)`` for a job's ``scheduler``: a ``distributed.Client`` as
    given (``own`` False: the caller's to close), ``"local"`` (a :func:`local_cluster` of
    ``n_workers`` processes, ``cluster`` then ours to close) or a scheduler address (for
    example one started by dask-jobqueue on SLURM/PBS). :func:`disconnect` ends what this
    opened."""
    import distributed

    if isinstance(scheduler, distributed.Client):
        return scheduler, None, False
    if scheduler == "local":
        cluster = local_cluster(n_workers)
        return distributed.Client(cluster), cluster, True
    if isinstance(scheduler, str):
        return distributed.Client(scheduler), None, True
    raise ValueError(f"scheduler={scheduler!r} is not supported; allowed: a Dask scheduler "
                     "address, 'local' (a LocalCluster) or a distributed.Client")


def disconnect(client: Any, cluster: Any, own: bool) -> None:
    """Close what :func:`connect` opened (a given client stays open)."""
    if own:
        client.close()
    if cluster is not None:
        cluster.close()


def register_plugin(client: Any, plugin: Any, name: str) -> None:
    """Give every worker ``plugin`` (a ``WorkerPlugin``: its device context, kept for the
    job) under ``name``, through whichever method this ``distributed`` has."""
    reg = getattr(client, "register_plugin", None) or client.register_worker_plugin
    reg(plugin, name=name)


def run_tasks(client: Any, fn: Callable[..., Any], tasks: Iterable[tuple[Any, tuple]], *,
              key: str, on_result: Callable[[Any, Any], None], in_flight: int | None = None,
              retries: int = 3) -> None:
    """Every task of ``tasks`` (``(task id, arguments)`` pairs, taken lazily) as a Dask
    task ``fn(*arguments)`` named ``f"{key}-{task id}"``; ``on_result(task id, result)``
    as each completes, in completion order. Earlier tasks have priority; a task lost with
    its worker is rerun elsewhere (``retries``). ``in_flight``: at most that many tasks
    queued at a time, the next one taken (and its data sent) as one completes; None:
    all at once. Tasks still queued when this stops (an error, Ctrl-C) are cancelled.

    The one task loop of xmap's row blocks, RQA's bands and rqa_batch's series blocks."""
    from distributed import as_completed

    left = iter(tasks)
    pending: dict[Any, Any] = {}
    running = as_completed()
    sent = 0

    def submit() -> bool:
        nonlocal sent
        item = next(left, None)
        if item is None:
            return False
        tid, args = item
        fut = client.submit(fn, *args, key=f"{key}-{tid}", retries=retries, priority=-sent)
        sent += 1
        pending[fut] = tid
        running.add(fut)
        return True

    try:
        while (in_flight is None or sent < in_flight) and submit():
            pass
        for fut in running:
            on_result(pending.pop(fut), fut.result())
            if in_flight is not None:
                submit()
    finally:
        for fut in pending:
            fut.cancel()
