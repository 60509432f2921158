"""The questions a user asks of a profile, as train/test cuts of a measured dataset.

Each cut trains on the runs a profile would have and tests on runs beyond them, the way the advisor is asked:

- ``workers-between``: trained on every other worker count, tested on the ones between (a size the profile
  skipped: the question inside the profile);
- ``workers-x4``: trained on worker counts up to a quarter of the most, tested on those from three quarters of it
  (needs two distinct counts to train on);
- ``workers-x8``: trained on worker counts up to an eighth of the most, tested on those from a quarter of it: 2-8x
  beyond the profile (issue 18's A100 curves: 1-8 GPUs -> 16-64). Held out (``HELD_OUT``);
- ``workers-x4-few``: ``workers-x4`` from a dozen of its training runs (``FEW_RUNS``, drawn with seed 0): the
  small profile of a team that measured a few configurations, where cross-validation cannot see extrapolation;
- ``workers-two-counts``: trained on the fewest and the most workers, tested on every count between (needs one):
  a profile at two worker counts, where no fold measures interpolation (issue 18: "runs at one or two worker
  counts"). Held out (``HELD_OUT``);
- ``workers-next``: trained on every worker count but the largest, tested on it (1-3 workers -> 4);
- ``nodes``: trained on runs over at most half the most nodes (one node count will do), tested on the runs over
  more;
- ``size-x4``: trained on dataset sizes up to a quarter of the largest, tested on the largest;
- ``batch-half``: trained on per-worker batches from twice the smallest, tested on the smallest;
- ``batch-x2-4``: trained on per-worker batches up to a quarter of the largest, tested on those 2-4x the
  largest trained;
- ``strong-scaling``: at a fixed global batch (the per-worker batch shrinking as the workers grow), trained on the
  worker counts up to a quarter of the most, tested on those from half of it: a published strong-scaling curve, more
  workers and a smaller per-worker batch asked at once. Held out (``HELD_OUT``).

A cut that a dataset cannot make (too few distinct values, no runs on one side) is skipped, with the reason.
``transfer`` questions (``transfer_cuts``: a scarcely measured accelerator beside a well measured one) need a
dataset per GPU type of one model: Sia's, Gavel's and Zeus's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks import datasets, gavel, sia, zeus
from rayjob_advisor.observations import Observation

FEW_RUNS = 12
"""The training runs of a ``workers-x4-few`` cut: "a dozen", issue 18's small profile (8-12 runs)."""
SAME_GLOBAL_BATCH = 0.02
"""Global batches within this relative distance are one: the traces' per-worker batches are rounded (Pollux cifar10:
363 per GPU on 2 GPUs is 726, 725 on 1)."""
TRANSFER_RUNS = 6
"""The new accelerator's runs in a ``transfer`` cut, drawn (seed 0) at its one or two smallest GPU counts."""


@dataclasses.dataclass(frozen=True)
class Cut:
    """The runs a profile holds, and the runs it is asked about."""

    train: list[Observation]
    test: list[Observation]


def _global(run: Observation) -> int:
    """The run's global batch (one sample per worker where it recorded none)."""
    return run.batch_size or run.workers


def _local(run: Observation) -> float:
    return _global(run) / run.workers


def _cut(
    runs: Sequence[Observation],
    value: Callable[[Observation], float],
    train: Callable[[float], bool],
    test: Callable[[float], bool],
    distinct: int = 2,
) -> Cut | str:
    trained = [run for run in runs if train(value(run))]
    tested = [run for run in runs if test(value(run))]
    if len({value(run) for run in trained}) < distinct:
        return f"fewer than {distinct} distinct values to train on"
    if not trained or not tested:
        return "no runs on one side"
    return Cut(trained, tested)


def workers_between(runs: Sequence[Observation]) -> Cut | str:
    counts = sorted({run.workers for run in runs})
    skipped = set(counts[1:-1:2])
    return _cut(runs, lambda r: r.workers, lambda w: w not in skipped, lambda w: w in skipped)


def workers_x4(runs: Sequence[Observation]) -> Cut | str:
    most = max(run.workers for run in runs)
    return _cut(runs, lambda r: r.workers, lambda w: w <= most / 4, lambda w: w >= 0.75 * most)


def workers_x8(runs: Sequence[Observation]) -> Cut | str:
    most = max(run.workers for run in runs)
    return _cut(runs, lambda r: r.workers, lambda w: w <= most / 8, lambda w: w >= most / 4)


def workers_x4_few(runs: Sequence[Observation]) -> Cut | str:
    cut = workers_x4(runs)
    if isinstance(cut, str) or len(cut.train) <= FEW_RUNS:
        return cut
    drawn = np.random.default_rng(0).choice(len(cut.train), FEW_RUNS, replace=False)
    train = [cut.train[i] for i in sorted(drawn)]
    if len({run.workers for run in train}) < 2:
        return "fewer than 2 distinct values drawn to train on"
    return Cut(train, cut.test)


def workers_two_counts(runs: Sequence[Observation]) -> Cut | str:
    ends = (min(run.workers for run in runs), max(run.workers for run in runs))
    return _cut(runs, lambda r: r.workers, lambda w: w in ends, lambda w: ends[0] < w < ends[1])


def workers_next(runs: Sequence[Observation]) -> Cut | str:
    most = max(run.workers for run in runs)
    return _cut(runs, lambda r: r.workers, lambda w: w < most, lambda w: w == most)


