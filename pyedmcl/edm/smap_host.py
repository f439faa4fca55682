"""S-map rows solved on the host: the rows the device's tests sent back (ill-conditioned
local fits, NaN targets, no more neighbours than coefficients), solved from the data as
given with pyEDM's answer.

pyEDM solves every row by the SVD least squares (``numpy.linalg.lstsq``, minimum norm where
the weighted design ``A = diag(w) [1, X]`` is rank-deficient to its cut-off). Row by row
that costs a Python loop and an SVD of an ``n_lib x (E + 1)`` matrix per row: minutes on
oversampled smooth data (E >= 10 at tau = 1), where nearly every row's centred normal
equations fail the device's test.

Most such rows are ill-conditioned only through the library's global shape (neighbouring
lags of a smooth series are nearly collinear): they are solved in the library's orthonormal
basis (:mod:`pyedmcl.edm.smap_basis`), in blocks of rows on threads, BLAS on one thread each;
every row that basis cannot vouch for takes lstsq as pyEDM does, with BLAS on one thread
(its own threads cost more than they give on one row's small SVD; decision 0166). Rows
solved so agree with lstsq to ~cond(A) x eps in the coefficients (measured <= 1.5e-8 relative) and to ~1e-12 in
the predictions (``tests/test_edm_smap.py``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .._blas import one_blas_thread
from .pyedm_kdtree import FarthestDrop, leave_out_farthest
from .smap_basis import LibraryBasis, gram_solves, library_basis

#: elements of one block's (rows x library) arrays
BLOCK_ELEMENTS = 1 << 20
#: threads solving blocks of rows
HOST_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else (os.cpu_count() or 1)))


def embed_at(x: np.ndarray, t: np.ndarray, E: int, tau: int) -> np.ndarray:
    """State vectors at rows ``t``: ``E`` lags of a series, or of each column of a 2-D
    ``(L, m)`` state space in pyEDM's Embed order (every column at lag 0, then lag 1, ...)."""
    if x.ndim == 2:
        return np.stack([x[t - k * tau, c] for k in range(E) for c in range(x.shape[1])], axis=1)
    t = np.asarray(t)
    if t.size > 1 and int(t[-1]) - int(t[0]) == t.size - 1 and np.all(np.diff(t) == 1):
        a, b = int(t[0]), int(t[-1]) + 1  # a run of rows inside x: slices, no index arrays
        span = (E - 1) * tau
        if min(a, a - span) >= 0 and max(b, b - span) <= x.shape[0]:
            return np.stack([x[a - k * tau:b - k * tau] for k in range(E)], axis=1)
    return np.stack([x[t - k * tau] for k in range(E)], axis=1)


def row_lstsq(x, ylib, lib_t, E, tau, tp, theta, nbrs) -> tuple[float, np.ndarray, float]:
    """One row exactly as pyEDM computes it (SVD least squares), for ill-conditioned rows."""
    XL = embed_at(x, lib_t[nbrs], E, tau)
    xp = embed_at(x, np.array([tp]), E, tau)[0]
    d = np.sqrt(((XL - xp) ** 2).sum(1))
    none = (float("nan"), np.full(XL.shape[1] + 1, np.nan), float("nan"))
    if d.size == 0:
        return none
    with np.errstate(divide="ignore", invalid="ignore"):  # every distance 0: NaN weights, as pyEDM
        W = np.ones_like(d) if theta == 0 else np.exp(-(theta / d.mean()) * d)
    yn = ylib[nbrs]
    fin = np.isfinite(yn)
    if not fin.all():  # pyEDM: weights from every neighbour, the fit over finite targets
        if not fin.any():
            return none
        W, XL, yn = W[fin], XL[fin], yn[fin]
    A = np.column_stack([W, W[:, None] * XL])
    b = W * yn
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        # theta > 0 with every neighbour at distance 0 (mean distance 0): pyEDM's
        # weights are NaN there too; no fit exists
        return none
    with np.errstate(all="ignore"):
        try:
            C = np.linalg.lstsq(A, b, rcond=None)[0]
        except np.linalg.LinAlgError:
            return none
    p = C[0] + C[1:] @ xp
    var = float(np.sum(W * (yn - p) ** 2) / np.sum(W))
    return float(p), C, var


