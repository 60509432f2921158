"""A RayJob's features + a fitted runtime model -> its prediction and a what-if table."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import Any

import pydantic

from rayjob_advisor import contract, planner, profiles
from rayjob_advisor.config import OperatorConfig
from rayjob_advisor.features import Features, UnpredictableJob, features_from_rayjob
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import CONFIGURATION_FIELDS


class Prediction(pydantic.BaseModel):
    """What the ``prediction`` annotation holds.

    ``assumed``: features the profile never varied, predicted at the
    profile's value rather than the job's (e.g. ``cpus_per_worker``).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    model: str
    profile: str
    p50: float
    upper: float
    confidence: float
    features: dict[str, Any]
    assumed: dict[str, float]
    time: dt.datetime

    def annotations(self) -> dict[str, str]:
        """The annotations the advisor writes for this prediction (DESIGN §3)."""
        return {
            contract.PREDICTED_RUNTIME: contract.format_duration(self.p50),
            contract.PREDICTED_RUNTIME_SECONDS: f"{self.p50:.1f}",
            contract.PREDICTION: contract.compact_json(self.model_dump(mode="json")),
        }


def require_predictable(features: Features) -> None:
    """Raise with the missing input a user must add before anything can be predicted."""
    if features.dataset_size is None:
        raise UnpredictableJob(
            f"annotation {contract.DATASET_SIZE} is missing: the number of training samples is needed to predict"
        )


def predict(
    features: Features, model: RuntimeModel, profile: str, confidence: float, now: dt.datetime | None = None
) -> Prediction:
    """The median and upper-bound execution time of the job as submitted."""
    require_predictable(features)
    p50 = float(model.predict([features])[0])
    upper = float(model.predict_upper([features], confidence)[0])
    used = features.model_dump(include=set(CONFIGURATION_FIELDS) - {"workload"})
    return Prediction(
        model=model.selected_,
        profile=profile,
        p50=round(p50, 3),
        upper=round(upper, 3),
        confidence=confidence,
        features=used,
        assumed=model.assumptions(features),
        time=now or dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
    )


def forecast(
    rayjob: Mapping[str, Any],
    inputs: contract.AdvisorInputs,
    job: Features,
    model: RuntimeModel,
    profile: str,
    prices: planner.Prices,
    now: dt.datetime,
) -> tuple[Prediction, planner.Recommendation | None]:
    """The prediction and, when the RayJob has a deadline, the plan (the CLI and the operator share it).

    A deadline given as a duration counts from ``metadata.creationTimestamp``;
    at admission the API server has not set it yet, and it counts from now.
    """
    result = predict(job, model, profile, inputs.confidence, now)
    if inputs.deadline is None:
        return result, None
    created = (rayjob.get("metadata") or {}).get("creationTimestamp")
    deadline = inputs.deadline.resolve(contract.parse_timestamp(created) if created else now)
    plan = planner.recommend(job, model, deadline, now, inputs.confidence, model.startup_seconds_, prices)
    return result, plan


def what_if(
    job: Features, model: RuntimeModel, confidence: float, startup: float, prices: planner.Prices
) -> list[planner.Option]:
    """Predicted runtimes and costs over the scaled group's replica range (one row when it cannot be resized)."""
    require_predictable(job)
    return planner.options(job, model, planner.replica_counts(job), confidence, startup, prices)


class ProfileNotReady(Exception):
    """The job's profile has no fitted model yet: try again shortly, never fit on the request path."""


class Advice(pydantic.BaseModel):
    """What to change on a RayJob: annotations (``None`` removes one), for ``enforce`` the new worker
    groups with the ``original-replicas`` value to record when they are applied, and warnings that
    explain the decision or the bad input (admission prints them)."""

    def resize_annotations(self) -> dict[str, str | None]:
        """The annotations to write when ``worker_groups`` is applied too."""
        return {**self.annotations, contract.ORIGINAL_REPLICAS: self.original_replicas}

    model_config = pydantic.ConfigDict(frozen=True)

    annotations: dict[str, str | None]
    workload: str | None = None
    p50: float | None = None
    worker_groups: list[dict[str, Any]] | None = None
    original_replicas: str | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None

    @classmethod
    def bad_input(cls, message: str, workload: str | None = None) -> Advice:
        return cls(
            annotations={contract.ERROR: message}, workload=workload, warnings=(f"rayjob-advisor: {message}",), error=message
        )


