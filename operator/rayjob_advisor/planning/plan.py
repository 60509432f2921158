"""The profiling plan file: what a plan is asked (the candidate grid, the targets, a budget or a goal) and what it
answers (the next runs, the cost so far and expected, the expected error at the target, why it stops).

A YAML (or JSON) document, parsed here into frozen models; a bad one is a ``BadPlan`` in one line. ``rayjob-advisor
plan`` writes the answer into it, ``rayjob-advisor profile --plan`` runs what it says. Progress is read from the
runs measured (the observations CSV ``profile`` appends to), not from the file: the k-th run of a configuration
found there is its repeat k, so a plan resumes from any CSV of its runs and never repeats one.

Example (every field but the grids, and a budget or a goal, has a default)::

    workload: digits-cnn
    candidates: {workers: [1, 2], dataset_sizes: [1000, 2000, 4000], batch_per_worker: [32, 64]}
    targets: {workers: [4], dataset_sizes: [60000], batch_per_worker: [64]}
    cpus_per_worker: 0.5
    budget_seconds: 900      # GPU-seconds, CPU-seconds when gpus_per_worker is 0
    goal: 0.25               # stop once the expected error at the target is within 25 %
    max_runs: 40             # and after 40 runs at most
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import pathlib
from collections.abc import Sequence

import pydantic
import yaml

from rayjob_advisor import contract
from rayjob_advisor.errors import BadPlan
from rayjob_advisor.observations import Observation, canonical_accelerator
from rayjob_advisor.planning.sequential import SequentialPlanner, Step

_FROZEN = pydantic.ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Grid(pydantic.BaseModel):
    """Every combination of these values is a configuration. The batch is per worker (``batch_per_worker``: the
    global batch grows with the workers, as Ray Train scripts have it) or global (``batch_sizes``), one of them."""

    model_config = _FROZEN

    workers: tuple[pydantic.PositiveInt, ...] = pydantic.Field(min_length=1)
    dataset_sizes: tuple[pydantic.PositiveInt, ...] = pydantic.Field(min_length=1)
    batch_per_worker: tuple[pydantic.PositiveInt, ...] | None = pydantic.Field(default=None, min_length=1)
    batch_sizes: tuple[pydantic.PositiveInt, ...] | None = pydantic.Field(default=None, min_length=1)
    epochs: tuple[pydantic.PositiveInt, ...] = pydantic.Field(default=(1,), min_length=1)

    @pydantic.model_validator(mode="after")
    def _one_batch(self) -> Grid:
        if (self.batch_per_worker is None) == (self.batch_sizes is None):
            raise ValueError("give batch_per_worker or batch_sizes (global), one of them")
        return self

    def batches(self, workers: int) -> tuple[int, ...]:
        """The global batches of a run of ``workers``."""
        if self.batch_sizes is not None:
            return self.batch_sizes
        return tuple(batch * workers for batch in self.batch_per_worker or ())


class PlannedRun(pydantic.BaseModel):
    """One run of a plan: a configuration (``observations.Observation``'s fields), which repeat of it, and what the
    plan expects it to take (unknown before the first runs)."""

    model_config = _FROZEN

    workload: str
    dataset_size: pydantic.PositiveInt
    epochs: pydantic.PositiveInt
    batch_size: pydantic.PositiveInt  # global: the per-worker batch times the workers
    workers: pydantic.PositiveInt
    cpus_per_worker: pydantic.PositiveFloat
    gpus_per_worker: pydantic.NonNegativeFloat
    nodes: pydantic.PositiveInt
    accelerator: str | None = None
    repeat: pydantic.NonNegativeInt = 0
    expected_seconds: float | None = None
    expected_cost: float | None = None

    @property
    def key(self) -> tuple[object, ...]:
        return (self.workload, self.dataset_size, self.epochs, self.batch_size, self.workers, self.cpus_per_worker,
                self.gpus_per_worker, self.accelerator)  # fmt: skip


def run_key(run: Observation) -> tuple[object, ...]:
    """The configuration of a measured run, as ``PlannedRun.key`` (unknowns as the harness runs them)."""
    return (run.workload, run.dataset_size, run.epochs or 1, run.batch_size or run.workers, run.workers,
            run.cpus_per_worker or 1.0, run.gpus_per_worker or 0.0, run.accelerator)  # fmt: skip


class TargetEstimate(pydantic.BaseModel):
    """The runtime the profile so far predicts for one target configuration: median and upper bound, seconds."""

    model_config = _FROZEN

    workers: int
    dataset_size: int
    epochs: int
    batch_size: int
    seconds: float
    upper: float


class Status(pydantic.BaseModel):
    """Where a plan stands: runs measured and their cost, the cost with the next runs, the expected error at the
    target (None without a model: fewer than 9 runs), why it stops (None: it goes on)."""

    model_config = _FROZEN

    measured: int
    spent: float
    expected_cost: float | None
    expected_error: float | None
    confidence: float
    stop: str | None
    targets: tuple[TargetEstimate, ...] = ()


class Plan(pydantic.BaseModel):
    """A plan file: the question (module docstring) and, once planned, its ``next`` runs and ``status``."""

    model_config = _FROZEN

    workload: str = pydantic.Field(min_length=1)
    candidates: Grid
    targets: Grid
    cpus_per_worker: pydantic.PositiveFloat = 1.0
    gpus_per_worker: pydantic.NonNegativeFloat = 0.0
    workers_per_node: pydantic.PositiveInt | None = None  # None: every run on one node
    accelerator: str | None = None
    repeats: pydantic.PositiveInt = 2
    budget_seconds: pydantic.PositiveFloat | None = None
    goal: pydantic.PositiveFloat | None = None
    max_runs: pydantic.PositiveInt | None = None
    confidence: float = pydantic.Field(default=0.9, gt=0.5, lt=1.0)
    next: tuple[PlannedRun, ...] = ()
    status: Status | None = None

    _canonical_accelerator = pydantic.field_validator("accelerator", mode="before")(canonical_accelerator)

    @pydantic.model_validator(mode="after")
    def _limited(self) -> Plan:
        if self.budget_seconds is None and self.goal is None and self.max_runs is None:
            raise ValueError("a plan needs budget_seconds, goal or max_runs")
        return self

    def _runs(self, grid: Grid, repeats: int) -> list[PlannedRun]:
        return [
            PlannedRun(
                workload=self.workload,
                dataset_size=size,
                epochs=epochs,
                batch_size=batch,
                workers=workers,
                cpus_per_worker=self.cpus_per_worker,
                gpus_per_worker=self.gpus_per_worker,
                nodes=math.ceil(workers / (self.workers_per_node or workers)),
                accelerator=self.accelerator,
                repeat=repeat,
            )
            for repeat, size, epochs, workers in itertools.product(
                range(repeats), grid.dataset_sizes, grid.epochs, grid.workers
            )
            for batch in grid.batches(workers)
        ]

    def candidate_runs(self) -> list[PlannedRun]:
        """Every run the plan may choose: each candidate configuration, ``repeats`` times."""
        return self._runs(self.candidates, self.repeats)

    def target_runs(self) -> list[PlannedRun]:
        """The configurations the profile must predict."""
        return self._runs(self.targets, 1)


def read_plan(path: pathlib.Path) -> Plan:
    """A plan file, or a ``BadPlan`` saying in one line what is wrong with it."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BadPlan(f"{path}: not a YAML or JSON document ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise BadPlan(f"{path}: expected a mapping of the plan's fields")
    try:
        return Plan.model_validate(document)
    except pydantic.ValidationError as exc:
        raise BadPlan(f"{path}: {contract.validation_problems(exc, 'plan')}") from None


def write_plan(path: pathlib.Path, plan: Plan) -> None:
    """The plan as the file ``read_plan`` reads back: JSON for a ``.json`` path, else YAML."""
    text = (
        json.dumps(plan.model_dump(mode="json"), indent=2) + "\n"
        if path.suffix == ".json"
        else yaml.safe_dump(plan.model_dump(mode="json"), sort_keys=False)
    )
    path.write_text(text, encoding="utf-8")


def measured_runs(plan: Plan, observations: Sequence[Observation]) -> tuple[list[Observation], list[bool]]:
    """The observations that are runs of the plan's candidates, and which candidates they are (the k-th run of a
    configuration is its repeat k; runs beyond the plan's repeats, or of other configurations, are left out)."""
    candidates = plan.candidate_runs()
    index = {(run.key, run.repeat): i for i, run in enumerate(candidates)}
    seen: collections.Counter[tuple[object, ...]] = collections.Counter()
    done = [False] * len(candidates)
    used = []
    for observation in observations:
        key = run_key(observation)
        position = index.get((key, seen[key]))
        seen[key] += 1
        if position is not None:
            done[position] = True
            used.append(observation)
    return used, done


def advance(plan: Plan, observations: Sequence[Observation]) -> tuple[Plan, Step]:
    """The plan after the runs ``observations`` holds: its next runs and status (``sequential``)."""
    used, done = measured_runs(plan, observations)
    candidates, targets = plan.candidate_runs(), plan.target_runs()
    step = SequentialPlanner(plan.budget_seconds, plan.goal, plan.confidence, plan.max_runs).step(
        candidates, targets, used, done
    )
    estimated = []
    if step.model is not None:
        estimates = step.model.estimate(targets, plan.confidence)
        estimated = [
            TargetEstimate(
                workers=run.workers,
                dataset_size=run.dataset_size,
                epochs=run.epochs,
                batch_size=run.batch_size,
                seconds=round(float(p50), 3),
                upper=round(float(upper), 3),
            )
            for run, p50, upper in zip(targets, estimates.p50, estimates.upper, strict=True)
        ]
    chosen = [
        candidates[index].model_copy(
            update={}
            if step.seconds is None or step.costs is None
            else {"expected_seconds": round(step.seconds[n], 3), "expected_cost": round(step.costs[n], 3)}
        )
        for n, index in enumerate(step.chosen)
    ]
    status = Status(
        measured=len(used), spent=round(step.spent, 3),
        expected_cost=None if step.expected_cost is None else round(step.expected_cost, 3),
        expected_error=None if step.expected_error is None else round(step.expected_error, 4),
        confidence=plan.confidence, stop=step.stop, targets=tuple(estimated),
    )  # fmt: skip
    return plan.model_copy(update={"next": tuple(chosen), "status": status}), step
