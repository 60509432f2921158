"""Deadline -> the cheapest size of the scaled group that finishes in time.

A size is a replica count and, where the profile measured several, a number
of GPUs per worker. It fits when its own expected start-up (the model's
``startup``: more workers take longer to start) plus the runtime's upper
bound (at the job's confidence) ends before the deadline. Among those that
fit, the cheapest wins — worker-seconds of expected start-up and runtime,
weighted by CPU and GPU prices — and among equally cheap ones the fewest
replicas, then GPUs.

When none fits, the size whose median ends first wins (its start-up plus
median runtime; ties go to the better chance of finishing in time, then the
cheaper size). Each size's chance — the model's estimated probability that
the runtime stays within the time left after its start-up, from the same
residuals as the upper bound — is reported but does not choose: the chances
of two sizes are read from the tails of different residual pools (a size
inside the profile, one beyond it, another node count), far noisier than the
medians, and when the deadline comes before the medians a chance favours
whichever size has the wider bound. On the GPU deadline replay
(``benchmarks.deadlines --parts gpu``) choosing by the chance met 85.4 % of
the tight deadlines of issue 18's protocol (packed), the earliest median end
97.3 %; over both of its protocols tight hits are better or equal on 5 of
the 6 workloads, and each workload left out, the other five choose the
median (docs/benchmarks.md).
Start-up counts in the end, so when the deadline comes before every
start-up a bigger size does not win on a faster runtime it starts too late
to use. The reason says the chosen size's chance and by how much it misses
at the job's confidence.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import pydantic

from rayjob_advisor import contract
from rayjob_advisor.advice.features import Features
from rayjob_advisor.models.design import Runlike
from rayjob_advisor.models.predictor import Estimates

MAX_CANDIDATES = 16
MAX_GPU_CHOICES = 4


class Prices(pydantic.BaseModel):
    """What a worker costs per hour, per CPU and per GPU (any currency; only ratios matter)."""

    model_config = pydantic.ConfigDict(frozen=True)

    cpu_hour: float = pydantic.Field(default=0.05, ge=0)
    gpu_hour: float = pydantic.Field(default=2.5, ge=0)  # of an accelerator ``accelerator_gpu_hour`` does not price
    accelerator_gpu_hour: dict[str, pydantic.NonNegativeFloat] = pydantic.Field(default_factory=dict)  # a100: 3.7

    def worker_hour(self, job: Features) -> float:
        gpu_hour = self.accelerator_gpu_hour.get(job.accelerator or "", self.gpu_hour)
        return (job.cpus_per_worker or 1.0) * self.cpu_hour + job.gpus_per_worker * gpu_hour


class RuntimePredictor(Protocol):
    """What the planner needs of a fitted ``RuntimeModel``."""

    @property
    def measured_gpus_(self) -> tuple[float, ...]: ...

    def estimate(
        self, runs: Sequence[Runlike], confidence: float, seconds: Sequence[float] | None = None
    ) -> Estimates: ...

    def startup(self, runs: Sequence[Runlike]) -> Iterable[float]: ...


def describe_size(replicas: int, gpus_per_worker: float) -> str:
    """How reasons name a size: ``3 replicas``, or ``3 replicas x 2 GPUs`` for a GPU group."""
    return f"{replicas} replicas" + (f" x {gpus_per_worker:g} GPUs" if gpus_per_worker else "")


def finishes_in_time(startup: float, upper: float, left: float) -> bool:
    """The planner's rule for a fit: start-up plus the upper bound ends within ``left`` seconds."""
    return startup + upper <= left


