"""advise(): what the operator writes on a RayJob, for good and for bad input."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor import profiles
from rayjob_advisor.config import OperatorConfig, load_config
from rayjob_advisor.prediction import ProfileNotReady, advise, resized_groups
from rayjob_advisor_testkit.profiles import synthetic_observations
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob, make_rayjob, sample_rayjobs, worker_group

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def store():
    store = profiles.ProfileStore(shipped=False)
    store.put("default", "synthetic", "synthetic", synthetic_observations(), []).fit()
    return store


def test_a_good_job_gets_the_prediction_annotations_and_its_error_cleared(store):
    rayjob = make_rayjob(annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128"})
    advice = advise(rayjob, store, now=NOW)
    assert advice.error is None and advice.warnings == () and advice.annotations[ann.ERROR] is None
    prediction = json.loads(advice.annotations[ann.PREDICTION])
    assert prediction["profile"] == "default/synthetic" and prediction["time"] == "2026-12-02T12:00:00Z"
    assert float(advice.annotations[ann.PREDICTED_RUNTIME_SECONDS]) == pytest.approx(prediction["p50"], abs=0.05)


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "x"}, "dataset-size='x'"),
        ({ann.WORKLOAD: "synthetic"}, "rayjob-advisor.io/dataset-size is missing"),
        ({ann.DATASET_SIZE: "10"}, "no workload: set the rayjob-advisor.io/workload annotation or label"),
        ({ann.WORKLOAD: "bert", ann.DATASET_SIZE: "10"}, "no RuntimeProfile for workload 'bert'"),
        ({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10", ann.SCALE_GROUP: "gpu"}, "no worker group of that name"),
    ],
)
def test_bad_input_becomes_the_error_annotation_and_a_warning(store, notes, message):
    advice = advise(make_rayjob(annotations=notes), store, now=NOW)
    assert message in advice.error and advice.annotations == {ann.ERROR: advice.error}
    assert advice.warnings == (f"rayjob-advisor: {advice.error}",) and advice.worker_groups is None


def test_mode_off_by_annotation_or_namespace_label(store):
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10"}
    assert advise(make_rayjob(annotations={**notes, ann.MODE: "off"}), store) is None
    assert advise(make_rayjob(annotations=notes), store, namespace_labels={ann.MODE: "off"}) is None


def test_default_workload_applies_to_jobs_that_name_none(store):
    config = OperatorConfig(default_workload="synthetic")
    advice = advise(make_rayjob(annotations={ann.DATASET_SIZE: "8000"}), store, config=config, now=NOW)
    assert advice.error is None


def test_a_profile_still_being_fitted_is_not_an_error():
    store = profiles.ProfileStore(shipped=False)
    store.put("default", "p", "synthetic", synthetic_observations(), [])
    with pytest.raises(ProfileNotReady, match="default/synthetic is being fitted"):
        advise(make_rayjob(annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10"}), store)


@pytest.mark.parametrize(("name", "rayjob"), sample_rayjobs(), ids=[n for n, _ in sample_rayjobs()])
def test_every_kuberay_sample_gets_a_prediction_or_a_clear_error(store, name, rayjob):
    rayjob = json.loads(json.dumps(rayjob))
    rayjob["metadata"].setdefault("annotations", {}).update({ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000"})
    advice = advise(rayjob, store, now=NOW)
    if name == "ray-job.use-existing-raycluster.yaml":
        assert "spec.clusterSelector" in advice.error
    else:
        assert advice.error is None and ann.PREDICTION in advice.annotations


def test_config_from_environment_and_flags():
    environ = {"RAYJOB_ADVISOR_NAMESPACES": "a, b", "RAYJOB_ADVISOR_LOG_FORMAT": "json", "RAYJOB_ADVISOR_LIVENESS_PORT": "9000"}
    config = load_config({"liveness_port": 0, "namespaces": None}, environ)
    assert config == OperatorConfig(namespaces=("a", "b"), log_format="json", liveness_port=0)
    with pytest.raises(ValueError, match="log_format"):
        load_config({"log_format": "xml"}, {})


def deadline_job(mode: str, deadline: str = "30s", replicas: int = 1) -> dict:
    return make_rayjob(
        annotations={
            ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64",
            ann.DEADLINE: deadline, ann.MODE: mode,
        },
        groups=[worker_group(replicas=replicas, minReplicas=1, maxReplicas=4)],
    )  # fmt: skip


def test_recommend_mode_annotates_the_plan_and_explains_it(store):
    advice = advise(deadline_job("recommend"), store, now=NOW)
    plan = json.loads(advice.annotations[ann.RECOMMENDATION])
    assert advice.worker_groups is None and ann.ORIGINAL_REPLICAS not in advice.annotations
    assert advice.warnings == (f"rayjob-advisor: recommends {plan['replicas']} replicas: {plan['reason']}",)


def test_enforce_mode_resizes_the_scaled_group_within_widened_bounds(store):
    rayjob = deadline_job("enforce", deadline="20s")
    advice = advise(rayjob, store, now=NOW)
    plan = json.loads(advice.annotations[ann.RECOMMENDATION])
    assert plan["replicas"] > 1  # 16000 samples on one worker take longer than 20 s in the synthetic law
    (group,) = advice.worker_groups
    assert group["replicas"] == plan["replicas"]
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert ann.ORIGINAL_REPLICAS not in advice.annotations  # written only where the groups are applied
    assert json.loads(advice.resize_annotations()[ann.ORIGINAL_REPLICAS]) == {
        "groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 4,
    }  # fmt: skip
    assert advice.warnings[0].startswith(f"rayjob-advisor: set workers replicas 1 -> {plan['replicas']}: ")
    rewritten = json.loads(json.dumps(rayjob))
    rewritten["spec"]["rayClusterSpec"]["workerGroupSpecs"] = advice.worker_groups
    assert_valid_rayjob(rewritten)


def test_resizing_widens_min_and_max_only_as_needed():
    rayjob = make_rayjob(groups=[worker_group("a", replicas=1), worker_group("b", replicas=2, minReplicas=2, maxReplicas=3)])
    groups, original = resized_groups(rayjob, 1, 6)
    assert [(g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in groups] == [(1, 1, 8), (6, 2, 6)]
    assert original == {"groupName": "b", "replicas": 2, "minReplicas": 2, "maxReplicas": 3}
    groups, _ = resized_groups(rayjob, 1, 1)
    assert (groups[1]["replicas"], groups[1]["minReplicas"], groups[1]["maxReplicas"]) == (1, 1, 3)


def test_enforce_never_resizes_groups_the_autoscaler_owns(store):
    rayjob = deadline_job("enforce", deadline="20s")
    rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    advice = advise(rayjob, store, now=NOW)
    plan = json.loads(advice.annotations[ann.RECOMMENDATION])
    assert advice.worker_groups is None and plan["replicas"] == plan["currentReplicas"] == 1
