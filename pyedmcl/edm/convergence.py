"""CCM's convergence test: does cross-map skill grow with library size?

Sugihara et al. (2012) take convergence -- rho rising with the library size L -- as the
signature of causation (more library, denser manifold, better cross-map). The test here
is Kendall's tau of the mean rho over L with the one-sided ("increasing") p-value of the
normal approximation (:func:`pyedmcl.primitives.stats.kendall_tau`), reported with a
least-squares fit ``rho(L) = rho_inf (1 - exp(-gamma L))`` (the curve the report draws).
With few library sizes the p-value is coarse (5 sizes: at best ~0.014), so give CCM
several sizes when the test matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..primitives.stats import convergence_fit, kendall_tau


@dataclass
class Convergence:
    """Kendall's tau of rho over library size, per direction, and the fitted curve."""

    tau_xy: float
    p_xy: float
    tau_yx: float
    p_yx: float
    rho_inf_xy: float
    gamma_xy: float
    rho_inf_yx: float
    gamma_yx: float

    def fitted(self, lib_sizes: Any, direction: str = "xy") -> np.ndarray:
        """The fitted ``rho_inf (1 - exp(-gamma L))`` at ``lib_sizes`` ("xy" or "yx")."""
        if direction not in ("xy", "yx"):
            raise ValueError(f"direction={direction!r} is invalid; allowed: 'xy', 'yx'")
        a, g = ((self.rho_inf_xy, self.gamma_xy) if direction == "xy"
                else (self.rho_inf_yx, self.gamma_yx))
        return a * (1.0 - np.exp(-g * np.asarray(lib_sizes, dtype=np.float64)))

    def as_dataframe(self, x_name: str = "x", y_name: str = "y"):
        """One row per direction: kendall_tau, p_value (increasing), rho_inf, gamma."""
        import pandas as pd
        return pd.DataFrame({
            "direction": [f"{x_name}:{y_name}", f"{y_name}:{x_name}"],
            "kendall_tau": [self.tau_xy, self.tau_yx], "p_value": [self.p_xy, self.p_yx],
            "rho_inf": [self.rho_inf_xy, self.rho_inf_yx],
            "gamma": [self.gamma_xy, self.gamma_yx]})


def convergence(lib_sizes: Any, rho_xy: Any, rho_yx: Any) -> Convergence:
    """The :class:`Convergence` of a CCM curve pair (mean rho per library size)."""
    t_xy, p_xy = kendall_tau(lib_sizes, rho_xy, alternative="greater")
    t_yx, p_yx = kendall_tau(lib_sizes, rho_yx, alternative="greater")
    a_xy, g_xy, _ = convergence_fit(lib_sizes, rho_xy)
    a_yx, g_yx, _ = convergence_fit(lib_sizes, rho_yx)
    return Convergence(t_xy, p_xy, t_yx, p_yx, a_xy, g_xy, a_yx, g_yx)
