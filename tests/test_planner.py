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
    """Runtime = serial + parallel / (workers x GPUs per worker ** 0.5); the upper bound is 20 % above.

    Its profile measured ``measured_gpus_`` GPUs per worker (by default none: a CPU profile).
    """

    def __init__(self, serial: float = 600.0, parallel: float = 3600.0, measured_gpus=(0.0,)) -> None:
        self.serial, self.parallel, self.measured_gpus_ = serial, parallel, measured_gpus

    def predict(self, runs):
        return [self.serial + self.parallel / run.workers / max(1.0, run.gpus_per_worker) ** 0.5 for run in runs]

    def predict_upper(self, runs, confidence):
        return [1.2 * t for t in self.predict(runs)]


def job(replicas=2, low=1, high=8, resources=None, **spec):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "1000"},
        groups=[worker_group(replicas=replicas, minReplicas=low, maxReplicas=high, resources=resources)],
        **spec,
    )
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


def gpu_job(gpus="2", **group):
    return job(resources={"limits": {"cpu": "4", "nvidia.com/gpu": gpus}}, **group)


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
    expensive_gpus = planner.Prices(cpu_hour=0.0, gpu_hour=10.0)
    sizes = [(1, 1.0), (2, 1.0), (1, 4.0)]
    options = planner.options(gpu_job("1"), AmdahlModel(), sizes, 0.9, 60.0, expensive_gpus)
    assert [(o.replicas, o.gpus_per_worker) for o in options] == sizes
    assert options[0].cost == pytest.approx(1 * 10.0 * (60 + 4200) / 3600)
    assert options[1].cost == pytest.approx(2 * 10.0 * (60 + 2400) / 3600)
    assert options[2].cost == pytest.approx(4 * 10.0 * (60 + 2400) / 3600)  # GPU-hours: 4 GPUs at sqrt(4) speed


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


# GPUs per worker: the profile's whole values when it varied them, else the job's own.
VARIED = (1.0, 2.0, 4.0)


@pytest.mark.parametrize(
    ("features", "measured", "counts"),
    [
        (gpu_job("2"), VARIED, [1.0, 2.0, 4.0]),
        (gpu_job("3"), VARIED, [1.0, 2.0, 3.0, 4.0]),  # the job's own is always a choice
        (gpu_job("2"), (0.0, 0.5, 1.0, 4.0), [1.0, 2.0, 4.0]),  # Kubernetes takes whole GPUs; a GPU group keeps one
        (gpu_job("2"), (1.0,), [2.0]),  # one value says nothing of the others
        (gpu_job("2"), (0.0,), [2.0]),  # a CPU profile
        (job(), VARIED, [0.0]),  # a CPU-only group
        (gpu_job("2").model_copy(update={"resize_blocker": "the autoscaler owns it"}), VARIED, [2.0]),
    ],
)
def test_gpu_counts_are_the_measured_whole_values_where_the_profile_varied_them(features, measured, counts):
    assert planner.gpu_counts(features, measured) == counts


def test_many_measured_gpu_counts_are_sampled():
    counts = planner.gpu_counts(gpu_job("3"), tuple(float(g) for g in range(1, 17)))
    assert counts[0] == 1.0 and counts[-1] == 16.0 and 3.0 in counts
    assert len(counts) <= planner.MAX_GPU_CHOICES + 1


def test_sizes_pair_every_replica_count_with_every_gpu_count():
    model = AmdahlModel(measured_gpus=VARIED)
    assert planner.sizes(gpu_job("2", high=3), model) == [(r, g) for r in (1, 2, 3) for g in VARIED]


def test_fewer_gpus_per_worker_are_chosen_when_cheaper():
    choice = recommend(gpu_job("2"), minutes_left=600, model=AmdahlModel(measured_gpus=VARIED))
    assert (choice.replicas, choice.gpus_per_worker, choice.current_gpus_per_worker) == (1, 1.0, 2.0)
    assert choice.changes and choice.size == "1 replicas x 1 GPUs"
    assert choice.reason.startswith("1 replicas x 1 GPUs is the cheapest that finishes in time")
    value = json.loads(choice.annotation())
    assert (value["gpusPerWorker"], value["currentGpusPerWorker"], value["replicas"]) == (1.0, 2.0, 1)


@pytest.mark.parametrize(("minutes_left", "gpus"), [(90, 1.0), (70, 2.0), (50, 4.0)])
def test_more_gpus_per_worker_are_chosen_when_the_replicas_cannot_grow(minutes_left, gpus):
    # one replica: upper + start-up = 85 min on 1 GPU, 64 min on 2, 49 min on 4 (runtime over sqrt(GPUs))
    single = gpu_job("1", replicas=1, low=1, high=1)
    choice = recommend(single, minutes_left=minutes_left, model=AmdahlModel(measured_gpus=VARIED))
    assert (choice.replicas, choice.gpus_per_worker, choice.meets_deadline) == (1, gpus, True)
    assert choice.changes == (gpus != 1.0)


def test_when_no_size_fits_the_reason_names_the_gpu_range():
    choice = recommend(gpu_job("1", high=2), minutes_left=20, model=AmdahlModel(measured_gpus=VARIED))
    assert (choice.replicas, choice.gpus_per_worker, choice.meets_deadline) == (2, 4.0, False)
    assert choice.reason.startswith(
        "no replica count in 1-2 with 1-4 GPUs per worker meets the deadline: the fastest, 2 replicas x 4 GPUs, needs"
    )


def test_a_profile_that_fixed_gpus_never_changes_them():
    for measured in [(0.0,), (1.0,)]:
        for minutes_left in (20, 40, 600):
            choice = recommend(gpu_job("2"), minutes_left=minutes_left, model=AmdahlModel(measured_gpus=measured))
            assert choice.gpus_per_worker == choice.current_gpus_per_worker == 2.0
