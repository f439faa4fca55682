"""Result dataclasses of the EDM functions (numpy arrays in, dataclasses out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..display import Displayable


@dataclass
class SimplexResult(Displayable):
    """Predictions and skill of one Simplex (or S-map) run.

    ``times`` are the 0-based data rows each prediction is *for* (prediction row
    + Tp; may lie past the data, where ``observed`` is NaN). With several targets
    ``predicted``/``observed`` are ``(n_targets, n_pred)`` and the skills arrays.
    """

    predicted: np.ndarray
    observed: np.ndarray
    times: np.ndarray
    rho: Any
    mae: Any
    rmse: Any
    E: int = 0
    tau: int = 1
    Tp: int = 1
    knn: int = 0
    variance: np.ndarray | None = None
    pred_times: np.ndarray | None = field(default=None, repr=False)
    #: which k-NN back-end ran and its expected recall (pyedmcl.neighbors.NeighborInfo)
    neighbors: Any = field(default=None, repr=False)
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)
    #: the input's time axis (and a 2-D target's names) where it had labels
    #: (:class:`pyedmcl.labels.Labels`); None: rows only
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "time"

    def time_index(self):
        """The time each prediction is for: the input's time labels (extrapolated past
        its ends by its step) where it had them, else the 0-based rows ``times``."""
        from ..labels import Labels

        return (self.labels or Labels()).at(self.times)

    def as_dataframe(self):
        """A pandas DataFrame of one target: observed, predicted (and variance). Labelled
        input (a DataArray, a time-indexed pandas object): indexed by its time axis;
        otherwise a ``time`` column of 0-based rows, as before."""
        import pandas as pd
        if np.ndim(self.predicted) != 1:
            raise ValueError("as_dataframe() needs a single target; index the result first")
        d = {"observed": self.observed, "predicted": self.predicted}
        if self.variance is not None:
            d["variance"] = self.variance
        if self.labels is not None and self.labels.time is not None:
            return pd.DataFrame(d, index=self.time_index())
        return pd.DataFrame({"time": self.times, **d})

    def as_xarray(self):
        """An ``xarray.Dataset``: observed, predicted (and variance) along ``time`` (the
        input's time labels, else the rows); several targets along ``target`` (named by
        a 2-D labelled target's coordinate). Needs xarray (``pyedmcl[xarray]``)."""
        from ..labels import require_xarray

        xr = require_xarray()
        lab = self.labels
        tname = lab.time_name if lab is not None else "time"
        coords: dict[str, Any] = {tname: np.asarray(self.time_index())}
        dims: tuple[str, ...] = (tname,)
        if np.ndim(self.predicted) == 2:
            dims = ("target", tname)
            nt = np.shape(self.predicted)[0]
            names = lab.names if lab is not None and lab.names and len(lab.names) == nt else None
            coords["target"] = list(names) if names else np.arange(nt)
        data = {"observed": (dims, np.asarray(self.observed)),
                "predicted": (dims, np.asarray(self.predicted))}
        if self.variance is not None:
            data["variance"] = (dims, np.asarray(self.variance))
        return xr.Dataset(data, coords=coords,
                          attrs={"E": self.E, "tau": self.tau, "Tp": self.Tp})


@dataclass
class SkillScan(Displayable):
    """Skill over a scanned parameter (E, Tp, exclusion radius, theta)."""

    parameter: str
    values: np.ndarray
    rho: np.ndarray
    mae: np.ndarray
    rmse: np.ndarray
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)

    @property
    def best(self):
        """The parameter value with the highest rho (first on ties), a plain Python number:
        ``embed_dimension(x).best`` is the best E; its skill is ``rho.max()``."""
        return self.values[int(np.nanargmax(self.rho))].item()

    def as_dataframe(self):
        import pandas as pd
        return pd.DataFrame({self.parameter: self.values, "rho": self.rho, "mae": self.mae,
                             "rmse": self.rmse})


@dataclass
class CrossMapSkill:
    """The fields every CCM result has: skill of both directions per library size.

    ``rho_xy``: x's embedding cross-maps y (pyEDM column ``x:y``; evidence that
    y drives x); ``rho_yx`` the reverse. ``*_samples`` hold every sample's rho.
    """

    lib_sizes: np.ndarray
    rho_xy: np.ndarray
    rho_yx: np.ndarray
    rho_xy_samples: np.ndarray | None = None
    rho_yx_samples: np.ndarray | None = None
    #: which k-NN method ran and its expected recall (pyedmcl.neighbors.NeighborInfo)
    neighbors: Any = field(default=None, repr=False)


