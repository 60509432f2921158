"""RayJobs held for the planner, and how to release them once planned.

Without the webhook (or with Kueue), a RayJob can wait for us before KubeRay
builds its cluster: created with ``spec.suspend: true`` and the annotation
``rayjob-advisor.io/release: "true"`` (we unsuspend it), or with Kueue's
``kueue.x-k8s.io/admission-gated-by`` naming ``rayjob-advisor.io/planner``
(we remove only our gate; ``suspend`` stays Kueue's business).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from rayjob_advisor import contract

Hold = Literal["suspended", "gated"]


def _gates(rayjob: Mapping[str, Any]) -> list[str]:
    value = ((rayjob.get("metadata") or {}).get("annotations") or {}).get(contract.KUEUE_GATES, "")
    return [gate.strip() for gate in value.split(",") if gate.strip()]


def hold(rayjob: Mapping[str, Any]) -> Hold | None:
    """Why the RayJob waits for us, or None when it does not."""
    if contract.PLANNER_GATE in _gates(rayjob):
        return "gated"
    notes = (rayjob.get("metadata") or {}).get("annotations") or {}
    if (rayjob.get("spec") or {}).get("suspend") and notes.get(contract.RELEASE, "").lower() == "true":
        return "suspended"
    return None


def release(rayjob: Mapping[str, Any], held: Hold) -> dict[str, Any]:
    """The merge patch that lets the RayJob go on: unsuspend it, or drop only our Kueue gate."""
    if held == "suspended":
        return {"spec": {"suspend": False}}
    others = [gate for gate in _gates(rayjob) if gate != contract.PLANNER_GATE]
    return {"metadata": {"annotations": {contract.KUEUE_GATES: ",".join(others) or None}}}
