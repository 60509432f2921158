"""advise(): the one merge patch and the messages the advisor gives a RayJob, for good and for bad input."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time

import pytest
import yaml

from rayjob_advisor import contract as ann
from rayjob_advisor.advice import features, planner, prediction
from rayjob_advisor.application import Advice, Policy, advise
from rayjob_advisor.errors import ProfileNotReady
from rayjob_advisor.kube.config import OperatorConfig, load_config
from rayjob_advisor.kuberay.training import TrainingCount
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.advice import NOW, applied, notes_of
from rayjob_advisor_testkit.advisor import free_port
from rayjob_advisor_testkit.profiles import deadline_job, fitted_store, synthetic_observations
from rayjob_advisor_testkit.rayjobs import make_rayjob, sample_rayjobs, worker_group

POLICY = Policy()


def test_a_good_job_gets_the_prediction_annotations_and_its_error_cleared(store):
    rayjob = make_rayjob(
        annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128", ann.ERROR: "old"}
    )
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    assert advice.error is None and advice.warnings == [] and notes_of(advice)[ann.ERROR] is None
    prediction = json.loads(notes_of(advice)[ann.PREDICTION])
    assert prediction["profile"] == "default/synthetic" and prediction["time"] == "2026-12-02T12:00:00Z"
    assert float(notes_of(advice)[ann.PREDICTED_RUNTIME_SECONDS]) == pytest.approx(prediction["p50"], abs=0.05)
    after = applied(rayjob, advice)
    assert ann.ERROR not in after["metadata"]["annotations"] and after["spec"] == rayjob["spec"]


def test_a_workload_without_a_profile_gets_a_note_not_an_error(store):
    rayjob = make_rayjob(annotations={ann.WORKLOAD: "bert", ann.DATASET_SIZE: "10", ann.ERROR: "old"})
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    note = notes_of(advice)[ann.NOTE]
    assert advice.error is None and notes_of(advice)[ann.ERROR] is None
    assert note is not None and note.startswith("no profile yet for workload 'bert': no RuntimeProfile in namespace")
    assert note.endswith("it is learned from this workload's finished jobs")
    (message,) = advice.messages
    assert message.reason == "NoProfileYet" and not message.warning and message.event
    assert advice.warnings == [f"rayjob-advisor: {note}"]
    again = make_rayjob(annotations={ann.WORKLOAD: "bert", ann.DATASET_SIZE: "10", ann.NOTE: note})
    assert not advise(again, store, policy=POLICY, may_resize=True, now=NOW).messages[0].event  # no repeated Event


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "x"}, "dataset-size='x'"),
        ({ann.WORKLOAD: "synthetic"}, "rayjob-advisor.io/dataset-size is missing"),
        ({ann.DATASET_SIZE: "10"}, "no workload: set the rayjob-advisor.io/workload annotation or label"),
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.SCALE_GROUP: "gpu"}, "no worker group of that name"),
        # Out of any sensible range: input errors, never a plan nor a retry.
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "1" + "0" * 400}, "dataset-size='1000"),
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.EPOCHS: "10000000"}, "epochs='10000000'"),
        (
            {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10000000", ann.EPOCHS: "1000000"},
            "rayjob-advisor.io/dataset-size x rayjob-advisor.io/epochs is more than 1e+12 samples",
        ),
        (
            {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.DEADLINE: "87600h"},
            "deadline='87600h': Value error, a deadline duration must be at most 8784h",
        ),
        (
            {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.DEADLINE: "2036-12-02T12:00:00Z"},
            "deadline='2036-12-02T12:00:00+00:00': more than 8784h from now",
        ),
        (
            {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.BATCH_SIZE: "64", ann.BATCH_SIZE_PER_WORKER: "8"},
            "set at most one of rayjob-advisor.io/batch-size (the global batch) and "
            "rayjob-advisor.io/batch-size-per-worker",
        ),
    ],
)
def test_bad_input_becomes_the_error_annotation_and_a_warning(store, notes, message):
    rayjob = make_rayjob(annotations=notes)
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    assert message in advice.error and advice.patch == {"metadata": {"annotations": {ann.ERROR: advice.error}}}
    assert advice.warnings == [f"rayjob-advisor: {advice.error}"] and not advice.resized
    (event,) = advice.messages
    assert event.warning and event.event and event.reason == "CannotPredict"
    again = make_rayjob(annotations={**notes, ann.ERROR: advice.error})
    assert not advise(again, store, policy=POLICY, may_resize=True, now=NOW).messages[0].event  # no repeated Event


def test_mode_off_by_annotation_or_namespace_label(store):
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10"}
    off = make_rayjob(annotations={**notes, ann.MODE: "off"})
    assert advise(off, store, policy=POLICY, may_resize=True, now=NOW) == Advice()
    in_off_namespace = Policy(namespace_labels={ann.MODE: "off"})
    assert advise(make_rayjob(annotations=notes), store, policy=in_off_namespace, may_resize=True, now=NOW) == Advice()


def test_default_workload_applies_to_jobs_that_name_none(store):
    policy = Policy(default_workload="synthetic")
    advice = advise(make_rayjob(annotations={ann.DATASET_SIZE: "8000"}), store, policy=policy, may_resize=True, now=NOW)
    assert advice.error is None and advice.workload == "synthetic"


def test_a_profile_still_being_fitted_is_not_an_error():
    store = ProfileStore(shipped=False)
    store.put("default", "p", "synthetic", synthetic_observations(), [])
    rayjob = make_rayjob(annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10"})
    with pytest.raises(ProfileNotReady, match="default/synthetic is being fitted"):
        advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)


@pytest.mark.parametrize(("name", "rayjob"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_every_kuberay_sample_gets_a_prediction_or_a_clear_error(store, name, rayjob):
    rayjob = json.loads(json.dumps(rayjob))
    rayjob["metadata"].setdefault("annotations", {}).update({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000"})
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    if name == "ray-job.use-existing-raycluster.yaml":
        assert "spec.clusterSelector" in advice.error
    else:
        assert advice.error is None and ann.PREDICTION in notes_of(advice)


def test_an_absolute_deadline_within_a_year_of_now_is_planned(store):
    within = NOW + dt.timedelta(days=365)
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.DEADLINE: within.isoformat()}
    advice = advise(make_rayjob(annotations=notes), store, policy=POLICY, may_resize=True, now=NOW)
    assert advice.error is None and ann.RECOMMENDATION in notes_of(advice)


def test_the_prediction_shows_the_batch_held_and_the_placement_hint(store):
    group = worker_group(replicas=2, minReplicas=1, maxReplicas=4)
    group["template"]["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"ray.io/group": "workers"}}}
    ]  # fmt: skip
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "64"}
    rayjob = make_rayjob(annotations=notes, groups=[group], runtimeEnvYAML="env_vars: {NUM_WORKERS: '2'}")
    shown = json.loads(notes_of(advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW))[ann.PREDICTION])
    expected = {"batch_size": 64, "batch_size_per_worker": 32, "batch_held": "per-worker", "placement": "spread"}
    assert {key: shown["features"][key] for key in expected} == expected
    held = {**notes, ann.BATCH_SCALING: "global", ann.PLACEMENT: "one-per-node"}
    rayjob = make_rayjob(annotations=held, groups=[group], runtimeEnvYAML="env_vars: {NUM_WORKERS: '2'}")
    shown = json.loads(notes_of(advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW))[ann.PREDICTION])
    assert (shown["features"]["batch_held"], shown["features"]["placement"]) == ("global", "one-per-node")


@pytest.mark.parametrize(
    ("missing", "blocker"),
    [
        ((ann.BATCH_SIZE,), "add rayjob-advisor.io/batch-size-per-worker (or rayjob-advisor.io/batch-size)"),
        ((ann.EPOCHS,), "add rayjob-advisor.io/epochs"),
        (
            (ann.BATCH_SIZE, ann.EPOCHS),
            "add rayjob-advisor.io/batch-size-per-worker (or rayjob-advisor.io/batch-size) "
            "and rayjob-advisor.io/epochs",
        ),
    ],
)
def test_enforce_never_resizes_on_a_missing_input_and_says_which_annotation_to_add(store, missing, blocker):
    given = deadline_job("enforce", deadline="20s")
    assert advise(given, store, policy=POLICY, may_resize=True, now=NOW).resized  # the contrast: everything given
    rayjob = deadline_job("enforce", deadline="20s")
    for key in missing:
        del rayjob["metadata"]["annotations"][key]
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    assert not advice.resized and after["spec"] == rayjob["spec"] and ann.ORIGINAL_REPLICAS not in notes_of(advice)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert plan["replicas"] > plan["currentReplicas"]  # the recommendation stays
    assert plan["reason"].endswith(f"; not resized: the plan assumes what the job does not say: {blocker}")
    (message,) = advice.messages
    assert (message.reason, message.warning, message.event) == ("NotResized", True, True) and blocker in message.text
    recommended = deadline_job("recommend", deadline="20s")
    for key in missing:
        del recommended["metadata"]["annotations"][key]
    advice = advise(recommended, store, policy=POLICY, may_resize=True, now=NOW)
    assert "not resized" not in advice.messages[0].text  # only enforce is held back; a recommendation is advice


# Every KubeRay sample as a new user submits it: a workload and a dataset size, nothing else, in enforce mode.
@pytest.fixture(scope="module")
def shipped_store():
    store = ProfileStore()
    store.find("default", "digits-cnn").fit()
    return store


def bare_sample(rayjob: dict, deadline: str) -> dict:
    rayjob = json.loads(json.dumps(rayjob))
    rayjob["metadata"].setdefault("annotations", {}).update(
        {ann.WORKLOAD: "digits-cnn", ann.DATASET_SIZE: "60000", ann.MODE: "enforce", ann.DEADLINE: deadline}
    )
    for group in rayjob["spec"].get("rayClusterSpec", {}).get("workerGroupSpecs", []):
        group.update(minReplicas=1, maxReplicas=8)  # room both ways: a plan that changes the size
    return rayjob


@pytest.mark.parametrize("deadline", ["30s", "6h"])
@pytest.mark.parametrize(("name", "rayjob"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_no_sample_is_resized_on_inputs_it_does_not_give(shipped_store, name, rayjob, deadline):
    rayjob = bare_sample(rayjob, deadline)
    advice = advise(rayjob, shipped_store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    assert not advice.resized and after["spec"] == rayjob["spec"]
    if advice.error is not None:
        assert name == "ray-job.use-existing-raycluster.yaml" and "spec.clusterSelector" in advice.error
        return
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    if plan["replicas"] != plan["currentReplicas"]:
        (message,) = advice.messages
        assert message.reason == "NotResized" and "not resized" in plan["reason"]
        assert ann.BATCH_SIZE_PER_WORKER in message.text or ann.WORKERS_ENV in message.text


@pytest.mark.parametrize(("name", "rayjob"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_every_sample_is_predicted_positive_with_its_assumptions_shown(shipped_store, name, rayjob):
    rayjob = bare_sample(rayjob, "6h")
    advice = advise(rayjob, shipped_store, policy=POLICY, may_resize=True, now=NOW)
    if advice.error is not None:
        assert name == "ray-job.use-existing-raycluster.yaml" and "spec.clusterSelector" in advice.error
        return
    shown = json.loads(notes_of(advice)[ann.PREDICTION])
    assert shown["p50"] > 0 and shown["upper"] >= shown["p50"]
    assert (shown["features"]["batch_size"], shown["features"]["batch_held"]) == (None, "per-worker")
    assert {"batch_size_per_worker", "placement"} <= set(shown["assumed"])  # the model's defaults, from the profile


def test_config_from_environment_and_flags():
    environ = {
        "RAYJOB_ADVISOR_NAMESPACES": "a, b",
        "RAYJOB_ADVISOR_LOG_FORMAT": "json",
        "RAYJOB_ADVISOR_LIVENESS_PORT": "9000",
    }
    config = load_config({"liveness_port": 0, "namespaces": None}, environ)
    assert config == OperatorConfig(namespaces=("a", "b"), log_format="json", liveness_port=0)
    with pytest.raises(ValueError, match="log_format"):
        load_config({"log_format": "xml"}, {})


def test_shared_profile_namespaces_are_configured_and_watched():
    environ = {"RAYJOB_ADVISOR_SHARED_PROFILE_NAMESPACES": "platform, ml-base"}
    config = load_config({}, environ)
    assert config.shared_profile_namespaces == ("platform", "ml-base") and config.watched_namespaces == ()
    config = load_config({"namespaces": ["team-a", "platform"], "shared_profile_namespaces": ["ml-base"]}, environ)
    assert config.shared_profile_namespaces == ("ml-base",)  # flags override the environment
    assert config.watched_namespaces == ("team-a", "platform", "ml-base")


def test_recommend_mode_annotates_the_plan_and_explains_it(store):
    rayjob = deadline_job("recommend")
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert "spec" not in advice.patch and ann.ORIGINAL_REPLICAS not in notes_of(advice)
    assert advice.warnings == [f"rayjob-advisor: recommends {plan['replicas']} replicas: {plan['reason']}"]
    assert not advice.messages[0].event  # the annotation says it; no Event on every update


def test_enforce_mode_resizes_the_scaled_group_within_widened_bounds(store):
    rayjob = deadline_job("enforce", deadline="20s")
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    assert plan["replicas"] > 1 and advice.resized  # 16000 samples on one worker take longer than 20 s
    (group,) = after["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == plan["replicas"] and group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert yaml.safe_load(after["spec"]["runtimeEnvYAML"]) == {"env_vars": {"NUM_WORKERS": str(plan["replicas"])}}
    assert json.loads(after["metadata"]["annotations"][ann.ORIGINAL_REPLICAS]) == {
        "groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 4,
        "training": {"method": "env:NUM_WORKERS", "place": "runtimeEnvYAML", "workers": 1},
    }  # fmt: skip
    assert advice.warnings[0].startswith(
        f"rayjob-advisor: set workers replicas 1 -> {plan['replicas']} "
        f"and NUM_WORKERS 1 -> {plan['replicas']} in runtimeEnvYAML: "
    )


def test_enforce_without_leave_to_resize_only_recommends(store):
    advice = advise(deadline_job("enforce", deadline="20s"), store, policy=POLICY, may_resize=False, now=NOW)
    assert not advice.resized and "spec" not in advice.patch and ann.ORIGINAL_REPLICAS not in notes_of(advice)
    assert advice.warnings[0].startswith("rayjob-advisor: recommends ")


@pytest.mark.parametrize("notes", [{ann.RELEASE: "true"}, {ann.RELEASE: "true", ann.DATASET_SIZE: "many"}])
def test_a_held_job_is_released_in_the_same_patch_whatever_the_advice(store, notes):
    rayjob = deadline_job("enforce", deadline="20s", suspend=True, **notes)
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW, creating=True)  # the webhook
    assert applied(rayjob, advice)["spec"]["suspend"] is False
    assert advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW).patch.get("spec", {}).get("suspend") is None
    marked = deadline_job("enforce", deadline="20s", suspend=True, **notes, **{ann.HELD: "true"})  # the controller
    after = applied(marked, advise(marked, store, policy=POLICY, may_resize=True, now=NOW))
    assert after["spec"]["suspend"] is False and ann.HELD not in after["metadata"]["annotations"]
    assert advise(rayjob, store, policy=POLICY, may_resize=False, now=NOW).patch.get("spec", {}).get("suspend") is None


def test_enforce_never_resizes_groups_the_autoscaler_owns(store):
    rayjob = deadline_job("enforce", deadline="20s")
    rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert not advice.resized and plan["replicas"] == plan["currentReplicas"] == 1


def test_spare_pods_stay_spare_when_enforce_resizes(store):
    rayjob = deadline_job("enforce", deadline="20s", replicas=2, count=1)  # one pod kept spare, as Ray's docs allow
    after = applied(rayjob, advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW))
    replicas = after["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"]
    assert replicas > 2 and yaml.safe_load(after["spec"]["runtimeEnvYAML"])["env_vars"]["NUM_WORKERS"] == str(
        replicas - 1
    )
    assert json.loads(after["metadata"]["annotations"][ann.PREDICTION])["features"]["workers"] == 1


def test_enforce_does_not_resize_a_job_whose_worker_count_is_unknown_and_says_why(store):
    rayjob = deadline_job("enforce", deadline="20s")
    del rayjob["spec"]["runtimeEnvYAML"]
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    assert (
        not advice.resized
        and after["spec"] == rayjob["spec"]
        and ann.ORIGINAL_REPLICAS not in after["metadata"]["annotations"]
    )
    assert (
        plan["replicas"] > 1 and "; not resized: the RayJob does not say how many Ray Train workers" in plan["reason"]
    )
    (message,) = advice.messages
    assert (message.reason, message.warning, message.event) == ("NotResized", True, True)
    assert ann.WORKERS_ENV in message.text and ann.WORKERS_FROM in message.text
    prediction = json.loads(after["metadata"]["annotations"][ann.PREDICTION])
    assert prediction["features"]["workers_from"] == "unknown"


def test_a_job_that_reads_the_cluster_is_resized_alone(store):
    rayjob = deadline_job("enforce", deadline="20s", **{ann.WORKERS_FROM: "cluster"})
    del rayjob["spec"]["runtimeEnvYAML"]
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    assert advice.resized and "training" not in json.loads(after["metadata"]["annotations"][ann.ORIGINAL_REPLICAS])


# Every KubeRay sample, enforced towards a tight and a loose deadline: the pods and Ray Train move together, or neither.
RESIZABLE = [(name, rayjob) for name, rayjob in sample_rayjobs() if name != "ray-job.use-existing-raycluster.yaml"]


def enforced(rayjob: dict, deadline: str) -> dict:
    """A copy of a sample with every input a resize needs, in ``enforce`` mode with ``deadline``."""
    rayjob = json.loads(json.dumps(rayjob))
    rayjob["metadata"].setdefault("annotations", {}).update(
        {
            ann.WORKLOAD: "synthetic",
            ann.DATASET_SIZE: "16000",
            ann.BATCH_SIZE_PER_WORKER: "32",
            ann.EPOCHS: "1",
            ann.MODE: "enforce",
            ann.DEADLINE: deadline,
        }
    )
    return rayjob


@pytest.mark.parametrize("deadline", ["20s", "6h"])
@pytest.mark.parametrize(("name", "rayjob"), RESIZABLE, ids=[n for n, _ in RESIZABLE])
def test_every_kuberay_sample_is_resized_consistently_or_not_at_all(store, name, rayjob, deadline):
    rayjob = enforced(rayjob, deadline)
    for group in rayjob["spec"]["rayClusterSpec"].get("workerGroupSpecs", []):
        group.update(minReplicas=1, maxReplicas=8)  # room both ways (the resnet sample pins 4..4)
    before = features.features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    training = before.training
    if training.count is None:
        assert not advice.resized and after["spec"] == rayjob["spec"]
        if plan["replicas"] != plan["currentReplicas"]:
            assert "not resized" in plan["reason"] and ann.WORKERS_ENV in advice.warnings[0]
        return
    assert advice.resized == (plan["replicas"] != plan["currentReplicas"])
    assert advice.resized or deadline == "20s"  # the cheapest fits 6 h: fewer pods than any sample has
    if not advice.resized:
        assert after["spec"] == rayjob["spec"]
        return
    group = after["spec"]["rayClusterSpec"]["workerGroupSpecs"][before.scale_group.index]
    assert group["replicas"] == plan["replicas"]
    assert training_count_in(after, training) == str(group["replicas"] * group.get("numOfHosts", 1))  # one per pod
    assert json.loads(after["metadata"]["annotations"][ann.ORIGINAL_REPLICAS])["training"]["workers"] == training.count


def training_count_in(rayjob: dict, training: TrainingCount) -> str:
    """The worker count where ``training`` found it, read here without the advisor's code."""
    spec = rayjob["spec"]
    if training.place == "runtimeEnvYAML":
        return yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"][training.name]
    pod = spec["rayClusterSpec"]["headGroupSpec"] if training.place == "head env" else spec["submitterPodTemplate"]
    (value,) = [e["value"] for e in pod["template"]["spec"]["containers"][0]["env"] if e["name"] == training.name]
    return value


