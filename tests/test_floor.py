"""The physical floor: net of fixed costs, so that no candidate is disqualified for being right."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import datasets, questions
from rayjob_advisor.models import design, evaluation, splits
from rayjob_advisor.models.predictor import NOISE_MARGIN, marginal_rate

FIXED, PER_SAMPLE, PER_STEP = 2.0, 1e-3, 0.05  # seconds per run, per sample on one worker, per step


def runs_with_fixed_costs(sizes: list[int], workers: list[int], local_batches: list[int]) -> tuple[np.ndarray, ...]:
    rows = [[size, 1, w, b * w, 1, 0, 1, 0] for size in sizes for w in workers for b in local_batches]
    X = np.array(rows, dtype=float)
    y = FIXED + design.steps(X) * (PER_STEP + PER_SAMPLE * design.local_batch(X))
    return X, y


def test_the_floor_lies_under_runs_of_more_work_and_larger_batches_than_profiled():
    X, y = runs_with_fixed_costs([1000, 2000, 4000], [1, 2], [16, 32])
    rate = marginal_rate(X, y) / NOISE_MARGIN
    assert rate == pytest.approx(PER_SAMPLE, rel=1e-6)  # no fixed cost left in it
    bigger, truth = runs_with_fixed_costs([64000], [1, 2, 8], [16, 128])
    assert np.all(rate * bigger[:, design.WORK] / design.resources(bigger) < truth)
    total_rate = float(np.min(y * design.resources(X) / X[:, design.WORK]))  # the floor of runs' total time
    assert np.any(total_rate * bigger[:, design.WORK] / design.resources(bigger) > truth)


def test_without_runs_that_differ_only_in_work_or_batch_the_floor_is_the_least_total_rate():
    X, y = runs_with_fixed_costs([1000], [1, 2, 4], [16])
    total = float(np.min(y * design.resources(X) / X[:, design.WORK]))
    assert marginal_rate(X, y) == pytest.approx(NOISE_MARGIN * total)


@pytest.mark.parametrize("sweep", datasets.OWN_RAY_SWEEPS)
@pytest.mark.parametrize("question", ["workers-next", "size-x4"])
def test_no_candidate_is_disqualified_for_being_right_on_the_projects_own_ray_runs(sweep, question):
    """Real Ray Train runs at 3-4 sizes over 16-32x (the smallest dominated by fixed costs), 2 batches, 1-2 epochs:
    on every held-out run of every split, the floor the training runs give lies under the run's measured time, so a
    candidate that collapses under it is wrong by at least that much."""
    runs = datasets.DATASETS[sweep]()
    assert len({run.dataset_size for run in runs}) >= 3 and {run.epochs for run in runs} == {1, 2}
    cut = questions.QUESTIONS[question](runs)
    assert not isinstance(cut, str)
    profile, asked = evaluation.Runs.from_observations(cut.train), evaluation.Runs.from_observations(cut.test)
    folds, _ = splits.split_folds(profile.variables())
    pairs = [(profile.subset(train), profile.subset(test)) for fold in folds.values() for train, test in fold]
    for train, test in [*pairs, (profile, asked)]:
        floor = design.perfectly_scaled(test.X, marginal_rate(train.X, train.y))
        assert np.all(floor < test.y)
