"""Zarr output of an all-to-all map: row blocks, completion markers, checksums, resume.

Layout of ``OUT.zarr`` (a Zarr group):

- ``rho``  (N, N) float32, one chunk per row block (``block_rows`` x N);
  ``rho[i, j]`` = library ``i`` cross-mapping target ``j`` (see
  :mod:`pyedmcl.xmap.engine`). NaN until written.
- ``block_sha256`` (n_blocks, 32) uint8, one chunk per block: the sha256 of the
  block's float32 bytes, its index and row range, and the job's key (a hash of the
  parameters, data checksum included, and of the E vector).
- ``done`` (n_blocks,) uint8, one chunk per element: 1 once the block's rho chunk
  and its checksum are completely written. A block is written first, its checksum
  second, marked third, so a block cut off mid-write is never marked and is
  recomputed on resume.
- with surrogates (``xmap(..., surrogates=n)``): ``p_value``, ``null_mean``,
  ``null_q95`` (N, N) float32, chunked like ``rho``: per pair the surrogate test's
  p-value and its null's mean and 95% quantile (:mod:`pyedmcl.significance`); a block's
  checksum then covers them too (stores without surrogates keep the former checksum).
- ``E``    (N,) int32: the embedding dimension of each target series;
  ``edim_rho`` (N, E_max) float32 when E was chosen automatically.
- ``.pyedmcl-manifest.json``: every file of the store, each listed before it is
  written (:class:`pyedmcl._outputs.Manifest`); ``overwrite`` deletes the store only
  when nothing else is inside it.
- attributes: ``pyedmcl_owned`` (the ownership marker: ``overwrite`` deletes only
  an owned store, see :mod:`pyedmcl._outputs`), ``pyedmcl_xmap`` = the job's
  parameters (data checksum included), ``pyedmcl_E_sha256`` (checksum of the
  parameters, ``E`` and ``edim_rho``), ``pyedmcl_version``.

Verification (:meth:`XmapStore.verify`, one pass over the blocks): a block is good
when it is marked done and its stored checksum equals the checksum of the bytes
read back. So flipped bytes, truncated or deleted chunks, chunks swapped between
blocks or copied from another store, edited ``done`` flags, and edited parameters
or E vectors (every checksum then changes) are all caught: on resume such blocks
are recomputed, :func:`xmap_open` refuses them by index.

Each block touches only its own chunks, so writers (threads, processes, Dask
workers on a shared file system) of one job never need a lock; two jobs on one
store are kept apart by the job's output lock (:func:`pyedmcl._outputs.output_lock`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._outputs import (
    XMAP_STORE,
    Manifest,
    array_files,
    check_replaceable,
    marker_info,
    open_store_group,
    remove_owned,
    stored_params,
    zarr_module,
)
from .results import XmapResult

ATTR = "pyedmcl_xmap"
E_ATTR = "pyedmcl_E_sha256"
OWNED_ATTR = "pyedmcl_owned"
DIGEST = "block_sha256"
#: per-pair arrays of a job with surrogates, beside ``rho`` (same shape and chunks)
SURROGATE_ARRAYS = ("p_value", "null_mean", "null_q95")

log = logging.getLogger("pyedmcl.xmap.store")


def data_checksum(X: np.ndarray) -> str:
    """sha256 of the (N, n) float32 data as the job sees it."""
    a = np.ascontiguousarray(X, dtype=np.float32)
    h = hashlib.sha256()
    h.update(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _params_bytes(params: dict[str, Any]) -> bytes:
    return json.dumps(params, sort_keys=True, default=str).encode()


def _short(v: Any, n: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n - 5] + " ...]"


def _ranges(idx: list[int], block_rows: int, N: int) -> str:
    """``"1 (rows 4-7), 3 (rows 12-13)"``: blocks and the matrix rows they hold."""
    return ", ".join(f"{b} (rows {b * block_rows}-{min(N, (b + 1) * block_rows) - 1})"
                     for b in idx[:10]) + (" ..." if len(idx) > 10 else "")


@dataclass
class StoreCheck:
    """The verdict of :meth:`XmapStore.verify`.

    ``bad``: blocks marked done whose bytes do not match their checksum (or cannot be
    read, or carry an invalid flag); ``incomplete``: blocks not written yet;
    ``E_ok``: the stored E vector (and ``edim_rho``) matches its checksum.
    """

    path: str
    N: int
    n_blocks: int
    block_rows: int
    bad: list[int] = field(default_factory=list)
    incomplete: list[int] = field(default_factory=list)
    E_ok: bool = True

    @property
    def ok(self) -> bool:
        """A finished store whose every block and E vector verify."""
        return self.E_ok and not self.bad and not self.incomplete

    def summary(self) -> str:
        """One line: what failed, by block index and rows, and the remedy."""
        if self.ok:
            return (f"xmap store {self.path!r}: verified, {self.n_blocks} blocks of "
                    f"{self.block_rows} rows, every checksum matches")
        parts = []
        if not self.E_ok:
            parts.append("its E vector fails its checksum")
        if self.bad:
            parts.append(f"{len(self.bad)} of {self.n_blocks} blocks fail their checksum: "
                         + _ranges(self.bad, self.block_rows, self.N))
        if self.incomplete:
            parts.append(f"{len(self.incomplete)} of {self.n_blocks} blocks are not written "
                         "yet: " + _ranges(self.incomplete, self.block_rows, self.N))
        return (f"xmap store {self.path!r}: " + "; ".join(parts)
                + "; rerun the same xmap command to recompute them")

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "N": self.N, "n_blocks": self.n_blocks,
                "block_rows": self.block_rows, "bad_blocks": self.bad,
                "incomplete_blocks": self.incomplete, "E_ok": self.E_ok}


class XmapStore:
    """A Zarr group holding one job's matrix; opened for writing, resuming or verifying."""

    def __init__(self, group: Any, params: dict[str, Any], path: str | Path | None = None):
        self.group = group
        self.params = params
        self.path = str(path) if path is not None else str(getattr(group.store, "root", ""))
        self.N = int(params["N"])
        self.block_rows = int(params["block_rows"])
        #: the per-pair arrays beside rho (a job with surrogates), in checksum order
        self.extras: tuple[str, ...] = SURROGATE_ARRAYS if params.get("surrogates") else ()
        self._key: bytes | None = None

    # -- open / create ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, params: dict[str, Any], *, overwrite: bool = False
             ) -> XmapStore:
        """Create ``path`` for ``params``, or reopen it to resume the same job.

        An existing store made with other parameters (or other data) is refused
        unless ``overwrite``, which deletes it first, and only when it is a store
        pyedmcl wrote (:func:`pyedmcl._outputs.check_replaceable`): a foreign
        folder, a file, the current directory or a parent of it are never deleted.
        """
        zarr = zarr_module()
        path = Path(path)
        if path.exists() or path.is_symlink():
            ours, old = stored_params(path, XMAP_STORE, ATTR)
            if old == params:
                Manifest.adopt(path, XMAP_STORE)  # a store written before manifests
                st = cls(zarr.open_group(str(path), mode="r+"), params, path)
                st._check_layout()
                return st
            if not overwrite and not (ours and old is None):  # (ours, cut off while created)
                if old is None:
                    check_replaceable(path, XMAP_STORE)  # names why it could not be replaced
                    diff = "it is not a pyedmcl xmap store"
                else:
                    diff = "parameters differ: " + ", ".join(
                        f"{k}={_short(old.get(k))} (now {_short(params.get(k))})"
                        for k in sorted(set(old) | set(params)) if old.get(k) != params.get(k))
                raise ValueError(f"output {str(path)!r} exists and {diff}; "
                                 "pass overwrite=True (--overwrite) to replace it")
            remove_owned(path, XMAP_STORE)
        from .._version import __version__

        N, br = int(params["N"]), int(params["block_rows"])
        nblocks = -(-N // br)
        # every file the job writes is listed first (its manifest names the store as
        # ours even before the group exists); the ownership marker comes with the
        # group's first write, the parameters last, so a store cut off while being
        # created is recognised as ours and recreated
        arrays = ["rho", *(SURROGATE_ARRAYS if params.get("surrogates") else ())]
        Manifest(path, XMAP_STORE).add(
            "zarr.json", *(f for a in arrays for f in array_files(a, (N, N), (br, N))),
            *array_files(DIGEST, (nblocks, 32), (1, 32)),
            *array_files("done", (nblocks,), (1,)))
        g = zarr.create_group(str(path), overwrite=False, zarr_format=3,
                              attributes={OWNED_ATTR: marker_info(XMAP_STORE)})
        for name in arrays:
            g.create_array(name, shape=(N, N), chunks=(br, N), dtype="float32",
                           fill_value=np.nan)
        g.create_array(DIGEST, shape=(nblocks, 32), chunks=(1, 32), dtype="uint8",
                       fill_value=0)
        g.create_array("done", shape=(nblocks,), chunks=(1,), dtype="uint8", fill_value=0)
        g.attrs.update({ATTR: params, "pyedmcl_version": __version__,
                        "rho_convention": "rho[i, j]: library series i cross-maps target "
                                          "series j (CCM 'i:j', full library), E = E[j]"})
        return cls(g, params, path)

    @classmethod
    def open_existing(cls, path: str | Path, *, mode: str = "r+") -> XmapStore:
        """Open the finished or running store at ``path`` (``mode="r"``: read only)."""
        g, params = open_store_group(path, "xmap", ATTR, mode)
        st = cls(g, params, path)
        st._check_layout()
        return st

    def _check_layout(self) -> None:
        """The arrays must have the shapes the parameters imply (else: damaged store)."""
        g, nb = self.group, self.n_blocks
        want = {"rho": (self.N, self.N), "done": (nb,)}
        want.update({name: (self.N, self.N) for name in self.extras})
        for name, shape in want.items():
            if name not in g or tuple(g[name].shape) != shape:
                raise ValueError(f"xmap store {self.path!r} is damaged: array {name!r} is "
                                 f"missing or not of shape {shape}; pass overwrite=True "
                                 "(--overwrite) to recompute it")
        if DIGEST not in g or tuple(g[DIGEST].shape) != (nb, 32):
            if getattr(g.store, "read_only", False):
                return  # an older store without checksums: verify reports every block bad
            # a store of an older pyedmcl without checksums: every block is recomputed
            self._manifest().add(*array_files(DIGEST, (nb, 32), (1, 32)))
            g.create_array(DIGEST, shape=(nb, 32), chunks=(1, 32), dtype="uint8",
                           fill_value=0, overwrite=True)

    def _manifest(self) -> Manifest:
        """The store's manifest (one is made for a store written before manifests)."""
        return Manifest.adopt(self.path, XMAP_STORE)

    # -- blocks -------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return -(-self.N // self.block_rows)

    def block_range(self, b: int) -> tuple[int, int]:
        return b * self.block_rows, min(self.N, (b + 1) * self.block_rows)

    def bind_E(self, E: np.ndarray) -> None:
        """Fix the E vector the blocks are computed with (part of every block checksum)."""
        h = hashlib.sha256(b"pyedmcl-xmap-job\0")
        h.update(_params_bytes(self.params))
        h.update(np.ascontiguousarray(E, dtype=np.int32).tobytes())
        self._key = h.digest()

    def _job_key(self) -> bytes:
        if self._key is None and self.saved_E() is None:
            raise ValueError(f"xmap store {self.path!r}: the E vector is missing or fails "
                             "its checksum")
        assert self._key is not None
        return self._key

    def block_digest(self, b: int, rows: np.ndarray,
                     extra: dict[str, np.ndarray] | None = None) -> bytes:
        """sha256 of block ``b``'s float32 rows, its index and rows, and the job key; with
        surrogates also of the block's rows of every array in :attr:`extras` (in order)."""
        r0, r1 = self.block_range(b)
        a = np.ascontiguousarray(rows, dtype=np.float32)
        h = hashlib.sha256(b"pyedmcl-xmap-block\0")
        h.update(self._job_key())
        h.update(np.array([b, r0, r1, a.shape[0], a.shape[1] if a.ndim == 2 else -1],
                          np.int64).tobytes())
        h.update(memoryview(a).cast("B"))
        for name in self.extras:
            e = np.ascontiguousarray((extra or {})[name], dtype=np.float32)
            if e.shape != a.shape:
                raise ValueError(f"block {b}: {name} has shape {e.shape}, rho {a.shape}")
            h.update(name.encode() + b"\0")
            h.update(memoryview(e).cast("B"))
        return h.digest()

    def _per_block(self, name: str, sl: Any = slice(None)) -> list[Any]:
        """``group[name][b]`` for every block, None where it cannot be read."""
        arr = self.group[name]
        try:
            whole = np.asarray(arr[:])
            return [whole[b] for b in range(self.n_blocks)]
        except Exception:  # noqa: BLE001 - a damaged chunk: read block by block
            out: list[Any] = []
            for b in range(self.n_blocks):
                try:
                    out.append(np.asarray(arr[b]))
                except Exception:  # noqa: BLE001
                    out.append(None)
            return out

    def check_blocks(self) -> tuple[list[int], list[int]]:
        """(bad, incomplete) block indices, in one pass over the blocks (see :class:`StoreCheck`)."""
        done = self._per_block("done")
        digests = self._per_block(DIGEST) if DIGEST in self.group else [None] * self.n_blocks
        bad, incomplete = [], []
        for b in range(self.n_blocks):
            flag = done[b]
            if flag is not None and int(flag) == 0:
                incomplete.append(b)
                continue
            ok = flag is not None and int(flag) == 1 and digests[b] is not None
            if ok:
                r0, r1 = self.block_range(b)
                try:
                    rows = np.asarray(self.group["rho"][r0:r1, :])
                    extra = {name: np.asarray(self.group[name][r0:r1, :])
                             for name in self.extras}
                    ok = bytes(np.asarray(digests[b], np.uint8)) == self.block_digest(
                        b, rows, extra)
                except Exception:  # noqa: BLE001 - a truncated / undecodable chunk
                    ok = False
            if not ok:
                bad.append(b)
        return bad, incomplete

    def pending(self) -> list[int]:
        """Blocks to (re)compute: not marked done, or failing their checksum."""
        bad, incomplete = self.check_blocks()
        if bad:
            log.warning("xmap store %s: block(s) %s fail their checksum; recomputing them",
                        self.path, _ranges(bad, self.block_rows, self.N))
        return sorted(bad + incomplete)

    def write_block(self, b: int, rows: np.ndarray,
                    extra: dict[str, np.ndarray] | None = None) -> None:
        """Block ``b``'s rho rows (and, with surrogates, its rows of every array in
        :attr:`extras`, given in ``extra``), then its checksum, then its done flag."""
        r0, r1 = self.block_range(b)
        rows = np.asarray(rows, dtype=np.float32)
        digest = self.block_digest(b, rows, extra)  # also checks that every extra is there
        for name in self.extras:
            self.group[name][r0:r1, :] = np.asarray(extra[name], dtype=np.float32)
        self.group["rho"][r0:r1, :] = rows
        self.group[DIGEST][b, :] = np.frombuffer(digest, np.uint8)
        self.group["done"][b] = 1

    def verify(self) -> StoreCheck:
        """Check every block and the E vector against their checksums (one pass)."""
        E_ok = self.saved_E() is not None
        if E_ok:
            bad, incomplete = self.check_blocks()
        else:  # no trustworthy E: no block can be trusted either
            bad, incomplete = list(range(self.n_blocks)), []
        return StoreCheck(self.path, self.N, self.n_blocks, self.block_rows, bad, incomplete,
                          E_ok)

    # -- E vector -----------------------------------------------------------------------------
    def _E_digest(self, E: np.ndarray, edim_rho: np.ndarray | None) -> str:
        h = hashlib.sha256(b"pyedmcl-xmap-E\0")
        h.update(_params_bytes(self.params))
        h.update(np.ascontiguousarray(E, dtype=np.int32).tobytes())
        if edim_rho is not None:
            h.update(np.ascontiguousarray(edim_rho, dtype=np.float32).tobytes())
        return h.hexdigest()

    def saved_E(self) -> np.ndarray | None:
        """The stored E vector if it (and ``edim_rho``) match their checksum, else None
        (then E is recomputed on resume); binds it to the block checksums."""
        if "E" not in self.group:
            return None
        try:
            E = np.asarray(self.group["E"][:])
            er = np.asarray(self.group["edim_rho"][:]) if "edim_rho" in self.group else None
        except Exception:  # noqa: BLE001 - a damaged chunk
            return None
        if E.shape != (self.N,) or dict(self.group.attrs).get(E_ATTR) != self._E_digest(E, er):
            return None
        self.bind_E(E)
        return E

    def save_E(self, E: np.ndarray, edim_rho: np.ndarray | None = None) -> None:
        E = np.asarray(E, dtype=np.int32)
        files = array_files("E", (self.N,), (self.N,))
        if edim_rho is not None:
            edim_rho = np.asarray(edim_rho, dtype=np.float32)
            files += array_files("edim_rho", edim_rho.shape, edim_rho.shape)
        self._manifest().add(*files)
        if edim_rho is not None:
            a = self.group.create_array("edim_rho", shape=edim_rho.shape,
                                        chunks=edim_rho.shape, dtype="float32",
                                        overwrite=True)
            a[:] = edim_rho
        elif "edim_rho" in self.group:
            del self.group["edim_rho"]
        a = self.group.create_array("E", shape=(self.N,), chunks=(self.N,), dtype="int32",
                                    overwrite=True)
        a[:] = E
        self.group.attrs[E_ATTR] = self._E_digest(E, edim_rho)
        self.bind_E(E)

    @property
    def rho(self) -> Any:
        return self.group["rho"]


class StoreCorruptError(ValueError):
    """A finished xmap store failed verification (the bad block indices are named)."""

    def __init__(self, msg: str, check: StoreCheck):
        super().__init__(msg)
        self.check = check


def xmap_verify(path: str | Path) -> StoreCheck:
    """Verify the xmap store at ``path`` without changing it: every block's bytes and the
    E vector against their checksums, in one pass. Returns a :class:`StoreCheck`
    (``.ok``, ``.bad`` and ``.incomplete`` block indices); ``ValueError`` if ``path`` is
    not an xmap store. Rerunning the same ``pe.xmap`` call recomputes bad blocks."""
    return XmapStore.open_existing(path, mode="r").verify()


def xmap_open(path: str | Path, *, verify: bool = True) -> Any:
    """Open a finished xmap store read-only as an :class:`~pyedmcl.xmap.results.XmapResult`
    (``rho`` is the Zarr array, ``E`` the embedding dimensions).

    With ``verify`` (default) every block is checked first (:func:`xmap_verify`) and a
    store with bad or unwritten blocks is refused with a :class:`StoreCorruptError`
    (a ``ValueError``) naming them, so damaged numbers are never used silently.
    """
    st = XmapStore.open_existing(path, mode="r")
    if verify:
        chk = st.verify()
        if not chk.ok:
            raise StoreCorruptError(chk.summary(), chk)
    if verify:
        E = st.saved_E()
    else:
        E = np.asarray(st.group["E"][:]) if "E" in st.group else None
    er = np.asarray(st.group["edim_rho"][:]) if "edim_rho" in st.group else None
    sig = {name: st.group[name] for name in st.extras}
    return XmapResult(rho=st.rho, E=E, names=None, edim_rho=er, path=str(path),
                      surrogates=int(st.params.get("surrogates") or 0) or None, **sig)
