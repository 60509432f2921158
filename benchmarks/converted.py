"""A dataset converted from published measurements (``mlperf``, ``gavel``, ``elasticflow``, ``zeus``) written to its
CSV: the runs under comment lines naming their source, and a line on standard output saying what it holds; and the
command line of a converter that reads one checkout."""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Sequence

from rayjob_advisor.observations import Observation, write_observations


def write_converted(path: pathlib.Path, runs: Sequence[Observation], comments: Sequence[str]) -> None:
    """Write ``runs`` to ``path`` under ``comments`` and print the dataset's name (the file's stem), runs and GPUs."""
    write_observations(path, runs, comments)
    print(f"{path.stem}: {len(runs)} runs at {sorted({run.workers for run in runs})} GPUs")


def parse_checkout(
    argv: Sequence[str] | None, description: str, source: str, needed: pathlib.Path, out: pathlib.Path
) -> tuple[pathlib.Path, pathlib.Path]:
    """The checkout of ``source`` a converter reads and the folder it writes to (made), from its command line; a
    folder without ``needed`` is not that checkout, a one-line error."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("checkout", type=pathlib.Path, help=f"a checkout of {source}")
    parser.add_argument("--out", type=pathlib.Path, default=out)
    args = parser.parse_args(argv)
    if not (args.checkout / needed).exists():
        parser.error(f"{args.checkout} is not a checkout of {source}: no {needed}")
    args.out.mkdir(parents=True, exist_ok=True)
    return args.checkout, args.out
