"""Zarr output of :func:`pyedmcl.rqa_batch`: one row per series, in blocks of series,
checksummed, resumable.

Layout of ``OUT.zarr`` (a Zarr v3 group):

- ``measures`` (n_series, 14) float64, one chunk per block (``block_series`` rows):
  every measure but the longest lines, and the radius of each series (column names in
  the attribute ``float_columns``), NaN until written.
- ``counts`` (n_series, 8) int64, chunked alike: ``L_max``, ``V_max``, ``W_max``,
  ``n_recurrences``, ``n_cells``, ``N``, ``n_points`` and ``constant`` (1 for a constant
  series: the batch's note names them) (``int_columns``). Kept apart from the floats so
  that counts beyond 2**53 stay exact.
- ``block_sha256`` (n_blocks, 32) uint8, one chunk per block: the sha256 of the block's
  bytes, its index and series range, and the job's key (a hash of the parameters, the
  data's checksum included).
- ``done`` (n_blocks,) uint8, one chunk per element: 1 once the block's rows and their
  checksum are written (rows first, checksum second, flag third: a block cut off mid-write
  is never marked and is computed again on resume).
- ``.pyedmcl-manifest.json``: every file of the store, listed before it is written
  (:class:`pyedmcl._outputs.Manifest`): ``overwrite`` deletes the store only when nothing
  else is inside.
- attributes: ``pyedmcl_owned`` (the ownership marker), ``pyedmcl_rqa_batch`` (the job's
  parameters and the layout of the result: column names, or a DataArray's dimensions,
  shape and coordinates), ``pyedmcl_version``.

Blocks are written by the one process that runs the job (the rows of a block are a few
hundred bytes per series: Dask workers return them), under the job's output lock
(:func:`pyedmcl._outputs.output_lock`). Every array carries Zarr v3 dimension names, so
``xarray.open_zarr`` reads the store too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from .._outputs import (
    RQA_BATCH_STORE,
    Manifest,
    array_files,
    check_replaceable,
    dumps_json,
    marker_info,
    open_store_group,
    remove_owned,
    stored_params,
    zarr_module,
)
from .measures import MEASURES

ATTR = "pyedmcl_rqa_batch"
OWNED_ATTR = "pyedmcl_owned"
DIGEST = "block_sha256"
#: the measures that are integers (the longest lines)
INT_MEASURES = ("L_max", "V_max", "W_max")
#: the float64 and int64 columns of a row, as the store keeps them
FLOATS = (*(k for k in MEASURES if k not in INT_MEASURES), "radius")
INTS = (*INT_MEASURES, "n_recurrences", "n_cells", "N", "n_points", "constant")


def normalised(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as they read back from the store's attributes (JSON: tuples become
    lists, NumPy values plain numbers), so that a resumed job compares equal."""
    return json.loads(dumps_json(params))


