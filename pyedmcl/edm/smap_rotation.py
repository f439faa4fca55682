"""S-map's states in the library's principal axes, where neighbouring lags are nearly
collinear.

The device solves each row's normal equations centred on the prediction point and scaled
to a unit diagonal (Jacobi). On oversampled smooth series (Mackey-Glass at E >= 10, Lorenz
sampled every 0.02 at E >= 7, tau 1) the lags are nearly collinear: the scaled systems'
traces reach 1e9-1e12, beyond the device's test, and every row went to the host. The
collinearity is the library's global shape, along directions no diagonal scaling reaches.

Rotated to the principal axes of the library's states (``V``: the right singular vectors
of a sample of the centred states), those directions are the coordinate axes, and the same Jacobi
scaling takes them out: the traces fall to 10-4,000 on those series, and the rows stay on
the device. A rotation keeps every Euclidean distance, so the weights are pyEDM's, and it
maps least squares to least squares: the slopes are ``V`` times the rotated ones, the
minimum-norm solution (pyEDM's, where a row is rank-deficient) and a ridge penalty on the
slopes included. The predictions and variances are the same.

Not taken with a neighbour table (``knn`` below ``|lib| - 1``, chosen by distance in
the data's coordinates). Where a row drops its farthest point (a prediction time outside
the library), the kernels send it to the host when the runner-up lies within the
distances' rounding (a rotation's included: ``TIE_TOL``), and the host rows of a rotated
call are solved in the data's coordinates (:func:`pyedmcl.edm.smap.smap_core`): which
point is dropped is the data's decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .smap_host import embed_at

#: the centred library states' condition (largest over smallest singular value) above
#: which S-map runs in their principal axes (the device's scaled systems square it and
#: test their trace against 1e8-1e11)
ROTATE_COND = 1e3
#: ... and at most which: a rotated axis holds its values to ~eps x that condition; near a
#: numerical rank deficiency (an exact sine) an axis would be rounding alone, which the
#: device's scaling would take for a regressor where pyEDM's SVD drops it
ROTATE_COND_MAX = 1e7
#: library states the screen looks at
SCREEN_SAMPLE = 256
#: library states sampled for the axes (any orthogonal V is exact; a sample finds the axes)
AXES_SAMPLE = 4096


@dataclass(frozen=True)
class PrincipalAxes:
    """States ``Y`` (one row per time of ``x``, zero where a time has no full embedding) in
    axes ``V`` about the library's mean ``mu``, for an S-map of ``E`` lags of ``tau``."""

    Y: np.ndarray
    V: np.ndarray
    mu: np.ndarray
    E: int
    tau: int

    def unrotate(self, results: list) -> list:
        """S-map results of ``Y`` (E 1) as those of the original states, in place."""
        for r in results:
            C = r.coefficients
            slopes = C[..., 1:] @ self.V.T
            C0 = C[..., 0] - slopes @ self.mu
            r.coefficients = np.concatenate([C0[..., None], slopes], axis=-1)
            r.E, r.tau = self.E, self.tau
        return results


def principal_axes(x: np.ndarray, lib_t: np.ndarray, pred_t: np.ndarray, *, E: int, tau: int,
                   knn: int | None, R: int) -> PrincipalAxes | None:
    """The rotation of an S-map's states (module docstring), or None where it is not taken:
    a neighbour table, non-finite states, or a library whose states' condition is at most
    :data:`ROTATE_COND` or above :data:`ROTATE_COND_MAX`."""
    n_lib = lib_t.size
    if n_lib < 2 or (knn is not None and min(int(knn), n_lib) < n_lib - 1):
        return None
    # the screen first, on a few states (most libraries stop here, in tens of microseconds)
    few = embed_at(x, lib_t[::max(1, n_lib // SCREEN_SAMPLE)], E, tau)
    fc = few - few.mean(axis=0)
    with np.errstate(invalid="ignore"):
        lam = np.linalg.eigvalsh(fc.T @ fc) if np.all(np.isfinite(fc)) else None
    if lam is None or lam[-1] <= 0 or not lam[0] * ROTATE_COND ** 2 < lam[-1] or \
            not lam[0] * ROTATE_COND_MAX ** 2 >= lam[-1]:
        return None
    sample = lib_t[np.linspace(0, n_lib - 1, min(n_lib, AXES_SAMPLE)).astype(np.int64)]
    S = embed_at(x, sample, E, tau)
    if not np.all(np.isfinite(S)):
        return None
    mu = S.mean(axis=0)
    Sc = S - mu
    _, sv, Vt = np.linalg.svd(Sc, full_matrices=False)  # the condition to ~eps x sv[0]
    if not sv[-1] * ROTATE_COND_MAX >= sv[0]:
        return None
    V = Vt.T
    n = x.shape[0]
    t = np.arange(n)
    span = (E - 1) * tau
    ok = (t - max(span, 0) >= 0) & (t - min(span, 0) < n)
    tv = t[ok]
    states = embed_at(x, tv, E, tau)
    finite = None if np.all(np.isfinite(x)) else np.all(np.isfinite(states), axis=1)
    Y = np.zeros((n, V.shape[0]))
    if finite is None:
        Y[tv[0]:tv[-1] + 1] = (states - mu) @ V          # (tv is one run of times)
    else:
        if not np.all(finite[np.union1d(lib_t, pred_t) - tv[0]]):
            return None
        Y[tv[finite]] = (states[finite] - mu) @ V       # times no row reads stay 0
    return PrincipalAxes(Y=Y, V=V, mu=mu, E=E, tau=tau)
