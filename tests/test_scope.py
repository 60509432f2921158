"""Opt-in scope (docs/scope.md): with default settings the advisor acts only on the RayJobs that ask for it.

KubeRay's own unmodified ``ray-job.sample.yaml`` in a namespace that never asked gets nothing from the controller
or the webhook (no annotation or label of ours, no Event, no write at all, nothing learned); each documented
opt-in — an annotation, the namespace's ``mode`` label, ``advise_all_jobs`` — has it advised.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from rayjob_advisor import application
from rayjob_advisor import contract as ann
from rayjob_advisor.application import Policy
from rayjob_advisor.cli import verbs
from rayjob_advisor.kube.config import load_config
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit import chart
from rayjob_advisor_testkit.advisor import QUICK_REFITS, RunningAdvisor, running_advisor
from rayjob_advisor_testkit.lifecycle import finish, notes
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest, profiled_rayjob
from rayjob_advisor_testkit.rayjobs import sample_rayjobs
from rayjob_advisor_testkit.resources import AdvisorEmulator

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
(SAMPLE,) = [body for name, body in sample_rayjobs() if name == "ray-job.sample.yaml"]


def raw_sample(name: str, namespace: str, **annotations: str) -> dict[str, Any]:
    """KubeRay's ray-job.sample.yaml as its users apply it, named ``name`` in ``namespace``, plus ``annotations``."""
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {**body["metadata"], "name": name, "namespace": namespace}
    if annotations:
        body["metadata"]["annotations"] = annotations
    return body


def ours(api: AdvisorEmulator, name: str, namespace: str) -> dict[str, str]:
    """Every annotation and label of the advisor's (and kopf's, which shares the prefix) on a stored RayJob."""
    metadata = api.get("rayjobs", namespace, name)["metadata"]
    written = {**(metadata.get("annotations") or {}), **(metadata.get("labels") or {})}
    return {key: value for key, value in written.items() if key.startswith(ann.PREFIX)}


def events_of(api: AdvisorEmulator, name: str) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in api.objects("events") if e["involvedObject"]["name"] == name]


@pytest.fixture(scope="module")
def advisor() -> Iterator[RunningAdvisor]:
    """The controller with the default settings of `rayjob-advisor run` and the chart."""
    with running_advisor(objects=[profile_manifest()], **QUICK_REFITS) as running:
        assert running.memo.config.advise_all_jobs is False
        yield running


def test_a_raw_kuberay_sample_in_an_unlabelled_namespace_gets_nothing_from_the_controller(advisor):
    api = advisor.api
    api.create_namespace("team-x")
    api.create(raw_sample("sample", "team-x"))
    api.create(profiled_rayjob("asks"))  # a job that asks, handled after or alongside: the operator is at work
    api.wait_until(lambda: ann.PREDICTION in notes(api, "asks"), 60)
    finish(api, "sample", namespace="team-x")
    finish(api, "asks")
    api.wait_until(lambda: ann.ACTUAL_RUNTIME_SECONDS in notes(api, "asks"), 60)
    assert ours(api, "sample", "team-x") == {} and events_of(api, "sample") == []
    assert api.requests("PATCH", "rayjobs", name="sample") == []  # not even kopf's own record
    assert api.objects("runtimeprofiles", "team-x") == []  # nothing learned


def test_the_namespace_label_opts_its_jobs_in(advisor):
    api = advisor.api
    api.create_namespace("team-y", labels={ann.MODE: "recommend"})
    api.wait_until(lambda: "team-y" in advisor.memo.namespace_labels, 30)
    api.create(raw_sample("labelled", "team-y"))
    error = api.wait_until(lambda: ours(api, "labelled", "team-y").get(ann.ERROR), 60)
    assert ann.DATASET_SIZE in error or ann.WORKLOAD in error  # advised: told which annotation to add
    api.wait_until(lambda: events_of(api, "labelled") == [("Warning", "CannotPredict")], 30)


def test_an_annotation_on_the_job_opts_it_in(advisor):
    api = advisor.api
    api.create(raw_sample("annotated", "default", **{ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "8000"}))
    prediction = api.wait_until(lambda: ours(api, "annotated", "default").get(ann.PREDICTION), 60)
    assert f"default/{WORKLOAD}" in prediction


def test_a_namespace_labelled_before_the_operator_starts_is_known_before_its_jobs_are_handled():
    with AdvisorEmulator() as api:
        api.create_namespace("team-z", labels={ann.MODE: "recommend"})
        api.create(raw_sample("sample", "team-z"))
        with running_advisor(api=api, **QUICK_REFITS):
            api.wait_until(lambda: ours(api, "sample", "team-z").get(ann.ERROR), 60)


