"""Wrong types and odd text anywhere the advisor reads a RayJob: one line naming the field path, never a traceback.

At admission a RayJob has not met KubeRay's schema yet: the fuzz cases (``rayjob_advisor_testkit.fuzz``) put a
value of another JSON kind at every field the advisor reads, and lone surrogates in its text.
"""

from __future__ import annotations

import copy
import logging

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor.application import Policy, advise, learn
from rayjob_advisor.cli.verbs import main
from rayjob_advisor_testkit.advice import NOW
from rayjob_advisor_testkit.advisor import QUICK_REFITS, running_advisor
from rayjob_advisor_testkit.fuzz import rich_rayjob, wrong_typed
from rayjob_advisor_testkit.profiles import WORKLOAD, fitted_store, profile_manifest, small_profile_runs

POLICY = Policy()
ASKING = ("metadata", "metadata.annotations")  # wrong as a whole: the job asks for nothing, and gets nothing
SURROGATE = "\ud800"


@pytest.fixture(scope="module")
def store():
    return fitted_store(small_profile_runs())


def test_the_rich_rayjob_is_predicted_so_each_case_fails_by_its_one_wrong_field(store):
    advice = advise(rich_rayjob(), store, policy=POLICY, may_resize=True, now=NOW)
    assert advice.error is None and advice.p50 is not None


def test_every_wrong_type_is_answered_with_its_field_path(store):
    cases = list(wrong_typed(rich_rayjob()))
    assert len(cases) > 300 and len({path for path, _ in cases}) > 90
    unanswered = []
    for path, rayjob in cases:
        advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)  # never raises
        if path in ASKING:
            answered = advice.patch == {} and advice.error is None
        else:
            answered = advice.error is not None and f"{path}: " in advice.error and "\n" not in advice.error
        if not answered:
            unanswered.append((path, advice.error))
    assert not unanswered


def test_a_wrong_group_name_says_so_in_one_line(store):
    rayjob = rich_rayjob()
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = 123
    advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
    assert advice.error == "spec.rayClusterSpec.workerGroupSpecs.0.groupName: Input should be a valid string"
    assert advice.patch["metadata"]["annotations"][ann.ERROR] == advice.error


def surrogate_cases() -> list[dict]:
    """The rich RayJob with a lone surrogate in an annotation, an annotation's key, a group name, an env value."""
    cases = []
    for where in ("value", "key", "group", "env"):
        rayjob = rich_rayjob()
        notes = rayjob["metadata"]["annotations"]
        if where == "value":
            notes[ann.DATASET_SIZE] = "8000" + SURROGATE
        elif where == "key":
            notes["team" + SURROGATE] = "a"
        elif where == "group":
            rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = "w" + SURROGATE
        else:
            head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
            head["env"][0]["value"] = "4" + SURROGATE
        cases.append(rayjob)
    return cases


def test_lone_surrogates_never_raise(store):
    for rayjob in surrogate_cases():
        advice = advise(rayjob, store, policy=POLICY, may_resize=True, now=NOW)
        for warning in advice.warnings:
            warning.encode()  # what goes out is valid UTF-8


def test_a_finished_job_with_a_wrong_typed_status_cannot_be_learned_and_says_where():
    rayjob = rich_rayjob()
    rayjob["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayJobInfo": ["2026"]}
    lesson = learn(rayjob, POLICY)
    assert lesson.observation is None
    assert [m.text for m in lesson.messages] == ["status.rayJobInfo: Input should be a valid dictionary or instance "
                                                 "of RayJobInfo"]  # fmt: skip


def test_the_command_line_names_the_field(tmp_path, capsys):
    rayjob = rich_rayjob()
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [None]
    path = tmp_path / "job.json"
    path.write_text(__import__("json").dumps(rayjob))
    assert main(["predict", "-f", str(path)]) != 0
    assert "spec.rayClusterSpec.workerGroupSpecs.0: Input should be a valid dictionary" in capsys.readouterr().err


def test_the_webhook_answers_every_case_with_its_path_and_logs_no_traceback(caplog):
    caplog.set_level(logging.INFO)
    with running_advisor("webhook", objects=[profile_manifest()], **QUICK_REFITS) as advisor:
        advisor.wait_for_model(WORKLOAD)
        unanswered = []
        # The AdmissionReview's own check types the metadata (a 400, as the API server never sends it wrong).
        cases = [(path, job) for path, job in wrong_typed(rich_rayjob()) if not path.startswith("metadata")]
        for path, rayjob in [*cases, *(("", case) for case in surrogate_cases())]:
            response = advisor.webhook.review(copy.deepcopy(rayjob))
            warnings = response.get("warnings") or []
            if response["allowed"] is not True or (path and not any(f"{path}: " in w for w in warnings)):
                unanswered.append((path, warnings))
    assert not unanswered
    tracebacks = [record.getMessage() for record in caplog.records if record.exc_info]
    assert tracebacks == []
