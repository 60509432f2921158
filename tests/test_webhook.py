"""AdmissionReviews posted over HTTPS to the real webhook server (kopf), run in the webhook role."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayjob_advisor import contract as ann
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import running_advisor
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    """One webhook replica for the module: it keeps no state between reviews."""
    with running_advisor(
        "webhook", objects=[profile_manifest()], shipped_profiles=False, refit_interval_seconds=0.1
    ) as advisor:
        advisor.wait_for_model(WORKLOAD)
        yield advisor.webhook
        assert not advisor.api.objects("events") and not advisor.api.requests("PATCH"), (
            "the webhook role must write nothing"
        )


def job(mode: str = "recommend", deadline: str | None = "40s", replicas: int = 1, **notes: str) -> dict:
    values = {ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", ann.MODE: mode}
    if deadline:
        values[ann.DEADLINE] = deadline
    values.update(notes)
    groups = [worker_group(replicas=replicas, minReplicas=1, maxReplicas=4)]
    return make_rayjob(annotations=values, groups=groups, runtimeEnvYAML=f"env_vars: {{NUM_WORKERS: '{replicas}'}}")


def replicas_of(rayjob: dict) -> tuple[int, int, int]:
    group = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    return group["replicas"], group["minReplicas"], group["maxReplicas"]


def test_recommend_mode_only_annotates(webhook):
    stored, response = webhook.admit(job("recommend"))
    notes = stored["metadata"]["annotations"]
    assert {ann.PREDICTION, ann.PREDICTED_RUNTIME, ann.RECOMMENDATION} <= set(notes)
    assert replicas_of(stored) == (1, 1, 4)
    plan = json.loads(notes[ann.RECOMMENDATION])
    assert response["warnings"] == [f"rayjob-advisor: recommends {plan['replicas']} replicas: {plan['reason']}"]


def test_enforce_mode_rewrites_the_replicas_and_records_the_original(webhook):
    stored, response = webhook.admit(job("enforce", deadline="25s"))
    notes = stored["metadata"]["annotations"]
    plan = json.loads(notes[ann.RECOMMENDATION])
    assert plan["replicas"] > 1 and replicas_of(stored)[0] == plan["replicas"]
    assert yaml.safe_load(stored["spec"]["runtimeEnvYAML"])["env_vars"]["NUM_WORKERS"] == str(plan["replicas"])
    assert json.loads(notes[ann.ORIGINAL_REPLICAS])["replicas"] == 1
    assert response["warnings"][0].startswith(f"rayjob-advisor: set workers replicas 1 -> {plan['replicas']}")


def test_without_a_deadline_only_the_prediction_is_added(webhook):
    stored, response = webhook.admit(job("enforce", deadline=None))
    assert ann.PREDICTION in stored["metadata"]["annotations"] and "warnings" not in response
    assert ann.RECOMMENDATION not in stored["metadata"]["annotations"] and replicas_of(stored) == (1, 1, 4)


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({ann.DATASET_SIZE: "lots"}, "dataset-size='lots'"),
        ({ann.DEADLINE: "soon"}, "neither an RFC 3339 time"),
        ({ann.WORKLOAD: "unknown"}, "no RuntimeProfile for workload 'unknown'"),
    ],
)
def test_bad_annotations_are_admitted_with_a_warning(webhook, notes, message):
    stored, response = webhook.admit(job("enforce", **notes))
    assert message in stored["metadata"]["annotations"][ann.ERROR]
    assert any(message in warning for warning in response["warnings"])
    assert replicas_of(stored) == (1, 1, 4)


def test_dry_run_gets_the_same_answer(webhook):
    rayjob = job("enforce", deadline="25s")
    wet, _ = webhook.admit(rayjob)
    dry, _ = webhook.admit(rayjob, dry_run=True)
    assert replicas_of(dry) == replicas_of(wet)


def test_mode_off_is_left_alone(webhook):
    stored, response = webhook.admit(job("off"))
    assert stored == job("off") and "patch" not in response


GARBAGE = st.one_of(st.text(max_size=12), st.integers(-5, 10**6).map(str))
VALID = {
    ann.WORKLOAD: st.just(WORKLOAD),
    ann.DEADLINE: st.sampled_from(["15s", "40s", "2h", "2026-12-02T18:00:00Z"]),
    ann.MODE: st.sampled_from(["off", "recommend", "enforce"]),
    ann.DATASET_SIZE: st.integers(1000, 50000).map(str),
    ann.EPOCHS: st.integers(1, 3).map(str),
    ann.BATCH_SIZE: st.sampled_from(["32", "64", "128"]),
    ann.CONFIDENCE: st.sampled_from(["0.5", "0.9", "0.99"]),
    ann.SCALE_GROUP: st.sampled_from(["g0", "g1", "nope"]),
    ann.WORKERS_ENV: st.just("NUM_WORKERS"),
    ann.WORKERS_ARG: st.just("--num-workers"),
    ann.WORKERS_FROM: st.just("cluster"),
}


@st.composite
def random_rayjobs(draw) -> dict:
    groups = []
    for index in range(draw(st.integers(0, 3))):
        low = draw(st.integers(0, 4))
        high = draw(st.integers(0, 8))
        resources = draw(st.sampled_from([None, {"limits": {"nvidia.com/gpu": "1"}}, {"requests": {"cpu": "500m"}}]))
        group = worker_group(
            f"g{index}", resources=resources, replicas=draw(st.integers(0, 10)), minReplicas=low, maxReplicas=high
        )
        if draw(st.booleans()):
            group["numOfHosts"] = draw(st.integers(1, 4))
        groups.append(group)
    notes = {
        key: draw(st.one_of(VALID[key], GARBAGE) if draw(st.integers(0, 9)) == 0 else VALID[key])
        for key in draw(st.sets(st.sampled_from(ann.INPUT_KEYS)))
        | ({ann.DATASET_SIZE, ann.DEADLINE, ann.MODE} if draw(st.booleans()) else set())
    }  # mostly valid values, one in ten garbage; half the jobs plan a deadline
    notes.setdefault(ann.WORKLOAD, WORKLOAD)
    return make_rayjob(annotations=notes, groups=groups)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(rayjob=random_rayjobs())
def test_any_rayjob_is_allowed_with_a_valid_patch_and_sound_bounds(webhook, rayjob):
    stored, _ = webhook.admit(rayjob)  # allowed, and valid against the CRD after the patch
    before = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    after = stored["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        if new != old:  # only an enforced rewrite changes a group, and it keeps min <= replicas <= max
            assert new["minReplicas"] <= new["replicas"] <= new["maxReplicas"]
            assert ann.ORIGINAL_REPLICAS in stored["metadata"]["annotations"]
