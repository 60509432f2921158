"""The deadline planner: cheapest replica count that fits, else the fastest, with a reason."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor import planner
from rayjob_advisor.features import features_from_rayjob
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


class AmdahlModel:
    """Runtime = serial + parallel / workers; the upper bound is 20 % above."""

    def __init__(self, serial: float = 600.0, parallel: float = 3600.0) -> None:
        self.serial, self.parallel = serial, parallel

    def predict(self, runs):
        return [self.serial + self.parallel / run.workers for run in runs]

    def predict_upper(self, runs, confidence):
        return [1.2 * t for t in self.predict(runs)]


def job(replicas=2, low=1, high=8, resources=None, **spec):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "1000"},
        groups=[worker_group(replicas=replicas, minReplicas=low, maxReplicas=high, resources=resources)],
        **spec,
    )
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


def recommend(features, minutes_left, startup=60.0, model=None, prices=planner.Prices()):
    deadline = NOW + dt.timedelta(minutes=minutes_left)
    return planner.recommend(features, model or AmdahlModel(), deadline, NOW, 0.9, startup, prices)


def test_the_cheapest_fitting_count_wins():
    # upper = 1.2 * (600 + 3600 / w) + 60 s start-up: w=2 -> 3:00 + 1:00 = 47 min, w=3 -> 36 min, w=4 -> 31 min
    choice = recommend(job(), minutes_left=40)
    assert (choice.replicas, choice.meets_deadline, choice.current_replicas) == (3, True, 2)
    assert choice.reason.startswith("3 replicas is the cheapest that finishes in time")
    assert "at 90% confidence" in choice.reason


def test_with_a_loose_deadline_fewer_workers_are_cheaper():
    assert recommend(job(), minutes_left=600).replicas == 1


def test_cost_weighs_gpus_and_cpus():
    gpu_job = job(resources={"limits": {"nvidia.com/gpu": "1", "cpu": "4"}})
    expensive_gpus = planner.Prices(cpu_hour=0.0, gpu_hour=10.0)
    options = planner.options(gpu_job, AmdahlModel(), [1, 2], 0.9, 60.0, expensive_gpus)
    assert options[0].cost == pytest.approx(1 * 10.0 * (60 + 4200) / 3600)
    assert options[1].cost == pytest.approx(2 * 10.0 * (60 + 2400) / 3600)


def test_when_nothing_fits_the_fastest_is_chosen_and_the_miss_is_said():
    choice = recommend(job(), minutes_left=20)
    assert (choice.replicas, choice.meets_deadline) == (8, False)
    assert choice.reason.startswith("no replica count in 1-8 meets the deadline: the fastest, 8 replicas, needs 22m")
    assert "more than the 20m left" in choice.reason
    assert "deadline has passed" in recommend(job(), minutes_left=-5).reason


def test_a_group_that_cannot_be_resized_keeps_its_size():
    autoscaled = job(replicas=2)
    autoscaled = autoscaled.model_copy(update={"resize_blocker": "the Ray autoscaler owns the replicas"})
    assert planner.replica_counts(autoscaled) == [2]
    choice = recommend(autoscaled, minutes_left=10)
    assert (choice.replicas, choice.meets_deadline) == (2, False)
    assert choice.reason.startswith("the deadline cannot be met at the job's only size, 2 replicas: it needs 49m")


def test_replica_counts_cover_small_ranges_and_sample_large_ones():
    assert planner.replica_counts(job(replicas=2, low=1, high=5)) == [1, 2, 3, 4, 5]
    unbounded = planner.replica_counts(job(replicas=10, low=1, high=2**31 - 1))
    assert unbounded[0] == 1 and unbounded[-1] == 40 and 10 in unbounded and len(unbounded) <= 17


def test_the_annotation_is_compact_json_with_the_decision():
    value = json.loads(recommend(job(), minutes_left=40).annotation())
    assert value["replicas"] == 3 and value["group"] == "workers" and value["meetsDeadline"] is True
    assert value["deadline"] == "2026-12-02T12:40:00Z" and value["reason"]
