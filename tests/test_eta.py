"""Running jobs: the ETA at start, its refinement by progress, DeadlineAtRisk and RuntimeOverrun once per job."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from rayjob_advisor import contract as ann
from rayjob_advisor.advice import eta
from rayjob_advisor.errors import NotRefinable
from rayjob_advisor_testkit.advisor import QUICK_REFITS, running_advisor
from rayjob_advisor_testkit.emulator import rfc3339
from rayjob_advisor_testkit.lifecycle import notes
from rayjob_advisor_testkit.profiles import WORKLOAD, profile_manifest
from rayjob_advisor_testkit.profiles import profiled_rayjob as job
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group
from rayjob_advisor_testkit.resources import AdvisorEmulator

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
PREDICTION = {"model": "m", "profile": "default/p", "p50": 600.0, "upper": 900.0, "confidence": 0.9}


def running(start: dt.datetime = START, **notes: str) -> dict:
    """A RayJob KubeRay reports running since ``start``, predicted at 10 min (upper bound 15 min)."""
    body = make_rayjob(annotations={ann.PREDICTION: json.dumps(PREDICTION), **notes}, groups=[worker_group()])
    body["metadata"].update(name="train", namespace="default", uid="u-1", creationTimestamp=rfc3339(start))
    body["status"] = {"jobDeploymentStatus": "Running", "startTime": rfc3339(start - dt.timedelta(minutes=2)),
                      "rayJobInfo": {"startTime": rfc3339(start)}}  # fmt: skip
    return body


def annotated(body: dict, patch: dict) -> dict:
    body = json.loads(json.dumps(body))
    body["metadata"]["annotations"].update(patch["metadata"]["annotations"])
    return body


def test_the_eta_is_the_ray_jobs_start_plus_the_median_and_the_upper_bound():
    patch = eta.on_start(running())
    assert patch["metadata"]["annotations"] == {ann.ETA: "2026-03-01T12:10:00Z", ann.ETA_UPPER: "2026-03-01T12:15:00Z"}
    # KubeRay's own start (before the cluster was up) when the Ray job's is not known yet
    no_info = running()
    del no_info["status"]["rayJobInfo"]
    assert eta.on_start(no_info)["metadata"]["annotations"][ann.ETA] == "2026-03-01T12:08:00Z"


def test_no_eta_without_a_prediction_or_a_start_and_none_rewritten():
    unpredicted = running()
    del unpredicted["metadata"]["annotations"][ann.PREDICTION]
    assert eta.on_start(unpredicted) == {}
    waiting = running()
    waiting["status"] = {"jobDeploymentStatus": "Initializing"}
    assert eta.on_start(waiting) == {}
    refined = running(**{ann.ETA: "2026-03-01T12:05:00Z", ann.ETA_UPPER: "2026-03-01T12:07:00Z"})
    assert eta.on_start(refined) == {}  # progress refined it: the start handler (on resume too) keeps it


def test_an_overrun_is_due_once_the_upper_bound_has_passed_and_only_once():
    body = running()
    assert eta.due_alerts(body, START + dt.timedelta(minutes=14)) == []
    (overrun,) = eta.due_alerts(body, START + dt.timedelta(minutes=16))
    assert overrun.reason == "RuntimeOverrun" and "16m" in overrun.text and "15m" in overrun.text
    after = annotated(body, eta.posted(body, [overrun]))
    assert after["metadata"]["annotations"][ann.ALERTS] == "RuntimeOverrun"
    assert eta.due_alerts(after, START + dt.timedelta(hours=3)) == []


def test_a_deadline_is_at_risk_while_it_is_ahead_and_the_upper_bound_ends_after_it():
    body = running(**{ann.DEADLINE: "2026-03-01T12:13:00Z"})
    (risk,) = eta.due_alerts(body, START + dt.timedelta(minutes=1))
    assert risk.reason == "DeadlineAtRisk" and "2m" in risk.text and "12m" in risk.text  # 2m late, 12m to act
    assert eta.due_alerts(body, START + dt.timedelta(minutes=13, seconds=1)) == []  # too late to act: no warning
    assert eta.due_alerts(running(**{ann.DEADLINE: "2026-03-01T12:20:00Z"}), START) == []
    # a refined upper bound counts: progress showing the job ends by 12:12 takes the risk away
    safe = running(**{ann.DEADLINE: "2026-03-01T12:13:00Z", ann.ETA: "2026-03-01T12:10:00Z",
                      ann.ETA_UPPER: "2026-03-01T12:12:00Z"})  # fmt: skip
    assert eta.due_alerts(safe, START + dt.timedelta(minutes=1)) == []
    both = eta.posted(body, [risk])["metadata"]["annotations"][ann.ALERTS]
    assert both == "DeadlineAtRisk"


@pytest.mark.parametrize(
    "prediction", ['{"p50": 1, "upper": 1e300}', '{"p50": 1, "upper": Infinity}', '{"p50": NaN, "upper": 9}']
)
def test_an_edited_prediction_out_of_bounds_is_no_prediction(prediction):
    """A tenant may edit their job's annotations: an unbounded number would overflow the ETA arithmetic."""
    body = running(**{ann.PREDICTION: prediction, ann.ETA: "soon", ann.ETA_UPPER: "2026-03-01T12:15:00"})
    assert eta.bounds(body["metadata"]["annotations"]) is None
    assert eta.written(body["metadata"]["annotations"]) is None  # garbage, and a time without its offset
    assert eta.due_alerts(body, START + dt.timedelta(days=400)) == [] and eta.on_start(body) == {}


