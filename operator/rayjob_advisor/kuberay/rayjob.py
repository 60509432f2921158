"""A typed view of a KubeRay RayJob: its metadata, its status vocabulary, holds and releases, and resizes.

The rest of the advisor asks this view instead of digging in the manifest
(the way Kueue's RayJob adapter wraps the object); its changes come back as
merge patches (``manifest``).

KubeRay reports ``status.jobDeploymentStatus`` (``Complete``/``Failed`` once
finished), ``status.jobStatus`` (``SUCCEEDED``, ``FAILED``, ``STOPPED``), the
Ray job's ``status.rayJobInfo.startTime``/``endTime`` and ``status.failed``
(attempts that failed before).

A RayJob can wait for the planner before KubeRay builds its cluster:
created with ``spec.suspend: true`` and ``rayjob-advisor.io/release: "true"``
(we unsuspend it: the webhook at its CREATE, else the controller, on the
webhook's ``held`` mark only — a tenant who adds ``release`` to a job someone
else suspended gets nothing — and never a job of a Kueue queue), or with
Kueue's ``kueue.x-k8s.io/admission-gated-by``
naming ``rayjob-advisor.io/planner`` (we remove only our gate; ``suspend``
stays Kueue's business).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Literal

from rayjob_advisor import contract
from rayjob_advisor.kuberay import groups, training
from rayjob_advisor.kuberay.manifest import MergePatch, metadata_patch

Hold = Literal["suspended", "gated"]

# status.jobDeploymentStatus before KubeRay starts the job: a prediction is still useful.
WAITING_STATUSES = frozenset({"", "New", "Initializing", "Suspended", "Suspending"})
FINISHED_STATUSES = frozenset({"Complete", "Failed"})
RUNNING_STATUS = "Running"
# kopf's field handlers watch it: a RayJob's lifecycle.
DEPLOYMENT_STATUS_FIELD = "status.jobDeploymentStatus"


def is_waiting(status: Mapping[str, Any] | None) -> bool:
    """Not started yet (``status`` of the RayJob): its replicas can still change."""
    return ((status or {}).get("jobDeploymentStatus") or "") in WAITING_STATUSES


def is_running(status: Mapping[str, Any] | None) -> bool:
    return (status or {}).get("jobDeploymentStatus") == RUNNING_STATUS


def is_finished(status: Mapping[str, Any] | None) -> bool:
    return (status or {}).get("jobDeploymentStatus") in FINISHED_STATUSES


def _time(value: Any, what: str) -> dt.datetime:
    """A time KubeRay or the API server wrote; ``ValueError`` naming ``what`` when it is missing or malformed."""
    if not isinstance(value, str):
        raise ValueError(f"{what} is missing")
    return contract.parse_timestamp(value)


def _mapping(value: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``value[key]`` when it is a mapping, else empty: whether a job asks for advice, and kopf's filters, are
    answered on any body; its wrong types are reported once it does (``spec.check``)."""
    found = value.get(key)
    return found if isinstance(found, Mapping) else {}


