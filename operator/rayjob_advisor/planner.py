"""Deadline -> the cheapest replica count of the scaled group that finishes in time.

A replica count fits when the expected start-up plus the runtime's upper
bound (at the job's confidence) ends before the deadline. Among those that
fit, the cheapest wins — worker-seconds of expected runtime, weighted by CPU
and GPU prices — and among equally cheap ones the fewest replicas. When none
fits, the fastest is chosen and the recommendation says by how much it
misses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import pydantic

from rayjob_advisor import contract
from rayjob_advisor.features import Features
from rayjob_advisor.models.design import Runlike

MAX_CANDIDATES = 16


class Prices(pydantic.BaseModel):
    """What a worker costs per hour, per CPU and per GPU (any currency; only ratios matter)."""

    model_config = pydantic.ConfigDict(frozen=True)

    cpu_hour: float = pydantic.Field(default=0.05, ge=0)
    gpu_hour: float = pydantic.Field(default=2.5, ge=0)

    def worker_hour(self, job: Features) -> float:
        return (job.cpus_per_worker or 1.0) * self.cpu_hour + job.gpus_per_worker * self.gpu_hour


class RuntimePredictor(Protocol):
    """What the planner needs of a fitted ``RuntimeModel``."""

    def predict(self, runs: Sequence[Runlike]) -> Iterable[float]: ...

    def predict_upper(self, runs: Sequence[Runlike], confidence: float) -> Iterable[float]: ...


class Option(pydantic.BaseModel):
    """One replica count: its Ray Train workers, predicted runtimes (seconds, start-up excluded), cost of its pods."""

    model_config = pydantic.ConfigDict(frozen=True)

    replicas: int
    workers: int
    p50: float
    upper: float
    cost: float


class Recommendation(pydantic.BaseModel):
    """What the ``recommendation`` annotation holds."""

    model_config = pydantic.ConfigDict(frozen=True)

    group: str | None
    replicas: int
    current_replicas: int
    meets_deadline: bool
    deadline: dt.datetime
    upper_seconds: float
    startup_seconds: float
    reason: str

    def annotation(self) -> str:
        return contract.compact_json(
            {
                "group": self.group,
                "replicas": self.replicas,
                "currentReplicas": self.current_replicas,
                "meetsDeadline": self.meets_deadline,
                "deadline": self.deadline.isoformat().replace("+00:00", "Z"),
                "upperSeconds": round(self.upper_seconds, 1),
                "startupSeconds": round(self.startup_seconds, 1),
                "reason": self.reason,
            }
        )


def replica_counts(features: Features) -> list[int]:
    """Replica counts to consider: all of ``[min, max]`` when few, else a geometric sample.

    An unbounded ``maxReplicas`` (the CRD default) is capped at 4x the
    current size. A group that cannot be resized has only its current size.
    """
    current = features.scale_group.replicas if features.scale_group else 1
    if features.resize_blocker:
        return [current]
    low, high = features.replica_range()
    high = min(high, max(4 * current, low + MAX_CANDIDATES - 1))
    if high - low + 1 <= MAX_CANDIDATES:
        return list(range(low, high + 1))
    sample = np.geomspace(low, high, MAX_CANDIDATES)
    return sorted({low, high, current} | {round(x) for x in sample})


def options(
    job: Features, model: RuntimePredictor, replicas: Sequence[int], confidence: float, startup: float, prices: Prices
) -> list[Option]:
    """Every candidate replica count, predicted in one batch."""
    variants = [job.with_replicas(r) for r in replicas] if job.scale_group else [job]
    p50 = model.predict(variants)
    upper = model.predict_upper(variants, confidence)
    hourly = prices.worker_hour(job)
    return [
        Option(
            replicas=v.scale_group.replicas if v.scale_group else 1,
            workers=v.workers,
            p50=float(p),
            upper=float(u),
            cost=v.pods * hourly * (startup + float(p)) / 3600.0,
        )
        for v, p, u in zip(variants, p50, upper, strict=True)
    ]


def recommend(
    job: Features,
    model: RuntimePredictor,
    deadline: dt.datetime,
    now: dt.datetime,
    confidence: float,
    startup: float,
    prices: Prices,
) -> Recommendation:
    """The cheapest replica count that meets ``deadline``, else the fastest (see module docstring)."""
    replicas = replica_counts(job)
    left = (deadline - now).total_seconds()
    candidates = options(job, model, replicas, confidence, startup, prices)
    fitting = [o for o in candidates if startup + o.upper <= left]
    current = job.scale_group.replicas if job.scale_group else 1
    if fitting:
        choice = min(fitting, key=lambda o: (round(o.cost, 9), o.replicas))
        spare = left - startup - choice.upper
        reason = (
            f"{choice.replicas} replicas is the cheapest that finishes in time: "
            f"{contract.format_duration(startup + choice.upper)} with start-up at {confidence:.0%} confidence, "
            f"{contract.format_duration(spare)} before the deadline"
        )
    else:
        choice = min(candidates, key=lambda o: (o.upper, o.replicas))
        needed = startup + choice.upper
        if left <= 0:
            reason = f"the deadline has passed; {choice.replicas} replicas is the fastest"
        else:
            shortfall = (
                f"needs {contract.format_duration(needed)} at {confidence:.0%} confidence, "
                f"{contract.format_duration(needed - left)} more than the {contract.format_duration(left)} left"
            )
            if len(replicas) > 1:
                reason = (
                    f"no replica count in {min(replicas)}-{max(replicas)} meets the deadline: "
                    f"the fastest, {choice.replicas} replicas, {shortfall}"
                )
            else:
                reason = (
                    f"the deadline cannot be met at the job's only size, {choice.replicas} replicas: it {shortfall}"
                )
    return Recommendation(
        group=job.scale_group.name if job.scale_group else None,
        replicas=choice.replicas,
        current_replicas=current,
        meets_deadline=bool(fitting),
        deadline=deadline,
        upper_seconds=choice.upper,
        startup_seconds=startup,
        reason=reason,
    )
