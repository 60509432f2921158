"""The label mirror: ``predicted`` and ``deadline-status`` labels, written in the advisor's own patches.

``kubectl get rayjobs -L rayjob-advisor.io/predicted,rayjob-advisor.io/deadline-status`` reads them; a
value Kubernetes rejects as a label would lose the whole patch, annotations and all.
"""

from __future__ import annotations

import datetime as dt
import json
import typing

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rayjob_advisor import contract as ann
from rayjob_advisor.application import Advice, Policy, advise, learn
from rayjob_advisor_testkit.emulator import LABEL_VALUE, merge_patch
from rayjob_advisor_testkit.profiles import fitted_store, synthetic_observations
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob, make_rayjob, worker_group

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
POLICY = Policy()


def job(mode: str = "recommend", deadline: str | None = None, replicas: int = 1) -> dict:
    notes = {
        ann.WORKLOAD: "synthetic",
        ann.DATASET_SIZE: "16000",
        ann.BATCH_SIZE: "64",
        ann.EPOCHS: "1",
        ann.MODE: mode,
    }
    if deadline is not None:
        notes[ann.DEADLINE] = deadline
    rayjob = make_rayjob(
        annotations=notes,
        groups=[worker_group(replicas=replicas, minReplicas=1, maxReplicas=8)],
        runtimeEnvYAML=f"env_vars:\n  NUM_WORKERS: '{replicas}'\n",
    )
    rayjob["metadata"]["creationTimestamp"] = "2026-12-02T12:00:00Z"
    return rayjob


def labels_after(rayjob: dict, advice: Advice) -> dict[str, str]:
    """The RayJob's labels once the advice's patch is applied; every one a valid label value."""
    patched = jsonpatch.apply_patch(rayjob, jsonpatch.JsonPatch.from_diff(rayjob, merge_patch(rayjob, advice.patch)))
    assert_valid_rayjob(patched)
    labels = patched["metadata"].get("labels", {})
    assert all(len(value) <= 63 and LABEL_VALUE.fullmatch(value) for value in labels.values()), labels
    return labels


def test_a_prediction_is_mirrored_in_short_labels_and_no_deadline_reads_none(store):
    rayjob = job()
    advice = advise(rayjob, store, policy=POLICY, may_resize=False, now=NOW)
    labels = labels_after(rayjob, advice)
    notes = advice.patch["metadata"]["annotations"]
    assert labels == {ann.PREDICTED: notes[ann.PREDICTED_RUNTIME], ann.DEADLINE_STATUS: "none"}
    assert not set(ann.LABEL_KEYS) & set(notes)  # labels only, never annotations too
    assert ann.parse_duration(labels[ann.PREDICTED]) == dt.timedelta(seconds=-(-advice.p50 // 1))


def test_the_deadline_status_is_that_of_the_size_the_job_will_run_at(store):
    def advised(rayjob: dict, may_resize: bool) -> tuple[str, dict]:
        advice = advise(rayjob, store, policy=POLICY, may_resize=may_resize, now=NOW)
        plan = json.loads(advice.patch["metadata"]["annotations"][ann.RECOMMENDATION])
        return labels_after(rayjob, advice)[ann.DEADLINE_STATUS], plan

    assert advised(job(deadline="6h"), may_resize=False)[0] == "on-track"
    # One worker misses 50 s; more would make it. Recommended only, the job still runs on one: at risk.
    status, plan = advised(job(deadline="50s"), may_resize=False)
    assert plan["meetsDeadline"] and plan["replicas"] > 1 and status == "at-risk"
    # Enforced, it runs at the plan's size: on track.
    status, plan = advised(job("enforce", deadline="50s"), may_resize=True)
    assert plan["meetsDeadline"] and status == "on-track"
    # No size makes it: at risk, whatever the mode.
    for mode in ("recommend", "enforce"):
        status, plan = advised(job(mode, deadline="2s"), may_resize=True)
        assert not plan["meetsDeadline"] and status == "at-risk"


def test_a_job_left_at_its_size_is_judged_with_its_own_start_up():
    """Start-up grows 5 s a worker: 8 replicas start in 40 s and need 71 s at the upper bound, 4 start in 20 s."""
    runs = [run.model_copy(update={"startup_seconds": 5.0 * run.workers}) for run in synthetic_observations()]
    store = fitted_store(runs)
    for deadline, status in (("60s", "at-risk"), ("80s", "on-track")):
        rayjob = job(deadline=deadline, replicas=8)
        advice = advise(rayjob, store, policy=POLICY, may_resize=False, now=NOW)
        plan = json.loads(advice.patch["metadata"]["annotations"][ann.RECOMMENDATION])
        assert plan["meetsDeadline"] and plan["replicas"] < 8 and plan["startupSeconds"] < 40
        assert advice.walltime is not None and 60 < advice.walltime < 80  # its own: 40 s start-up + the bound
        assert labels_after(rayjob, advice)[ann.DEADLINE_STATUS] == status


def test_bad_input_leaves_the_labels_alone(store):
    rayjob = job()
    rayjob["metadata"]["labels"] = {ann.PREDICTED: "5m", ann.DEADLINE_STATUS: "on-track"}
    rayjob["metadata"]["annotations"][ann.DATASET_SIZE] = "many"
    advice = advise(rayjob, store, policy=POLICY, may_resize=False, now=NOW)
    assert advice.error and labels_after(rayjob, advice) == rayjob["metadata"]["labels"]


def finished(deadline: str | None, job_status: str = "SUCCEEDED") -> dict:
    """A job created at 12:00 that ran from 12:01 to 12:11."""
    rayjob = job(deadline=deadline)
    rayjob["metadata"]["uid"] = "u-1"
    rayjob["status"] = {
        "jobDeploymentStatus": "Complete" if job_status == "SUCCEEDED" else "Failed",
        "jobStatus": job_status,
        "rayJobInfo": {"startTime": "2026-12-02T12:01:00Z", "endTime": "2026-12-02T12:11:00Z"},
    }
    return rayjob


@pytest.mark.parametrize(
    ("deadline", "job_status", "status"),
    [("1h", "SUCCEEDED", "met"), ("5m", "SUCCEEDED", "missed"), ("1h", "FAILED", "failed"), (None, "SUCCEEDED", None)],
)
def test_a_finished_job_gets_its_deadline_outcome_as_its_status(deadline, job_status, status):
    rayjob = finished(deadline, job_status)
    lesson = learn(rayjob, POLICY)
    assert lesson.patch.get("metadata", {}).get("labels", {}).get(ann.DEADLINE_STATUS) == status
    assert status is None or status in typing.get_args(ann.DeadlineStatus)


@given(st.floats(min_value=0, max_value=1e30, allow_nan=False))
def test_every_printed_duration_is_a_label_value_and_a_go_duration(seconds):
    text = ann.format_duration(seconds)
    assert len(text) <= 63 and LABEL_VALUE.fullmatch(text)
    if seconds < 1e9:
        assert ann.parse_duration(text) == dt.timedelta(seconds=-(-seconds // 1))