def row_ridge(x, ylib, lib_t, E, tau, tp, theta, nbrs, ridge) -> tuple[float, np.ndarray, float]:
    """Host ridge solve of one row (fallback of the device path; slopes penalised only)."""
    XL = embed_at(x, lib_t[nbrs], E, tau)
    xp = embed_at(x, np.array([tp]), E, tau)[0]
    d = np.sqrt(((XL - xp) ** 2).sum(1))
    W = np.ones_like(d) if theta == 0 else np.exp(-(theta / d.mean()) * d)
    A = np.column_stack([W, W[:, None] * XL])
    b = W * ylib[nbrs]
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        return float("nan"), np.full(XL.shape[1] + 1, np.nan), float("nan")
    G = A.T @ A + ridge * np.diag([0.0] + [1.0] * XL.shape[1])
    C = np.linalg.lstsq(G, A.T @ b, rcond=None)[0]
    p = C[0] + C[1:] @ xp
    return float(p), C, float(np.sum(W * (ylib[nbrs] - p) ** 2) / np.sum(W))


def row_neighbours(lib_t, tp, R, knn, x, E, tau, farthest: FarthestDrop | None = None
                   ) -> np.ndarray:
    """Library positions the "all" mode uses for one row: every admissible point, minus
    the farthest where ``knn`` asks for one fewer. Of several (nearly) equally far,
    ``farthest`` picks pyEDM's (:mod:`pyedmcl.edm.pyedm_kdtree`); without it, the last."""
    cand = np.flatnonzero(np.abs(lib_t - tp) > R)
    if cand.size - min(knn, cand.size) == 1:  # every library point admissible, one too many
        XL = embed_at(x, lib_t[cand], E, tau)
        xp = embed_at(x, np.array([tp]), E, tau)
        use = np.ones((1, cand.size), bool)
        leave_out_farthest(use, ((XL - xp) ** 2).sum(1)[None, :], np.array([tp]), xp, farthest)
        cand = cand[use[0]]
    return cand


def farthest_rule(x, lib_t, pred_t, E, tau, knn, R) -> FarthestDrop | None:
    """pyEDM's choice among equally far points for this call's host rows, where the tree
    can decide (finite states, scipy present)."""
    rule = FarthestDrop(embed_at(x, lib_t, E, tau), lib_t, pred_t, knn, R)
    return rule if rule.usable() else None


def solve_host_rows(pred, coef, var, status, x, ylib, lib_t, pred_t, *, E, tau, thetas, nbr,
                    R, knn, ridge) -> None:
    """Solve the rows marked for the host (status 1) in place, from the data as given:
    pyEDM's least squares (in the orthonormal basis where that is exact to rounding, else
    lstsq row by row), or the ridge system."""
    if np.any(status == 3):  # cannot happen: "all" mode only drops 0 or 1 neighbour
        raise RuntimeError("S-map kernel asked for a neighbour table in 'all' mode")
    todo = np.zeros(status.shape, bool)
    todo[status == 1] = True
    if not todo.any():
        return
    far = farthest_rule(x, lib_t, pred_t, E, tau, knn, R) if nbr is None else None
    if ridge == 0:
        _whitened_rows(todo, pred, coef, var, x, ylib, lib_t, pred_t, E=E, tau=tau,
                       thetas=thetas, nbr=nbr, R=R, knn=knn, farthest=far)
    # one small SVD a row, on one BLAS thread: BLAS's own threads cost more than they give
    # there (a 1,000 x 21 lstsq took 3.3 ms on two busy cores with OpenBLAS's two threads,
    # 0.33 ms on one; 16 idle cores: the rows 13 % faster on one). Python threads over the
    # rows were slower still: each row is mostly Python, held by the GIL.
    if not todo.any():  # (the limit itself costs ~0.2 ms)
        return
    with one_blas_thread():
        for ti, row in zip(*np.nonzero(todo), strict=True):
            tp = int(pred_t[row])
            nb = nbr[row][nbr[row] >= 0] if nbr is not None else row_neighbours(
                lib_t, tp, R, knn, x, E, tau, far)
            if ridge > 0:
                p, C, v = row_ridge(x, ylib, lib_t, E, tau, tp, float(thetas[ti]), nb, ridge)
            else:
                p, C, v = row_lstsq(x, ylib, lib_t, E, tau, tp, float(thetas[ti]), nb)
            pred[ti, row], coef[ti, row], var[ti, row] = p, C, v


