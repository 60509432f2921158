"""A finished RayJob -> its actual runtime, our prediction's error, and one new observation.

KubeRay reports ``status.jobDeploymentStatus`` (``Complete``/``Failed``),
``status.jobStatus`` (``SUCCEEDED``, ``FAILED``, ``STOPPED``), the job's
``status.rayJobInfo.startTime``/``endTime`` and ``status.failed`` (attempts
that failed before). Only succeeded jobs are learned from: a failed run's
time says nothing about how long training takes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.features import Features
from rayjob_advisor.observations import Observation


class Completion(pydantic.BaseModel):
    """What a finished RayJob teaches: the run, and how far off our prediction was."""

    model_config = pydantic.ConfigDict(frozen=True)

    succeeded: bool
    outcome: str
    observation: Observation | None = None
    predicted_seconds: float | None = None

    @property
    def relative_error(self) -> float | None:
        """|predicted - actual| / actual, when both are known."""
        if self.observation is None or self.predicted_seconds is None:
            return None
        actual = self.observation.execution_seconds
        return abs(self.predicted_seconds - actual) / actual

    def annotations(self) -> dict[str, str]:
        """``actual-runtime-seconds`` and ``prediction-error`` (signed: predicted/actual - 1)."""
        if self.observation is None:
            return {}
        actual = self.observation.execution_seconds
        values = {contract.ACTUAL_RUNTIME_SECONDS: f"{actual:.1f}"}
        if self.predicted_seconds is not None:
            values[contract.PREDICTION_ERROR] = f"{self.predicted_seconds / actual - 1:+.4f}"
        return values


def attempt_source(uid: str, status: Mapping[str, Any] | None) -> str:
    """The observation's key: one per RayJob uid and attempt (retries after failures count up)."""
    return f"rayjob:{uid}:{int((status or {}).get('failed') or 0)}"


def _time(value: Any, what: str) -> dt.datetime:
    if not isinstance(value, str):
        raise ValueError(f"{what} is missing")
    return contract.parse_timestamp(value)


def completion(rayjob: Mapping[str, Any], features: Features | None) -> Completion:
    """What a finished RayJob's status says; ``features`` (when predictable) make it an observation."""
    metadata, status = rayjob.get("metadata") or {}, rayjob.get("status") or {}
    outcome = status.get("jobStatus") or status.get("jobDeploymentStatus") or "UNKNOWN"
    succeeded = status.get("jobDeploymentStatus") == "Complete" and outcome == "SUCCEEDED"
    if not succeeded or features is None or features.dataset_size is None:
        return Completion(succeeded=succeeded, outcome=outcome)
    info = status.get("rayJobInfo") or {}
    started = _time(info.get("startTime"), "status.rayJobInfo.startTime")
    ended = _time(info.get("endTime"), "status.rayJobInfo.endTime")
    created = _time(metadata.get("creationTimestamp"), "metadata.creationTimestamp")
    observation = Observation.measured(
        features,
        execution_seconds=max((ended - started).total_seconds(), 0.001),
        startup_seconds=max((started - created).total_seconds(), 0.0),
        source=attempt_source(str(metadata.get("uid")), status),
    )
    return Completion(succeeded=True, outcome=outcome, observation=observation, predicted_seconds=_predicted(metadata))


def _predicted(metadata: Mapping[str, Any]) -> float | None:
    """The median we predicted, from our own ``prediction`` annotation."""
    raw = (metadata.get("annotations") or {}).get(contract.PREDICTION)
    try:
        return float(json.loads(raw)["p50"]) if raw else None
    except (ValueError, KeyError, TypeError):
        return None


class DeadlineOutcome(pydantic.BaseModel):
    """Whether a finished RayJob met its deadline: ``met``, ``missed`` or ``failed``, and by how much."""

    model_config = pydantic.ConfigDict(frozen=True)

    outcome: str
    deadline: dt.datetime
    margin_seconds: float | None = None  # deadline - end: positive when met, negative when missed

    def message(self) -> str:
        if self.margin_seconds is None:
            return f"the job failed; its deadline was {self.deadline.isoformat()}"
        word = "before" if self.margin_seconds >= 0 else "after"
        return f"finished {contract.format_duration(abs(self.margin_seconds))} {word} its deadline"


def deadline_outcome(rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs) -> DeadlineOutcome | None:
    """The deadline outcome of a finished RayJob that had a deadline (None without one)."""
    if inputs.deadline is None:
        return None
    metadata, status = rayjob.get("metadata") or {}, rayjob.get("status") or {}
    deadline = inputs.deadline.resolve(_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp"))
    if status.get("jobDeploymentStatus") != "Complete" or status.get("jobStatus") != "SUCCEEDED":
        return DeadlineOutcome(outcome="failed", deadline=deadline)
    ended = _time((status.get("rayJobInfo") or {}).get("endTime"), "status.rayJobInfo.endTime")
    margin = (deadline - ended).total_seconds()
    return DeadlineOutcome(outcome="met" if margin >= 0 else "missed", deadline=deadline, margin_seconds=margin)