def report(done: float, total: float = 100, unit: str = "steps") -> eta.Report:
    return eta.Report(namespace="default", name="train", done=done, total=total, unit=unit)


def test_progress_slower_than_predicted_moves_the_eta_later_and_the_upper_bound_with_it():
    body = running()
    # first report: 10 % after 2 min (start-up included); then 40 % at 8 min: 30 % per 6 min, 12 min left at that rate
    first, patch = eta.refine(body, report(10), START + dt.timedelta(minutes=2))
    assert first.median > START + dt.timedelta(minutes=10)  # one report: the rate since the start, start-up and all
    body = annotated(body, patch)
    refined, patch = eta.refine(body, report(40), START + dt.timedelta(minutes=8))
    now = START + dt.timedelta(minutes=8)
    observed_end = now + dt.timedelta(minutes=12)
    predicted_end = START + dt.timedelta(minutes=10)
    assert predicted_end < refined.median < observed_end  # a blend: 0.6 x 6 min (prediction) + 0.4 x 12 min
    assert refined.median == now + dt.timedelta(seconds=0.6 * 0.6 * 600 + 0.4 * 12 * 60)
    assert refined.upper >= observed_end  # honest: never earlier than the observed rate's projection
    notes = patch["metadata"]["annotations"]
    assert notes[ann.ETA] == ann.format_timestamp(refined.median) and notes[ann.ETA_UPPER]
    progress = json.loads(notes[ann.PROGRESS])
    assert progress["first_done"] == 10 and progress["done"] == 40 and progress["unit"] == "steps"


def test_progress_faster_than_predicted_brings_the_eta_forward_and_the_end_has_no_spread():
    body = running()
    _, patch = eta.refine(body, report(1, 4, "epochs"), START + dt.timedelta(minutes=1))
    body = annotated(body, patch)
    refined, patch = eta.refine(body, report(3, 4, "epochs"), START + dt.timedelta(minutes=3))
    assert refined.median < START + dt.timedelta(minutes=10) and refined.upper < START + dt.timedelta(minutes=15)
    done, _ = eta.refine(annotated(body, patch), report(4, 4, "epochs"), START + dt.timedelta(minutes=4))
    assert done.median == done.upper == START + dt.timedelta(minutes=4)


def test_a_report_must_be_consistent_and_for_a_running_predicted_job():
    with pytest.raises(ValueError, match="more than total"):
        eta.Report(namespace="default", name="train", done=5, total=4)
    waiting = running()
    waiting["status"] = {"jobDeploymentStatus": "Initializing"}
    with pytest.raises(NotRefinable, match="not running"):
        eta.refine(waiting, report(1), START)
    unpredicted = running()
    del unpredicted["metadata"]["annotations"][ann.PREDICTION]
    with pytest.raises(NotRefinable, match="no prediction"):
        eta.refine(unpredicted, report(1), START)


# The real operator against the emulator.


def warnings(api: AdvisorEmulator, name: str, reason: str) -> list[dict]:
    return [
        event
        for event in api.objects("events", "default")
        if event["involvedObject"]["name"] == name and event["reason"] == reason
    ]


def start(api: AdvisorEmulator, name: str, at: dt.datetime) -> None:
    api.set_rayjob_status("default", name, deployment_status="Running", job_status="RUNNING", start_time=at)


@pytest.fixture
def api():
    with AdvisorEmulator() as emulator:
        emulator.create(profile_manifest())
        yield emulator
        assert not [v for v in emulator.violations if v.rejected], "the operator wrote an invalid object"


def test_a_job_gets_its_eta_and_gauge_within_a_second_of_starting(api):
    with running_advisor(api=api, **QUICK_REFITS) as advisor:
        api.create(job("quick"))
        prediction = json.loads(api.wait_until(lambda: notes(api, "quick").get(ann.PREDICTION), 60))
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        started = time.monotonic()
        start(api, "quick", now)
        api.wait_until(lambda: notes(api, "quick").get(ann.ETA), 5)
        delay = time.monotonic() - started
        assert delay < 1.0, f"the ETA came {delay:.2f} s after the start"
        written = notes(api, "quick")
        for key, seconds in ((ann.ETA, prediction["p50"]), (ann.ETA_UPPER, prediction["upper"])):
            assert 0 <= seconds - (ann.parse_timestamp(written[key]) - now).total_seconds() < 1  # whole seconds
        uid = api.get("rayjobs", "default", "quick")["metadata"]["uid"]
        labels = {"namespace": "default", "name": "quick", "uid": uid}
        registry = advisor.memo.metrics.registry
        gauge = api.wait_until(lambda: registry.get_sample_value("rayjob_advisor_eta_timestamp_seconds", labels))
        assert gauge == ann.parse_timestamp(written[ann.ETA]).timestamp()