@dataclasses.dataclass(frozen=True)
class RayJob:
    """Read-only accessors over a RayJob body (a kopf ``Body`` or a plain dict); ``creating``: the body of its
    CREATE, which the webhook is admitting (its own ``release`` holds it: ``hold``)."""

    body: Mapping[str, Any]
    creating: bool = False

    @property
    def metadata(self) -> Mapping[str, Any]:
        return _mapping(self.body, "metadata")

    @property
    def annotations(self) -> Mapping[str, str]:
        return _mapping(self.metadata, "annotations")

    @property
    def labels(self) -> Mapping[str, str]:
        return _mapping(self.metadata, "labels")

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "default")

    @property
    def status(self) -> Mapping[str, Any]:
        return _mapping(self.body, "status")

    @property
    def spec(self) -> Mapping[str, Any]:
        return _mapping(self.body, "spec")

    @property
    def cluster_name(self) -> str | None:
        """The RayCluster KubeRay made for this run of the job (``status.rayClusterName``): its pods carry it as
        their ``ray.io/cluster`` label. None before KubeRay has named one."""
        name = self.status.get("rayClusterName")
        return name if isinstance(name, str) and name else None

    @property
    def head_service_account(self) -> str:
        """The service account of the job's head pod: its template's, else the namespace's ``default``."""
        pod = ((self.spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
        name = (pod.get("spec") or {}).get("serviceAccountName") if isinstance(pod, Mapping) else None
        return name if isinstance(name, str) and name else "default"

    def created(self, default: dt.datetime) -> dt.datetime:
        """``metadata.creationTimestamp``; at admission the API server has not set it yet: ``default``."""
        created = self.metadata.get("creationTimestamp")
        return contract.parse_timestamp(created) if created else default

    def created_at(self) -> dt.datetime:
        """``metadata.creationTimestamp`` of a stored job; ``ValueError`` when it has none."""
        return _time(self.metadata.get("creationTimestamp"), "metadata.creationTimestamp")

    def deadline(self, inputs: contract.AdvisorInputs, now: dt.datetime) -> dt.datetime | None:
        """The absolute deadline ``inputs`` give; a duration counts from creation (from ``now`` at admission)."""
        return inputs.deadline.resolve(self.created(now)) if inputs.deadline else None

    @property
    def deployment_status(self) -> str:
        """KubeRay's ``jobDeploymentStatus`` (empty before it has set one)."""
        return str(self.status.get("jobDeploymentStatus") or "")

    @property
    def job_status(self) -> str | None:
        """The Ray job's own status (``SUCCEEDED``, ``FAILED``, ``STOPPED``, ...), once KubeRay knows it."""
        value = self.status.get("jobStatus")
        return str(value) if value else None

    @property
    def waiting(self) -> bool:
        return is_waiting(self.status)

    @property
    def running(self) -> bool:
        return is_running(self.status)

    @property
    def finished(self) -> bool:
        return is_finished(self.status)

    @property
    def outcome(self) -> str:
        """How a finished job ended: the Ray job's status, else KubeRay's."""
        return self.job_status or self.deployment_status or "UNKNOWN"

    @property
    def succeeded(self) -> bool:
        """Whether it finished and its Ray job succeeded (only such a run says how long training takes)."""
        return self.deployment_status == "Complete" and self.job_status == "SUCCEEDED"

    @property
    def attempt(self) -> int:
        """Which attempt this is: the attempts that failed before it."""
        return int(self.status.get("failed") or 0)

    @property
    def started(self) -> dt.datetime | None:
        """When the Ray job started: ``rayJobInfo.startTime``, else the RayJob's ``startTime``; None if unknown."""
        for value in ((self.status.get("rayJobInfo") or {}).get("startTime"), self.status.get("startTime")):
            if isinstance(value, str):
                try:
                    return contract.parse_timestamp(value)
                except ValueError:
                    continue
        return None

    def ray_job_started(self) -> dt.datetime:
        """``status.rayJobInfo.startTime`` of a finished job; ``ValueError`` when it has none."""
        return _time((self.status.get("rayJobInfo") or {}).get("startTime"), "status.rayJobInfo.startTime")

    def ray_job_ended(self) -> dt.datetime:
        """``status.rayJobInfo.endTime`` of a finished job; ``ValueError`` when it has none."""
        return _time((self.status.get("rayJobInfo") or {}).get("endTime"), "status.rayJobInfo.endTime")

    def _gates(self) -> list[str]:
        value = self.annotations.get(contract.KUEUE_GATES, "")
        return [gate.strip() for gate in value.split(",") if gate.strip()]

    @property
    def asks_release(self) -> bool:
        """Suspended with ``release: "true"`` and in no Kueue queue (whose ``suspend`` is Kueue's to lift)."""
        release = self.annotations.get(contract.RELEASE, "").lower() == "true"
        return bool(self.spec.get("suspend")) and release and contract.KUEUE_QUEUE not in self.labels

    @property
    def hold(self) -> Hold | None:
        """Why the RayJob waits for us, or None when it does not: a job that asks for release is held while it is
        created, and after only with the webhook's ``held`` mark (``admitted``)."""
        if contract.PLANNER_GATE in self._gates():
            return "gated"
        if self.asks_release and (self.creating or self.annotations.get(contract.HELD) == "true"):
            return "suspended"
        return None

    def admitted(self) -> MergePatch:
        """What the webhook writes on the CREATE of any RayJob: ``held`` when it asks for release, else none (a
        tenant's own is dropped)."""
        if self.asks_release:
            return metadata_patch({contract.HELD: "true"})
        return metadata_patch({contract.HELD: None}) if contract.HELD in self.annotations else {}

    def kept_held(self, old: Mapping[str, Any]) -> MergePatch:
        """What the webhook writes on an UPDATE by anyone but the advisor: ``held`` as it was (``old``)."""
        before = RayJob(old).annotations.get(contract.HELD)
        return {} if self.annotations.get(contract.HELD) == before else metadata_patch({contract.HELD: before})

    def release(self) -> MergePatch:
        """The merge patch that lets a held RayJob go on (empty when it is not held); a suspended job loses its
        ``held`` mark, so that a later suspension (an admin's, a policy's) stays."""
        if self.hold == "suspended":
            return {"spec": {"suspend": False}, **metadata_patch({contract.HELD: None})}
        if self.hold == "gated":
            others = [gate for gate in self._gates() if gate != contract.PLANNER_GATE]
            return {"metadata": {"annotations": {contract.KUEUE_GATES: ",".join(others) or None}}}
        return {}

    def resize(self, index: int, replicas: int, gpus: float | None = None) -> tuple[MergePatch, dict[str, Any]]:
        """The merge patch setting worker group ``index`` to ``replicas`` (and ``gpus`` per worker), and what it had
        (``groups.resize``)."""
        return groups.resize(self.spec, index, replicas, gpus)

    def set_training_workers(self, count: training.TrainingCount, workers: int) -> MergePatch:
        """The merge patch setting the Ray Train worker count to ``workers`` where ``count`` found it
        (``training.rewrite``)."""
        return training.rewrite(self.spec, count, workers)
