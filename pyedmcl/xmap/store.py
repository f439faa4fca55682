"""Zarr output of an all-to-all map: row blocks, completion markers, resume.

Layout of ``OUT.zarr`` (a Zarr group):

- ``rho``  (N, N) float32, one chunk per row block (``block_rows`` x N);
  ``rho[i, j]`` = library ``i`` cross-mapping target ``j`` (see
  :mod:`pyedmcl.xmap.engine`). NaN until written.
- ``done`` (n_blocks,) uint8, one chunk per element: 1 once the block's rho chunk
  is completely written. A block is written first, marked second, so a block
  cut off mid-write is never marked and is recomputed on resume.
- ``E``    (N,) int32: the embedding dimension of each target series;
  ``edim_rho`` (N, E_max) float32 when E was chosen automatically.
- attributes: ``pyedmcl_xmap`` = the job's parameters (data checksum included),
  ``pyedmcl_version``.

Each block touches only its own chunks, so writers (threads, processes, Dask
workers on a shared file system) never need a lock.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np

ATTR = "pyedmcl_xmap"


def data_checksum(X: np.ndarray) -> str:
    """sha256 of the (N, n) float32 data as the job sees it."""
    a = np.ascontiguousarray(X, dtype=np.float32)
    h = hashlib.sha256()
    h.update(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _short(v: Any, n: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n - 5] + " ...]"


def _zarr():
    try:
        import zarr
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on extras
        raise ModuleNotFoundError("Zarr output needs zarr: pip install 'pyedmcl[io]'") from exc
    return zarr


class XmapStore:
    """A Zarr group holding one job's matrix; opened for writing or resuming."""

    def __init__(self, group: Any, params: dict[str, Any]):
        self.group = group
        self.params = params
        self.N = int(params["N"])
        self.block_rows = int(params["block_rows"])

    # -- open / create ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, params: dict[str, Any], *, overwrite: bool = False
             ) -> XmapStore:
        """Create ``path`` for ``params``, or reopen it to resume the same job.

        An existing store made with other parameters (or other data) is refused
        unless ``overwrite``, which deletes it first.
        """
        zarr = _zarr()
        path = Path(path)
        if path.exists():
            old = None
            try:
                old = dict(zarr.open_group(str(path), mode="r").attrs).get(ATTR)
            except Exception:  # noqa: BLE001 - not a readable group: treat as foreign
                old = None
            if old == params:
                return cls(zarr.open_group(str(path), mode="r+"), params)
            if not overwrite:
                diff = ("it is not a pyedmcl xmap store" if old is None else
                        "parameters differ: " + ", ".join(
                            f"{k}={_short(old.get(k))} (now {_short(params.get(k))})"
                            for k in sorted(set(old) | set(params))
                            if old.get(k) != params.get(k)))
                raise ValueError(f"output {str(path)!r} exists and {diff}; "
                                 "pass overwrite=True (--overwrite) to replace it")
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        from .. import __version__

        g = zarr.open_group(str(path), mode="w")
        N, br = int(params["N"]), int(params["block_rows"])
        nblocks = -(-N // br)
        g.create_array("rho", shape=(N, N), chunks=(br, N), dtype="float32",
                       fill_value=np.nan)
        g.create_array("done", shape=(nblocks,), chunks=(1,), dtype="uint8", fill_value=0)
        g.attrs.update({ATTR: params, "pyedmcl_version": __version__,
                        "rho_convention": "rho[i, j]: library series i cross-maps target "
                                          "series j (CCM 'i:j', full library), E = E[j]"})
        return cls(g, params)

    @classmethod
    def open_existing(cls, path: str | Path) -> XmapStore:
        zarr = _zarr()
        g = zarr.open_group(str(path), mode="r+")
        return cls(g, dict(g.attrs)[ATTR])

    # -- blocks -------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return -(-self.N // self.block_rows)

    def block_range(self, b: int) -> tuple[int, int]:
        return b * self.block_rows, min(self.N, (b + 1) * self.block_rows)

    def pending(self) -> list[int]:
        """Blocks not yet marked done (half-written ones included)."""
        done = np.asarray(self.group["done"][:])
        return [int(b) for b in np.flatnonzero(done == 0)]

    def write_block(self, b: int, rows: np.ndarray) -> None:
        r0, r1 = self.block_range(b)
        self.group["rho"][r0:r1, :] = np.asarray(rows, dtype=np.float32)
        self.group["done"][b] = 1

    # -- E vector -----------------------------------------------------------------------------
    def saved_E(self) -> np.ndarray | None:
        return np.asarray(self.group["E"][:]) if "E" in self.group else None

    def save_E(self, E: np.ndarray, edim_rho: np.ndarray | None = None) -> None:
        if edim_rho is not None:
            a = self.group.create_array("edim_rho", shape=edim_rho.shape, dtype="float32",
                                        overwrite=True)
            a[:] = edim_rho.astype(np.float32)
        a = self.group.create_array("E", shape=(self.N,), dtype="int32", overwrite=True)
        a[:] = np.asarray(E, dtype=np.int32)

    @property
    def rho(self) -> Any:
        return self.group["rho"]
