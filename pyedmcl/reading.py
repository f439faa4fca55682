"""Plain-language readings of results: what a number says about the system.

Shared by the demo report and the results' notebook views (``_repr_html_``). Each
function returns one or two sentences; thresholds are rules of thumb from the EDM and
RQA literature (Sugihara & May 1990, Sugihara 1994, Sugihara et al. 2012, Marwan et
al. 2007), stated in the sentence where they decide something, never a test of
significance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: rho printed with this many decimals: float32 kernels and finite samples make the
#: fourth decimal noise (sampling error of rho at n = 1000 is ~0.03 near rho = 0)
RHO_DECIMALS = 3
#: a rise of S-map skill over theta = 0 larger than this reads as nonlinearity ...
NONLINEAR_GAIN = 0.01
#: ... and so does a smaller rise that closes this share of the gap to rho = 1 (skill
#: already near 1 at theta = 0, e.g. a finely sampled attractor, leaves little to gain)
NONLINEAR_GAP_SHARE = 0.25
#: a CCM curve rising by more than this from the smallest to the largest library converges
CCM_RISE = 0.05

#: what each RQA measure indicates (Marwan et al. 2007, Phys. Rep. 438:237)
RQA_MEANING = {
    "RR": "recurrence rate: share of state pairs closer than the radius (set by the radius)",
    "DET": "determinism: share of recurrences on diagonal lines; near 1 for deterministic "
           "dynamics, low for noise",
    "L": "mean diagonal line length: how many steps nearby trajectories stay together "
         "(a predictability time)",
    "L_max": "longest diagonal line (outside the Theiler window)",
    "DIV": "divergence 1/L_max: larger for faster divergence of nearby trajectories (chaos)",
    "L_entr": "Shannon entropy of diagonal line lengths: complexity of the deterministic structure",
    "LAM": "laminarity: share of recurrences on vertical lines; high when the system lingers "
           "in states (laminar phases, intermittency)",
    "TT": "trapping time: mean vertical line length, how long states persist",
    "V_max": "longest vertical line",
    "V_entr": "Shannon entropy of vertical line lengths",
    "W": "mean white vertical line length: mean recurrence time",
    "W_max": "longest white vertical line: longest time without recurrence",
    "W_div": "1/W_max",
    "W_entr": "Shannon entropy of white line lengths (recurrence times)",
    "RTE": "recurrence-time entropy W_entr / ln(W_max), in [0, 1]: near 0 for periodic, "
           "near 1 for irregular returns (RPDE)",
    "DET_RR": "DET/RR ratio (useful for detecting transitions)",
    "LAM_DET": "LAM/DET ratio",
}


def rho(v: float) -> str:
    """A correlation rounded to its precision (3 decimals), NaN as 'n/a'."""
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{RHO_DECIMALS}f}"


def sig(v: float, digits: int = 3) -> str:
    """A measure to ``digits`` significant digits (integers stay integers)."""
    if v is None or not np.isfinite(v):
        return "n/a"
    if float(v).is_integer() and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


def embed_dimension(E: Sequence[int], rhos: Sequence[float]) -> str:
    """Best E and what it means."""
    E, r = np.asarray(E), np.asarray(rhos, dtype=float)
    if not np.isfinite(r).any():
        return "No finite forecast skill at any E."
    i = int(np.nanargmax(r))
    best, top = int(E[i]), float(r[i])
    s = (f"Forecast skill is highest at E = {best} (rho = {rho(top)}): about {best} lagged "
         f"coordinates reconstruct the dynamics, so use E = {best} for Simplex, S-map and CCM "
         "on this series.")
    close = [int(e) for e, v in zip(E, r, strict=True) if top - v <= 0.01]
    if min(close) < best:
        s += (f" Smaller E reach nearly the same skill (E = {min(close)}, within 0.01); "
              "the smallest such E is the parsimonious choice.")
    if top < 0.3:
        s += " Skill is low at every E: noise or a too coarse sampling dominates this series."
    return s


def predict_interval(Tp: Sequence[int], rhos: Sequence[float]) -> str:
    """Skill decay with the forecast horizon."""
    Tp, r = np.asarray(Tp), np.asarray(rhos, dtype=float)
    first, last = float(r[0]), float(r[-1])
    if first - last > 0.1:
        return (f"Skill falls from rho = {rho(first)} at Tp = {int(Tp[0])} to {rho(last)} at "
                f"Tp = {int(Tp[-1])}: forecasts degrade with the horizon, the signature of "
                "deterministic chaos (short-term predictable, long-term not).")
    return (f"Skill stays near rho = {rho(first)}..{rho(last)} up to Tp = {int(Tp[-1])}: little "
            "loss with the horizon (periodic or slowly varying dynamics, or strong "
            "autocorrelation).")


def is_nonlinear(thetas: Sequence[float], rhos: Sequence[float]) -> bool:
    """S-map skill at its best theta > 0 beats the linear model (theta = 0, or the
    smallest theta tried) by NONLINEAR_GAIN, or closes NONLINEAR_GAP_SHARE of the gap to 1."""
    th, r = np.asarray(thetas, dtype=float), np.asarray(rhos, dtype=float)
    i = int(np.nanargmax(r))
    lin = float(r[np.argmin(th)])
    gain = float(r[i]) - lin
    if th[i] <= th.min() or not np.isfinite(gain):
        return False
    return gain > NONLINEAR_GAIN or (gain > 1e-3 and gain >= NONLINEAR_GAP_SHARE * (1 - lin))


def predict_nonlinear(thetas: Sequence[float], rhos: Sequence[float]) -> str:
    """Nonlinearity from S-map skill over theta (Sugihara 1994)."""
    th, r = np.asarray(thetas, dtype=float), np.asarray(rhos, dtype=float)
    i = int(np.nanargmax(r))
    lin = float(r[np.argmin(th)])
    gain = float(r[i]) - lin
    if is_nonlinear(th, r):
        return (f"S-map skill rises from rho = {rho(lin)} with a global linear model (theta = "
                f"{th.min():g}) to {rho(float(r[i]))} at theta = {th[i]:g}: a state-dependent, nonlinear "
                "system (local models forecast better than one linear map).")
    return (f"S-map skill is best near theta = {th[i]:g} (rho = {rho(float(r[i]))}, gain over "
            f"linear {gain:+.3f}): no evidence of nonlinearity; a linear (possibly stochastic) "
            "model forecasts as well.")


def ccm(lib_sizes: Sequence[int], rho_xy: Sequence[float], rho_yx: Sequence[float],
        x: str = "x", y: str = "y", significance: Any = None, convergence: Any = None) -> str:
    """Which direction converges: ``y xmap x`` rising with L is evidence that x drives y;
    with a surrogate test (``significance``, ``convergence`` of a CCM result), whether each
    direction beats its null at the largest library and rises significantly."""
    r_xy, r_yx = np.asarray(rho_xy, dtype=float), np.asarray(rho_yx, dtype=float)
    parts = []
    for r, lib, tgt in ((r_yx, y, x), (r_xy, x, y)):
        rise = float(r[-1] - r[0])
        conv = rise > CCM_RISE and r[-1] > 0.1
        parts.append(f"{lib} xmap {tgt} goes from rho = {rho(float(r[0]))} to {rho(float(r[-1]))} "
                     f"as the library grows to {int(lib_sizes[-1])} "
                     + (f"(converges: evidence that {tgt} drives {lib})" if conv
                        else "(no clear convergence)"))
    s = "; ".join(parts) + "."
    a, b = float(r_yx[-1] - r_yx[0]), float(r_xy[-1] - r_xy[0])
    if max(a, b) > CCM_RISE and abs(float(r_yx[-1]) - float(r_xy[-1])) > 0.1:
        strong = (y, x) if r_yx[-1] > r_xy[-1] else (x, y)
        s += (f" The stronger curve, {strong[0]} xmap {strong[1]}, points to {strong[1]} "
              f"driving {strong[0]} (the weaker one may reflect feedback or synchrony).")
    s += " Convergence with library size, not a high rho alone, is CCM's criterion (Sugihara et al. 2012)"
    if significance is None:
        return s + "; no significance test was run here (surrogates=n runs one)."
    tests = []
    for d, lib, tgt in (("yx", y, x), ("xy", x, y)):
        p = float(np.asarray(getattr(significance, f"p_{d}"))[-1])
        verdict = "above its null" if p < 0.05 else "not above its null"
        t = f"{lib} xmap {tgt} is {verdict} at L = {int(lib_sizes[-1])} (p = {sig(p, 2)}"
        if convergence is not None:
            t += f"; Kendall's tau of rho over L: p = {sig(float(getattr(convergence, f'p_{d}')), 2)}"
        tests.append(t + ")")
    return (s + f". Against {significance.n} {significance.method} surrogates of the driver: "
            + "; ".join(tests) + ".")


def rqa(measures: dict[str, float]) -> str:
    """A two-sentence reading of DET, L and LAM."""
    det, lam = measures.get("DET", np.nan), measures.get("LAM", np.nan)
    L = measures.get("L", np.nan)
    s = (f"{sig(100 * det, 3)}% of recurrences lie on diagonal lines (DET): "
         + ("strongly deterministic dynamics" if det > 0.9 else
            "partly deterministic dynamics" if det > 0.5 else "weak determinism, noise-like")
         + f"; nearby trajectories stay together for L = {sig(L)} steps on average.")
    s += (f" LAM = {sig(lam)}: "
          + ("the system lingers in states (laminar phases)." if lam > 0.5 else
             "few laminar phases (states are left quickly)."))
    return s
