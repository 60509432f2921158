"""Every measured dataset the project can reach, by name: what the accuracy table and the hyper-parameter choice
(``benchmarks.lodo``) run over.

- ``digits-cnn``: the shipped profile (real Ray Train runs of the digits CNN, one batch, one epoch, 3 repeats);
- ``ray-digits``: the project's own Ray Train sweep (``benchmarks/data/ray-digits.csv``: 4 dataset sizes over
  32x, two global batches, 1 and 2 epochs, 1-4 workers on a 2-core machine; its header says how it was made);
- ``pollux-<model>``: the six Pollux (OSDI'21) workloads on T4s, as shipped (``profiles/data``,
  ``benchmarks.pollux`` converts them);
- ``sia-<model>-<gpu>``: the Sia (SOSP'23) models on A100, RTX 2080Ti and V100, one dataset per GPU type
  (``benchmarks.sia``).

The Sia ones need the Sia traces (``benchmarks.sia``: they are not redistributable); the others ship with the
repository.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from benchmarks import pollux, sia
from rayjob_advisor.observations import Observation, read_observations
from rayjob_advisor.profiles.shipped import SHIPPED_DATA

DATA = pathlib.Path(__file__).resolve().parent / "data"
OWN_RAY_RUNS = DATA / "ray-digits.csv"


def _csv(path: pathlib.Path) -> Callable[[], list[Observation]]:
    return lambda: read_observations(path)[0]


def _sia(model: str, gpu: str) -> Callable[[], list[Observation]]:
    return lambda: [
        run.model_copy(update={"workload": f"sia-{model}-{gpu}"})
        for run in sia.sia_observations(sia.DEFAULT_SIA, model, (gpu,))
    ]


DATASETS: dict[str, Callable[[], list[Observation]]] = {
    "digits-cnn": _csv(SHIPPED_DATA / "digits-cnn.csv"),
    "ray-digits": _csv(OWN_RAY_RUNS),
    **{f"pollux-{model}": _csv(SHIPPED_DATA / f"pollux-{model}.csv") for model in pollux.MODELS},
    **{f"sia-{model}-{gpu}": _sia(model, gpu) for model in sia.MODELS for gpu in sia.ACCELERATORS},
}
"""Name -> a loader of its runs."""


def reachable() -> list[str]:
    """The datasets whose runs are here: the Sia traces are an optional extra (``benchmarks.sia``)."""
    return [name for name in DATASETS if family(name) != "sia" or sia.DEFAULT_SIA.is_dir()]


def family(name: str) -> str:
    """The source a dataset comes from (``ray``, ``pollux``, ``sia``): the tables summarise per family too."""
    return "ray" if name in ("digits-cnn", "ray-digits") else name.split("-")[0]
