"""Fault injection on the strict emulator: one bad RuntimeProfile, a failing fit, a dead refitter, a flaky or hung
API server — each delays or degrades what it touches, none stops the operator, and /healthz tells the truth."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor.errors import AnnotationError, BadProfile
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.profiles import codec, history
from rayjob_advisor_testkit import emulator
from rayjob_advisor_testkit.advisor import QUICK_REFITS, free_port, running_advisor
from rayjob_advisor_testkit.emulator import ApiError, rfc3339
from rayjob_advisor_testkit.lifecycle import notes
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, profiled_rayjob, small_profile_runs
from rayjob_advisor_testkit.resources import RUNTIMEPROFILE_SCHEMA, AdvisorEmulator, advisor_resources


@pytest.fixture
def api() -> Iterator[AdvisorEmulator]:
    with AdvisorEmulator() as emulator_:
        emulator_.create(profile_manifest())
        yield emulator_
        assert not [v for v in emulator_.violations if v.rejected], "the operator wrote an invalid object"


def operator(api: emulator.Emulator, **config: object):
    return running_advisor(api=api, **{**QUICK_REFITS, **config})


def fitted(api: emulator.Emulator, name: str) -> dict | None:
    """The Fitted condition of RuntimeProfile default/``name``, once there is one."""
    conditions = (api.get("runtimeprofiles", "default", name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Fitted"), None)


def warnings_on(api: emulator.Emulator, name: str) -> list[dict]:
    return [e for e in api.objects("events") if e["involvedObject"]["name"] == name and e["type"] == "Warning"]


def healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_profile_without_spec_or_with_numeric_garbage_is_rejected_by_the_crd():
    with AdvisorEmulator() as api:
        _create_rejected(api)
        assert [v.name for v in api.violations if v.rejected] == ["empty", "empty", "tiny"]


def _create_rejected(api: AdvisorEmulator) -> None:
    for body in ({}, {"spec": {"observations": []}}):
        with pytest.raises(ApiError) as rejected:
            api.create({"apiVersion": "rayjob-advisor.io/v1alpha1", "kind": "RuntimeProfile",
                        "metadata": {"name": "empty", "namespace": "default"}, **body})  # fmt: skip
        assert rejected.value.code == 422
    runs = profile_manifest(small_profile_runs()[:1], workload="tiny")
    runs["spec"]["observations"][0]["executionSeconds"] = 1e-300
    with pytest.raises(ApiError, match="executionSeconds"):
        api.create(runs)


def test_an_oversized_profile_is_rejected_by_the_crd_and_by_the_operator_under_an_older_crd():
    """No tenant's profile makes every replica parse and keep an unbounded list, or an unbounded string."""
    manifest = profile_manifest()
    run = manifest["spec"]["observations"][0]
    too_many = {**manifest["spec"], "observations": [run] * (codec.MAX_SEED_RUNS + 1)}
    with AdvisorEmulator() as api:
        for spec, where in (
            (too_many, "spec.observations: .* is too long"),
            ({**manifest["spec"], "workload": "w" * (ann.MAX_WORKLOAD + 1)}, "spec.workload: .* is too long"),
            ({**manifest["spec"], "observations": [{**run, "source": "s" * 254}]}, "source: .* is too long"),
        ):
            with pytest.raises(ApiError, match=where) as rejected:
                api.create({**manifest, "spec": spec})
            assert rejected.value.code == 422
        api.create({**manifest, "spec": {**manifest["spec"], "observations": [run] * codec.MAX_SEED_RUNS}})
    with pytest.raises(BadProfile, match=f"spec.observations holds 16385 runs: at most {codec.MAX_SEED_RUNS}"):
        codec.runs_from_k8s(too_many, None)
    with pytest.raises(AnnotationError, match="at most 253 characters"):
        ann.parse_inputs({ann.WORKLOAD: "w" * 254})
    spec, status = (RUNTIMEPROFILE_SCHEMA["properties"][part]["properties"] for part in ("spec", "status"))
    assert (spec["workload"]["maxLength"], spec["observations"]["maxItems"]) == (ann.MAX_WORKLOAD, codec.MAX_SEED_RUNS)
    bounds = [status[key]["maxItems"] for key in ("observations", "summaries", "learnedSources")]
    assert bounds == [history.MAX_RUNS, history.MAX_SUMMARIES, history.MAX_SOURCES]  # what the operator writes fits


