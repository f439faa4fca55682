"""CCM's surrogate null on the device: one k-NN table per sampled library, every
surrogate target cross-mapped from it.

For a direction "x cross-maps y" (x's shadow manifold predicts y, evidence that y drives
x) the putative driver y is replaced by each of its surrogates while the library
manifold stays x's, and the libraries are the very ones the observed curve sampled
(same seed, same RNG sequence as :mod:`pyedmcl.edm.ccm`), so observed and null differ
only in the target. Per library size L and batch of sampled libraries: one batched
k-NN launch builds the tables (``knn_device`` or the chosen back-end's), one ``lookup``
launch predicts every surrogate from them (targets are the lookup family's batch
dimension) and one ``skill`` launch reduces rho per (library, surrogate) on the device;
only those rho come back. No Python loop runs CCM per surrogate.

The null curve of surrogate s at size L is the mean rho over the sampled libraries, as
the observed curve is; the p-value is :func:`~pyedmcl.primitives.stats.surrogate_p`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clkernels import run_blocked

from .._precision import _affine
from ..primitives.knn import hold, knn_device
from ..primitives.lookup import ccm_shifts_device, lookup_device, skill_device
from ..primitives.ranges import ccm_valid_times, point_offset
from ..primitives.stats import _quiet, nan_quantile, null_summary, surrogate_p
from ..primitives.surrogates import check_method, generate
from ..validation import check_host_memory
from .ccm_spec import CrossMapSpec

#: device entries (k-NN table + predictions) per launch: bounds device memory
MAX_ENTRIES = 1 << 25
#: quantile of the null reported as its band's upper edge (the 5% test's critical value)
NULL_QUANTILE = 0.95


@dataclass
class CCMSignificance:
    """The surrogate test of a CCM result, per direction and library size.

    ``null_xy`` ``(n_lib_sizes, n)``: each surrogate's mean rho when y is replaced by
    its surrogates (x's manifold kept); ``p_xy``: ``(1 + #{null >= rho_xy}) / (n + 1)``
    per size; ``null_xy_mean`` / ``null_xy_q95``: the null's mean and 95% quantile (the
    band the report draws). ``*_yx``: the same for y's manifold and x's surrogates.
    """

    method: str
    n: int
    null_xy: np.ndarray
    null_yx: np.ndarray
    p_xy: np.ndarray
    p_yx: np.ndarray
    null_xy_mean: np.ndarray
    null_xy_q95: np.ndarray
    null_yx_mean: np.ndarray
    null_yx_q95: np.ndarray

    def band(self, direction: str = "xy", q: tuple[float, float] = (0.05, 0.95)
             ) -> tuple[np.ndarray, np.ndarray]:
        """The null's ``q`` quantiles per library size (default 5% and 95%) for direction
        "xy" or "yx"."""
        if direction not in ("xy", "yx"):
            raise ValueError(f"direction={direction!r} is invalid; allowed: 'xy', 'yx'")
        null = self.null_xy if direction == "xy" else self.null_yx
        return nan_quantile(null, q[0]), nan_quantile(null, q[1])


def draw_libraries(M: int, L: int, sample: int, entropy: int, random: bool,
                   replacement: bool) -> np.ndarray:
    """The sampled libraries of one size: exactly :func:`pyedmcl.edm.ccm._direction`'s
    draw (a fresh ``default_rng(SeedSequence(entropy))`` per size, sorted choices)."""
    if not random:
        return np.arange(L)[None, :]
    rng = np.random.default_rng(np.random.SeedSequence(entropy))
    return np.stack([np.sort(rng.choice(M, size=L, replace=replacement))
                     for _ in range(sample)])


def library_sizes(sizes: Any, M: int, k: int) -> Any:
    """``(i, L, kk)`` for each requested library size ``sizes[i]``: ``L`` capped at the
    ``M`` rows there are, ``kk`` the neighbours it allows (``k``, at most ``L - 1``);
    sizes that allow none are left out, as pyEDM's CCM leaves them."""
    for i, L0 in enumerate(sizes):
        L = int(min(L0, M))
        kk = min(k, L - 1)
        if kk >= 1:
            yield i, L, kk


def surrogate_rng(entropy: int, stream: int) -> np.random.Generator:
    """The generator of one series' surrogates: a child of the call's seed (spawn key
    ``(1, stream)``), independent of the library draws."""
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(1, stream)))


def _rho(sk: np.ndarray) -> np.ndarray:
    """rho per skill row with pyEDM's rules (as :func:`pyedmcl.edm.ccm._rho`)."""
    r = sk[:, 0].copy()
    r[sk[:, 3] < 3] = np.nan
    r[(sk[:, 3] >= 3) & np.isnan(r)] = 0.0
    return r


