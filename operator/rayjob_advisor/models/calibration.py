"""Upper bounds at a chosen confidence, by split-conformal calibration on relative residuals.

The residual pool holds ``actual / predicted - 1`` for runs predicted by a
model that did not see them, over every split of ``splits`` applied to the
training data: shuffled K-fold, and the interpolation and extrapolation
folds over worker counts and dataset sizes. Residuals of unseen
configurations widen the bound where the advisor is asked most often — a
worker count or dataset size that was never profiled — instead of assuming
every question looks like a random training run.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from sklearn.base import RegressorMixin

from rayjob_advisor.models import splits

EstimatorFactory = Callable[[], RegressorMixin]


def out_of_sample_residuals(
    make: EstimatorFactory, X: np.ndarray, y: np.ndarray, workers: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Sorted relative residuals of held-out predictions (see module docstring)."""
    defined, _ = splits.split_folds(workers, sizes)
    folds = [fold for split_folds in defined.values() for fold in split_folds]
    residuals = [y[test] / make().fit(X[train], y[train]).predict(X[test]) - 1.0 for train, test in folds]
    return np.sort(np.concatenate(residuals)) if residuals else np.zeros(1)


def relative_margin(residuals: np.ndarray, confidence: float) -> float:
    """The conformal quantile: the ceil((n+1)q)-th smallest residual (the largest when n is small)."""
    rank = min(len(residuals), math.ceil((len(residuals) + 1) * confidence))
    return max(0.0, float(residuals[rank - 1]))


def upper_bound(predicted: np.ndarray, residuals: np.ndarray, confidence: float) -> np.ndarray:
    """Runtimes that runs like the calibration runs stay under with probability ``confidence``."""
    return predicted * (1.0 + relative_margin(residuals, confidence))


def probability_within(predicted: np.ndarray, residuals: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """The conformal estimate of P(runtime <= seconds): the share of the n residuals (out of n + 1) it allows.

    The same ranks as ``relative_margin``: at ``upper_bound(..., q)`` it is at least ``q``.
    """
    allowed = np.searchsorted(residuals, seconds / predicted - 1.0, side="right")
    return np.asarray(allowed / (len(residuals) + 1), dtype=float)
