"""Without ../shared (docs/development.md: "The shared data") the tests and scripts stop with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rayjob_advisor_testkit.paths import REPO, SHARED_VARIABLE


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        (["-m", "pytest", "--collect-only", "-q", "tests"], "kuberay/crds"),
        (["-m", "benchmarks.deadlines", "--help"], "kuberay/crds"),  # through the test kit's RayJob builders
        (["-m", "benchmarks.pollux", "bert", "--out", "bert.csv"], "datasets/pollux/bert/placements.csv"),
    ],
    ids=["pytest", "benchmarks.deadlines", "benchmarks.pollux"],
)
def test_a_missing_shared_folder_stops_with_one_line(tmp_path, command, missing):
    environment = {**os.environ, SHARED_VARIABLE: str(tmp_path / "nowhere")}
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120, check=False
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stdout + done.stderr
    assert f"{tmp_path}/nowhere/{missing} is missing" in lines[0] and SHARED_VARIABLE in lines[0]
    assert not (REPO / "bert.csv").exists()
