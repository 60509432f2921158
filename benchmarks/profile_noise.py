"""How noisy a profile is: coefficient of variation of runtimes across repeats of a configuration.

No model can be more accurate than the data repeats are consistent, so this
is the floor to read `evaluate`'s MAPE against. Several files are read as one
(the same sweep measured again on another day: its runs repeat the first's).

    .venv/bin/python -m benchmarks.profile_noise [FILE.csv ...]   (default: the shipped digits-cnn profile)
"""

from __future__ import annotations

import argparse
import collections
import pathlib

import numpy as np

from rayjob_advisor.observations import CONFIGURATION_FIELDS, read_observations
from rayjob_advisor.profiles.shipped import shipped_data

CONFIGURATION = (*CONFIGURATION_FIELDS, "nodes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=pathlib.Path, nargs="*")
    args = parser.parse_args()
    paths = args.data or [shipped_data("digits-cnn")]
    observations = [run for path in paths for run in read_observations(path)[0]]
    groups = collections.defaultdict(list)
    for o in observations:
        groups[tuple(getattr(o, field) for field in CONFIGURATION)].append(o)

    print(f"{', '.join(path.name for path in paths)}: {len(observations)} runs, {len(groups)} configurations\n")
    print(
        f"{'workers':>7} {'samples':>8} {'epochs':>6} {'batch':>6} {'repeats':>7} {'execution s':>12} {'CV':>6} "
        f"{'start-up s':>11} {'CV':>6}"
    )
    execution_cvs, startup_cvs = [], []
    off_by_workers = collections.defaultdict(list)
    for key, runs in sorted(groups.items(), key=lambda item: (item[0][1], item[0][2], item[0][3], item[0][4])):
        if len(runs) < 2:
            continue
        execution = np.array([r.execution_seconds for r in runs])
        startup = np.array([r.startup_seconds or 0.0 for r in runs])
        execution_cv = execution.std(ddof=1) / execution.mean()
        startup_cv = startup.std(ddof=1) / startup.mean() if startup.mean() > 0 else 0.0
        execution_cvs.append(execution_cv)
        startup_cvs.append(startup_cv)
        off_by_workers[key[4]].extend(off_its_repeats(execution))
        print(
            f"{key[4]:>7} {key[1]:>8} {key[2] or 1:>6} {key[3]:>6} {len(runs):>7} {execution.mean():>12.2f} "
            f"{execution_cv:>6.1%} {startup.mean():>11.2f} {startup_cv:>6.1%}"
        )
    print(
        f"\nexecution CV across repeats: median {np.median(execution_cvs):.1%}, mean {np.mean(execution_cvs):.1%}, "
        f"max {np.max(execution_cvs):.1%}"
    )
    print(f"start-up CV across repeats: median {np.median(startup_cvs):.1%}, mean {np.mean(startup_cvs):.1%}")
    off = np.concatenate(list(off_by_workers.values()))
    per_workers = ", ".join(f"{w} workers {np.mean(e):.1%}" for w, e in sorted(off_by_workers.items()))
    print(f"MAPE of a model that knew each configuration's mean (the floor): {np.mean(off):.1%}; {per_workers}")


def off_its_repeats(execution: np.ndarray) -> np.ndarray:
    """Each run's relative error against its configuration's true mean, as MAPE counts it: what a model that knew
    that mean would score. Estimated from the mean of the other repeats, its difference scaled by sqrt((n-1)/n),
    which takes out that mean's own noise (exact in expectation for normal noise)."""
    n = len(execution)
    others = (execution.sum() - execution) / (n - 1)
    return np.abs(others - execution) * np.sqrt((n - 1) / n) / execution


if __name__ == "__main__":
    main()
