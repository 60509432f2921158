"""RayJob manifest -> the features a runtime model predicts from.

The worker count follows KubeRay's own rule (``GetWorkerGroupDesiredReplicas``):
a suspended group has none; otherwise replicas are clamped into
``[minReplicas, maxReplicas]`` (``maxReplicas`` wins when ``min > max``) and
multiplied by ``numOfHosts``. Unset fields take the CRD's defaults.
Per-worker resources come from the Ray container (the first one, as KubeRay
assumes), requests first and limits where a request is missing, as
Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import pydantic
from kubernetes.utils import parse_quantity

from rayjob_advisor import contract

# CRD defaults of ray.io/v1 WorkerGroupSpec.
DEFAULT_MIN_REPLICAS = 0
DEFAULT_MAX_REPLICAS = 2_147_483_647
DEFAULT_REPLICAS = 0
DEFAULT_NUM_OF_HOSTS = 1


class UnpredictableJob(ValueError):
    """A RayJob whose runtime cannot be predicted from its manifest, and why."""


class WorkerGroup(pydantic.BaseModel):
    """One worker group, its size rule and per-worker resources."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str
    index: int
    replicas: int
    min_replicas: int
    max_replicas: int
    num_of_hosts: int
    suspended: bool
    cpus: float | None
    gpus: float
    memory_bytes: int | None
    accelerators: dict[str, float]

    @property
    def workers(self) -> int:
        """Ray worker pods of this group as KubeRay will create them."""
        return 0 if self.suspended else self.replicas * self.num_of_hosts


class Features(pydantic.BaseModel):
    """What the models need about one RayJob, and what the planner may change."""

    model_config = pydantic.ConfigDict(frozen=True)

    workload: str | None
    dataset_size: int | None
    epochs: int | None
    batch_size: int | None
    workers: int
    cpus_per_worker: float | None
    gpus_per_worker: float
    memory_bytes_per_worker: int | None
    scale_group: WorkerGroup | None
    resize_blocker: str | None = None

    def with_replicas(self, replicas: int) -> Features:
        """The same job with the scaled group at ``replicas`` (for what-if tables and plans)."""
        if self.scale_group is None:
            raise UnpredictableJob("this RayJob has no worker group to resize")
        group = self.scale_group.model_copy(update={"replicas": replicas, "suspended": False})
        return self.model_copy(update={"scale_group": group, "workers": group.workers})

    def replica_range(self) -> tuple[int, int]:
        """The replica counts the scaled group may take, ``[minReplicas, maxReplicas]``."""
        if self.scale_group is None:
            return (1, 1)
        group = self.scale_group
        return (max(1, group.min_replicas), max(1, group.min_replicas, group.max_replicas))


def features_from_rayjob(rayjob: Mapping[str, Any], inputs: contract.AdvisorInputs) -> Features:
    """Extract features from a RayJob manifest (a dict as the API server returns it).

    ``inputs`` are its advisor annotations, parsed by ``contract.parse_inputs``.
    Raises ``UnpredictableJob`` when the manifest does not say what will run,
    ``contract.AnnotationError`` when ``scale-group`` names no group.
    """
    spec = rayjob.get("spec") or {}
    if spec.get("clusterSelector"):
        raise UnpredictableJob(
            "spec.clusterSelector runs the job on an existing RayCluster: its size is not in the "
            "RayJob, so it can be neither predicted nor resized"
        )
    cluster = spec.get("rayClusterSpec")
    if not cluster:
        raise UnpredictableJob("spec.rayClusterSpec is missing: the RayJob does not say what cluster it runs on")
    groups = tuple(
        _worker_group(group, index) for index, group in enumerate(cluster.get("workerGroupSpecs") or [])
    )
    if not groups:
        return _head_only(cluster, inputs)
    scale_group = _scale_group(groups, inputs.scale_group)
    if scale_group.workers == 0:
        reason = "is suspended" if scale_group.suspended else "has 0 replicas"
        raise UnpredictableJob(f"worker group {scale_group.name!r} {reason}: no worker to run the training on")
    blocker = None
    if cluster.get("enableInTreeAutoscaling"):
        blocker = "enableInTreeAutoscaling: the Ray autoscaler owns the replicas of every worker group"
    return Features(
        workload=inputs.workload,
        dataset_size=inputs.dataset_size,
        epochs=inputs.epochs,
        batch_size=inputs.batch_size,
        workers=scale_group.workers,
        cpus_per_worker=scale_group.cpus,
        gpus_per_worker=scale_group.gpus,
        memory_bytes_per_worker=scale_group.memory_bytes,
        scale_group=scale_group,
        resize_blocker=blocker,
    )


