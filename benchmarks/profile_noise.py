"""How noisy a profile is: coefficient of variation of runtimes across repeats of a configuration.

No model can be more accurate than the data repeats are consistent, so this
is the floor to read `evaluate`'s MAPE against.

    .venv/bin/python -m benchmarks.profile_noise [FILE.csv]   (default: the shipped digits-cnn profile)
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
    parser.add_argument("data", type=pathlib.Path, nargs="?")
    args = parser.parse_args()
    path = args.data or shipped_data("digits-cnn")
    observations, _ = read_observations(path)
    groups = collections.defaultdict(list)
    for o in observations:
        groups[tuple(getattr(o, field) for field in CONFIGURATION)].append(o)

    print(f"{path.name}: {len(observations)} runs, {len(groups)} configurations\n")
    print(f"{'workers':>7} {'samples':>8} {'repeats':>7} {'execution s':>12} {'CV':>6} {'start-up s':>11} {'CV':>6}")
    execution_cvs, startup_cvs = [], []
    for key, runs in sorted(groups.items(), key=lambda item: (item[0][1], item[0][4])):
        if len(runs) < 2:
            continue
        execution = np.array([r.execution_seconds for r in runs])
        startup = np.array([r.startup_seconds or 0.0 for r in runs])
        execution_cv = execution.std(ddof=1) / execution.mean()
        startup_cv = startup.std(ddof=1) / startup.mean() if startup.mean() > 0 else 0.0
        execution_cvs.append(execution_cv)
        startup_cvs.append(startup_cv)
        print(
            f"{key[4]:>7} {key[1]:>8} {len(runs):>7} {execution.mean():>12.2f} {execution_cv:>6.1%} "
            f"{startup.mean():>11.2f} {startup_cv:>6.1%}"
        )
    print(
        f"\nexecution CV across repeats: median {np.median(execution_cvs):.1%}, mean {np.mean(execution_cvs):.1%}, "
        f"max {np.max(execution_cvs):.1%}"
    )
    print(f"start-up CV across repeats: median {np.median(startup_cvs):.1%}, mean {np.mean(startup_cvs):.1%}")


if __name__ == "__main__":
    main()
