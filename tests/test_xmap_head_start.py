"""The map's head start (:mod:`pyedmcl.xmap.head_start`): a block's k-NN tables enqueued
while the host still prepares the rest of the panel.

* the engine (every platform): its kernels built before the panel is written give the
  matrix of an engine made on the finished panel (the scan and the per-E kernels);
  tables made ahead for some blocks, then every block,
  give the matrix of an engine that made none, bit for bit (one E; mixed E on the
  per-E kernels; blocks of several batches); nothing is enqueued ahead for the fused
  scan's tables or past the budget;
* :class:`HeadStart` with stand-in engines: device d of D takes blocks d, d + D, ...,
  each only once all its rows are written (bands in any order, from several threads);
  close stops the feeding and re-raises a feeding error; a device whose engine
  declines stops; release is idempotent;
* the map with its panel uploaded band by band (GPUs; forced on CPUs): the head start
  claims the blocks and the matrix is the same bit for bit; a map refused after its
  pass releases its head start.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import TEST_DEVICES
from test_xmap import mixed_E, panel

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.xmap import core, engine
from pyedmcl.xmap.core import even_blocks
from pyedmcl.xmap.engine import XmapEngine
from pyedmcl.xmap.head_start import HeadStart


@pytest.fixture(autouse=True)
def _light_maps_too(monkeypatch):
    """Tables ahead for these small maps too (a map makes them only for heavy k-NN)."""
    monkeypatch.setattr(engine, "AHEAD_MIN_TERMS", 0)


@pytest.mark.parametrize("case", ["one E", "mixed E", "batches"])
def test_tables_made_ahead_give_the_same_blocks(device, case, monkeypatch):
    if case == "batches":  # blocks of 7 rows in batches of 3, 3 and 1 libraries
        monkeypatch.setattr(engine, "MAX_BATCH_CPU", 3)
        monkeypatch.setattr(engine, "MAX_BATCH_GPU", 3)
    X = np.ascontiguousarray(panel(L=70, N=20, seed=2).T, np.float32)
    E = np.full(20, 3) if case != "mixed E" else mixed_E(20)
    kw = {"knn_kernel": "batched", "fma": False, "real": "float"}
    be = get_backend(device)
    blocks = [(0, 7), (7, 14), (14, 20)]
    ref = np.vstack([XmapEngine(be, X, E, **kw).block(r0, r1) for r0, r1 in blocks])
    eng = XmapEngine(be, X, E, **kw)
    assert eng.tables_ahead(7, 14) and eng.tables_ahead(0, 7)
    batches = 3 if case == "batches" else 1
    assert len(eng._ahead) == 2 * batches * len(eng.groups)
    got = np.vstack([eng.block(r0, r1) for r0, r1 in blocks])
    np.testing.assert_array_equal(got, ref)
    assert not eng._ahead  # every table made ahead was taken by its block


@pytest.mark.parametrize("knn", ["scan", "batched"])
def test_kernels_built_before_the_panel_is_written(knn):
    """A head start's engine is made, and may build its kernels, before the pass has
    written the panel: nothing the map computes may be taken from the panel then (the
    scan's padded series are read at the first block), so the matrix is that of an engine
    made on the finished panel."""
    be = get_backend(TEST_DEVICES[0])
    if not be.writes_async:
        pytest.skip("the runtime has no asynchronous writes (the head start's uploads)")
    X = np.ascontiguousarray(panel(L=70, N=12, seed=2).T, np.float32)
    E = mixed_E(12)
    kw = {"knn_kernel": knn, "fma": False, "real": "float"}
    ref = XmapEngine(be, X, E, **kw).block(0, 12)
    rows = np.zeros_like(X)  # the pass's panel, not yet written
    buf = be.empty(rows.size, rows.dtype)
    eng = XmapEngine(be, rows, E, x_dev=buf, specialise_later=True, **kw)
    eng.prebuild(12)
    rows[:] = X  # the pass, then its upload
    be.write_async(buf, rows, 0)
    np.testing.assert_array_equal(eng.block(0, 12), ref)
    eng.finish_builds()


def test_no_tables_ahead_for_the_scan_light_k_nn_or_past_the_budget(monkeypatch):
    X = np.ascontiguousarray(panel(L=70, N=12, seed=2).T, np.float32)
    be = get_backend(TEST_DEVICES[0])
    scan = XmapEngine(be, X, mixed_E(12), knn_kernel="scan", fma=False)
    assert not scan.tables_ahead(0, 6) and not scan._ahead
    light = XmapEngine(be, X, np.full(12, 3), knn_kernel="batched", fma=False)
    monkeypatch.setattr(engine, "AHEAD_MIN_TERMS", 3 * 69 * 69)  # 68 rows x 68 x E=3: less
    assert not light.tables_ahead(0, 6) and not light._ahead
    monkeypatch.setattr(engine, "AHEAD_MIN_TERMS", 3 * 68 * 68)
    assert light.tables_ahead(0, 6) and light._ahead
    monkeypatch.setattr(engine, "ahead_budget", lambda info: 1000)
    eng = XmapEngine(be, X, np.full(12, 3), knn_kernel="batched", fma=False)
    assert not eng.tables_ahead(0, 6) and not eng._ahead and eng._ahead_bytes == 0


class _Stand:
    """An engine stand-in: records the blocks it is asked to make tables for."""

    def __init__(self, fail: bool = False, declines: bool = False):
        self.calls: list[tuple[int, int]] = []
        self.fail, self.declines, self.ended = fail, declines, 0
        self.be = SimpleNamespace(finish=lambda: None)

    def tables_ahead(self, r0: int, r1: int) -> bool:
        if self.fail:
            raise RuntimeError("stand-in failure")
        if self.declines:
            return False
        self.calls.append((r0, r1))
        return True

    def finish_builds(self) -> None:
        self.ended += 1


def test_head_start_takes_each_devices_blocks_once_their_rows_are_written():
    blocks = even_blocks(40, 10, 2)  # 4 blocks: device 0 takes 0 and 2, device 1 1 and 3
    a, b = _Stand(), _Stand()
    head = HeadStart([lambda: a, lambda: b], blocks, 40)
    head.written(slice(0, 15))
    assert a.calls == [(0, 10)] and b.calls == []  # block 1 lacks rows 15..19
    head.written(slice(15, 25))
    assert a.calls == [(0, 10)] and b.calls == [(10, 20)]  # block 2 lacks rows 25..29
    head.close()
    head.written(slice(25, 40))  # after close: nothing more
    assert a.calls == [(0, 10)] and b.calls == [(10, 20)]
    assert head.claimed == [[blocks[0]], [blocks[1]]]
    assert head.engines == [a, b]
    head.release()
    head.release()
    assert a.ended == 1 and b.ended == 1 and head.engines == [None, None]


def test_head_start_rows_out_of_order_and_threads():
    """Bands land in any order, from several threads: every block is taken once, in
    order, by its device."""
    blocks = even_blocks(64, 8, 2)
    a, b = _Stand(), _Stand()
    head = HeadStart([lambda: a, lambda: b], blocks, 64)
    bands = [slice(r, r + 4) for r in range(0, 64, 4)][::-1]
    threads = [threading.Thread(target=head.written, args=(sl,)) for sl in bands]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    head.close()
    assert a.calls == [(r0, r1) for _, r0, r1 in blocks[0::2]]
    assert b.calls == [(r0, r1) for _, r0, r1 in blocks[1::2]]


def test_head_start_feeder_errors_and_declines():
    head = HeadStart([lambda: _Stand(fail=True)], even_blocks(20, 10, 1), 20)
    head.written(slice(0, 20))  # the pass goes on: the error waits for close
    with pytest.raises(RuntimeError, match="stand-in failure"):
        head.close()
    no = _Stand(declines=True)
    head = HeadStart([lambda: no, None], even_blocks(20, 5, 2), 20)  # device 1 left alone
    head.written(slice(0, 20))
    head.close()
    assert head.claimed == [[], []] and head.engines == [no, None]


def _claims_at_close(monkeypatch) -> list[list]:
    """The head starts' claims when the map closes them (release closes again)."""
    seen: list[list] = []
    close = HeadStart.close

    def spy(self):
        if not self._closed:
            seen.append([list(c) for c in self.claimed])
        close(self)
    monkeypatch.setattr(HeadStart, "close", spy)
    return seen


def test_map_with_head_start_same_matrix(monkeypatch):
    """Forced on the CPU devices here (GPUs take it by default): one device and, where
    there are two, both; every block's tables were made ahead, on the device that then
    computed the block."""
    X = panel(L=60, N=600, seed=3)
    devs = [d for d in TEST_DEVICES if d != "oclgrind"][:2]
    kw = {"E": 4, "fma": False}
    ref = pe.xmap(X, device=devs[0], **kw)
    monkeypatch.setattr(core, "uploads_early", lambda be: be.writes_async)
    monkeypatch.setattr(core, "PARALLEL_BYTES", 1)
    seen = _claims_at_close(monkeypatch)
    for d in (devs[:1], devs) if len(devs) > 1 else (devs,):
        seen.clear()
        got = pe.xmap(X, devices=d, **kw)
        np.testing.assert_array_equal(got.rho, ref.rho)
        _, blocks = core._row_blocks(600, None, d, None, None, None)
        assert seen == [[blocks[i::len(d)] for i in range(len(d))]]
        assert sum(got.blocks_per_device.values()) == len(blocks)


def test_map_refused_after_its_pass_releases_its_head_start(monkeypatch):
    X = panel(L=60, N=300, seed=3)
    X[5, 7] = np.nan
    monkeypatch.setattr(core, "uploads_early", lambda be: be.writes_async)
    monkeypatch.setattr(core, "PARALLEL_BYTES", 1)
    made = []
    head_start = core._head_start
    monkeypatch.setattr(core, "_head_start",
                        lambda *a, **k: made.append(head_start(*a, **k)) or made[-1])
    with pytest.raises(ValueError, match="NaN"):
        pe.xmap(X, E=3, device=TEST_DEVICES[0], fma=False)
    head = made[0][0]  # there was a head start; it claimed blocks, and it was released
    assert head._closed and head.engines == [None] and head.claimed == [[]]
