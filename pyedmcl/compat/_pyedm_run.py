"""pyEDM's Simplex / S-map object model for :mod:`pyedmcl.compat.pyedm` (general path).

pyEDM 2.5's row bookkeeping (``EDM.Validate``, ``CreateIndices``, ``RemoveNan``,
``Neighbors.FindNeighbors``, ``FormatProjection``, ``ConvertTime``, ``AddTime``)
reproduced step for step, so multivariate and ``embedded=True`` state spaces, NaN
rows, ``validLib``, ``returnObject`` (the object with ``knn_neighbors``,
``knn_distances``, ``pred_i``, ``lib_i``, ``libOverlap``, ``Projection``, ...),
``generateSteps`` and scikit-learn ``solver=`` objects give pyEDM's frames.

The neighbour search (the O(N_pred x N_lib) part) runs on the OpenCL device
through :func:`pyedmcl.knn_table` (:mod:`._state_knn`: an (N, D) state space laid
out row after row as one series). Ties are decided as pyEDM decides them: pyEDM keeps
equidistant candidates in scipy KDTree's order, so the query rows whose candidates tie
are asked again of a KDTree built as pyEDM builds it
(:func:`._state_knn.kdtree_candidates`), and Simplex's tie-break (distance, ``|p - l|``,
``l``, full library scans where a tie straddles the candidates) is pyEDM's own. Without
scipy the device's documented order (distance, ``|p - l|``, ``l``) decides every tie.
Where ``knn`` exceeds the fused kernel's limit (S-map's default, the whole library)
the distances are taken on the host in float64. Weights and the S-map least-squares
solve follow pyEDM's float64 arithmetic on the host.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from warnings import warn

import numpy as np
import pandas as pd

from .._blas import one_blas_thread


def _iterable(v: Any) -> bool:
    return not isinstance(v, str) and hasattr(v, "__iter__")


def embed_frame(df: pd.DataFrame, E: int, tau: int, columns: list[str]) -> pd.DataFrame:
    """pyEDM's ``Embed``: ``E`` shifts of each column, named ``col(t-k)`` / ``col(t+k)``."""
    shifts = list(range(0, int(E * (-tau)), -tau))
    out = df[columns].shift(periods=shifts).copy()
    pairs = [s.rsplit("_", 1) for s in out.columns]
    if tau > 0:
        out.columns = ["".join([a, "(t+", b.replace("-", ""), ")"]) for a, b in pairs]
    else:
        out.columns = ["".join([a, "(t-", b, ")"]) for a, b in pairs]
    return out


def library_rows(name: str, lib_pairs: list[tuple[int, int]], E: int, tau: int, Tp: int,
                 embedded: bool) -> np.ndarray:
    """pyEDM's ``CreateIndices`` library rows (0-based) of 1-based ``lib_pairs``, with its
    checks and messages: start after end, indices below 1, and an embedding span
    (``|tau| (E - 1)`` and ``Tp``) longer than the rows left."""
    for a, b in lib_pairs:
        if a > b:
            raise ValueError(f"{name}: CreateIndices() lib start  {a} exceeds lib end {b}.")
        if a < 1 or b < 1:
            raise ValueError(f"{name}: CreateIndices() lib indices  less than 1 not allowed.")
    shift = abs(tau) * (E - 1)
    parts = []
    for r, (start, stop) in enumerate(lib_pairs):
        if not embedded:
            if tau < 0:
                start += shift
            else:
                stop -= shift
        if Tp < 0:
            if not embedded:
                start = max(start, start + abs(Tp) - 1)
        elif r == len(lib_pairs) - 1:
            stop -= Tp
        parts.append(np.arange(start - 1, stop, dtype=int))
    rows = np.concatenate(parts)
    if embedded:
        if len(rows) < abs(Tp):
            raise ValueError(f"{name}: CreateIndices(): embbeded True Tp = {Tp} is invalid "
                             "for the library.")
    else:
        vs, ve = max(-shift, 0, Tp), min(-shift, 0, Tp)
        if abs(vs - ve) + 1 > len(rows):
            raise ValueError(f"{name}: CreateIndices(): Combination of E = {E}  Tp = "
                             f"{Tp}  tau = {tau} is invalid for the library.")
    return rows