class Option(pydantic.BaseModel):
    """One size: its Ray Train workers, expected start-up, predicted runtimes (seconds, start-up excluded),
    cost of its pods.

    ``probability``: the estimated chance that it finishes within the seconds ``options`` was given as
    ``left``, start-up included, if any.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    replicas: int
    gpus_per_worker: float
    workers: int
    startup: float
    p50: float
    upper: float
    cost: float
    probability: float | None = None

    @property
    def walltime(self) -> float:
        """Seconds this size is expected to take: its start-up plus the upper bound."""
        return self.startup + self.upper

    def in_time(self, left: float) -> bool:
        """Whether this size's start-up plus its upper bound ends within ``left`` seconds (``finishes_in_time``)."""
        return finishes_in_time(self.startup, self.upper, left)


class Recommendation(pydantic.BaseModel):
    """What the ``recommendation`` annotation holds."""

    model_config = pydantic.ConfigDict(frozen=True)

    group: str | None
    replicas: int
    current_replicas: int
    gpus_per_worker: float
    current_gpus_per_worker: float
    meets_deadline: bool
    deadline: dt.datetime
    upper_seconds: float
    startup_seconds: float
    reason: str
    probability: float  # the estimated chance that the chosen size finishes before the deadline

    def annotation(self) -> str:
        return contract.compact_json(self.fields())

    def fields(self) -> dict[str, object]:
        """What the annotation holds, as JSON values."""
        return {
            "group": self.group,
            "replicas": self.replicas,
            "currentReplicas": self.current_replicas,
            "gpusPerWorker": self.gpus_per_worker,
            "currentGpusPerWorker": self.current_gpus_per_worker,
            "meetsDeadline": self.meets_deadline,
            "deadline": contract.format_timestamp(self.deadline),
            "upperSeconds": round(self.upper_seconds, 1),
            "startupSeconds": round(self.startup_seconds, 1),
            "probability": round(self.probability, 3),
            "suggestedWalltime": contract.format_duration(self.walltime),
            "reason": self.reason,
        }

    @property
    def walltime(self) -> float:
        """Seconds the job is expected to take at the chosen size: start-up plus the upper bound."""
        return self.startup_seconds + self.upper_seconds

    @property
    def changes(self) -> bool:
        """Whether the plan sizes the group other than the job does."""
        return (self.replicas, self.gpus_per_worker) != (self.current_replicas, self.current_gpus_per_worker)

    @property
    def size(self) -> str:
        return describe_size(self.replicas, self.gpus_per_worker)


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


def gpu_counts(job: Features, measured: Sequence[float]) -> list[float]:
    """GPUs per worker to consider: the job's own and, if the profile varied them, the whole numbers it measured.

    A profile that ran one value says nothing of the others; Kubernetes
    takes GPUs in whole numbers; ``Features.gpus_resizable`` says which
    groups may change. Of more than ``MAX_GPU_CHOICES`` measured values, a
    geometric sample.
    """
    choices = [gpus for gpus in measured if gpus > 0 and gpus.is_integer()]
    if len(measured) < 2 or not job.gpus_resizable or not choices:
        return [job.gpus_per_worker]
    if len(choices) > MAX_GPU_CHOICES:
        targets = np.geomspace(choices[0], choices[-1], MAX_GPU_CHOICES)
        choices = [min(choices, key=lambda gpus: abs(math.log(gpus / float(t)))) for t in targets]
    return sorted({job.gpus_per_worker, *choices})


def sizes(job: Features, model: RuntimePredictor) -> list[tuple[int, float]]:
    """Every (replicas, GPUs per worker) the planner considers for ``job``."""
    return list(itertools.product(replica_counts(job), gpu_counts(job, model.measured_gpus_)))


