"""The test kit's emulator is strict where kmock is lax, and runs a real kopf operator (DESIGN §9)."""

from __future__ import annotations

import copy
import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from rayjob_advisor_testkit.advisor import free_port
from rayjob_advisor_testkit.emulator import ApiError, operator_settings, run_operator
from rayjob_advisor_testkit.rayjobs import make_rayjob
from rayjob_advisor_testkit.resources import AdvisorEmulator

RAYJOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"


@pytest.fixture
def api() -> Iterator[AdvisorEmulator]:
    with AdvisorEmulator() as emulator:
        yield emulator


@pytest.fixture
def settings() -> kopf.OperatorSettings:
    """kopf persisting its state in our own annotations, as the operator does (DESIGN §6)."""
    settings = operator_settings()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="rayjob-advisor.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="rayjob-advisor.io")
    return settings


def call(
    api: AdvisorEmulator, method: str, path: str, body: Any = None, content_type: str = "application/json"
) -> tuple[int, Any]:
    """One raw HTTP request, as any client would send it: (status, decoded JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(api.url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def watch(api: AdvisorEmulator, path: str) -> list[tuple[str, str]]:
    """(type, name) of every event a 1-second watch stream delivers."""
    with urllib.request.urlopen(f"{api.url}{path}&timeoutSeconds=1", timeout=5) as response:
        events = [json.loads(line) for line in response if line.strip()]
    return [(event["type"], event["object"]["metadata"]["name"]) for event in events]


def annotation_registry(seen: list[str]) -> kopf.OperatorRegistry:
    """A tiny operator: annotates every new RayJob once and remembers which ones it handled."""
    registry = kopf.OperatorRegistry()

    @kopf.on.create("ray.io", "v1", "rayjobs", registry=registry)
    def annotate(name: str, patch: kopf.Patch, **_: Any) -> None:
        seen.append(name)
        patch.metadata.annotations["rayjob-advisor.io/seen"] = "yes"

    return registry


def annotated(api: AdvisorEmulator, name: str) -> dict[str, Any]:
    """The RayJob once the operator has annotated it, else an empty (falsy) dict."""
    obj = api.get("rayjobs", "default", name)
    return obj if obj["metadata"].get("annotations", {}).get("rayjob-advisor.io/seen") == "yes" else {}


def named(name: str) -> dict[str, Any]:
    rayjob = make_rayjob()
    rayjob["metadata"]["name"] = name
    return rayjob


def test_create_sets_server_fields_and_answers_201_then_409(api: AdvisorEmulator) -> None:
    status, created = call(api, "POST", RAYJOBS, make_rayjob())
    assert status == 201
    meta = created["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["generation"] == 1
    assert int(meta["resourceVersion"]) == api.revision

    status, body = call(api, "POST", RAYJOBS, make_rayjob())
    assert (status, body["kind"], body["reason"]) == (409, "Status", "AlreadyExists")


def test_unknown_objects_and_namespaces_answer_404_with_a_status(api: AdvisorEmulator) -> None:
    status, body = call(api, "GET", f"{RAYJOBS}/missing")
    assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    rayjob = make_rayjob()
    rayjob["metadata"]["namespace"] = "nowhere"
    with pytest.raises(ApiError) as error:
        api.create(rayjob)
    assert error.value.code == 404


def test_stale_resource_version_is_a_409_conflict(api: AdvisorEmulator) -> None:
    stale = api.create(make_rayjob())["metadata"]["resourceVersion"]
    api.patch("rayjobs", "default", "job", {"metadata": {"labels": {"a": "b"}}})

    status, body = call(
        api,
        "PATCH",
        f"{RAYJOBS}/job",
        {"metadata": {"resourceVersion": stale, "labels": {"a": "c"}}},
        "application/merge-patch+json",
    )
    assert (status, body["kind"], body["reason"]) == (409, "Status", "Conflict")

    current = api.get("rayjobs", "default", "job")
    stale_copy = copy.deepcopy(current)
    stale_copy["metadata"]["resourceVersion"] = stale
    assert call(api, "PUT", f"{RAYJOBS}/job", stale_copy)[0] == 409
    assert api.get("rayjobs", "default", "job") == current


def test_writes_raise_one_global_resource_version_and_no_ops_do_not(api: AdvisorEmulator) -> None:
    first = int(api.create(named("one"))["metadata"]["resourceVersion"])
    second = int(api.create(named("two"))["metadata"]["resourceVersion"])
    assert second == first + 1
    patched = api.patch("rayjobs", "default", "one", {"metadata": {"labels": {"a": "b"}}})
    assert int(patched["metadata"]["resourceVersion"]) == second + 1
    again = api.patch("rayjobs", "default", "one", {"metadata": {"labels": {"a": "b"}}})
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_status_subresource_separates_status_from_the_rest(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    main = api.patch(
        "rayjobs", "default", "job", {"spec": {"entrypoint": "python other.py"}, "status": {"jobStatus": "SUCCEEDED"}}
    )
    assert "status" not in main
    assert main["metadata"]["generation"] == 2

    status = api.patch(
        "rayjobs",
        "default",
        "job",
        {
            "spec": {"entrypoint": "python third.py"},
            "metadata": {"labels": {"x": "y"}},
            "status": {"jobStatus": "RUNNING"},
        },
        subresource="status",
    )
    assert status["status"]["jobStatus"] == "RUNNING"
    assert status["spec"]["entrypoint"] == "python other.py"
    assert "labels" not in status["metadata"]
    assert status["metadata"]["generation"] == 2


def test_kuberay_status_updates_are_watch_events(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    since = api.revision
    api.set_rayjob_status(
        "default",
        "job",
        deployment_status="Complete",
        job_status="SUCCEEDED",
        start_time="2026-01-01T00:00:00Z",
        end_time="2026-01-01T00:10:00Z",
    )
    status = api.get("rayjobs", "default", "job")["status"]
    assert status["rayJobInfo"] == {"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:10:00Z"}
    assert watch(api, f"{RAYJOBS}?watch=true&resourceVersion={since}") == [("MODIFIED", "job")]


def test_watch_after_a_resource_version_does_not_replay_older_objects(api: AdvisorEmulator) -> None:
    api.create(named("old"))
    since = api.revision
    api.create(named("new"))
    api.patch("rayjobs", "default", "old", {"metadata": {"labels": {"touched": "yes"}}})
    api.delete("rayjobs", "default", "new")

    assert watch(api, f"{RAYJOBS}?watch=true&resourceVersion={since}") == [
        ("ADDED", "new"),
        ("MODIFIED", "old"),
        ("DELETED", "new"),
    ]
    # Without a resourceVersion, the apiserver starts with the current state, then follows changes.
    assert watch(api, f"{RAYJOBS}?watch=true") == [("ADDED", "old")]


def test_invalid_rayjob_is_rejected_with_422_and_recorded(api: AdvisorEmulator) -> None:
    invalid = make_rayjob()
    invalid["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "two"
    before = api.revision

    status, body = call(api, "POST", RAYJOBS, invalid)
    assert (status, body["reason"]) == (422, "Invalid")
    with pytest.raises(ApiError) as error:
        api.create(invalid)
    assert error.value.code == 422
    assert api.objects("rayjobs") == [] and api.revision == before
    assert [v.rejected for v in api.violations] == [True, True]


def test_unknown_fields_are_pruned_like_the_apiserver_does_and_recorded(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    stored = api.patch_status("rayjobs", "default", "job", {"jobStatus": "RUNNING", "kopf": {"progress": {}}})
    assert "kopf" not in stored["status"]
    assert [(v.message, v.rejected) for v in api.violations] == [("unknown field 'status.kopf' pruned", False)]


def test_metadata_rules_hold(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    status, _ = call(
        api, "PATCH", f"{RAYJOBS}/job", {"metadata": {"annotations": {"n": 1}}}, "application/merge-patch+json"
    )
    assert status == 400
    status, _ = call(api, "PATCH", f"{RAYJOBS}/job", {"metadata": {"name": "renamed"}}, "application/merge-patch+json")
    assert status == 422
    status, _ = call(api, "PATCH", f"{RAYJOBS}/job", {}, "application/strategic-merge-patch+json")
    assert status == 415


def test_json_patch_with_a_failing_test_is_422(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x"]},
    ]
    assert call(api, "PATCH", f"{RAYJOBS}/job", ops, "application/json-patch+json")[0] == 422


def test_namespaces_are_listed_like_core_resources(api: AdvisorEmulator) -> None:
    api.create_namespace("team-a", {"rayjob-advisor.io/enabled": "true"})
    status, listing = call(api, "GET", "/api/v1/namespaces?labelSelector=rayjob-advisor.io/enabled%3Dtrue")
    assert status == 200 and listing["kind"] == "NamespaceList"
    assert [item["metadata"]["name"] for item in listing["items"]] == ["team-a"]
    assert "kind" not in listing["items"][0]  # core list items carry no kind, as from a real apiserver


def test_faults_answer_the_next_matching_requests_then_stop(api: AdvisorEmulator) -> None:
    api.create(make_rayjob())
    fault = api.inject_fault("PATCH", "rayjobs", name="job", status=409, times=2)
    patch = {"metadata": {"labels": {"a": "b"}}}
    statuses = [call(api, "PATCH", f"{RAYJOBS}/job", patch, "application/merge-patch+json")[0] for _ in range(3)]
    assert statuses == [409, 409, 200]
    assert fault.remaining == 0
    assert [r.status for r in api.requests("patch", "rayjobs", name="job")] == [409, 409, 200]


def test_operator_handler_patch_lands_with_a_newer_resource_version(
    api: AdvisorEmulator, settings: kopf.OperatorSettings
) -> None:
    seen: list[str] = []
    created = api.create(make_rayjob())
    with run_operator(api, registry=annotation_registry(seen), settings=settings):
        handled = api.wait_until(lambda: annotated(api, "job"))
    assert seen == ["job"]
    assert int(handled["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_operator_retries_a_failed_patch(api: AdvisorEmulator, settings: kopf.OperatorSettings) -> None:
    api.inject_fault("PATCH", "rayjobs", subresource="", status=500)
    api.create(make_rayjob())
    with run_operator(api, registry=annotation_registry([]), settings=settings):
        api.wait_until(lambda: annotated(api, "job"))
    assert [r.status for r in api.requests("PATCH", "rayjobs")][:2] == [500, 200]


def test_operator_restarts_against_the_same_emulator(api: AdvisorEmulator, settings: kopf.OperatorSettings) -> None:
    seen: list[str] = []
    registry = annotation_registry(seen)
    api.create(named("before"))
    with run_operator(api, registry=registry, settings=settings):
        api.wait_until(lambda: annotated(api, "before"))
    api.create(named("while-down"))
    with run_operator(api, registry=registry, settings=settings):
        api.wait_until(lambda: annotated(api, "while-down"))
        api.create(named("after"))
        api.wait_until(lambda: annotated(api, "after"))
    assert seen == ["before", "while-down", "after"]  # the restarted operator did not handle "before" again


def test_the_kits_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    """A port an ephemeral client connection can take is one the operator may fail to bind (CI saw it)."""
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(port < 32768 for port in ports)  # Linux's ephemeral range starts there
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", ports[-1]))  # still free: nobody was handed it to listen on
