"""AdmissionReviews posted over HTTPS to the real webhook server (kopf), run in the webhook role."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import urllib.request
import uuid

import jsonpatch
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_valid_rayjob, make_rayjob, worker_group
from emulator import Emulator, operator_settings, run_operator
from rayjob_advisor import contract as ann
from rayjob_advisor import run
from rayjob_advisor.config import OperatorConfig
from test_operator import WORKLOAD, free_port, profile_manifest
from tls import make_certificates


class Webhook:
    """Posts AdmissionReviews to the running webhook and applies what it answers."""

    def __init__(self, port: int, ca: str) -> None:
        self.url = f"https://127.0.0.1:{port}/advise"
        self.context = ssl.create_default_context(cafile=ca)

    def review(self, rayjob: dict, dry_run: bool = False) -> dict:
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ray.io", "version": "v1", "kind": "RayJob"},
            "resource": {"group": "ray.io", "version": "v1", "resource": "rayjobs"},
            "name": rayjob["metadata"]["name"],
            "namespace": rayjob["metadata"].get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": rayjob,
            "oldObject": None,
            "dryRun": dry_run,
        }
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
        http = urllib.request.Request(self.url, body.encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(http, context=self.context, timeout=10) as answer:
            response = json.load(answer)["response"]
        assert response["uid"] == request["uid"]
        return response

    def admit(self, rayjob: dict, dry_run: bool = False) -> tuple[dict, dict]:
        """(the RayJob as it would be stored, the response); asserts it is allowed and valid."""
        response = self.review(rayjob, dry_run)
        assert response["allowed"] is True, response
        patched = copy.deepcopy(rayjob)
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            patched = jsonpatch.apply_patch(rayjob, json.loads(base64.b64decode(response["patch"])))
        assert_valid_rayjob(patched)
        return patched, response


@pytest.fixture(scope="module")
def webhook(tmp_path_factory):
    ca, cert, key = make_certificates(tmp_path_factory.mktemp("tls"))
    port = free_port()
    with Emulator() as api:
        api.create(profile_manifest())
        config = OperatorConfig(
            role="webhook", kube_api=api.url, liveness_port=0, metrics_port=0, webhook_port=port, shipped_profiles=False,
            tls_cert_file=str(cert), tls_key_file=str(key), refit_interval_seconds=0.1,
        )  # fmt: skip
        arguments = run.operator_arguments(config)
        settings_ = operator_settings()
        settings_.persistence = arguments["settings"].persistence
        settings_.admission = arguments["settings"].admission
        memo = arguments["memo"]
        with run_operator(api, registry=arguments["registry"], settings=settings_, memo=memo, timeout=30):
            api.wait_until(lambda: memo.store.find("default", WORKLOAD).model is not None, 60)
            yield Webhook(port, str(ca))
        assert not api.objects("events") and not api.requests("PATCH"), "the webhook role must write nothing"


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
        group = worker_group(f"g{index}", resources=resources, replicas=draw(st.integers(0, 10)), minReplicas=low, maxReplicas=high)
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rayjob=random_rayjobs())
def test_any_rayjob_is_allowed_with_a_valid_patch_and_sound_bounds(webhook, rayjob):
    stored, _ = webhook.admit(rayjob)  # allowed, and valid against the CRD after the patch
    before = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    after = stored["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert len(after) == len(before)
    for old, new in zip(before, after):
        if new != old:  # only an enforced rewrite changes a group, and it keeps min <= replicas <= max
            assert new["minReplicas"] <= new["replicas"] <= new["maxReplicas"]
            assert ann.ORIGINAL_REPLICAS in stored["metadata"]["annotations"]
