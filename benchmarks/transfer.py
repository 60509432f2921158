"""A new accelerator measured k times: its own model, the transferred one, or another's unchanged (Sia).

For each Sia model and each ordered pair of its accelerators (source,
target), the profile holds every run of the source (its most measured
accelerator, so its main model) and k runs of the target; a seeded third
of the target's runs is held out, and the k (k = 3, 5, 10, 20, drawn seeded
from the rest, ``DRAWS`` times; ``all``: every one of the rest, once) are
drawn once per target, shared by both sources. Printed per model, target,
source and k, the MAPE on the held-out runs of (a) the target's own model
fitted on its k runs (today's model), (b) the source's model transferred
with a speed factor (``models.transfer``), (c) the source's model unchanged
(today's fallback for an accelerator without runs), (d) the one of (a) and
(b) a profile picks (``better_of``: how often the transfer), and the
coverage of (b)'s 0.9 bound; then the mean and the worst of each per k
over all pairs.

    python -m benchmarks.transfer [--sia-dir DIR] [--draws N]

The Sia traces are not in this repository (they carry no licence): ``DIR`` holds ``sia-<model>-<gpu>.csv``
in the observation schema, converted from ``SIA_SOURCE`` (``benchmarks.sia``).
"""

from __future__ import annotations

import argparse
import collections
import pathlib

import numpy as np

from benchmarks.sia import ACCELERATORS, DEFAULT_SIA, MODELS, sia_observations
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import TransferredModel, better_of
from rayjob_advisor.observations import Observation
from rayjob_advisor_testkit.paths import require_data

KS: tuple[int | None, ...] = (3, 5, 10, 20, None)  # None: every run not held out
DRAWS = 5
CONFIDENCE = 0.9
HELD_OUT = 3  # one run in this many of the target's is held out
COLUMNS = ("own", "transferred", "fallback", "picked", "coverage")
SIA_SOURCE = "siasosp23/artifacts (commit aaf7a0de7b6c), sia-simulator/traces/<model>/{placements,scalability}-*.csv"


def _ape(model: RuntimeModel, test: list[Observation], actual: np.ndarray) -> float:
    return float(np.mean(np.abs(model.predict(test) / actual - 1.0)))


def _own(measured: list[Observation]) -> RuntimeModel | None:
    try:
        return RuntimeModel().fit(measured)
    except NotEnoughData:
        return None


def _cell(values: list[float]) -> str:
    return f"{100 * np.mean(values):6.1f}" if values else "     -"


def pair_rows(
    runs: dict[str, list[Observation]], target: str, draws: int, summary: dict[str, dict[str, list[float]]]
) -> list[str]:
    """Per source and k, the mean over draws of each column; each mean added to ``summary[k][column]``."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(runs[target]))
    test = [runs[target][i] for i in order[::HELD_OUT]]
    rest = [runs[target][i] for i in sorted(set(order.tolist()) - set(order[::HELD_OUT].tolist()))]
    actual = np.array([run.execution_seconds for run in test])
    drawn = {
        k: [rest] if k is None else [[rest[i] for i in rng.choice(len(rest), k, replace=False)] for _ in range(draws)]
        for k in KS
    }
    own = {k: [_own(measured) for measured in samples] for k, samples in drawn.items()}
    lines = []
    for source in (name for name in runs if name != target):
        main = RuntimeModel().fit(runs[source])
        for k, samples in drawn.items():
            cells: dict[str, list[float]] = {column: [] for column in COLUMNS}
            transfers = 0
            for measured, own_model in zip(samples, own[k], strict=True):
                transferred = TransferredModel(main, source).fit(measured)
                chosen = better_of([model for model in (own_model, transferred) if model is not None], [])
                transfers += chosen is transferred
                cells["own"] += [_ape(own_model, test, actual)] if own_model is not None else []
                cells["transferred"].append(_ape(transferred, test, actual))
                cells["picked"].append(_ape(chosen, test, actual))
                cells["coverage"].append(float(np.mean(actual <= transferred.estimate(test, CONFIDENCE).upper)))
            cells["fallback"].append(_ape(main, test, actual))
            label = "all" if k is None else str(k)
            for column, values in cells.items():
                summary[label][column] += [float(np.mean(values))] if values else []
            lines.append(
                f"{target:<10} {source:<10} {label:>4} {_cell(cells['own'])} {len(cells['own'])}/{len(samples)} "
                f"{_cell(cells['transferred'])} {_cell(cells['fallback'])} {_cell(cells['picked'])} "
                f"{transfers}/{len(samples)} {_cell(cells['coverage'])}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sia-dir", type=pathlib.Path, default=DEFAULT_SIA, help="the Sia runs (not shipped)")
    parser.add_argument("--draws", type=int, default=DRAWS)
    args = parser.parse_args()
    require_data(args.sia_dir, f"the Sia runs are converted from {SIA_SOURCE}, not shipped (no licence)")
    print(f"MAPE % on the target's held-out third, k of its other runs measured ({args.draws} seeded draws)")
    header = f"{'target':<10} {'source':<10} {'k':>4} {'own':>6} fit {'transf':>6} {'fallbk':>6} {'picked':>6} transf"
    print(f"{'model':<12}{header} {'cov0.9':>6}")
    summary: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for model in MODELS:
        observations = sia_observations(args.sia_dir, model)
        runs = {name: [run for run in observations if run.accelerator == name] for name in ACCELERATORS}
        print(model)
        for target in ACCELERATORS:
            for line in pair_rows(runs, target, args.draws, summary):
                print(f"{'':<12}{line}")
    print("\nper k over every model, target and source: mean (worst) of the per-pair means, %")
    print(f"{'k':>4} " + " ".join(f"{column:>14}" for column in COLUMNS))
    for label, columns in summary.items():
        cells = [
            f"{100 * np.mean(columns[c]):6.1f} ({100 * (min if c == 'coverage' else max)(columns[c]):5.1f})"
            if columns[c]
            else "- (too few)"  # an own model needs evaluation.MIN_RUNS runs or more
            for c in COLUMNS
        ]
        print(f"{label:>4} " + " ".join(f"{cell:>14}" for cell in cells))


if __name__ == "__main__":
    main()
