"""MLPerf Training results -> observations in the advisor's CSV schema: real scaling curves of other clusters.

MLCommons publishes every submission's logs (``mlcommons/training_results_<round>``, Apache-2.0): each run of a
benchmark on a system, from one node to hundreds, in ``<submitter>/results/<system>/<benchmark>/result_*.txt``,
and the system's nodes and accelerators in ``<submitter>/systems/<system>.json``. A *series* is one submitter's
system at several node counts (``SERIES``: A100s, H100s and Blackwells of rounds v1.0 to v5.1); each becomes a
dataset of the accuracy table, on accelerators and networks the project's own data does not have. The settings of
the models are chosen on those of v3.0, v4.0 and v5.0 too; the ``held_out`` series (``datasets.HELD_OUT``, three
families) choose none. A run of our schema:

- ``workers`` = accelerators (one data-parallel replica per GPU, ``gpus_per_worker`` 1), ``nodes`` = the system's
  nodes, ``accelerator`` its model;
- ``batch_size`` = ``global_batch_size`` (submissions raise it with the scale: the per-GPU batch varies too);
- the work: ResNet-50 trains whole epochs of ImageNet's ``train_samples`` (1,281,167), ``epochs`` = the epoch of
  the evaluation that reached the target; BERT trains samples (``epochs`` 1, ``dataset_size`` = the
  ``train_samples`` it logs at the end), Llama 3.1 8B sequences (``dataset_size`` = ``samples_count`` at
  ``run_stop``);
- ``execution_seconds`` = ``run_stop`` - ``run_start`` (MLPerf's time to train, evaluations included);
  ``startup_seconds`` = ``run_start`` - ``init_start`` (the in-job initialisation MLPerf does not time).

Only runs whose ``run_stop`` says ``success``. The CSVs this writes are in ``benchmarks/data/mlperf``; to
regenerate a round's, check out its results repository at the commit in ``ROUNDS`` and run

    .venv/bin/python -m benchmarks.mlperf v3.0 PATH-TO-training_results_v3.0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
from collections.abc import Iterator
from typing import Any

from benchmarks.converted import write_converted
from rayjob_advisor.observations import Observation

SOURCE = "https://github.com/mlcommons/training_results_{round}"
ROUNDS: dict[str, str] = {
    "v1.0": "50619b5",
    "v1.1": "ebe92f8",
    "v2.1": "158189d",
    "v3.0": "63e326c",
    "v3.1": "d06288b",
    "v4.0": "6fe9543",
    "v5.0": "0fdc28f",
    "v5.1": "441d65f",
}
"""The rounds converted, and the commit of each results repository the CSVs were made from."""
OUT = pathlib.Path(__file__).resolve().parent / "data" / "mlperf"

FRAMEWORKS: dict[str, str] = {"resnet": "mxnet", "bert": "pytorch", "llama31_8b": "nemo"}
"""The benchmarks converted, and NVIDIA's framework for each: those whose logs say plainly how much work a run did
(the others count epochs from 0 or 1, or log the per-epoch samples of a subset). ResNet-50 trains whole epochs,
BERT logs the samples it trained at the end, Llama 3.1 8B (pretraining, v5.1) the samples at ``run_stop``."""


@dataclasses.dataclass(frozen=True)
class Series:
    """One submitter's system at several node counts, with the same nodes and network, in one round."""

    round: str
    submitter: str
    system: str  # its name at each count: ``{nodes}`` one of ``counts``; NVIDIA's names its ``{framework}`` too
    counts: tuple[str, ...]
    benchmarks: tuple[str, ...] = ("resnet", "bert")
    held_out: str = ""  # the held-out family: added after the models' settings were chosen, never used to choose one

    def systems(self, benchmark: str) -> list[str]:
        return [self.system.format(nodes=count, framework=FRAMEWORKS[benchmark]) for count in self.counts]


