"""The all-to-all map's surrogate null: surrogate targets as more columns of the map.

``xmap(X, surrogates=n)`` appends, for every series j, its n surrogates to the panel as
extra *target* series (row ``N + j n + s`` of the extended panel is surrogate s of
series j) with series j's E. The engine computes row blocks over the N real library
series only, and its fused skill launch cross-maps every target of an E-group from each
library's k-NN table: the table of library i is built once and serves the real targets
and all their surrogates (the surrogates are one more stretch of the target batch). A
block comes back as ``(rows, N (1 + n))`` rho; :func:`reduce_block` turns it into rho,
the p-value and the null's mean and 95% quantile per pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..edm.ccm_null import NULL_QUANTILE, kernel_series
from ..primitives.stats import null_summary, surrogate_p
from ..primitives.surrogates import generate


def series_rng(seed: int, j: int) -> np.random.Generator:
    """The generator of series j's surrogates: a child ``(j,)`` of the job's seed (the
    same whichever device, block order or resume computes it)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(j,)))


def surrogate_panel(X64: np.ndarray, n: int, method: str, options: dict | None, seed: int,
                    dtype: np.dtype) -> np.ndarray:
    """``(N n, L)`` kernel-ready surrogates of the rows of ``X64`` (series as given,
    float64): row ``j n + s`` is surrogate s of series j, standardised per row for
    float32 jobs (:func:`pyedmcl.edm.ccm_null.kernel_series`)."""
    N, L = X64.shape
    out = np.empty((N * n, L), dtype)
    for j in range(N):
        S = generate(X64[j], method, n, series_rng(seed, j), **(options or {}))
        out[j * n:(j + 1) * n] = kernel_series(S, dtype)
    return out


def check_panel_memory(N: int, L: int, n: int, itemsize: int, devices: list[Any],
                       backend: str | None) -> None:
    """Refuse ``surrogates=n`` up front when the extended panel (N (1 + n) series of L
    values, uploaded as one buffer) exceeds a device's largest allocation, or the host
    copies (surrogates + the extended panel) half the available host memory."""
    from clkernels import DeviceSelectionError, get_backend

    from ..validation import check_host_memory
    check_host_memory("surrogates", n, 2.0 * N * L * itemsize,
                      f"the surrogate panel ({N} series x {L} values each)")
    need = N * (1 + n) * L * itemsize
    for d in devices:
        try:
            info = get_backend(d, backend).info
        except DeviceSelectionError:  # pragma: no cover - checked by the caller already
            continue
        cap = int(getattr(info, "max_alloc_bytes", 0) or 0)
        if cap and need > cap:
            most = max(0, cap // (N * L * itemsize) - 1)
            raise ValueError(f"surrogates={n} needs one {need / 2**30:.3g} GiB buffer on "
                             f"{info.name} ({N} x (1 + {n}) series of {L} values), more than "
                             f"its largest allocation ({cap / 2**30:.3g} GiB); allowed "
                             f"here: surrogates <= {most}")


def extend_E(E: np.ndarray, n: int) -> np.ndarray:
    """E of the extended panel: the N series' E, then each series' E for its n surrogates."""
    E = np.asarray(E, dtype=np.int64)
    return np.concatenate([E, np.repeat(E, n)])


def reduce_block(rows: np.ndarray, N: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    """``(rho, {"p_value", "null_mean", "null_q95"})`` of a block of the extended map
    (``rows`` ``(r, N (1 + n))``), each ``(r, N)`` float32."""
    rho = np.ascontiguousarray(rows[:, :N], dtype=np.float32)
    null = rows[:, N:].reshape(rows.shape[0], N, n)
    p = surrogate_p(rho, null)
    mean, q = null_summary(null, NULL_QUANTILE)
    return rho, {"p_value": p.astype(np.float32), "null_mean": mean.astype(np.float32),
                 "null_q95": q.astype(np.float32)}
