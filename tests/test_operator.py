"""The real kopf operator against the strict emulator: predict, warn, learn once, survive restarts and API errors."""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import datetime as dt
import json
import logging
import os
import platform
import re
import signal
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager

import numpy as np
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rayjob_advisor import __version__, application
from rayjob_advisor import contract as ann
from rayjob_advisor.cli.verbs import main as cli_main
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.kube.metrics import MAX_WORKLOAD_LABELS, OTHER, Metrics
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import Observation, write_observations
from rayjob_advisor.profiles import history
from rayjob_advisor_testkit import emulator
from rayjob_advisor_testkit.advisor import QUICK_REFITS, RunningAdvisor, free_port, running_advisor
from rayjob_advisor_testkit.lifecycle import finish, learned, notes, wait_for_note
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, small_profile_runs, sync_sgd_time
from rayjob_advisor_testkit.profiles import profiled_rayjob as rayjob
from rayjob_advisor_testkit.rayjobs import make_rayjob, sample_rayjobs, worker_group
from rayjob_advisor_testkit.resources import AdvisorEmulator

OUTPUT_KEYS = {ann.PREDICTED_RUNTIME, ann.PREDICTED_RUNTIME_SECONDS, ann.PREDICTION}


def assert_no_invalid_writes(api: AdvisorEmulator) -> None:
    assert not [v for v in api.violations if v.rejected], "the operator wrote an invalid object"


@pytest.fixture
def api() -> Iterator[AdvisorEmulator]:
    with AdvisorEmulator() as emulator:
        emulator.create(profile_manifest())
        yield emulator
        assert_no_invalid_writes(emulator)


def operator(api: AdvisorEmulator | None = None, **config: object) -> AbstractContextManager[RunningAdvisor]:
    """A fresh operator run (own memo, so a restart forgets everything in memory); on a new emulator unless ``api``."""
    return running_advisor(api=api, **{**QUICK_REFITS, **config})


@pytest.fixture(scope="module")
def live() -> Iterator[RunningAdvisor]:
    """One operator for the tests that need no fresh one: they only predict and plan, each for jobs of its own names.

    Fitting the profile dominates an operator's start; sharing one saves a fit per test.
    """
    with operator(objects=[profile_manifest()]) as advisor:
        yield advisor
        assert_no_invalid_writes(advisor.api)


def test_a_created_rayjob_gets_its_prediction_and_no_finalizer(live):
    api = live.api
    api.create(rayjob("train"))
    wait_for_note(api, "train", ann.PREDICTION)
    stored = api.get("rayjobs", "default", "train")
    assert set(stored["metadata"]["annotations"]) >= OUTPUT_KEYS
    prediction = json.loads(stored["metadata"]["annotations"][ann.PREDICTION])
    assert prediction["profile"] == f"default/{WORKLOAD}" and prediction["features"]["workers"] == 4
    assert ann.parse_duration(stored["metadata"]["annotations"][ann.PREDICTED_RUNTIME]) > dt.timedelta(0)  # Go syntax
    assert not stored["metadata"].get("finalizers")
    kopf_keys = [k for k in stored["metadata"]["annotations"] if "kopf" in k or "last-handled" in k]
    assert kopf_keys and all(k.startswith("rayjob-advisor.io/") for k in kopf_keys)
    model = api.get("runtimeprofiles", "default", WORKLOAD)["status"]["model"]
    assert model["samples"] == 32 and model["name"] and 0 <= model["cvError"] < 0.5


def test_changed_input_annotations_are_predicted_again(live):
    api = live.api
    api.create(rayjob("retrain"))
    first = float(wait_for_note(api, "retrain", ann.PREDICTED_RUNTIME_SECONDS))
    api.patch("rayjobs", "default", "retrain", {"metadata": {"annotations": {ann.DATASET_SIZE: "16000"}}})
    second = api.wait_until(
        lambda: float(notes(api, "retrain")[ann.PREDICTED_RUNTIME_SECONDS]) > 1.5 * first or None, 30
    )
    assert second