class PyEDMRun:
    """One pyEDM Simplex or S-map call; attributes carry pyEDM's names."""

    def __init__(self, name: str, dataFrame, columns="", target="", lib="", pred="", E=0, Tp=1,
                 knn=0, tau=-1, exclusionRadius=0, embedded=False, validLib=(), noTime=False,
                 generateSteps=0, generateConcat=False, ignoreNan=True, theta=None, solver=None,
                 device=None):
        self.name = name
        self.Data = dataFrame
        self.columns, self.target = columns, target
        self.lib, self.pred = lib, pred
        self.E, self.Tp, self.knn, self.tau = E, Tp, knn, tau
        self.exclusionRadius = exclusionRadius
        self.embedded = embedded
        self.validLib = [] if validLib is None else validLib
        self.noTime, self.ignoreNan = noTime, ignoreNan
        self.generateSteps, self.generateConcat = generateSteps, generateConcat
        self.theta, self.solver, self.device = theta, solver, device
        self.Embedding = self.Projection = None
        self.Coefficients = self.SingularValues = None
        self.lib_i = self.pred_i = self.pred_i_all = None
        self.predList: list[np.ndarray] = []
        self.disjointLib = self.disjointPred = False
        self.libOverlap = False
        self.xRadKnnFactor = 5
        self.tieBreak = False
        self.knn_neighbors = self.knn_distances = None
        self.projection = self.variance = None
        self.coefficients = self.singularValues = None
        self.targetVecNan = False
        self.validate()
        self.create_indices()
        self.targetVec = self.Data[[self.target[0]]].to_numpy(dtype=np.float64)
        if self.noTime:
            self.time = np.arange(1, self.Data.shape[0] + 1, dtype=int)
        else:
            self.time = self.Data.iloc[:, 0].to_numpy()

    # -- pyEDM EDM.Validate -------------------------------------------------
    def _names(self, names, what: str, each: str) -> list:
        """``names`` (a list, or a space-separated string) checked against the data's
        columns, with pyEDM's messages."""
        n = self.name
        if not len(names):
            raise ValueError(f"Validate() {n}: {what} required.")
        names = list(names if _iterable(names) else names.split())
        for c in names:
            if c not in self.Data.columns:
                raise ValueError(f"Validate() {n}: {each} {c} not found in dataFrame.")
        return names

    def validate(self) -> None:
        n = self.name
        if self.Data is None:
            raise ValueError(f"Validate() {n}: dataFrame required.")
        if not isinstance(self.Data, pd.DataFrame):
            raise ValueError(f"Validate() {n}: dataFrame is not a Pandas DataFrame.")
        self.columns = self._names(self.columns, "columns", "column")
        self.target = self._names(self.target, "target", "target")
        if not self.embedded:
            if self.tau == 0:
                raise ValueError(f"Validate() {n}: tau must be non-zero.")
            if self.E < 1:
                raise ValueError(f"Validate() {n}: E = {self.E} is invalid.")
        if not len(self.lib):
            raise ValueError(f"Validate() {n}: lib required.")
        if not _iterable(self.lib):
            self.lib = [int(i) for i in self.lib.split()]
        if not len(self.pred):
            raise ValueError(f"Validate() {n}: pred required.")
        if not _iterable(self.pred):
            self.pred = [int(i) for i in self.pred.split()]
        self.lib, self.pred = [int(i) for i in self.lib], [int(i) for i in self.pred]
        if n in ("Simplex", "Multiview"):
            if self.embedded:
                self.E = len(self.columns)
            if self.knn < 1:
                self.knn = self.E + 1
        if n == "SMap":
            if self.theta is None:
                raise ValueError(f"{n} Validate(): S-Map theta required.")
            if self.embedded and len(self.columns):
                self.E = len(self.columns)
            if not self.embedded and len(self.columns) > 1:
                raise ValueError(f"{n} Validate(): Multivariable S-Map must use embedded = True "
                                 "to ensure data/dimension correspondance.")
        if self.generateSteps > 0:
            if self.embedded:
                raise ValueError(f"{n} Validate(): generateSteps > 0 must use univariate "
                                 "embedded = False.")
            if self.target[0] != self.columns[0]:
                raise ValueError(f"{n} Validate(): generateSteps > 0 must use univariate target "
                                 f"({self.target[0]}) == columns ({self.columns[0]}).")
            if not self.noTime:
                try:
                    is_dt = isinstance(dt.datetime.fromisoformat(self.Data.iloc[0, 0]), dt.datetime)
                except (TypeError, ValueError):
                    is_dt = False
                if is_dt:
                    raise ValueError(f"{n} Validate(): generateSteps with datetime needs to use "
                                     "noTime = True.")

    # -- pyEDM EDM.CreateIndices --------------------------------------------
    def create_indices(self) -> None:
        n, nrows = self.name, self.Data.shape[0]
        if len(self.lib) % 2:
            raise ValueError(f"{n}: CreateIndices() lib must be an even number of elements. "
                             "Lib start : stop pairs")
        lib_pairs = [(self.lib[i], self.lib[i + 1]) for i in range(0, len(self.lib), 2)]
        self.lib_i = library_rows(n, lib_pairs, self.E, self.tau, self.Tp, self.embedded)
        shift = abs(self.tau) * (self.E - 1)
        self.disjointLib = len(lib_pairs) > 1
        if len(self.pred) % 2:
            raise ValueError(f"{n}: CreateIndices() pred must be an even number of elements. "
                             "Pred start : stop pairs")
        pred_pairs = [(self.pred[i], self.pred[i + 1]) for i in range(0, len(self.pred), 2)]
        self.disjointPred = len(pred_pairs) > 1
        for a, b in pred_pairs:
            if a >= b:
                raise ValueError(f"{n}: CreateIndices() pred start  {a} exceeds pred end {b}.")
            if a < 1 or b < 1:
                raise ValueError(f"{n}: CreateIndices() pred indices  less than 1 not allowed.")
        self.predList = [np.arange(a - 1, b, dtype=int) for a, b in pred_pairs]
        self.pred_i = np.concatenate(self.predList)
        self.prediction_valid()
        self.pred_i_all = self.pred_i.copy()
        if not self.embedded:
            head = set(range(shift))
            tail = {nrows - 1 - i for i in range(shift)}
            drop = tail if self.tau > 0 else head
            self.predList = [np.array([i for i in p if i not in drop], dtype=int)
                             for p in self.predList]
        if self.lib_i[-1] >= nrows or self.pred_i[-1] >= nrows:
            bad = max(self.lib_i[-1], self.pred_i[-1])
            raise ValueError(f"{n}: CreateIndices() The prediction index {bad} exceeds the "
                             f"number of data rows {nrows}")
        self.libOverlap = bool(len(set(self.lib_i.tolist()) & set(self.pred_i.tolist())))
        if n == "SMap" and self.knn < 1:
            self.knn = len(self.lib_i) - 1

    def prediction_valid(self) -> None:
        if len(self.pred_i) == 0:
            warn(f"{self.name}: PredictionValid() No valid prediction indices. Examine pred, E, "
                 "tau, Tp parameters and/or nan.", stacklevel=2)

    # -- pyEDM EDM.EmbedData / RemoveNan ------------------------------------
    def embed_data(self) -> None:
        if self.embedded:
            self.Embedding = self.Data[self.columns]
        else:
            self.Embedding = embed_frame(self.Data, self.E, self.tau, self.columns)

    def remove_nan(self) -> None:
        if self.ignoreNan:
            emb = self.Embedding.to_numpy(dtype=np.float64)
            na_lib = np.isnan(emb[self.lib_i]).any(axis=1)
            na_pred = np.isnan(emb[self.pred_i]).any(axis=1)
            if na_lib.any():
                knn0, len0 = self.knn, len(self.lib_i)
                self.lib_i = self.lib_i[~na_lib]
                if self.name == "SMap" and knn0 == len0 - 1:
                    self.knn = len(self.lib_i) - 1
            if na_pred.any():
                self.pred_i = self.pred_i[~na_pred]
            if self.name == "SMap" and np.isnan(self.targetVec).any():
                self.targetVecNan = True
        self.prediction_valid()

    # -- pyEDM Neighbors.FindNeighbors --------------------------------------
    def find_neighbors(self) -> None:
        from ._state_knn import kdtree_candidates

        R = self.exclusionRadius
        excl = False
        if R > 0:
            if self.libOverlap:
                excl = True
            else:
                gap = 0
                if self.pred_i[0] > self.lib_i[-1]:
                    gap = self.pred_i[0] - self.lib_i[-1]
                elif self.lib_i[0] > self.pred_i[-1]:
                    gap = self.lib_i[0] - self.pred_i[-1]
                excl = R >= gap
        if len(self.validLib):
            valid = np.flatnonzero(np.asarray(self.validLib, dtype=bool))
            lib_valid = self.lib_i[np.isin(self.lib_i, valid)]
            if lib_valid.size == 0:
                raise ValueError(f"{self.name}: FindNeighbors() : No valid library points found. "
                                 "All library points excluded by validLib.")
            if lib_valid.size < self.knn:
                raise ValueError(f"{self.name}: FindNeighbors() : valid library size "
                                 f"{lib_valid.size} is less than knn={self.knn}. Reduce knn to at "
                                 "most the valid library size, or widen validLib / check the "
                                 "library for nan.")
            self.lib_i = lib_valid
        emb = self.Embedding.to_numpy(dtype=np.float64)
        knn = self.knn
        kq = knn
        if excl:
            kq = min(knn * self.xRadKnnFactor, len(self.lib_i))
        elif self.libOverlap:
            kq = kq + 1
        if len(self.validLib):
            kq = len(self.lib_i)
        if self.tieBreak and len(self.lib_i) > knn:
            kq = min(max(kq, knn + 1), len(self.lib_i))  # a look-ahead column for boundary ties
        # pyEDM's KDTree(emb[lib_i], leafsize=20).query(emb[pred_i], kq), ties in its order
        cand, cdist = kdtree_candidates(emb, self.lib_i, self.pred_i, kq, 20, device=self.device)
        kq = cand.shape[1]
        mask = (np.abs(self.pred_i[:, None] - cand) <= R if excl else
                (self.pred_i[:, None] == cand if self.libOverlap else np.zeros(cand.shape, bool)))
        if self.tieBreak:
            nbr, dist = self._tie_break_select(emb, cand, cdist, mask, kq, excl)
        else:
            # the first knn candidates outside the exclusion, in candidate order (pyEDM)
            valid = ~mask
            order = np.argsort(~valid, axis=1, kind="stable")[:, :min(knn, kq)]
            rows = np.arange(len(self.pred_i))[:, None]
            nbr, dist = cand[rows, order], cdist[rows, order].copy()
            nvalid = np.minimum(valid.sum(axis=1), order.shape[1])
            pad = np.arange(order.shape[1])[None, :] >= nvalid[:, None]
            nbr = np.where(pad, nbr[:, :1], nbr)
            dist[pad] = np.inf
        # empty slots point at the row's nearest neighbour (pyEDM's padding; weight 0)
        first = np.where(nbr[:, :1] >= 0, nbr[:, :1], self.lib_i[0])
        nbr = np.where(nbr >= 0, nbr, first)
        finite_counts = np.isfinite(dist).sum(axis=1)
        if (finite_counts < knn).any():
            warn(f"{self.name}: FindNeighbors() : Fewer than knn={knn} neighbors outside "
                 f"exclusionRadius {R} for some predictions; those rows use fewer neighbors. "
                 "Consider reducing knn or exclusionRadius.", stacklevel=2)
        if (finite_counts == 0).any():
            warn(f"{self.name}: FindNeighbors() : Some predictions have no valid neighbors "
                 f"outside exclusionRadius {R}; those predictions are nan.", stacklevel=2)
        self.knn_neighbors, self.knn_distances = nbr, dist

    def _tie_break_select(self, emb, cand, cdist, mask, kq, excl):
        """pyEDM's ``_TieBreakSelect`` (Simplex): order the candidates by (distance,
        |p - l|, l); rows whose knn-th candidate reaches the last one returned (a tie
        may straddle it) or that lack knn admissible candidates are scanned over the
        whole library in pyEDM's arithmetic."""
        knn, lib, pred = self.knn, np.asarray(self.lib_i), np.asarray(self.pred_i)
        n = cand.shape[0]
        key = np.where(mask, np.inf, cdist)
        order = np.lexsort((cand, np.abs(pred[:, None] - cand), key), axis=-1)[:, :knn]
        rows = np.arange(n)[:, None]
        nbr, dist, sel_key = cand[rows, order], cdist[rows, order].copy(), key[rows, order]
        knnth = sel_key[:, -1]
        max_ret = np.where(np.isfinite(cdist), cdist, -np.inf).max(axis=1)
        deficient = ~np.isfinite(knnth) | (order.shape[1] < knn)
        straddle = (kq < lib.size) & np.isfinite(knnth) & (knnth >= max_ret)
        flagged = np.flatnonzero(straddle | deficient)
        if flagged.size and order.shape[1] < knn:
            pad = knn - order.shape[1]
            nbr = np.hstack([nbr, np.repeat(nbr[:, :1], pad, axis=1)])
            dist = np.hstack([dist, np.full((n, pad), np.inf)])
        if flagged.size:
            self._full_scan(emb, flagged, nbr, dist, excl)
        return nbr, dist

    def _full_scan(self, emb, flagged, nbr, dist, excl) -> None:
        """pyEDM's ``_FullScanRow`` for the ``flagged`` rows, in place: the knn nearest
        admissible library rows by (distance, |p - l|, l), slots beyond the admissible
        count padded with the nearest (distance inf). The device gives the exact order
        for rows without a tie among their knn + 1 nearest; rows with one are scanned
        on the host in pyEDM's arithmetic, so near-equal sums decide as pyEDM's do."""
        from ._state_knn import host_distances, row_distances, state_neighbors, tied_rows

        knn, lib, pred = self.knn, np.asarray(self.lib_i), np.asarray(self.pred_i)
        radius = self.exclusionRadius if excl else (0 if self.libOverlap else -1)
        p_rows = pred[flagged]
        dev, _ = state_neighbors(emb, lib, p_rows, min(knn + 1, lib.size), radius,
                                 device=self.device)
        dev_d = host_distances(emb, p_rows, dev)
        host = tied_rows(dev_d)
        for j, i in enumerate(flagged):
            if host[j]:
                p = pred[i]
                d = row_distances(emb[lib] - emb[p])
                if excl:
                    keep = np.abs(p - lib) > self.exclusionRadius
                elif self.libOverlap:
                    keep = lib != p
                else:
                    keep = np.ones(lib.size, bool)
                nbr_c, d_c = lib[keep], d[keep]
                sel = np.lexsort((nbr_c, np.abs(p - nbr_c), d_c))[:knn]
                found, found_d = nbr_c[sel], d_c[sel]
            else:
                ok = dev[j, :knn] >= 0
                found, found_d = dev[j, :knn][ok], dev_d[j, :knn][ok]
            t = found.size
            nbr[i, :t], dist[i, :t] = found, found_d
            if t < knn:
                if t:
                    nbr[i, t:] = found[0]
                dist[i, t:] = np.inf

    # -- projections --------------------------------------------------------
    def project_simplex(self) -> None:
        d = self.knn_distances
        finite = np.isfinite(d)
        mind = np.where(finite, d, np.inf).min(axis=1) if d.size else np.zeros(0)
        mind = np.fmax(np.where(np.isfinite(mind), mind, 1.0), 1e-6)
        w = np.where(finite, np.exp(-np.divide(d, mind[:, None])), 0.0)
        wsum = w.sum(axis=1)
        vals = np.where(finite, self.targetVec[self.knn_neighbors + self.Tp, 0], 0.0)
        safe = np.where(wsum > 0, wsum, 1.0)
        self.projection = (w * vals).sum(axis=1) / safe
        self.variance = (w * (vals - self.projection[:, None]) ** 2).sum(axis=1) / safe
        empty = wsum <= 0
        if empty.any():
            self.projection = np.where(empty, np.nan, self.projection)
            self.variance = np.where(empty, np.nan, self.variance)

    def project_smap(self) -> None:
        npred, ndim = len(self.pred_i), self.E + 1
        self.projection = np.full(npred, np.nan)
        self.variance = np.full(npred, np.nan)
        self.coefficients = np.full((npred, ndim), np.nan)
        self.singularValues = np.full((npred, ndim), np.nan)
        emb = self.Embedding.to_numpy(dtype=np.float64)
        d = self.knn_distances
        finite = np.isfinite(d)
        cnt = finite.sum(axis=1)
        mean = np.full(npred, np.nan)
        nz = cnt > 0
        mean[nz] = np.where(finite, d, 0.0).sum(axis=1)[nz] / cnt[nz]
        if self.theta == 0:
            W = np.ones(d.shape)
        else:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                W = np.exp(-(self.theta / mean)[:, None] * d)
        B = self.targetVec[self.knn_neighbors + self.Tp, 0]
        wB = W * B
        # one small SVD a row, on one BLAS thread (pyedmcl.edm.smap_host says why)
        with one_blas_thread():
            for row in range(npred):
                if np.isnan(mean[row]):
                    continue
                ok = np.isfinite(d[row])
                if self.targetVecNan:
                    ok &= np.isfinite(B[row])
                if not ok.any():
                    continue
                A = np.empty((d.shape[1], ndim))
                A[:, 0] = W[row]
                A[:, 1:] = W[row][:, None] * emb[self.knn_neighbors[row]]
                C, SV = self.solve(A[ok], wB[row, ok])
                self.coefficients[row, :len(C)] = C
                if SV is not None:
                    self.singularValues[row, :len(SV)] = SV
                p = 0.0 if np.isnan(C[0]) else C[0]
                for e in range(1, ndim):
                    p = p + C[e] * emb[self.pred_i[row], e - 1]
                self.projection[row] = p
                Wv = W[row, ok]
                self.variance[row] = np.sum(Wv * (B[row, ok] - p) ** 2) / np.sum(Wv)

    def solve(self, A: np.ndarray, wB: np.ndarray):
        """numpy's lstsq (pyEDM's default) or a scikit-learn estimator's ``fit``."""
        s = self.solver
        if s is None or getattr(s, "__name__", "") == "lstsq":
            C, _, _, SV = np.linalg.lstsq(A, wB, rcond=None)
            return C, SV
        fit = s.fit(A[:, 1:], wB)
        C = np.insert(fit.coef_, 0, fit.intercept_ if hasattr(fit, "intercept_") else np.nan)
        SV = np.insert(fit.singular_, 0, np.nan) if type(s).__name__ == "LinearRegression" else None
        return C, SV

    def run(self) -> PyEDMRun:
        self.embed_data()
        self.remove_nan()
        if len(self.pred_i) == 0:
            self.format_projection()
            return self
        self.find_neighbors()
        (self.project_smap if self.name == "SMap" else self.project_simplex)()
        self.format_projection()
        return self

    # -- pyEDM Formatting ----------------------------------------------------
    def format_projection(self) -> None:
        if len(self.pred_i) == 0:
            warn(f"{self.name}: FormatProjection() No valid prediction indices.", stacklevel=2)
            self.Projection = pd.DataFrame({"Time": [], "Observations": [], "Predictions": [],
                                            "Pred_Variance": []})
            return
        Tp, tpm, nrows = self.Tp, abs(self.Tp), self.Data.shape[0]
        obs_i = np.array([], dtype=int)
        out_size = 0
        for p in self.predList:
            out_size += len(p) + tpm
            if len(p) == 0:
                continue
            if Tp == 0:
                app = p.copy()
            elif Tp > 0:
                app = (np.concatenate([p, np.arange(p[-1] + 1, p[-1] + Tp + 1)])
                       if p[-1] + Tp < self.targetVec.shape[0] else p)
            else:
                app = np.concatenate([np.arange(p[0] + Tp, p[0]), p]) if p[0] + Tp > -1 else p
            obs_i = np.append(obs_i, app)
        observations = self.targetVec[obs_i, 0]
        pred_out = np.array([], dtype=int)
        p0 = 0
        for p in self.predList:
            m = len(p)
            if m == 0:
                continue
            if Tp == 0:
                pred_out = np.append(pred_out, np.arange(p0, p0 + m))
                p0 = pred_out[-1] + 1
            elif Tp > 0:
                pred_out = np.append(pred_out, np.arange(p0 + Tp, p0 + Tp + m))
                p0 = pred_out[-1] + 1
            else:
                pred_out = np.append(pred_out, np.arange(p0, p0 + m))
                p0 = pred_out[-1] + tpm + 1
        if len(self.pred_i) != len(pred_out):
            k = len(pred_out)
            keys = self.pred_i_all[-k:] if self.tau < 0 else self.pred_i_all[:k]
            where = dict(zip(keys.tolist(), pred_out.tolist(), strict=False))
            pred_out = np.array([where[i] for i in self.pred_i.tolist()], dtype=int)
        if Tp > 0:
            obs_out = np.arange(len(obs_i) if obs_i[-1] + Tp > nrows - 1 else out_size)
        elif self.pred_i[0] + Tp < 0:
            obs_out = np.arange(len(obs_i)) + (tpm - self.pred_i[0])
        else:
            obs_out = np.arange(len(obs_i))
        size = int(max(pred_out[-1], obs_out[-1])) + 1
        obs_o, pred_o, var_o = np.full(size, np.nan), np.full(size, np.nan), np.full(size, np.nan)
        obs_o[obs_out] = observations
        pred_o[pred_out] = self.projection
        var_o[pred_out] = self.variance
        self.convert_time()
        if (Tp == 0 or (Tp > 0 and self.pred_i_all[-1] + Tp < len(self.time))
                or (Tp < 0 and self.pred_i[0] + Tp >= 0)):
            time_o = np.empty(size, dtype=self.time.dtype)
            time_o[obs_out] = self.time[obs_i]
        else:
            time_o = self.add_time(tpm, size, obs_i, obs_out)
        self.Projection = pd.DataFrame({"Time": time_o, "Observations": obs_o,
                                        "Predictions": pred_o, "Pred_Variance": var_o})
        if self.name == "SMap":
            ndim = self.E + 1
            coef, sv = np.full((size, ndim), np.nan), np.full((size, ndim), np.nan)
            coef[pred_out], sv[pred_out] = self.coefficients, self.singularValues
            tdf = pd.DataFrame({"Time": time_o})
            names = ["C0"] + [f"∂{self.target[0]}/∂{e}" for e in self.Embedding.columns]
            self.Coefficients = tdf.join(pd.DataFrame(coef, columns=names))
            self.SingularValues = tdf.join(pd.DataFrame(sv, columns=[f"C{i}" for i in range(ndim)]))

    def convert_time(self) -> None:
        t0 = self.time[0]
        if isinstance(t0, (int, float, np.integer, np.floating, dt.time, dt.datetime)):
            return
        t = self.time.copy()
        if isinstance(t0, str):
            try:
                dt.time.fromisoformat(t0)
                t = np.array([dt.time.fromisoformat(v) for v in t])
            except ValueError:
                try:
                    dt.datetime.fromisoformat(t0)
                    t = np.array([dt.datetime.fromisoformat(v) for v in t])
                except ValueError as exc:
                    raise RuntimeError(f"{self.name} ConvertTime(): Time values are strings but "
                                       "are not ISO 8601 recognized time or datetime.") from exc
        try:
            t[1] - t[0]
        except TypeError as exc:
            raise RuntimeError(f"{self.name} ConvertTime(): Time values not recognized. Accepted "
                               "values are int, float, or string of ISO 8601 compliant time or "
                               "datetime.") from exc
        self.time = t

    def add_time(self, tpm: int, size: int, obs_i: np.ndarray, obs_out: np.ndarray) -> np.ndarray:
        step = self.time[1] - self.time[0]
        t0 = self.time[0]
        tdt = float if isinstance(t0, (int, np.integer)) else type(t0)
        out = np.full(size, np.nan, dtype=tdt)
        out[obs_out] = self.time[obs_i]
        if self.Tp > 0:
            ext = size - obs_out[-1] - 1
            if ext > 0:
                out[-ext:] = self.time[obs_i[-1]] + step * np.arange(1, ext + 1)
        elif self.Tp < 0:
            ext = obs_out[0]
            if ext > 0:
                out[:ext] = self.time[obs_i[0]] - step * np.arange(ext, 0, -1)
        return out


