"""One accuracy table over every dataset the project can reach and every kind of question a user asks.

For each dataset of ``benchmarks.datasets`` and each cut of ``benchmarks.questions`` (and, on the Sia, Gavel and Zeus
datasets, ``transfer``: a new accelerator measured only at its one or two smallest GPU counts, every run of another
accelerator beside it), the runs held out are predicted by

- ``chosen``: the advisor's model (``RuntimeModel().fit`` on the cut's training runs, what a job gets);
- every candidate alone (``RuntimeModel(candidate=...)``: floored, anchored), and ``best``, the lowest of them;
- ``ernest``: plain Ernest (Venkataraman et al., NSDI'16): unweighted NNLS on [1, s/m, log m, m], s the samples
  processed (dataset size x epochs), m the workers, no floor, no anchoring: the baseline to beat;

and the table prints each one's MAPE, the coverage of the chosen model's 0.9 upper bound, and the chosen model's
ratio to the best single candidate and to Ernest. The targets (issue 18): chosen <= 1.25x the best single
candidate and <= Ernest on every row; workers x4 <= 10 % on every Pollux and Sia dataset; per-worker batch
x2-4 <= 15 %; on the project's own Ray runs, workers 1-3 -> 4 (``workers-next``) and size x4 <= 8 %. A ratio
to a weak baseline says nothing of the number a user gets, so every other row must also be within 15 % (the
loosest of those targets) and its 0.9 bound must cover >= 0.85 of the held-out runs (the per-band coverage
target of the bounds since issue 9). A row PASSes on all of these; the summaries count them per
family, and per question over the data settings are chosen on and over held-out data (``datasets.HELD_OUT``,
``questions.HELD_OUT``). Ends with the time ``RuntimeModel.fit``
takes on 500 Pollux cifar10 runs (the budget: 1 s on 2 cores).

    .venv/bin/python -m benchmarks.accuracy --all
    .venv/bin/python -m benchmarks.accuracy --datasets ray-digits,pollux-bert --questions workers-x4,size-x4
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import nnls

from benchmarks import datasets, questions
from benchmarks.questions import Cut, mape
from rayjob_advisor.models.estimators import CANDIDATES
from rayjob_advisor.models.evaluation import NotEnoughData
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.transfer import TransferredModel, model_on
from rayjob_advisor.observations import Observation

CONFIDENCE = 0.9
BEST_RATIO = 1.25
WORKERS_TARGET = 0.10
BATCH_TARGET = 0.15
OWN_RAY_TARGET = 0.08
ANY_TARGET = 0.15
COVERAGE_TARGET = 0.85


@dataclasses.dataclass(frozen=True)
class Row:
    """One dataset and question: MAPE of the chosen model, of every candidate, of Ernest; the bound's coverage."""

    dataset: str
    question: str
    n_train: int
    n_test: int
    model: str
    chosen: float
    candidates: dict[str, float]
    ernest: float
    coverage: float

    @property
    def kind(self) -> str:
        """The question without its source GPU type (``transfer<-a100`` is a ``transfer``)."""
        return self.question.split("<-")[0]

    @property
    def best(self) -> tuple[str, float]:
        name = min(self.candidates, key=lambda c: self.candidates[c])
        return name, self.candidates[name]

    def failures(self) -> list[str]:
        """Which targets this row misses (module docstring)."""
        missed = []
        if self.chosen > BEST_RATIO * self.best[1] + 1e-9:
            missed.append(f"> {BEST_RATIO}x best")
        if self.chosen > self.ernest + 1e-9:
            missed.append("> Ernest")
        target = ANY_TARGET
        if self.question == "workers-x4":
            target = WORKERS_TARGET
        elif self.dataset in datasets.OWN_RAY_SWEEPS and self.question in ("workers-next", "size-x4"):
            target = OWN_RAY_TARGET
        if self.chosen > target:
            missed.append(f"> {target:.0%}")
        if self.coverage < COVERAGE_TARGET:
            missed.append(f"cov < {COVERAGE_TARGET}")
        return missed


def ernest_plain(train: Sequence[Observation], test: Sequence[Observation]) -> np.ndarray:
    """Plain Ernest's predictions of ``test`` fitted on ``train`` (module docstring)."""

    def basis(runs: Sequence[Observation]) -> np.ndarray:
        m = np.array([run.workers for run in runs], dtype=float)
        s = np.array([run.dataset_size * (run.epochs or 1) for run in runs], dtype=float)
        return np.column_stack([np.ones(len(runs)), s / m, np.log(m), m])

    coef, _ = nnls(basis(train), np.array([run.execution_seconds for run in train]))
    return np.asarray(basis(test) @ coef, dtype=float)


def _actual(runs: Sequence[Observation]) -> np.ndarray:
    return np.array([run.execution_seconds for run in runs], dtype=float)


def score(
    dataset: str,
    question: str,
    cut: Cut,
    chosen: RuntimeModel,
    own: Sequence[Observation],
    others: dict[str, RuntimeModel] | None = None,
) -> Row:
    """The row of one cut: ``chosen`` fitted already; the candidates fitted on ``own`` (the target's runs), and
    ``others``: more fitted models to count among the candidates."""
    actual = _actual(cut.test)
    estimates = chosen.estimate(cut.test, CONFIDENCE)
    singles = {name: mape(model.predict(cut.test), actual) for name, model in (others or {}).items()}
    for name in CANDIDATES:
        try:
            singles[name] = mape(RuntimeModel(name).fit(own).predict(cut.test), actual)
        except NotEnoughData:
            continue
    return Row(
        dataset=dataset,
        question=question,
        n_train=len(cut.train),
        n_test=len(cut.test),
        model=chosen.selected_,
        chosen=mape(estimates.p50, actual),
        candidates=singles,
        ernest=mape(ernest_plain(own, cut.test), actual),
        coverage=float(np.mean(actual <= estimates.upper)),
    )