def test_a_workload_without_a_profile_gets_a_note_and_a_normal_event(live):
    api = live.api
    api.create(rayjob("mystery", **{ann.WORKLOAD: "bert"}))
    note = wait_for_note(api, "mystery", ann.NOTE)
    events = api.wait_until(lambda: [e for e in api.objects("events") if e["involvedObject"]["name"] == "mystery"], 30)
    assert "no profile yet for workload 'bert'" in note
    assert ann.PREDICTION not in notes(api, "mystery") and ann.ERROR not in notes(api, "mystery")
    assert [(e["type"], e["reason"]) for e in events] == [("Normal", "NoProfileYet")]
    assert note in events[0]["message"]


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        ("huge-dataset", {ann.DATASET_SIZE: "1" + "0" * 400}, "Input should be less than or equal to 1000000000000"),
        ("far-deadline", {ann.DEADLINE: "2099-01-01T00:00:00Z"}, "more than 8784h from now"),
        ("many-epochs", {ann.EPOCHS: "99999999"}, "epochs='99999999': Input should be less than or equal to 1000000"),
    ],
)
def test_out_of_range_inputs_are_reported_once_and_never_retried(live, name, bad, message):
    api = live.api
    api.create(rayjob(name, **{ann.MODE: "enforce", **bad}))
    error = wait_for_note(api, name, ann.ERROR)
    assert message in error and ann.PREDICTION not in notes(api, name)
    time.sleep(1.5)  # kopf would have retried every second by now
    events = [e for e in api.objects("events") if e["involvedObject"]["name"] == name]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "CannotPredict")] and error in events[0][
        "message"
    ]
    assert len(api.requests("PATCH", "rayjobs", name=name)) <= 2  # the error, kopf's own record


def test_mode_off_leaves_the_job_alone(live):
    api = live.api
    api.create_namespace("quiet", labels={ann.MODE: "off"})
    api.wait_until(lambda: "quiet" in live.memo.namespace_labels)  # else the job may come first
    quiet = rayjob("train")
    quiet["metadata"]["namespace"] = "quiet"
    api.create(quiet)
    api.create(rayjob("watched"))
    wait_for_note(api, "watched", ann.PREDICTION)
    assert not {k for k in notes(api, "train", "quiet") if k in OUTPUT_KEYS | {ann.ERROR}}


def test_a_failure_inside_advise_is_reported_on_the_job_once_and_never_retried(live, monkeypatch):
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    api = live.api
    monkeypatch.setattr(application, "advise", broken)
    api.create(rayjob("broken-advice"))
    error = wait_for_note(api, "broken-advice", ann.ERROR)
    assert error == "could not predict: RuntimeError: boom"
    time.sleep(1.5)  # kopf would have retried every second by now
    events = [e for e in api.objects("events") if e["involvedObject"]["name"] == "broken-advice"]
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "CannotPredict")]
    assert len(api.requests("PATCH", "rayjobs", name="broken-advice")) <= 2  # the error, kopf's own record


def test_completion_is_learned_once_and_refits_the_model(api):
    with operator(api):
        api.create(rayjob("train"))
        predicted = float(wait_for_note(api, "train", ann.PREDICTED_RUNTIME_SECONDS))
        finish(api, "train", minutes=10)
        actual = wait_for_note(api, "train", ann.ACTUAL_RUNTIME_SECONDS)
        api.wait_until(lambda: api.get("runtimeprofiles", "default", WORKLOAD)["status"]["model"]["samples"] == 33, 60)
    assert float(actual) == 600.0
    assert float(notes(api, "train")[ann.PREDICTION_ERROR]) == pytest.approx(predicted / 600 - 1, abs=1e-3)
    (run,) = learned(api)
    uid = api.get("rayjobs", "default", "train")["metadata"]["uid"]
    assert run["source"] == f"rayjob:{uid}:0" and run["executionSeconds"] == 600.0 and run["workers"] == 4
    assert run["startupSeconds"] == pytest.approx(30, abs=1)
    reasons = [e["reason"] for e in api.objects("events") if e["involvedObject"]["name"] == "train"]
    assert reasons == ["Learned"]


