"""A finished RayJob -> its actual runtime, our prediction's error, and one new observation.

Only succeeded jobs are learned from: a failed run's time says nothing about
how long training takes. The runtime is the Ray job's own (its start to its
end, as KubeRay reports them: ``RayJob``), start-up the time before it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice.features import Features
from rayjob_advisor.kuberay.rayjob import RayJob
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


def attempt_source(rayjob: RayJob) -> str:
    """The observation's key: one per RayJob uid and attempt (retries after failures count up)."""
    return f"rayjob:{rayjob.metadata.get('uid')}:{rayjob.attempt}"


def completion(body: Mapping[str, Any], features: Features | None) -> Completion:
    """What a finished RayJob's status says; ``features`` (when predictable) make it an observation."""
    rayjob = RayJob(body)
    if not rayjob.succeeded or features is None or features.dataset_size is None:
        return Completion(succeeded=rayjob.succeeded, outcome=rayjob.outcome)
    started, ended, created = rayjob.ray_job_started(), rayjob.ray_job_ended(), rayjob.created_at()
    observation = Observation.measured(
        features,
        execution_seconds=max((ended - started).total_seconds(), 0.001),
        startup_seconds=max((started - created).total_seconds(), 0.0),
        source=attempt_source(rayjob),
    )
    return Completion(
        succeeded=True, outcome=rayjob.outcome, observation=observation, predicted_seconds=_predicted(rayjob)
    )


def _predicted(rayjob: RayJob) -> float | None:
    """The median we predicted, from our own ``prediction`` annotation."""
    raw = rayjob.annotations.get(contract.PREDICTION)
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
            return f"the job failed; its deadline was {contract.format_timestamp(self.deadline)}"
        word = "before" if self.margin_seconds >= 0 else "after"
        return f"finished {contract.format_duration(abs(self.margin_seconds))} {word} its deadline"


def deadline_outcome(body: Mapping[str, Any], inputs: contract.AdvisorInputs) -> DeadlineOutcome | None:
    """The deadline outcome of a finished RayJob that had a deadline (None without one)."""
    if inputs.deadline is None:
        return None
    rayjob = RayJob(body)
    deadline = inputs.deadline.resolve(rayjob.created_at())
    if not rayjob.succeeded:
        return DeadlineOutcome(outcome="failed", deadline=deadline)
    margin = (deadline - rayjob.ray_job_ended()).total_seconds()
    return DeadlineOutcome(outcome="met" if margin >= 0 else "missed", deadline=deadline, margin_seconds=margin)