@dataclass
class CCMResult(CrossMapSkill, Displayable):
    """CCM skill per library size, both directions (:class:`CrossMapSkill`);
    ``*_samples`` are ``(n_lib_sizes, sample)``.
    """

    #: the surrogate test (``ccm(..., surrogates=n)``): a
    #: :class:`pyedmcl.edm.ccm_null.CCMSignificance`, else None
    significance: Any = field(default=None, repr=False)
    #: why a value means nothing (a constant series, :mod:`pyedmcl.constant_series`)
    notes: tuple[str, ...] = field(default=(), repr=False)
    #: the two series' names where the input had them (``labels.names``: x's, y's)
    labels: Any = field(default=None, repr=False)
    LABELS: ClassVar[str] = "pair"

    @property
    def convergence(self) -> Any:
        """Does rho grow with library size? Kendall's tau of rho over L per direction, its
        one-sided p-value and a fitted ``rho_inf (1 - exp(-gamma L))``
        (:class:`pyedmcl.edm.convergence.Convergence`)."""
        from .convergence import convergence
        return convergence(self.lib_sizes, self.rho_xy, self.rho_yx)

    def as_dataframe(self, x_name: str | None = None, y_name: str | None = None):
        """One row per library size: rho of both directions (pyEDM's columns) and, with
        surrogates, each direction's p-value and null mean / 95% quantile
        (``"x:y p"``, ``"x:y null_mean"``, ``"x:y null_q95"``). The names default to the
        inputs' (a named pandas Series or DataArray), else ``x`` and ``y``."""
        import pandas as pd
        named = self.labels.names if self.labels is not None and self.labels.names else ("x", "y")
        x_name = named[0] if x_name is None else x_name
        y_name = named[1] if y_name is None else y_name
        xy, yx = f"{x_name}:{y_name}", f"{y_name}:{x_name}"
        d = {"LibSize": self.lib_sizes, xy: self.rho_xy, yx: self.rho_yx}
        sig = self.significance
        if sig is not None:
            for col, p, m, q in ((xy, sig.p_xy, sig.null_xy_mean, sig.null_xy_q95),
                                 (yx, sig.p_yx, sig.null_yx_mean, sig.null_yx_q95)):
                d.update({f"{col} p": p, f"{col} null_mean": m, f"{col} null_q95": q})
        return pd.DataFrame(d)


@dataclass
class CCMLagResult(CrossMapSkill):
    """CCM skill per cross-map lag and library size, both directions.

    ``rho_xy[a, s]``: x's embedding cross-maps y at lag ``lags[a]`` (pyEDM's column
    ``x:y`` of ``CCM(Tp=lags[a])``) and library size ``lib_sizes[s]``; evidence that y
    drives x where it peaks at a lag <= 0 (Ye et al. 2015). ``*_samples``:
    ``(n_lags, n_lib_sizes, sample)``.
    """

    lags: np.ndarray = field(kw_only=True)

    @staticmethod
    def _best(lags: np.ndarray, rho: np.ndarray) -> int | None:
        col = rho[:, -1]
        return None if np.isnan(col).all() else int(lags[int(np.nanargmax(col))])

    @property
    def best_lag_xy(self) -> int | None:
        """The lag of x:y's highest skill at the largest library size (first on ties)."""
        return self._best(self.lags, self.rho_xy)

    @property
    def best_lag_yx(self) -> int | None:
        """The lag of y:x's highest skill at the largest library size (first on ties)."""
        return self._best(self.lags, self.rho_yx)

    def as_dataframe(self, x_name: str = "x", y_name: str = "y"):
        """One row per (lag, library size): ``Tp``, ``LibSize`` and both directions' rho."""
        import pandas as pd
        a, s = np.meshgrid(np.arange(self.lags.size), np.arange(self.lib_sizes.size),
                           indexing="ij")
        return pd.DataFrame({"Tp": self.lags[a.ravel()], "LibSize": self.lib_sizes[s.ravel()],
                             f"{x_name}:{y_name}": self.rho_xy.ravel(),
                             f"{y_name}:{x_name}": self.rho_yx.ravel()})
