"""Scoring candidates on interpolation and extrapolation splits, and choosing one.

Each candidate is fitted (``predictor.Point``: floored and anchored as the
advisor predicts) on a split's training runs only, then scored on its
held-out runs: mean and 90th-percentile absolute percentage error, how
often it under-predicts, and — when calibrated on the training runs too —
how often the runtime stays under its upper bound, overall and per
configuration band (node count).

Selection respects extrapolation, where users need the advisor most:

- a candidate is disqualified when one of its held-out predictions
  collapsed (not finite, or far below the physical floor);
- the others are ranked by their MAPE averaged over every defined split,
  the worker extrapolation splits (``extrapolate-workers``, and
  ``far-extrapolate-workers``: fit on up to a quarter of the most workers)
  weighing ``EXTRAPOLATION_WEIGHT`` times as much: together as much as all
  the others, so a candidate that flatlines outside the data (a tree
  ensemble: 80-150 % far-extrapolation error on the Pollux traces, against
  7-40 % for the structural ones) cannot make up for it inside; ties go to
  the simpler (earlier) candidate, so the same data always gives the same
  choice;
- the best ranked one is refitted on all runs and must not collapse
  anywhere on a grid of the questions a planner asks (every profiled
  configuration, worker counts up to ``GRID_WORKERS`` x the most profiled,
  packed and spread, the profile's smallest and largest runs and per-worker
  batches); else the next one is taken.

Every fit is small: it runs with one BLAS thread (threads only contend on
matrices this size; a ridge fit took 20 times longer with two busy cores).

Calibrating a fold costs a nested cross-validation (about ten fits instead
of one) and only the coverage depends on it, never the MAPE or the choice:
selection (``calibrate=False``) skips it, the full report keeps it. The
held-out predictions of the selection are themselves the calibration data
of the chosen candidate (``runtime``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from rayjob_advisor.models import calibration, design, splits
from rayjob_advisor.models.calibration import HeldOut
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.models.predictor import Point, Predictor
from rayjob_advisor.observations import Observation

REPORTED_CONFIDENCE = 0.9
EXTRAPOLATION_SPLITS = ("extrapolate-workers", "far-extrapolate-workers")
EXTRAPOLATION_WEIGHT = 2.0
GRID_WORKERS = 4


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
class BandScore:
    """Coverage of the upper bound among the held-out runs of one band."""

    coverage: float
    n_test: int


@dataclasses.dataclass(frozen=True)
class Scores:
    """How one candidate did on one split's held-out runs (fractions, not percents)."""

    mape: float
    p90_ape: float
    underprediction_rate: float
    coverage: float | None  # None when the evaluation did not calibrate
    n_test: int
    bands: dict[str, BandScore] | None = None  # coverage per node count ("nodes=2"), when calibrated


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Scores per split and candidate, the splits that could not be made, the choice and who could not be chosen."""

    splits: dict[str, dict[str, Scores]]
    skipped: dict[str, str]
    selected: str
    disqualified: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "splits": {s: {m: dataclasses.asdict(sc) for m, sc in models.items()} for s, models in self.splits.items()},
            "skipped": dict(self.skipped),
            "selected": self.selected,
            "disqualified": dict(self.disqualified),
        }


@dataclasses.dataclass(frozen=True)
class Selection:
    """The outcome of cross-validated selection: the report, every candidate's held-out runs, the chosen fit."""

    evaluation: Evaluation
    held: dict[str, dict[str, HeldOut]]
    ranking: list[str]  # the eligible candidates, best first, the grid-rejected ones left out
    point: Point  # the selected candidate fitted on all runs


def band_label(nodes: float) -> str:
    return f"nodes={nodes:g}"


def score(held: HeldOut, upper: np.ndarray | None) -> Scores:
    """Scores of held-out runs; no coverage without upper bounds."""
    actual, predicted = held.actual, held.predicted
    ape = np.abs(predicted - actual) / actual
    bands = None
    if upper is not None:
        covered = actual <= upper
        bands = {
            band_label(n): BandScore(float(np.mean(covered[held.nodes == n])), int(np.sum(held.nodes == n)))
            for n in np.unique(held.nodes)
        }
    return Scores(
        mape=float(np.mean(ape)),
        p90_ape=float(np.quantile(ape, 0.9)),
        underprediction_rate=float(np.mean(predicted < actual)),
        coverage=None if upper is None else float(np.mean(covered)),
        n_test=len(actual),
        bands=bands,
    )


def fit_predictor(name: str, runs: Runs) -> Predictor:
    """A candidate fitted on all ``runs``, its bound calibrated by cross-validation over them."""
    defined, skipped = splits.split_folds(runs.workers, runs.sizes)
    if not defined:
        raise NotEnoughData("too few observations to calibrate: " + "; ".join(skipped.values()))
    held = {split: held for split, (held, _) in cross_validate(runs, defined, name).items()}
    return Predictor(Point.fit(name, runs.X, runs.y), calibration.Calibration.from_held_out(held))


def _fold(name: str, train: Runs, test: Runs, calibrate: bool) -> tuple[HeldOut, np.ndarray | None]:
    """The held-out predictions of ``test`` by the candidate fitted on ``train``, with bounds if ``calibrate``."""
    if not calibrate:
        return Point.fit(name, train.X, train.y).held_out(test.X, test.y), None
    predictor = fit_predictor(name, train)
    return predictor.point.held_out(test.X, test.y), predictor.predict_upper(test.X, REPORTED_CONFIDENCE)


