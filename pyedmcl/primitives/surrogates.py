"""Surrogate series: the null models CCM's significance is measured against.

``surrogates(x, method, n, seed)`` returns an ``(n, L)`` array of series that keep one
property of ``x`` and destroy the rest, so that a cross-map skill no higher than the
surrogates' is not evidence of coupling:

* ``random_shuffle`` -- a random permutation of the values: keeps the value
  distribution (sorted values identical), destroys all temporal structure;
* ``ebisuzaki`` -- phase randomisation (Ebisuzaki 1997, J. Climate 10:2147; Theiler
  et al. 1992): the Fourier amplitudes are kept and each phase drawn uniformly, so the
  periodogram and hence the autocorrelation are kept (the mean too); the Nyquist term
  of an even-length series, which has no phase, gets a random sign. The amplitude
  spectrum of every surrogate equals that of ``x`` up to FFT rounding (about 1e-12 of
  its largest amplitude). pyEDM instead redraws the Nyquist amplitude
  (``sqrt(2) |a| cos(phi)``), drops the mean and rescales to the data's standard
  deviation, and fails for odd lengths; here the spectrum is kept exactly;
* ``seasonal`` -- pyEDM's: a smoothing spline (SciPy's ``UnivariateSpline`` with
  smoothing factor ``smooth``) is the seasonal cycle, kept; the residuals are shuffled
  and Gaussian noise of standard deviation ``alpha`` (default: the data's range / 5,
  as pyEDM) is added. Needs SciPy (``pip install 'pyedmcl[surrogates]'``);
* ``twin`` -- twin surrogates (Thiel et al. 2006, Europhys. Lett. 75:535): states of
  the ``E``-dimensional delay embedding whose recurrences (max norm, radius
  ``threshold``) are identical are twins; a surrogate walks the data's trajectory and
  at each step jumps, with equal probability, to the future of any twin of the current
  state or follows its own future, restarting at a random state where the data ends.
  Every value is one of the data's values, and the surrogates are new trajectories
  of the same dynamics (a null for nonlinear hypotheses). Twins are found as
  pyunicorn's ``Surrogates.twins`` finds them (rows of the recurrence matrix equal,
  more than the state itself recurrent, more than ``min_dist`` steps apart).

Reproducible: the same ``seed`` gives the same surrogates (``numpy.random.default_rng``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import as_series, check_host_memory, check_int, check_seed

#: the methods :func:`surrogates` knows
METHODS = ("random_shuffle", "ebisuzaki", "seasonal", "twin")


def check_method(method: Any, name: str = "method") -> str:
    """A surrogate method name (case-insensitive), or a ValueError naming the allowed ones."""
    m = method.lower() if isinstance(method, str) else method
    if m not in METHODS:
        raise ValueError(f"{name}={method!r} is invalid; allowed: {', '.join(METHODS)}")
    return m


#: the keyword options of :func:`surrogates` (method-specific)
OPTIONS = ("smooth", "alpha", "E", "tau", "threshold", "recurrence_rate", "min_dist")


def check_options(options: Any, name: str = "options") -> dict[str, Any]:
    """A dict of :data:`OPTIONS` keywords (None: none), or a ValueError naming the bad key."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"{name} must be a dict of surrogate options, got {type(options).__name__}")
    bad = sorted(set(options) - set(OPTIONS))
    if bad:
        raise ValueError(f"{name} has unknown keys {bad}; allowed: {', '.join(OPTIONS)}")
    return dict(options)