# GPUs per worker: changed only where the profile varied them, and then in Kubernetes and Ray alike.
@pytest.fixture(scope="module")
def gpu_store():
    """The synthetic workload profiled at 1, 2 and 4 GPUs per worker."""
    return fitted_store(synthetic_observations(gpus_per_worker=(1, 2, 4)))


@pytest.fixture(scope="module")
def one_gpu_store():
    """The synthetic workload profiled at 1 GPU per worker only."""
    return fitted_store(synthetic_observations(gpus_per_worker=(1,)))


def gpu_deadline_job(mode: str, deadline: str, gpus: str, replicas: int = 2, high: int = 4) -> dict:
    """``deadline_job`` on ``gpus`` GPUs per worker, set in the container and Ray's ``num-gpus`` alike."""
    quantity = {"cpu": "4", "nvidia.com/gpu": gpus}
    group = worker_group(
        replicas=replicas, minReplicas=1, maxReplicas=high, resources={"limits": quantity, "requests": dict(quantity)},
        rayStartParams={"num-gpus": gpus},
    )  # fmt: skip
    rayjob = deadline_job(mode, deadline=deadline, replicas=replicas)
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [group]
    return rayjob


def gpu_settings(rayjob: dict) -> list[tuple[dict, dict, str | None]]:
    """Each worker group's GPU limits, GPU requests and num-gpus, read here without the advisor's code."""
    settings = []
    for group in rayjob["spec"]["rayClusterSpec"].get("workerGroupSpecs", []):
        resources = group["template"]["spec"]["containers"][0].get("resources") or {}
        limits, requests = ({k: v for k, v in (resources.get(kind) or {}).items() if k.endswith("gpu")}
                            for kind in ("limits", "requests"))  # fmt: skip
        settings.append((limits, requests, (group.get("rayStartParams") or {}).get("num-gpus")))
    return settings


