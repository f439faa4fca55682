"""Result dataclasses of the EDM functions (numpy arrays in, dataclasses out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..report.display import Displayable


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

    def as_dataframe(self):
        """A pandas DataFrame: time, observed, predicted (one target)."""
        import pandas as pd
        if np.ndim(self.predicted) != 1:
            raise ValueError("as_dataframe() needs a single target; index the result first")
        d = {"time": self.times, "observed": self.observed, "predicted": self.predicted}
        if self.variance is not None:
            d["variance"] = self.variance
        return pd.DataFrame(d)


@dataclass
class SkillScan(Displayable):
    """Skill over a scanned parameter (E, Tp, exclusion radius, theta)."""

    parameter: str
    values: np.ndarray
    rho: np.ndarray
    mae: np.ndarray
    rmse: np.ndarray

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
class CCMResult(Displayable):
    """CCM skill per library size, both directions.

    ``rho_xy``: x's embedding cross-maps y (pyEDM column ``x:y``; evidence that
    y drives x); ``rho_yx`` the reverse. ``*_samples`` hold every sample's rho
    ``(n_lib_sizes, sample)``.
    """

    lib_sizes: np.ndarray
    rho_xy: np.ndarray
    rho_yx: np.ndarray
    rho_xy_samples: np.ndarray | None = None
    rho_yx_samples: np.ndarray | None = None
    #: which k-NN back-end ran and its expected recall (pyedmcl.neighbors.NeighborInfo)
    neighbors: Any = field(default=None, repr=False)

    def as_dataframe(self, x_name: str = "x", y_name: str = "y"):
        import pandas as pd
        return pd.DataFrame({"LibSize": self.lib_sizes, f"{x_name}:{y_name}": self.rho_xy,
                             f"{y_name}:{x_name}": self.rho_yx})
