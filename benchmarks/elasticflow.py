"""ElasticFlow's measured A100 throughputs -> observations in the advisor's CSV schema: strong scaling to 64 GPUs.

ElasticFlow (Gu et al., *ElasticFlow: An Elastic Serverless Training Platform for Distributed Deep Learning*,
ASPLOS'23) ships the throughputs its scheduler plans with (``ElasticFlow/scheduler/throughputs_A100/<model>.csv`` in
``pkusys/ElasticFlow``, Apache-2.0): for each of seven models, at two or three global batches (the rows), the
training steps per second on 1, 2, 4, 8, 16, 32 and 64 A100s (the columns), measured on Azure ND96asr A100 VMs (8
A100s each, HDR InfiniBand). A row is a strong-scaling curve: the global batch stays, so each GPU's share of it
shrinks as the GPUs grow. Each model becomes a dataset. A run of our schema:

- ``workers`` = the GPUs (one per worker), ``nodes`` = the VMs they fill, 8 GPUs each;
- ``batch_size`` = the row's global batch;
- ``dataset_size`` = ``STEPS`` steps of the largest global batch the model was measured at, one epoch: the
  throughputs are of steps, not of a training set, so the work is a convention, the same for every run of a model;
- ``execution_seconds`` = ``dataset_size / batch_size`` steps / the throughput; no start-up (measured steps).

Left out: empty or zero cells (not measured: ``resnet50_cifar10`` beyond 8 GPUs, ``deepspeech2`` at a global batch of
32 on 64). The CSVs this writes are in ``benchmarks/data/elasticflow``; to regenerate them, check out the repository at
``COMMIT`` and run

    .venv/bin/python -m benchmarks.elasticflow PATH-TO-ElasticFlow

Every one of these datasets is held out (``datasets.HELD_OUT``): added on 2026-12-07, after every setting was chosen,
and chosen on by none.
"""

from __future__ import annotations

import csv
import math
import pathlib

from benchmarks.converted import parse_checkout, write_converted
from rayjob_advisor.observations import Observation

SOURCE = "https://github.com/pkusys/ElasticFlow"
COMMIT = "04a0109"
THROUGHPUTS = pathlib.Path("ElasticFlow") / "scheduler" / "throughputs_A100"
OUT = pathlib.Path(__file__).resolve().parent / "data" / "elasticflow"
MODELS: tuple[str, ...] = ("bert", "deepspeech2", "gpt2", "inception3", "resnet50", "resnet50_cifar10", "vgg16")
GPUS_PER_NODE = 8
"""The A100s of one ND96asr VM."""
STEPS = 1000
"""The steps of the largest global batch a model's work is (module docstring)."""


def dataset(model: str) -> str:
    """The name of one model's dataset (``datasets.DATASETS``), and of its CSV in ``OUT``."""
    return f"elasticflow-{model.replace('_', '-')}"


def names() -> list[str]:
    return [dataset(model) for model in MODELS]


def runs(table: str, model: str) -> list[Observation]:
    """One model's runs from its throughputs CSV (``table``: its text)."""
    rows = list(csv.DictReader(table.splitlines()))
    largest = max(int(row["global_batch_size"]) for row in rows)
    observed = []
    for row in rows:
        batch = int(row.pop("global_batch_size"))
        steps = STEPS * largest / batch
        for gpus, cell in row.items():
            rate = float(cell or 0.0)
            if rate <= 0:
                continue
            observed.append(
                Observation(
                    workload=dataset(model),
                    dataset_size=STEPS * largest,
                    epochs=1,
                    batch_size=batch,
                    workers=int(gpus),
                    gpus_per_worker=1,
                    nodes=math.ceil(int(gpus) / GPUS_PER_NODE),
                    accelerator="a100",
                    execution_seconds=round(steps / rate, 3),
                    source=f"elasticflow:{model}:{batch}:{gpus}",
                )
            )
    return observed


def main(argv: list[str] | None = None) -> int:
    checkout, out = parse_checkout(argv, __doc__.splitlines()[0], SOURCE, THROUGHPUTS, OUT)
    folder = checkout / THROUGHPUTS
    for model in MODELS:
        converted = runs((folder / f"{model}.csv").read_text(encoding="utf-8"), model)
        comments = [
            f"ElasticFlow (ASPLOS'23) A100 throughputs of {model}: {len(converted)} runs",
            f"from {SOURCE} (commit {COMMIT}, {THROUGHPUTS / model}.csv; Apache-2.0), converted by "
            "benchmarks.elasticflow",
        ]
        write_converted(out / f"{dataset(model)}.csv", converted, comments)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
