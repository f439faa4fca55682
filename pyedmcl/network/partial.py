"""Partial cross mapping (Leng et al. 2020, Nat Commun 11:2632): is x -> y direct, or
carried by an intermediate z?

Cross mapping from y's shadow manifold M_y estimates x (``x^ = x | M_y``) whenever x
acts on y, directly or through z. Leng et al. separate the two: the part of x that
reaches y through z is what M_y knows of z, so estimate z from M_y (``z^ = z | M_y``),
rebuild a shadow manifold from that estimate (M_z^) and estimate x from it (``x^^ = x |
M_z^``, the *indirect* estimate). The partial cross map is the partial correlation

    PCM(x -> y | z) = rho(x, x^ | x^^)
                    = (r(x, x^) - r(x, x^^) r(x^, x^^)) / sqrt((1 - r(x, x^^)^2)(1 - r(x^, x^^)^2))

over the times all three exist. Through z only: x^ carries nothing of x that x^^ lacks,
PCM ~ 0 while the plain cross map ``r(x, x^)`` stays high; a direct link keeps PCM near
the cross map. Lags (Ye et al. 2015): x^ estimates x at the pair's lag ``l_xy`` (x at
t + l_xy from M_y at t), z^ estimates z at ``l_zy``; x^^ estimates the same values of x as
x^, so the partial correlation compares like with like.

Significance: every surrogate of x (the same surrogates, by seed, as the all-to-all
map's null, :func:`pyedmcl.xmap.xmap_null.series_rng`) goes through both
estimates with the same neighbours (M_y and M_z^ do not depend on x), one gather each;
``p = (1 + #{PCM_surrogate >= PCM}) / (n + 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .crossmap import LibraryMap, rho_rows


def partial_rows(o: np.ndarray, d: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pcm, rho)`` per row: the partial correlation of ``o`` and ``d`` given ``i``
    (rows ``(m, T)``, over the columns where all three are finite), and ``r(o, d)``."""
    ok = np.isfinite(o) & np.isfinite(d) & np.isfinite(i)
    o, d, i = (np.where(ok, a, np.nan) for a in (o, d, i))
    r_od, r_oi, r_di = rho_rows(o, d), rho_rows(o, i), rho_rows(d, i)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.sqrt(np.maximum(1 - r_oi ** 2, 0) * np.maximum(1 - r_di ** 2, 0))
        pc = (r_od - r_oi * r_di) / den
    pc = np.where(den > 1e-12, pc, 0.0)  # x^^ explains all of x or of x^: nothing left
    return np.clip(pc, -1.0, 1.0), r_od


def _real(dtype: Any, what: str) -> str:
    """The kernels' type of ``dtype`` ("float32" / "float64", None: float32)."""
    if dtype is None or str(np.dtype(dtype)) == "float32":
        return "float"
    if str(np.dtype(dtype)) == "float64":
        return "double"
    raise ValueError(f"dtype={dtype!r} is invalid for {what}; allowed: 'float32', 'float64'")


def _longest_run(ok: np.ndarray) -> tuple[int, int]:
    """``(start, stop)`` of the longest run of True in ``ok`` (a run also breaks where
    ``ok`` is False; ``(0, 0)`` when none)."""
    edges = np.flatnonzero(np.diff(np.r_[0, ok.astype(np.int8), 0]))
    if edges.size == 0:
        return 0, 0
    starts, stops = edges[::2], edges[1::2]
    j = int(np.argmax(stops - starts))
    return int(starts[j]), int(stops[j])


class PartialMapper:
    """Partial cross maps among the rows of ``Z`` (``(N, n)`` standardised series):
    one :class:`LibraryMap` per library series and per estimated intermediate, reused by
    every triple that needs it."""

    def __init__(self, be, Z: np.ndarray, E: np.ndarray, *, tau: int = 1, real: str = "float",
                 maps: dict[int, LibraryMap] | None = None):
        self.be, self.Z, self.E, self.tau, self.real = be, Z, np.asarray(E), tau, real
        self.maps = {} if maps is None else maps
        self._zhat: dict[tuple[int, int, int], tuple[LibraryMap, int]] = {}

    def library(self, i: int) -> LibraryMap:
        """Series i's map (made once)."""
        if i not in self.maps:
            self.maps[i] = LibraryMap(self.be, self.Z[i], E=int(self.E[i]), tau=self.tau,
                                      real=self.real)
        return self.maps[i]

    def _via(self, y: int, z: int, l_zy: int) -> tuple[LibraryMap, int] | None:
        key = (y, z, l_zy)
        if key not in self._zhat:
            my = self.library(y)
            zhat = my.predict(self.Z[z], l_zy)[0][0]
            a, b = _longest_run(np.isfinite(zhat) & np.r_[True, np.diff(my.times) == 1])
            zhat, t0 = zhat[a:b], int(my.times[a])
            try:
                self._zhat[key] = (LibraryMap(self.be, zhat, E=int(self.E[z]), tau=self.tau,
                                              real=self.real), t0)
            except ValueError:  # too short an estimate to embed
                self._zhat[key] = None
        return self._zhat[key]

    def pcm(self, x: int, y: int, z: int, l_xy: int, l_zy: int,
            S: np.ndarray | None = None) -> tuple[float, float, np.ndarray]:
        """``(pcm, rho, null)`` of x -> y given z; ``S``: surrogates of x ``(ns, n)``
        (standardised), whose PCMs form ``null`` (empty without)."""
        T = self.Z[x][None, :] if S is None else np.vstack([self.Z[x][None, :], S])
        my = self.library(y)
        direct, obs = my.predict(T, l_xy)
        via = self._via(y, z, l_zy)
        if via is None:
            return np.nan, np.nan, np.full(T.shape[0] - 1, np.nan)
        mz, t0 = via
        indirect, _ = mz.predict(T, t0 + l_xy)  # M_z^'s row s is time t0 + s
        cols = np.searchsorted(my.times, mz.times + t0)
        pc, r = partial_rows(obs[:, cols], direct[:, cols], indirect)
        return float(pc[0]), float(r[0]), pc[1:]


