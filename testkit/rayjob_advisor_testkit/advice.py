"""What ``advise()`` answers, as the tests that call it without an operator read it: its merge patch applied as the API
server applies it, its annotations, and the moment they advise at."""

from __future__ import annotations

import datetime as dt
from typing import Any

import jsonpatch

from rayjob_advisor.application import Advice
from rayjob_advisor_testkit.emulator import merge_patch
from rayjob_advisor_testkit.rayjobs import assert_valid_rayjob

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
"""The ``now`` they advise at: predictions are stamped with it, deadlines count from it."""


def applied(rayjob: dict[str, Any], advice: Advice) -> dict[str, Any]:
    """The RayJob after the advice's merge patch, validated against the KubeRay CRD."""
    patch = jsonpatch.JsonPatch.from_diff(rayjob, merge_patch(rayjob, advice.patch))
    patched: dict[str, Any] = jsonpatch.apply_patch(rayjob, patch)
    assert_valid_rayjob(patched)
    return patched


def notes_of(advice: Advice) -> dict[str, str | None]:
    """The annotations the advice's patch writes (None: removes)."""
    notes: dict[str, str | None] = advice.patch["metadata"]["annotations"]
    return notes
