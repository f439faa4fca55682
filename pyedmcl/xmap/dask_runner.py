"""Row blocks on a Dask distributed cluster (beyond one machine).

A :class:`XmapWorkerPlugin` gives every worker process its own device context
and compiled kernels (built once in ``setup``) and caches the
:class:`~pyedmcl.xmap.engine.XmapEngine` per job (data uploaded once per
worker). Tasks are row blocks: each computes its rows and writes its own Zarr
chunk plus its completion marker (no locking; the output path must be visible
to all workers, e.g. a shared file system or an object store). A worker that
dies mid-job loses only its running blocks: the scheduler reruns them elsewhere,
and because a block's result depends only on its inputs, the matrix is the same.

``scheduler="local"`` starts a LocalCluster of worker processes on this machine;
any other string is the address of an existing scheduler (for example one
started by dask-jobqueue on SLURM/PBS); a ``distributed.Client`` is used as given
(:func:`pyedmcl.dask_local.connect`, as RQA's tasks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from distributed import WorkerPlugin

from ..dask_local import connect, disconnect, register_plugin, run_tasks
from .job import EngineSpec

PLUGIN = "pyedmcl-xmap"


class XmapWorkerPlugin(WorkerPlugin):
    """Per-worker state: the device backend (context, queue, kernels) and engines."""

    name = PLUGIN

    def __init__(self, device: Any = None, backend: str | None = None):
        self.device, self.backend = device, backend
        self.be = None
        self.engines: dict[str, Any] = {}

    def setup(self, worker=None) -> None:
        from clkernels import get_backend
        self.be = get_backend(self.device, self.backend)

    def teardown(self, worker=None) -> None:
        self.engines.clear()

    def engine(self, key: str, X: np.ndarray, spec: EngineSpec):
        eng = self.engines.get(key)
        if eng is None:
            self.engines.clear()  # one job's data per worker at a time
            eng = self.engines[key] = spec.engine(self.be, X, None)
        return eng


def _plugin() -> XmapWorkerPlugin:
    from distributed import get_worker
    return get_worker().plugins[PLUGIN]


def _edim_task(key: str, X: np.ndarray, spec: EngineSpec, E_max: int, r0: int, r1: int
               ) -> np.ndarray:
    return _plugin().engine(key, X, spec).edim_block(r0, r1, E_max)


def _xmap_task(key: str, X: np.ndarray, spec: EngineSpec, E: np.ndarray, path: str, b: int,
               r0: int, r1: int, null: tuple[int, int] | None = None) -> str:
    """One row block computed and written; ``null`` = (N, n) for a job with n surrogates
    per series: the block (targets N (1 + n)) is reduced to rho and the null summary
    (:func:`~pyedmcl.xmap.xmap_null.reduce_block`) before it is written."""
    from .store import XmapStore
    eng = _plugin().engine(key, X, spec)
    eng.set_E(E)
    rows = eng.block(r0, r1)
    st = XmapStore.open_existing(path)
    if null is None:
        st.bind_E(E)  # the job's E, part of every block checksum
        st.write_block(b, rows)
    else:
        from .xmap_null import reduce_block
        st.bind_E(E[:null[0]])  # the series' E (the surrogates' repeat it)
        rho, extra = reduce_block(rows, *null)
        st.write_block(b, rho, extra)
    from distributed import get_worker
    return f"{get_worker().address}:{eng.be.info.runtime}"


class DaskRunner:
    """Submits row-block tasks to a Dask cluster (started locally or joined)."""

    def __init__(self, scheduler: Any, *, n_workers: int = 2, device: Any = None,
                 backend: str | None = None):
        self.client, self.cluster, self._own = connect(scheduler, n_workers)
        register_plugin(self.client, XmapWorkerPlugin(device, backend), PLUGIN)
        self._X = None
        self._key = None

    def _scatter(self, X: np.ndarray, spec: EngineSpec) -> tuple[Any, str]:
        from dask.base import tokenize
        key = tokenize(X, spec.key())
        if self._key != key:
            self._X = self.client.scatter(X, broadcast=True)
            self._key = key
        return self._X, key

    def edim(self, X, blocks, spec, E_max, sink, progress: bool) -> None:
        from .scheduler import Progress
        Xf, key = self._scatter(X, spec)
        bar = Progress(len(blocks), "optimal E", progress)

        def done(b: int, rho: np.ndarray) -> None:
            sink(b, rho)
            bar.update()
        run_tasks(self.client, _edim_task,
                  ((b, (key, Xf, spec, E_max, r0, r1)) for b, r0, r1 in blocks),
                  key=f"pyedmcl-edim-{key}", on_result=done)
        bar.close()

    def xmap(self, X, blocks, spec, E, path: str, progress: bool,
             null: tuple[int, int] | None = None) -> dict[str, int]:
        from .scheduler import Progress
        Xf, key = self._scatter(X, spec)
        ekey = f"{key}-{hash(tuple(int(e) for e in E)) & 0xFFFFFFFF:x}"
        E = np.asarray(E)
        bar = Progress(len(blocks), "xmap", progress)
        counts: dict[str, int] = {}

        def done(_b: int, who: str) -> None:
            counts[who] = counts.get(who, 0) + 1
            bar.update()
        run_tasks(self.client, _xmap_task,
                  ((b, (key, Xf, spec, E, path, b, r0, r1, null)) for b, r0, r1 in blocks),
                  key=f"pyedmcl-xmap-{ekey}", on_result=done)
        bar.close()
        return counts

    def close(self) -> None:
        disconnect(self.client, self.cluster, self._own)