def job_inputs(
    rayjob: Mapping[str, Any], config: OperatorConfig, namespace_labels: Mapping[str, str] | None = None
) -> contract.AdvisorInputs:
    """A RayJob's parsed advisor inputs, the configured default workload filling in a missing one."""
    metadata = rayjob.get("metadata") or {}
    inputs = contract.parse_inputs(metadata.get("annotations"), metadata.get("labels"), namespace_labels)
    return inputs.model_copy(update={"workload": inputs.workload or config.default_workload})


def advise(
    rayjob: Mapping[str, Any],
    store: profiles.ProfileStore,
    namespace_labels: Mapping[str, str] | None = None,
    config: OperatorConfig = OperatorConfig(),
    now: dt.datetime | None = None,
) -> Advice | None:
    """The advisor's changes to one RayJob not yet running, or None when its mode is ``off``.

    Always the prediction; with a deadline, the recommendation; in ``enforce``
    mode, the scaled group resized to it (``minReplicas``/``maxReplicas``
    widened to keep min <= replicas <= max) and ``original-replicas``.
    Bad input never raises: it becomes the ``error`` annotation and a warning.
    Raises ``ProfileNotReady`` while the profile's first fit is still running.
    """
    now = now or dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    metadata = rayjob.get("metadata") or {}
    try:
        inputs = job_inputs(rayjob, config, namespace_labels)
    except contract.AnnotationError as exc:
        return Advice.bad_input(str(exc))
    if inputs.mode == "off":
        return None
    try:
        job = features_from_rayjob(rayjob, inputs)
        require_predictable(job)
        if inputs.workload is None:
            raise profiles.UnknownWorkload(
                f"no workload: set the {contract.WORKLOAD} annotation or label to choose a RuntimeProfile"
            )
        profile = profiles_find(store, metadata.get("namespace") or "default", inputs.workload)
    except (UnpredictableJob, contract.AnnotationError, profiles.UnknownWorkload) as exc:
        return Advice.bad_input(str(exc), inputs.workload)
    result, plan = forecast(rayjob, inputs, job, profile.model, profile.label, config.prices, now)
    notes: dict[str, str | None] = {**result.annotations(), contract.ERROR: None}
    known = {"workload": inputs.workload, "p50": result.p50}
    if plan is None:
        return Advice(annotations=notes, **known)
    notes[contract.RECOMMENDATION] = plan.annotation()
    if inputs.mode != "enforce" or plan.replicas == plan.current_replicas or job.scale_group is None:
        return Advice(
            annotations=notes, warnings=(f"rayjob-advisor: recommends {plan.replicas} replicas: {plan.reason}",), **known
        )
    groups, original = resized_groups(rayjob, job.scale_group.index, plan.replicas)
    return Advice(
        annotations=notes,
        **known,
        worker_groups=groups,
        original_replicas=contract.compact_json(original),
        warnings=(
            f"rayjob-advisor: set {plan.group} replicas {plan.current_replicas} -> {plan.replicas}: {plan.reason}",
        ),
    )


def resized_groups(rayjob: Mapping[str, Any], index: int, replicas: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The worker groups with group ``index`` at ``replicas``, and what that group had before."""
    groups = copy.deepcopy(rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"])
    group = groups[index]
    original = {key: group.get(key) for key in ("groupName", "replicas", "minReplicas", "maxReplicas")}
    group["replicas"] = replicas
    group["minReplicas"] = min(group.get("minReplicas", replicas), replicas)
    group["maxReplicas"] = max(group.get("maxReplicas", replicas), replicas)
    return groups, original


def profiles_find(store: profiles.ProfileStore, namespace: str, workload: str) -> profiles.Profile:
    """The job's profile, fitted; a failed fit is the user's problem to see, a running one is not."""
    profile = store.find(namespace, workload)
    if profile.model is None:
        if profile.fit_error:
            raise profiles.UnknownWorkload(f"profile {profile.label}: {profile.fit_error}")
        raise ProfileNotReady(f"profile {profile.label} is being fitted")
    return profile
