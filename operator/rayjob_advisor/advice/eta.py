"""A running RayJob's expected end (ETA), refined by progress reports, and the warnings it deserves.

The prediction's median and upper bound are execution times, counted from
the Ray job's start (``RayJob.started``), so the ETA is that start plus each. Progress reports
(steps or epochs done of a total) refine it: the remaining time blends what
the prediction says is left of the work with what the observed rate says,
trusting the rate in proportion to the work it has seen. The upper bound
stays honest: its spread over the median shrinks with the work left, and it
is never earlier than the observed rate's own projection.

Two Warning Events, each posted once per job (recorded in the ``alerts``
annotation, so a restarted or new leader does not post them again):
``DeadlineAtRisk`` when the upper bound's end passes the deadline while the
deadline is still ahead, and ``RuntimeOverrun`` when the job has run longer
than the prediction's upper bound (what its coverage promised).

Every number read here is a tenant's to edit (the ``prediction``, ``eta``
and ``progress`` annotations of their job, the reports they send), so each
is bounded where it is parsed: finite, at most ``MAX_SECONDS`` of runtime or
``contract.MAX_COUNT`` steps, times with their offset. Out of bounds, it is
no prediction (no ETA, no warnings for that job) or a refused report, never
an overflow in the sweep that every job shares.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic

from rayjob_advisor import contract, reasons
from rayjob_advisor.errors import NotRefinable
from rayjob_advisor.kuberay.manifest import MergePatch
from rayjob_advisor.kuberay.rayjob import RayJob

MAX_SECONDS = 10 * 366 * 86400.0  # ten years of runtime: more is an edit of the annotation, not a prediction
Seconds = Annotated[float, pydantic.Field(ge=1e-3, le=MAX_SECONDS, allow_inf_nan=False)]
"""Runtime: finite, from a millisecond (as the runs of a profile) to ten years."""
Work = Annotated[float, pydantic.Field(ge=0, le=contract.MAX_COUNT, allow_inf_nan=False)]
"""Steps or epochs: finite, at most a trillion."""
# Kubernetes' names: a namespace is a DNS label, a RayJob's name a DNS subdomain; a uid is a UUID.
_NAMESPACE = pydantic.Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME = pydantic.Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")


class Bounds(pydantic.BaseModel):
    """What the ``prediction`` annotation says of the execution time: median and upper bound, in seconds."""

    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")

    p50: Seconds
    upper: Seconds
    confidence: contract.Confidence = 0.9


class Eta(pydantic.BaseModel):
    """The expected end of a running job at the median and at the upper bound."""

    model_config = pydantic.ConfigDict(frozen=True)

    median: pydantic.AwareDatetime
    upper: pydantic.AwareDatetime

    def annotations(self) -> dict[str, str]:
        return {
            contract.ETA: contract.format_timestamp(self.median),
            contract.ETA_UPPER: contract.format_timestamp(self.upper),
        }


class Report(pydantic.BaseModel):
    """One progress report of a running job, as the Ray Train callback sends it."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    namespace: str = _NAMESPACE
    name: str = _NAME
    uid: str | None = pydantic.Field(default=None, max_length=64, pattern=r"^[-0-9a-zA-Z]+$")
    """The RayJob's uid, when the reporter knows it: a report for an older job of that name is refused."""
    done: Work
    total: Work = pydantic.Field(gt=0)
    unit: Literal["steps", "epochs"] = "steps"

    @pydantic.model_validator(mode="after")
    def _done_within_total(self) -> Report:
        if self.done > self.total:
            raise ValueError(f"done ({self.done:g}) is more than total ({self.total:g})")
        return self


class Progress(pydantic.BaseModel):
    """What the ``progress`` annotation keeps: the first and the latest report (time and work done)."""

    model_config = pydantic.ConfigDict(frozen=True)

    unit: str = pydantic.Field(max_length=16)
    total: Work
    first_time: pydantic.AwareDatetime
    first_done: Work
    time: pydantic.AwareDatetime
    done: Work


class Alert(pydantic.BaseModel):
    """A Warning Event due on a running job."""

    model_config = pydantic.ConfigDict(frozen=True)

    reason: str  # reasons.DEADLINE_AT_RISK or reasons.RUNTIME_OVERRUN
    text: str


def bounds(annotations: Mapping[str, str]) -> Bounds | None:
    """The median and upper bound of our ``prediction`` annotation; None without a (valid) one."""
    try:
        return Bounds.model_validate(json.loads(annotations[contract.PREDICTION]))
    except (KeyError, ValueError, TypeError):
        return None


def written(annotations: Mapping[str, str]) -> Eta | None:
    """The ETA in the ``eta``/``eta-upper`` annotations; None when absent or malformed."""
    try:
        median, upper = annotations[contract.ETA], annotations[contract.ETA_UPPER]
        return Eta(median=contract.parse_timestamp(median), upper=contract.parse_timestamp(upper))
    except (KeyError, ValueError):
        return None


def at_start(body: Mapping[str, Any]) -> Eta | None:
    """A running job's ETA from its start and prediction; None when it has no start time or was not predicted."""
    rayjob = RayJob(body)
    start, predicted = rayjob.started, bounds(rayjob.annotations)
    if not rayjob.running or start is None or predicted is None:
        return None
    return Eta(median=start + _seconds(predicted.p50), upper=start + _seconds(predicted.upper))