def _head_only(cluster: Mapping[str, Any], inputs: contract.AdvisorInputs) -> Features:
    """A cluster without worker groups trains on its head pod: one worker, nothing to resize."""
    head = cluster.get("headGroupSpec") or {}
    resources = _container_resources(head, "headGroupSpec")
    return Features(
        workload=inputs.workload,
        dataset_size=inputs.dataset_size,
        epochs=inputs.epochs,
        batch_size=inputs.batch_size,
        workers=1,
        cpus_per_worker=resources["cpus"],
        gpus_per_worker=resources["gpus"],
        memory_bytes_per_worker=resources["memory_bytes"],
        scale_group=None,
        resize_blocker="the cluster has no worker groups: the job runs on the head pod alone",
    )


def _scale_group(groups: tuple[WorkerGroup, ...], requested: str | None) -> WorkerGroup:
    """The group named by ``scale-group``; by default the GPU group, else the largest."""
    if requested is not None:
        for group in groups:
            if group.name == requested:
                return group
        names = ", ".join(repr(g.name) for g in groups)
        raise contract.AnnotationError(
            f"{contract.SCALE_GROUP}={requested!r}: no worker group of that name (groups: {names})"
        )
    gpu_groups = [g for g in groups if g.gpus > 0]
    candidates = gpu_groups or list(groups)
    return max(candidates, key=lambda g: g.workers)  # max() keeps the first of equals


def _worker_group(spec: Mapping[str, Any], index: int) -> WorkerGroup:
    where = f"workerGroupSpecs[{index}]"
    name = spec.get("groupName") or where
    min_replicas = _integer(spec, "minReplicas", DEFAULT_MIN_REPLICAS, where)
    max_replicas = _integer(spec, "maxReplicas", DEFAULT_MAX_REPLICAS, where)
    replicas = _integer(spec, "replicas", DEFAULT_REPLICAS, where)
    replicas = max_replicas if min_replicas > max_replicas else min(max(replicas, min_replicas), max_replicas)
    resources = _container_resources(spec, where)
    return WorkerGroup(
        name=name,
        index=index,
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        num_of_hosts=max(1, _integer(spec, "numOfHosts", DEFAULT_NUM_OF_HOSTS, where)),
        suspended=bool(spec.get("suspend")),
        **resources,
    )


def _integer(spec: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = spec.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnpredictableJob(f"{where}.{key}={value!r}: must be a non-negative integer")
    return value


def _container_resources(group: Mapping[str, Any], where: str) -> dict[str, Any]:
    """CPUs, GPUs (any resource key ending in ``gpu``), memory and other accelerators."""
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        raise UnpredictableJob(f"{where}.template.spec.containers is empty: no Ray container to read resources from")
    resources = containers[0].get("resources") or {}
    merged: dict[str, Any] = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    amounts = {key: _quantity(value, f"{where} container {containers[0].get('name', 0)!r} resource {key!r}")
               for key, value in merged.items()}
    gpus = sum(float(v) for k, v in amounts.items() if k.lower().endswith("gpu"))
    accelerators = {
        k: float(v) for k, v in amounts.items() if "/" in k and not k.lower().endswith("gpu")
    }
    cpus = amounts.get("cpu")
    memory = amounts.get("memory")
    return {
        "cpus": float(cpus) if cpus is not None else None,
        "gpus": gpus,
        "memory_bytes": int(memory) if memory is not None else None,
        "accelerators": accelerators,
    }


def _quantity(value: Any, what: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2``, ``1.5``, ``4Gi``), never negative."""
    try:
        amount: Decimal = parse_quantity(value)  # kubernetes leaves it unannotated
    except (ValueError, TypeError, InvalidOperation) as exc:
        raise UnpredictableJob(f"{what}: {value!r} is not a Kubernetes quantity ({exc})") from None
    if amount < 0:
        raise UnpredictableJob(f"{what}: {value!r} is negative")
    return amount
