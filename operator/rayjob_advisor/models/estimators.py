"""Candidate runtime estimators, all scikit-learn regressors over ``design.COLUMNS``.

Every candidate is fitted to *relative* error (the metric users judge us by):
the linear ones by weighting each row by 1/runtime, the non-linear ones by
learning the logarithm of the time per sample.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares, nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from sklearn.svm import SVR

from rayjob_advisor.models.design import BATCH, CPUS, EPOCHS, GPUS, NODES, WORK, WORKERS

_TINY = 1e-9


def _positive(seconds: np.ndarray) -> np.ndarray:
    """Runtimes clipped to a tiny positive value: a model never predicts zero or negative time."""
    return np.asarray(np.maximum(seconds, _TINY), dtype=float)


def _relative_nnls(basis: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising the squared relative error."""
    weights = 1.0 / y
    coef, _ = nnls(basis * weights[:, None], y * weights, maxiter=50 * basis.shape[1])
    return np.asarray(coef, dtype=float)


class _BasisNNLS(RegressorMixin, BaseEstimator):
    """Runtime = non-negative combination of a fixed basis of the design columns."""

    def basis(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: np.ndarray) -> _BasisNNLS:
        self.coef_ = _relative_nnls(self.basis(X), np.asarray(y, dtype=float))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _positive(self.basis(X) @ self.coef_)


class Ernest(_BasisNNLS):
    """Ernest (Venkataraman et al., NSDI'16): NNLS on [1, size/workers, log workers, workers].

    "size" is the work of the run: dataset size x epochs.
    """

    def basis(self, X: np.ndarray) -> np.ndarray:
        workers = X[:, WORKERS]
        return np.column_stack([np.ones(len(X)), X[:, WORK] / workers, np.log(workers), workers])


class DataParallel(_BasisNNLS):
    """Ernest extended with the structure of synchronous data-parallel SGD.

    A run is ``work / batch`` steps; a step costs a fixed overhead, the
    compute of ``batch / workers`` samples (split over a worker's CPUs or
    GPUs) and a gradient all-reduce whose cost grows with the ring size
    ``(W-1)/W``, with ``log W`` and ``W`` (latency) and with the number of
    nodes crossed. Each term is a basis column with a non-negative
    coefficient, so the fitted curve keeps its physical shape when asked
    about more workers than it was measured on.
    """

    def basis(self, X: np.ndarray) -> np.ndarray:
        work, epochs, workers, batch = X[:, WORK], X[:, EPOCHS], X[:, WORKERS], X[:, BATCH]
        cpus, gpus, nodes = X[:, CPUS], X[:, GPUS], X[:, NODES]
        steps = work / batch
        ring = (workers - 1.0) / workers
        cross_node = (nodes > 1).astype(float)
        return np.column_stack(
            [
                np.ones(len(X)),  # fixed start of the training loop
                epochs,  # per-epoch overhead (evaluation, data loader restarts)
                workers,  # per-worker set-up (Ernest)
                steps,  # fixed cost per step
                work / workers,  # compute per sample, data-parallel
                work / (workers * cpus),  # ... that also splits over a worker's CPUs
                work / (workers * np.maximum(gpus, 1.0)),  # ... or over its GPUs
                steps * ring,  # all-reduce bandwidth term
                steps * np.log2(workers),  # tree/hierarchical all-reduce latency
                steps * (workers - 1.0),  # ring all-reduce latency
                steps * ring * cross_node,  # bandwidth lost when crossing nodes
                steps * (nodes - 1.0),  # latency per node crossed
            ]
        )