def nodes(runs: Sequence[Observation]) -> Cut | str:
    most = max(run.nodes or 1 for run in runs)
    if most < 2:
        return "every run on one node"
    return _cut(runs, lambda r: r.nodes or 1, lambda n: n <= most / 2, lambda n: n > most / 2, distinct=1)


def size_x4(runs: Sequence[Observation]) -> Cut | str:
    largest = max(run.dataset_size for run in runs)
    return _cut(runs, lambda r: r.dataset_size, lambda s: s <= largest / 4, lambda s: s == largest)


def batch_half(runs: Sequence[Observation]) -> Cut | str:
    smallest = min(_local(run) for run in runs)
    return _cut(runs, _local, lambda b: b >= 2 * smallest, lambda b: b == smallest)


def batch_x2_4(runs: Sequence[Observation]) -> Cut | str:
    largest = max(_local(run) for run in runs)
    trained = max((_local(run) for run in runs if _local(run) <= largest / 4), default=0.0)
    return _cut(runs, _local, lambda b: b <= trained, lambda b: 2 * trained <= b <= 4 * trained)


def _global_batches(runs: Sequence[Observation]) -> dict[int, int]:
    """Each global batch of the runs -> the smallest of its group: in ascending order, a batch more than
    ``SAME_GLOBAL_BATCH`` above its group's smallest starts a new group."""
    same: dict[int, int] = {}
    first = 0
    for batch in sorted({_global(run) for run in runs}):
        if not first or batch > first * (1 + SAME_GLOBAL_BATCH):
            first = batch
        same[batch] = first
    return same


def strong_scaling(runs: Sequence[Observation]) -> Cut | str:
    most = max(run.workers for run in runs)
    same = _global_batches(runs)
    series: dict[tuple[object, ...], list[Observation]] = {}
    for run in runs:
        series.setdefault((run.dataset_size, run.epochs, same[_global(run)]), []).append(run)
    train, test = [], []
    for members in series.values():
        trained = [run for run in members if run.workers <= most / 4]
        tested = [run for run in members if run.workers >= most / 2]
        if len({run.workers for run in trained}) >= 2 and tested:
            train += trained
            test += tested
    return Cut(train, test) if train else "no global batch measured at 2 worker counts and at half the most"


QUESTIONS: dict[str, Callable[[Sequence[Observation]], Cut | str]] = {
    "workers-between": workers_between,
    "workers-x4": workers_x4,
    "workers-x8": workers_x8,
    "workers-x4-few": workers_x4_few,
    "workers-two-counts": workers_two_counts,
    "workers-next": workers_next,
    "nodes": nodes,
    "size-x4": size_x4,
    "batch-half": batch_half,
    "batch-x2-4": batch_x2_4,
    "strong-scaling": strong_scaling,
}
HELD_OUT: tuple[str, ...] = ("workers-two-counts", "strong-scaling", "workers-x8")
"""Questions the accuracy table reports and no setting is chosen on (``benchmarks.lodo`` skips them), each added
after every setting had been chosen: ``strong-scaling`` on 2026-12-05, as the closest the traces come to issue 18's
strong-scaling curves (published throughput of models on 1-64 A100s at a fixed global batch); ``workers-two-counts``
on 2026-12-06, written with ``combination.STRUCTURAL_IN_GAPS`` in view (its grid asks it; docs/accuracy.md);
``workers-x8`` on 2026-12-07, issue 18's protocol on those curves (ElasticFlow's, ``benchmarks.elasticflow``)."""


@dataclasses.dataclass(frozen=True)
class TransferCut:
    """A new accelerator's few runs (``target``) beside a measured one's (``source_runs``, on ``source``)."""

    source: str
    source_runs: list[Observation]
    target: list[Observation]
    test: list[Observation]

    @property
    def cut(self) -> Cut:
        return Cut(self.source_runs + self.target, self.test)


ACCELERATOR_FAMILIES: dict[str, tuple[str, ...]] = {
    "sia": sia.ACCELERATORS,
    "gavel": gavel.GPUS,
    "zeus": zeus.GPUS,
}
"""The families with one dataset per model and GPU type (``<family>-<model>-<gpu>``, ``datasets.DATASETS``), and
their GPU types (``transfer_cuts``)."""


def transfer_cuts(dataset: str, runs: Sequence[Observation], count: int = TRANSFER_RUNS) -> list[TransferCut]:
    """A dataset of ``ACCELERATOR_FAMILIES`` (``sia-<model>-<gpu>``) as a new accelerator measured by ``count``
    runs, beside each other GPU type of the same model measured in full (none for other datasets)."""
    family, _, rest = dataset.partition("-")
    if family not in ACCELERATOR_FAMILIES:
        return []
    model, gpu = rest.rsplit("-", 1)
    workload = f"{family}-{model}"  # one workload on several GPU types, each run naming its accelerator
    smallest = sorted({run.workers for run in runs})[:2]
    pool = [run for run in runs if run.workers in smallest]
    drawn = np.random.default_rng(0).choice(len(pool), min(count, len(pool)), replace=False)
    measured = [pool[i].model_copy(update={"workload": workload}) for i in sorted(drawn)]
    held = [pool[i] for i in drawn]
    test = [run for run in runs if run not in held]
    return [
        TransferCut(
            source,
            [run.model_copy(update={"workload": workload}) for run in datasets.DATASETS[f"{workload}-{source}"]()],
            measured,
            test,
        )
        for source in ACCELERATOR_FAMILIES[family]
        if source != gpu
    ]


def mape(predicted: np.ndarray, actual: np.ndarray) -> float:
    return float(np.mean(np.abs(predicted / actual - 1.0)))
