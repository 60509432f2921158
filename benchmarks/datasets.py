"""Every measured dataset the project can reach, by name: what the accuracy table and the hyper-parameter choice
(``benchmarks.lodo``) run over.

- ``digits-cnn``: the shipped profile (real Ray Train runs of the digits CNN, one batch, one epoch, 3 repeats);
- ``ray-digits``: the project's own Ray Train sweep (``benchmarks/data/ray-digits.csv``: 4 dataset sizes over
  32x, two global batches, 1 and 2 epochs, 1-4 workers on a 2-core machine; its header says how it was made);
- ``ray-mlp``: another own sweep, of the built-in ``tabular-mlp`` (``benchmarks/data/ray-mlp.csv``: 3 dataset
  sizes over 16x, the same batches, epochs and workers), measured after the constants of the models were chosen
  (every grid of ``benchmarks.lodo`` and the plan's were re-run with it since) by
  ``RAY_TRAIN_ENABLE_STATE_TRACKING=1 rayjob-advisor profile --workload tabular-mlp
  --workers 1,2,3,4 --dataset-sizes 3600,14400,57600 --epochs 1,2 --batch-size 128,512 --cpus-per-worker 0.5
  --repeats 1 --out benchmarks/data/ray-mlp.csv`` (10 minutes on 2 cores);
- ``ray-digits-repeat``: ``ray-digits``' sweep measured again by the same command on 2026-12-07, on the same kind of
  2-core machine with nothing else running, after every setting was chosen; held out (``HELD_OUT``). With
  ``ray-digits`` it is two repeats of each configuration (``benchmarks.profile_noise``: the floor of their noise);
- ``ray-mlp-repeat``: ``ray-mlp``'s sweep measured again the same way, the same day; held out likewise;
- ``pollux-<model>``: the six Pollux (OSDI'21) workloads on T4s, as shipped (``profiles/data``,
  ``benchmarks.pollux`` converts them);
- ``sia-<model>-<gpu>``: the Sia (SOSP'23) models on A100, RTX 2080Ti and V100, one dataset per GPU type
  (``benchmarks.sia``);
- ``mlperf-<benchmark>-<series>``: MLPerf Training time-to-train of ResNet-50 and BERT on one submitter's system at
  3-6 node counts (``benchmarks.mlperf``, ``benchmarks/data/mlperf``): rounds v3.0, v4.0 and v5.0 (4-2,528 A100s,
  H100s or GB200s), held out when they were added and, once changes had been tried on them, chosen on like the
  others; and, held out (``HELD_OUT``), rounds v2.1 and v3.1 on other systems (8-4,216 A100s of HPE, NVIDIA and
  Azure, 2-10 PCIe A100s of Fujitsu, 8-3,472 H100s of NVIDIA), added after that and never used to choose a
  setting; and two more held-out families: rounds v1.0 and v1.1 (8-4,320 A100s of NVIDIA, Azure and Dell), and
  Llama 3.1 8B pretraining of round v5.1 (8-512 GB200s, GB300s and B200s);
- ``gavel-<model>-<gpu>``: Gavel's (OSDI'20) measured throughputs of ResNet-18, ResNet-50, a Transformer and an
  LSTM language model on 1-8 K80s, P100s and V100s, on one server and on as many servers as GPUs, at 4-5 batch sizes
  (``benchmarks.gavel``, ``benchmarks/data/gavel``); held out (``HELD_OUT``), added after every setting was chosen;
- ``elasticflow-<model>``: ElasticFlow's (ASPLOS'23) measured throughputs of seven models on 1-64 A100s (8 a node) at
  two or three global batches each, strong-scaling curves (``benchmarks.elasticflow``, ``benchmarks/data/elasticflow``);
  held out (``HELD_OUT``), added after every setting was chosen;
- ``zeus-<workload>-<gpu>``: Zeus's (NSDI'23) measured epoch times of six workloads on one A40, P100, Quadro RTX 6000
  or V100 at 4-15 batch sizes each, per-GPU batch sweeps (``benchmarks.zeus``, ``benchmarks/data/zeus``); held out
  (``HELD_OUT``), added after every setting was chosen.

The Sia ones need the Sia traces (``benchmarks.sia``: they are not redistributable); the others ship with the
repository.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from benchmarks import elasticflow, gavel, mlperf, pollux, sia, zeus
from rayjob_advisor.observations import Observation, read_observations
from rayjob_advisor.profiles.shipped import SHIPPED_DATA

DATA = pathlib.Path(__file__).resolve().parent / "data"
OWN_RAY_HELD_OUT = ("ray-digits-repeat", "ray-mlp-repeat")
"""The own sweeps measured after every setting was chosen, and never chosen on."""
OWN_RAY_SWEEPS = ("ray-digits", "ray-mlp", *OWN_RAY_HELD_OUT)
"""The project's own Ray Train sweeps (``benchmarks/data/<name>.csv``): what ``rayjob-advisor profile`` measures."""