def test_an_overrunning_job_is_warned_and_counted_once_even_across_restarts(api):
    config = {**QUICK_REFITS, "sweep_interval_seconds": 0.1}
    with running_advisor(api=api, **config) as advisor:
        api.create(job("slow", **{ann.DEADLINE: "2h"}))
        api.wait_until(lambda: notes(api, "slow").get(ann.PREDICTION), 60)
        start(api, "slow", dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30))  # far past a ~6 s upper bound
        (event,) = api.wait_until(lambda: warnings(api, "slow", "RuntimeOverrun"), 10)
        assert event["type"] == "Warning" and "longer than its predicted upper bound" in event["message"]
        time.sleep(0.5)  # several sweeps
        assert len(warnings(api, "slow", "RuntimeOverrun")) == 1
        assert notes(api, "slow")[ann.ALERTS] == "RuntimeOverrun"
        counted = advisor.memo.metrics.registry.get_sample_value(
            "rayjob_advisor_upper_bound_exceeded_total", {"namespace": "default", "workload": WORKLOAD}
        )
        assert counted == 1
        assert not warnings(api, "slow", "DeadlineAtRisk")  # its upper bound ends long before its 2 h deadline
    with running_advisor(api=api, **config) as restarted:
        time.sleep(0.5)
        assert len(warnings(api, "slow", "RuntimeOverrun")) == 1
        assert not restarted.memo.metrics.registry.get_sample_value(
            "rayjob_advisor_upper_bound_exceeded_total", {"namespace": "default", "workload": WORKLOAD}
        )


def test_a_job_whose_upper_bound_ends_after_its_deadline_is_at_risk_while_time_remains(api):
    with running_advisor(api=api, **QUICK_REFITS, sweep_interval_seconds=0.1):
        now = dt.datetime.now(dt.UTC)
        deadline = rfc3339(now + dt.timedelta(minutes=5))
        api.create(job("late", **{ann.DEADLINE: deadline}))
        api.wait_until(lambda: notes(api, "late").get(ann.PREDICTION), 60)
        # the cluster took long to come up: started 4m58s before the deadline, the upper bound (~6 s) ends after it
        start(api, "late", now + dt.timedelta(minutes=5) - dt.timedelta(seconds=2))
        (event,) = api.wait_until(lambda: warnings(api, "late", "DeadlineAtRisk"), 10)
        assert f"may miss its deadline {deadline}" in event["message"] and "left to act" in event["message"]
        assert not warnings(api, "late", "RuntimeOverrun")


def test_one_jobs_edited_annotations_or_bad_start_do_not_silence_the_other_jobs_warnings(api):
    """The sweep poisoning of issue 21: a job checked first whose numbers overflow (an edited ``prediction``, or a
    start in the year 9999 no bound of ours covers) is that job's failure, counted; the jobs after it are warned."""
    with running_advisor(api=api, **QUICK_REFITS, sweep_interval_seconds=0.1) as advisor:
        for name in ("poisoned", "far-future", "victim"):
            api.create(job(name))
        for name in ("poisoned", "far-future", "victim"):
            api.wait_until(lambda name=name: notes(api, name).get(ann.PREDICTION), 60)
        start(api, "poisoned", dt.datetime.now(dt.UTC))
        api.wait_until(lambda: notes(api, "poisoned").get(ann.ETA), 5)
        edit = {ann.PREDICTION: '{"p50": 1, "upper": 1e300}', ann.ETA_UPPER: "garbage"}
        api.patch("rayjobs", "default", "poisoned", {"metadata": {"annotations": edit}})
        start(api, "far-future", dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC))
        time.sleep(0.5)  # both checked by several sweeps first
        start(api, "victim", dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30))
        (event,) = api.wait_until(lambda: warnings(api, "victim", "RuntimeOverrun"), 10)
        assert "longer than its predicted upper bound" in event["message"]
        registry = advisor.memo.metrics.registry
        failures = registry.get_sample_value("rayjob_advisor_background_failures_total", {"loop": "sweep"})
        assert failures is not None and failures >= 1  # the far-future job's overflow, once per sweep
        assert advisor.memo.sweeper is not None and advisor.memo.sweeper.problem() is None  # others succeed
        assert not warnings(api, "poisoned", "RuntimeOverrun")  # its edited prediction is no prediction