@pytest.mark.parametrize(
    ("shared", "watched"),
    [((), ()), (("team-a",), ()), (("team-a",), ("team-b",))],
    ids=["not shared", "shared", "shared and watched only there"],
)
def test_a_teams_profile_serves_another_namespace_only_when_shared(shared, watched):
    with AdvisorEmulator() as api:
        for namespace in ("team-a", "team-b"):
            api.create_namespace(namespace)
        theirs = profile_manifest()
        theirs["metadata"]["namespace"] = "team-a"
        api.create(theirs)
        job = rayjob("train")
        job["metadata"]["namespace"] = "team-b"
        with operator(api, shared_profile_namespaces=shared, namespaces=watched) as advisor:
            advisor.wait_for_model(WORKLOAD, "team-a")  # fitted, and still no other team's
            api.create(job)
            if not shared:
                note = api.wait_until(lambda: notes(api, "train", "team-b").get(ann.NOTE), 30)
                assert "no profile yet for workload 'synthetic': no RuntimeProfile in namespace 'team-b'" in note
                assert ann.PREDICTION not in notes(api, "train", "team-b")
                assert_no_invalid_writes(api)
                return
            prediction = api.wait_until(lambda: notes(api, "train", "team-b").get(ann.PREDICTION), 30)
            assert json.loads(prediction)["profile"] == f"team-a/{WORKLOAD}"
            finish(api, "train", namespace="team-b")  # learned into team-b's own copy, never into team-a's
            api.wait_until(lambda: notes(api, "train", "team-b").get(ann.ACTUAL_RUNTIME_SECONDS), 30)

            def refitted() -> list[dict]:
                profiles = api.objects("runtimeprofiles", "team-b")
                return [p for p in profiles if ((p.get("status") or {}).get("model") or {}).get("samples") == 33]

            (profile,) = api.wait_until(refitted, 60)  # its own profile: the shared runs and its job's
        assert len(profile["spec"]["observations"]) == 32 and len(profile["status"]["observations"]) == 1
        assert not (api.get("runtimeprofiles", "team-a", WORKLOAD).get("status") or {}).get("observations")
        assert_no_invalid_writes(api)


def test_failed_jobs_are_not_learned_from(live):
    api = live.api
    api.create(rayjob("broken"))
    wait_for_note(api, "broken", ann.PREDICTION)
    finish(api, "broken", deployment="Failed", job_status="FAILED")
    api.create(rayjob("after"))  # handled after the failure: the failure was seen by then
    wait_for_note(api, "after", ann.PREDICTION)
    assert learned(api) == [] and ann.ACTUAL_RUNTIME_SECONDS not in notes(api, "broken")


def test_a_restart_processes_nothing_twice_and_loses_nothing(api):
    with operator(api):
        api.create(rayjob("first"))
        wait_for_note(api, "first", ann.PREDICTION)
    first_prediction = notes(api, "first")[ann.PREDICTION]
    # While the operator is down: the first job finishes, a second is created.
    finish(api, "first", minutes=5)
    api.create(rayjob("second"))
    with operator(api):
        wait_for_note(api, "second", ann.PREDICTION)
        wait_for_note(api, "first", ann.ACTUAL_RUNTIME_SECONDS)
    with operator(api):  # and once more: nothing left to do
        api.create(rayjob("third"))
        wait_for_note(api, "third", ann.PREDICTION)
    assert [run["executionSeconds"] for run in learned(api)] == [300.0]
    assert notes(api, "first")[ann.PREDICTION] == first_prediction  # a running/finished job is not re-predicted
    patches = api.requests("PATCH", "rayjobs", name="first")
    learned_patches = [r for r in patches if ann.ACTUAL_RUNTIME_SECONDS in json.dumps(r.body)]
    assert len(learned_patches) == 1


def test_conflicts_and_server_errors_are_retried(api):
    with operator(api):
        api.inject_fault("PATCH", "rayjobs", name="flaky", status=500, times=2)
        api.create(rayjob("flaky"))
        wait_for_note(api, "flaky", ann.PREDICTION)
        api.inject_fault("PATCH", "runtimeprofiles", subresource="status", status=409, times=2)
        api.inject_fault("GET", "runtimeprofiles", name=WORKLOAD, status=500, times=1)
        finish(api, "flaky", minutes=7)
        wait_for_note(api, "flaky", ann.ACTUAL_RUNTIME_SECONDS)
    assert [run["executionSeconds"] for run in learned(api)] == [420.0]
    statuses = [r.status for r in api.requests("PATCH", "rayjobs", name="flaky")]
    assert statuses[:2] == [500, 500] and 200 in statuses


def test_every_kuberay_sample_gets_a_prediction_or_a_clear_error(live):
    api = live.api
    samples = []
    for name, body in sample_rayjobs():
        body = copy.deepcopy(body)
        body["metadata"]["namespace"] = "default"
        body["metadata"]["name"] = re.sub(r"[^a-z0-9-]+", "-", name.lower().removesuffix(".yaml"))[:63].strip("-")
        body["metadata"].setdefault("annotations", {}).update({ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "8000"})
        samples.append(body)
    for body in samples:
        api.create(body)
    names = [b["metadata"]["name"] for b in samples]
    api.wait_until(lambda: all({ann.PREDICTION, ann.ERROR} & set(notes(api, n)) for n in names), 120)
    errors = {n: notes(api, n)[ann.ERROR] for n in names if ann.ERROR in notes(api, n)}
    assert errors == {
        "ray-job-use-existing-raycluster": "RayCluster 'ray-cluster-kuberay' in namespace 'default' "
        "(spec.clusterSelector) does not exist: the job runs on it, so its size is there"
    }