def _time_dtype(run: PyEDMRun):
    if run.noTime:
        return float
    run.convert_time()
    t0 = run.time[0]
    return float if isinstance(t0, (int, np.integer)) else type(t0)


def generate(run: PyEDMRun) -> PyEDMRun:
    """pyEDM's ``Generate``: ``generateSteps`` one-step forecasts, each fed back as data.

    The library stays ``lib``; step ``s`` predicts from the two rows ending the series
    grown by the ``s`` earlier forecasts (pyEDM's ``pred = [lib[-1]-1, lib[-1]] + s``).
    """
    N, col, tgt, lib = run.Data.shape[0], run.columns[0], run.target[0], run.lib
    pred = [lib[-1] - 1, lib[-1]]
    tdt = _time_dtype(run)
    steps = run.generateSteps
    gen = pd.DataFrame({"Time": np.full(steps, np.nan, dtype=tdt), "Observations": np.full(steps, np.nan),
                        "Predictions": np.full(steps, np.nan), "Pred_Variance": np.full(steps, np.nan)})
    smap = run.name == "SMap"
    if smap:
        lag = "t-" if run.tau < 0 else "t+"
        gcoef = pd.DataFrame(np.full((steps, run.E + 2), np.nan),
                             columns=["Time", "C0"] + [f"∂{tgt}/∂{tgt}({lag}{e})" for e in range(run.E)])
        gsv = pd.DataFrame(np.full((steps, run.E + 2), np.nan),
                           columns=["Time"] + [f"C{i}" for i in range(run.E + 1)])
    series = np.full(N + steps, np.nan)
    series[:N] = run.Data.loc[:, col]
    times = np.full(N + steps, np.nan, dtype=float if smap else tdt)
    data = run.Data
    if run.noTime:
        times[:N] = np.linspace(1, N, N)
        data = pd.DataFrame({"Time": times[:N]}).join(run.Data, lsuffix="_")
    else:
        times[:N] = run.time
    new = data.copy()
    for step in range(steps):
        g = PyEDMRun(run.name, new, columns=col, target=tgt, lib=lib, pred=pred, E=run.E, Tp=run.Tp,
                     knn=run.knn, tau=run.tau,
                     exclusionRadius=run.exclusionRadius, embedded=run.embedded,
                     validLib=run.validLib, noTime=run.noTime, generateSteps=steps,
                     generateConcat=run.generateConcat, ignoreNan=run.ignoreNan, theta=run.theta,
                     solver=run.solver, device=run.device)
        g.tieBreak = False
        g.run()
        gen.iloc[step, :] = g.Projection.iloc[-1, :]
        if smap:
            gcoef.iloc[step, :] = g.Coefficients.iloc[-1, :]
            gsv.iloc[step, :] = g.SingularValues.iloc[-1, :]
        pred = [p + 1 for p in pred]
        series[N + step] = g.Projection["Predictions"].iat[-1]
        times[N + step] = g.Projection.iloc[-1, 0]
        new = pd.DataFrame({"Time": times[:N + step + 1], f"{col}": series[:N + step + 1]})
    if run.generateConcat:
        head = data.loc[:, [data.columns[0], col]]
        head.columns = ["Time", "Observations"]
        run.Projection = pd.concat([head, gen], axis=0)
    else:
        run.Projection = gen
    if smap:
        run.Coefficients, run.SingularValues = gcoef, gsv
    return run
