"""Observations and features -> the numeric design matrix every estimator reads.

One column layout for all estimators, so that candidates differ only in how
they use it. Unknown values get the defaults documented on
``observations.Observation``; an unknown global batch size becomes the worker
count (the same per-worker batch in every run, so steps scale as
samples / workers).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

COLUMNS: tuple[str, ...] = (
    "work", "epochs", "workers", "batch_size", "cpus_per_worker", "gpus_per_worker", "nodes", "node_cpus",
)  # fmt: skip
WORK, EPOCHS, WORKERS, BATCH, CPUS, GPUS, NODES, NODE_CPUS = range(len(COLUMNS))


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
    """One row: work = samples processed (dataset size x epochs); node CPUs 0 where unknown (``design_matrix``)."""
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
        float(getattr(run, "node_cpus", None) or 0.0),
    ]


def design_matrix(runs: Sequence[Runlike], nodes: Sequence[int | None], node_cpus: float | None = None) -> np.ndarray:
    """Rows of ``design_row``; ``nodes`` given separately as features do not carry it. A run that does not say its
    node's CPUs, like a job, is taken to run on nodes of ``node_cpus`` (the profile's), or where that is None on
    those the runs themselves recorded most (``typical_node_cpus``)."""
    X = np.array([design_row(run, n) for run, n in zip(runs, nodes, strict=True)], dtype=float)
    X = X.reshape(-1, len(COLUMNS))
    X[X[:, NODE_CPUS] <= 0, NODE_CPUS] = typical_node_cpus(X) if node_cpus is None else node_cpus
    return X


def typical_node_cpus(X: np.ndarray) -> float:
    """The node CPUs the most runs of ``X`` recorded (the larger on a tie), 0 where none did."""
    recorded = X[X[:, NODE_CPUS] > 0, NODE_CPUS]
    if not len(recorded):
        return 0.0
    values, counts = np.unique(recorded, return_counts=True)
    return float(values[counts == counts.max()].max())


def crowding(X: np.ndarray) -> np.ndarray:
    """How many compute threads of its busiest node share each of its CPUs, at least 1: a CPU worker's compute is
    that many times slower than on cores of its own.

    A worker runs ``max(1, floor(cpus_per_worker))`` threads (Ray sets a worker's OpenMP threads to its whole CPUs,
    at least one, and ``profile`` sets torch's so): 4 workers of half a CPU each on a 2-CPU node run 4 threads on 2
    cores. 1 for GPU workers (their compute is on the GPU) and where the node's CPUs are unknown.
    """
    threads = np.ceil(X[:, WORKERS] / X[:, NODES] - 1e-9) * np.maximum(1.0, np.floor(X[:, CPUS] + 1e-9))
    known = (X[:, GPUS] <= 0) & (X[:, NODE_CPUS] > 0)
    return np.asarray(np.where(known, np.maximum(1.0, threads / np.where(known, X[:, NODE_CPUS], 1.0)), 1.0))


def packed_nodes(workers: int, workers_per_node: int) -> int:
    """Nodes a job of ``workers`` spans when packed ``workers_per_node`` to a node."""
    return max(1, math.ceil(workers / max(1, workers_per_node)))


def profiled_packing(X: np.ndarray) -> tuple[int, int]:
    """The most workers a profiled run had on one node (at least), and the most nodes a run spanned."""
    return int(np.max(np.ceil(X[:, WORKERS] / X[:, NODES]))), int(np.max(X[:, NODES]))


def placement_nodes(workers: int, placement: str | None, workers_per_node: int, max_nodes: int) -> int:
    """The nodes a job spans under a placement hint: ``packed`` (or none), ``spread`` or ``one-per-node``.

    Spread goes over at most as many nodes as the profile measured.
    """
    if placement == "spread":
        return min(workers, max_nodes)
    if placement == "one-per-node":
        return workers
    return packed_nodes(workers, workers_per_node)


def nearest_measured(nodes: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Each node count mapped to the closest one measured (ties to the larger: the slower guess).

    Node counts take a free shape (2 nodes may sync slower than 4), so a
    count never measured borrows the behaviour of its nearest neighbour.
    """
    distance = np.abs(nodes[:, None] - measured[None, :]) - 1e-6 * measured[None, :]
    return np.asarray(measured[np.argmin(distance, axis=1)], dtype=float)


def resources(X: np.ndarray) -> np.ndarray:
    """What the work of each run is split over: its GPUs, or its workers when they have none."""
    return np.asarray(X[:, WORKERS] * np.maximum(X[:, GPUS], 1.0), dtype=float)


def perfectly_scaled(X: np.ndarray, seconds_per_sample: float) -> np.ndarray:
    """Each run's work spread perfectly over its GPUs (or workers) at ``seconds_per_sample`` of one of them."""
    return np.asarray(seconds_per_sample * X[:, WORK] / resources(X), dtype=float)


def local_batch(X: np.ndarray) -> np.ndarray:
    """The per-worker batch of each run: what its synchronisation cost and its configuration depend on."""
    return np.asarray(X[:, BATCH] / X[:, WORKERS], dtype=float)


def sharing(X: np.ndarray, most: float = np.inf) -> np.ndarray:
    """The other workers on the busiest node of each run, at ``most``: they share its host link (PCIe switch, NIC)
    with a worker, and a synchronous step waits for the busiest node."""
    return np.asarray(np.minimum(np.ceil(X[:, WORKERS] / X[:, NODES] - 1e-9) - 1.0, most), dtype=float)


def sharing_measured(X: np.ndarray) -> float:
    """The most workers (``sharing``) a run of ``X`` shared a node with, where some worker count ran with different
    numbers sharing a node: only then can what sharing costs be told from what more workers cost. Else 0."""
    pairs = {(w, s) for w, s in zip(X[:, WORKERS], sharing(X), strict=True) if w > 1}
    return max(s for _, s in pairs) if len(pairs) > len({w for w, _ in pairs}) else 0.0


def steps(X: np.ndarray) -> np.ndarray:
    """Optimizer steps of each run: every epoch ends with a (maybe partial) batch."""
    epochs = X[:, EPOCHS]
    return np.asarray(epochs * np.ceil(X[:, WORK] / epochs / X[:, BATCH] - 1e-9), dtype=float)


@dataclasses.dataclass(frozen=True)
class Reach:
    """How far a profile's runs go in workers, work and per-worker batch: a question beyond it is an extrapolation,
    of a kind (``beyond``) and at a distance (``distance``)."""

    max_workers: float
    max_work: float
    min_batch: float
    max_batch: float
    worker_counts: tuple[float, ...] = ()  # the distinct worker counts profiled, ascending

    @classmethod
    def of(cls, X: np.ndarray) -> Reach:
        batch = local_batch(X)
        counts = tuple(float(count) for count in np.unique(X[:, WORKERS]))
        return cls(counts[-1], float(np.max(X[:, WORK])), float(batch.min()), float(batch.max()), counts)

    def gap(self, X: np.ndarray) -> np.ndarray:
        """Per row, how far its worker count lies from the nearest profiled one (a log ratio; 0 at a profiled count
        and beyond the most, which ``distance`` measures)."""
        if not self.worker_counts:
            return np.zeros(len(X))
        counts = np.log(np.asarray(self.worker_counts))
        nearest = np.min(np.abs(np.log(X[:, WORKERS])[:, None] - counts[None]), axis=1)
        return np.where(X[:, WORKERS] > self.max_workers, 0.0, nearest)

    def _log_ratios(self, X: np.ndarray) -> np.ndarray:
        """Per row, how far beyond the reach it lies in workers, work and batch (log ratios, 0 inside: n x 3)."""
        batch = local_batch(X)
        return np.column_stack(
            [
                np.log(X[:, WORKERS] / self.max_workers),
                np.log(X[:, WORK] / self.max_work),
                np.maximum(np.log(batch / self.max_batch), np.log(self.min_batch / batch)),
            ]
        ).clip(min=0.0)

    def beyond(self, X: np.ndarray) -> np.ndarray:
        """Per row, whether it lies beyond the reach in workers, work and batch (n x 3 booleans; rounding aside)."""
        return np.asarray(self._log_ratios(X) > 1e-6, dtype=bool)

    def distance(self, X: np.ndarray) -> np.ndarray:
        """Per row, its distance from the reach: the sum of its log ratios beyond it (0 inside)."""
        return np.asarray(self._log_ratios(X).sum(axis=1), dtype=float)

    def describe(self, X: np.ndarray) -> list[str]:
        """Per row, how far beyond the reach it lies, in words (``32x the most profiled workers``; "" inside)."""
        batch = local_batch(X)
        words = []
        for ratios, row_batch in zip(np.exp(self._log_ratios(X)), batch, strict=True):
            workers, work, batches = ratios
            parts = [f"{workers:.3g}x the most profiled workers"] if workers > 1 + 1e-6 else []
            parts += [f"{work:.3g}x the most profiled work (samples x epochs)"] if work > 1 + 1e-6 else []
            if batches > 1 + 1e-6 and row_batch > self.max_batch:
                parts.append(f"{batches:.3g}x the largest profiled per-worker batch")
            elif batches > 1 + 1e-6:
                parts.append(f"1/{batches:.3g} of the smallest profiled per-worker batch")
            words.append("; ".join(parts))
        return words
