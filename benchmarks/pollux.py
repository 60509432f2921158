"""Pollux (OSDI'21) step-time traces -> observations in the advisor's CSV schema.

Pollux measured the time of one training step of six models for every
placement of 1-16 GPUs over 1-4 nodes (``placements.csv``) and several
per-GPU batch sizes. A run of our schema is one epoch over a dataset:

- ``workers`` = GPUs (one data-parallel replica per GPU, ``gpus_per_worker`` 1,
  ``accelerator`` t4: Pollux measured on NVIDIA T4s);
  ``nodes`` = digits of the placement string;
- ``batch_size`` = per-GPU batch x workers (global);
- ``dataset_size``: each configuration is given one of four sizes, 1/8, 1/4,
  1/2 and 1 x the model's real training set, chosen by a hash of the
  configuration (deterministic, spread evenly), so that size splits exist;
- ``execution_seconds`` = ceil(dataset_size / batch_size) x step_time.

``scalability.csv`` (6-16 nodes, per-node split not recorded) is left out.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import zlib

from rayjob_advisor.observations import Observation, write_observations

# Training-set sizes (samples) of the Pollux workloads (Pollux paper, Table 1).
TRAINING_SET_SIZES: dict[str, int] = {
    "bert": 88_641,  # SQuAD v1.1 training questions
    "cifar10": 50_000,
    "deepspeech2": 6_000,  # CMU-ARCTIC utterances, approximate
    "imagenet": 1_281_167,
    "ncf": 994_169,  # MovieLens-1M ratings less one held-out rating per user
    "yolov3": 16_551,  # PASCAL VOC 2007+2012 trainval
}
SIZE_FRACTIONS: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
MODELS: tuple[str, ...] = tuple(TRAINING_SET_SIZES)
DEFAULT_POLLUX = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets" / "pollux"


def pollux_observations(pollux_dir: pathlib.Path, model: str) -> list[Observation]:
    """The placements of one Pollux model as observations (see module docstring)."""
    observations = []
    with (pollux_dir / model / "placements.csv").open(newline="") as stream:
        for row in csv.DictReader(stream):
            placement, local_bsz = row["placement"], int(row["local_bsz"])
            workers = sum(int(d) for d in placement)
            key = f"{placement}:{local_bsz}"
            fraction = SIZE_FRACTIONS[zlib.crc32(key.encode()) % len(SIZE_FRACTIONS)]
            size = int(TRAINING_SET_SIZES[model] * fraction)
            batch = local_bsz * workers
            observations.append(
                Observation(
                    workload=f"pollux-{model}",
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


def main() -> None:
    """Write one Pollux workload as an observations CSV (``--out``) for evaluate/fit/predict."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", choices=MODELS)
    parser.add_argument("--pollux-dir", type=pathlib.Path, default=DEFAULT_POLLUX)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()
    write_observations(args.out, pollux_observations(args.pollux_dir, args.model))


if __name__ == "__main__":
    main()