def _csv(path: pathlib.Path) -> Callable[[], list[Observation]]:
    return lambda: read_observations(path)[0]


def _sia(model: str, gpu: str) -> Callable[[], list[Observation]]:
    return lambda: [
        run.model_copy(update={"workload": f"sia-{model}-{gpu}"})
        for run in sia.sia_observations(sia.DEFAULT_SIA, model, (gpu,))
    ]


DATASETS: dict[str, Callable[[], list[Observation]]] = {
    "digits-cnn": _csv(SHIPPED_DATA / "digits-cnn.csv"),
    **{name: _csv(DATA / f"{name}.csv") for name in OWN_RAY_SWEEPS},
    **{f"pollux-{model}": _csv(SHIPPED_DATA / f"pollux-{model}.csv") for model in pollux.MODELS},
    **{f"sia-{model}-{gpu}": _sia(model, gpu) for model in sia.MODELS for gpu in sia.ACCELERATORS},
    **{name: _csv(mlperf.OUT / f"{name}.csv") for name in mlperf.names()},
    **{name: _csv(gavel.OUT / f"{name}.csv") for name in gavel.names()},
    **{name: _csv(elasticflow.OUT / f"{name}.csv") for name in elasticflow.names()},
    **{name: _csv(zeus.OUT / f"{name}.csv") for name in zeus.names()},
}
"""Name -> a loader of its runs."""

HELD_OUT: tuple[str, ...] = (
    *mlperf.names(held_out=True),
    *OWN_RAY_HELD_OUT,
    *gavel.names(),
    *elasticflow.names(),
    *zeus.names(),
)
"""Datasets the accuracy table reports and no setting is chosen on (``tuning``): other clusters' curves and other
GPUs' sweeps, the closest the project has to the data its figures will be judged on, and the own sweeps measured
again."""


def reachable() -> list[str]:
    """The datasets whose runs are here: the Sia traces are an optional extra (``benchmarks.sia``)."""
    return [name for name in DATASETS if family(name) != "sia" or sia.DEFAULT_SIA.is_dir()]


def tuning() -> list[str]:
    """The reachable datasets the settings are chosen on (``benchmarks.lodo``): all but the ``HELD_OUT`` ones."""
    return [name for name in reachable() if name not in HELD_OUT]


def sweeps() -> list[str]:
    """The datasets the settings are chosen on that are profiling sweeps, a grid a profiling plan chooses its runs
    from (``benchmarks.plan``): all of ``tuning`` but MLPerf's, one tuned submission per scale at 3-6 of them."""
    return [name for name in tuning() if name not in mlperf.names()]


def family(name: str) -> str:
    """The source a dataset comes from (``ray``, ``pollux``, ``sia``, ``mlperf``), or its held-out family
    (``mlperf.Series.held_out``, ``held-out-ray``, ``held-out-gavel``, ``held-out-elasticflow``,
    ``held-out-zeus``): the tables summarise per family too."""
    mlperf_families = mlperf.families()
    if name in mlperf_families:
        return mlperf_families[name]
    if name in OWN_RAY_HELD_OUT:
        return "held-out-ray"
    if name in gavel.names():
        return "held-out-gavel"
    if name in elasticflow.names():
        return "held-out-elasticflow"
    if name in zeus.names():
        return "held-out-zeus"
    return "ray" if name == "digits-cnn" or name in OWN_RAY_SWEEPS else name.split("-")[0]
