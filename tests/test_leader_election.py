"""Two controller replicas on one API server: kopf's peering elects one; the other takes over when it leaves."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor.kube import wiring
from rayjob_advisor_testkit.advisor import RunningAdvisor, running_advisor
from rayjob_advisor_testkit.lifecycle import finish, learned, notes, wait_for_note
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest
from rayjob_advisor_testkit.profiles import profiled_rayjob as rayjob
from rayjob_advisor_testkit.resources import AdvisorEmulator

PEERING = "rayjob-advisor"
LIFETIME = 3  # seconds a replica that stops renewing stays the leader
GHOST_LIFETIME = 8  # a dead leader's: long enough for the follower to fit its profile meanwhile


@pytest.fixture
def api() -> Iterator[AdvisorEmulator]:
    with AdvisorEmulator() as emulator:
        emulator.create(profile_manifest())
        emulator.create({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": PEERING}})
        yield emulator
        assert not [v for v in emulator.violations if v.rejected]


def controller(api: AdvisorEmulator, *, standby: bool = False) -> AbstractContextManager[RunningAdvisor]:
    return running_advisor(
        api=api, standby=standby, peering=PEERING, peering_lifetime_seconds=LIFETIME,
        refit_interval_seconds=0.1, refit_duty=1.0, shipped_profiles=False,
    )  # fmt: skip


def prediction_writes(api: AdvisorEmulator, name: str) -> int:
    patches = api.requests("PATCH", "rayjobs", name=name)
    return len([r for r in patches if r.status == 200 and ann.PREDICTION in json.loads(json.dumps(r.body))
                .get("metadata", {}).get("annotations", {})])  # fmt: skip


def test_one_of_two_controllers_writes_and_the_other_takes_over_when_it_leaves(api):
    leader: AbstractContextManager[RunningAdvisor] | None = controller(api)
    leading = leader.__enter__()
    try:
        with controller(api, standby=True) as follower:
            api.create_namespace("team-a")
            api.create(rayjob("first"))
            wait_for_note(api, "first", ann.PREDICTION)
            time.sleep(1)  # room for a duplicate write, if the follower wrongly handled the job too
            assert prediction_writes(api, "first") == 1
            api.wait_until(lambda: "team-a" in leading.memo.namespace_labels, 30)
            assert follower.memo.metrics is not None and "team-a" not in follower.memo.namespace_labels  # paused
            leader.__exit__(None, None, None)
            leader = None  # gone: its last keep-alive left the peering
            left = time.monotonic()
            api.create(rayjob("second"))
            wait_for_note(api, "second", ann.PREDICTION, timeout=LIFETIME + 10)
            assert time.monotonic() - left < LIFETIME + 5
            follower.wait_for_model(WORKLOAD)
            finish(api, "first", minutes=5)
            wait_for_note(api, "first", ann.ACTUAL_RUNTIME_SECONDS)
            time.sleep(1)
    finally:
        if leader is not None:
            leader.__exit__(None, None, None)
    # The new leader resumes as a restarted operator does: a job still waiting is predicted again, once.
    assert prediction_writes(api, "first") == 2 and prediction_writes(api, "second") == 1
    assert [run["executionSeconds"] for run in learned(api)] == [300.0]
    assert float(notes(api, "first")[ann.ACTUAL_RUNTIME_SECONDS]) == 300.0
    reasons = [e["reason"] for e in api.objects("events") if e["involvedObject"]["name"] == "first"]
    assert reasons.count("Learned") == 1


FAILED_PATCHES = 5  # kopf's first try and its 4 retries (the test kit's error_backoffs)


def failures(api: AdvisorEmulator) -> int:
    return [r.status for r in api.requests("PATCH", "rayjobs", name="train")].count(500)


def test_a_retried_finish_reports_its_run_once(api):
    with controller(api) as advisor:
        api.create(rayjob("train", **{ann.DEADLINE: "1h"}))
        wait_for_note(api, "train", ann.PREDICTION)
        # The run is stored, then the job's annotations fail to patch (kopf's API retries too), so that kopf
        # runs the handler again at the job's next change.
        api.inject_fault("PATCH", "rayjobs", name="train", status=500, times=FAILED_PATCHES)
        finish(api, "train", minutes=10)
        api.wait_until(lambda: learned(api), 30)
        api.wait_until(lambda: failures(api) == FAILED_PATCHES, 30)
        api.patch("rayjobs", "default", "train", {"metadata": {"labels": {"touched": "yes"}}})
        wait_for_note(api, "train", ann.ACTUAL_RUNTIME_SECONDS)
        time.sleep(1)
        outcomes = advisor.memo.metrics.deadline_outcomes.labels("met")._value.get()
    assert [run["executionSeconds"] for run in learned(api)] == [600.0]
    reasons = [e["reason"] for e in api.objects("events") if e["involvedObject"]["name"] == "train"]
    assert reasons.count("Learned") == 1 and reasons.count("DeadlineMet") == 1
    assert outcomes == 1


def test_a_leader_that_stops_renewing_is_replaced_after_its_lifetime(api):
    # A leader that died without leaving: its last keep-alive in the peering, never renewed.
    seen = dt.datetime.now(dt.UTC)
    ghost = {"priority": 0, "lifetime": GHOST_LIFETIME, "lastseen": seen.isoformat()}  # outranks every replica
    api.patch("clusterkopfpeerings", None, PEERING, {"status": {"ghost": ghost}})
    with controller(api, standby=True) as follower:
        api.create(rayjob("waiting"))
        follower.wait_for_model(WORKLOAD)  # fitted while following: the fit is left to the leader
        assert not wiring.leads(follower.memo)
        assert not api.requests("watch", "rayjobs")  # paused while the ghost lives: not even watching
        assert not api.requests("PATCH", "runtimeprofiles", subresource="status")
        wait_for_note(api, "waiting", ann.PREDICTION, timeout=GHOST_LIFETIME + 30)
        took_over = dt.datetime.now(dt.UTC) - seen
        assert wiring.leads(follower.memo)
        api.wait_until(lambda: "ghost" not in (api.get("clusterkopfpeerings", None, PEERING).get("status") or {}))
        api.wait_until(lambda: (api.get("runtimeprofiles", "default", WORKLOAD).get("status") or {}).get("model"), 30)
    assert dt.timedelta(seconds=GHOST_LIFETIME) <= took_over < dt.timedelta(seconds=GHOST_LIFETIME + 10)
    assert prediction_writes(api, "waiting") == 1