def on_start(body: Mapping[str, Any]) -> MergePatch:
    """The ETA annotations of a job that has just started; none when it has them (progress may have refined them)."""
    if written(RayJob(body).annotations) is not None:
        return {}
    eta = at_start(body)
    return {"metadata": {"annotations": eta.annotations()}} if eta is not None else {}


def due_alerts(body: Mapping[str, Any], now: dt.datetime) -> list[Alert]:
    """The Warning Events a running job deserves now and has not had yet."""
    rayjob = RayJob(body)
    start, predicted = rayjob.started, bounds(rayjob.annotations)
    if not rayjob.running or start is None or predicted is None:
        return []
    posted = set(rayjob.annotations.get(contract.ALERTS, "").split(","))
    due = []
    deadline = _deadline(rayjob, now)
    current = written(rayjob.annotations)
    end = current.upper if current is not None else start + _seconds(predicted.upper)
    if reasons.DEADLINE_AT_RISK not in posted and deadline is not None and end > deadline > now:
        late, left = contract.format_duration((end - deadline).total_seconds()), (deadline - now).total_seconds()
        text = (
            f"may miss its deadline {contract.format_timestamp(deadline)}: its upper bound ends at "
            f"{contract.format_timestamp(end)}, {late} late; {contract.format_duration(left)} left to act"
        )
        due.append(Alert(reason=reasons.DEADLINE_AT_RISK, text=text))
    elapsed = (now - start).total_seconds()
    if reasons.RUNTIME_OVERRUN not in posted and elapsed > predicted.upper:
        text = (
            f"has run {contract.format_duration(elapsed)}, longer than its predicted upper bound "
            f"{contract.format_duration(predicted.upper)} (confidence {predicted.confidence:g})"
        )
        due.append(Alert(reason=reasons.RUNTIME_OVERRUN, text=text))
    return due


def posted(body: Mapping[str, Any], alerts: list[Alert]) -> MergePatch:
    """The ``alerts`` annotation once ``alerts`` are posted too (what keeps them from being posted again)."""
    before = {reason for reason in RayJob(body).annotations.get(contract.ALERTS, "").split(",") if reason}
    reasons = ",".join(sorted(before | {alert.reason for alert in alerts}))
    return {"metadata": {"annotations": {contract.ALERTS: reasons}}}


def refine(body: Mapping[str, Any], report: Report, now: dt.datetime) -> tuple[Eta, MergePatch]:
    """The ETA after a progress report, and the annotations that record it. Raises ``NotRefinable``."""
    rayjob = RayJob(body)
    start, predicted = rayjob.started, bounds(rayjob.annotations)
    if not rayjob.running or start is None:
        raise NotRefinable(f"RayJob {rayjob.namespace}/{report.name} is not running")
    if predicted is None:
        raise NotRefinable(f"RayJob {rayjob.namespace}/{report.name} has no prediction to refine")
    previous = _progress(rayjob.annotations)
    if (
        previous is None
        or (previous.unit, previous.total) != (report.unit, report.total)
        or previous.done > report.done
    ):
        previous = None  # a new count (another unit or total, or a restarted run): measure the rate afresh
    first_time, first_done = (previous.first_time, previous.first_done) if previous else (now, report.done)
    fraction = report.done / report.total
    predicted_left = (1 - fraction) * predicted.p50
    rate = _rate(report.done - first_done, (now - first_time).total_seconds())
    if rate is None:  # one report so far: the rate since the start (start-up included, so a slow estimate)
        rate = _rate(report.done, (now - start).total_seconds())
    observed_left = (report.total - report.done) / rate if rate else None
    if observed_left is None:
        left, upper_left = predicted_left, (1 - fraction) * predicted.upper
    else:
        left = (1 - fraction) * predicted_left + fraction * observed_left
        spread = max(predicted.upper / predicted.p50, 1.0)
        upper_left = max(left * (1 + (spread - 1) * (1 - fraction)), observed_left)
    # a trickle of work (a report of 1e-9 steps done) projects beyond any date: no ETA is further than MAX_SECONDS
    eta = Eta(median=now + _seconds(min(left, MAX_SECONDS)), upper=now + _seconds(min(upper_left, MAX_SECONDS)))
    progress = Progress(
        unit=report.unit, total=report.total, first_time=first_time, first_done=first_done, time=now, done=report.done
    )
    notes = {**eta.annotations(), contract.PROGRESS: contract.compact_json(progress.model_dump(mode="json"))}
    return eta, {"metadata": {"annotations": notes}}


def _rate(work: float, seconds: float) -> float | None:
    return work / seconds if work > 0 and seconds > 0 else None


def _progress(annotations: Mapping[str, str]) -> Progress | None:
    try:
        return Progress.model_validate_json(annotations[contract.PROGRESS])
    except (KeyError, pydantic.ValidationError):
        return None


def _deadline(rayjob: RayJob, now: dt.datetime) -> dt.datetime | None:
    """The job's absolute deadline, if it has a valid one (a bad one is reported by the prediction already)."""
    try:
        return rayjob.deadline(contract.parse_inputs(rayjob.annotations, rayjob.labels), now)
    except ValueError:  # AnnotationError, or a malformed creationTimestamp
        return None


def _seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)