def test_a_second_profile_of_a_workload_is_marked_duplicate_and_never_predicts_until_the_first_is_gone(api):
    """Two RuntimeProfiles of one workload in a namespace overwrote each other; the oldest is used, the other says
    so (older wins over a name that sorts first; a tie of seconds goes by name)."""
    time.sleep(1.1)  # the fixture's profile is older by a second: creationTimestamp counts seconds
    copy = profile_manifest(small_profile_runs()[:20])  # other runs: a model of 20 runs is not the original's 32
    copy["metadata"]["name"] = "a-copy"
    api.create(copy)
    with operator(api) as advisor:
        condition = api.wait_until(lambda: fitted(api, "a-copy"), 30)
        api.wait_until(lambda: (fitted(api, WORKLOAD) or {}).get("status") == "True", 30)
        used = advisor.memo.store.find("default", WORKLOAD)
        assert used.name == WORKLOAD and used.model is not None and used.model.n_samples_ == 32
        assert [e["reason"] for e in warnings_on(api, "a-copy")] == ["DuplicateWorkload"]
        api.delete("runtimeprofiles", "default", WORKLOAD)
        api.wait_until(lambda: (fitted(api, "a-copy") or {}).get("status") == "True", 30)  # the next oldest's turn
        heir = advisor.memo.store.find("default", WORKLOAD)
        assert heir.name == "a-copy" and heir.model is not None and heir.model.n_samples_ == 20
    assert (condition["status"], condition["reason"]) == ("False", "DuplicateWorkload")
    assert f"RuntimeProfile {WORKLOAD} names workload '{WORKLOAD}' in namespace default too" in condition["message"]


def test_a_profile_the_operator_cannot_load_does_not_stop_start_up():
    """Objects stored under an older, laxer CRD (no spec required) are skipped and reported, never fatal."""
    lax = [dataclasses.replace(s, validate=None) if s.plural == "runtimeprofiles" else s for s in advisor_resources()]
    with emulator.Emulator(lax) as api:
        api.create({"apiVersion": "rayjob-advisor.io/v1alpha1", "kind": "RuntimeProfile",
                    "metadata": {"name": "no-spec", "namespace": "default"}})  # fmt: skip
        api.create(profile_manifest())
        started = time.monotonic()
        with operator(api) as advisor:
            advisor.wait_for_model(WORKLOAD)
            assert time.monotonic() - started < 30
            condition = api.wait_until(lambda: fitted(api, "no-spec"), 30)
            events = api.wait_until(lambda: warnings_on(api, "no-spec"), 30)
            api.wait_until(lambda: (fitted(api, WORKLOAD) or {}).get("status") == "True", 30)
        status = api.get("runtimeprofiles", "default", WORKLOAD)["status"]
        assert status["observedGeneration"] == api.get("runtimeprofiles", "default", WORKLOAD)["metadata"]["generation"]
    assert (condition["status"], condition["reason"]) == ("False", "BadProfile")
    assert "spec.workload is missing" in condition["message"] and condition["lastTransitionTime"]
    assert events[0]["reason"] == "BadProfile"