SERIES: dict[str, Series] = {
    "dell-a100-sxm40": Series("v3.0", "Dell", "{nodes}XE8545x4A100-SXM-40GB", ("", "2x", "4x", "8x", "16x", "32x")),
    "dell-a100-sxm80": Series("v3.0", "Dell", "{nodes}XE8545x4A100-SXM-80GB", ("", "2x", "4x")),
    "dell-a100-pcie": Series("v3.0", "Dell", "{nodes}R750xax4A100-PCIE-80GB", ("", "2x", "4x", "8x")),
    "nvidia-h100": Series("v3.0", "NVIDIA", "dgxh100{nodes}_ngc23.04_{framework}", ("", "_n8", "_n64", "_n96")),
    "nvidia-h100-eos": Series("v4.0", "NVIDIA", "eos{nodes}_ngc24.04_{framework}", ("", "_n8", "_n316"), ("resnet",)),
    "dell-gb200": Series("v5.0", "Dell", "{nodes}xXE9712x4GB200", ("1", "2", "4", "8"), ("bert",)),
    "hpe-a100": Series(
        "v2.1", "HPE", "HPE-ProLiant-XL675d-Gen10-Plus_A100-SXM-80GB_{nodes}{framework}",
        ("", "2N_", "4N_", "8N_", "16N_"), held_out="held-out",
    ),
    "nvidia-a100": Series(
        "v2.1", "NVIDIA", "dgxa100{nodes}_ngc22.04_{framework}", ("", "_n8", "_n128", "_n527"), ("resnet",),
        held_out="held-out",
    ),
    "nvidia-a100-mixed": Series(
        "v2.1", "NVIDIA", "dgxa100{nodes}_{framework}",
        ("_ngc22.09", "_n8_ngc22.09", "_n128_ngc22.04", "_n512_ngc22.04"), ("bert",), held_out="held-out",
    ),
    "azure-a100": Series(
        "v2.1", "Azure-HazyResearch", "ND96amsr_A100_v4{nodes}_{framework}", ("_n1", "_n8", "_n16"), ("bert",),
        held_out="held-out",
    ),
    "fujitsu-a100-pcie": Series(
        "v3.1", "Fujitsu", "primergy-cdi-A100x{nodes}-mxnet-ngc23.09", ("2", "4", "8", "10"), ("resnet",),
        held_out="held-out",
    ),
    "nvidia-h100-eos-mixed": Series(
        "v3.1", "NVIDIA", "eos{nodes}_{framework}", ("_ngc23.04", "_n8_ngc23.04", "_n434_ngc23.09"), ("bert",),
        held_out="held-out",
    ),
    "nvidia-a100-v1.1": Series(
        "v1.1", "NVIDIA", "dgxa100{nodes}_ngc21.09_{framework}", ("", "_n8", "_n128", "_n540"), held_out="held-out-v1"
    ),
    "azure-a100-v1.1": Series(
        "v1.1", "Azure", "nd96amsr_a100_v4{nodes}_ngc21.09_{framework}", ("", "_n8", "_n128", "_n256"), ("bert",),
        held_out="held-out-v1",
    ),
    "dell-a100-pcie-v1.1": Series(
        "v1.1", "Dell", "{nodes}R750xax4A100-PCIE-80GB", ("", "2x", "4x", "8x"), ("resnet",), held_out="held-out-v1"
    ),
    "dell-dss8440-a100-pcie": Series(
        "v1.0", "Dell", "{nodes}DSS8440x8A100-PCIE-40GB", ("", "2x", "3x"), ("resnet",), held_out="held-out-v1"
    ),
    "nvidia-gb200": Series(
        "v5.1", "NVIDIA", "tyche{nodes}_ngc25.09_{framework}", ("_ngpu8", "_ngpu72", "_ngpu512"), ("llama31_8b",),
        held_out="held-out-llm",
    ),
    "nvidia-gb300": Series(
        "v5.1", "NVIDIA", "theia{nodes}_ngc25.09_{framework}", ("_ngpu8", "_ngpu72", "_ngpu512"), ("llama31_8b",),
        held_out="held-out-llm",
    ),
    "uf-b200": Series(
        "v5.1", "University-of-Florida", "hpg.dgxb200x8{nodes}", (".n1", ".n2", ".n4", ".n8", ".n16", ".n32"),
        ("llama31_8b",), held_out="held-out-llm",
    ),
    "nebius-b200": Series(
        "v5.1", "Nebius", "nebius_b200{nodes}", ("_n1", "_n2", "_n4"), ("llama31_8b",), held_out="held-out-llm"
    ),
}  # fmt: skip
"""Every series of rounds v3.0, v4.0 and v5.0 with three node counts or more of a benchmark of ``FRAMEWORKS``, on a
system of one network (Dell's 1- and 2-rail Omni-Path variants of the R750xa are other networks, left out); and,
``held_out``, those of v2.1 and v3.1 on systems no other series has (HPE's, NVIDIA's DGX A100, Azure's, Fujitsu's
composable 2-10 PCIe A100s on one node; BERT on NVIDIA's Eos, whose 8- and 64-GPU runs v3.1 publishes again from
v3.0's ``nvidia-h100``, so only its 3,472 GPUs are new; ``-mixed``: NVIDIA's containers of two releases). A second
held-out family, ``held-out-v1``, added on 2026-12-05 (night) and measured once on the code as it stood: the series
of rounds v1.0 and v1.1 with three node counts or more whose logs are in the repositories (NVIDIA's DGX A100s at
8-4,320 GPUs, BERT on Azure's at 8-2,048, Dell's R750xa at 4-32 PCIe A100s, its DSS8440 at 8-24): systems like
those above, earlier software, larger scales. A third, ``held-out-llm``, the same night: Llama 3.1 8B pretraining
of round v5.1 on Blackwell systems at three node counts or more (NVIDIA's GB200 and GB300 at 8, 72 and 512 GPUs,
the University of Florida's DGX B200s at 8-256, Nebius's B200s at 8-32): a workload and accelerators no other
dataset has."""


