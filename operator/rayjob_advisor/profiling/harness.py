"""Profiling sweeps: a grid of configurations, each run as a real Ray Train job.

A run's start-up is the time from the driver calling ``TorchTrainer.fit`` to
the first batch on rank 0 (worker scheduling, process group set-up, data
loading, model wrapping); its execution is rank 0's time from the first
batch to the end of training. Both come from wall clocks (the driver's and
rank 0's): on a remote cluster, start-up is as accurate as the clocks' sync.

Sweeps append each finished run to the CSV at once and skip runs already
there (by ``source``), so an interrupted sweep resumes where it stopped.
A run that fails is appended to a failures CSV with its error and tried
again by the next resume.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime as dt
import importlib
import itertools
import os
import pathlib
import platform
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ray
import ray.train
import torch
import torch.distributed as dist
from ray._raylet import Config as ray_config  # type: ignore[attr-defined]  # ray's _raylet.pyi omits it
from ray.train.torch import TorchTrainer
from tqdm import tqdm

from rayjob_advisor.observations import Observation, append_observation, read_observations
from rayjob_advisor.profiling import timing
from rayjob_advisor.profiling.workloads import WORKLOADS

TrainFunction = Callable[[dict[str, Any]], None]
FAILURE_COLUMNS = ("source", "error", "time")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One configuration of a sweep, and which repeat of it."""

    workload: str
    dataset_size: int
    epochs: int
    batch_size: int
    workers: int
    cpus_per_worker: float
    gpus_per_worker: float
    repeat: int
    accelerator: str | None = None  # the GPU model the sweep runs on (``profile --accelerator``); None: unrecorded

    @property
    def source(self) -> str:
        """The run's key in the CSV: what resuming matches on."""
        return (
            f"sweep:{self.workload}:n{self.dataset_size}:e{self.epochs}:b{self.batch_size}"
            f":w{self.workers}:c{self.cpus_per_worker:g}:g{self.gpus_per_worker:g}:r{self.repeat}"
        )


class RunFailed(Exception):
    """A run that did not finish; the message is its error."""


def grid(
    workload: str,
    workers: Sequence[int],
    dataset_sizes: Sequence[int],
    epochs: Sequence[int],
    batch_sizes: Sequence[int],
    cpus_per_worker: Sequence[float],
    gpus_per_worker: float,
    repeats: int,
    accelerator: str | None = None,
) -> list[RunSpec]:
    """Every configuration, repeat by repeat: a sweep cut short still covers the whole grid once."""
    return [
        RunSpec(workload, size, epoch, batch, count, cpus, gpus_per_worker, repeat, accelerator)
        for repeat, size, epoch, batch, cpus, count in itertools.product(
            range(repeats), dataset_sizes, epochs, batch_sizes, cpus_per_worker, workers
        )
    ]


def load_train_function(name: str) -> TrainFunction:
    """A built-in workload by name, or ``module:function`` for a team's own training."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    module_name, _, function_name = name.partition(":")
    if not function_name:
        known = ", ".join(WORKLOADS)
        raise ValueError(f"unknown workload {name!r}: use one of {known} or --train-func module:function")
    function: TrainFunction | None = getattr(importlib.import_module(module_name), function_name, None)
    if not callable(function):
        raise ValueError(f"{name!r}: {module_name} has no function {function_name!r}")
    return function


def _timed(train: TrainFunction) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Wrap a training function to time it on every worker, count the nodes it ran on and name the busiest."""

    def loop(config: dict[str, Any]) -> dict[str, Any]:
        entered = time.time()
        timing.reset()
        torch.set_num_threads(max(1, int(config["cpus_per_worker"])))
        train(config)
        ended = time.time()
        node = ray.get_runtime_context().get_node_id()
        nodes: list[Any] = [node]
        if dist.is_initialized():
            nodes = [None] * dist.get_world_size()
            dist.all_gather_object(nodes, node)
        busiest = collections.Counter(nodes).most_common(1)[0][0]
        first = timing.first_batch() or entered
        return {"first_batch": first, "end": ended, "nodes": len(set(nodes)), "busiest": busiest}

    return loop


def local_token_auth() -> None:
    """Token auth for a Ray started here, the token only in this process tree's environment
    (never in a file in the home directory).

    Ray reads its auth mode when imported, so the setting is reloaded.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    ray_config.initialize("")


class RaySession:
    """Ray for a sweep: started (all local cores) or connected to at ``address`` by the first run that needs it,
    so a sweep or plan with nothing left to run starts nothing; shut down when the ``with`` block ends if it was
    started here (a Ray the caller started is the caller's)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.started = False

    def start(self) -> None:
        if ray.is_initialized():
            return
        if self.address is None:
            local_token_auth()
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=self.address, log_to_driver=False)
        self.started = True

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.started:
            ray.shutdown()
            self.started = False