def _check_float(value: Any, name: str, lo: float, allowed: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number ({allowed}), got {value!r}") from None
    if not np.isfinite(v) or v < lo:
        raise ValueError(f"{name}={value!r} is out of range; allowed: {allowed}")
    return v


def surrogates(x: Any, method: str = "ebisuzaki", n: int = 100, seed: int | None = None, *,
               smooth: float = 0.8, alpha: float | None = None, E: int = 2, tau: int = 1,
               threshold: float | None = None, recurrence_rate: float = 0.1,
               min_dist: int = 7) -> np.ndarray:
    """``(n, L)`` float64 surrogates of the series ``x`` (length L) by ``method``.

    ``method``: "random_shuffle", "ebisuzaki" (default, as pyEDM), "seasonal" or "twin"
    (module docstring: what each keeps). ``seed``: None (fresh entropy) or an int >= 0;
    the same seed gives the same surrogates. ``seasonal``: ``smooth`` is the spline's
    smoothing factor (SciPy's ``s``: the largest sum of squared residuals), ``alpha``
    the noise's standard deviation (None: range / 5; 0: no noise). ``twin``: embedding
    dimension ``E`` and lag ``tau`` of the states (state t = x[t], x[t + tau], ...),
    recurrence radius ``threshold`` in the max norm (None: the distance below which a
    fraction ``recurrence_rate`` of the state pairs recur; estimated from 2^22 pairs for
    long series), twins at least
    ``min_dist + 1`` steps apart.
    """
    xs = as_series(x, "x")
    method = check_method(method)
    n = check_int(n, "n", 1)
    seed = check_seed(seed)
    check_host_memory("n", n, 16 * xs.size, f"surrogates of a series of {xs.size} values")
    return generate(xs, method, n, np.random.default_rng(seed), smooth=smooth, alpha=alpha,
                    E=E, tau=tau, threshold=threshold, recurrence_rate=recurrence_rate,
                    min_dist=min_dist)


def generate(x: np.ndarray, method: str, n: int, rng: np.random.Generator,
             **options: Any) -> np.ndarray:
    """:func:`surrogates` for a validated float64 series and a generator (internal: CCM
    and xmap derive one generator per series from their seed)."""
    check_options(options)
    L = x.size
    if method == "random_shuffle":
        if L < 2:
            raise ValueError(f"x has {L} value; random_shuffle needs at least 2")
        return rng.permuted(np.broadcast_to(x, (n, L)), axis=1)
    if method == "ebisuzaki":
        if L < 3:
            raise ValueError(f"x has {L} values; ebisuzaki needs at least 3")
        return _ebisuzaki(x, n, rng)
    if method == "seasonal":
        return _seasonal(x, n, rng, options.get("smooth", 0.8), options.get("alpha"))
    return _twin(x, n, rng, E=options.get("E", 2), tau=options.get("tau", 1),
                 threshold=options.get("threshold"),
                 recurrence_rate=options.get("recurrence_rate", 0.1),
                 min_dist=options.get("min_dist", 7))


def _ebisuzaki(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    L = x.size
    f = np.fft.rfft(x)
    phases = rng.uniform(0.0, 2.0 * np.pi, (n, f.size))
    z = np.abs(f) * np.exp(1j * phases)
    z[:, 0] = f[0]  # the mean
    if L % 2 == 0:  # the Nyquist term is real: a random sign keeps its amplitude
        z[:, -1] = f[-1].real * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return np.fft.irfft(z, n=L, axis=1)


def seasonal_trend(x: np.ndarray, smooth: float) -> np.ndarray:
    """pyEDM's seasonal cycle: SciPy's ``UnivariateSpline`` over 0..L-1, refitted with
    smoothing factor ``smooth`` (exactly pyEDM's two calls)."""
    try:
        from scipy.interpolate import UnivariateSpline
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on extras
        raise ModuleNotFoundError("seasonal surrogates need SciPy: pip install "
                                  "'pyedmcl[surrogates]'") from exc
    t = np.arange(x.size, dtype=np.float64)
    spline = UnivariateSpline(t, x)
    spline.set_smoothing_factor(smooth)
    return spline(t)


def _seasonal(x: np.ndarray, n: int, rng: np.random.Generator, smooth: Any,
              alpha: Any) -> np.ndarray:
    L = x.size
    if L < 4:
        raise ValueError(f"x has {L} values; seasonal surrogates (a cubic spline) need at "
                         "least 4")
    smooth = _check_float(smooth, "smooth", 0.0, "a finite number >= 0")
    alpha = float(np.ptp(x)) / 5 if alpha is None else _check_float(
        alpha, "alpha", 0.0, "None or a finite number >= 0")
    trend = seasonal_trend(x, smooth)
    out = rng.permuted(np.broadcast_to(x - trend, (n, L)), axis=1)
    out += trend
    if alpha > 0:
        out += rng.normal(0.0, alpha, (n, L))
    return out


def twin_states(x: np.ndarray, E: int, tau: int) -> np.ndarray:
    """``(L - (E-1) tau, E)`` delay states ``x[t], x[t + tau], ...`` (pyunicorn's embedding)."""
    ns = x.size - (E - 1) * tau
    return np.stack([x[i * tau:i * tau + ns] for i in range(E)], axis=1)


def recurrence_matrix(states: np.ndarray, threshold: float) -> np.ndarray:
    """Boolean ``(ns, ns)``: max-norm distance <= ``threshold`` (the diagonal is True),
    one coordinate at a time over row slabs (no (ns, ns, E) temporary)."""
    ns = states.shape[0]
    R = np.ones((ns, ns), dtype=bool)
    step = max(1, (1 << 22) // max(1, ns))
    for a in range(0, ns, step):
        blk = R[a:a + step]
        for c in states.T:
            blk &= np.abs(c[a:a + step, None] - c[None, :]) <= threshold
    return R


#: distances above which :func:`default_threshold` estimates the quantile from the rows
#: of randomly chosen states (a fixed generator: deterministic; bounds its memory)
THRESHOLD_PAIRS = 1 << 23


def default_threshold(states: np.ndarray, rate: float) -> float:
    """The max-norm radius at which a fraction ``rate`` of the distinct state pairs recur
    (over the rows of ``THRESHOLD_PAIRS / ns`` states drawn with a fixed seed when there
    are more pairs than :data:`THRESHOLD_PAIRS`)."""
    ns = states.shape[0]
    if ns < 2:
        return 0.0
    rows = np.arange(ns)
    sampled = ns * (ns - 1) // 2 > THRESHOLD_PAIRS
    if sampled:
        rows = np.sort(np.random.default_rng(0).choice(ns, THRESHOLD_PAIRS // ns,
                                                       replace=False))
    parts = []
    step = max(1, (1 << 22) // ns)
    for a in range(0, rows.size, step):
        r = rows[a:a + step]
        d = np.zeros((r.size, ns))
        for c in states.T:
            np.maximum(d, np.abs(c[r, None] - c[None, :]), out=d)
        cols = np.arange(ns)[None, :]
        # every pair once (all rows), or every partner of the sampled rows; never self
        parts.append(d[cols != r[:, None]] if sampled else d[cols > r[:, None]])
    return float(np.quantile(np.concatenate(parts), rate))


def find_twins(R: np.ndarray, min_dist: int) -> tuple[np.ndarray, np.ndarray]:
    """Twins of every state as CSR ``(start, twins)``: ``twins[start[s]:start[s+1]]`` are
    the states (ascending) whose row of ``R`` equals row ``s``, more than ``min_dist``
    steps from ``s``, in rows with at least one recurrence besides the state itself."""
    ns = R.shape[0]
    packed = np.packbits(R, axis=1)
    _, group = np.unique(packed, axis=0, return_inverse=True)
    group = group.reshape(-1)
    degree = R.sum(axis=1)
    lists: list[np.ndarray] = []
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    members_of = np.split(order, bounds)
    by_state: list[np.ndarray | None] = [None] * ns
    for members in members_of:
        if members.size < 2 or degree[members[0]] <= 1:
            continue
        for s in members:
            by_state[s] = members[np.abs(members - s) > min_dist]
    counts = np.zeros(ns, dtype=np.int64)
    for s in range(ns):
        t = by_state[s]
        if t is not None and t.size:
            counts[s] = t.size
            lists.append(t)
    start = np.zeros(ns + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    flat = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, np.int64)
    return start, flat


def _twin(x: np.ndarray, n: int, rng: np.random.Generator, *, E: Any, tau: Any, threshold: Any,
          recurrence_rate: Any, min_dist: Any) -> np.ndarray:
    L = x.size
    E = check_int(E, "E", 1, 64)
    tau = check_int(tau, "tau", 1, max(1, L))
    min_dist = check_int(min_dist, "min_dist", 0)
    ns = L - (E - 1) * tau
    if ns < 2:
        raise ValueError(f"x has {L} values: too short for twin surrogates with E={E}, "
                         f"tau={tau} (needs at least {(E - 1) * tau + 2})")
    check_host_memory("x", ns, 2.0 * ns, f"the {ns} x {ns} recurrence matrix of twin surrogates")
    states = twin_states(x, E, tau)
    if threshold is None:
        rate = _check_float(recurrence_rate, "recurrence_rate", 0.0, "a number in (0, 1]")
        if not 0 < rate <= 1:
            raise ValueError(f"recurrence_rate={recurrence_rate!r} is out of range; allowed: "
                             "a number in (0, 1]")
        threshold = default_threshold(states, rate)
    threshold = _check_float(threshold, "threshold", 0.0, "None or a finite number >= 0")
    start, flat = find_twins(recurrence_matrix(states, threshold), min_dist)
    cnt = np.diff(start)
    out = np.empty((n, L))
    k = rng.integers(0, ns, n)
    for t in range(L):
        out[:, t] = x[k]
        c = cnt[k]
        r = np.floor(rng.random(n) * (c + 1)).astype(np.int64)
        jump = r < c
        nxt = k + 1
        nxt[jump] = flat[start[k[jump]] + r[jump]] + 1
        over = nxt >= ns  # past the data's last state: restart anywhere
        if over.any():
            nxt[over] = rng.integers(0, ns, int(over.sum()))
        k = nxt
    return out
