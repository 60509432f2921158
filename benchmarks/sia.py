"""Sia (SOSP'23) step times on three GPU types -> one profile per model, its runs naming their accelerator.

The shared files (``sia-<model>-<gpu>.csv``, already in the observation
schema) carry the GPU type only in their name: each run of
``sia-bert-a100.csv`` becomes a run of workload ``sia-bert`` on accelerator
``a100``, so one profile holds the model's runs on A100, RTX 2080Ti and
V100 and a job is predicted from the runs of its own accelerator.
"""

from __future__ import annotations

import argparse
import pathlib

from rayjob_advisor import contract
from rayjob_advisor.observations import Observation, read_observations, write_observations
from rayjob_advisor_testkit.paths import SIA, require_data

MODELS: tuple[str, ...] = ("bert", "cifar10", "deepspeech2")
ACCELERATORS: tuple[str, ...] = ("a100", "rtx2080ti", "v100")
DEFAULT_SIA = SIA
ORIGIN = "the Sia (SOSP'23) step-time traces, sia-<model>-<gpu>.csv (not shipped)"


def sia_observations(
    sia_dir: pathlib.Path, model: str, accelerators: tuple[str, ...] = ACCELERATORS
) -> list[Observation]:
    """The runs of one Sia model on ``accelerators`` (from the file names), as workload ``sia-<model>``."""
    require_data(sia_dir, ORIGIN)
    runs = []
    for path in sorted(sia_dir.glob(f"sia-{model}-*.csv")):
        accelerator = contract.canonical_accelerator(path.stem.removeprefix(f"sia-{model}-"))
        if accelerator in accelerators:
            update = {"workload": f"sia-{model}", "accelerator": accelerator}
            runs += [run.model_copy(update=update) for run in read_observations(path)[0]]
    return runs


def main() -> None:
    """Write one Sia model's runs on every accelerator as an observations CSV (``--out``) for evaluate/fit/predict."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", choices=MODELS)
    parser.add_argument("--sia-dir", type=pathlib.Path, default=DEFAULT_SIA)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()
    comment = f"Sia (SOSP'23) step times of {args.model} on {', '.join(ACCELERATORS)}: see {args.sia_dir}/SOURCE.md"
    write_observations(args.out, sia_observations(args.sia_dir, args.model), [comment])


if __name__ == "__main__":
    main()