def pcm_table(mapper: PartialMapper, triples: list[tuple[int, int, int, int, int]],
              surrogates: dict[int, np.ndarray] | None = None) -> dict[str, Any]:
    """Arrays ``pcm``, ``rho``, ``p_value`` (NaN without surrogates) of each triple
    ``(x, y, z, l_xy, l_zy)``; ``surrogates``: x -> its standardised surrogates."""
    from ..primitives.stats import surrogate_p
    m = len(triples)
    out = {"pcm": np.full(m, np.nan), "rho": np.full(m, np.nan), "p_value": np.full(m, np.nan)}
    for t, (x, y, z, lxy, lzy) in enumerate(triples):
        S = None if surrogates is None else surrogates.get(x)
        pc, r, null = mapper.pcm(x, y, z, lxy, lzy, S)
        out["pcm"][t], out["rho"][t] = pc, r
        if null.size:
            out["p_value"][t] = surrogate_p(pc, null)
    return out


def partial_cross_map(X: Any, *, triples: Any, E: Any = 2, tau: int = 1, lags: Any = 0,
                      surrogates: int = 0, surrogate_method: str = "ebisuzaki",
                      seed: int | None = None, dtype: Any = "float32", device: Any = None,
                      backend: str | None = None) -> Any:
    """Partial cross maps ``PCM(source -> target | via)`` of a data matrix (Leng et al. 2020).

    ``X``: time down the rows, one column per series (a DataFrame's names label them),
    at least 3 series. ``triples``: ``(source, target, via)`` labels (column names or
    indices). ``E``: one int or one per series; ``lags``: one int (every pair at that
    cross-map lag) or a list / range (each pair at its lag of highest skill among them).
    ``surrogates=n``: p-values against n surrogates of each source (``seed`` makes them
    reproducible). Returns a DataFrame: source, target, via, lag_source, lag_via, rho
    (the plain cross map at lag_source), pcm, share (pcm / rho), p_value. ``dtype``:
    the neighbour search's type, "float32" (series standardised first) or "float64".
    """
    import pandas as pd

    from clkernels import get_backend

    from ..primitives.ranges import check_lags
    from ..primitives.surrogates import check_method, generate
    from ..validation import check_int, check_int_array
    from ..xmap.core import as_panel
    from ..xmap.xmap_null import series_rng
    from .crossmap import lag_scan
    P, names = as_panel(X, np.float64)
    N, n = P.shape
    if N < 3:
        raise ValueError(f"X has {N} series; partial cross mapping needs at least 3 "
                         "(source, target and via)")
    labels = list(names) if names is not None else list(range(N))
    pos = {lab: i for i, lab in enumerate(labels)}
    try:
        trip = [tuple(pos[v] for v in t) for t in triples]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"triples must be (source, target, via) labels of X's columns "
                         f"({labels[:5]}...): {exc}") from exc
    if any(len(set(t)) != 3 or len(t) != 3 for t in trip):
        raise ValueError("each triple needs three different series (source, target, via)")
    E_arr = check_int_array(E, "E", 1, 512)
    E_arr = np.full(N, E_arr[0]) if E_arr.size == 1 else E_arr
    if E_arr.size != N:
        raise ValueError(f"E has {E_arr.size} values for {N} series; give one or N")
    scan = np.ndim(lags) > 0
    lag_arr = check_lags(lags if scan else [lags], n // 4, "lags")
    surrogates = check_int(surrogates, "surrogates", 0)
    Z = (P - P.mean(axis=1, keepdims=True)) / np.where(P.std(axis=1) > 0, P.std(axis=1), 1.0)[:, None]
    real = _real(dtype, "partial_cross_map")
    pm = PartialMapper(get_backend(device, backend), Z, E_arr, tau=tau, real=real)

    def lag_of(src: int, lib: int) -> int:
        if not scan:
            return int(lag_arr[0])
        r = lag_scan(pm.library(lib), Z[src], lag_arr)[:, 0]
        return int(lag_arr[int(np.nanargmax(r))]) if np.isfinite(r).any() else 0

    full = [(x, y, z, lag_of(x, y), lag_of(z, y)) for x, y, z in trip]
    sur = None
    if surrogates:
        check_method(surrogate_method, "surrogate_method")
        seed = int(np.random.SeedSequence().generate_state(1)[0]) if seed is None else \
            check_int(seed, "seed", 0)
        sur = {}
        for x in {t[0] for t in full}:
            S = generate(P[x], surrogate_method, surrogates, series_rng(seed, x))
            sd = S.std(axis=1, keepdims=True)
            sur[x] = (S - S.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    t = pcm_table(pm, full, sur)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = t["pcm"] / t["rho"]
    return pd.DataFrame({"source": [labels[v[0]] for v in full],
                         "target": [labels[v[1]] for v in full],
                         "via": [labels[v[2]] for v in full],
                         "lag_source": [v[3] for v in full], "lag_via": [v[4] for v in full],
                         "rho": t["rho"], "pcm": t["pcm"], "share": share,
                         "p_value": t["p_value"]})