def test_a_cluster_selector_job_is_predicted_from_its_raycluster_as_offline_and_never_resized(live, capsys, tmp_path):
    api = live.api
    own = rayjob("own-size", **{ann.DEADLINE: "2m", ann.MODE: "enforce", ann.EPOCHS: "1", ann.WORKERS_FROM: "cluster"})
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared", "namespace": "default"},
               "spec": copy.deepcopy(own["spec"]["rayClusterSpec"])}  # fmt: skip
    selected = copy.deepcopy(own)
    selected["metadata"]["name"] = "on-shared"
    del selected["spec"]["rayClusterSpec"]
    selected["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    missing = copy.deepcopy(selected)
    missing["metadata"]["name"] = "on-missing"
    missing["spec"]["clusterSelector"] = {"ray.io/cluster": "gone"}
    before = api.create(cluster)
    api.inject_fault("GET", "rayclusters", name="shared", status=503, times=6)  # past kubeapi's retries: kopf's
    created = api.create(selected)
    api.create(missing)
    prediction = json.loads(wait_for_note(api, "on-shared", ann.PREDICTION))
    statuses = [r.status for r in api.requests("GET", "rayclusters", name="shared")]
    assert statuses[:6] == [503] * 6 and statuses[-1] == 200
    assert prediction["assumed"]["cluster"] == "shared" and prediction["features"]["workers"] == 4
    stored = api.get("rayjobs", "default", "on-shared")
    assert stored["spec"] == created["spec"]
    assert ann.ORIGINAL_REPLICAS not in stored["metadata"]["annotations"]  # never resized, nor its cluster
    assert (
        api.get("rayclusters", "default", "shared")["metadata"]["resourceVersion"]
        == before["metadata"]["resourceVersion"]
    )
    recommendation = json.loads(stored["metadata"]["annotations"][ann.RECOMMENDATION])
    assert recommendation["reason"].startswith(f"this cluster would need {recommendation['replicas']} workers")
    error = wait_for_note(api, "on-missing", ann.ERROR)
    assert error == "RayCluster 'gone' in namespace 'default' (spec.clusterSelector) does not exist: the job runs on " \
        "it, so its size is there"  # fmt: skip
    # Offline, from the same runs and the RayCluster as stored: the same numbers.
    files = {"job": selected, "cluster": api.get("rayclusters", "default", "shared")}
    for name, manifest in files.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(manifest))
    write_observations(tmp_path / "runs.csv", small_profile_runs())
    capsys.readouterr()
    argv = ["predict", "-f", "job.yaml", "--cluster", "cluster.yaml", "--data", "runs.csv", "--format", "json"]
    assert cli_main([str(tmp_path / a) if a.endswith((".yaml", ".csv")) else a for a in argv]) == 0
    offline = json.loads(capsys.readouterr().out)["prediction"]
    assert (offline["p50"], offline["upper"], offline["assumed"]) == (
        prediction["p50"],
        prediction["upper"],
        prediction["assumed"],
    )


def test_the_run_command_serves_liveness_metrics_and_logs_json(api, tmp_path):
    port, metrics_port = free_port(), free_port()
    environ = {
        **os.environ,
        "RAYJOB_ADVISOR_SHIPPED_PROFILES": "false",
        "RAYJOB_ADVISOR_REFIT_INTERVAL_SECONDS": "0.2",
        "RAYJOB_ADVISOR_METRICS_PORT": str(metrics_port),
    }
    command = [sys.executable, "-m", "rayjob_advisor.cli", "run", "--kube-api", api.url,
               "--liveness-port", str(port), "--log-format", "json"]  # fmt: skip
    log = (tmp_path / "operator.log").open("w+")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environ)
    try:
        api.create(rayjob("train"))
        wait_for_note(api, "train", ann.PREDICTION, timeout=90)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
        assert any(name == "rayjob_advisor_build_info" for name, _ in scrape(metrics_port))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    log.seek(0)
    lines = [line for line in log.read().splitlines() if line.strip()]
    assert lines and all(json.loads(line)["message"] is not None for line in lines)


