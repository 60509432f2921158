"""A RayJob's features + a fitted runtime model -> its prediction and a what-if table."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice import planner
from rayjob_advisor.advice.features import Features
from rayjob_advisor.errors import UnpredictableJob
from rayjob_advisor.kuberay.rayjob import RayJob
from rayjob_advisor.models import transfer
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.observations import (
    CONFIGURATION_FIELDS,
    Observation,
    choose_accelerator,
    measured_accelerators,
)

SHOWN_FIELDS = {"batch_size_per_worker", "batch_held", "placement"}  # beside the model's, in ``features``


class Prediction(pydantic.BaseModel):
    """What the ``prediction`` annotation holds.

    ``features``: what the model was given; ``workers`` are Ray Train workers,
    and ``workers_from`` says how the job sets them (``env:NAME``,
    ``arg:FLAG``, ``cluster`` or ``unknown``: one per pod). ``batch_size`` is
    the global batch, ``batch_size_per_worker`` its share per worker and
    ``batch_held`` the one a resize keeps fixed (the batch rule of
    ``contract``); ``placement`` the RayJob's own hint (None: none).

    ``assumed``: what the model put in place of the job's values — features
    the profile never varied (e.g. ``cpus_per_worker``), inputs the job did
    not give, defaulted from the profile (e.g. ``batch_size_per_worker``,
    ``placement``), and ``accelerator`` when the runs were measured on
    another one than the job's (it names none, or the profile has no runs on it);
    ``cluster``, the existing RayCluster whose groups it was predicted from,
    and ``autoscaling`` where that cluster's autoscaler may change their size.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    model: str
    profile: str
    p50: float
    upper: float
    confidence: float
    features: dict[str, Any]
    assumed: dict[str, float | str]
    time: dt.datetime

    @property
    def assumptions(self) -> str:
        """``assumed`` in words for people: ``epochs=1, placement=packed`` (empty when nothing was assumed)."""
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.assumed.items())

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
    features: Features,
    model: RuntimeModel,
    profile: str,
    confidence: float,
    now: dt.datetime | None = None,
    assumed_accelerator: str | None = None,
) -> Prediction:
    """The median and upper-bound execution time of the job as submitted.

    ``assumed_accelerator``: the model's runs were measured on it, not on the
    job's accelerator (``AcceleratorChoice.assumed``).
    """
    require_predictable(features)
    estimates = model.estimate([features], confidence)
    p50, upper = float(estimates.p50[0]), float(estimates.upper[0])
    used = features.model_dump(include=set(CONFIGURATION_FIELDS) - {"workload"} | SHOWN_FIELDS)
    used["workers_from"] = features.training.method
    return Prediction(
        model=model.predicted_by(features),
        profile=profile,
        p50=round(p50, 3),
        upper=round(upper, 3),
        confidence=confidence,
        features=used,
        assumed={
            **model.assumptions(features),
            **({"accelerator": assumed_accelerator} if assumed_accelerator else {}),
            **({"cluster": features.cluster} if features.cluster else {}),
            **({"autoscaling": features.autoscaling} if features.autoscaling else {}),
        },
        time=now or contract.now(),
    )


def what_if(
    job: Features,
    model: RuntimeModel,
    confidence: float,
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
    return planner.options(job, model, sizes, confidence, prices)


class AcceleratorOption(planner.Option):
    """One what-if row of the job on ``accelerator``: a size, its runtimes, cost at that accelerator's price."""

    accelerator: str
    meets_deadline: bool | None  # start-up plus the upper bound ends before the deadline; None: the job has none


def compare_accelerators(
    rayjob: Mapping[str, Any],
    inputs: contract.AdvisorInputs,
    job: Features,
    observations: Sequence[Observation],
    accelerators: Sequence[str],
    prices: planner.Prices,
    now: dt.datetime,
    fitted: Mapping[str | None, RuntimeModel] | None = None,
) -> tuple[list[AcceleratorOption], dict[str, str]]:
    """The job's what-if table on each of ``accelerators``, each from its own runs; why some have no rows.

    Only the accelerator's own runs (and those naming none) predict it, or
    the most measured accelerator's model transferred with a speed factor
    learned from them (``models.transfer``): an accelerator without runs is
    never stood in for here. Models are
    fitted once per set of runs, so runs that name no accelerator fit once;
    ``fitted``: models at hand, by the accelerator of their runs (``runs_on``).
    """
    require_predictable(job)
    measured = measured_accelerators(observations)
    deadline = RayJob(rayjob).deadline(inputs, now)
    left = (deadline - now).total_seconds() if deadline else None  # the same for every accelerator
    models = dict(fitted or {})
    rows: list[AcceleratorOption] = []
    missing: dict[str, str] = {}
    for name in dict.fromkeys(contract.canonical_accelerator(a) for a in accelerators):
        choice = choose_accelerator(measured, name)
        if choice.assumed is not None:
            missing[name] = f"the profile has no runs on {name} (measured on {', '.join(measured)})"
            continue
        if choice.used not in models:
            main = models.get(measured[0] if measured else None)
            models[choice.used] = transfer.model_on(observations, choice.used, main)
        model, variant = models[choice.used], job.model_copy(update={"accelerator": name})
        for option in what_if(variant, model, inputs.confidence, prices):
            meets = None if left is None else option.in_time(left)
            rows.append(AcceleratorOption(**option.model_dump(), accelerator=name, meets_deadline=meets))
    return rows, missing