def test_a_fit_that_raises_is_shown_on_its_profile_and_the_next_profile_is_fitted(api, monkeypatch):
    broken_runs = small_profile_runs()[:20]
    real_fit = RuntimeModel.fit

    def fit(self, observations):
        if len(observations) == len(broken_runs):
            raise FloatingPointError("overflow encountered in exp")
        return real_fit(self, observations)

    monkeypatch.setattr(RuntimeModel, "fit", fit)
    api.create(profile_manifest(broken_runs, workload="broken"))
    with operator(api) as advisor:
        advisor.wait_for_model(WORKLOAD)
        condition = api.wait_until(lambda: fitted(api, "broken"), 30)
        events = api.wait_until(lambda: warnings_on(api, "broken"), 30)
        good = api.wait_until(lambda: fitted(api, WORKLOAD), 30)
        assert advisor.memo.refitter.problem() is None
    assert (condition["status"], condition["reason"]) == ("False", "FitFailed")
    assert "FloatingPointError: overflow encountered in exp" in condition["message"]
    assert api.get("runtimeprofiles", "default", "broken")["status"]["model"]["name"] == "none"
    assert events[0]["reason"] == "FitFailed"
    assert (good["status"], good["reason"]) == ("True", "Fitted")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("loop_name", ["refitter", "sweeper"])
def test_healthz_fails_when_a_background_thread_is_dead(api, monkeypatch, loop_name):
    port = free_port()
    with operator(api, liveness_port=port) as advisor:
        advisor.wait_for_model(WORKLOAD)
        loop = getattr(advisor.memo, loop_name)  # no /healthz before: kopf keeps its result for 10 s

        def die():
            raise SystemExit  # what no `except Exception` catches: the thread ends

        monkeypatch.setattr(loop, "step", die)
        loop.wake()
        api.wait_until(lambda: not loop._thread.is_alive(), 10)
        assert healthz(port) == 500


def test_healthz_is_fine_while_the_refitter_works(api):
    port = free_port()
    with operator(api, liveness_port=port) as advisor:
        advisor.wait_for_model(WORKLOAD)
        assert healthz(port) == 200


def test_server_errors_at_start_up_are_recovered_from_within_seconds(api):
    api.inject_fault("list", "runtimeprofiles", status=500, times=len(kubeapi.TRANSIENT_BACKOFFS) + 2)
    started = time.monotonic()
    with operator(api) as advisor:
        advisor.wait_for_model(WORKLOAD)
    assert time.monotonic() - started < 20  # kubeapi's retries, then start-up's own 2 s backoff: not kopf's 60 s
    lists = [r.status for r in api.requests("list", "runtimeprofiles")]
    assert lists[: len(kubeapi.TRANSIENT_BACKOFFS) + 2] == [500] * (len(kubeapi.TRANSIENT_BACKOFFS) + 2)


def test_hung_gets_delay_learning_and_never_end_it(api, monkeypatch):
    monkeypatch.setattr(kubeapi, "TIMEOUT_SECONDS", 0.5)
    job = profiled_rayjob("slow")
    with operator(api) as advisor:
        api.create(job)
        api.wait_until(lambda: ann.PREDICTION in notes(api, "slow"), 60)
        hang = api.inject_fault("GET", "runtimeprofiles", name=WORKLOAD, status=None, delay=3, times=6)
        created = dt.datetime.fromisoformat(
            api.get("rayjobs", "default", "slow")["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        )
        start, end = created + dt.timedelta(seconds=30), created + dt.timedelta(minutes=6)
        api.set_rayjob_status("default", "slow", deployment_status="Running", job_status="RUNNING",
                              start_time=rfc3339(start))  # fmt: skip
        api.set_rayjob_status("default", "slow", deployment_status="Complete", job_status="SUCCEEDED",
                              start_time=rfc3339(start), end_time=rfc3339(end))  # fmt: skip
        api.wait_until(lambda: ann.ACTUAL_RUNTIME_SECONDS in notes(api, "slow"), 120)
        api.wait_until(lambda: advisor.memo.store.find("default", WORKLOAD).model.n_samples_ == 33, 120)
    assert hang.remaining == 0  # six GETs hung, each was given up on after 0.5 s and retried
    status = api.get("runtimeprofiles", "default", WORKLOAD)["status"]
    assert [run["executionSeconds"] for run in status["observations"]] == [330.0]
    assert status["model"]["samples"] == 33