def test_an_unreachable_api_server_is_one_log_line_a_try_at_start_up(tmp_path):
    """Issue 22: with no API server to answer, start-up logged two chained tracebacks per try (8 in 25 s)."""
    with AdvisorEmulator() as gone:
        url = gone.url  # stopped when the block ends: nothing answers there any more
    command = [sys.executable, "-m", "rayjob_advisor.cli", "run", "--kube-api", url, "--liveness-port", "0",
               "--log-format", "json"]  # fmt: skip
    log_file = tmp_path / "operator.log"
    with log_file.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
        try:
            deadline = time.monotonic() + 60
            while log_file.read_text().count("failed temporarily") < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    records = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    tries = [r["message"] for r in records if "failed temporarily" in r["message"]]
    assert len(tries) >= 2 and all("start-up could not read namespaces and RuntimeProfiles: " in t for t in tries)
    assert not [r for r in records if "exc_info" in r or "Traceback" in json.dumps(r)]


def held_rayjob(name: str, **notes: str) -> dict:
    body = make_rayjob(
        annotations={
            ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", ann.EPOCHS: "1",
            ann.MODE: "enforce", ann.DEADLINE: "60s", **notes,
        },
        groups=[worker_group(replicas=1, minReplicas=1, maxReplicas=4)],
        suspend=True,
        runtimeEnvYAML="env_vars: {NUM_WORKERS: '1'}",
    )  # fmt: skip
    body["metadata"]["name"] = name
    return body


ADMITTED_HELD = {ann.RELEASE: "true", ann.HELD: "true"}
"""A job created suspended asking for release, as the webhook admitted it (the emulator calls no webhook)."""


def group_of(api: AdvisorEmulator, name: str) -> dict:
    return api.get("rayjobs", "default", name)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def test_a_suspended_job_asking_for_release_is_planned_resized_and_unsuspended(live):
    api = live.api
    api.create(held_rayjob("held", **ADMITTED_HELD))
    api.wait_until(lambda: api.get("rayjobs", "default", "held")["spec"].get("suspend") is False, 60)
    plan = json.loads(notes(api, "held")[ann.RECOMMENDATION])
    group = group_of(api, "held")
    assert plan["replicas"] > 1 and group["replicas"] == plan["replicas"]
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert json.loads(notes(api, "held")[ann.ORIGINAL_REPLICAS])["replicas"] == 1
    reasons = [e["reason"] for e in api.objects("events") if e["involvedObject"]["name"] == "held"]
    assert reasons == ["Resized"]


def test_release_is_honoured_only_on_a_job_the_webhook_admitted_held_and_never_on_a_kueue_job(live):
    """A tenant who adds release to a job someone else suspended (an admin, a policy) gets nothing; nor one who
    forges the mark on a job of a Kueue queue (whose suspend is Kueue's to lift)."""
    api = live.api
    api.create(held_rayjob("unmarked", **{ann.RELEASE: "true"}))  # release without the webhook's mark
    queued = held_rayjob("queued", **ADMITTED_HELD)
    queued["metadata"]["labels"] = {ann.KUEUE_QUEUE: "team-a"}
    api.create(queued)
    api.create(held_rayjob("marker", **ADMITTED_HELD))
    api.wait_until(lambda: api.get("rayjobs", "default", "marker")["spec"].get("suspend") is False, 60)
    for name in ("unmarked", "queued"):
        api.wait_until(lambda name=name: ann.RECOMMENDATION in notes(api, name), 30)  # advised, but not released
        assert api.get("rayjobs", "default", name)["spec"]["suspend"] is True
        assert group_of(api, name)["replicas"] == 1  # nor resized: KubeRay may have built its cluster already
    assert ann.HELD not in notes(api, "marker")  # released: a later suspension stays


def test_a_kueue_gated_job_loses_only_our_gate_and_stays_suspended(live):
    api = live.api
    gates_value = "example.com/quota,rayjob-advisor.io/planner"
    api.create(held_rayjob("gated", **{ann.KUEUE_GATES: gates_value}))
    api.wait_until(lambda: notes(api, "gated").get(ann.KUEUE_GATES) == "example.com/quota", 60)
    assert api.get("rayjobs", "default", "gated")["spec"]["suspend"] is True  # Kueue's business
    assert group_of(api, "gated")["replicas"] == json.loads(notes(api, "gated")[ann.RECOMMENDATION])["replicas"] > 1


def test_held_jobs_with_bad_input_are_released_unchanged(live):
    api = live.api
    api.create(held_rayjob("bad-input", **ADMITTED_HELD, **{ann.DATASET_SIZE: "many"}))
    api.wait_until(lambda: api.get("rayjobs", "default", "bad-input")["spec"].get("suspend") is False, 60)
    assert ann.ERROR in notes(api, "bad-input") and group_of(api, "bad-input")["replicas"] == 1


