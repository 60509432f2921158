"""The deadline planner: cheapest replica count that fits, else the fastest, with a reason."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest

from benchmarks import deadlines
from rayjob_advisor import contract as ann
from rayjob_advisor.advice import planner
from rayjob_advisor.advice.features import Features, features_from_rayjob
from rayjob_advisor.models.predictor import Estimates
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import read_observations
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


Z90 = 1.2816  # the standard normal's 0.9 quantile


def normal_chance(median: float, margin: float, seconds: float) -> float:
    """P(runtime <= seconds) when the runtime is normal around ``median`` with its 0.9 quantile ``margin`` above."""
    z = (seconds / median - 1.0) / (margin / Z90)
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


class FakeModel:
    """A planner model answering ``estimate`` from its ``predict``, ``predict_upper`` and ``probability_within``."""

    def estimate(self, runs, confidence, seconds=None):
        chances = None if seconds is None else np.array(self.probability_within(runs, seconds))
        return Estimates(np.array(self.predict(runs)), np.array(self.predict_upper(runs, confidence)), chances)


class FixedStartup(FakeModel):
    """A start-up of ``startup_seconds`` at every size."""

    startup_seconds = 60.0

    def startup(self, runs):
        return [self.startup_seconds for _ in runs]


class AmdahlModel(FixedStartup):
    """Runtime = serial + parallel / (workers x GPUs per worker ** 0.5); the 0.9 upper bound is 20 % above.

    Its profile measured ``measured_gpus_`` GPUs per worker (by default none: a CPU profile).
    """

    def __init__(self, serial: float = 600.0, parallel: float = 3600.0, measured_gpus=(0.0,)) -> None:
        self.serial, self.parallel, self.measured_gpus_ = serial, parallel, measured_gpus

    def predict(self, runs):
        return [self.serial + self.parallel / run.workers / max(1.0, run.gpus_per_worker) ** 0.5 for run in runs]

    def predict_upper(self, runs, confidence):
        return [1.2 * t for t in self.predict(runs)]

    def probability_within(self, runs, seconds):
        return [normal_chance(t, 0.2, s) for t, s in zip(self.predict(runs), seconds, strict=True)]


class TableModel(FakeModel):
    """Start-up, median and relative 0.9 margin per replica count, as given; chances from a normal spread of
    that margin."""

    measured_gpus_ = (0.0,)

    def __init__(self, startups: dict[int, float], medians: dict[int, float], margins: dict[int, float]) -> None:
        self.startups, self.medians, self.margins = startups, medians, margins

    def startup(self, runs):
        return [self.startups[run.scale_group.replicas] for run in runs]

    def predict(self, runs):
        return [self.medians[run.scale_group.replicas] for run in runs]

    def predict_upper(self, runs, confidence):
        return [self.medians[r.scale_group.replicas] * (1 + self.margins[r.scale_group.replicas]) for r in runs]

    def probability_within(self, runs, seconds):
        replicas = [run.scale_group.replicas for run in runs]
        return [normal_chance(self.medians[r], self.margins[r], s) for r, s in zip(replicas, seconds, strict=True)]


def job(replicas=2, low=1, high=8, resources=None, **spec):
    rayjob = make_rayjob(
        annotations={ann.DATASET_SIZE: "1000"},
        groups=[worker_group(replicas=replicas, minReplicas=low, maxReplicas=high, resources=resources)],
        **spec,
    )
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


def gpu_job(gpus="2", **group):
    return job(resources={"limits": {"cpu": "4", "nvidia.com/gpu": gpus}}, **group)


def recommend(features, minutes_left, model=None, prices=planner.Prices()):
    deadline = NOW + dt.timedelta(minutes=minutes_left)
    return planner.recommend(features, model or AmdahlModel(), deadline, NOW, 0.9, prices)


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
    options = planner.options(gpu_job("1"), AmdahlModel(), sizes, 0.9, expensive_gpus)
    assert [(o.replicas, o.gpus_per_worker) for o in options] == sizes
    assert options[0].cost == pytest.approx(1 * 10.0 * (60 + 4200) / 3600)
    assert options[1].cost == pytest.approx(2 * 10.0 * (60 + 2400) / 3600)
    assert options[2].cost == pytest.approx(4 * 10.0 * (60 + 2400) / 3600)  # GPU-hours: 4 GPUs at sqrt(4) speed


def test_when_nothing_fits_the_fastest_is_chosen_and_the_miss_is_said():
    # 8 replicas: median 1050 s, 0.9 upper 1260 s + 60 s start-up = 22 min; 19 min of runtime left: a 71% chance
    choice = recommend(job(), minutes_left=20)
    assert (choice.replicas, choice.meets_deadline) == (8, False)
    assert choice.probability == pytest.approx(normal_chance(1050, 0.2, 19 * 60))
    assert choice.reason == (
        "no replica count in 1-8 meets the deadline at 90% confidence; the fastest, 8 replicas, has a 71% chance "
        "of finishing in the 20m left; at 90% confidence it needs 22m with start-up, 2m more"
    )
    assert json.loads(choice.annotation())["probability"] == round(choice.probability, 3)
    late = recommend(job(), minutes_left=-5)
    assert late.reason == "the deadline has passed; 8 replicas is the fastest" and late.probability == 0.0


def test_the_fallback_prefers_the_earliest_median_end_to_the_lowest_upper_bound():
    # 4 replicas has the lowest upper bound (57.75 s) only because its spread is narrow; its median (55 s) is
    # slower than 3 replicas' (50 s), which has a 57% chance of the 52 s left where 4 replicas has 8%.
    model = TableModel(
        startups=dict.fromkeys(range(1, 5), 8.0),
        medians={1: 100.0, 2: 60.0, 3: 50.0, 4: 55.0},
        margins={1: 0.1, 2: 0.1, 3: 0.3, 4: 0.05},
    )
    choice = recommend(job(high=4), minutes_left=1, model=model)
    assert (choice.replicas, choice.meets_deadline) == (3, False)
    assert choice.probability == pytest.approx(normal_chance(50.0, 0.3, 52.0))
    assert "the fastest, 3 replicas, has a 57% chance" in choice.reason
    assert "at 90% confidence it needs 1m13s with start-up, 13s more" in choice.reason


# Start-up grows with the pods: 1 replica starts in 10 s and runs 30 s (33 s at 0.9); 2 start in 25 s, run 20 s (22 s).
GROWING_STARTUP = TableModel(startups={1: 10.0, 2: 25.0}, medians={1: 30.0, 2: 20.0}, margins={1: 0.1, 2: 0.1})


def test_each_size_is_judged_with_its_own_start_up():
    # 45 s left: 1 replica ends in 10 + 33 = 43 s, 2 replicas in 25 + 22 = 47 s. With one start-up for every
    # size (the median, 17.5 s) 2 replicas would look like 39.5 s and 1 replica 50.5 s: the wrong one fits.
    choice = recommend(job(replicas=2, high=2), minutes_left=0.75, model=GROWING_STARTUP)
    assert (choice.replicas, choice.meets_deadline, choice.startup_seconds, choice.walltime) == (1, True, 10.0, 43.0)
    assert choice.reason == (
        "1 replicas is the cheapest that finishes in time: 43s with start-up at 90% confidence, 2s before the deadline"
    )
    rows = planner.options(job(replicas=2, high=2), GROWING_STARTUP, [(1, 0.0), (2, 0.0)], 0.9, planner.Prices(), 45.0)
    assert [(row.startup, row.in_time(45.0)) for row in rows] == [(10.0, True), (25.0, False)]
    assert [row.probability for row in rows] == [normal_chance(30.0, 0.1, 35.0), normal_chance(20.0, 0.1, 20.0)]
    assert rows[1].cost == pytest.approx(2 * planner.Prices().worker_hour(job()) * (25.0 + 20.0) / 3600)


def test_before_every_start_up_the_size_that_ends_first_wins_not_the_faster_runtime():
    # 5 s left: no size can even start (every chance 0). 2 replicas run faster (20 s) but end later (45 s > 40 s).
    choice = recommend(job(replicas=2, high=2), minutes_left=5 / 60, model=GROWING_STARTUP)
    assert (choice.replicas, choice.meets_deadline, choice.probability) == (1, False, 0.0)
    assert "the fastest, 1 replicas, has a 0% chance" in choice.reason
    assert "it needs 43s with start-up, 38s more" in choice.reason


class ChanceModel(FixedStartup):
    """Given medians and chances per replica count (whatever the seconds asked); an upper bound that never fits."""

    measured_gpus_ = (0.0,)

    def __init__(self, medians, chances) -> None:
        self.medians, self.chances = medians, chances

    def predict(self, runs):
        return [self.medians[run.scale_group.replicas] for run in runs]

    def predict_upper(self, runs, confidence):
        return [1e6 for _ in runs]

    def probability_within(self, runs, seconds):
        return [self.chances[run.scale_group.replicas] for run in runs]


@pytest.mark.parametrize("seed", range(20))
def test_the_fallback_takes_the_earliest_median_end_and_among_those_the_best_chance(seed):
    rng = np.random.default_rng(seed)
    medians = {r: float(rng.choice([100.0, 200.0, 300.0])) for r in range(1, 9)}
    chances = {r: float(rng.choice([0.0, 0.2, 0.5])) for r in range(1, 9)}  # many ties, on purpose
    choice = recommend(job(high=8), minutes_left=10, model=ChanceModel(medians, chances))
    fastest = min(medians.values())
    assert medians[choice.replicas] == fastest
    best_of_fastest = max(chances[r] for r in medians if medians[r] == fastest)
    assert choice.probability == best_of_fastest
    assert choice.replicas == min(r for r in medians if medians[r] == fastest and chances[r] == best_of_fastest)


def test_a_wider_bound_does_not_buy_a_slower_size_the_fallback():
    # The deadline comes before both medians: 2 replicas' wide spread gives it the better chance (26 % against
    # 10 %) although its median (60 s) ends after 3 replicas' (50 s); the faster median is chosen.
    model = TableModel(
        startups=dict.fromkeys(range(1, 4), 0.0),
        medians={1: 100.0, 2: 60.0, 3: 50.0},
        margins={1: 0.1, 2: 0.5, 3: 0.1},
    )
    rows = planner.options(job(high=3), model, [(1, 0.0), (2, 0.0), (3, 0.0)], 0.9, planner.Prices(), 45.0)
    assert rows[1].probability > rows[2].probability and rows[1].p50 > rows[2].p50
    choice = recommend(job(high=3), minutes_left=0.75, model=model)
    assert (choice.replicas, choice.meets_deadline) == (3, False)
    assert choice.probability == pytest.approx(rows[2].probability)


def test_a_group_that_cannot_be_resized_keeps_its_size():
    autoscaled = job(replicas=2)
    autoscaled = autoscaled.model_copy(update={"resize_blocker": "the Ray autoscaler owns the replicas"})
    assert planner.replica_counts(autoscaled) == [2]
    choice = recommend(autoscaled, minutes_left=10)
    assert (choice.replicas, choice.meets_deadline) == (2, False)
    assert choice.reason.startswith(
        "the deadline cannot be met at 90% confidence at the job's only size, 2 replicas: a 0% chance of finishing "
        "in the 10m left; at 90% confidence it needs 49m with start-up, 39m more"
    )


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
        "no replica count in 1-2 with 1-4 GPUs per worker meets the deadline at 90% confidence; the fastest, "
        "2 replicas x 4 GPUs, has a "
    )


def test_a_profile_that_fixed_gpus_never_changes_them():
    for measured in [(0.0,), (1.0,)]:
        for minutes_left in (20, 40, 600):
            choice = recommend(gpu_job("2"), minutes_left=minutes_left, model=AmdahlModel(measured_gpus=measured))
            assert choice.gpus_per_worker == choice.current_gpus_per_worker == 2.0


# The planner on a real fitted model: the shipped Pollux ResNet-50 profile (T4, 1-16 GPUs over 1-4 nodes).
@pytest.fixture(scope="module")
def imagenet() -> RuntimeModel:
    return RuntimeModel().fit(read_observations(shipped_data("pollux-imagenet"))[0])


def imagenet_job() -> Features:
    notes = {ann.WORKLOAD: "pollux-imagenet", ann.DATASET_SIZE: "1281167", ann.BATCH_SIZE_PER_WORKER: "200"}
    group = worker_group(replicas=4, maxReplicas=16, resources={"limits": {"cpu": "8", "nvidia.com/gpu": "1"}})
    rayjob = make_rayjob(annotations=notes, groups=[group])
    return features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))


@pytest.mark.parametrize("fraction", [0.5, 0.95, 1.05])
def test_on_a_real_model_a_missed_deadline_gets_the_fastest_size_and_its_chance(imagenet, fraction):
    job = imagenet_job()
    rows = planner.options(job, imagenet, planner.sizes(job, imagenet), 0.9, planner.Prices())
    assert all(row.startup == 0.0 for row in rows)  # Pollux measured steps, not start-up
    left = min(fraction * min(row.p50 for row in rows), 0.99 * min(row.upper for row in rows))  # none certified
    choice = recommend(job, minutes_left=left / 60, model=imagenet)
    assert not choice.meets_deadline and choice.changes
    chances = planner.options(job, imagenet, planner.sizes(job, imagenet), 0.9, planner.Prices(), left=left)
    chosen = next(row for row in chances if row.replicas == choice.replicas)
    assert chosen.p50 == min(row.p50 for row in chances)
    assert (
        choice.probability
        == chosen.probability
        == pytest.approx(imagenet.probability_within([job.with_replicas(choice.replicas)], [left])[0])
    )
    assert f"has a {choice.probability:.0%} chance of finishing in the" in choice.reason


def test_on_a_real_model_a_certified_size_meets_the_deadline_at_the_jobs_confidence(imagenet):
    choice = recommend(imagenet_job(), minutes_left=40, model=imagenet)
    assert choice.meets_deadline and choice.probability >= 0.9


# The GPU replay of benchmarks/deadlines.py: its placements, ground truth and held-out runs.
@pytest.mark.parametrize(
    ("policy", "gpus", "expected"),
    [
        ("packed", 3, "3"), ("packed", 6, "24"), ("packed", 13, "1444"), ("packed", 16, "4444"),
        ("spread", 3, "111"), ("spread", 6, "1122"), ("spread", 13, "3334"), ("spread", 16, "4444"),
    ],
)  # fmt: skip
def test_the_gpu_replay_lays_gpus_as_its_policies_say(policy, gpus, expected):
    assert deadlines.placement(policy, gpus) == expected


def test_the_gpu_replay_judges_only_configurations_its_model_never_saw():
    profile = deadlines.PolluxProfile.shipped("imagenet")
    training = profile.training_runs("spread", 200)
    judged = {deadlines.placement("spread", gpus) for gpus in profile.candidates("spread", 200)}
    assert len(judged) == 16 and not any(deadlines.configuration(run) in {(p, 200) for p in judged} for run in training)
    assert len(training) == len(profile.runs) - 16
    assert {deadlines.configuration(run) for run in training} >= {("4", 200), ("1444", 200), ("1111", 163)}
    # ground truth: the measured step time of 1111 at 200 (0.98437 s) for ceil(1281167 / 800) steps
    assert profile.truth("spread", 200, 4, 1_281_167) == pytest.approx(1602 * 0.9843716382980346)


def test_the_strict_gpu_replay_holds_out_every_run_at_the_jobs_batch():
    profile = deadlines.PolluxProfile.shipped("imagenet")
    training = profile.training_runs("packed", 200, holdout="batch")
    assert all(deadlines.configuration(run)[1] != 200 for run in training)
    assert len(training) == len(profile.runs) - 108  # every placement of 1-16 GPUs over 1-4 nodes was run at 200


def test_the_replay_counts_a_claim_as_false_only_when_the_claimed_size_truly_misses():
    totals = {1: 100.0, 2: 60.0, 4: 40.0}  # true seconds per size; 70 s left: 2 and 4 fit, 1 misses
    tally = deadlines.new_tally()
    plans = [(1, True), (2, True), (1, False), (4, True)]  # (size, said it meets the deadline)
    for size, claim in plans:
        deadlines.record(tally, [("planner", size), ("oracle", 2)], totals, 70.0, claims={"planner": claim})
    assert tally["planner"]["false claims"] == 1  # 1 said "meets" and missed; the honest miss is no false claim
    assert tally["planner"]["hits"] == 2 and tally["planner"]["jobs"] == 4
    assert tally["oracle"]["false claims"] == 0  # the oracle claims nothing
    assert deadlines.share(tally, "planner", "false claims") == pytest.approx(0.25)


def test_the_per_size_replay_holds_out_one_placement_of_the_most_measured_batch_per_model():
    profile = deadlines.PolluxProfile.shipped("imagenet")
    batch = profile.most_measured("packed")
    assert batch == 81  # the middle of the 8 batches run at all 108 placements
    for gpus, expected in ((6, "24"), (16, "4444")):
        training = profile.training_runs("packed", batch, fold=gpus % deadlines.MAX_GPUS, folds=deadlines.MAX_GPUS)
        seen = {deadlines.configuration(run) for run in training}
        assert {deadlines.configuration(run) for run in profile.runs} - seen == {(expected, batch)}


def test_the_per_size_replay_asks_each_size_of_the_model_that_lacks_it():
    predictor = deadlines.PerSize({6: AmdahlModel(serial=600.0), 0: AmdahlModel(serial=6000.0)}, deadlines.MAX_GPUS)
    sizes = [job(replicas=16, high=16), job(replicas=6, high=16)]
    estimates = predictor.estimate(sizes, 0.9, [7000.0, 7000.0])
    assert list(estimates.p50) == pytest.approx([6000.0 + 3600.0 / 16, 600.0 + 3600.0 / 6])
    assert list(estimates.upper) == pytest.approx([1.2 * 6225.0, 1.2 * 1200.0])
    assert estimates.probability[0] < 0.9 < estimates.probability[1]
    assert predictor.estimate(sizes, 0.9).probability is None
    assert predictor.startup(sizes) == [60.0, 60.0]