class SyncSGD(RegressorMixin, BaseEstimator):
    """The throughput model of Pollux (Qiao et al., OSDI'21), plus fixed overheads.

    ``time = c0 + c1 * epochs + steps * (T_grad^g + T_sync^g)^(1/g)`` with
    ``T_grad = a_c + b_c * local_batch / r`` (``r``: the worker's GPUs, or
    CPUs when it has none) and ``T_sync`` zero for one worker, else
    ``a + b * (W - 2)`` with separate ``a, b`` for one node and for several.
    ``g >= 1`` blends computation and synchronisation from fully added
    (``g = 1``) to fully overlapped (large ``g``). Fitted by bounded
    non-linear least squares on relative error, from a few fixed starting
    points (deterministic).
    """

    _GAMMA_STARTS = (1.0, 3.0)

    @staticmethod
    def _columns(X: np.ndarray) -> tuple[np.ndarray, ...]:
        workers, gpus = X[:, WORKERS], X[:, GPUS]
        resources = np.where(gpus > 0, gpus, X[:, CPUS])
        return X[:, EPOCHS], X[:, WORK] / X[:, BATCH], X[:, BATCH] / workers / resources, workers, X[:, NODES]

    @classmethod
    def _time(cls, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        c0, c1, a_c, b_c, a_r, b_r, a_n, b_n, gamma = theta
        epochs, steps, local, workers, nodes = cls._columns(X)
        grad = a_c + b_c * local
        sync = np.where(nodes > 1, a_n + b_n * (workers - 2), a_r + b_r * (workers - 2))
        sync = np.where(workers > 1, np.maximum(sync, 0.0), 0.0)
        step = (grad**gamma + sync**gamma) ** (1.0 / gamma)
        return np.asarray(c0 + c1 * epochs + steps * step, dtype=float)

    def fit(self, X: np.ndarray, y: np.ndarray) -> SyncSGD:
        y = np.asarray(y, dtype=float)
        _, steps, local, _, _ = self._columns(X)
        step = float(np.median(y / steps))
        per_sample = float(np.median(y / steps / local))
        lower = np.zeros(9)
        lower[-1] = 1.0
        upper = np.full(9, np.inf)
        upper[-1] = 10.0
        best = None
        for gamma in self._GAMMA_STARTS:
            start = np.array([0.0, 0.0, step / 2, per_sample / 2, step / 2, step / 20, step, step / 20, gamma])
            fitted = least_squares(lambda t: self._time(t, X) / y - 1.0, start, bounds=(lower, upper), method="trf")
            if best is None or fitted.cost < best.cost:
                best = fitted
        assert best is not None  # _GAMMA_STARTS is not empty
        self.theta_ = best.x
        self._tie_unmeasured_sync(workers=X[:, WORKERS], nodes=X[:, NODES])
        return self

    def _tie_unmeasured_sync(self, workers: np.ndarray, nodes: np.ndarray) -> None:
        """Without multi-node (or single-node) multi-worker runs, assume the other case syncs alike."""
        synced = workers > 1
        if not np.any(synced & (nodes > 1)):
            self.theta_[6:8] = self.theta_[4:6]
        elif not np.any(synced & (nodes == 1)):
            self.theta_[4:6] = self.theta_[6:8]

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _positive(self._time(self.theta_, X))


class AugmentedRidge(RegressorMixin, BaseEstimator):
    """aMLLibrary-style linear model: features, their inverses and all pairwise products.

    Ridge with the penalty chosen by efficient leave-one-out CV, weighted to
    relative error.
    """

    def __init__(self, alphas: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)) -> None:
        self.alphas = alphas

    @staticmethod
    def _base(X: np.ndarray) -> np.ndarray:
        positive = np.column_stack(
            [X[:, WORK], X[:, EPOCHS], X[:, WORKERS], X[:, BATCH], X[:, CPUS], 1.0 + X[:, GPUS], X[:, NODES]]
        )
        return np.column_stack([positive, 1.0 / positive])

    def fit(self, X: np.ndarray, y: np.ndarray) -> AugmentedRidge:
        y = np.asarray(y, dtype=float)
        self.pipeline_ = make_pipeline(
            PolynomialFeatures(degree=2, interaction_only=True, include_bias=False),
            StandardScaler(),
            RidgeCV(alphas=self.alphas),
        )
        self.pipeline_.fit(self._base(X), y, ridgecv__sample_weight=1.0 / y**2)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _positive(self.pipeline_.predict(self._base(X)))


def _log_features(X: np.ndarray) -> np.ndarray:
    """Log-scaled columns plus the per-worker batch, for the non-linear learners."""
    return np.column_stack(
        [
            np.log(X[:, WORK]),
            np.log(X[:, EPOCHS]),
            np.log(X[:, WORKERS]),
            np.log(X[:, BATCH]),
            np.log(X[:, BATCH] / X[:, WORKERS]),
            np.log(X[:, CPUS]),
            np.log1p(X[:, GPUS]),
            np.log(X[:, NODES]),
        ]
    )


class _PerSampleLog(RegressorMixin, BaseEstimator):
    """Learns log(seconds per sample), so that runtime scales with work by construction."""

    def make_regressor(self) -> BaseEstimator:
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: np.ndarray) -> _PerSampleLog:
        self.regressor_ = self.make_regressor().fit(_log_features(X), np.log(np.asarray(y, dtype=float) / X[:, WORK]))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(np.exp(self.regressor_.predict(_log_features(X))) * X[:, WORK], dtype=float)


class GradientBoosting(_PerSampleLog):
    """A tree ensemble: strong in interpolation, flat outside what it has seen."""

    def __init__(self, n_estimators: int = 100, max_depth: int = 3, learning_rate: float = 0.15) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate

    def make_regressor(self) -> BaseEstimator:
        return GradientBoostingRegressor(
            n_estimators=self.n_estimators, max_depth=self.max_depth, learning_rate=self.learning_rate, random_state=0
        )


class KernelSVR(_PerSampleLog):
    """Support-vector regression with an RBF kernel on standardised log features."""

    def __init__(self, C: float = 10.0, epsilon: float = 0.01) -> None:
        self.C = C
        self.epsilon = epsilon

    def make_regressor(self) -> BaseEstimator:
        return make_pipeline(StandardScaler(), SVR(C=self.C, epsilon=self.epsilon, gamma="scale"))


CANDIDATES: dict[str, type[RegressorMixin]] = {
    "ernest": Ernest,
    "dataparallel": DataParallel,
    "sync-sgd": SyncSGD,
    "augmented-ridge": AugmentedRidge,
    "gradient-boosting": GradientBoosting,
    "svr": KernelSVR,
}
