"""Accuracy of the runtime models on real measurements: the Pollux (OSDI'21) traces.

For each of the six Pollux workloads: the evaluate table (every candidate on
every split), then the ratio of the selected model's MAPE to Ernest's per
split, the pooled coverage of the 0.9 upper bound, and the time `evaluate`
took. Ends with a summary table (markdown) and the time to evaluate a
500-row profile.

Ernest has no batch-size term, and Pollux varies the per-GPU batch, so the
benchmark also compares the two on the fairest ground for Ernest: each
workload's runs at its most measured per-GPU batch size only.

    .venv/bin/python -m benchmarks.accuracy [--pollux-dir ../shared/datasets/pollux]
"""

from __future__ import annotations

import argparse
import pathlib
import time
from collections import Counter

import numpy as np

from benchmarks.pollux import DEFAULT_POLLUX, MODELS, pollux_observations
from rayjob_advisor.cli import evaluation_table
from rayjob_advisor.models import evaluation


def pooled_coverage(result: evaluation.Evaluation, model: str) -> float:
    """Share of all held-out points, over every split, under the model's 0.9 upper bound."""
    scores = [models[model] for models in result.splits.values()]
    return sum(s.coverage * s.n_test for s in scores) / sum(s.n_test for s in scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pollux-dir", type=pathlib.Path, default=DEFAULT_POLLUX)
    args = parser.parse_args()

    summary = []
    for model in MODELS:
        observations = pollux_observations(args.pollux_dir, model)
        started = time.perf_counter()
        result = evaluation.evaluate(observations)
        seconds = time.perf_counter() - started
        selected = result.selected
        ratios = {split: scores[selected].mape / scores["ernest"].mape for split, scores in result.splits.items()}
        coverage = pooled_coverage(result, selected)
        print(f"\n## {model}: {len(observations)} runs, evaluate took {seconds:.1f}s\n")
        print(evaluation_table(result))
        print("selected/Ernest MAPE: " + ", ".join(f"{s} {r:.2f}" for s, r in ratios.items()))
        print(f"coverage of the 0.9 upper bound, all held-out points: {coverage:.3f}")
        summary.append((model, selected, result.splits["extrapolate-workers"], ratios, coverage, seconds))

    print("\n## Summary\n")
    print(
        "| workload | selected | extrapolate-workers MAPE (selected / Ernest) | ratio | ratio, every split "
        "| coverage@0.9 | evaluate |"
    )
    print("|---|---|---|---|---|---|---|")
    for model, selected, extrapolate, ratios, coverage, seconds in summary:
        every = " / ".join(f"{r:.2f}" for r in ratios.values())
        print(
            f"| {model} | {selected} "
            f"| {100 * extrapolate[selected].mape:.1f}% / {100 * extrapolate['ernest'].mape:.1f}% "
            f"| {ratios['extrapolate-workers']:.2f} | {every} | {coverage:.3f} | {seconds:.1f}s |"
        )
    print(f"\nratio columns, every split: {' / '.join(summary[0][3])}")
    print(f"mean coverage@0.9 over workloads: {np.mean([row[4] for row in summary]):.3f}")

    print("\n## One per-GPU batch size per workload (Ernest's own setting)\n")
    print("| workload | per-GPU batch | runs | selected | extrapolate-workers MAPE (selected / Ernest) | ratio |")
    print("|---|---|---|---|---|---|")
    for model in MODELS:
        observations = pollux_observations(args.pollux_dir, model)
        local = Counter(o.batch_size // o.workers for o in observations).most_common(1)[0][0]
        fixed = [o for o in observations if o.batch_size // o.workers == local]
        result = evaluation.evaluate(fixed)
        extrapolate = result.splits["extrapolate-workers"]
        ours, ernest = extrapolate[result.selected].mape, extrapolate["ernest"].mape
        print(
            f"| {model} | {local} | {len(fixed)} | {result.selected} "
            f"| {100 * ours:.1f}% / {100 * ernest:.1f}% | {ours / ernest:.2f} |"
        )

    subset = pollux_observations(args.pollux_dir, "cifar10")[::2][:500]
    started = time.perf_counter()
    evaluation.evaluate(subset)
    print(f"evaluate on {len(subset)} rows (cifar10, every other run): {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
