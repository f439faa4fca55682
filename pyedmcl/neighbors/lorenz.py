"""Lorenz-63 series for tuning the back-end choice and for the bench (deterministic)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=4)
def _lorenz(n: int, dt: float, burn: int) -> np.ndarray:
    s, r, b = 10.0, 28.0, 8.0 / 3.0
    x, y, z = 1.0, 1.0, 1.0
    out = np.empty((n, 3))
    h2, h6 = dt / 2.0, dt / 6.0
    for i in range(n + burn):  # classic RK4 on plain floats (no per-step numpy overhead)
        k1x, k1y, k1z = s * (y - x), x * (r - z) - y, x * y - b * z
        ax, ay, az = x + h2 * k1x, y + h2 * k1y, z + h2 * k1z
        k2x, k2y, k2z = s * (ay - ax), ax * (r - az) - ay, ax * ay - b * az
        ax, ay, az = x + h2 * k2x, y + h2 * k2y, z + h2 * k2z
        k3x, k3y, k3z = s * (ay - ax), ax * (r - az) - ay, ax * ay - b * az
        ax, ay, az = x + dt * k3x, y + dt * k3y, z + dt * k3z
        k4x, k4y, k4z = s * (ay - ax), ax * (r - az) - ay, ax * ay - b * az
        x += h6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        y += h6 * (k1y + 2 * k2y + 2 * k3y + k4y)
        z += h6 * (k1z + 2 * k2z + 2 * k3z + k4z)
        if i >= burn:
            out[i - burn] = (x, y, z)
    out.setflags(write=False)
    return out


def lorenz63(n: int, *, component: str = "z", dt: float = 0.01, burn: int = 1000) -> np.ndarray:
    """``n`` samples of one Lorenz-63 component (sigma 10, rho 28, beta 8/3; RK4, step ``dt``).

    The default ``z`` is positive, so MAPE of forecasts is well defined.
    """
    col = "xyz".index(component)
    return np.array(_lorenz(int(n), float(dt), int(burn))[:, col])
