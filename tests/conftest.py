"""Shared pytest fixtures; the helpers they build on are in the test kit (rayjob_advisor_testkit)."""

from __future__ import annotations

import pytest

from rayjob_advisor.observations import Observation
from rayjob_advisor_testkit import paths
from rayjob_advisor_testkit.profiles import synthetic_observations


def pytest_configure(config: pytest.Config) -> None:
    """Without ../shared, stop before collection with one line (``ERROR: ...``), not a traceback per module."""
    try:
        paths.require_shared()
    except paths.SharedDataMissing as missing:
        raise pytest.UsageError(str(missing.code)) from None


@pytest.fixture(scope="session")
def synthetic() -> list[Observation]:
    return synthetic_observations()
