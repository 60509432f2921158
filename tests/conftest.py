"""Shared pytest fixtures; the helpers they build on are in the test kit (rayjob_advisor_testkit)."""

from __future__ import annotations

import pytest

from rayjob_advisor.observations import Observation
from rayjob_advisor_testkit.profiles import synthetic_observations


@pytest.fixture(scope="session")
def synthetic() -> list[Observation]:
    return synthetic_observations()