def test_jobs_not_held_and_running_jobs_are_never_resized(api):
    running = held_rayjob("running", **ADMITTED_HELD)
    api.create(running)
    api.set_rayjob_status("default", "running", deployment_status="Running", job_status="RUNNING")
    free = held_rayjob("free")
    free["spec"]["suspend"] = False
    with operator(api):
        api.create(free)
        wait_for_note(api, "free", ann.RECOMMENDATION)
        api.create(rayjob("marker"))
        wait_for_note(api, "marker", ann.PREDICTION)
    assert group_of(api, "free")["replicas"] == 1 and ann.ORIGINAL_REPLICAS not in notes(api, "free")
    assert group_of(api, "running")["replicas"] == 1 and ann.PREDICTION not in notes(api, "running")


def test_deadline_outcomes_are_reported_at_completion(api):
    with operator(api):
        api.create(rayjob("early", **{ann.DEADLINE: "1h"}))
        api.create(rayjob("late", **{ann.DEADLINE: "5m"}))

        def reasons(name):
            return {e["reason"]: e["type"] for e in api.objects("events") if e["involvedObject"]["name"] == name}

        for name in ("early", "late"):
            wait_for_note(api, name, ann.PREDICTION)
            finish(api, name, minutes=10)
            api.wait_until(lambda name=name: {"DeadlineMet", "DeadlineMissed"} & set(reasons(name)), 30)
    assert reasons("early")["DeadlineMet"] == "Normal"
    assert reasons("late")["DeadlineMissed"] == "Warning"


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample on /metrics, by name and sorted labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_follow_a_job_from_prediction_to_outcome(api):
    port = free_port()
    with operator(api, metrics_port=port, metrics_job_ttl_seconds=2):
        api.create(rayjob("train", **{ann.DEADLINE: "1h"}))
        predicted = float(wait_for_note(api, "train", ann.PREDICTED_RUNTIME_SECONDS))
        api.create(rayjob("mystery", **{ann.SCALE_GROUP: "gpu"}))  # its workload resolved by now: labelled by it
        wait_for_note(api, "mystery", ann.ERROR)
        uid = api.get("rayjobs", "default", "train")["metadata"]["uid"]
        job = (("name", "train"), ("namespace", "default"), ("uid", uid))
        before = scrape(port)
        finish(api, "train", minutes=10)
        wait_for_note(api, "train", ann.ACTUAL_RUNTIME_SECONDS)
        after = scrape(port)
        gone = api.wait_until(lambda: ("rayjob_advisor_actual_runtime_seconds", job) not in scrape(port) or None, 30)
        api.create(rayjob("deleted"))
        wait_for_note(api, "deleted", ann.PREDICTED_RUNTIME_SECONDS)
        deleted = (
            ("name", "deleted"),
            ("namespace", "default"),
            ("uid", api.get("rayjobs", "default", "deleted")["metadata"]["uid"]),
        )
        assert ("rayjob_advisor_predicted_runtime_seconds", deleted) in scrape(port)
        api.delete("rayjobs", "default", "deleted")
        dropped = api.wait_until(
            lambda: ("rayjob_advisor_predicted_runtime_seconds", deleted) not in scrape(port) or None, 30
        )
    assert before[("rayjob_advisor_predicted_runtime_seconds", job)] == pytest.approx(predicted, abs=0.05)
    predicted_total, error_total = (
        ("rayjob_advisor_predictions_total", (("namespace", "default"), ("result", result), ("workload", WORKLOAD)))
        for result in ("predicted", "error")
    )
    assert before[predicted_total] == 1 and before[error_total] == 1
    model = [key for key in before if key[0] == "rayjob_advisor_model_cv_error_ratio"]
    assert [dict(labels)["profile"] for _, labels in model] == [f"default/{WORKLOAD}"]
    assert ("rayjob_advisor_build_info", (("python", platform.python_version()), ("version", __version__))) in before
    assert after[("rayjob_advisor_actual_runtime_seconds", job)] == 600.0
    error = (("namespace", "default"), ("workload", WORKLOAD))
    assert after[("rayjob_advisor_prediction_error_ratio_count", error)] == 1
    assert after[("rayjob_advisor_prediction_error_ratio_sum", error)] == pytest.approx(
        abs(predicted - 600) / 600, abs=1e-3
    )
    assert after.get(("rayjob_advisor_underestimates_total", error), 0) == (1 if predicted < 600 else 0)
    assert after[("rayjob_advisor_deadline_outcomes_total", (("outcome", "met"),))] == 1
    assert gone and dropped  # per-job series expire after the job ends, or is deleted before it ran