def dataset(benchmark: str, series: str) -> str:
    """The name of the dataset of one benchmark on one series (``datasets.DATASETS``), and of its CSV in ``OUT``."""
    return f"mlperf-{benchmark}-{series}"


def families() -> dict[str, str]:
    """The datasets this converts to, one per benchmark and series, each with its family: its series' held-out
    family (``Series.held_out``), else ``mlperf``."""
    return {
        dataset(benchmark, key): series.held_out or "mlperf"
        for key, series in SERIES.items()
        for benchmark in series.benchmarks
    }


def names(*, held_out: bool | None = None) -> list[str]:
    """The datasets of ``families``; of the ``held_out`` series or of the others only, where that is given
    (``datasets.HELD_OUT``)."""
    return [name for name, family in families().items() if held_out in (None, family != "mlperf")]


def _events(path: pathlib.Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        marker = line.find(":::MLLOG ")
        if marker >= 0:
            yield json.loads(line[marker + len(":::MLLOG ") :])


def run(path: pathlib.Path, benchmark: str, system: dict[str, Any], workload: str) -> Observation | None:
    """One result log as a run, or None if it did not finish with ``success``."""
    first: dict[str, dict[str, Any]] = {}
    last: dict[str, dict[str, Any]] = {}
    for event in _events(path):
        key = str(event["key"])
        first.setdefault(key, event)
        last[key] = event
    stop = last.get("run_stop")
    if stop is None or (stop.get("metadata") or {}).get("status") != "success":
        return None
    nodes, per_node = int(system["number_of_nodes"]), int(system["accelerators_per_node"])
    if benchmark == "resnet":
        size, epochs = int(first["train_samples"]["value"]), int(last["eval_accuracy"]["metadata"]["epoch_num"])
    elif benchmark == "llama31_8b":
        size, epochs = int(stop["metadata"]["samples_count"]), 1
    else:
        size, epochs = int(last["train_samples"]["value"]), 1
    start = int(first["run_start"]["time_ms"])
    return Observation(
        workload=workload,
        dataset_size=size,
        epochs=epochs,
        batch_size=int(first["global_batch_size"]["value"]),
        workers=nodes * per_node,
        gpus_per_worker=1,
        nodes=nodes,
        accelerator=str(system["accelerator_model_name"]),
        execution_seconds=(int(stop["time_ms"]) - start) / 1000,
        startup_seconds=(start - int(first["init_start"]["time_ms"])) / 1000,
        source=f"{path.parent.parent.name}/{path.parent.name}/{path.name}",
    )


def series_runs(root: pathlib.Path, name: str, benchmark: str) -> list[Observation]:
    """Every successful run of ``benchmark`` on the systems of series ``name``, from a checkout of its round."""
    series = SERIES[name]
    runs = []
    for system_name in series.systems(benchmark):
        system = json.loads((root / series.submitter / "systems" / f"{system_name}.json").read_text(encoding="utf-8"))
        for log in sorted((root / series.submitter / "results" / system_name / benchmark).glob("result_*.txt")):
            observed = run(log, benchmark, system, dataset(benchmark, name))
            if observed is not None:
                runs.append(observed)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("round", choices=ROUNDS, help="the round of the checkout")
    parser.add_argument("results", type=pathlib.Path, help="a checkout of training_results_<round>")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args(argv)
    if not (args.results / "LICENSE.md").is_file():
        parser.error(f"{args.results} is not a checkout of {SOURCE.format(round=args.round)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name, series in SERIES.items():
        if series.round != args.round:
            continue
        for benchmark in series.benchmarks:
            runs, converted = series_runs(args.results, name, benchmark), dataset(benchmark, name)
            comments = [
                f"MLPerf Training {series.round} {benchmark} on {series.submitter}'s {name} systems: {len(runs)} runs",
                f"from {SOURCE.format(round=series.round)} (commit {ROUNDS[series.round]}, Apache-2.0), converted by "
                "benchmarks.mlperf",
            ]
            write_converted(args.out / f"{converted}.csv", runs, comments)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
