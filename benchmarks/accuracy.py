"""Accuracy of the runtime models on real measurements: the Pollux (OSDI'21) traces.

For each of the six Pollux workloads: the evaluate table (every candidate on
every split, with the coverage of the 0.9 upper bound per node-count band),
then the ratio of the selected model's MAPE to Ernest's per split — the
far-extrapolation split (fit on at most a quarter of the most GPUs, asked
about the most) first — and the coverage of the selected model's 0.9 bound
per band: pooled over every split's held-out runs, and the lowest of any
split's band with at least ``MIN_RUNS`` runs. Ends with a summary table
(markdown) and the time ``RuntimeModel.fit`` takes on a 500-run profile
(wall and CPU seconds; the budget is 2 s on 2 cores).

Ernest has no batch-size term, and Pollux varies the per-GPU batch, so the
benchmark also compares the two on the fairest ground for Ernest: each
workload's runs at its most measured per-GPU batch size only.

    .venv/bin/python -m benchmarks.accuracy [--pollux-dir ../shared/datasets/pollux] [--workloads bert,ncf]
"""

from __future__ import annotations

import argparse
import pathlib
import time
from collections import Counter

from benchmarks.pollux import DEFAULT_POLLUX, MODELS, pollux_observations
from rayjob_advisor.cli.tables import evaluation_table
from rayjob_advisor.models import evaluation
from rayjob_advisor.models.runtime import RuntimeModel

FAR = "far-extrapolate-workers"
MIN_RUNS = 10
TARGET = 0.85


def band_coverage(result: evaluation.Evaluation, model: str) -> tuple[dict[str, float], float, str]:
    """Coverage per band pooled over the splits, and the lowest (split, band) with at least ``MIN_RUNS`` runs."""
    covered: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    lowest, where = 1.0, "-"
    for split, models in result.splits.items():
        for band, scores in (models[model].bands or {}).items():
            covered[band] += scores.coverage * scores.n_test
            runs[band] += scores.n_test
            if scores.n_test >= MIN_RUNS and scores.coverage < lowest:
                lowest, where = scores.coverage, f"{split} {band} ({scores.n_test} runs)"
    return {band: covered[band] / runs[band] for band in sorted(runs)}, lowest, where


def fit_seconds(pollux_dir: pathlib.Path) -> tuple[int, float, float]:
    """Rows, wall and CPU seconds of ``RuntimeModel.fit`` on 500 cifar10 runs (every other one)."""
    subset = pollux_observations(pollux_dir, "cifar10")[::2][:500]
    wall, cpu = time.perf_counter(), time.process_time()
    RuntimeModel().fit(subset)
    return len(subset), time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pollux-dir", type=pathlib.Path, default=DEFAULT_POLLUX)
    parser.add_argument("--workloads", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    args = parser.parse_args()
    workloads = args.workloads.split(",")

    summary = []
    for model in workloads:
        observations = pollux_observations(args.pollux_dir, model)
        started = time.perf_counter()
        result = evaluation.evaluate(observations)
        seconds = time.perf_counter() - started
        selected = result.selected
        ratios = {split: scores[selected].mape / scores["ernest"].mape for split, scores in result.splits.items()}
        bands, lowest, where = band_coverage(result, selected)
        print(f"\n## {model}: {len(observations)} runs, evaluate took {seconds:.1f}s\n")
        print(evaluation_table(result))
        print("selected/Ernest MAPE: " + ", ".join(f"{s} {r:.2f}" for s, r in ratios.items()))
        print("coverage of the 0.9 bound per band, all splits: " + ", ".join(f"{b} {c:.3f}" for b, c in bands.items()))
        print(
            f"lowest coverage of a split's band with >= {MIN_RUNS} runs: {lowest:.3f} ({where}) "
            f"{'PASS' if lowest >= TARGET else 'FAIL'} (target {TARGET})"
        )
        summary.append((model, selected, result.splits[FAR], ratios, bands, lowest, where, seconds))

    print("\n## Summary\n")
    print(
        f"| workload | selected | {FAR} MAPE (selected / Ernest) | ratio | extrapolate-workers ratio "
        "| coverage@0.9 per band (all splits) | lowest split band | evaluate |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model, selected, far, ratios, bands, lowest, where, seconds in summary:
        per_band = ", ".join(f"{b.removeprefix('nodes=')}: {c:.2f}" for b, c in bands.items())
        print(
            f"| {model} | {selected} | {100 * far[selected].mape:.1f}% / {100 * far['ernest'].mape:.1f}% "
            f"| {ratios[FAR]:.2f} | {ratios['extrapolate-workers']:.2f} | {per_band} | {lowest:.2f} ({where}) "
            f"| {seconds:.1f}s |"
        )
    print(f"\nfar-extrapolation ratio below 1 on every workload: {all(row[3][FAR] < 1 for row in summary)}")
    pooled_ok = all(c >= TARGET for row in summary for c in row[4].values())
    print(f"coverage per band (all splits) >= {TARGET} on every workload: {pooled_ok}")
    print(f"every split's band with >= {MIN_RUNS} runs >= {TARGET}: {all(row[5] >= TARGET for row in summary)}")
    for row in summary:
        print(f"  {row[0]}: {'PASS' if row[5] >= TARGET else 'FAIL'} (lowest {row[5]:.3f}, {row[6]})")

    print("\n## One per-GPU batch size per workload (Ernest's own setting; MAPE only)\n")
    print(f"| workload | per-GPU batch | runs | selected | {FAR} MAPE (selected / Ernest) | ratio |")
    print("|---|---|---|---|---|---|")
    for model in workloads:
        observations = pollux_observations(args.pollux_dir, model)
        local = Counter(o.batch_size // o.workers for o in observations).most_common(1)[0][0]
        fixed = [o for o in observations if o.batch_size // o.workers == local]
        result = evaluation.evaluate(fixed, calibrate=False)
        far = result.splits[FAR]
        ours, ernest = far[result.selected].mape, far["ernest"].mape
        print(
            f"| {model} | {local} | {len(fixed)} | {result.selected} "
            f"| {100 * ours:.1f}% / {100 * ernest:.1f}% | {ours / ernest:.2f} |"
        )

    rows, wall, cpu = fit_seconds(args.pollux_dir)
    print(f"\nRuntimeModel.fit on {rows} rows (cifar10, every other run): {wall:.2f}s wall, {cpu:.2f}s CPU")


if __name__ == "__main__":
    main()
