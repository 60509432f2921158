"""RayJobs held for the planner (suspended with release, or Kueue-gated) and their release."""

from __future__ import annotations

from rayjob_advisor import contract as ann
from rayjob_advisor import gates
from rayjob_advisor_testkit.rayjobs import make_rayjob


def test_suspended_jobs_are_held_only_when_they_ask_for_release():
    assert gates.hold(make_rayjob(annotations={ann.RELEASE: "true"}, suspend=True)) == "suspended"
    assert gates.hold(make_rayjob(suspend=True)) is None  # suspended by someone else, for their reasons
    assert gates.hold(make_rayjob(annotations={ann.RELEASE: "true"})) is None  # not suspended: nothing to hold
    assert gates.release(make_rayjob(suspend=True), "suspended") == {"spec": {"suspend": False}}


def test_kueue_gates_release_only_ours():
    gated = make_rayjob(annotations={ann.KUEUE_GATES: "example.com/quota, rayjob-advisor.io/planner"}, suspend=True)
    assert gates.hold(gated) == "gated"
    assert gates.release(gated, "gated") == {"metadata": {"annotations": {ann.KUEUE_GATES: "example.com/quota"}}}
    alone = make_rayjob(annotations={ann.KUEUE_GATES: "rayjob-advisor.io/planner"})
    assert gates.release(alone, "gated") == {"metadata": {"annotations": {ann.KUEUE_GATES: None}}}
    assert gates.hold(make_rayjob(annotations={ann.KUEUE_GATES: "example.com/quota"})) is None
