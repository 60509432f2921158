"""A fitted candidate as the advisor uses it: floored, anchored and calibrated.

``Point`` turns a candidate's raw output into predictions that are finite
and never below ``floor`` — the work of the run at the fastest per-sample
rate of one GPU (or worker, without GPUs) that the training runs ever
showed, as if it scaled perfectly: no model may claim more — and anchors
them on measured configurations (``anchoring``). A raw output that is not
finite or below half the floor means the candidate collapsed there
(``collapsed``): it is then not used for that question (``evaluation``,
``runtime``). ``Predictor`` adds the calibrated bound (``calibration``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import RegressorMixin

from rayjob_advisor.models import calibration, design
from rayjob_advisor.models.anchoring import Anchors
from rayjob_advisor.models.estimators import CANDIDATES

COLLAPSE_FRACTION = 0.5
"""A raw prediction under this fraction of the floor is a collapse, not a fast run."""


@dataclasses.dataclass(frozen=True)
class Point:
    """Point predictions of one fitted candidate (module docstring)."""

    name: str
    estimator: RegressorMixin
    seconds_per_sample: float
    max_workers: float
    layouts: Anchors
    anchors: Anchors

    @classmethod
    def fit(cls, name: str, X: np.ndarray, y: np.ndarray) -> Point:
        rate = float(np.min(y * design.resources(X) / X[:, design.WORK]))
        estimator = CANDIDATES[name]().fit(X, y)
        bare = cls(name, estimator, rate, float(np.max(X[:, design.WORKERS])), Anchors.none(False), Anchors.none())
        laid_out = dataclasses.replace(bare, layouts=Anchors.fit(X, y, bare.predict(X)[1], batch=False))
        return dataclasses.replace(laid_out, anchors=Anchors.fit(X, y, laid_out.predict(X)[1]))

    def floor(self, X: np.ndarray) -> np.ndarray:
        """The least runtime physically possible for each run (module docstring)."""
        return np.asarray(self.seconds_per_sample * X[:, design.WORK] / design.resources(X), dtype=float)

    def collapsed(self, X: np.ndarray) -> np.ndarray:
        """Runs whose raw prediction is not finite or far under the floor."""
        raw = np.asarray(self.estimator.predict(X), dtype=float)
        return np.asarray(~np.isfinite(raw) | (raw < COLLAPSE_FRACTION * self.floor(X)), dtype=bool)

    def distance(self, X: np.ndarray) -> np.ndarray:
        """How far each run lies beyond the most workers trained on: log(workers / most), 0 inside."""
        return np.asarray(np.maximum(0.0, np.log(X[:, design.WORKERS] / self.max_workers)), dtype=float)

    def trend(self, X: np.ndarray) -> np.ndarray:
        """The candidate's curve alone, floored: what it learned of the workload, no measured run's own quirks."""
        floor = self.floor(X)
        raw = np.asarray(self.estimator.predict(X), dtype=float)
        return np.asarray(np.where(np.isfinite(raw), np.maximum(raw, floor), floor), dtype=float)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The predictions, the same without anchoring, and which runs were anchored."""
        floor = self.floor(X)
        unanchored, _ = self.layouts.apply(X, self.trend(X))
        unanchored = np.maximum(unanchored, floor)
        anchored, measured = self.anchors.apply(X, unanchored)
        return np.maximum(anchored, floor), unanchored, measured

    def held_out(self, X: np.ndarray, y: np.ndarray) -> calibration.HeldOut:
        """Predictions of runs this candidate was not fitted on, for scoring and calibration."""
        predicted, unanchored, anchored = self.predict(X)
        return calibration.HeldOut(
            actual=y,
            predicted=predicted,
            unanchored=unanchored,
            anchored=anchored,
            nodes=X[:, design.NODES],
            local_batch=design.local_batch(X),
            distance=self.distance(X),
            collapsed=self.collapsed(X),
        )


@dataclasses.dataclass(frozen=True)
class Estimates:
    """Per run: the median, the upper bound at a confidence, and the chance of running within given seconds
    (None when not asked)."""

    p50: np.ndarray
    upper: np.ndarray
    probability: np.ndarray | None

    @classmethod
    def of(
        cls, predicted: np.ndarray, pools: list[tuple[np.ndarray, ...]], confidence: float, seconds: np.ndarray | None
    ) -> Estimates:
        """The three answers read from one prediction's pools (``Predictor.pools``), at the same ranks."""
        upper = calibration.upper_bounds(predicted, pools, confidence)
        chances = None if seconds is None else calibration.probabilities_within(predicted, pools, seconds)
        return cls(predicted, upper, chances)


@dataclasses.dataclass(frozen=True)
class Predictor:
    """A ``Point`` and the calibration of its bound."""

    point: Point
    calibration: calibration.Calibration

    def pools(self, X: np.ndarray) -> tuple[np.ndarray, list[tuple[np.ndarray, ...]]]:
        """The median of each run and the residual pools that bound it (``calibration``)."""
        predicted, _, anchored = self.point.predict(X)
        local_batch = design.local_batch(X)
        return predicted, self.calibration.pools(X[:, design.NODES], self.point.distance(X), anchored, local_batch)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.point.predict(X)[0]

    def predict_upper(self, X: np.ndarray, confidence: float) -> np.ndarray:
        return calibration.upper_bounds(*self.pools(X), confidence)