def null_curves(be, real: str, x: np.ndarray, ys: np.ndarray, spec: CrossMapSpec
                ) -> np.ndarray:
    """``(len(spec.sizes), n_targets)``: mean rho over the sampled libraries of x's
    embedding cross-mapping each row of ``ys`` (kernel-ready series: ``x`` (n,), ``ys``
    (n_targets, n)). Same libraries as the observed curve (:func:`draw_libraries`)."""
    E, tau, Tp, k, radius = spec.E, spec.tau, spec.Tp, spec.k, spec.radius
    sizes, sample, neighbors = spec.sizes, spec.sample, spec.neighbors
    n = x.size
    nt = ys.shape[0]
    dt = np.float64 if real == "double" else np.float32
    item = np.dtype(dt).itemsize
    times = ccm_valid_times(n, E, tau, Tp)
    M = times.size
    off = point_offset(E, tau)
    pts = (times - off).astype(np.int32)
    x_dev = be.to_device(np.ascontiguousarray(x, dtype=dt))
    q_dev = be.to_device(pts)
    obs_dev = be.to_device((times + Tp).astype(np.int32))
    # targets in chunks whose predictions of one library fit the budget, with their shifts
    tchunk = max(1, MAX_ENTRIES // (2 * M))
    y_devs = []
    for t0 in range(0, nt, tchunk):  # (one chunk's host copy at a time)
        yc = np.ascontiguousarray(ys[t0:t0 + tchunk], dtype=dt)
        y_devs.append((t0, min(nt, t0 + tchunk), be.to_device(yc),
                       ccm_shifts_device(be, yc, times + Tp)))
    hold(be, x_dev, q_dev, obs_dev, *[d for _, _, d, _ in y_devs])
    search = knn_device if neighbors is None else neighbors.device_table
    out = np.full((sizes.size, nt), np.nan)
    for i, L, kk in library_sizes(sizes, M, k):
        libs = draw_libraries(M, L, sample, spec.entropy, spec.random, spec.replacement)
        ns = libs.shape[0]
        tw = min(tchunk, nt)

        def batch(c0: int, c1: int, libs=libs, kk=kk) -> np.ndarray:
            table = search(be, x_dev, n, E=E, tau=tau, k=kk, qpts=pts, lpts=pts[libs[c0:c1]],
                           radius=radius, real=real, q_dev=q_dev)
            rho = np.empty((c1 - c0, nt))
            for t0, t1, y_dev, shift in y_devs:  # the table serves every surrogate target
                pred, _ = lookup_device(be, table, y_dev, n, t1 - t0, off + Tp, weight="ccm",
                                        real=real)
                sk = skill_device(be, pred, table.nbatch * (t1 - t0), M, y_dev, n, t1 - t0,
                                  obs_dev, real=real, ccm=True, shift=shift)
                rho[:, t0:t1] = _rho(sk).reshape(c1 - c0, t1 - t0)
            return rho

        per = max(1, MAX_ENTRIES // max(1, M * (kk + tw)))
        rho = np.concatenate(run_blocked(
            be, batch, ns, block=per, parameter="sample (libraries per launch), the number of "
            "surrogates or the series length",
            what=f"CCM surrogate null ({M} rows x k={kk} tables, {tw} targets per library)",
            nbytes=lambda s_, kk=kk, tw=tw: s_ * M * (kk * (4 + item) + tw * item)))
        with _quiet():
            out[i] = np.nanmean(rho, axis=0)
    return out


def kernel_series(S: np.ndarray, prep_dtype: np.dtype) -> np.ndarray:
    """Surrogate rows as the kernels take them: for float32 calls each row centred and
    scaled in float64 by :mod:`pyedmcl._precision`'s exact power-of-two rule (rho is
    invariant to it; the call's precision was settled on the data, so no merge check
    here), as given for float64 calls."""
    if np.dtype(prep_dtype) == np.float64:
        return S
    return _affine(S, True, None).forward(np.array(S, dtype=np.float64))


def ccm_significance(be, prep_dtype: np.dtype, real: str, raw_x: np.ndarray,
                     raw_y: np.ndarray, xs: np.ndarray, ys: np.ndarray, rho_xy: np.ndarray,
                     rho_yx: np.ndarray, *, n: int, method: str, options: dict | None,
                     entropy: int, spec: CrossMapSpec) -> CCMSignificance:
    """Both directions' surrogate nulls, p-values and bands for :func:`pyedmcl.ccm`.

    ``raw_*``: the series as given (surrogates are made from them); ``xs``/``ys``: the
    kernel-ready series of the observed curves; ``spec``: ccm's cross mapping.
    """
    method = check_method(method, "surrogate_method")
    opts = dict(options or {})
    check_host_memory("surrogates", n, 3 * 8 * raw_x.size,
                      f"surrogates of two series of {raw_x.size} values")
    S_y = generate(raw_y, method, n, surrogate_rng(entropy, 0), **opts)
    S_x = generate(raw_x, method, n, surrogate_rng(entropy, 1), **opts)
    null_xy = null_curves(be, real, xs, kernel_series(S_y, prep_dtype), spec)
    null_yx = null_curves(be, real, ys, kernel_series(S_x, prep_dtype), spec)
    m_xy, q_xy = null_summary(null_xy, NULL_QUANTILE)
    m_yx, q_yx = null_summary(null_yx, NULL_QUANTILE)
    return CCMSignificance(method=method, n=n, null_xy=null_xy, null_yx=null_yx,
                           p_xy=surrogate_p(rho_xy, null_xy), p_yx=surrogate_p(rho_yx, null_yx),
                           null_xy_mean=m_xy, null_xy_q95=q_xy, null_yx_mean=m_yx,
                           null_yx_q95=q_yx)
