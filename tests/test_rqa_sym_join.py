"""SYM's join through the diagonal on the device (``rqa_symjoin``) against its NumPy
reference (:func:`pyedmcl.rqa.dnr.sym_join_reference`), on every platform present:
random open runs of both colours, rows with and without a last run, runs reaching row 0
and the bottom border, and lengths past the histogram (dropped by both)."""

from __future__ import annotations

import numpy as np
import pytest

from pyedmcl.kernels.rqa_lines import RQA_LINES
from pyedmcl.rqa.dnr import sym_join_reference


def _inputs(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Carryovers and row runs as the SYM launches leave them: column j's open run (black
    in vr or white in wr, at most j cells: 0 for column 0) and row j's first and last
    runs (length | colour << 31, at most n - 1 - j cells), with the border lengths
    common."""
    rng = np.random.default_rng(seed)
    j = np.arange(n)
    a = np.where(rng.random(n) < 0.3, j, rng.integers(0, j + 1))       # often to row 0
    black = rng.random(n) < 0.5
    vr = np.where(black, a, 0).astype(np.uint32)
    wr = np.where(black, 0, a).astype(np.uint32)
    npts = rng.integers(0, n, n).astype(np.uint32)
    below = n - 1 - j
    hl = np.where(rng.random(n) < 0.3, below, rng.integers(0, below + 1))
    head = (hl | (rng.integers(0, 2, n) << 31) * (hl > 0)).astype(np.uint32)
    tl = np.where(hl < below, rng.integers(0, below - hl + 1), 0)
    tail = (tl | (rng.integers(0, 2, n) << 31) * (tl > 0)).astype(np.uint32)
    return vr, wr, npts, head, tail


@pytest.mark.parametrize("diag_black", [True, False])
@pytest.mark.parametrize("white_border", [True, False])
def test_sym_join_matches_reference(device, diag_black, white_border):
    import clkernels

    be = clkernels.get_backend(device)
    n = 1000
    vr, wr, npts, head, tail = _inputs(n, seed=int(diag_black) + 2 * int(white_border))
    for hlen in (n + 1, 300):                 # every length; the longer ones dropped
        hv, hw = be.zeros(hlen, np.uint32), be.zeros(hlen, np.uint32)
        col = tuple(be.to_device(a) for a in (vr, wr, npts))
        rows = tuple(be.to_device(a) for a in (head, tail))
        nsum = RQA_LINES.sym_join(be, col, rows, 0, n, n, diag_black, white_border, hlen,
                                  hv, hw)
        v, w, n_rec = sym_join_reference(vr.astype(np.int64), wr.astype(np.int64),
                                         npts.astype(np.int64), head.astype(np.int64),
                                         tail.astype(np.int64), diag_black, white_border,
                                         hlen)
        assert np.array_equal(be.to_host(hv).astype(np.uint64), v)
        assert np.array_equal(be.to_host(hw).astype(np.uint64), w)
        assert 2 * int(be.to_host(nsum).sum()) + n * diag_black == n_rec
        assert v.sum() + w.sum() > n // 2       # the cases counted something
