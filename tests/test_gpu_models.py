"""The models on real multi-GPU measurements (the shipped Pollux profiles: T4, 1-16 GPUs over 1-4 nodes): placement,
anchoring, bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchmarks import pollux
from rayjob_advisor.models import design, evaluation, splits
from rayjob_advisor.models.predictor import Point
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation
from rayjob_advisor_testkit.profiles import shipped_runs, synthetic_observations


@dataclasses.dataclass(frozen=True)
class Job:
    workers: int
    dataset_size: int = pollux.TRAINING_SET_SIZES["bert"]
    epochs: int | None = 1
    batch_size: int | None = None
    cpus_per_worker: float | None = None
    gpus_per_worker: float | None = 1.0
    placement: str | None = None


@pytest.fixture(scope="module")
def bert() -> list[Observation]:
    return shipped_runs("pollux-bert")


def per_sample(runs: list[Observation], seconds: np.ndarray) -> float:
    return float(np.median(seconds / np.array([run.dataset_size for run in runs])))


def test_two_nodes_are_predicted_as_slow_as_they_were_measured(bert):
    """bert on 4 GPUs: 2 nodes measured ~2.5x slower per sample than 1 node, and 4 nodes in between."""
    model = RuntimeModel().fit(bert)
    runs = {n: [o for o in bert if o.workers == 4 and o.nodes == n and o.batch_size == 32] for n in (1, 2, 4)}
    measured = {n: per_sample(r, np.array([o.execution_seconds for o in r])) for n, r in runs.items()}
    predicted = {n: per_sample(r, model.predict(r)) for n, r in runs.items()}
    assert measured[2] > 1.5 * measured[4] > 1.5 * measured[1]
    for nodes in runs:
        assert predicted[nodes] == pytest.approx(measured[nodes], rel=0.15)


def test_far_extrapolation_stays_positive_and_above_the_floor(bert):
    """Fitted on 1-4 GPUs, asked about up to 64 GPUs, with and without a batch, packed or spread."""
    model = RuntimeModel().fit([o for o in bert if o.workers <= 4])
    jobs = [
        Job(workers, batch_size=batch, placement=placement)
        for workers in (1, 4, 8, 16, 64)
        for batch in (None, 4 * workers, 64 * workers)
        for placement in (None, "spread")
    ]
    predicted, upper = model.predict(jobs), model.predict_upper(jobs, 0.9)
    assert np.all(np.isfinite(upper)) and np.all(predicted >= model.floor(jobs)) and np.all(model.floor(jobs) > 0)
    assert np.all(upper >= predicted)
    # the bound widens with the distance beyond the profiled 4 GPUs
    margins = upper / predicted
    assert margins[jobs.index(Job(64, batch_size=256))] > margins[jobs.index(Job(4, batch_size=16))]


def test_a_measured_configuration_anchors_the_prediction():
    """A configuration measured 1.5x slower than the law the rest follow is predicted near its measurement."""
    runs = synthetic_observations(noise=0.0)
    slow = [
        o.model_copy(update={"execution_seconds": 1.5 * o.execution_seconds}) if o.workers == 6 else o for o in runs
    ]
    evaluated = evaluation.Runs.from_observations(slow)
    point = Point.fit("sync-sgd", evaluated.X, evaluated.y)
    six = evaluated.X[:, 2] == 6
    predicted, unanchored, anchored, _ = point.predict(evaluated.X)
    assert np.all(anchored)  # every profiled configuration is its own anchor
    error = np.abs(predicted[six] / evaluated.y[six] - 1)
    assert np.median(error) < 0.5 * np.median(np.abs(unanchored[six] / evaluated.y[six] - 1))
    assert np.all(point.trend(evaluated.X)[six] < predicted[six])  # the curve alone does not know the measured 1.5x
    unseen = evaluated.X[six].copy()
    unseen[:, 2] = 5.0  # 5 workers were never measured: no anchor
    assert not np.any(point.predict(unseen)[2])


def test_the_bound_covers_every_node_count_band_of_a_real_workload(bert):
    """The 0.9 bound of the selected model covers >= 0.85 of each band's held-out runs, pooled over the splits."""
    result = evaluation.evaluate(bert, candidates=("dataparallel", "sync-sgd"))
    scores = [models[result.selected] for models in result.splits.values()]
    for band in {band for s in scores for band in (s.bands or {})}:
        held = [(s.bands[band].coverage, s.bands[band].n_test) for s in scores if s.bands and band in s.bands]
        runs = sum(n for _, n in held)
        assert runs >= 10 and sum(c * n for c, n in held) / runs >= 0.85, band


def test_the_bound_covers_the_communication_bound_runs_of_a_node_count():
    """cifar10 with one dataset size held out: the 3-node runs at the smaller half of the per-GPU batches spend most
    of a step synchronising and spread wider; the 0.9 bound gives them a wider margin than the larger batches of
    the same node count, and covers >= 0.75 of them (the node count's residuals alone covered 0.68; issue 9's 0.85
    was met by one run with a band minimum chosen on these very runs, which issue 18 forbids)."""
    runs = evaluation.Runs.from_observations(shipped_runs("pollux-cifar10"))
    defined, _ = splits.split_folds(runs.variables())
    [(train, test)] = defined["interpolate-size"]
    predictor = evaluation.fit_predictor("sync-sgd", runs.subset(train))
    held = runs.subset(test)
    upper = predictor.predict_upper(held.X, 0.9)
    three = held.X[:, design.NODES] == 3
    small = three & (held.X[:, design.BATCH] / held.X[:, design.WORKERS] <= predictor.calibration.threshold)
    assert np.sum(small) >= 40 and np.sum(three & ~small) >= 10
    assert np.mean(held.y[small] <= upper[small]) >= 0.75
    assert np.mean(held.y[three] <= upper[three]) >= 0.8
    margins = upper / predictor.predict(held.X)
    assert np.median(margins[small]) > np.median(margins[three & ~small])
