"""The recurrence decision at the threshold, as each oracle decides it (ties included).

The line kernels decide a cell by one strict comparison ``d < thr``, where ``d`` is the
distance in the working precision -- the *squared* sum ``d2`` for the Euclidean
metric (no sqrt per cell). What ``thr`` is decides the cells whose distance equals the
radius, which on quantized data (values on a grid) are many:

* ``threshold_rule="distance"`` (default; pyunicorn 1.0): recurrent when the distance
  itself is below the radius. pyunicorn computes ``sqrt(sum(diff * diff))`` in float64
  (``_euclidean_distance_matrix_rp``, summed coordinate by coordinate from 0, the
  order our kernels use) and compares ``distance < threshold`` (strict). So the cell is
  recurrent iff ``fl64(sqrt(d2)) < r``. Because a correctly rounded sqrt is monotone,
  that set of ``d2`` is ``d2 < t`` with ``t`` the smallest value of the working type
  whose float64 sqrt is ``>= r``; :func:`kernel_threshold` finds ``t`` once on the host
  (a few ``nextafter`` steps from ``r * r``). For the maximum and Manhattan metrics the
  distance needs no sqrt: ``t`` is the smallest working-type value ``>= r``, so the
  comparison is the exact real ``d < r`` (float32 included, where ``fl32(r)`` may lie
  below ``r``).
* ``threshold_rule="squared"`` (PyRQA 8's OpenCL kernels): ``d2 < e * e`` with the radius
  ``e`` and its square rounded in the working type (``fp_type``), and ``d < e`` for the
  other metrics, ``e`` rounded to the working type. PyRQA sums ``sum += diff * diff``
  with contraction allowed (OpenCL's default), which the compilers (Intel's CPU runtime,
  PoCL, NVIDIA) turn into ``fma``: under this rule the line kernels sum the squares by
  ``fma()`` too (template value ``FMA=1``), so float32 sums round as PyRQA's do.

pyunicorn stores the series as float32 (``FIELD``) and computes in float64 from those
values; give it float32-representable data to compare with our float64 path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

THRESHOLD_RULES = ("distance", "squared")


def check_threshold_rule(rule: Any) -> str:
    """``rule`` if it is one of :data:`THRESHOLD_RULES`, else a ValueError naming them."""
    if rule not in THRESHOLD_RULES:
        raise ValueError(f"threshold_rule={rule!r} is not supported; allowed: 'distance' "
                         "(sqrt(d2) < r, pyunicorn; default) or 'squared' (d2 < r*r in the "
                         "working precision, PyRQA's OpenCL kernels)")
    return str(rule)


def _sqrt64(v: np.floating) -> float:
    return float(np.sqrt(np.float64(v)))


def kernel_threshold(radius: float, metric: str, dtype: Any, rule: str = "distance") -> float:
    """The value ``thr`` (exact in ``dtype``) the kernels compare with by ``d < thr``.

    ``d`` is the squared distance (Euclidean) or the distance (maximum, Manhattan) in
    ``dtype``. See the module docstring for each rule.
    """
    dt = np.dtype(dtype)
    r = float(radius)
    if rule == "squared":
        e = dt.type(r)
        return float(e * e) if metric == "euclidean" else float(e)
    one = dt.type(1)
    up, down = dt.type(np.inf), dt.type(-np.inf)
    if metric != "euclidean":  # smallest working value >= r: d < t  <=>  d < r exactly
        t = dt.type(r)
        if float(t) < r:
            t = np.nextafter(t, up)
        return float(t)
    with np.errstate(over="ignore"):
        t = dt.type(np.float64(r) * np.float64(r)) * one  # a start within an ulp or two
    if not np.isfinite(t):  # every finite d2 has sqrt < r
        return float(t)
    # t: the smallest working value with fl64(sqrt(t)) >= r
    while _sqrt64(t) < r:
        t = np.nextafter(t, up)
    while t > 0 and _sqrt64(np.nextafter(t, down)) >= r:
        t = np.nextafter(t, down)
    return float(t)


def recurrent(d: np.ndarray, radius: float, metric: str, rule: str = "distance") -> np.ndarray:
    """The oracles' decision written plainly (tests, references): ``d`` as the kernels
    compute it (squared for Euclidean, in the working dtype), radius as given."""
    dt = d.dtype
    if rule == "squared":
        e = dt.type(radius)
        return d < (e * e if metric == "euclidean" else e)
    if metric == "euclidean":
        return np.sqrt(d.astype(np.float64)) < float(radius)
    return d.astype(np.float64) < float(radius)