def _whitened_rows(todo, pred, coef, var, x, ylib, lib_t, pred_t, *, E, tau, thetas, nbr, R,
                   knn, farthest: FarthestDrop | None = None) -> None:
    """The rows of ``todo`` whose least squares the library's orthonormal basis solves to
    rounding (module docstring), solved in blocks of rows, on threads (NumPy and BLAS release
    the GIL), and cleared from ``todo``."""
    # scipy on first use here (its import, ~0.25 s, is not every call's), in this thread
    # before the blocks' threads (theirs then find it imported)
    from scipy.linalg import solve_triangular  # noqa: F401
    from scipy.spatial.distance import cdist

    XL = embed_at(x, lib_t, E, tau)
    n_lib, D = XL.shape
    basis = library_basis(XL)
    if basis is None:
        return
    fin = np.isfinite(ylib)
    y0 = np.where(fin, ylib, 0.0)
    Qy = basis.Q0 * y0[:, None]
    rows = np.flatnonzero(todo.any(axis=0))
    XP = embed_at(x, pred_t[rows], E, tau)

    def block_rows(b0: int) -> None:
        r, xp = rows[b0:b0 + block], XP[b0:b0 + block]
        d2 = cdist(xp, XL, "sqeuclidean")
        use = _neighbour_mask(r, d2, lib_t, pred_t, nbr, R, knn, farthest, xp)
        d = np.sqrt(d2, out=d2)
        with np.errstate(divide="ignore", invalid="ignore"):
            dmean = np.where(use, d, 0.0).sum(axis=1) / use.sum(axis=1)
        for ti in np.flatnonzero(todo[:, r].any(axis=1)):
            sel = np.flatnonzero(todo[ti, r])
            wt = _weights(ti, r[sel], xp[sel], d[sel], dmean[sel], use[sel] & fin,
                          float(thetas[ti]), y0, D)
            _solve(wt, todo, pred, coef, var, basis, Qy)

    block = max(8, min(256, BLOCK_ELEMENTS // n_lib))
    starts = range(0, rows.size, block)
    # the blocks are the parallelism: BLAS in each runs on its thread alone (its own
    # threads would compete with the blocks' for the cores)
    with one_blas_thread(), \
            ThreadPoolExecutor(max_workers=min(len(starts), HOST_THREADS)) as pool:
        for _ in pool.map(block_rows, starts):
            pass


def _neighbour_mask(r, d2, lib_t, pred_t, nbr, R, knn, farthest: FarthestDrop | None = None,
                    xp: np.ndarray | None = None) -> np.ndarray:
    """Which library points rows ``r`` (states ``xp``) fit over (:func:`row_neighbours`,
    or the table)."""
    if nbr is not None:
        use = np.zeros(d2.shape, bool)
        tab = nbr[r]
        i, j = np.nonzero(tab >= 0)
        use[i, tab[i, j]] = True
        return use
    if lib_t.size > 1 and np.all(lib_t[1:] > lib_t[:-1]):  # ascending: a range of each row
        use = np.ones(d2.shape, bool)
        lo = np.searchsorted(lib_t, pred_t[r] - R, side="left")
        hi = np.searchsorted(lib_t, pred_t[r] + R, side="right")
        for i in np.flatnonzero(hi > lo):
            use[i, lo[i]:hi[i]] = False
    else:
        use = np.abs(lib_t[None, :] - pred_t[r][:, None]) > R
    cnt = use.sum(axis=1)
    drop = cnt - np.minimum(knn, cnt)
    one = np.flatnonzero(drop == 1)
    if one.size:
        sub = use[one]
        leave_out_farthest(sub, d2[one], pred_t[r[one]], xp[one] if xp is not None else None,
                           farthest)
        use[one] = sub
    return use


@dataclass(frozen=True)
class _Weights:
    """One theta's rows ``r`` of a block: their states ``xp``, squared weights ``w2`` over
    the library (0 where a point is not fitted over), and their targets' weighted moments:
    ``wsum`` (sum w), ``ymean`` (the w-weighted mean) and ``yss`` (sum w (y - ymean)^2)."""

    ti: int
    r: np.ndarray
    xp: np.ndarray
    w2: np.ndarray
    wsum: np.ndarray
    ymean: np.ndarray
    yss: np.ndarray


def _weights(ti, r, xp, d, dmean, fit, theta, y0, D) -> _Weights:
    """:class:`_Weights` of rows ``r`` (distances ``d`` to every library point, their mean
    ``dmean`` over each row's neighbours, ``fit``: the neighbours with finite targets), the
    rows without finite weights or with no more fitted points than coefficients left out."""
    with np.errstate(all="ignore"):
        w = np.ones_like(d) if theta == 0 else np.exp(-(theta / dmean)[:, None] * d)
    ok = np.all(np.isfinite(w) | ~fit, axis=1)
    w = np.where(fit, w, 0.0)
    ok &= np.count_nonzero(w, axis=1) > D + 1
    r, xp, w = r[ok], xp[ok], w[ok]
    wsum = w.sum(axis=1)
    ymean = (w @ y0) / wsum
    dy = y0[None, :] - ymean[:, None]
    yss = np.einsum("ij,ij->i", w, dy * dy)
    return _Weights(ti=ti, r=r, xp=xp, w2=np.multiply(w, w, out=w), wsum=wsum, ymean=ymean,
                    yss=yss)


def _solve(wt: _Weights, todo, pred, coef, var, basis: LibraryBasis, Qy: np.ndarray) -> None:
    """Rows ``wt`` solved in the library's orthonormal basis (``Qy``: its rows times the
    targets) and cleared from ``todo``, where :func:`gram_solves` vouches for them."""
    if wt.r.size == 0:
        return
    from scipy.linalg import solve_triangular

    good, G = gram_solves(basis, wt.w2)
    if not good.any():
        return
    r = wt.r[good]
    g = wt.w2[good] @ Qy
    z = np.linalg.solve(G[good], g[..., None])[..., 0]
    C = solve_triangular(basis.R0, z.T).T
    # the prediction point in the basis: [1, x_p] = q_p R0, p = q_p z (no slopes'
    # cancellation against the intercept)
    qp = solve_triangular(basis.R0, np.column_stack([np.ones(r.size), wt.xp[good]]).T,
                          trans="T")
    p = np.einsum("kr,rk->r", qp, z)
    # sum w (y - p)^2 = sum w (y - ymean)^2 + (sum w) (ymean - p)^2, both terms >= 0
    wsum = wt.wsum[good]
    v = (wt.yss[good] + wsum * (wt.ymean[good] - p) ** 2) / wsum
    pred[wt.ti, r], coef[wt.ti, r], var[wt.ti, r] = p, C, v
    todo[wt.ti, r] = False