def test_an_invalid_profile_is_reported_and_does_not_stop_the_operator(api):
    bad = profile_manifest(small_profile_runs()[:3], workload="broken")
    bad["spec"]["observations"][0]["nodes"] = 99  # more nodes than workers: valid for the schema, not for us
    api.create(bad)
    with operator(api):
        api.create(rayjob("train"))
        wait_for_note(api, "train", ann.PREDICTION)
        events = api.wait_until(
            lambda: [e for e in api.objects("events") if e["involvedObject"]["name"] == "broken"], 30
        )
    assert events[0]["reason"] == "BadProfile" and "cannot exceed workers" in events[0]["message"]


def test_many_learned_runs_keep_the_profile_and_kopfs_diff_base_small_and_reload_the_store(api):
    runs = [
        Observation(workload=WORKLOAD, dataset_size=1000 * (1 + i % 40), workers=1 + i % 4, batch_size=64,
                    execution_seconds=100.0 + i, source=f"rayjob:u-{i}:0")
        for i in range(400)
    ]  # fmt: skip
    with operator(api) as advisor:
        advisor.wait_for_model(WORKLOAD)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # a burst, each run twice: 0 lost, 0 doubled
            appended = list(pool.map(
                lambda run: kubeapi.append_observation(advisor.memo.kube, advisor.memo.store, "default", run),
                [*runs, *runs],
            ))  # fmt: skip
        assert appended.count(True) == 400 and appended.count(False) == 400
        keys = api.get("runtimeprofiles", "default", WORKLOAD)["status"]["learnedSources"]
        assert sorted(keys) == sorted(run.source for run in runs)
        profile = advisor.api.get("runtimeprofiles", "default", WORKLOAD)
        kept = len(profile["status"]["observations"])
        assert kept == 40 * history.WINDOW and sum(s["count"] for s in profile["status"]["summaries"]) == 400
        store = advisor.memo.store
        api.wait_until(lambda: len(store.find("default", WORKLOAD).learned) == kept, 30)  # reloaded
        api.wait_until(lambda: (api.get("runtimeprofiles", "default", WORKLOAD)["status"].get("model") or {})
                       .get("samples") == 32 + kept, 60)  # fmt: skip
        api.patch("runtimeprofiles", "default", WORKLOAD, {"metadata": {"labels": {"touched": "yes"}}})

        def diffbase() -> str:  # kopf's, rewritten once the update handler has handled the label
            notes = api.get("runtimeprofiles", "default", WORKLOAD)["metadata"].get("annotations") or {}
            text = notes.get("rayjob-advisor.io/last-handled-configuration", "")
            return text if "touched" in text else ""

        written = api.wait_until(diffbase, 30)
    assert "rayjob:u-" not in written and '"status"' not in written
    assert len(written) < 16 * 1024 and len(json.dumps(profile)) < 512 * 1024


def test_no_library_warning_reaches_the_operators_log(api, monkeypatch):
    fit = RuntimeModel.fit

    def warning_fit(self: RuntimeModel, *args: object, **kwargs: object) -> RuntimeModel:
        np.float64(1.0) / np.float64(0.0)  # NumPy's divide-by-zero RuntimeWarning, as a fit of few runs may give
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(RuntimeModel, "fit", warning_fit)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")  # what the log would show
        with operator(api):
            api.create(rayjob("train"))
            wait_for_note(api, "train", ann.PREDICTION)  # after a fit in the refit thread
    assert not [w for w in shown if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in shown]


def test_a_new_workloads_finished_jobs_make_its_profile_in_their_namespace(caplog):
    """No profiling first: 20 finished jobs of a new workload in a fresh namespace start its RuntimeProfile, which
    says NotEnoughData until 8 runs and is then fitted; the first job's creation gets a note, never an error."""
    caplog.set_level(logging.INFO)
    sizes = [(replicas, size) for size in (4000, 8000, 16000, 32000) for replicas in (1, 2, 3, 4, 8)]
    with AdvisorEmulator() as api, operator(api):
        api.create_namespace("fresh")
        for index, (replicas, size) in enumerate(sizes):
            name = f"first-{index}"
            job = make_rayjob(
                annotations={ann.WORKLOAD: "newcomer", ann.DATASET_SIZE: str(size), ann.BATCH_SIZE: "128"},
                groups=[worker_group(replicas=replicas, maxReplicas=8)],
            )
            job["metadata"].update(name=name, namespace="fresh")
            api.create(job)
            if index == 0:
                note = api.wait_until(lambda: notes(api, "first-0", "fresh").get(ann.NOTE), 30)
                assert note.startswith("no profile yet for workload 'newcomer'")
                assert ann.ERROR not in notes(api, "first-0", "fresh")
            finish(api, name, minutes=sync_sgd_time(size, replicas, 128, replicas) / 60, namespace="fresh")
            if index == 0:  # the first run starts the profile, too few to fit
                condition = api.wait_until(lambda: _fitted_condition(api, "fresh", "newcomer"), 30)
                assert (condition["status"], condition["reason"]) == ("False", "NotEnoughData")

        def fitted() -> dict | None:
            status = api.get("runtimeprofiles", "fresh", "newcomer").get("status") or {}
            model = status.get("model") or {}
            return status if model.get("samples") == 20 and model.get("name") != "none" else None

        status = api.wait_until(fitted, 90)
        assert len(status["observations"]) == 20 and _fitted_condition(api, "fresh", "newcomer")["status"] == "True"
        assert [p["metadata"]["name"] for p in api.objects("runtimeprofiles", "fresh")] == ["newcomer"]
        assert api.get("runtimeprofiles", "fresh", "newcomer")["spec"] == {"workload": "newcomer", "observations": []}
        assert_no_invalid_writes(api)
    tracebacks = [record.getMessage() for record in caplog.records if record.exc_info]
    assert len(tracebacks) < 5, tracebacks


