"""A RayJob's features + a fitted runtime model -> its prediction and a what-if table."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract, planner
from rayjob_advisor.features import Features, UnpredictableJob
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import CONFIGURATION_FIELDS
from rayjob_advisor.rayjob import RayJob


class Prediction(pydantic.BaseModel):
    """What the ``prediction`` annotation holds.

    ``features``: what the model was given; ``workers`` are Ray Train workers,
    and ``workers_from`` says how the job sets them (``env:NAME``,
    ``arg:FLAG``, ``cluster`` or ``unknown``: one per pod).

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
    used["workers_from"] = features.training.method
    return Prediction(
        model=model.selected_,
        profile=profile,
        p50=round(p50, 3),
        upper=round(upper, 3),
        confidence=confidence,
        features=used,
        assumed=model.assumptions(features),
        time=now or dt.datetime.now(dt.UTC).replace(microsecond=0),
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
    deadline = inputs.deadline.resolve(RayJob(rayjob).created(now))
    plan = planner.recommend(job, model, deadline, now, inputs.confidence, model.startup_seconds_, prices)
    return result, plan


def what_if(
    job: Features,
    model: RuntimeModel,
    confidence: float,
    startup: float,
    prices: planner.Prices,
    replicas: Sequence[int] = (),
    gpus: Sequence[float] = (),
) -> list[planner.Option]:
    """Predicted runtimes and costs of every size the planner considers (one row when it cannot be resized).

    ``replicas``, ``gpus``: replica counts and GPUs per worker to try instead of the planner's, also where
    it may not go (a question to the model, not a plan).
    """
    require_predictable(job)
    sizes = planner.sizes(job, model)
    if replicas or gpus:
        if job.scale_group is None:
            raise UnpredictableJob("this RayJob has no worker group to resize")
        planned_replicas, planned_gpus = sorted({r for r, _ in sizes}), sorted({g for _, g in sizes})
        sizes = list(itertools.product(replicas or planned_replicas, gpus or planned_gpus))
    return planner.options(job, model, sizes, confidence, startup, prices)
