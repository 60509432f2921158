"""AdmissionReviews posted over HTTPS to the real webhook server (kopf), run in the webhook role."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from benchmarks import admission_fuzz
from benchmarks.admission_fuzz import random_rayjobs
from rayjob_advisor import contract as ann
from rayjob_advisor.kube import admission
from rayjob_advisor_testkit.admission import Webhook
from rayjob_advisor_testkit.advisor import CONTROLLER_ACCOUNT, RunningAdvisor
from rayjob_advisor_testkit.profiles import WORKLOAD
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group


@pytest.fixture(scope="module")
def advisor() -> Iterator[RunningAdvisor]:
    """One webhook replica for the module: it keeps no state between reviews."""
    with admission_fuzz.fuzzing_webhook() as advisor:
        advisor.wait_for_model(WORKLOAD)
        yield advisor
        assert not advisor.api.objects("events") and not advisor.api.requests("PATCH"), (
            "the webhook role must write nothing"
        )


@pytest.fixture(scope="module")
def webhook(advisor: RunningAdvisor) -> Webhook:
    return advisor.webhook


def job(mode: str = "recommend", deadline: str | None = "40s", replicas: int = 1, **notes: str) -> dict:
    values = {ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", ann.EPOCHS: "1", ann.MODE: mode}
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


def test_a_job_held_for_the_planner_is_planned_and_released_at_admission(webhook):
    held = job("enforce", deadline="25s", **{ann.RELEASE: "true"})
    held["spec"]["suspend"] = True
    stored, _ = webhook.admit(held)
    assert stored["spec"]["suspend"] is False and replicas_of(stored)[0] > 1
    gated = job("enforce", deadline="25s", **{ann.KUEUE_GATES: "example.com/quota,rayjob-advisor.io/planner"})
    stored, _ = webhook.admit(gated)
    assert stored["metadata"]["annotations"][ann.KUEUE_GATES] == "example.com/quota"


def test_only_the_advisor_writes_the_held_mark_on_any_rayjob(webhook):
    """The mark the controller releases a suspended job on: set on the CREATE of a job asking for release, dropped
    from any other, and put back after any UPDATE but the controller's own."""
    guard = webhook.at("/guard")
    asking = job(**{ann.RELEASE: "true"})
    asking["spec"]["suspend"] = True
    stored, _ = guard.admit(asking)
    assert stored["metadata"]["annotations"][ann.HELD] == "true"
    forged = job(**{ann.HELD: "true"})  # not asking: no mark, whatever the tenant writes
    assert ann.HELD not in guard.admit(forged)[0]["metadata"]["annotations"]
    queued = copy.deepcopy(asking)
    queued["metadata"]["labels"] = {ann.KUEUE_QUEUE: "team-a"}
    assert ann.HELD not in guard.admit(queued)[0]["metadata"]["annotations"]
    plain = job()
    added, _ = guard.admit(job(**{ann.HELD: "true"}), operation="UPDATE", old=plain)  # a tenant's edit
    assert ann.HELD not in added["metadata"]["annotations"]
    removed, _ = guard.admit(plain, operation="UPDATE", old=stored)
    assert removed["metadata"]["annotations"][ann.HELD] == "true"
    released, response = guard.admit(plain, operation="UPDATE", old=stored, username=CONTROLLER_ACCOUNT)
    assert ann.HELD not in released["metadata"]["annotations"] and "patch" not in response


def test_without_a_deadline_only_the_prediction_is_added(webhook):
    stored, response = webhook.admit(job("enforce", deadline=None))
    assert ann.PREDICTION in stored["metadata"]["annotations"] and "warnings" not in response
    assert ann.RECOMMENDATION not in stored["metadata"]["annotations"] and replicas_of(stored) == (1, 1, 4)


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({ann.DATASET_SIZE: "lots"}, "dataset-size='lots'"),
        ({ann.DEADLINE: "soon"}, "neither an RFC 3339 time"),
        # Out of range: input errors, never plans.
        ({ann.DATASET_SIZE: "1" + "0" * 400}, "Input should be less than or equal to 1000000000000"),
        ({ann.DEADLINE: "87600h"}, "a deadline duration must be at most 8784h"),
        ({ann.DEADLINE: "2099-01-01T00:00:00Z"}, "deadline='2099-01-01T00:00:00+00:00': more than 8784h from now"),
        ({ann.EPOCHS: "99999999"}, "epochs='99999999': Input should be less than or equal to 1000000"),
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


def test_only_a_create_is_resized(webhook):
    stored, response = webhook.admit(job("enforce", deadline="25s"), operation="UPDATE")
    assert replicas_of(stored) == (1, 1, 4) and ann.ORIGINAL_REPLICAS not in stored["metadata"]["annotations"]
    assert response["warnings"][0].startswith("rayjob-advisor: recommends")