def options(
    job: Features,
    model: RuntimePredictor,
    candidates: Sequence[tuple[int, float]],
    confidence: float,
    prices: Prices,
    left: float | None = None,
) -> list[Option]:
    """Every candidate (replicas, GPUs per worker), predicted in one batch; a GPU-hour costs as a worker's GPUs.

    ``left``: seconds until the deadline, start-up included; each option is given its chance of running
    within what its own start-up leaves of them.
    """
    variants = [job.with_replicas(r).with_gpus(g) for r, g in candidates] if job.scale_group else [job]
    startup = [float(s) for s in model.startup(variants)]
    estimates = model.estimate(variants, confidence, None if left is None else [left - s for s in startup])
    chances: Iterable[float | None] = [None] * len(variants) if estimates.probability is None else estimates.probability
    return [
        Option(
            replicas=v.scale_group.replicas if v.scale_group else 1,
            gpus_per_worker=v.gpus_per_worker,
            workers=v.workers,
            startup=s,
            p50=float(p),
            upper=float(u),
            cost=v.pods * prices.worker_hour(v) * (s + float(p)) / 3600.0,
            probability=None if c is None else float(c),
        )
        for v, s, p, u, c in zip(variants, startup, estimates.p50, estimates.upper, chances, strict=True)
    ]


def earliest_end(candidates: Sequence[Option]) -> Option:
    """The option whose median ends first; ties: the better chance, then the cheaper (module docstring)."""
    return min(
        candidates,
        key=lambda o: (
            round(o.startup + o.p50, 9),
            -round(o.probability or 0.0, 9),
            round(o.cost, 9),
            o.replicas,
            o.gpus_per_worker,
        ),
    )


def recommend(
    job: Features,
    model: RuntimePredictor,
    deadline: dt.datetime,
    now: dt.datetime,
    confidence: float,
    prices: Prices,
) -> Recommendation:
    """The cheapest size that meets ``deadline``, else the one whose median ends first (see module docstring)."""
    considered = sizes(job, model)
    left = (deadline - now).total_seconds()
    candidates = options(job, model, considered, confidence, prices, left=left)
    fitting = [o for o in candidates if o.in_time(left)]
    if fitting:
        choice = min(fitting, key=lambda o: (round(o.cost, 9), o.replicas, o.gpus_per_worker))
        reason = (
            f"{describe_size(choice.replicas, choice.gpus_per_worker)} is the cheapest that finishes in time: "
            f"{contract.format_duration(choice.walltime)} with start-up at {confidence:.0%} confidence, "
            f"{contract.format_duration(left - choice.walltime)} before the deadline"
        )
    else:
        choice = earliest_end(candidates)
        reason = _miss(choice, considered, left, confidence)
    return Recommendation(
        group=job.scale_group.name if job.scale_group else None,
        replicas=choice.replicas,
        current_replicas=job.scale_group.replicas if job.scale_group else 1,
        gpus_per_worker=choice.gpus_per_worker,
        current_gpus_per_worker=job.gpus_per_worker,
        meets_deadline=bool(fitting),
        deadline=deadline,
        upper_seconds=choice.upper,
        startup_seconds=choice.startup,
        reason=reason,
        probability=choice.probability or 0.0,
    )


def _miss(choice: Option, considered: Sequence[tuple[int, float]], left: float, confidence: float) -> str:
    """Why no size is certified: the chosen one's chance, and how far off the deadline it is at ``confidence``."""
    chosen = describe_size(choice.replicas, choice.gpus_per_worker)
    if left <= 0:
        return f"the deadline has passed; {chosen} is the fastest"
    chance = (
        f"a {choice.probability or 0.0:.0%} chance of finishing in the {contract.format_duration(left)} left; "
        f"at {confidence:.0%} confidence it needs {contract.format_duration(choice.walltime)} with start-up, "
        f"{contract.format_duration(choice.walltime - left)} more"
    )
    if len(considered) == 1:
        return f"the deadline cannot be met at {confidence:.0%} confidence at the job's only size, {chosen}: {chance}"
    replicas = sorted({r for r, _ in considered})
    gpus = sorted({g for _, g in considered})
    within = f"no replica count in {replicas[0]}-{replicas[-1]}"
    if len(gpus) > 1:
        within += f" with {gpus[0]:g}-{gpus[-1]:g} GPUs per worker"
    return f"{within} meets the deadline at {confidence:.0%} confidence; the fastest, {chosen}, has {chance}"
