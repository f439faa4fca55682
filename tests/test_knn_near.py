"""The k-NN kernel's NEAR contract (knn.cl.mako) and float32 Simplex on it.

A table widened for the row check keeps its last NEAR entries only for near-ties of the
(K - NEAR)-th neighbour: its first K - NEAR entries equal the full table's, every full
entry within the lookup's margin (RESOLVE_WIDTHS float32 bounds past entry K - 1 - NEAR,
lookup/_resolve.mako) is kept with the same point and distance, and past the margin
entries may be empty. The rows variant (GPUs) implements it; forced here on every
device, with SLIDE and SPLIT, on data with and without ties. Then the checked Simplex
call on that variant: the same results as the float64 call where it resolves rows, and
as the full table's call everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_row_check import lorenz_x, near_repeats
from test_row_resolve import spy  # noqa: F401  (the fixture)

import pyedmcl as pe
from clkernels import get_backend
from pyedmcl.kernels.knn import KNN
from pyedmcl.primitives.knn import knn_device
from pyedmcl.primitives.ranges import resolve

ROWS = {"VARIANT": "rows", "WG": 32, "TILE": 64, "QB": 1, "EA": 2, "INS": "reg", "FLAG": 1,
        "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 0}
#: the lookup's margin in float32 distance bounds past entry K - 1 - NEAR
RESOLVE_WIDTHS = 12


def _series(kind: str, n: int = 1200) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = {"noise": rng.standard_normal(n), "grid": np.round(rng.standard_normal(n), 1),
         "near_repeats": near_repeats(n)}[kind]
    return (x - x.mean()).astype(np.float32)


@pytest.mark.parametrize("kind", ["noise", "grid", "near_repeats"])
@pytest.mark.parametrize("layout", [{}, {"SLIDE": 8}, {"SPLIT": 4, "EA": 0}],
                         ids=["plain", "slide", "split"])
def test_near_entries_are_the_full_tables_within_the_margin(device, kind, layout):
    be = get_backend(device)
    x = _series(kind)
    E, tau, k0, near = 4, 2, 5, 2
    plan = resolve(x.size, E=E, tau=tau, Tp=1, knn=k0, exclusion_radius=0, lib=None, pred=None)
    kw = dict(E=E, tau=tau, k=k0 + near, qpts=plan.pred_points, lpts=plan.lib_points, radius=0,
              params={**ROWS, **layout})
    xd = be.to_device(x)
    full, part = knn_device(be, xd, x.size, **kw), knn_device(be, xd, x.size, **kw, near=near)
    fi, fd = be.to_host(full.idx)[0], be.to_host(full.dist)[0]
    ni, nd = be.to_host(part.idx)[0], be.to_host(part.dist)[0]
    np.testing.assert_array_equal(ni[:, :k0], fi[:, :k0])
    np.testing.assert_array_equal(nd[:, :k0], fd[:, :k0])
    p, xs = plan.pred_points, x.astype(np.float64)
    qn = np.sqrt(sum(xs[p + m * tau] ** 2 for m in range(E)))
    dk = nd[:, k0 - 1].astype(np.float64)
    margin = dk + RESOLVE_WIDTHS * 2.0 ** -23 * (2 * qn + (E + 4) * dk)
    kept = ni[:, k0:] >= 0
    np.testing.assert_array_equal(ni[:, k0:][kept], fi[:, k0:][kept])
    np.testing.assert_array_equal(nd[:, k0:][kept], fd[:, k0:][kept])
    assert not (fd[:, k0:] <= margin[:, None])[~kept].any(), "a near-tie was dropped"
    assert (np.diff(kept.astype(int), axis=1) <= 0).all(), "an entry after an empty one"
    if kind != "noise":
        assert kept.any(), "no near-tie kept: the case tests nothing"
    else:
        assert kept.sum() < kept.size // 10, "the margin keeps far points"


@pytest.mark.parametrize("case", ["near_repeats", "decimals", "dense_1d"])
def test_checked_simplex_on_near_tables(device, monkeypatch, spy, case):  # noqa: F811
    """Forced onto the rows variant: the NEAR table's call equals the full table's (the
    same flags redone the same way, bit for bit), the resolved rows the float64 call's,
    and a dense 1-D library's flagged rows all resolve in the lookup."""
    if not get_backend(device).info.fp64:
        pytest.skip("the lookup's float64 redo needs fp64")
    from pyedmcl.primitives import knn as P

    x, E = {"near_repeats": (near_repeats(seed=5), 3),
            "decimals": (np.round(near_repeats(seed=6) * 10.0, 0) / 10.0, 2),
            "dense_1d": (lorenz_x(3000), 1)}[case]
    monkeypatch.setattr(KNN, "params_for", lambda *a, **k: dict(ROWS))
    real_device, nears = P.knn_device, []

    def near_device(*a, near=0, **k):
        nears.append(near)
        return real_device(*a, near=near, **k)
    monkeypatch.setattr(P, "knn_device", near_device)
    r32 = pe.simplex(x, E=E, device=device, variance=True)
    assert 2 in nears, "the widened table was not a NEAR table"
    resolved, rows = spy["resolved"], spy["rows"]
    if case == "dense_1d":  # every flagged row resolves on a NEAR table as on a full one
        assert rows.size == 0, rows
    r64 = pe.simplex(x, E=E, device=device, variance=True, dtype="float64")
    monkeypatch.setattr(P, "knn_device", lambda *a, near=0, **k: real_device(*a, **k))
    want = pe.simplex(x, E=E, device=device, variance=True)
    for name in ("predicted", "variance", "rho", "mae", "rmse"):
        np.testing.assert_array_equal(getattr(r32, name), getattr(want, name), err_msg=name)
    assert resolved is not None and resolved.table.shape[0] > 0, "nothing resolved"
    q = resolved.table[:, 0].astype(int)
    np.testing.assert_array_equal(r32.predicted[q], r64.predicted[q])


def test_near_tables_oclgrind_clean():
    """The NEAR kernel (local near entries with SLIDE, register ones with SPLIT) under
    Oclgrind: bounds, races and uninitialised values, and the contract's first entries."""
    from conftest import run_under_oclgrind
    out = run_under_oclgrind("""
        import numpy as np, pyedmcl
        from clkernels import get_backend
        from pyedmcl.primitives.knn import knn_device
        from pyedmcl.primitives.ranges import resolve
        be = get_backend("oclgrind")
        x = (np.round(np.random.default_rng(1).standard_normal(150), 1)).astype(np.float32)
        plan = resolve(x.size, E=3, tau=2, Tp=1, knn=4, exclusion_radius=0, lib=None, pred=None)
        base = {"VARIANT": "rows", "WG": 8, "TILE": 32, "QB": 1, "EA": 2, "INS": "reg",
                "FLAG": 1, "SPLIT": 1, "QQ": 1, "CB": 0, "SLIDE": 8}
        xd = be.to_device(x)
        ok = []
        for p in (base, {**base, "SLIDE": 0, "SPLIT": 2}):
            kw = dict(E=3, tau=2, k=6, qpts=plan.pred_points, lpts=plan.lib_points, radius=0,
                      params=p)
            full = be.to_host(knn_device(be, xd, x.size, **kw).idx)[0]
            near = be.to_host(knn_device(be, xd, x.size, **kw, near=2).idx)[0]
            ok.append(bool((full[:, :4] == near[:, :4]).all()))
        print("same first entries", all(ok))
    """)
    assert "same first entries True" in out, out
