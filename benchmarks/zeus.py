"""Zeus's measured epoch times -> observations in the advisor's CSV schema: per-GPU batch sweeps of one GPU.

Zeus (You et al., *Zeus: Understanding and Optimizing GPU Energy Consumption of DNN Training*, NSDI'23) ships the
power traces its simulator replays (``examples/research_reproducibility/zeus_nsdi23/trace/summary_power_<gpu>.csv``
in ``ml-energy/zeus``, Apache-2.0): for six workloads on one A40, P100, Quadro RTX 6000 or V100, the time of one
training epoch at 4-15 batch sizes (2 to 32,768 samples) and at several power limits, each measured once. No other
data the project has sweeps a GPU's batch this far: the batch questions (``batch-half``, ``batch-x2-4``) and a new GPU
type measured at a few batches (``transfer``) on GPUs none of the project's other data has. Each (workload, GPU type)
becomes a dataset. A run of our schema:

- ``workers`` = ``nodes`` = 1, one GPU;
- ``batch_size`` = the trace's batch size;
- ``dataset_size`` = the workload's training set (``WORKLOADS``), one epoch: every run of a dataset has the same, so
  no question asked of it depends on that figure;
- ``execution_seconds`` = the trace's ``time_per_epoch``; no start-up (Zeus measured epochs).

Of each batch, the run at the GPU type's largest power limit measured (the closest to a job's default),
with the optimizer Zeus trained the workload with (``summary_train.csv``; the V100's CIFAR-100 was profiled with Adam
as well, left out). The CSVs this writes are in ``benchmarks/data/zeus``; to regenerate them, check out the
repository at ``COMMIT`` and run

    .venv/bin/python -m benchmarks.zeus PATH-TO-zeus

Every one of these datasets is held out (``datasets.HELD_OUT``): added on 2026-12-07, after every setting was chosen,
and chosen on by none.
"""

from __future__ import annotations

import csv
import pathlib

from benchmarks.converted import parse_checkout, write_converted
from rayjob_advisor.observations import Observation

SOURCE = "https://github.com/ml-energy/zeus"
COMMIT = "75a8b93"
TRACES = pathlib.Path("examples") / "research_reproducibility" / "zeus_nsdi23" / "trace"
OUT = pathlib.Path(__file__).resolve().parent / "data" / "zeus"

WORKLOADS: dict[str, tuple[str, str, str, int]] = {
    "cifar100": ("cifar100", "shufflenetv2", "adadelta", 50_000),
    "imagenet": ("imagenet", "resnet50", "adadelta", 1_281_167),
    "librispeech": ("librispeech", "deepspeech2", "adamw", 281_241),
    "movielens": ("movielens-1m", "ncf", "adam", 1_000_209),
    "squad": ("squad", "bert_base_uncased", "adamw", 87_599),
    "sentiment140": ("sentiment140", "bert_base_uncased", "adamw", 500_000),
}
"""Our name -> Zeus's dataset, network and optimizer, and the training set in samples (CIFAR-100's images,
ImageNet's, LibriSpeech's 960 hours of utterances, MovieLens-1M's ratings, SQuAD v1.1's questions, and the 500,000
tweets of one of Capriccio's Sentiment140 slices)."""
GPUS: tuple[str, ...] = ("a40", "p100", "rtx6000", "v100")


def dataset(workload: str, gpu: str) -> str:
    """The name of one workload's dataset on one GPU type (``datasets.DATASETS``), and of its CSV in ``OUT``."""
    return f"zeus-{workload}-{gpu}"


def names() -> list[str]:
    return [dataset(workload, gpu) for workload in WORKLOADS for gpu in GPUS]


def runs(table: str, workload: str, gpu: str) -> list[Observation]:
    """One workload's runs on one GPU type from its power trace (``table``: the text of ``summary_power_<gpu>.csv``),
    at the largest power limit the trace measured the workload at."""
    name, network, optimizer, samples = WORKLOADS[workload]
    rows = [
        row
        for row in csv.DictReader(table.splitlines())
        if (row["dataset"], row["network"], row["optimizer"]) == (name, network, optimizer)
    ]
    if not rows:
        return []
    power = max(int(row["power_limit"]) for row in rows)
    observed = [
        Observation(
            workload=dataset(workload, gpu),
            dataset_size=samples,
            epochs=1,
            batch_size=int(row["batch_size"]),
            workers=1,
            gpus_per_worker=1,
            nodes=1,
            accelerator=gpu,
            execution_seconds=round(float(row["time_per_epoch"]), 3),
            source=f"zeus:{gpu}:{name}:{row['batch_size']}:{power}W",
        )
        for row in rows
        if int(row["power_limit"]) == power
    ]
    return sorted(observed, key=lambda run: run.batch_size)


def main(argv: list[str] | None = None) -> int:
    checkout, out = parse_checkout(argv, __doc__.splitlines()[0], SOURCE, TRACES, OUT)
    folder = checkout / TRACES
    for gpu in GPUS:
        table = (folder / f"summary_power_{gpu}.csv").read_text(encoding="utf-8")
        for workload in WORKLOADS:
            converted = runs(table, workload, gpu)
            comments = [
                f"Zeus (NSDI'23) epoch times of {WORKLOADS[workload][1]} on {WORKLOADS[workload][0]}, one "
                f"{gpu.upper()}: {len(converted)} runs",
                f"from {SOURCE} (commit {COMMIT}, {TRACES}/summary_power_{gpu}.csv; Apache-2.0), converted by "
                "benchmarks.zeus",
            ]
            write_converted(out / f"{dataset(workload, gpu)}.csv", converted, comments)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