def cross_validate(
    runs: Runs, folds: Mapping[str, list[splits.Fold]], name: str, calibrate: bool = False
) -> dict[str, tuple[HeldOut, np.ndarray | None]]:
    """Per split, one candidate's held-out predictions over its folds (and their bounds if ``calibrate``)."""
    result = {}
    for split, split_folds in folds.items():
        pairs = [_fold(name, runs.subset(train), runs.subset(test), calibrate) for train, test in split_folds]
        held = HeldOut.concatenate([h for h, _ in pairs])
        result[split] = (held, np.concatenate([u for _, u in pairs if u is not None]) if calibrate else None)
    return result


def select_candidate(runs: Runs, candidates: Sequence[str] = tuple(CANDIDATES), calibrate: bool = False) -> Selection:
    """Cross-validate every candidate and choose one (module docstring)."""
    defined, skipped = splits.split_folds(runs.workers, runs.sizes)
    if not defined:
        raise NotEnoughData("too few observations to cross-validate: " + "; ".join(skipped.values()))
    with threadpool_limits(limits=1):
        validated = {name: cross_validate(runs, defined, name, calibrate) for name in candidates}
    cv = {split: {name: score(*validated[name][split]) for name in candidates} for split in defined}
    collapsed = {name: any(bool(np.any(h.collapsed)) for h, _ in validated[name].values()) for name in candidates}
    ranking, disqualified = rank(cv, collapsed, candidates)
    with threadpool_limits(limits=1):
        point, rejected = _refit_first_sound(runs, ranking)
    disqualified.update(rejected)
    return Selection(
        evaluation=Evaluation(splits=cv, skipped=skipped, selected=point.name, disqualified=disqualified),
        held={name: {split: held for split, (held, _) in validated[name].items()} for name in candidates},
        ranking=[name for name in ranking if name not in rejected],
        point=point,
    )


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
    if test is None:
        return select_candidate(runs, candidates, calibrate).evaluation
    chosen = select_candidate(runs, candidates).evaluation
    held = Runs.from_observations(test)
    with threadpool_limits(limits=1):
        scored = {name: score(*_fold(name, runs, held, calibrate)) for name in candidates}
    return dataclasses.replace(chosen, splits={"test": scored})


def selection_score(cv: Mapping[str, Mapping[str, Scores]], name: str) -> float:
    """A candidate's MAPE averaged over the splits, the worker extrapolation ones weighted up."""
    weights = {split: EXTRAPOLATION_WEIGHT if split in EXTRAPOLATION_SPLITS else 1.0 for split in cv}
    return sum(weights[split] * cv[split][name].mape for split in cv) / sum(weights.values())


def rank(
    cv: Mapping[str, Mapping[str, Scores]], collapsed: Mapping[str, bool], candidates: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """The eligible candidates by ``selection_score`` (first wins ties), and why the others are not."""
    disqualified = {
        name: "predicted a non-finite or impossibly short runtime for a held-out run"
        for name in candidates
        if collapsed[name]
    }
    eligible = [name for name in candidates if name not in disqualified] or list(candidates)
    return sorted(eligible, key=lambda name: selection_score(cv, name)), disqualified


def what_if_grid(X: np.ndarray) -> np.ndarray:
    """Design rows of the questions a planner asks of a profile (module docstring)."""
    workers_per_node, max_nodes = design.profiled_packing(X)
    most = int(np.max(X[:, design.WORKERS]))
    counts = sorted({int(w) for w in X[:, design.WORKERS]} | {most * k for k in range(2, GRID_WORKERS + 1)})
    local = np.quantile(design.local_batch(X), [0.0, 0.5, 1.0])
    rows = []
    for base, workers, per_worker, work in itertools.product(
        np.unique(X[:, [design.EPOCHS, design.CPUS, design.GPUS]], axis=0),
        counts,
        local,
        (np.min(X[:, design.WORK]), np.max(X[:, design.WORK])),
    ):
        epochs, cpus, gpus = base
        for placement in ("packed", "spread"):
            nodes = design.placement_nodes(workers, placement, workers_per_node, max_nodes)
            rows.append([work, epochs, workers, max(1.0, per_worker * workers), cpus, gpus, nodes])
    return np.vstack([X, np.array(rows, dtype=float)])


def _refit_first_sound(runs: Runs, ranking: Sequence[str]) -> tuple[Point, dict[str, str]]:
    """The best ranked candidate that does not collapse on ``what_if_grid``, fitted on all runs."""
    grid = what_if_grid(runs.X)
    rejected: dict[str, str] = {}
    points = []
    for name in ranking:
        points.append(Point.fit(name, runs.X, runs.y))
        if not np.any(points[-1].collapsed(grid)):
            return points[-1], rejected
        rejected[name] = f"collapses on the planner's grid (up to {GRID_WORKERS}x the most profiled workers)"
    return points[0], rejected


def mean_mape(cv: Mapping[str, Mapping[str, Scores]], name: str) -> float:
    """A candidate's MAPE averaged over the splits (plainly: the figure users read)."""
    return float(np.mean([cv[split][name].mape for split in cv]))
