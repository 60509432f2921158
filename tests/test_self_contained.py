"""A fresh clone tests and runs itself: nothing it needs lies outside the repository.

The KubeRay CRDs and samples are vendored (testkit/kuberay); ``$RAYJOB_ADVISOR_SHARED`` (no default) is
only an optional source of the raw datasets some benchmarks read, and a benchmark without its data stops with one
line that says where the data comes from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from rayjob_advisor_testkit.paths import REPO, SHARED_VARIABLE


@pytest.fixture
def no_shared(tmp_path) -> dict[str, str]:
    """The environment of a clone with nothing beside it."""
    return {**os.environ, SHARED_VARIABLE: str(tmp_path / "nowhere")}


def run(command: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *command], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_benchmark_on_the_test_kits_rayjobs_needs_no_shared_folder(no_shared):
    done = run(["-m", "benchmarks.deadlines", "--help"], no_shared)  # builds RayJobs against the vendored CRD
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_a_benchmark_without_its_dataset_stops_with_one_line_saying_where_it_comes_from(no_shared, tmp_path):
    done = run(["-m", "benchmarks.pollux", "bert", "--out", str(tmp_path / "bert.csv")], no_shared)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stdout + done.stderr
    assert f"{tmp_path}/nowhere/datasets/pollux/bert/placements.csv is missing" in lines[0]
    assert "https://github.com/petuum/adaptdl, branch osdi21-artifact" in lines[0] and SHARED_VARIABLE in lines[0]
    assert not (tmp_path / "bert.csv").exists()


def test_the_operator_on_the_emulator_starts_without_a_shared_folder(no_shared):
    """``hack/try-operator.py``, the no-cluster demo: it says where its kubeconfig is, and stops on Ctrl-C."""
    demo = subprocess.Popen(
        [sys.executable, "hack/try-operator.py"], cwd=REPO, env=no_shared, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        first = demo.stdout.readline() if demo.stdout else ""
        assert first.startswith("operator running"), first + (demo.stderr.read() if demo.stderr else "")
        assert "export KUBECONFIG=" in (demo.stdout.readline() if demo.stdout else "")
        demo.send_signal(signal.SIGINT)
        _, errors = demo.communicate(timeout=60)
    finally:
        demo.kill()
    assert demo.returncode == 0 and "Traceback" not in errors, errors