def rows_of(dataset: str, runs: list[Observation], asked: Sequence[str]) -> tuple[list[Row], dict[str, str]]:
    """The rows of one dataset's questions, and why the others were skipped."""
    rows, skipped = [], {}
    for question in asked:
        if question == "transfer":
            continue
        cut = questions.QUESTIONS[question](runs)
        if isinstance(cut, str):
            skipped[question] = cut
            continue
        try:
            rows.append(score(dataset, question, cut, RuntimeModel().fit(cut.train), cut.train))
        except NotEnoughData as exc:
            skipped[question] = str(exc)
    return rows, skipped


def transfer_rows(dataset: str, runs: list[Observation]) -> tuple[list[Row], dict[str, str]]:
    """A dataset of a family with one per GPU type as a new accelerator beside each other GPU type of the same model
    (module docstring), and why the others were skipped."""
    gpu = dataset.rsplit("-", 1)[1]
    rows, skipped = [], {}
    for asked in questions.transfer_cuts(dataset, runs):
        question = f"transfer<-{asked.source}"
        if not asked.test:
            skipped[question] = "every run is among the new accelerator's few: none left to ask about"
            continue
        try:
            main = RuntimeModel().fit(asked.source_runs)
        except NotEnoughData as exc:
            skipped[question] = f"{asked.source}: {exc}"
            continue
        transferred = {"transferred": TransferredModel(main, asked.source).fit(asked.target)}
        chosen = model_on(asked.cut.train, gpu, main)
        rows.append(score(dataset, question, asked.cut, chosen, asked.target, transferred))
    return rows, skipped


def dataset_rows(dataset: str, asked: Sequence[str]) -> tuple[list[Row], str]:
    """Every row of one dataset, and a line saying what it held and skipped."""
    runs = datasets.DATASETS[dataset]()
    found, skipped = rows_of(dataset, runs, asked)
    if "transfer" in asked:
        transfers, unasked = transfer_rows(dataset, runs)
        found += transfers
        skipped |= unasked
    return found, f"{dataset}: {len(runs)} runs, {len(found)} questions; skipped: {skipped or 'none'}"


def fit_seconds() -> tuple[int, float, float]:
    """Rows, wall and CPU seconds of ``RuntimeModel.fit`` on 500 Pollux cifar10 runs (every other one)."""
    subset = datasets.DATASETS["pollux-cifar10"]()[::2][:500]
    wall, cpu = time.perf_counter(), time.process_time()
    RuntimeModel().fit(subset)
    return len(subset), time.perf_counter() - wall, time.process_time() - cpu


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def print_table(rows: Sequence[Row]) -> None:
    print(
        "| dataset | question | train/test | chosen (model) | best single | Ernest | chosen/best | chosen/Ernest "
        "| cov@0.9 | targets |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        best_name, best = row.best
        print(
            f"| {row.dataset} | {row.question} | {row.n_train}/{row.n_test} | {_pct(row.chosen)} ({row.model}) "
            f"| {_pct(best)} ({best_name}) | {_pct(row.ernest)} | {row.chosen / best:.2f} "
            f"| {row.chosen / row.ernest:.2f} | {row.coverage:.2f} | {', '.join(row.failures()) or 'PASS'} |"
        )


def held_out(row: Row) -> str:
    """Whether a row is of data no setting was chosen on: a held-out dataset or question."""
    held = row.dataset in datasets.HELD_OUT or row.kind in questions.HELD_OUT
    return "held out" if held else "chosen on"


def print_summary(rows: Sequence[Row], group: Callable[[Row], str]) -> None:
    """One line per ``group`` of rows and kind of question: the mean MAPE of the chosen model, of the best single
    candidate and of Ernest, the mean coverage and the rows passing."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((group(row), row.kind), []).append(row)
    width = max(len(name) for name, _ in groups)
    for (name, question), members in sorted(groups.items()):
        chosen = np.mean([r.chosen for r in members])
        best = np.mean([r.best[1] for r in members])
        ernest = np.mean([r.ernest for r in members])
        passing = sum(not r.failures() for r in members)
        cover = np.mean([r.coverage for r in members])
        print(
            f"{name:<{width}} {question:<15} {_pct(chosen):>6} / {_pct(best):>6} / {_pct(ernest):>6}  "
            f"cov {cover:.2f}  {passing}/{len(members)} pass"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every dataset and question (the default)")
    parser.add_argument("--datasets", default=",".join(datasets.reachable()), help="default: every reachable one")
    parser.add_argument("--questions", default=",".join([*questions.QUESTIONS, "transfer"]))
    parser.add_argument("--jobs", type=int, default=2, help="datasets measured at once (processes)")
    args = parser.parse_args()
    asked = args.questions.split(",")
    rows: list[Row] = []
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for found, line in pool.map(dataset_rows, args.datasets.split(","), itertools.repeat(asked)):
            rows += found
            print(line, flush=True)
    print()
    print_table(rows)
    print("\n## Per family and question: mean MAPE % (chosen / best single / Ernest), rows passing\n")
    print_summary(rows, lambda row: datasets.family(row.dataset))
    print("\n## Per question, on the data settings are chosen on and on held-out data: the same\n")
    print_summary(rows, held_out)
    print(f"\nrows passing every target: {sum(not r.failures() for r in rows)}/{len(rows)}")
    count, wall, cpu = fit_seconds()
    print(f"RuntimeModel.fit on {count} runs (pollux-cifar10, every other run): {wall:.2f}s wall, {cpu:.2f}s CPU")


if __name__ == "__main__":
    main()
