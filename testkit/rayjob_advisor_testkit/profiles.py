"""Synthetic runs of a known data-parallel runtime law, a small RuntimeProfile of them, and the shipped runs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rayjob_advisor import contract as ann
from rayjob_advisor.observations import Observation, read_observations
from rayjob_advisor.profiles.codec import runtime_profile_manifest
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit.rayjobs import make_rayjob, worker_group

WORKLOAD = "synthetic"
"""The workload of ``small_profile_runs`` and ``profile_manifest``."""


def sync_sgd_time(size: int, workers: int, batch: int, nodes: int, gpus: float = 0.0) -> float:
    """A data-parallel runtime law for synthetic profiles: compute plus all-reduce per step.

    More GPUs per worker speed its compute up sub-linearly (``gpus ** 0.8``), as
    intra-node data parallelism does: twice the GPUs cost twice but are not twice as fast.
    """
    steps = math.ceil(size / batch)
    compute: float = 0.02 + 0.004 * batch / workers / max(1.0, gpus) ** 0.8  # typeshed: float ** float may be complex
    sync = 0.0 if workers == 1 else 0.01 + 0.002 * (workers - 1) + (0.03 if nodes > 1 else 0.0)
    return 3.0 + steps * (compute + sync)


def synthetic_observations(
    noise: float = 0.03, seed: int = 0, repeats: int = 1, gpus_per_worker: tuple[float, ...] = (0,)
) -> list[Observation]:
    """A profile over 1-16 workers packed 4 to a node, 4 dataset sizes, 2 batch sizes, with noise.

    CPU-only by default; ``gpus_per_worker`` lists the GPUs per worker it runs each configuration with.
    """
    rng = np.random.default_rng(seed)
    runs = []
    for gpus in gpus_per_worker:
        for workers in (1, 2, 3, 4, 6, 8, 12, 16):
            for size in (2000, 4000, 8000, 16000):
                for batch in (64, 128):
                    nodes = math.ceil(workers / 4)
                    for _ in range(repeats):
                        seconds = sync_sgd_time(size, workers, batch, nodes, gpus) * float(np.exp(rng.normal(0, noise)))
                        runs.append(
                            Observation(
                                workload="synthetic",
                                dataset_size=size,
                                epochs=1,
                                batch_size=batch,
                                workers=workers,
                                cpus_per_worker=1,
                                gpus_per_worker=gpus,
                                nodes=nodes,
                                execution_seconds=seconds,
                                startup_seconds=2.0,
                                source="synthetic",
                            )
                        )
    return runs


def large_profile_runs(count: int = 16000, seed: int = 0) -> list[Observation]:
    """``count`` runs of ``sync_sgd_time`` as a big tenant's profile has them: hardly two of one configuration
    (dataset sizes from 1,000 to 1,000,000, 1-64 workers packed 4 to a node, 3 batch sizes), 5 % noise."""
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(count):
        size, workers = int(rng.integers(1000, 1_000_000)), int(rng.integers(1, 65))
        batch = int(rng.choice([64, 128, 256]))
        nodes = math.ceil(workers / 4)
        seconds = sync_sgd_time(size, workers, batch, nodes) * float(np.exp(rng.normal(0, 0.05)))
        runs.append(
            Observation(
                workload=WORKLOAD, dataset_size=size, epochs=1, batch_size=batch, workers=workers, cpus_per_worker=1,
                gpus_per_worker=0, nodes=nodes, execution_seconds=seconds, startup_seconds=2.0, source="large",
            )
        )  # fmt: skip
    return runs


def shipped_runs(workload: str) -> list[Observation]:
    """The runs of a shipped profile (``pollux-bert``: the Pollux traces of bert, as ``benchmarks.pollux`` converts
    them), in the order the file lists them."""
    return read_observations(shipped_data(workload))[0]


def small_profile_runs() -> list[Observation]:
    """32 noiseless runs of ``sync_sgd_time`` on one node: enough for every split, quick to fit."""
    return [
        Observation(
            workload=WORKLOAD,
            dataset_size=size,
            epochs=1,
            batch_size=batch,
            workers=workers,
            cpus_per_worker=2,
            gpus_per_worker=0,
            nodes=1,
            execution_seconds=sync_sgd_time(size, workers, batch, 1),
            source="seed",
        )
        for workers in (1, 2, 4, 8)
        for size in (2000, 4000, 8000, 16000)
        for batch in (64, 128)
    ]


def fitted_store(runs: list[Observation]) -> ProfileStore:
    """A store of ``runs`` alone (no shipped profile), fitted as default/``WORKLOAD``: what ``advise`` is given by
    the tests that run no operator."""
    store = ProfileStore(shipped=False)
    store.put("default", WORKLOAD, WORKLOAD, runs, []).fit()
    return store


def profile_manifest(runs: list[Observation] | None = None, workload: str = WORKLOAD) -> dict[str, Any]:
    """A RuntimeProfile in namespace default, of ``runs`` (default: ``small_profile_runs``)."""
    manifest: dict[str, Any] = runtime_profile_manifest(workload, small_profile_runs() if runs is None else runs)
    return {**manifest, "metadata": {**manifest["metadata"], "namespace": "default"}}


def profiled_rayjob(name: str, **notes: str) -> dict[str, Any]:
    """A RayJob named ``name`` of the synthetic ``WORKLOAD`` (8000 samples, global batch 128, 4 of up to 8
    replicas), with ``notes`` as more annotations: the operator tests' job."""
    body = make_rayjob(
        annotations={"rayjob-advisor.io/workload": WORKLOAD, "rayjob-advisor.io/dataset-size": "8000",
                     "rayjob-advisor.io/batch-size": "128", **notes},
        groups=[worker_group(replicas=4, maxReplicas=8)],
    )  # fmt: skip
    body["metadata"]["name"] = name
    return body


def deadline_job(
    mode: str, deadline: str = "30s", replicas: int = 1, suspend: bool = False, count: int | None = None, **notes: str
) -> dict[str, Any]:
    """A RayJob of the synthetic ``WORKLOAD`` (16000 samples, global batch 64, 1 epoch) with a deadline and ``mode``,
    whose script reads ``NUM_WORKERS`` (``count``, by default one per pod): the deadline tests' job."""
    return make_rayjob(
        annotations={
            ann.WORKLOAD: WORKLOAD, ann.DATASET_SIZE: "16000", ann.BATCH_SIZE: "64", ann.EPOCHS: "1",
            ann.DEADLINE: deadline, ann.MODE: mode, **notes,
        },
        groups=[worker_group(replicas=replicas, minReplicas=1, maxReplicas=4)],
        suspend=suspend,
        runtimeEnvYAML=f"env_vars:\n  NUM_WORKERS: '{count or replicas}'\n",
    )  # fmt: skip
