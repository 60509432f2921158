"""Pollux (OSDI'21) step-time traces -> observations in the advisor's CSV schema, and the shipped profiles.

Pollux measured the time of one training step of six models for every
placement of 1-16 GPUs over 1-4 nodes (``placements.csv``) and several
per-GPU batch sizes, on T4 GPUs (4 per node). A run of our schema is one
epoch over a dataset:

- ``workers`` = GPUs (one data-parallel replica per GPU, ``gpus_per_worker`` 1,
  ``accelerator`` t4: Pollux measured on NVIDIA T4s);
  ``nodes`` = digits of the placement string;
- ``batch_size`` = per-GPU batch x workers (global);
- ``dataset_size``: each configuration is given one of four sizes, 1/8, 1/4,
  1/2 and 1 x the model's real training set, chosen by a hash of the
  configuration (deterministic, spread evenly), so that size splits exist;
- ``execution_seconds`` = ceil(dataset_size / batch_size) x step_time;
- ``startup_seconds``: unknown (Pollux measured steps, not pod start-up).

``scalability.csv`` (6-16 nodes, per-node split not recorded) is left out.

The six shipped profiles ``operator/rayjob_advisor/profiles/data/pollux-<model>.csv``
are this conversion, with provenance comments. The traces themselves are not in this repository: copy
``sched/traces/`` of the Pollux artifact (``SOURCE_REPOSITORY``, branch ``osdi21-artifact``) to a folder, e.g.
``$RAYJOB_ADVISOR_SHARED/datasets/pollux`` (the default, with that variable set), and regenerate the profiles with

    .venv/bin/python -m benchmarks.pollux --shipped [--pollux-dir FOLDER]
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import zlib

from rayjob_advisor.observations import Observation, write_observations
from rayjob_advisor.profiles.shipped import SHIPPED_DATA
from rayjob_advisor_testkit.paths import POLLUX, require_data

# Training-set sizes (samples) of the Pollux workloads (Pollux paper, Table 1).
TRAINING_SET_SIZES: dict[str, int] = {
    "bert": 88_641,  # SQuAD v1.1 training questions
    "cifar10": 50_000,
    "deepspeech2": 6_000,  # CMU-ARCTIC utterances, approximate
    "imagenet": 1_281_167,
    "ncf": 994_169,  # MovieLens-1M ratings less one held-out rating per user
    "yolov3": 16_551,  # PASCAL VOC 2007+2012 trainval
}
DESCRIPTIONS: dict[str, str] = {
    "bert": "BERT (bert-base-uncased) fine-tuning on SQuAD v1.1",
    "cifar10": "ResNet-18 on CIFAR-10",
    "deepspeech2": "DeepSpeech2 on CMU-ARCTIC",
    "imagenet": "ResNet-50 on ImageNet",
    "ncf": "NeuMF on MovieLens-1M",
    "yolov3": "YOLOv3 on PASCAL VOC",
}
SIZE_FRACTIONS: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
MODELS: tuple[str, ...] = tuple(TRAINING_SET_SIZES)
DEFAULT_POLLUX = POLLUX
GPUS_PER_NODE = 4  # AWS g4dn.12xlarge: 4 T4 GPUs
SOURCE_REPOSITORY = "https://github.com/petuum/adaptdl"
SOURCE_COMMIT = "c793c7089bd307462686339d29707925c461f9a9"  # branch osdi21-artifact
ORIGIN = f"the Pollux traces are sched/traces/<model>/placements.csv of {SOURCE_REPOSITORY}, branch osdi21-artifact"


def pollux_observations(pollux_dir: pathlib.Path, model: str) -> list[Observation]:
    """The placements of one Pollux model as observations (see module docstring)."""
    placements = pollux_dir / model / "placements.csv"
    require_data(placements, ORIGIN)
    observations = []
    with placements.open(newline="") as stream:
        for row in csv.DictReader(stream):
            placement, local_bsz = row["placement"], int(row["local_bsz"])
            workers = sum(int(d) for d in placement)
            key = f"{placement}:{local_bsz}"
            fraction = SIZE_FRACTIONS[zlib.crc32(key.encode()) % len(SIZE_FRACTIONS)]
            size = int(TRAINING_SET_SIZES[model] * fraction)
            batch = local_bsz * workers
            observations.append(
                Observation(
                    workload=workload(model),
                    dataset_size=size,
                    epochs=1,
                    batch_size=batch,
                    workers=workers,
                    gpus_per_worker=1,
                    nodes=len(placement),
                    accelerator="t4",
                    execution_seconds=math.ceil(size / batch) * float(row["step_time"]),
                    source=f"pollux:{model}:{key}",
                )
            )
    return observations


def workload(model: str) -> str:
    """The workload name of a Pollux model's profile (and shipped file)."""
    return f"pollux-{model}"


def provenance(model: str) -> list[str]:
    """The comment lines of a shipped profile: what was measured, where it comes from, how converted, license."""
    return [
        f"Pollux (OSDI'21) measurements of {DESCRIPTIONS[model]}: NVIDIA T4 GPUs, AWS g4dn.12xlarge, 4 per node",
        f"source: {SOURCE_REPOSITORY}, branch osdi21-artifact, commit {SOURCE_COMMIT},"
        f" file sched/traces/{model}/placements.csv (placement, local_bsz, step_time, sync_time)",
        "conversion (python -m benchmarks.pollux --shipped): one run per placement and per-GPU batch;"
        " workers = GPUs, nodes = digits of the placement, batch_size = local_bsz x workers,"
        f" dataset_size = 1/8, 1/4, 1/2 or 1 x {TRAINING_SET_SIZES[model]} samples (by a CRC-32 of the configuration),"
        " execution_seconds = ceil(dataset_size / batch_size) x step_time; start-up not measured",
        "license: Apache-2.0 (LICENSE-pollux next to this file), Copyright 2020 Petuum, Inc. and the AdaptDL / Pollux"
        " authors; see NOTICE",
    ]


def write_shipped(pollux_dir: pathlib.Path, data_dir: pathlib.Path = SHIPPED_DATA) -> list[pathlib.Path]:
    """Write the six shipped profiles ``pollux-<model>.csv`` into ``data_dir``."""
    paths = []
    for model in MODELS:
        path = data_dir / f"{workload(model)}.csv"
        write_observations(path, pollux_observations(pollux_dir, model), provenance(model))
        paths.append(path)
    return paths


def main() -> None:
    """Write one Pollux workload as an observations CSV (``--out``), or regenerate the shipped profiles."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", nargs="?", choices=MODELS)
    parser.add_argument("--pollux-dir", type=pathlib.Path, default=DEFAULT_POLLUX, help="the traces (not shipped)")
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--shipped", action="store_true", help="write the six shipped profiles")
    args = parser.parse_args()
    if args.shipped:
        for path in write_shipped(args.pollux_dir):
            print(path)
    elif args.model and args.out:
        write_observations(args.out, pollux_observations(args.pollux_dir, args.model))
    else:
        parser.error("give a model and --out FILE.csv, or --shipped")


if __name__ == "__main__":
    main()
