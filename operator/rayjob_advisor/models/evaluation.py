"""Scoring candidates on interpolation and extrapolation splits, and choosing one.

Each candidate is fitted and calibrated on a split's training runs only,
then scored on its held-out runs: mean and 90th-percentile absolute
percentage error, how often it under-predicts, and how often the runtime
stays under its upper bound. The candidate with the lowest MAPE averaged
over every defined split is selected; ties go to the simpler (earlier)
candidate, so the same data always gives the same choice.

Calibrating a fold costs a nested cross-validation (about ten fits instead
of one) and only the coverage depends on it, never the MAPE: selection
(``calibrate=False``) skips it, the full report keeps it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.base import RegressorMixin

from rayjob_advisor.models import calibration, design, splits
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.observations import Observation

REPORTED_CONFIDENCE = 0.9


class NotEnoughData(ValueError):
    """Too few observations, or too little variety, to fit or cross-validate."""


@dataclasses.dataclass(frozen=True)
class Runs:
    """Observations as arrays: design matrix, runtimes, and the split variables."""

    X: np.ndarray
    y: np.ndarray
    workers: np.ndarray
    sizes: np.ndarray

    @classmethod
    def from_observations(cls, observations: Sequence[Observation]) -> Runs:
        if not observations:
            raise NotEnoughData("no observations to fit on")
        return cls(
            X=design.design_matrix(observations, [o.nodes for o in observations]),
            y=np.array([o.execution_seconds for o in observations], dtype=float),
            workers=np.array([o.workers for o in observations], dtype=float),
            sizes=np.array([o.dataset_size for o in observations], dtype=float),
        )

    def subset(self, index: np.ndarray) -> Runs:
        return Runs(self.X[index], self.y[index], self.workers[index], self.sizes[index])


@dataclasses.dataclass(frozen=True)
class Scores:
    """How one candidate did on one split's held-out runs (fractions, not percents)."""

    mape: float
    p90_ape: float
    underprediction_rate: float
    coverage: float | None  # None when the evaluation did not calibrate
    n_test: int


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Scores per split and candidate, the splits that could not be made, and the choice."""

    splits: dict[str, dict[str, Scores]]
    skipped: dict[str, str]
    selected: str

    def to_json(self) -> dict[str, object]:
        return {
            "splits": {s: {m: dataclasses.asdict(sc) for m, sc in models.items()} for s, models in self.splits.items()},
            "skipped": dict(self.skipped),
            "selected": self.selected,
        }


def fit_calibrated(name: str, runs: Runs) -> tuple[RegressorMixin, np.ndarray]:
    """A fitted candidate and the residual pool of its upper bound."""
    make = CANDIDATES[name]
    residuals = calibration.out_of_sample_residuals(make, runs.X, runs.y, runs.workers, runs.sizes)
    return make().fit(runs.X, runs.y), residuals


def score(actual: np.ndarray, predicted: np.ndarray, upper: np.ndarray | None) -> Scores:
    """Scores of held-out runs; no coverage without upper bounds."""
    ape = np.abs(predicted - actual) / actual
    return Scores(
        mape=float(np.mean(ape)),
        p90_ape=float(np.quantile(ape, 0.9)),
        underprediction_rate=float(np.mean(predicted < actual)),
        coverage=None if upper is None else float(np.mean(actual <= upper)),
        n_test=len(actual),
    )


def _held_out_predictions(name: str, train: Runs, test: Runs, calibrate: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Predictions of ``test`` by the candidate fitted on ``train``, and their upper bounds if ``calibrate``."""
    if not calibrate:
        return CANDIDATES[name]().fit(train.X, train.y).predict(test.X), None
    estimator, residuals = fit_calibrated(name, train)
    predicted = estimator.predict(test.X)
    return predicted, calibration.upper_bound(predicted, residuals, REPORTED_CONFIDENCE)


def evaluate(
    observations: Sequence[Observation],
    test: Sequence[Observation] | None = None,
    candidates: Sequence[str] = tuple(CANDIDATES),
    calibrate: bool = True,
) -> Evaluation:
    """Score every candidate on every split of ``observations`` (or on ``test``) and select one.

    ``calibrate=False`` leaves out the coverage (``None``) and its nested
    calibration: the same MAPE and choice for a tenth of the fits.
    """
    runs = Runs.from_observations(observations)
    defined, skipped = splits.split_folds(runs.workers, runs.sizes)
    if not defined:
        raise NotEnoughData("too few observations to cross-validate: " + "; ".join(skipped.values()))
    cv = {split: _score_folds(runs, folds, candidates, calibrate) for split, folds in defined.items()}
    selected = select(cv, candidates)
    if test is None:
        return Evaluation(splits=cv, skipped=skipped, selected=selected)
    held = Runs.from_observations(test)
    scored = {name: score(held.y, *_held_out_predictions(name, runs, held, calibrate)) for name in candidates}
    return Evaluation(splits={"test": scored}, skipped={}, selected=selected)


def _score_folds(
    runs: Runs, folds: list[tuple[np.ndarray, np.ndarray]], candidates: Sequence[str], calibrate: bool
) -> dict[str, Scores]:
    test_index = np.concatenate([test for _, test in folds])
    result = {}
    for name in candidates:
        pairs = [_held_out_predictions(name, runs.subset(train), runs.subset(test), calibrate) for train, test in folds]
        predicted = np.concatenate([p for p, _ in pairs])
        upper = np.concatenate([u for _, u in pairs]) if calibrate else None
        result[name] = score(runs.y[test_index], predicted, upper)
    return result


def select(cv: Mapping[str, Mapping[str, Scores]], candidates: Sequence[str]) -> str:
    """The candidate with the lowest MAPE averaged over splits; first wins ties."""
    return min(candidates, key=lambda name: mean_mape(cv, name))


def mean_mape(cv: Mapping[str, Mapping[str, Scores]], name: str) -> float:
    """A candidate's MAPE averaged over the splits: the selection criterion."""
    return float(np.mean([cv[split][name].mape for split in cv]))
