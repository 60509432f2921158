"""advise(): what the operator writes on a RayJob, for good and for bad input."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from conftest import make_rayjob, sample_rayjobs, synthetic_observations
from rayjob_advisor import annotations as ann
from rayjob_advisor import profiles
from rayjob_advisor.config import OperatorConfig, load_config
from rayjob_advisor.prediction import ProfileNotReady, advise

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def store():
    store = profiles.ProfileStore(shipped=False)
    store.put("default", "synthetic", "synthetic", synthetic_observations(), []).fit()
    return store


def test_a_good_job_gets_the_prediction_annotations_and_its_error_cleared(store):
    rayjob = make_rayjob(annotations={ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "8000", ann.BATCH_SIZE: "128"})
    advice = advise(rayjob, store, now=NOW)
    assert advice.warning is None and advice.annotations[ann.ERROR] is None
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
    assert message in advice.warning and advice.annotations == {ann.ERROR: advice.warning}


def test_mode_off_by_annotation_or_namespace_label(store):
    notes = {ann.WORKLOAD: "synthetic", ann.DATASET_SIZE: "10"}
    assert advise(make_rayjob(annotations={**notes, ann.MODE: "off"}), store) is None
    assert advise(make_rayjob(annotations=notes), store, namespace_labels={ann.MODE: "off"}) is None


def test_default_workload_applies_to_jobs_that_name_none(store):
    advice = advise(make_rayjob(annotations={ann.DATASET_SIZE: "8000"}), store, default_workload="synthetic", now=NOW)
    assert advice.warning is None


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
        assert "spec.clusterSelector" in advice.warning
    else:
        assert advice.warning is None and ann.PREDICTION in advice.annotations


def test_config_from_environment_and_flags():
    environ = {"RAYJOB_ADVISOR_NAMESPACES": "a, b", "RAYJOB_ADVISOR_LOG_FORMAT": "json", "RAYJOB_ADVISOR_LIVENESS_PORT": "9000"}
    config = load_config({"liveness_port": 0, "namespaces": None}, environ)
    assert config == OperatorConfig(namespaces=("a", "b"), log_format="json", liveness_port=0)
    with pytest.raises(ValueError, match="log_format"):
        load_config({"log_format": "xml"}, {})
