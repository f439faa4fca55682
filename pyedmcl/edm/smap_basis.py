"""A library's orthonormal basis for S-map's least squares, where lags are nearly collinear.

One QR of the unweighted library design ``B = [1, X] = Q0 R0``; a row's weighted design is
``A = diag(w) Q0 R0``, and its normal equations in the basis, ``G = Q0^T diag(w^2) Q0``,
are as well conditioned as the weights make them (condition 1-10^4 on oversampled smooth
series where ``B``'s is 10^6-10^9). Rows' ``G`` are one product of their squared weights
with the basis rows' outer products (BLAS 3). The singular values of ``A`` are those of
``L^T R0`` (``G = L L^T``): a row is solved so only where ``A`` has full rank far from
lstsq's cut-off and both conditions are bounded (:data:`WHITENED_COND_A`,
:data:`WHITENED_COND_G`); then its solution is lstsq's to ~cond(A) x eps. Used by S-map's
host rows (:mod:`pyedmcl.edm.smap_host`) and the S-map cross map's
(:mod:`pyedmcl.xmap.smap_map`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the largest condition of a row's weighted design ``A`` solved in the orthonormal basis
#: (above it the row takes lstsq: its answer is then only determined to ~cond x eps and
#: hangs on the SVD's own rounding; pyEDM's cut-off is at eps x n_lib)
WHITENED_COND_A = 1e8
#: the largest condition of a row's Gram matrix in the orthonormal basis (its Cholesky
#: solve loses ~cond x eps)
WHITENED_COND_G = 1e8


@dataclass(frozen=True)
class LibraryBasis:
    """``Q0`` and ``R0`` of ``[1, XL] = Q0 R0``, and the upper triangles (indices ``iu``)
    of ``Q0``'s rows' outer products, ``P``."""

    Q0: np.ndarray
    R0: np.ndarray
    P: np.ndarray
    iu: tuple[np.ndarray, np.ndarray]


def library_basis(XL: np.ndarray) -> LibraryBasis | None:
    """The basis of library states ``XL`` (n_lib, D), or None where the design is not of
    full rank (or not finite, or no taller than wide)."""
    n_lib, D = XL.shape
    B = np.column_stack([np.ones(n_lib), XL])
    if n_lib <= D + 1 or not np.all(np.isfinite(B)):
        return None
    Q0, R0 = np.linalg.qr(B)
    r0 = np.abs(np.diag(R0))
    if not r0.min() > np.finfo(float).eps * n_lib * r0.max():
        return None
    iu = np.triu_indices(D + 1)
    return LibraryBasis(Q0=Q0, R0=R0, P=Q0[:, iu[0]] * Q0[:, iu[1]], iu=iu)


def gram_solves(basis: LibraryBasis, w2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows (squared weights ``w2``, (rows, n_lib)) that the basis solves to rounding
    (module docstring), and every row's Gram matrix ``G`` (rows, D + 1, D + 1)."""
    n, iu = basis.R0.shape[0], basis.iu
    G = np.empty((w2.shape[0], n, n))
    G[:, iu[0], iu[1]] = w2 @ basis.P
    G[:, iu[1], iu[0]] = G[:, iu[0], iu[1]]
    good, L = _cholesky(G)
    sl = np.linalg.svd(L, compute_uv=False)
    sa = np.linalg.svd(np.transpose(L, (0, 2, 1)) @ basis.R0, compute_uv=False)
    with np.errstate(all="ignore"):
        good &= (sl[:, 0] ** 2 <= WHITENED_COND_G * sl[:, -1] ** 2) & \
            (sa[:, 0] <= WHITENED_COND_A * sa[:, -1])
    return good, G


def _cholesky(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of the stacked matrices ``G`` are positive definite, and their Cholesky factors
    (zero where not)."""
    try:
        return np.ones(G.shape[0], bool), np.linalg.cholesky(G)
    except np.linalg.LinAlgError:  # some row is not: each row on its own
        good, L = np.zeros(G.shape[0], bool), np.zeros_like(G)
        for i in range(G.shape[0]):
            try:
                L[i] = np.linalg.cholesky(G[i])
                good[i] = True
            except np.linalg.LinAlgError:
                pass
        return good, L
