"""A RayJob's life on the emulator as the operator tests follow it: the annotations the advisor writes on it, KubeRay
running and finishing it, and the runs its RuntimeProfile learned."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rayjob_advisor import contract as ann
from rayjob_advisor_testkit.emulator import Emulator, rfc3339
from rayjob_advisor_testkit.profiles import WORKLOAD
from rayjob_advisor_testkit.resources import AdvisorEmulator


def notes(api: Emulator, name: str, namespace: str = "default") -> dict[str, str]:
    """The annotations of the stored RayJob ``namespace/name`` (none: empty)."""
    annotations: dict[str, str] = api.get("rayjobs", namespace, name)["metadata"].get("annotations", {})
    return annotations


def wait_for_note(api: Emulator, name: str, key: str, timeout: float = 60) -> str:
    """The annotation ``key`` of RayJob default/``name``, once it is there and not empty."""
    return api.wait_until(lambda: notes(api, name).get(key, ""), timeout)


def start(api: AdvisorEmulator, rayjob: dict[str, Any], ago: float = 60) -> dict[str, Any]:
    """Create ``rayjob`` (in ``default``), wait for its prediction, and act as KubeRay: it started ``ago`` seconds
    back; the stored job once the advisor gave it an ETA."""
    name = rayjob["metadata"]["name"]
    api.create(rayjob)
    api.wait_until(lambda: notes(api, name).get(ann.PREDICTION), 60)
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=ago)
    api.set_rayjob_status("default", name, deployment_status="Running", job_status="RUNNING", start_time=moment)
    api.wait_until(lambda: notes(api, name).get(ann.ETA), 5)
    stored: dict[str, Any] = api.get("rayjobs", "default", name)
    return stored


def finish(
    api: AdvisorEmulator,
    name: str,
    minutes: float = 10,
    deployment: str = "Complete",
    job_status: str = "SUCCEEDED",
    namespace: str = "default",
) -> None:
    """Act as KubeRay: the Ray job of RayJob ``namespace/name`` starts 30 s after its creation, runs ``minutes`` and
    ends as ``deployment`` and ``job_status``."""
    created = dt.datetime.fromisoformat(
        api.get("rayjobs", namespace, name)["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    )
    start = created + dt.timedelta(seconds=30)
    api.set_rayjob_status(namespace, name, deployment_status="Running", job_status="RUNNING", start_time=rfc3339(start))
    api.set_rayjob_status(
        namespace, name, deployment_status=deployment, job_status=job_status,
        start_time=rfc3339(start), end_time=rfc3339(start + dt.timedelta(minutes=minutes)),
    )  # fmt: skip


def learned(api: Emulator) -> list[dict[str, Any]]:
    """The runs RuntimeProfile default/``WORKLOAD`` has learned (its status.observations)."""
    status = api.get("runtimeprofiles", "default", WORKLOAD).get("status") or {}
    runs: list[dict[str, Any]] = status.get("observations") or []
    return runs
