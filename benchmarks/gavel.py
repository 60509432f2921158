"""Gavel's measured throughputs -> observations in the advisor's CSV schema: scaling sweeps of K80s, P100s and V100s.

Gavel (Narayanan et al., *Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning Workloads*, OSDI'20)
ships the throughputs its simulator replays (``scheduler/simulation_throughputs.json`` in
``stanford-futuredata/gavel``, MIT licence): for each GPU type, each job type (a model at one batch size) and each
scale factor (1, 2, 4 or 8 GPUs), the steps per second the job made alone on them (the ``null`` entry; the others
are the job sharing the GPUs with another). Four of its models train data-parallel at every scale: ResNet-18 on
CIFAR-10, ResNet-50 on ImageNet, a Transformer on Multi30k and an LSTM language model on WikiText-2, at 4-5 batch
sizes each. Each (model, GPU type) becomes a dataset, a profiling sweep of batches x GPUs x placements like Pollux's
and Sia's, measured on GPUs and servers none of the project's other data has. A run of our schema:

- ``workers`` = the scale factor (one GPU per worker); ``nodes`` 1 where the GPUs share a server (Gavel's plain
  GPU type, "consolidated"), and one per GPU where each is on another server (its ``_unconsolidated`` type);
- ``batch_size`` = the job's batch size x the workers: each worker loads its own batch (the workloads' data loaders
  take ``--batch_size`` per process, under a distributed sampler);
- ``dataset_size`` = the model's training set (``MODELS``; WikiText-2 in sequences of the LM's 35 tokens), one epoch;
- ``execution_seconds`` = its steps / the throughput: Gavel's scheduler splits a job's steps among its workers, so
  the throughput counts every worker's steps, and an epoch of ``dataset_size`` samples is
  ``dataset_size / batch size`` of them; no start-up (Gavel measured steps).

Left out: a throughput of 0 (the job did not fit: ResNet-50 at a batch of 128 on more than one K80) and the V100
GPUs sharing a server (``NOT_PHYSICAL``): there a worker's step at a batch is faster on 2, 4 or 8 GPUs than on fewer
on 17 of 57 pairs of scales (up to 1.5x), which no synchronous data-parallel step does; every other GPU type's
throughputs, and the V100s on separate servers, never are. So the V100 datasets are of one GPU per server.

The CSVs this writes are in ``benchmarks/data/gavel``; to regenerate them, check out the Gavel repository at
``COMMIT`` and run

    .venv/bin/python -m benchmarks.gavel PATH-TO-gavel

Every one of these datasets is held out (``datasets.HELD_OUT``): added on 2026-12-07, after every setting was chosen,
and chosen on by none.
"""

from __future__ import annotations

import ast
import json
import pathlib
from typing import Any

from benchmarks.converted import parse_checkout, write_converted
from rayjob_advisor.observations import Observation

SOURCE = "https://github.com/stanford-futuredata/gavel"
COMMIT = "c4fa400"
THROUGHPUTS = pathlib.Path("scheduler") / "simulation_throughputs.json"
OUT = pathlib.Path(__file__).resolve().parent / "data" / "gavel"

MODELS: dict[str, tuple[str, int]] = {
    "resnet18": ("ResNet-18", 50_000),
    "resnet50": ("ResNet-50", 1_281_167),
    "transformer": ("Transformer", 29_000),
    "lm": ("LM", 2_088_628 // 35),
}
"""Our name -> Gavel's job type and its training set in samples (CIFAR-10, ImageNet, Multi30k's sentence pairs,
WikiText-2's tokens in sequences of 35): the models that train at every scale factor."""
GPUS: tuple[str, ...] = ("k80", "p100", "v100")
NOT_PHYSICAL: frozenset[str] = frozenset({"v100"})
"""GPU types whose consolidated multi-GPU throughputs are left out (module docstring)."""


def dataset(model: str, gpu: str) -> str:
    """The name of one model's dataset on one GPU type (``datasets.DATASETS``), and of its CSV in ``OUT``."""
    return f"gavel-{model}-{gpu}"


def names() -> list[str]:
    return [dataset(model, gpu) for model in MODELS for gpu in GPUS]


def runs(throughputs: dict[str, Any], model: str, gpu: str) -> list[Observation]:
    """One model's runs on one GPU type, consolidated and not, from Gavel's throughputs JSON."""
    job_type, samples = MODELS[model]
    observed: dict[tuple[int, int, int], Observation] = {}
    for suffix in ("", "_unconsolidated"):  # the GPUs on one server, then each on its own
        consolidated = not suffix
        for key, entry in throughputs[gpu + suffix].items():
            name, scale = ast.literal_eval(key)
            if not name.startswith(f"{job_type} (batch size "):
                continue
            batch, rate = int(name.rsplit(" ", 1)[1].rstrip(")")), float(entry["null"])
            nodes = 1 if consolidated else scale
            if rate <= 0 or (consolidated and scale > 1 and gpu in NOT_PHYSICAL):
                continue
            observed.setdefault(
                (batch, scale, nodes),
                Observation(
                    workload=dataset(model, gpu),
                    dataset_size=samples,
                    epochs=1,
                    batch_size=batch * scale,
                    workers=scale,
                    gpus_per_worker=1,
                    nodes=nodes,
                    accelerator=gpu,
                    execution_seconds=round(samples / batch / rate, 3),
                    source=f"gavel:{gpu}{suffix}:{name}:{scale}",
                ),
            )
    return sorted(observed.values(), key=lambda run: (run.batch_size // run.workers, run.workers, run.nodes))


def main(argv: list[str] | None = None) -> int:
    checkout, out = parse_checkout(argv, __doc__.splitlines()[0], SOURCE, THROUGHPUTS, OUT)
    throughputs = json.loads((checkout / THROUGHPUTS).read_text(encoding="utf-8"))
    for model in MODELS:
        for gpu in GPUS:
            converted = runs(throughputs, model, gpu)
            comments = [
                f"Gavel (OSDI'20) throughputs of {MODELS[model][0]} on {gpu.upper()}s: {len(converted)} runs",
                f"from {SOURCE} (commit {COMMIT}, {THROUGHPUTS}; MIT licence, Copyright (c) 2020 Stanford Future "
                "Data Systems), converted by benchmarks.gavel",
            ]
            write_converted(out / f"{dataset(model, gpu)}.csv", converted, comments)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
