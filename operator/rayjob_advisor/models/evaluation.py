"""Scoring candidates on interpolation and extrapolation splits, and combining them.

Each candidate is fitted (``predictor.Point``: floored and anchored as the
advisor predicts) on a split's training runs only, then scored on its
held-out runs: mean and 90th-percentile absolute percentage error, how
often it under-predicts, and — when calibrated on the training runs too —
how often the runtime stays under its upper bound, overall and per
configuration band (node count).

The advisor predicts with the candidates combined per kind of question
(``combination``): each split asks one kind (``splits.question``), and the
candidates' held-out predictions on a kind's splits give its stacking
weights. The combination is scored like a candidate (``COMBINED``), on
held-out predictions it did not learn its weights from: each split's are
weighed by what the *other* splits of its kind learned (the prior alone when
it is the only one), so a kind asked by one split is scored as the prior
would answer it. Where the weights of every kind fall on one candidate, that
candidate is selected alone. A candidate that collapsed on held-out runs
(not finite, not positive or under the physical floor) is left out of those
runs, and ``disqualified`` says how often.

Every fit is small: it runs with one BLAS thread (threads only contend on
matrices this size; a ridge fit took 20 times longer with two busy cores).

Calibrating a fold costs a nested cross-validation (about ten fits instead
of one) and only the candidates' coverage depends on it, never the MAPE or
the combination: selection (``calibrate=False``) skips it, the full report
keeps it. The combination's coverage is that of a bound calibrated on the
other splits' held-out runs. The held-out predictions of the selection are
themselves the calibration data of what is selected (``runtime``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.base import RegressorMixin
from threadpoolctl import threadpool_limits

from rayjob_advisor.models import calibration, combination, design, splits
from rayjob_advisor.models.calibration import HeldOut
from rayjob_advisor.models.combination import Combined
from rayjob_advisor.models.design import Reach
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.models.predictor import Point, Predictor, marginal_rate
from rayjob_advisor.observations import Observation

REPORTED_CONFIDENCE = 0.9
COMBINED = "combined"
MIN_RUNS = 8
"""Runs a profile needs before it predicts: more than the parameters of the structure a small profile leans on
(``combination.PRIOR``: ``sync-sgd``, 7 on one node, where what the workers sharing it cost is none), so that they
are determined by the runs. Derived, not tuned.
(It was 9, the held-out errors below, counted as runs; on the 15 ``workers-x4-few`` cuts of Pollux and Sia drawn
with 8 runs instead of 12, the median is 5.8-40 % off at 4x the workers, its 0.9 bound covering 0.97-1.00 on 14 of
them, against no prediction at all.)"""
MIN_HELD_OUT = 9
"""Held-out errors inside the profile a bound needs: a split-conformal bound at 0.9 is the ceil((n + 1) 0.9)-th
smallest of n held-out errors, which exists from n = 9 on; with fewer it would be the largest error, as low as the
median itself on two runs. Every run is held out once (``kfold``) and the interpolation splits hold some out again,
each time from a model fitted without it; a profile too small for a pool per split is bounded by all of them
together (``calibration``)."""


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

    def variables(self) -> dict[str, np.ndarray]:
        """What the splits cut on (``splits.VARIABLES``)."""
        return {"workers": self.workers, "dataset_size": self.sizes, "batch_per_worker": design.local_batch(self.X)}


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
    """Scores per split and candidate (the combination among them), the splits that could not be made, what was
    selected (a candidate, or ``COMBINED``), the combination's weights per kind of question, and which candidates
    collapsed on held-out runs."""

    splits: dict[str, dict[str, Scores]]
    skipped: dict[str, str]
    selected: str
    weights: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    disqualified: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "splits": {s: {m: dataclasses.asdict(sc) for m, sc in models.items()} for s, models in self.splits.items()},
            "skipped": dict(self.skipped),
            "selected": self.selected,
            "weights": {kind: dict(members) for kind, members in self.weights.items()},
            "disqualified": dict(self.disqualified),
        }


@dataclasses.dataclass(frozen=True)
class CrossValidation:
    """Every candidate's held-out runs and scores per split: the costly part of a selection, what ``combine``
    reads."""

    runs: Runs
    candidates: tuple[str, ...]
    held: dict[str, dict[str, HeldOut]]  # candidate -> split -> held-out runs
    scores: dict[str, dict[str, Scores]]  # split -> candidate -> scores
    skipped: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Selection:
    """The outcome of cross-validated selection: the report, the held-out runs of every candidate and of the
    combination (``COMBINED``), and what is selected, fitted on all runs."""

    evaluation: Evaluation
    held: dict[str, dict[str, HeldOut]]
    point: Point
    validation: CrossValidation


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
    defined, skipped = splits.split_folds(runs.variables())
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


def cross_validate_candidates(runs: Runs, candidates: Sequence[str], calibrate: bool = False) -> CrossValidation:
    """Every candidate on every split that the runs define (``MIN_RUNS`` of them always define ``kfold``), once the
    runs are enough to predict and to bound (``MIN_RUNS``, ``MIN_HELD_OUT``)."""
    if len(runs.y) < MIN_RUNS:
        raise NotEnoughData(f"{len(runs.y)} runs cannot fit a prediction: a profile needs {MIN_RUNS} runs or more")
    defined, skipped = splits.split_folds(runs.variables())
    inside = sum(len(test) for split in defined if splits.question(split) == "inside" for _, test in defined[split])
    if inside < MIN_HELD_OUT:
        raise NotEnoughData(
            f"{len(runs.y)} runs cannot bound a prediction: they give {inside} held-out errors inside the profile "
            f"and a 0.9 bound needs {MIN_HELD_OUT}; measure {MIN_HELD_OUT} runs, or a third worker count or dataset "
            "size"
        )
    with threadpool_limits(limits=1):
        validated = {name: cross_validate(runs, defined, name, calibrate) for name in candidates}
    return CrossValidation(
        runs=runs,
        candidates=tuple(candidates),
        held={name: {split: part for split, (part, _) in validated[name].items()} for name in candidates},
        scores={split: {name: score(*validated[name][split]) for name in candidates} for split in defined},
        skipped=skipped,
    )


def select_candidate(runs: Runs, candidates: Sequence[str] = tuple(CANDIDATES), calibrate: bool = False) -> Selection:
    """Cross-validate every candidate, combine them, and select the combination or the one candidate it reduces
    to (module docstring)."""
    return combine(cross_validate_candidates(runs, candidates, calibrate), calibrate)


def combine(
    validation: CrossValidation, calibrate: bool = False, fitted: Mapping[str, RegressorMixin] | None = None
) -> Selection:
    """The combination the cross-validation supports, fitted on all runs (``fitted``: candidates already fitted on
    them, to reuse)."""
    runs, candidates = validation.runs, list(validation.candidates)
    held = {name: dict(parts) for name, parts in validation.held.items()}
    cv = {split: dict(scores) for split, scores in validation.scores.items()}
    mixed, weights = combined_held_out(candidates, held)
    for split, part in mixed.items():
        cv[split][COMBINED] = score(part, _bound_from_others(mixed, split) if calibrate else None)
    members = [name for name, column in zip(candidates, weights.T, strict=True) if np.any(column > 0)]
    rate = marginal_rate(runs.X, runs.y)
    with threadpool_limits(limits=1):
        estimators = {name: (fitted or {}).get(name) or CANDIDATES[name]().fit(runs.X, runs.y) for name in members}
        shares = weights[:, [candidates.index(name) for name in members]]
        combined = Combined(estimators, shares, Reach.of(runs.X), rate)
        selected = members[0] if len(members) == 1 else COMBINED
        point = Point.of(selected, estimators.get(selected, combined), runs.X, runs.y, rate)
    held[COMBINED] = mixed
    return Selection(
        evaluation=Evaluation(cv, validation.skipped, selected, combined.describe(), _collapses(held, candidates)),
        held=held,
        point=point,
        validation=validation,
    )


def combined_held_out(
    candidates: Sequence[str], held: Mapping[str, Mapping[str, HeldOut]]
) -> tuple[dict[str, HeldOut], np.ndarray]:
    """The combination's held-out runs per split, each weighed by what the other splits of its kind learned, and
    the weights every kind learns from all its splits (one row per ``splits.QUESTIONS``)."""
    names = list(candidates)
    by_kind: dict[str, list[str]] = {kind: [] for kind in splits.QUESTIONS}
    for split in held[names[0]]:
        by_kind[splits.question(split)].append(split)

    def learned(kind: str, chosen: Sequence[str], inside: np.ndarray) -> np.ndarray:
        prior = combination.prior_of(names, kind, inside)
        if not chosen:
            return prior
        parts = [HeldOut.concatenate([held[name][split] for split in chosen]) for name in names]
        predicted = np.column_stack([part.predicted for part in parts])
        usable = ~np.column_stack([part.collapsed for part in parts])
        return combination.learn_weights(names, kind, predicted, parts[0].actual, usable, prior)

    prior = combination.prior_weights(names)
    inside = learned("inside", by_kind["inside"], prior)
    weights = np.vstack([learned(kind, by_kind[kind], inside) for kind in splits.QUESTIONS])
    mixed = {}
    for index, (kind, members) in enumerate(by_kind.items()):
        for split in members:
            own = weights.copy()
            own[index] = learned(kind, [other for other in members if other != split], inside)
            mixed[split] = _mix([held[name][split] for name in names], own, index)
    return mixed, weights


def _mix(parts: Sequence[HeldOut], weights: np.ndarray, kind: int) -> HeldOut:
    """The held-out runs of the candidates (``parts``, one per candidate) of a split asking the ``kind``-th
    question, weighed as the combination weighs a run that far beyond (``combination.memberships``), each run
    without the candidates that collapsed on it (``combination.row_weights``)."""
    usable = ~np.column_stack([part.collapsed for part in parts])
    distance = parts[0].distance
    beyond = np.zeros((len(distance), len(splits.QUESTIONS) - 1), dtype=bool)
    if kind:
        beyond[:, kind - 1] = distance > 0
    shares = combination.memberships(beyond, distance)
    per_row = combination.row_weights(weights, shares, usable, weights[kind])

    def weighed(field: str) -> np.ndarray:
        return np.asarray(np.sum(per_row * np.column_stack([getattr(part, field) for part in parts]), axis=1))

    members = np.column_stack([part.unanchored for part in parts])
    return dataclasses.replace(
        parts[0],
        predicted=weighed("predicted"),
        unanchored=weighed("unanchored"),
        spread=combination.spread(members, per_row),
        collapsed=~np.any(usable, axis=1),
    )


def _bound_from_others(mixed: Mapping[str, HeldOut], split: str) -> np.ndarray | None:
    """Upper bounds of one split's held-out runs by a calibration of the other splits' (None: no other split)."""
    others = {other: part for other, part in mixed.items() if other != split}
    if not others:
        return None
    asked = mixed[split]
    beyond = calibration.INSIDE | {splits.question(split)}  # what a held-out run beyond the runs trained on asks
    kinds = [beyond if distance > 0 else calibration.INSIDE for distance in asked.distance.tolist()]
    pools = calibration.Calibration.from_held_out(others).pools(
        asked.nodes, asked.distance, asked.anchored, asked.local_batch, asked.spread, kinds
    )
    return calibration.upper_bounds(asked.predicted, pools, REPORTED_CONFIDENCE)


def _collapses(held: Mapping[str, Mapping[str, HeldOut]], candidates: Sequence[str]) -> dict[str, str]:
    """The candidates that collapsed on held-out runs, and on how many (they are left out of those)."""
    found = {}
    for name in candidates:
        every = HeldOut.concatenate(list(held[name].values()))
        count = int(np.sum(every.collapsed))
        if count:
            found[name] = (
                f"predicted a non-finite or impossibly short runtime for {count} of {len(every.collapsed)} "
                "held-out runs (left out of those)"
            )
    return found


def evaluate(
    observations: Sequence[Observation],
    test: Sequence[Observation] | None = None,
    candidates: Sequence[str] = tuple(CANDIDATES),
    calibrate: bool = True,
) -> Evaluation:
    """Score every candidate and their combination on every split of ``observations`` (or on ``test``), and
    select.

    ``calibrate=False`` leaves out the coverage (``None``) and its nested
    calibration: the same MAPE and choice for a tenth of the fits.
    """
    runs = Runs.from_observations(observations)
    if test is None:
        return select_candidate(runs, candidates, calibrate).evaluation
    chosen = select_candidate(runs, candidates)
    held = Runs.from_observations(test)
    with threadpool_limits(limits=1):
        scored = {name: score(*_fold(name, runs, held, calibrate)) for name in candidates}
    if chosen.evaluation.selected == COMBINED:
        combined = Predictor(chosen.point, calibration.Calibration.from_held_out(chosen.held[COMBINED]))
        upper = combined.predict_upper(held.X, REPORTED_CONFIDENCE) if calibrate else None
        scored[COMBINED] = score(chosen.point.held_out(held.X, held.y), upper)
    return dataclasses.replace(chosen.evaluation, splits={"test": scored})


def mean_mape(cv: Mapping[str, Mapping[str, Scores]], name: str) -> float:
    """A candidate's MAPE averaged over the splits (plainly: the figure users read)."""
    return float(np.mean([cv[split][name].mape for split in cv]))