def test_advise_all_jobs_advises_the_raw_sample_too():
    with running_advisor(advise_all_jobs=True, **QUICK_REFITS) as running:
        api = running.api
        api.create_namespace("team-x")
        api.create(raw_sample("sample", "team-x"))
        assert api.wait_until(lambda: ours(api, "sample", "team-x").get(ann.ERROR), 60)
        api.wait_until(lambda: events_of(api, "sample") == [("Warning", "CannotPredict")], 30)


def test_the_webhook_admits_a_job_that_does_not_ask_untouched_and_silent():
    with running_advisor("webhook", objects=[profile_manifest()], **QUICK_REFITS) as running:
        running.api.create_namespace("team-x")
        running.api.create_namespace("team-y", labels={ann.MODE: "recommend"})
        running.api.wait_until(lambda: "team-y" in running.memo.namespace_labels, 30)
        stored, response = running.webhook.admit(raw_sample("sample", "team-x"))
        assert stored == raw_sample("sample", "team-x") and "patch" not in response and not response.get("warnings")
        stored, response = running.webhook.admit(raw_sample("sample", "team-y"))
        assert ann.ERROR in stored["metadata"]["annotations"] and response["warnings"]


@pytest.mark.parametrize(
    ("annotations", "labels", "namespace_labels", "asks"),
    [
        ({}, {}, {}, False),
        (
            {"app": "x", ann.PREDICTED_RUNTIME: "1m"},
            {ann.PREDICTED: "1m"},
            {ann.HOOK_LABEL_PREFIX + "kueue": "true"},
            False,
        ),
        ({ann.WORKLOAD: "w"}, {}, {}, True),
        ({ann.DEADLINE: "1h"}, {}, {}, True),  # then told to name a workload
        ({ann.RELEASE: "true"}, {}, {}, True),
        ({}, {ann.WORKLOAD: "w"}, {}, True),
        ({}, {}, {ann.MODE: "recommend"}, True),
    ],
    ids=["nothing", "outputs and other keys", "workload", "deadline", "release", "workload label", "namespace mode"],
)
def test_what_asks_for_advice(annotations, labels, namespace_labels, asks):
    assert ann.asks_for_advice(annotations, labels, namespace_labels) is asks


def test_mode_off_opts_out_and_a_held_job_is_still_released():
    off = raw_sample("off", "default", **{ann.WORKLOAD: WORKLOAD, ann.MODE: "off"})
    assert application.left_alone(RayJob(off), Policy()) == f"its mode is off ({ann.MODE})"
    assert not application.in_scope(RayJob(off), Policy(advise_all_jobs=True))
    held = copy.deepcopy(off)
    held["metadata"]["annotations"].update({ann.RELEASE: "true", ann.HELD: "true"})
    held["spec"]["suspend"] = True
    assert application.in_scope(RayJob(held), Policy())
    advice = application.advise(held, ProfileStore(shipped=False), policy=Policy(), may_resize=True, now=NOW)
    assert advice.patch == {"spec": {"suspend": False}, "metadata": {"annotations": {ann.HELD: None}}}
    assert advice.messages == ()
    bad = raw_sample("bad", "default", **{ann.MODE: "offf"})
    assert application.left_alone(RayJob(bad), Policy()) is None  # asks: its error is reported on it


def test_the_switch_to_advise_every_job_reaches_the_operator_from_the_chart_the_flag_and_the_variable(
    capsys, monkeypatch
):
    for values, expected in (({}, "false"), ({"adviseAllJobs": True}, "true")):
        deployments = [o for o in chart.render(values) if o["kind"] == "Deployment"]
        for deployment in deployments:  # the controller and the webhook
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["RAYJOB_ADVISOR_ADVISE_ALL_JOBS"] == expected
            assert load_config({}, env).advise_all_jobs is (expected == "true")
        assert len(deployments) == 2
    seen: dict[str, object] = {}

    def load(flags: dict[str, object]) -> object:  # the real settings, made invalid so that no operator starts
        seen.update(flags)
        return load_config({**flags, "role": "webhook"})

    monkeypatch.setattr(verbs, "load_config", load)
    assert verbs.main(["run", "--advise-all-jobs"]) == 2 and seen["advise_all_jobs"] is True
    seen.clear()
    assert verbs.main(["run"]) == 2 and seen.get("advise_all_jobs") is None  # unset: the variable decides
    assert "tls_cert_file" in capsys.readouterr().err