def _fitted_condition(api: AdvisorEmulator, namespace: str, name: str) -> dict | None:
    with contextlib.suppress(emulator.ApiError):
        conditions = (api.get("runtimeprofiles", namespace, name).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Fitted"), None)
    return None


def test_the_workload_labels_are_bounded_however_many_profiles_resolve():
    """Issue 21 beside 22: a workload's first finished job makes its profile, so any name can resolve; at most
    ``MAX_WORKLOAD_LABELS`` become labels, the rest count as ``other``."""
    metrics = Metrics()
    for n in range(MAX_WORKLOAD_LABELS + 100):
        metrics.profile_fitted(f"team/w{n}", "team", f"w{n}", "combined", 0.1)
        metrics.advised(("team", f"job-{n}", f"uid-{n}"), f"w{n}", 10.0, None, False, "controller")
    labels = {s.labels["workload"] for f in metrics.registry.collect() for s in f.samples if "workload" in s.labels}
    assert len(labels) == MAX_WORKLOAD_LABELS + 1 and OTHER in labels


def test_a_workload_is_counted_per_namespace_and_resolves_only_where_it_has_a_profile():
    """Issue 21: one tenant's jobs must not move another's accuracy alerts, so each series is its jobs' namespace's;
    a workload resolved in team-a is ``other`` in team-b until it resolves there."""
    metrics = Metrics()
    metrics.profile_fitted("team-a/resnet", "team-a", "resnet", "combined", 0.1)
    for namespace in ("team-a", "team-b"):
        metrics.overran(namespace, "resnet")
    metrics.advised(("team-b", "job", "uid"), "resnet", 10.0, None, False, "controller")  # predicted: resolves
    metrics.overran("team-b", "resnet")
    counted = {
        (s.labels["namespace"], s.labels["workload"]): s.value
        for f in metrics.registry.collect()
        for s in f.samples
        if s.name == "rayjob_advisor_upper_bound_exceeded_total"
    }
    assert counted == {("team-a", "resnet"): 1, ("team-b", OTHER): 1, ("team-b", "resnet"): 1}


def test_made_up_workload_names_never_become_metric_series():
    """Issue 21: 200 RayJobs with random workload names, created and deleted, leave one ``other`` series, not 200 (a
    workload label is one that resolved to a profile)."""
    with running_advisor(objects=[profile_manifest()], **QUICK_REFITS) as advisor:
        api, registry = advisor.api, advisor.memo.metrics.registry
        api.create(rayjob("known"))
        wait_for_note(api, "known", ann.PREDICTED_RUNTIME_SECONDS)
        names = [f"random-{n}" for n in range(200)]
        for name in names:
            api.create(rayjob(name, **{ann.WORKLOAD: os.urandom(6).hex()}))
        api.wait_until(lambda: all(notes(api, name).get(ann.NOTE) for name in names), 120)  # no profile yet
        for name in names:
            api.delete("rayjobs", "default", name)
        series = {
            (metric.name, tuple(sorted(sample.labels.items())))
            for metric in registry.collect()
            for sample in metric.samples
            if "workload" in sample.labels
        }
    workloads = {dict(labels)["workload"] for _, labels in series}
    assert workloads <= {WORKLOAD, "other"}, sorted(workloads)[:5]
    assert (
        "rayjob_advisor_predictions",
        (("namespace", "default"), ("result", "unprofiled"), ("workload", "other")),
    ) in series
    assert len(series) <= 4, series