def test_enforce_takes_fewer_gpus_per_worker_when_that_is_cheaper(gpu_store):
    rayjob = gpu_deadline_job("enforce", deadline="10m", gpus="2")
    advice = advise(rayjob, gpu_store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    notes = after["metadata"]["annotations"]
    plan = json.loads(notes[ann.RECOMMENDATION])
    assert (plan["replicas"], plan["gpusPerWorker"], plan["currentGpusPerWorker"]) == (1, 1.0, 2.0)
    assert gpu_settings(after) == [({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, "1")]
    assert yaml.safe_load(after["spec"]["runtimeEnvYAML"]) == {"env_vars": {"NUM_WORKERS": "1"}}
    assert json.loads(notes[ann.ORIGINAL_REPLICAS]) == {
        "groupName": "workers", "replicas": 2, "minReplicas": 1, "maxReplicas": 4, "gpusPerWorker": 2.0,
        "training": {"method": "env:NUM_WORKERS", "place": "runtimeEnvYAML", "workers": 2},
    }  # fmt: skip
    assert advice.warnings[0].startswith(
        "rayjob-advisor: set workers replicas 2 -> 1, GPUs per worker 2 -> 1 and NUM_WORKERS 2 -> 1 in runtimeEnvYAML: "
        "1 replicas x 1 GPUs is the cheapest that finishes in time"
    )


def test_enforce_takes_more_gpus_per_worker_when_the_deadline_needs_them(gpu_store):
    rayjob = gpu_deadline_job("enforce", deadline="40s", gpus="1", replicas=1, high=1)  # one pod: only GPUs can grow
    advice = advise(rayjob, gpu_store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    assert (plan["replicas"], plan["gpusPerWorker"], plan["meetsDeadline"]) == (1, 4.0, True)
    assert gpu_settings(after) == [({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, "4")]
    assert after["spec"]["runtimeEnvYAML"] == rayjob["spec"]["runtimeEnvYAML"]  # same pods, same Ray Train workers
    assert "training" not in json.loads(after["metadata"]["annotations"][ann.ORIGINAL_REPLICAS])
    assert advice.warnings[0].startswith(
        "rayjob-advisor: set workers GPUs per worker 1 -> 4: 1 replicas x 4 GPUs is the cheapest"
    )


def test_recommend_and_unknown_counts_leave_gpus_alone(gpu_store):
    recommended = advise(gpu_deadline_job("recommend", "10m", gpus="2"), gpu_store, policy=POLICY, may_resize=True,
                         now=NOW)  # fmt: skip
    assert "spec" not in recommended.patch
    assert recommended.warnings[0].startswith("rayjob-advisor: recommends 1 replicas x 1 GPUs: ")
    unknown = gpu_deadline_job("enforce", deadline="10m", gpus="2")
    del unknown["spec"]["runtimeEnvYAML"]
    advice = advise(unknown, gpu_store, policy=POLICY, may_resize=True, now=NOW)
    assert not advice.resized and applied(unknown, advice)["spec"] == unknown["spec"]
    assert "; not resized: the RayJob does not say how many Ray Train workers" in advice.warnings[0]


def test_the_what_if_table_covers_every_gpu_count_the_profile_measured(gpu_store):
    rayjob = gpu_deadline_job("recommend", deadline="10m", gpus="2")
    job = features.features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    model = gpu_store.find("default", "synthetic").model
    rows = prediction.what_if(job, model, 0.9, planner.Prices())
    assert [(row.replicas, row.gpus_per_worker) for row in rows] == [(r, g) for r in (1, 2, 3, 4) for g in (1, 2, 4)]
    by_size = {(row.replicas, row.gpus_per_worker): row for row in rows}
    assert by_size[(2, 4.0)].p50 < by_size[(2, 2.0)].p50 < by_size[(2, 1.0)].p50  # more GPUs, faster
    assert by_size[(2, 4.0)].cost > by_size[(2, 2.0)].cost > by_size[(2, 1.0)].cost  # ... but not proportionally


# Every KubeRay sample (with a workload and a dataset size), enforced: GPU quantities change only where they may.
@pytest.mark.parametrize("deadline", ["20s", "6h"])
@pytest.mark.parametrize(("name", "rayjob"), RESIZABLE, ids=[n for n, _ in RESIZABLE])
def test_enforce_never_changes_gpus_the_profile_fixed(store, one_gpu_store, name, rayjob, deadline):
    rayjob = json.loads(json.dumps(rayjob))
    rayjob["metadata"].setdefault("annotations", {}).update(
        {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "16000", ann.MODE: "enforce", ann.DEADLINE: deadline}
    )
    for fixed in (store, one_gpu_store):  # CPU-only runs; runs at 1 GPU per worker only
        after = applied(rayjob, advise(rayjob, fixed, policy=POLICY, may_resize=True, now=NOW))
        assert gpu_settings(after) == gpu_settings(rayjob)


@pytest.mark.parametrize("deadline", ["20s", "6h"])
@pytest.mark.parametrize(("name", "rayjob"), RESIZABLE, ids=[n for n, _ in RESIZABLE])
def test_enforced_gpus_keep_kubernetes_and_ray_in_agreement(gpu_store, name, rayjob, deadline):
    rayjob = enforced(rayjob, deadline)
    before = features.features_from_rayjob(rayjob, ann.parse_inputs(rayjob["metadata"]["annotations"]))
    advice = advise(rayjob, gpu_store, policy=POLICY, may_resize=True, now=NOW)
    after = applied(rayjob, advice)
    pairs = zip(gpu_settings(rayjob), gpu_settings(after), strict=True)
    changed = [index for index, (old, new) in enumerate(pairs) if old != new]
    if not changed:  # a GPU group that may change them and misses 20 s (the resnet sample) goes to the most GPUs
        assert not (before.gpus_resizable and before.training.blocker is None and deadline == "20s")
        return
    assert changed == [before.scale_group.index] and before.gpus_resizable and before.training.blocker is None
    limits, requests, num_gpus = gpu_settings(after)[before.scale_group.index]
    plan = json.loads(after["metadata"]["annotations"][ann.RECOMMENDATION])
    assert set(limits.values()) == {str(round(plan["gpusPerWorker"]))} and requests in ({}, limits)
    assert num_gpus in (None, *limits.values())
    original = json.loads(after["metadata"]["annotations"][ann.ORIGINAL_REPLICAS])
    assert original["gpusPerWorker"] == before.gpus_per_worker


# A Ray Train script that sizes itself from NUM_WORKERS, as KubeRay's pytorch-mnist sample does, and reports the size.
TRAIN_COUNT = """
import os, tempfile
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

def world_size():
    return ray.train.get_context().get_world_size()

scaling = ScalingConfig(num_workers=int(os.environ["NUM_WORKERS"]), resources_per_worker={"CPU": 0.1})
trainer = DataParallelTrainer(world_size, scaling_config=scaling, run_config=RunConfig(storage_path=tempfile.mkdtemp()))
print(f"workers={trainer.fit().return_value}")
"""


@pytest.mark.ray
def test_the_patched_manifest_runs_ray_train_with_the_advised_number_of_workers(store, tmp_path, monkeypatch):
    import ray  # only this test needs Ray
    from ray.job_submission import JobStatus, JobSubmissionClient

    from rayjob_advisor.profiling import harness

    (tmp_path / "train_count.py").write_text(TRAIN_COUNT)
    rayjob = deadline_job("enforce", deadline="20s")
    rayjob["spec"].update(
        entrypoint="python train_count.py",
        runtimeEnvYAML=yaml.safe_dump({"working_dir": str(tmp_path), "env_vars": {"NUM_WORKERS": "1"}}),
    )
    after = applied(rayjob, advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW))
    replicas = after["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"]
    assert replicas > 1
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])  # `python` has Ray
    harness.local_token_auth()  # the Job API client sends the token from this process's environment
    context = ray.init(
        num_cpus=1, include_dashboard=True, dashboard_port=free_port(), log_to_driver=False, configure_logging=False
    )
    try:
        client = JobSubmissionClient(f"http://{context.dashboard_url}")
        job = client.submit_job(
            entrypoint=after["spec"]["entrypoint"], runtime_env=yaml.safe_load(after["spec"]["runtimeEnvYAML"])
        )
        deadline = time.monotonic() + 180  # a guard, not a timing: Ray's start-up takes minutes on a busy machine
        while (status := client.get_job_status(job)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            assert time.monotonic() < deadline, "the Ray job did not finish in 180 s"
            time.sleep(0.2)
        logs = client.get_job_logs(job)
    finally:
        ray.shutdown()
    assert status == JobStatus.SUCCEEDED, logs[-2000:]
    assert f"workers={replicas}\n" in logs


@pytest.fixture(scope="module")
def small_store():
    """A profile of 1-2 workers only: a plan for more lies beyond what it measured."""
    return fitted_store([run for run in synthetic_observations(repeats=2) if run.workers <= 2])


def test_enforce_does_not_resize_beyond_the_reach_the_profile_can_vouch_for(small_store):
    rayjob = deadline_job("enforce", deadline="20s")
    advice = advise(rayjob, small_store, policy=POLICY, may_resize=True, now=NOW)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert advice.resized and plan["replicas"] > 2  # the contrast: up to 2x the 2 measured workers, it resizes
    narrow = Policy(max_extrapolation=1.0)
    advice = advise(rayjob, small_store, policy=narrow, may_resize=True, now=NOW)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert not advice.resized and applied(rayjob, advice)["spec"] == rayjob["spec"] and plan["replicas"] > 2
    assert plan["reason"].endswith(
        f"; not resized: its {plan['replicas']} workers are {plan['replicas'] / 2:.3g}x the most the profile "
        "measured (2); enforce resizes up to 1x"
    )
    (message,) = advice.messages
    assert message.reason == "NotResized" and message.warning


def test_by_default_enforce_resizes_no_further_than_twice_the_profiled_workers():
    """2x is as far as the held-out accuracy figures show the bound holding (``runtime.RELIABLE_EXTRAPOLATION``): a
    plan of 3 workers from a profile of one stays a recommendation, which the 4x allowed until 2026-12-07 resized."""
    one_worker = fitted_store([run for run in synthetic_observations(repeats=2) if run.workers == 1])
    rayjob = deadline_job("enforce", deadline="30s")
    advice = advise(rayjob, one_worker, policy=POLICY, may_resize=True, now=NOW)
    plan = json.loads(notes_of(advice)[ann.RECOMMENDATION])
    assert plan["replicas"] == 3 and not advice.resized
    assert plan["reason"].endswith("; not resized: its 3 workers are 3x the most the profile measured (1); enforce "
                                   "resizes up to 2x")  # fmt: skip
    assert advise(rayjob, one_worker, policy=Policy(max_extrapolation=4.0), may_resize=True, now=NOW).resized


def test_a_job_beyond_the_profile_says_how_far_under_assumed(small_store):
    rayjob = deadline_job("recommend", deadline="6h", replicas=4)
    shown = json.loads(notes_of(advise(rayjob, small_store, policy=POLICY, may_resize=True, now=NOW))[ann.PREDICTION])
    # its global batch of 64 over 4 workers is 16 each: half the smallest per-worker batch the profile ran
    assert shown["assumed"]["extrapolation"] == (
        "2x the most profiled workers; 1/2 of the smallest profiled per-worker batch"
    )
    inside = deadline_job("recommend", deadline="6h", replicas=2)
    shown = json.loads(notes_of(advise(inside, small_store, policy=POLICY, may_resize=True, now=NOW))[ann.PREDICTION])
    assert "extrapolation" not in shown["assumed"]


def cluster_job() -> tuple[dict, dict, dict]:
    """(a clusterSelector RayJob, the RayCluster it names, the same job with that cluster's spec in it)."""
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128", ann.DEADLINE: "14s",
             ann.MODE: "enforce", ann.WORKERS_FROM: "cluster", ann.EPOCHS: "1"}  # fmt: skip
    own = make_rayjob(annotations=notes, groups=[worker_group(replicas=4, maxReplicas=8)])
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared", "namespace": "default"},
               "spec": own["spec"]["rayClusterSpec"]}  # fmt: skip
    selected = json.loads(json.dumps(own))
    del selected["spec"]["rayClusterSpec"]
    selected["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    return selected, cluster, own


def test_a_cluster_selector_job_is_predicted_from_its_clusters_groups_and_never_resized(store):
    selected, cluster, own = cluster_job()
    mine = advise(own, store, policy=POLICY, may_resize=True, now=NOW)
    theirs = advise(selected, store, policy=POLICY, may_resize=True, now=NOW, cluster=cluster)
    assert mine.resized and theirs.error is None and not theirs.resized and theirs.p50 == mine.p50
    prediction = json.loads(notes_of(theirs)[ann.PREDICTION])
    assert prediction["assumed"]["cluster"] == "shared" and prediction["features"]["workers"] == 4
    assert "spec" not in theirs.patch  # the shared cluster, and the job, keep their size
    recommendation = json.loads(notes_of(theirs)[ann.RECOMMENDATION])  # advice only: the size the cluster would need
    planned = json.loads(notes_of(mine)[ann.RECOMMENDATION])["replicas"]
    assert (recommendation["replicas"], recommendation["currentReplicas"]) == (planned, 4) and planned != 4
    assert recommendation["reason"].startswith(f"this cluster would need {planned} workers")
    assert "not resized: the job runs on the existing RayCluster 'shared'" in recommendation["reason"]
    assert theirs.patch["metadata"]["labels"][ann.DEADLINE_STATUS] == "at-risk"  # at the size it has
    assert "autoscaling" not in prediction["assumed"]
    without = advise(selected, store, policy=POLICY, may_resize=True, now=NOW)
    assert "an existing RayCluster ('shared')" in without.error and "--cluster" in without.error


def test_an_autoscaled_cluster_is_an_assumption_of_the_prediction(store):
    selected, cluster, _ = cluster_job()
    cluster["spec"]["enableInTreeAutoscaling"] = True
    advice = advise(selected, store, policy=POLICY, may_resize=True, now=NOW, cluster=cluster)
    assumed = json.loads(notes_of(advice)[ann.PREDICTION])["assumed"]
    assert assumed["autoscaling"] == "4 replicas of workers as now; the Ray autoscaler may run 1-8"
    assert "spec" not in advice.patch


def test_a_cluster_is_read_only_for_a_cluster_selector_job(store):
    selected, cluster, own = cluster_job()
    asked = []

    def clusters(namespace: str, name: str) -> dict:
        asked.append((namespace, name))
        return cluster

    read = advise(selected, store, policy=POLICY, may_resize=True, now=NOW, clusters=clusters)
    given = advise(selected, store, policy=POLICY, may_resize=True, now=NOW, cluster=cluster)
    advise(own, store, policy=POLICY, may_resize=True, now=NOW, clusters=clusters)
    assert asked == [("default", "shared")] and read == given


def test_a_wrong_typed_cluster_is_named(store):
    selected, cluster, _ = cluster_job()
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = "4"
    advice = advise(selected, store, policy=POLICY, may_resize=True, now=NOW, cluster=cluster)
    assert advice.error == "RayCluster 'shared': spec.workerGroupSpecs.0.replicas: Input should be a valid integer"