def rows_of_frame(df: Any, constant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The store's two arrays of a block of batch rows (a frame with every column) and
    the flags of its constant series."""
    ints = np.empty((len(df), len(INTS)), np.int64)
    ints[:, :-1] = df[list(INTS[:-1])].to_numpy(np.int64)
    ints[:, -1] = np.asarray(constant, bool)
    return np.ascontiguousarray(df[list(FLOATS)].to_numpy(np.float64)), ints


class BatchStore:
    """A Zarr group holding one batch job's rows; opened to write, resume or read."""

    def __init__(self, group: Any, params: dict[str, Any], path: str | Path):
        self.group, self.params, self.path = group, params, str(path)
        self.n = int(params["n_series"])
        self.block_series = int(params["block_series"])
        h = hashlib.sha256(b"pyedmcl-rqa-batch-job\0")
        h.update(json.dumps(params, sort_keys=True).encode())
        self._key = h.digest()

    @classmethod
    def open(cls, path: str | Path, params: dict[str, Any], *, overwrite: bool = False
             ) -> BatchStore:
        """Create ``path`` for ``params`` (normalised: :func:`normalised`), or reopen it to
        resume the same job. A store of other parameters or data is refused unless
        ``overwrite``, which deletes it first, and only a store pyedmcl wrote
        (:func:`pyedmcl._outputs.check_replaceable`)."""
        zarr = zarr_module()
        path = Path(path)
        if path.exists() or path.is_symlink():
            ours, old = stored_params(path, RQA_BATCH_STORE, ATTR)
            if old == params:
                st = cls(zarr.open_group(str(path), mode="r+"), params, path)
                st._check_layout()
                return st
            if not overwrite and not (ours and old is None):  # (ours, cut off while created)
                if old is None:
                    check_replaceable(path, RQA_BATCH_STORE)  # names why not
                    diff = "it is not a pyedmcl rqa_batch store"
                else:
                    diff = "parameters differ: " + ", ".join(
                        f"{k}={_short(old.get(k))} (now {_short(params.get(k))})"
                        for k in sorted(set(old) | set(params)) if old.get(k) != params.get(k))
                raise ValueError(f"out={str(path)!r} exists and {diff}; pass overwrite=True "
                                 "(--overwrite) to replace it, or another out= path")
            remove_owned(path, RQA_BATCH_STORE)
        return cls._create(path, params)

    @classmethod
    def _create(cls, path: Path, params: dict[str, Any]) -> BatchStore:
        from .._version import __version__

        zarr = zarr_module()
        n, bs = int(params["n_series"]), int(params["block_series"])
        nb = -(-n // bs)
        # every file is listed first; the marker comes with the group, the parameters last
        # (a store cut off while being created is recognised as ours and made again)
        Manifest(path, RQA_BATCH_STORE).add(
            "zarr.json", *array_files("measures", (n, len(FLOATS)), (bs, len(FLOATS))),
            *array_files("counts", (n, len(INTS)), (bs, len(INTS))),
            *array_files(DIGEST, (nb, 32), (1, 32)), *array_files("done", (nb,), (1,)))
        g = zarr.create_group(str(path), overwrite=False, zarr_format=3,
                              attributes={OWNED_ATTR: marker_info(RQA_BATCH_STORE)})
        g.create_array("measures", shape=(n, len(FLOATS)), chunks=(bs, len(FLOATS)),
                       dtype="float64", fill_value=np.nan,
                       dimension_names=("series", "float_column"))
        g.create_array("counts", shape=(n, len(INTS)), chunks=(bs, len(INTS)), dtype="int64",
                       fill_value=0, dimension_names=("series", "int_column"))
        g.create_array(DIGEST, shape=(nb, 32), chunks=(1, 32), dtype="uint8", fill_value=0,
                       dimension_names=("block", "byte"))
        g.create_array("done", shape=(nb,), chunks=(1,), dtype="uint8", fill_value=0,
                       dimension_names=("block",))
        g.attrs.update({"float_columns": list(FLOATS), "int_columns": list(INTS),
                        "pyedmcl_version": __version__, ATTR: params})
        return cls(g, params, path)

    @classmethod
    def open_existing(cls, path: str | Path, *, mode: str = "r") -> BatchStore:
        """The store at ``path`` (``ValueError`` if it is not an rqa_batch store)."""
        g, params = open_store_group(path, "rqa_batch", ATTR, mode)
        st = cls(g, params, path)
        st._check_layout()
        return st

    def _check_layout(self) -> None:
        nb = self.n_blocks
        want = {"measures": (self.n, len(FLOATS)), "counts": (self.n, len(INTS)),
                DIGEST: (nb, 32), "done": (nb,)}
        for name, shape in want.items():
            if name not in self.group or tuple(self.group[name].shape) != shape:
                raise ValueError(f"rqa_batch store {self.path!r} is damaged: array {name!r} "
                                 f"is missing or not of shape {shape}; pass overwrite=True "
                                 "(--overwrite) to compute it again")

    # -- blocks -------------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return -(-self.n // self.block_series)

    def block_range(self, b: int) -> tuple[int, int]:
        return b * self.block_series, min(self.n, (b + 1) * self.block_series)

    def digest(self, b: int, floats: np.ndarray, ints: np.ndarray) -> bytes:
        """sha256 of block ``b``'s rows, its index and series range, and the job key."""
        s0, s1 = self.block_range(b)
        h = hashlib.sha256(b"pyedmcl-rqa-batch-block\0")
        h.update(self._key)
        h.update(np.array([b, s0, s1], np.int64).tobytes())
        for a, dt in ((floats, np.float64), (ints, np.int64)):
            a = np.ascontiguousarray(a, dtype=dt)
            h.update(np.array(a.shape, np.int64).tobytes())
            h.update(memoryview(a).cast("B"))
        return h.digest()

    def write_block(self, b: int, floats: np.ndarray, ints: np.ndarray) -> None:
        """Block ``b``'s rows, then its checksum, then its done flag."""
        s0, s1 = self.block_range(b)
        if floats.shape != (s1 - s0, len(FLOATS)) or ints.shape != (s1 - s0, len(INTS)):
            raise ValueError(f"block {b}: rows of shape {floats.shape}/{ints.shape} for "
                             f"series {s0}..{s1 - 1}")
        digest = self.digest(b, floats, ints)
        self.group["measures"][s0:s1, :] = floats
        self.group["counts"][s0:s1, :] = ints
        self.group[DIGEST][b, :] = np.frombuffer(digest, np.uint8)
        self.group["done"][b] = 1

    def check_blocks(self) -> tuple[list[int], list[int]]:
        """(bad, incomplete) blocks: marked done but failing their checksum (or
        unreadable), and not written yet."""
        try:
            done = np.asarray(self.group["done"][:])
            digests = np.asarray(self.group[DIGEST][:])
        except Exception:  # noqa: BLE001 - a damaged chunk: every block is redone
            return list(range(self.n_blocks)), []
        bad, incomplete = [], []
        for b in range(self.n_blocks):
            if int(done[b]) == 0:
                incomplete.append(b)
                continue
            s0, s1 = self.block_range(b)
            try:
                ok = int(done[b]) == 1 and bytes(digests[b]) == self.digest(
                    b, np.asarray(self.group["measures"][s0:s1]),
                    np.asarray(self.group["counts"][s0:s1]))
            except Exception:  # noqa: BLE001 - a truncated or undecodable chunk
                ok = False
            if not ok:
                bad.append(b)
        return bad, incomplete

    def pending(self) -> list[int]:
        """Blocks to compute: not written yet, or failing their checksum."""
        bad, incomplete = self.check_blocks()
        return sorted(bad + incomplete)

    def frame(self) -> tuple[Any, np.ndarray]:
        """Every row as a ``pandas.DataFrame`` (positions as index, the columns in the
        order of :func:`pyedmcl.rqa_batch`'s frame) and the constant series' flags."""
        import pandas as pd

        from .batch_result import EXTRA

        f = np.asarray(self.group["measures"][:])
        i = np.asarray(self.group["counts"][:])
        cols = {**{k: f[:, j] for j, k in enumerate(FLOATS)},
                **{k: i[:, j] for j, k in enumerate(INTS)}}
        return pd.DataFrame({k: cols[k] for k in (*MEASURES, *EXTRA)}), i[:, -1] != 0


def _short(v: Any, n: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n - 5] + " ...]"


def rqa_batch_open(path: str | Path, *, verify: bool = True) -> Any:
    """The rows of the finished :func:`pyedmcl.rqa_batch` store at ``path``: a
    ``pandas.DataFrame`` indexed by the series' names, or an ``xarray.Dataset`` of maps
    for a DataArray's job, as the call returned them.

    With ``verify`` (default) every block is checked against its checksum first; a store
    with bad or unwritten blocks is refused (``ValueError`` naming them: rerun the same
    ``rqa_batch`` call to compute them). A DataArray's coordinates come back as the JSON
    of the store's attributes (numbers, strings).
    """
    from .batch_result import result_of

    st = BatchStore.open_existing(path, mode="r")
    if verify:
        bad, incomplete = st.check_blocks()
        if bad or incomplete:
            raise ValueError(f"rqa_batch store {str(path)!r}: blocks {sorted(bad)[:10]} fail "
                             f"their checksum, blocks {incomplete[:10]} are not written yet "
                             f"(of {st.n_blocks}); rerun the same rqa_batch call to compute "
                             "them")
    df, constant = st.frame()
    return result_of(df, st.params["layout"], constant)