class RayTrainRunner:
    """Runs specs as Ray Train jobs in ``session`` (started by the first).

    ``storage_path`` is Ray Train's run storage; on a multi-node cluster it
    must be reachable from every node.
    """

    def __init__(self, train: TrainFunction, storage_path: str, session: RaySession) -> None:
        self.train = train
        self.storage_path = storage_path
        self.session = session

    def __call__(self, spec: RunSpec) -> Observation:
        self.session.start()
        config = dataclasses.asdict(spec)
        # The two ignores below: ray.train picks Train v1 or v2 at import (v2 by default); mypy sees v1,
        # whose trainer expects no return value and whose Result has no return_value.
        trainer = TorchTrainer(
            _timed(self.train),  # type: ignore[arg-type]
            train_loop_config=config,
            scaling_config=ray.train.ScalingConfig(
                num_workers=spec.workers,
                use_gpu=spec.gpus_per_worker > 0,
                resources_per_worker={"CPU": spec.cpus_per_worker, "GPU": spec.gpus_per_worker},
            ),
            run_config=ray.train.RunConfig(
                name=spec.source.replace(":", "-"),
                storage_path=self.storage_path,
                failure_config=ray.train.FailureConfig(max_failures=0),
            ),
        )
        started = time.time()
        try:
            result = trainer.fit()
        except Exception as exc:  # any failure of the job is the run's outcome
            raise RunFailed(_summary(exc)) from exc
        if result.error is not None:
            raise RunFailed(_summary(result.error))
        timings: dict[str, Any] | None = result.return_value  # type: ignore[attr-defined]
        if not timings:
            raise RunFailed("the training function returned no timing from rank 0")
        return Observation.measured(
            spec,
            nodes=int(timings["nodes"]),
            node_cpus=node_cpus(timings["busiest"]),
            execution_seconds=round(timings["end"] - timings["first_batch"], 4),
            startup_seconds=round(timings["first_batch"] - started, 4),
            source=spec.source,
        )


def node_cpus(node_id: str) -> float | None:
    """The CPUs Ray counts on a node of the cluster (its container's limit on Kubernetes); None if Ray does not
    list it."""
    nodes = ray.nodes()  # type: ignore[no-untyped-call]  # ray leaves it unannotated
    cpus = next((node["Resources"].get("CPU") for node in nodes if node["NodeID"] == node_id), None)
    return float(cpus) if cpus else None


def _summary(exc: BaseException) -> str:
    """One line for a failure: the exception's first line and, after a traceback, its last."""
    lines = [line.strip() for line in f"{type(exc).__name__}: {exc}".strip().splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


@dataclasses.dataclass
class SweepSummary:
    """What a sweep did: runs finished now, found already done, failed."""

    finished: int = 0
    skipped: int = 0
    failed: int = 0


def failures_path(out: pathlib.Path) -> pathlib.Path:
    """Where a sweep writing ``runs.csv`` records its failed runs: ``runs.failures.csv``."""
    return out.with_suffix(".failures.csv")


def provenance() -> list[str]:
    """The comment lines heading a sweep's CSV: machine, date, versions."""
    return [
        f"measured by rayjob-advisor profile on {dt.date.today().isoformat()}",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"python {platform.python_version()}, ray {ray.__version__}, torch {torch.__version__}",
    ]


def sweep(
    specs: Iterable[RunSpec],
    run: Callable[[RunSpec], Observation],
    out: pathlib.Path,
    comments: Sequence[str] = (),
    progress: bool = True,
) -> SweepSummary:
    """Run every spec not already in ``out``; append each result (or failure) as it ends."""
    done = {o.source for o in read_observations(out)[0]} if out.exists() else set()
    specs = list(specs)
    todo = [spec for spec in specs if spec.source not in done]
    summary = SweepSummary(skipped=len(specs) - len(todo))
    bar = tqdm(todo, desc="profiling", unit="run", disable=not progress)
    for spec in bar:
        bar.set_postfix_str(f"{spec.workers} workers, {spec.dataset_size} samples, repeat {spec.repeat}")
        try:
            observation = run(spec)
        except RunFailed as exc:
            _append_failure(failures_path(out), spec, str(exc))
            summary.failed += 1
            continue
        append_observation(out, observation, comments)
        summary.finished += 1
    return summary


def _append_failure(path: pathlib.Path, spec: RunSpec, error: str) -> None:
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        if new:
            writer.writerow(FAILURE_COLUMNS)
        writer.writerow([spec.source, error, dt.datetime.now(dt.UTC).isoformat(timespec="seconds")])
