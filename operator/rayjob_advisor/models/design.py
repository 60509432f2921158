"""Observations and features -> the numeric design matrix every estimator reads.

One column layout for all estimators, so that candidates differ only in how
they use it. Unknown values get the defaults documented on
``observations.Observation``; an unknown global batch size becomes the worker
count (the same per-worker batch in every run, so steps scale as
samples / workers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

COLUMNS: tuple[str, ...] = ("work", "epochs", "workers", "batch_size", "cpus_per_worker", "gpus_per_worker", "nodes")
WORK, EPOCHS, WORKERS, BATCH, CPUS, GPUS, NODES = range(len(COLUMNS))


class Runlike(Protocol):
    """What both an ``Observation`` and prediction ``Features`` offer (read-only: both are frozen)."""

    @property
    def dataset_size(self) -> int | None: ...
    @property
    def epochs(self) -> int | None: ...
    @property
    def batch_size(self) -> int | None: ...
    @property
    def workers(self) -> int: ...
    @property
    def cpus_per_worker(self) -> float | None: ...
    @property
    def gpus_per_worker(self) -> float | None: ...


def design_row(run: Runlike, nodes: int | None) -> list[float]:
    """One row: work = samples processed (dataset size x epochs)."""
    if run.dataset_size is None:
        raise ValueError("dataset size is unknown")
    epochs = run.epochs or 1
    return [
        float(run.dataset_size * epochs),
        float(epochs),
        float(run.workers),
        float(run.batch_size or run.workers),
        float(run.cpus_per_worker or 1.0),
        float(run.gpus_per_worker or 0.0),
        float(nodes or 1),
    ]


def design_matrix(runs: Sequence[Runlike], nodes: Sequence[int | None]) -> np.ndarray:
    """Rows of ``design_row``; ``nodes`` given separately as features do not carry it."""
    return np.array([design_row(run, n) for run, n in zip(runs, nodes, strict=True)], dtype=float).reshape(
        -1, len(COLUMNS)
    )


def packed_nodes(workers: int, workers_per_node: int) -> int:
    """Nodes a job of ``workers`` spans when packed ``workers_per_node`` to a node."""
    return max(1, math.ceil(workers / max(1, workers_per_node)))