def envelope_with(path: tuple, value) -> bytes:
    return json.dumps(admission_fuzz._set(Webhook.envelope(job()), path, value)).encode()


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{", 400, "not JSON: JSONDecodeError"),
        (b"[]", 400, "body: Input should be a valid dictionary"),
        (b"\xff\xfe\x00", 400, "not JSON: UnicodeDecodeError"),
        (b"[" * 5000 + b"]" * 5000, 400, "not JSON: RecursionError"),
        (envelope_with(("request", "uid"), ...), 400, "request.uid: Field required"),
        (envelope_with(("request", "userInfo"), None), 400, "request.userInfo: Input should be a valid dictionary"),
        (envelope_with(("request", "object", "kind"), "Pod"), 400, "request.object is ray.io/v1 Pod, but request.kind"),
        (
            envelope_with(("request", "object", "metadata", "annotations", ann.MODE), False),
            400,
            "Input should be a valid string",
        ),
    ],
    ids=["not-json", "a-list", "binary", "nested", "no-uid", "no-user", "a-pod", "boolean-annotation"],
)
def test_malformed_reviews_get_a_4xx_with_the_reason(webhook, body, status, reason):
    answer = webhook.post(body)
    assert answer[0] == status and reason in answer[1] and reason in answer[2].decode()


def test_a_review_over_1_mib_is_read(webhook):
    rayjob = job("enforce", deadline="25s")
    rayjob["spec"]["entrypoint"] = "x" * 2 * 2**20
    stored, _ = webhook.admit(rayjob)
    assert replicas_of(stored)[0] > 1


def test_annotations_are_never_taken_past_256_kib(webhook):
    rayjob = job("enforce", deadline="25s")
    notes = rayjob["metadata"]["annotations"]
    notes["example.com/blob"] = "x" * (admission.ANNOTATIONS_LIMIT - admission.annotations_size(notes) - 100)
    stored, response = webhook.admit(rayjob)
    assert stored == rayjob and "patch" not in response and len(response["warnings"]) == 1
    assert "over Kubernetes' limit of 262144: none written, replicas unchanged" in response["warnings"][0]


def test_a_cluster_selector_job_is_predicted_from_the_raycluster_it_names(advisor):
    own = job("enforce", deadline="25s")
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared", "namespace": "default"},
               "spec": copy.deepcopy(own["spec"]["rayClusterSpec"])}  # fmt: skip
    advisor.api.create(cluster)
    selected = copy.deepcopy(own)
    del selected["spec"]["rayClusterSpec"]
    selected["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    stored, _ = advisor.webhook.admit(selected)
    notes = stored["metadata"]["annotations"]
    assert json.loads(notes[ann.PREDICTION])["assumed"]["cluster"] == "shared" and stored["spec"] == selected["spec"]
    assert json.loads(notes[ann.RECOMMENDATION])["reason"].startswith("this cluster would need")
    selected["spec"]["clusterSelector"] = {"ray.io/cluster": "gone"}
    stored, response = advisor.webhook.admit(selected)
    text = "RayCluster 'gone' in namespace 'default' (spec.clusterSelector) does not exist: the job runs on it, so its "
    assert stored["metadata"]["annotations"][ann.ERROR] == text + "size is there"
    assert response["warnings"] == [f"rayjob-advisor: {text}size is there"]


def test_a_wrong_type_is_named_in_the_warning_and_the_error_annotation(webhook):
    rayjob = job("enforce")
    rayjob["spec"]["rayClusterSpec"] = ["not", "a", "map"]
    response = webhook.review(rayjob)
    text = "spec.rayClusterSpec: Input should be a valid dictionary or instance of ClusterSpec"
    assert response["allowed"] and response["warnings"] == [f"rayjob-advisor: {text}"]
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/metadata/annotations/rayjob-advisor.io~1error", "value": text} in patch


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=admission_fuzz.cases())
def test_fuzz_no_5xx_no_denial_no_invalid_patch(webhook, case):
    assert admission_fuzz.exchange(webhook, case).problems == []


def test_kopfs_own_failure_fails_open(webhook):
    status, _, body = webhook.post(envelope_with(("request", "resource", "resource"), "pods"))
    response = json.loads(body)["response"]
    assert status == 200 and response["allowed"] and "patch" not in response
    assert response["warnings"][0].startswith("rayjob-advisor: could not answer: UnknownResourceError: ")


def test_a_review_naming_another_namespace_lists_none_of_the_others_workloads(webhook):
    """Issue 21's disclosure: an unknown workload's warning lists the workloads the job's namespace may use (its own,
    the shared ones, the shipped ones), never another namespace's (this webhook's profile is in ``default``)."""
    forged = job(**{ann.WORKLOAD: "nope"})
    forged["metadata"]["namespace"] = "team-a"
    _, response = webhook.admit(forged)
    (warning,) = response["warnings"]
    assert "no profile yet for workload 'nope': no RuntimeProfile in namespace 'team-a'" in warning
    assert WORKLOAD not in warning.partition("known workloads:")[2]
    same = job(**{ann.WORKLOAD: "nope"})
    assert WORKLOAD in webhook.admit(same)[1]["warnings"][0]  # listed in its own namespace
