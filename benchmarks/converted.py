"""A dataset converted from published measurements (``mlperf``, ``gavel``, ``elasticflow``) written to its CSV: the
runs under comment lines naming their source, and a line on standard output saying what it holds."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from rayjob_advisor.observations import Observation, write_observations


def write_converted(path: pathlib.Path, runs: Sequence[Observation], comments: Sequence[str]) -> None:
    """Write ``runs`` to ``path`` under ``comments`` and print the dataset's name (the file's stem), runs and GPUs."""
    write_observations(path, runs, comments)
    print(f"{path.stem}: {len(runs)} runs at {sorted({run.workers for run in runs})} GPUs")
