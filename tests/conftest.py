"""Shared pytest fixtures; the helpers they build on are in the test kit (rayjob_advisor_testkit)."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Callable

import pytest

from rayjob_advisor.observations import Observation, write_observations
from rayjob_advisor.profiles.store import ProfileStore
from rayjob_advisor_testkit import prometheus
from rayjob_advisor_testkit.profiles import fitted_store, synthetic_observations


@pytest.fixture(scope="session")
def synthetic() -> list[Observation]:
    return synthetic_observations()


@pytest.fixture(scope="module")
def store() -> ProfileStore:
    """The synthetic runs' profile (default/synthetic), fitted: the store of the tests of ``advise``."""
    return fitted_store(synthetic_observations())


@pytest.fixture(scope="module")
def profile_csv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The synthetic runs as a CSV file: the ``--data`` of the CLI's tests."""
    path = tmp_path_factory.mktemp("profile") / "runs.csv"
    write_observations(path, synthetic_observations())
    return path


@pytest.fixture(scope="session")
def promtool() -> Callable[..., str]:
    """Runs Prometheus's promtool (its output; an assertion with it if it fails). Not installed: one line, fail."""
    try:
        binary, missing = prometheus.tool("promtool"), ""
    except prometheus.MissingTool as error:
        binary, missing = "", str(error)
    if missing:  # outside the except: the one line alone, without the exception it handled
        pytest.fail(missing, pytrace=False)

    def run(*args: str) -> str:
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Real Ray clusters one at a time: with ``-n`` (pytest-xdist) the ``ray`` tests share one worker."""
    for item in items:
        if item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))
