"""A typed view of a KubeRay RayJob: its status vocabulary, holds and releases, and resizes.

The rest of the advisor asks this view instead of digging in the manifest
(the way Kueue's RayJob adapter wraps the object). Changes come back as JSON
merge patches, which both kopf's controller patches and its admission
patches (turned into JSONPatch) apply. A merge patch replaces lists whole,
so a patch that changes one list item carries the whole list.

A RayJob can wait for the planner before KubeRay builds its cluster:
created with ``spec.suspend: true`` and ``rayjob-advisor.io/release: "true"``
(we unsuspend it), or with Kueue's ``kueue.x-k8s.io/admission-gated-by``
naming ``rayjob-advisor.io/planner`` (we remove only our gate; ``suspend``
stays Kueue's business).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from rayjob_advisor import contract, features

Hold = Literal["suspended", "gated"]
MergePatch = dict[str, Any]

# status.jobDeploymentStatus before KubeRay starts the job: a prediction is still useful.
WAITING_STATUSES = frozenset({"", "New", "Initializing", "Suspended", "Suspending"})
FINISHED_STATUSES = frozenset({"Complete", "Failed"})
RUNNING_STATUS = "Running"
_RESIZED_FIELDS = ("groupName", "replicas", "minReplicas", "maxReplicas")


def is_waiting(status: Mapping[str, Any] | None) -> bool:
    """Not started yet (``status`` of the RayJob): its replicas can still change."""
    return ((status or {}).get("jobDeploymentStatus") or "") in WAITING_STATUSES


def is_running(status: Mapping[str, Any] | None) -> bool:
    return (status or {}).get("jobDeploymentStatus") == RUNNING_STATUS


def is_finished(status: Mapping[str, Any] | None) -> bool:
    return (status or {}).get("jobDeploymentStatus") in FINISHED_STATUSES


@dataclasses.dataclass(frozen=True)
class RayJob:
    """Read-only accessors over a RayJob body (a kopf ``Body`` or a plain dict)."""

    body: Mapping[str, Any]

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.body.get("metadata") or {}

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.get("annotations") or {}

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.get("labels") or {}

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "default")

    @property
    def status(self) -> Mapping[str, Any]:
        return self.body.get("status") or {}

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.body.get("spec") or {}

    def created(self, default: dt.datetime) -> dt.datetime:
        """``metadata.creationTimestamp``; at admission the API server has not set it yet: ``default``."""
        created = self.metadata.get("creationTimestamp")
        return contract.parse_timestamp(created) if created else default

    def deadline(self, inputs: contract.AdvisorInputs, now: dt.datetime) -> dt.datetime | None:
        """The absolute deadline ``inputs`` give; a duration counts from creation (from ``now`` at admission)."""
        return inputs.deadline.resolve(self.created(now)) if inputs.deadline else None

    @property
    def waiting(self) -> bool:
        return is_waiting(self.status)

    @property
    def finished(self) -> bool:
        return is_finished(self.status)

    def _gates(self) -> list[str]:
        value = self.annotations.get(contract.KUEUE_GATES, "")
        return [gate.strip() for gate in value.split(",") if gate.strip()]

    @property
    def hold(self) -> Hold | None:
        """Why the RayJob waits for us, or None when it does not."""
        if contract.PLANNER_GATE in self._gates():
            return "gated"
        if self.spec.get("suspend") and self.annotations.get(contract.RELEASE, "").lower() == "true":
            return "suspended"
        return None

    def release(self) -> MergePatch:
        """The merge patch that lets a held RayJob go on (empty when it is not held)."""
        if self.hold == "suspended":
            return {"spec": {"suspend": False}}
        if self.hold == "gated":
            others = [gate for gate in self._gates() if gate != contract.PLANNER_GATE]
            return {"metadata": {"annotations": {contract.KUEUE_GATES: ",".join(others) or None}}}
        return {}

    def resize(self, index: int, replicas: int, gpus: float | None = None) -> tuple[MergePatch, dict[str, Any]]:
        """The merge patch setting worker group ``index`` to ``replicas`` (and ``gpus`` per worker), and what it had.

        ``minReplicas``/``maxReplicas`` widen only as far as needed to keep
        min <= replicas <= max. GPUs change in the Ray container's limits and
        requests alike (Kubernetes wants them equal) and in Ray's ``num-gpus``
        where the group sets it, so that Ray and Kubernetes agree. A merge
        patch replaces lists whole, so the patch carries every worker group.
        """
        groups = copy.deepcopy(list(self.spec["rayClusterSpec"]["workerGroupSpecs"]))
        group = groups[index]
        original = {key: group.get(key) for key in _RESIZED_FIELDS}
        group["replicas"] = replicas
        group["minReplicas"] = min(group.get("minReplicas", replicas), replicas)
        group["maxReplicas"] = max(group.get("maxReplicas", replicas), replicas)
        if gpus is not None:
            _set_gpus(group, str(round(gpus)))
        return {"spec": {"rayClusterSpec": {"workerGroupSpecs": groups}}}, original

    def set_training_workers(self, training: features.TrainingCount, count: int) -> MergePatch:
        """The merge patch setting the Ray Train worker count to ``count`` where ``training`` found it.

        Nothing else changes: the runtime environment is re-serialised with
        only that value changed, a container's env keeps every other entry,
        the entrypoint only that token. Empty when the job sets no count.
        """
        if training.place is None or training.name is None:
            return {}
        if training.place == "entrypoint":
            assert training.span is not None  # found in the entrypoint, so its position is known
            start, end = training.span
            entrypoint = str(self.spec["entrypoint"])
            return {"spec": {"entrypoint": entrypoint[:start] + str(count) + entrypoint[end:]}}
        if training.place == "runtimeEnvYAML":
            runtime_env = features.runtime_env(self.spec)
            env_vars = runtime_env["env_vars"]
            env_vars[training.name] = str(count) if isinstance(env_vars[training.name], str) else count
            return {"spec": {"runtimeEnvYAML": yaml.safe_dump(runtime_env, sort_keys=False)}}
        containers = copy.deepcopy(features.pod_containers(self.spec, training.place))
        containers[0]["env"] = [
            {**entry, "value": str(count)} if entry.get("name") == training.name else entry
            for entry in containers[0]["env"]
        ]
        patch: Any = containers
        for key in reversed(("spec", *features.ENV_PLACES[training.place])):
            patch = {key: patch}
        return dict(patch)


def _set_gpus(group: dict[str, Any], quantity: str) -> None:
    """Every GPU resource the group's Ray container sets, and its ``num-gpus`` rayStartParam if set, to ``quantity``."""
    resources = group["template"]["spec"]["containers"][0].get("resources") or {}
    for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
        for resource in amounts:
            if features.is_gpu(resource):
                amounts[resource] = quantity
    if "num-gpus" in (group.get("rayStartParams") or {}):
        group["rayStartParams"]["num-gpus"] = quantity


def merge(target: MergePatch, patch: Mapping[str, Any]) -> MergePatch:
    """Merge-patch ``patch`` into ``target`` in place (nested mappings merge; other values replace)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value) if isinstance(value, Mapping) else value
    return target
